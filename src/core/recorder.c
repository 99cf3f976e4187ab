#include "core/recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/syscall.h>

#include "base/err.h"

__thread st_rec_tls_t st_rec_tls __attribute__((tls_model("initial-exec")));

/* Recorder ids start at 1, so that a thread's zeroed pointer matches none. */
static _Atomic uint64_t next_id = 1;

static void finish_locked(st_rec_thread_t *th);

/* The pthread key's destructor: the thread has exited, maybe without its front end
 * knowing (or after it finished the thread itself: then nothing more is done). */
static void thread_exit(void *arg)
{
    st_rec_thread_t *th = arg;
    pthread_mutex_lock(&th->rec->lock);
    if (!th->rec->sealed && !th->finished)
        finish_locked(th);
    pthread_mutex_unlock(&th->rec->lock);
    if (st_rec_tls.th == th) {
        st_rec_tls.th = NULL;
        st_rec_tls.rec_id = 0;
    }
}

int st_rec_init(st_recorder_t *r, const st_rec_config_t *cfg)
{
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->id = atomic_fetch_add(&next_id, 1);
    atomic_store(&r->sample_lost, 0);
    st_metrics_init(&r->metrics);
    uint32_t id;
    int err = st_metrics_add(&r->metrics, "wall_clock", "ticks", "wall-clock time of calls",
                             ST_METRIC_TIMER, &id);
    if (!err && cfg->cpu)
        err = st_metrics_add(&r->metrics, "cpu_clock", "ns", "thread CPU time of calls",
                             ST_METRIC_TIMER, &id);
    if (!err)
        err = st_metrics_add(&r->metrics, "alloc_bytes", "bytes", "bytes allocated",
                             ST_METRIC_BYTES, &r->m_alloc_bytes);
    if (!err)
        err = st_metrics_add(&r->metrics, "allocs", "allocations", "allocations made",
                             ST_METRIC_COUNT, &r->m_allocs);
    if (!err)
        err = st_metrics_add(&r->metrics, "samples", "samples", "stack samples taken",
                             ST_METRIC_SAMPLES, &r->m_samples);
    if (err)
        goto fail_metrics;
    if (st_ev_shared_init(&r->ev, cfg->budget, cfg->policy,
                          cfg->max_depth ? cfg->max_depth : UINT32_MAX - 1, cfg->spill_dir,
                          cfg->sig_chunks) < 0)
        goto fail_metrics;
    if (pthread_mutex_init(&r->lock, NULL) != 0)
        goto fail_ev;
    if (pthread_key_create(&r->key, thread_exit) != 0)
        goto fail_lock;
    return 0;
fail_lock:
    pthread_mutex_destroy(&r->lock);
fail_ev:
    st_ev_shared_free(&r->ev);
fail_metrics:
    st_metrics_free(&r->metrics);
    return ST_ENOMEM;
}

/* The thread's counters are closed (lock held, or no thread records any more). */
static void counters_close(st_rec_thread_t *th)
{
    if (th->counters)
        th->rec->cfg.counters->close(th->counters);
    th->counters = NULL;
    th->ncounters = 0;
}

static void thread_free(st_rec_thread_t *th)
{
    counters_close(th);
    free(th->stack);
    st_pathtab_free(&th->paths);
    st_evbuf_free(&th->ev);
    free(th);
}

void st_rec_free(st_recorder_t *r)
{
    pthread_key_delete(r->key);
    if (st_rec_tls.rec_id == r->id) {
        st_rec_tls.rec_id = 0;
        st_rec_tls.th = NULL;
    }
    for (uint32_t i = 0; i < r->nthreads; i++)
        thread_free(r->threads[i]);
    free(r->threads);
    free(r->tracks);
    st_ev_shared_free(&r->ev);
    pthread_mutex_destroy(&r->lock);
    st_metrics_free(&r->metrics);
    memset(r, 0, sizeof *r);
}

int st_rec_add_metric(st_recorder_t *r, const char *name, const char *unit, const char *desc,
                      st_metric_kind_t kind, uint32_t *id)
{
    pthread_mutex_lock(&r->lock);
    int err = r->started ? ST_EINVAL : st_metrics_add(&r->metrics, name, unit, desc, kind, id);
    pthread_mutex_unlock(&r->lock);
    return err;
}

