/* A stack sampler's engine (stacks.h). */
#define _GNU_SOURCE
#include "sampling/stacks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"

/* The maintenance thread's period: short while something changes (threads found or
 * ended, the signal moved, the front end's news, a hurry, the signal chunks going
 * fast), long otherwise. On a virtual machine a timed wake-up alone costs 20 to 35 µs
 * of CPU: 50 a second are 0.15 % of a core, 10 a second 0.03 %. */
#define MAINT_FAST_NS 20000000ull
#define MAINT_SLOW_NS 100000000ull
#define BLOCKED_NS 500000000ull /* threads checked for a blocked signal every half second */

/* ------------------------------------------------------------------------- */
/* The handler                                                               */

static void on_sample(void *ctx, void *ucontext, uint32_t periods)
{
    st_sthread_t *t = ctx;
    st_stacks_t *s = t->owner;
    /* the handler's own cost in its thread's CPU time (clock_gettime is
     * async-signal-safe): a wall clock would count whatever else the CPU did
     * meanwhile (interrupts, a virtual machine's other guests) */
    uint64_t t0 = st_clock_thread_cpu_ns();
    atomic_store_explicit(&t->last_clock,
                          s->sig.clock == ST_SIGCLOCK_CPU ? t0 : st_clock_monotonic_ns(),
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&t->signals, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->periods, periods, memory_order_relaxed);
    /* More periods than the kernel's tick lets pass between two signals (a
     * quarter of a second of them): the thread blocked the signal meanwhile, and
     * where it was then is not known. */
    if (periods > s->max_periods && !t->held) {
        atomic_fetch_add_explicit(&t->delayed, periods - s->max_periods, memory_order_relaxed);
        periods = s->max_periods;
    }
    uint32_t ids[ST_EV_MAX_FRAMES];
    t->periods_now = periods;
    int n = t->th ? s->walk(t, ucontext, ids, ST_EV_MAX_FRAMES) : -1;
    if (n < 0)
        atomic_fetch_add_explicit(&t->failed, periods, memory_order_relaxed);
    else if (n == 0)
        atomic_fetch_add_explicit(&t->empty, periods, memory_order_relaxed);
    else
        st_rec_sample(t->th, ids, (uint32_t)n, s->metric, periods);
    atomic_fetch_add_explicit(&t->cpu_ns, st_clock_thread_cpu_ns() - t0, memory_order_relaxed);
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

void st_stacks_note(st_stacks_t *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->mlock);
    if (!*s->note) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->note, sizeof s->note, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->mlock);
}

/* Thread `tid`'s sampling clock now (ns): its CPU time (the kernel's per-thread
 * clock, as the timers use it) or the monotonic clock; 0 when it has ended. */