int st_rec_add_track(st_recorder_t *r, st_track_kind_t kind, const char *name, uint32_t domain,
                     double scale, int64_t offset, uint32_t *id)
{
    int err = 0;
    pthread_mutex_lock(&r->lock);
    if (r->ntracks == r->captracks) {
        uint32_t cap = r->captracks ? r->captracks * 2 : 8;
        st_rec_track_t *t = realloc(r->tracks, cap * sizeof *t);
        if (!t) {
            err = ST_ENOMEM;
            goto out;
        }
        r->tracks = t;
        r->captracks = cap;
    }
    st_rec_track_t *t = &r->tracks[r->ntracks];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    t->domain = domain;
    t->scale = domain == ST_DOMAIN_HOST ? 1.0 : scale;
    t->offset = domain == ST_DOMAIN_HOST ? 0 : offset;
    t->metric = ST_METRIC_NONE;
    *id = r->ntracks++;
out:
    pthread_mutex_unlock(&r->lock);
    return err;
}

/* A new thread state for thread `tid` (lock held). */
static st_rec_thread_t *thread_new(st_recorder_t *r, uint64_t tid)
{
    if (r->nthreads == r->capthreads) {
        uint32_t cap = r->capthreads ? r->capthreads * 2 : 8;
        st_rec_thread_t **t = realloc(r->threads, cap * sizeof *t);
        if (!t)
            return NULL;
        r->threads = t;
        r->capthreads = cap;
    }
    st_rec_thread_t *th = calloc(1, sizeof *th);
    if (!th)
        return NULL;
    th->capstack = 64;
    th->stack = malloc(th->capstack * sizeof *th->stack);
    if (!th->stack)
        goto fail;
    if (st_pathtab_init(&th->paths, &r->metrics, r->cfg.max_nodes) < 0)
        goto fail_stack;
    st_evbuf_init(&th->ev, &r->ev);
    th->ntimers = r->cfg.cpu ? 2 : 1;
    th->tracing = r->cfg.trace;
    th->wall = r->cfg.wall;
    th->tsc = !th->wall && st_clock_kind() == ST_CLOCK_TSC;
    th->cpu_clock = r->cfg.cpu_clock;
    th->clock_ctx = r->cfg.clock_ctx;
    th->cpu_every = r->cfg.cpu_every;
    th->cpu_wall = ST_REC_CPU_NEVER;
    th->rec = r;
    th->index = r->nthreads;
    th->tid = tid;
    snprintf(th->name, sizeof th->name, "Thread-%llu", (unsigned long long)th->tid);
    r->threads[r->nthreads++] = th;
    r->started = 1;
    return th;
fail_stack:
    free(th->stack);
fail:
    free(th);
    return NULL;
}

/* Thread `tid`'s state, made if it has none (lock held): a thread that recorded
 * before (for another recorder in between), or that another thread registered
 * (st_rec_register_tid), keeps its state. */
static st_rec_thread_t *thread_of(st_recorder_t *r, uint64_t tid)
{
    for (uint32_t i = 0; i < r->nthreads; i++)
        if (r->threads[i]->tid == tid && !r->threads[i]->finished)
            return r->threads[i];
    return thread_new(r, tid);
}

st_rec_thread_t *st_rec_register_tid(st_recorder_t *r, uint64_t tid)
{
    pthread_mutex_lock(&r->lock);
    st_rec_thread_t *th = r->sealed ? NULL : thread_of(r, tid);
    pthread_mutex_unlock(&r->lock);
    return th;
}

__attribute__((noinline, cold)) st_rec_thread_t *st_rec_register(st_recorder_t *r)
{
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    pthread_mutex_lock(&r->lock);
    st_rec_thread_t *th = thread_of(r, tid);
    pthread_mutex_unlock(&r->lock);
    if (!th)
        return NULL;
    const st_rec_counters_t *c = r->cfg.counters;
    if (c && c->n && !th->counters && !th->finished &&
        (th->counters = c->open(c->ctx)) != NULL) {
        if (c->read(th->counters, th->counted) == 0) {
            th->ncounters = c->n;
        } else {
            c->close(th->counters);
            th->counters = NULL;
        }
    }
    pthread_setspecific(r->key, th);
    /* the pointer is published last: a handler sees no state or a whole one */
    st_rec_tls.th = th;
    atomic_signal_fence(memory_order_seq_cst);
    st_rec_tls.rec_id = r->id;
    return th;
}

/* Lock held: registrations read `finished`, and st_rec_seal waits for it. */
static void finish_locked(st_rec_thread_t *th)
{
    th->finished = 1;
    counters_close(th);
    st_evbuf_finish(&th->ev);
    /* what only recording needs goes back too: the stack when no call is open,
     * the paths' index and spare capacity (made again if the thread records on) */
    if (th->depth == 0 && th->unpushed == 0) {
        free(th->stack);
        th->stack = NULL;
        th->capstack = 0;
    }
    st_pathtab_compact(&th->paths);
}

void st_rec_thread_finish(st_rec_thread_t *th)
{
    pthread_mutex_lock(&th->rec->lock);
    if (!th->rec->sealed)
        finish_locked(th);
    pthread_mutex_unlock(&th->rec->lock);
}

void st_rec_seal(st_recorder_t *r)
{
    pthread_mutex_lock(&r->lock);
    r->sealed = 1;
    pthread_mutex_unlock(&r->lock);
}

void st_rec_thread_name(st_rec_thread_t *th, const char *name)
{
    snprintf(th->name, sizeof th->name, "%s", name ? name : "");
}

void st_rec_thread_name_kernel(st_rec_thread_t *th)
{
    char path[64], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)th->tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(name, sizeof name, f)) {
        name[strcspn(name, "\n")] = '\0';
        if (*name)
            st_rec_thread_name(th, name);
    }
    fclose(f);
}

void st_rec_count(st_rec_thread_t *th)
{
    const st_rec_counters_t *c = th->rec->cfg.counters;
    uint64_t now[ST_REC_MAX_COUNTERS];
    if (c->read(th->counters, now) < 0)
        return;
    /* a call left out of the tree (node limit) counts as its recorded caller */
    uint32_t node = 0, d = th->depth;
    while (d > 0 && th->stack[d - 1].node == ST_PATH_NONE)
        d--;
    if (d > 0)
        node = th->stack[d - 1].node;
    for (uint32_t i = 0; i < th->ncounters; i++) {
        uint64_t *cell = &st_mcols_u64(&th->paths.cols, c->metric[i])[node];
        uint64_t more = now[i] > th->counted[i] ? now[i] - th->counted[i] : 0;
        *cell = more > ST_COUNT_MAX - *cell ? ST_COUNT_MAX : *cell + more;
        th->counted[i] = now[i];
    }
}

int st_rec_grow_stack(st_rec_thread_t *th)
{
    if (th->failed)
        return ST_ENOMEM;
    uint32_t cap = th->capstack ? th->capstack * 2 : 64;
    st_rec_frame_t *s = realloc(th->stack, (size_t)cap * sizeof *s);
    if (!s) {
        th->failed = 1;
        return ST_ENOMEM;
    }
    th->stack = s;
    th->capstack = cap;
    return 0;
}

int st_rec_sample(st_rec_thread_t *th, const uint32_t *stack, uint32_t n, uint32_t metric,
                  uint64_t weight)
{
    if (n > ST_EV_MAX_FRAMES)
        n = ST_EV_MAX_FRAMES;
    st_ev_t *e = st_evbuf_sig_reserve(&th->ev, ST_EV_SAMPLE_EXTRA(n));
    if (!e)
        return 0;
    e->ticks = st_rec_wall(th);
    e->a = metric;
    e->kind = ST_EV_SAMPLE;
    st_ev_pair_t *p = (st_ev_pair_t *)(e + 1);
    p->u0 = weight;
    p->u1 = n;
    uint32_t *frames = (uint32_t *)(p + 1);
    for (uint32_t i = 0; i < n; i++)
        frames[i] = stack[i];
    for (uint32_t i = n; i % 4; i++)
        frames[i] = 0;
    st_evbuf_sig_commit(&th->ev, e);
    return 1;
}

/* The innermost recorded node (the root when no call is open). */
static uint32_t top_node(const st_rec_thread_t *th)
{
    for (uint32_t d = th->depth; d > 0; d--)
        if (th->stack[d - 1].node != ST_PATH_NONE)
            return th->stack[d - 1].node;
    return 0;
}

/* A main-lane event of `kind` with one payload word, stamped now. */
static st_ev_pair_t *event1(st_rec_thread_t *th, uint16_t kind, uint32_t a, uint64_t ticks)
{
    st_ev_t *e = st_evbuf_reserve(&th->ev, 1);
    if (!e)
        return NULL;
    e->ticks = ticks;
    e->a = a;
    e->kind = kind;
    return (st_ev_pair_t *)(e + 1);
}