static uint64_t sampling_clock(const st_stacks_t *s, uint64_t tid)
{
    /* the thread's CPU clock exists while the thread does */
    struct timespec ts;
    if (clock_gettime(st_sigsampler_clockid((pid_t)tid, ST_SIGCLOCK_CPU), &ts) < 0)
        return 0;
    if (s->sig.clock == ST_SIGCLOCK_WALL)
        return st_clock_monotonic_ns();
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static st_sthread_t *add(st_stacks_t *s, uint64_t tid, void *ctx, uint32_t *epoch)
{
    st_sthread_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_lock(&s->lock);
    uint32_t n = atomic_load(&s->nthreads);
    if (!s->on) { /* sampling has stopped (a maintenance tick that came late) */
        pthread_mutex_unlock(&s->lock);
        free(t);
        return NULL;
    }
    if (n == ST_STACKS_MAX_THREADS) {
        pthread_mutex_unlock(&s->lock);
        free(t);
        st_stacks_note(s, "more than %d threads: the others are not sampled",
                       ST_STACKS_MAX_THREADS);
        return NULL;
    }
    t->owner = s;
    t->ctx = ctx;
    t->tid = tid;
    t->th = st_rec_register_tid(s->rec, tid);
    t->clock0 = t->clock1 = sampling_clock(s, tid);
    st_msg_t msg;
    t->slot = t->th ? st_sigsampler_arm(&s->sig, (pid_t)tid, t, &msg) : -1;
    /* kept even if not armed: its counters are read at the end */
    s->threads[n] = t;
    atomic_store(&s->nthreads, n + 1);
    if (epoch)
        *epoch = s->epoch;
    pthread_mutex_unlock(&s->lock);
    if (t->slot < 0)
        st_stacks_note(s, "a thread could not be sampled: %s", t->th ? msg.text : "out of memory");
    /* a chunk ready for each thread's first samples, the new one's included */
    st_rec_sig_threads(s->rec, n + 1);
    return t;
}

st_sthread_t *st_stacks_add(st_stacks_t *s, uint64_t tid, void *ctx)
{
    return add(s, tid, ctx, NULL);
}

st_sthread_t *st_stacks_add_own(st_stacks_t *s, uint64_t tid, void *ctx, uint32_t *epoch)
{
    return add(s, tid, ctx, epoch);
}

/* Under the lock. */
static void drop(st_stacks_t *s, st_sthread_t *t)
{
    if (t->slot >= 0) {
        t->clock1 = sampling_clock(s, t->tid);
        st_sigsampler_disarm(&s->sig, t->slot);
        t->slot = -1;
    }
}

void st_stacks_drop(st_stacks_t *s, st_sthread_t *t)
{
    pthread_mutex_lock(&s->lock);
    drop(s, t);
    pthread_mutex_unlock(&s->lock);
}

void st_stacks_drop_own(st_stacks_t *s, st_sthread_t *t, uint32_t epoch)
{
    pthread_mutex_lock(&s->lock);
    if (s->on && s->epoch == epoch)
        drop(s, t);
    pthread_mutex_unlock(&s->lock);
}

void st_stacks_pause(st_stacks_t *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = atomic_load(&s->nthreads);
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = s->threads[i];
        if (t->slot >= 0) {
            st_sigsampler_disarm(&s->sig, t->slot);
            t->slot = -1;
            t->paused = 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void st_stacks_resume(st_stacks_t *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = s->on ? atomic_load(&s->nthreads) : 0;
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = s->threads[i];
        st_msg_t msg;
        if (t->paused)
            t->slot = st_sigsampler_arm(&s->sig, (pid_t)t->tid, t, &msg); /* gone: -1 */
        t->paused = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

/* 1 when thread `tid` blocks signal `signo` (its SigBlk in /proc). */
static int blocks_signal(uint64_t tid, int signo)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%llu/status", (unsigned long long)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned long long mask = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigBlk: %llx", &mask) == 1;
    fclose(f);
    return found && signo <= 64 && (mask >> (signo - 1)) & 1;
}

/* A thread that took no sample since the last check may block the signal. */
static void check_blocked(st_stacks_t *s)
{
    pthread_mutex_lock(&s->lock);
    uint32_t n = atomic_load(&s->nthreads);
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = s->threads[i];
        uint64_t got = atomic_load(&t->signals);
        if (t->slot >= 0 && !t->blocked && !t->held && got == t->signals_seen &&
            blocks_signal(t->tid, s->sig.signo)) {
            t->blocked = 1;
            st_stacks_note(s, "thread %s blocks signal %d: it is not sampled while it does",
                           t->th ? t->th->name : "?", s->sig.signo);
        }
        t->signals_seen = got;
    }
    pthread_mutex_unlock(&s->lock);
}

int st_stacks_tasks_changed(st_stacks_t *s)
{
    /* /proc/self/task's link count is 2 + the process's threads */
    struct stat st;
    uint64_t n = stat("/proc/self/task", &st) == 0 ? (uint64_t)st.st_nlink : 0;
    int changed = n != s->ntasks_seen;
    s->ntasks_seen = n;
    return changed;
}

/* ------------------------------------------------------------------------- */
/* Start, maintenance, stop                                                  */

/* ------------------------------------------------------------------------- */
/* Samples added up while the run goes                                       */

/* Room for one more node in t; 0 or -1. */
static int tree_grow(st_idtree_t *t)
{
    if (t->n < t->cap)
        return 0;
    if (t->cap >= ST_STACKS_TREE_MAX)
        return -1;
    uint32_t cap = t->cap ? t->cap * 2 : 1024;
    uint32_t *p = realloc(t->parent, cap * sizeof *p);
    if (p)
        t->parent = p;
    uint32_t *id = realloc(t->id, cap * sizeof *id);
    if (id)
        t->id = id;
    uint64_t *w = realloc(t->periods, cap * sizeof *w);
    if (w)
        t->periods = w;
    if (!p || !id || !w)
        return -1;
    t->cap = cap;
    return 0;
}

/* The recorder's sink (st_rec_set_sink), on the maintenance thread: one sample
 * into its thread's tree. */
static void sink(void *arg, st_rec_thread_t *th, const st_ev_t *e)
{
    st_stacks_t *s = arg;
    const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
    const uint32_t *frames = (const uint32_t *)(p + 1);
    if (e->a != s->metric)
        return;
    if (th->index >= s->ntrees) {
        uint32_t n = th->index + 16;
        st_idtree_t *more = realloc(s->trees, n * sizeof *more);
        if (!more) {
            s->tree_lost++;
            return;
        }
        memset(more + s->ntrees, 0, (n - s->ntrees) * sizeof *more);
        s->trees = more;
        s->ntrees = n;
    }
    st_idtree_t *t = &s->trees[th->index];
    if (t->n == 0) { /* node 0: the root */
        if (tree_grow(t) < 0) {
            s->tree_lost++;
            return;
        }
        t->parent[0] = t->id[0] = 0;
        t->periods[0] = 0;
        t->n = 1;
    }
    uint32_t node = 0;
    for (uint64_t k = p->u1; k > 0; k--) {
        uint64_t key = (uint64_t)node << 32 | frames[k - 1];
        uint32_t child = st_u64map_get(&t->children, key);
        if (child == UINT32_MAX) {
            if (tree_grow(t) < 0 || st_u64map_put(&t->children, key, t->n, NULL) < 0) {
                s->tree_lost++;
                return;
            }
            child = t->n++;
            t->parent[child] = node;
            t->id[child] = frames[k - 1];
            t->periods[child] = 0;
        }
        node = child;
    }
    t->periods[node] += p->u0;
}

int st_stacks_fold(st_stacks_t *s, const uint32_t *first, const uint32_t *chain, uint32_t nids)
{
    st_recorder_t *rec = s->rec;
    for (uint32_t i = 0; i < s->ntrees && i < rec->nthreads; i++) {
        st_idtree_t *t = &s->trees[i];
        if (!t->n)
            continue;
        st_pathtab_t *pt = &rec->threads[i]->paths;
        uint32_t *at = malloc((size_t)t->n * sizeof *at); /* tree node -> path node */
        if (!at)
            return ST_ENOMEM;
        at[0] = 0;
        for (uint32_t k = 1; k < t->n; k++) { /* parents come before their children */
            uint32_t node = at[t->parent[k]], f = t->id[k];
            for (uint32_t j = f < nids ? first[f] : 0, end = f < nids ? first[f + 1] : 0;
                 j < end && node != ST_PATH_NONE; j++)
                node = st_pathtab_child(pt, node, chain[j]);
            at[k] = node;
            if (node != ST_PATH_NONE && t->periods[k])
                st_mcols_u64(&pt->cols, s->metric)[node] += t->periods[k];
        }
        free(at);
    }
    return st_rec_fold_chains(rec, first, chain, nids);
}

int st_stacks_start(st_stacks_t *s, st_recorder_t *rec, uint32_t metric, int signo,
                    st_sigclock_t clock, double freq, st_stacks_walk_fn walk, st_msg_t *msg)
{
    int rc = st_sigsampler_install(&s->sig, signo, clock, (uint64_t)(1e9 / freq), on_sample, msg);
    if (rc < 0)
        return rc;
    *s->note = '\0';
    s->rec = rec;
    s->metric = metric;
    s->walk = walk;
    /* a quarter of a second of periods: far more than the kernel's tick lets pass
     * between two signals of a running thread, even one sharing its CPU with many
     * (64 threads on 2 cores see 30 ms), far less than a signal kept blocked */
    s->max_periods = 4 + (uint32_t)(freq / 4.0);
    s->maint_cpu_ns = 0;
    s->hurry = 0;
    s->chunks_seen = st_ev_sig_taken(&rec->ev);
    s->tree_lost = 0;
    /* no timeline needs the samples themselves: they are added up as they come */
    if (!rec->cfg.trace)
        st_rec_set_sink(rec, sink, s);
    st_stacks_tasks_changed(s);
    pthread_mutex_lock(&s->lock);
    s->on = 1;
    s->epoch++;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* Whether the signal chunks the handlers took since the last tick, at that pace,
 * would use more than half of those kept ready within a long period. */
static int chunks_going_fast(st_stacks_t *s, uint64_t elapsed_ns)
{
    uint32_t taken = st_ev_sig_taken(&s->rec->ev), used = taken - s->chunks_seen;
    s->chunks_seen = taken;
    return elapsed_ns && (double)used * (double)MAINT_SLOW_NS / (double)elapsed_ns * 2.0 >
                             (double)st_ev_sig_spare(&s->rec->ev);
}

/* One tick's work; returns 1 when the next tick is to come soon. */
static int maintain_tick(st_stacks_t *s, uint64_t elapsed_ns)
{
    st_rec_maintain(s->rec);
    int busy = chunks_going_fast(s, elapsed_ns) || s->rec->cfg.policy == ST_EV_FLUSH;
    st_msg_t msg;
    /* under the lock: the timers move while no thread is added, dropped or stopped */
    pthread_mutex_lock(&s->lock);
    int moved = s->on ? st_sigsampler_check(&s->sig, &msg) : 0;
    pthread_mutex_unlock(&s->lock);
    if (moved != 0) {
        st_stacks_note(s, "%s", msg.text);
        busy = 1;
    }
    if (s->now_ns - s->blocked_ns >= BLOCKED_NS) {
        s->blocked_ns = s->now_ns;
        check_blocked(s);
    }
    if (s->tick && s->tick(s, ST_STACKS_TICK, s->tick_arg))
        busy = 1;
    return busy;
}

static void *maintain(void *arg)
{
    st_stacks_t *s = arg;
    if (s->tick)
        s->tick(s, ST_STACKS_BEGIN, s->tick_arg);
    uint64_t cpu0 = st_clock_thread_cpu_ns();
    int busy = 1; /* the first tick comes soon: the program is starting */
    s->now_ns = s->blocked_ns = st_clock_monotonic_ns();
    pthread_mutex_lock(&s->mlock);
    while (!s->stop) {
        uint64_t last = s->now_ns;
        struct timespec from; /* the condition's clock */
        clock_gettime(CLOCK_REALTIME, &from);
        /* a hurry shortens the wait under way (the condition is signalled) */
        while (!s->stop) {
            uint64_t ns = (uint64_t)from.tv_nsec + (busy || s->hurry ? MAINT_FAST_NS : MAINT_SLOW_NS);
            struct timespec until = {from.tv_sec + (time_t)(ns / 1000000000u),
                                     (long)(ns % 1000000000u)};
            if (pthread_cond_timedwait(&s->wake, &s->mlock, &until) == ETIMEDOUT)
                break;
        }
        if (s->stop)
            break;
        if (s->hurry)
            s->hurry--;
        pthread_mutex_unlock(&s->mlock);
        s->now_ns = st_clock_monotonic_ns();
        busy = maintain_tick(s, s->now_ns - last);
        pthread_mutex_lock(&s->mlock);
    }
    pthread_mutex_unlock(&s->mlock);
    s->maint_cpu_ns += st_clock_thread_cpu_ns() - cpu0;
    if (s->tick)
        s->tick(s, ST_STACKS_END, s->tick_arg);
    return NULL;
}

void st_stacks_maint_hurry(st_stacks_t *s)
{
    pthread_mutex_lock(&s->mlock);
    if (!s->hurry)
        pthread_cond_signal(&s->wake);
    s->hurry = ST_STACKS_HURRY_TICKS;
    pthread_mutex_unlock(&s->mlock);
}

int st_stacks_maint_start(st_stacks_t *s, st_stacks_tick_fn tick, void *arg)
{
    s->tick = tick;
    s->tick_arg = arg;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    s->stop = 0;
    int rc = pthread_create(&s->maint, NULL, maintain, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->maint_running = rc == 0;
    return rc == 0 ? 0 : ST_EIO;
}

void st_stacks_maint_stop(st_stacks_t *s)
{
    if (!s->maint_running)
        return;
    pthread_mutex_lock(&s->mlock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mlock);
    pthread_join(s->maint, NULL);
    s->maint_running = 0;
}

void st_stacks_stop(st_stacks_t *s)
{
    pthread_mutex_lock(&s->lock);
    if (!s->on) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->on = 0;
    /* the threads' sampled time, before the timers go: a thread still alive runs to
     * now, one that ended to its last signal (st_stacks_summarise) */
    uint32_t n = atomic_load(&s->nthreads);
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = s->threads[i];
        if (t->slot >= 0)
            t->clock1 = sampling_clock(s, t->tid);
    }
    st_sigsampler_uninstall(&s->sig); /* no handler runs after this */
    pthread_mutex_unlock(&s->lock);
}

void st_stacks_summarise(st_stacks_t *s, st_model_stacks_t *st, uint64_t unnamed)
{
    memset(st, 0, sizeof *st);
    st->freq = 1e9 / (double)s->sig.period_ns;
    st->clock = s->sig.clock == ST_SIGCLOCK_WALL ? "wall" : "cpu";
    uint32_t n = atomic_load(&s->nthreads);
    st->threads = n;
    uint64_t cpu_ns = 0, clock_ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = s->threads[i];
        /* the effective rate of threads sampled for at least 0.1 s of their clock:
         * until the end, or until the last signal of a thread that ended */
        uint64_t last = atomic_load(&t->last_clock);
        if (last > t->clock1)
            t->clock1 = last;
        double secs = (double)(t->clock1 - t->clock0) * 1e-9;
        if (t->clock1 > t->clock0 && secs >= 0.1) {
            double r = (double)atomic_load(&t->signals) / secs;
            double p = (double)atomic_load(&t->periods) / secs;
            if (!st->rated++ || r < st->rate_min)
                st->rate_min = r;
            if (r > st->rate_max)
                st->rate_max = r;
            if (st->rated == 1 || p < st->prate_min)
                st->prate_min = p;
            if (p > st->prate_max)
                st->prate_max = p;
        }
        if (t->clock1 > t->clock0)
            clock_ns += t->clock1 - t->clock0;
        st->signals += atomic_load(&t->signals);
        st->periods += atomic_load(&t->periods);
        st->unreadable += atomic_load(&t->failed);
        st->no_python += atomic_load(&t->empty);
        st->delayed += atomic_load(&t->delayed);
        cpu_ns += atomic_load(&t->cpu_ns);
    }
    /* the threads' time together: 64 threads of 6 ms at 100 Hz promise 38 periods,
     * though no thread's clock reaches one */
    st->promised = clock_ns / s->sig.period_ns;
    st_recorder_t *rec = s->rec;
    st->lost = st_rec_samples_lost(rec) + s->tree_lost;
    /* what the fold left on the roots: samples with no frame the filters keep */
    for (uint32_t i = 0; i < rec->nthreads; i++)
        st->left_out += st_mcols_u64(&rec->threads[i]->paths.cols, rec->m_samples)[0];
    st->unnamed = unnamed;
    st->self_cpu_s = (double)(cpu_ns + s->maint_cpu_ns) * 1e-9;
    st->note = *s->note ? s->note : NULL;
}

void st_stacks_end(st_stacks_t *s)
{
    for (uint32_t i = 0; i < s->ntrees; i++) {
        st_u64map_free(&s->trees[i].children);
        free(s->trees[i].parent);
        free(s->trees[i].id);
        free(s->trees[i].periods);
    }
    free(s->trees);
    s->trees = NULL;
    s->ntrees = 0;
    if (s->rec)
        st_rec_set_sink(s->rec, NULL, NULL);
    uint32_t n = atomic_load(&s->nthreads);
    for (uint32_t i = 0; i < n; i++)
        free(s->threads[i]);
    atomic_store(&s->nthreads, 0);
}