void st_rec_alloc(st_rec_thread_t *th, uint32_t site, uint64_t addr, uint64_t bytes)
{
    uint32_t node = top_node(th);
    const st_recorder_t *r = th->rec;
    st_mcols_u64(&th->paths.cols, r->m_alloc_bytes)[node] += bytes;
    st_mcols_u64(&th->paths.cols, r->m_allocs)[node] += 1;
    if (!th->tracing)
        return;
    st_ev_pair_t *p = event1(th, ST_EV_ALLOC, site, st_rec_wall(th));
    if (p) {
        p->u0 = addr;
        p->u1 = bytes;
    }
}

void st_rec_free_addr(st_rec_thread_t *th, uint64_t addr)
{
    if (!th->tracing)
        return;
    st_ev_pair_t *p = event1(th, ST_EV_FREE, 0, st_rec_wall(th));
    if (p) {
        p->u0 = addr;
        p->u1 = 0;
    }
}

void st_rec_counter(st_rec_thread_t *th, uint32_t track, double v)
{
    if (!th->tracing)
        return;
    st_ev_pair_t *p = event1(th, ST_EV_COUNTER, track, st_rec_wall(th));
    if (p) {
        memcpy(&p->u0, &v, sizeof v);
        p->u1 = 0;
    }
}

void st_rec_complete(st_rec_thread_t *th, uint32_t track, uint64_t t0, uint64_t t1,
                     uint32_t label, uint32_t flow)
{
    if (!th->tracing)
        return;
    st_ev_t *e = st_evbuf_reserve(&th->ev, 1);
    if (!e)
        return;
    e->ticks = t0;
    e->a = track;
    e->kind = ST_EV_COMPLETE;
    st_ev_complete_t *c = (st_ev_complete_t *)(e + 1);
    c->t1 = t1;
    c->label = label;
    c->flow = flow;
}

void st_rec_instant(st_rec_thread_t *th, uint32_t label)
{
    if (!th->tracing)
        return;
    st_ev_t *e = st_evbuf_reserve(&th->ev, 0);
    if (!e)
        return;
    e->ticks = st_rec_wall(th);
    e->a = label;
    e->kind = ST_EV_INSTANT;
}

void st_rec_flow(st_rec_thread_t *th, uint64_t id, uint32_t label)
{
    if (!th->tracing)
        return;
    st_ev_pair_t *p = event1(th, ST_EV_FLOW, label, st_rec_wall(th));
    if (p) {
        p->u0 = id;
        p->u1 = 0;
    }
}

void st_rec_set_sink(st_recorder_t *r, void (*fn)(void *arg, st_rec_thread_t *th, const st_ev_t *e),
                     void *arg)
{
    r->sink = fn;
    r->sink_arg = arg;
}

typedef struct {
    st_recorder_t *r;
    st_rec_thread_t *th;
} sink_ctx_t;

/* st_ev_consume's callback: each event of a chunk to the sink. */
static void sink_chunk(void *arg, const st_ev_t *w, uint32_t n)
{
    sink_ctx_t *c = arg;
    for (uint32_t i = 0; i < n; i += 1u + w[i].nextra)
        if (w[i].kind == ST_EV_SAMPLE)
            c->r->sink(c->r->sink_arg, c->th, &w[i]);
}

/* Calls fn on every thread state: looked up under the lock (a registration may
 * move the array; the states themselves live until st_rec_free), fn outside it. */
static void each_thread(st_recorder_t *r, void (*fn)(st_recorder_t *r, st_rec_thread_t *th))
{
    for (uint32_t i = 0;; i++) {
        pthread_mutex_lock(&r->lock);
        st_rec_thread_t *th = i < r->nthreads ? r->threads[i] : NULL;
        pthread_mutex_unlock(&r->lock);
        if (!th)
            break;
        fn(r, th);
    }
}

static void consume(st_recorder_t *r, st_rec_thread_t *th)
{
    sink_ctx_t c = {r, th};
    st_ev_consume(&th->ev, sink_chunk, &c);
}

static void drain(st_recorder_t *r, st_rec_thread_t *th)
{
    (void)r;
    st_ev_drain(&th->ev);
}

void st_rec_maintain(st_recorder_t *r)
{
    st_ev_refill(&r->ev);
    if (r->sink) {
        each_thread(r, consume);
        st_ev_refill(&r->ev);
    }
    if (r->ev.policy != ST_EV_FLUSH)
        return;
    each_thread(r, drain);
    st_ev_refill(&r->ev);
}

void st_rec_sig_threads(st_recorder_t *r, uint32_t nthreads)
{
    if (r->cfg.sig_chunks)
        st_ev_reserve(&r->ev, r->cfg.sig_chunks + nthreads);
}

__attribute__((noinline)) uint64_t st_rec_cpu_read(st_rec_thread_t *th, uint64_t wall)
{
    uint64_t cpu = st_rec_cpu(th);
    /* the rate in 1/65536ths of a CPU ns per tick, at most 256 ns a tick (no tick is
     * that long), so that dt * rate stays below 2^64 for any dt it multiplies (below
     * cpu_every ticks: a second is under 2^34 ticks) */
    if (th->cpu_wall != ST_REC_CPU_NEVER && wall > th->cpu_wall) {
        double rate = cpu > th->cpu_last ? (double)(cpu - th->cpu_last) * 65536.0 /
                                               (double)(wall - th->cpu_wall)
                                         : 0.0;
        th->cpu_rate = rate < (double)(1u << 24) ? (uint64_t)rate : 1u << 24;
    }
    th->cpu_wall = wall;
    th->cpu_last = cpu;
    return cpu;
}

void st_rec_close_all(st_recorder_t *r)
{
    st_rec_thread_t *self = st_rec_self_sig(r);
    for (uint32_t i = 0; i < r->nthreads; i++) {
        st_rec_thread_t *th = r->threads[i];
        th->unpushed = 0;
        if (!th->depth)
            continue;
        /* the caller's clocks, as the calls of every thread end now */
        const st_rec_thread_t *clk = self ? self : th;
        uint64_t wall = st_rec_wall(clk);
        uint64_t cpu = th->ntimers == 2 ? st_rec_cpu(clk) : 0;
        /* the counters of the calling thread: the rest since their last reading */
        if (th == self && th->ncounters)
            st_rec_count(th);
        while (th->depth)
            st_rec_close_top(th, wall, cpu, th->tracing);
    }
}

/* Folds the samples; an id stands for labels[first[id] .. first[id + 1]) with
 * `first`, for map[id] with `map` alone, for itself with neither. */
static int fold(st_recorder_t *r, const uint32_t *map, const uint32_t *first, uint32_t nids)
{
    int err = 0;
    for (uint32_t i = 0; i < r->nthreads; i++) {
        st_rec_thread_t *th = r->threads[i];
        st_ev_reader_t *rd = malloc(sizeof *rd);
        if (!rd)
            return ST_ENOMEM;
        st_ev_reader_init(rd, &th->ev, 1);
        const st_ev_t *e;
        while ((e = st_ev_next(rd))) {
            if (e->kind != ST_EV_SAMPLE)
                continue;
            const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
            const uint32_t *frames = (const uint32_t *)(p + 1);
            const st_metric_def_t *def = st_metrics_get(&r->metrics, e->a);
            if (!def || def->kind != ST_METRIC_SAMPLES)
                continue;
            uint32_t node = 0;
            for (uint64_t k = p->u1; k > 0 && node != ST_PATH_NONE; k--) {
                uint32_t f = frames[k - 1];
                if (first) {
                    for (uint32_t j = f < nids ? first[f] : 0, end = f < nids ? first[f + 1] : 0;
                         j < end && node != ST_PATH_NONE; j++)
                        node = st_pathtab_child(&th->paths, node, map[j]);
                    continue;
                }
                uint32_t label = !map ? f : f < nids ? map[f] : ST_PATH_NONE;
                if (label != ST_PATH_NONE)
                    node = st_pathtab_child(&th->paths, node, label);
            }
            if (node != ST_PATH_NONE)
                st_mcols_u64(&th->paths.cols, e->a)[node] += p->u0;
        }
        if (rd->error)
            err = ST_EIO;
        free(rd);
    }
    return err;
}

int st_rec_fold_samples(st_recorder_t *r, const uint32_t *map, uint32_t nmap)
{
    return fold(r, map, NULL, nmap);
}

int st_rec_fold_chains(st_recorder_t *r, const uint32_t *first, const uint32_t *labels,
                       uint32_t nids)
{
    return fold(r, labels, first, nids);
}

uint64_t st_rec_samples_lost(st_recorder_t *r)
{
    uint64_t n = atomic_load(&r->sample_lost);
    for (uint32_t i = 0; i < r->nthreads; i++)
        n += atomic_load(&r->threads[i]->ev.lost);
    return n;
}
