/* Unit tests of the engine's recorder and its parts: metrics (Welford/Chan), the
 * path table, typed events (budget, fill policies, spill) and the recorder itself,
 * with a fake clock for exact figures, from 4 plain pthreads at once (no GIL), and
 * from a 1 kHz timer's signal handler writing samples while the thread enters and
 * exits calls. Prints "N passed, N failed"; exits non-zero on any failure. Also
 * built with ThreadSanitizer (make test-tsan) and ASan/UBSan (make test-asan). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "core/events.h"
#include "core/intern.h"
#include "core/metrics.h"
#include "core/pathtab.h"
#include "core/recorder.h"

#include "check.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* ------------------------------------------------------------------------- */
/* A fake clock: the test sets the time.                                     */

typedef struct {
    uint64_t wall, cpu;
    int cpu_reads;
} fake_clock_t;

static uint64_t fake_wall(void *ctx) { return ((fake_clock_t *)ctx)->wall; }
static uint64_t fake_cpu(void *ctx)
{
    ((fake_clock_t *)ctx)->cpu_reads++;
    return ((fake_clock_t *)ctx)->cpu;
}

static st_rec_config_t config(int trace, uint64_t budget, int policy)
{
    st_rec_config_t c;
    memset(&c, 0, sizeof c);
    c.trace = trace;
    c.budget = budget;
    c.policy = policy;
    c.max_depth = 512;
    return c;
}

static const st_tstat_t *wall_of(const st_rec_thread_t *th, uint32_t node)
{
    return &st_mcols_timer(&th->paths.cols, ST_REC_WALL)[node];
}

/* The node under `parent` labelled `label` (without making one), or ST_PATH_NONE. */
static uint32_t child(const st_pathtab_t *t, uint32_t parent, uint32_t label)
{
    for (uint32_t c = t->nodes[parent].first_child; c != ST_PATH_NONE; c = t->nodes[c].next_sibling)
        if (t->nodes[c].label == label)
            return c;
    return ST_PATH_NONE;
}

/* ------------------------------------------------------------------------- */

static void test_metrics_registry(void)
{
    st_metrics_t m;
    st_metrics_init(&m);
    uint32_t a, b, c;
    CHECK(st_metrics_add(&m, "wall", "ticks", "wall time", ST_METRIC_TIMER, &a) == 0);
    CHECK(st_metrics_add(&m, "bytes", "bytes", "allocated", ST_METRIC_BYTES, &b) == 0);
    CHECK(a == 0 && b == 1);
    CHECK(st_metrics_add(&m, "wall", "ticks", "again", ST_METRIC_TIMER, &c) == 0 && c == 0);
    CHECK(st_metrics_add(&m, "wall", "x", "other kind", ST_METRIC_COUNT, &c) == ST_EINVAL);
    CHECK(st_metrics_add(&m, "", "x", "", ST_METRIC_COUNT, &c) == ST_EINVAL);
    CHECK(st_metrics_find(&m, "bytes") == 1);
    CHECK(st_metrics_find(&m, "nope") == ST_METRIC_NONE);
    CHECK_STR(st_metrics_get(&m, 1)->unit, "bytes");
    uint32_t g;
    CHECK(st_metrics_add(&m, "level", "B", "a gauge", ST_METRIC_GAUGE, &g) == 0);

    /* columns: cells of every kind, empty, kept across growth */
    st_mcols_t cols;
    CHECK(st_mcols_init(&cols, &m, 2) == 0);
    CHECK(cols.ncols == 3 && cols.cap == 2);
    CHECK(st_mcols_timer(&cols, a)[1].min == UINT64_MAX);
    st_tstat_add(&st_mcols_timer(&cols, a)[1], 7, 0);
    st_mcols_u64(&cols, b)[1] = 99;
    st_gauge_set(&st_mcols_gauge(&cols, g)[1], 2.5);
    st_gauge_set(&st_mcols_gauge(&cols, g)[1], -1.0);
    CHECK(st_mcols_reserve(&cols, 100) == 0 && cols.cap >= 100);
    CHECK(st_mcols_timer(&cols, a)[1].count == 1 && st_mcols_timer(&cols, a)[1].sum == 7);
    CHECK(st_mcols_timer(&cols, a)[99].min == UINT64_MAX && st_mcols_timer(&cols, a)[99].count == 0);
    CHECK(st_mcols_u64(&cols, b)[1] == 99 && st_mcols_u64(&cols, b)[99] == 0);
    const st_gauge_t *gg = &st_mcols_gauge(&cols, g)[1];
    CHECK(gg->n == 2 && gg->last == -1.0 && gg->min == -1.0 && gg->max == 2.5);
    st_mcols_free(&cols);
    st_metrics_free(&m);
}

/* Welford in batches, Chan merges: equal to the two-pass figures. */
static void test_tstat(void)
{
    st_tstat_t s, a, b;
    st_tstat_init(&s);
    st_tstat_init(&a);
    st_tstat_init(&b);
    double sum = 0;
    const int n = 1000; /* crosses many ST_BATCH folds, and a partial batch */
    for (int i = 0; i < n; i++) {
        uint64_t v = 1000 + (uint64_t)((i * 7919) % 503);
        sum += (double)v;
        st_tstat_add(&s, v, v / 4);
        st_tstat_add(i < 300 ? &a : &b, v, v / 4);
    }
    double mean_ref = sum / n, m2_ref = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)(1000 + (uint64_t)((i * 7919) % 503)) - mean_ref;
        m2_ref += d * d;
    }
    double mean, var;
    st_tstat_stats(&s, &mean, &var);
    CHECK(s.count == (uint64_t)n && s.min == 1000 && s.max == 1502);
    CHECK(fabs(mean - mean_ref) < 1e-9 && fabs(var - m2_ref / n) < 1e-6);
    int sat = 0;
    st_tstat_merge(&a, &b, &sat);
    double mean2, var2;
    st_tstat_stats(&a, &mean2, &var2);
    CHECK(!sat && a.count == s.count && a.sum == s.sum && a.self == s.self);
    CHECK(a.min == s.min && a.max == s.max);
    CHECK(fabs(mean2 - mean) < 1e-9 && fabs(var2 - var) < 1e-6);
    /* merging saturates rather than wraps */
    st_tstat_t big;
    st_tstat_init(&big);
    big.count = big.merged = ST_COUNT_MAX;
    big.sum = big.merged_sum = ST_COUNT_MAX;
    st_tstat_merge(&big, &s, &sat);
    CHECK(sat && big.count == ST_COUNT_MAX && big.sum == ST_COUNT_MAX);
}

static void test_pathtab(void)
{
    st_metrics_t m;
    st_metrics_init(&m);
    uint32_t id;
    st_metrics_add(&m, "wall", "ticks", "", ST_METRIC_TIMER, &id);
    st_pathtab_t t;
    CHECK(st_pathtab_init(&t, &m, 4) == 0);
    uint32_t a = st_pathtab_child(&t, 0, 10), b = st_pathtab_child(&t, a, 11);
    CHECK(a == 1 && b == 2 && t.nnodes == 3);
    CHECK(st_pathtab_child(&t, 0, 10) == a);  /* the hint */
    CHECK(st_pathtab_child(&t, 0, 12) == 3);  /* the map, a new node */
    CHECK(st_pathtab_child(&t, 0, 10) == a);  /* the map again */
    CHECK(st_pathtab_child(&t, 0, 13) == ST_PATH_NONE && t.dropped == 1); /* max_nodes */
    CHECK(st_pathtab_child(&t, ST_PATH_NONE, 1) == ST_PATH_NONE && t.dropped == 2); /* under it */
    CHECK(st_pathtab_child(&t, a, ST_PATH_NONE) == ST_PATH_NONE && t.dropped == 3); /* no label */
    CHECK(t.nodes[b].depth == 1 && t.nodes[b].parent == a);
    CHECK(t.nodes[0].first_child == a && t.nodes[a].next_sibling == 3);
    st_pathtab_free(&t);
    st_metrics_free(&m);
}

/* enter/exit with a fake clock: every figure exact, tree and timeline paired. */
static void test_fake_clock(void)
{
    fake_clock_t clk = {0, 0, 0};
    st_rec_config_t c = config(1, 1 << 20, ST_EV_DISCARD);
    c.cpu = 1;
    c.wall = fake_wall;
    c.cpu_clock = fake_cpu;
    c.clock_ctx = &clk;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    CHECK(th != NULL && st_rec_self(&r) == th && th->index == 0);
    /* main(100..300) calls f(150..190) twice-nested g(160..170); then f(200..250) */
    clk.wall = 100, clk.cpu = 10;
    st_rec_enter(th, 1, NULL);
    clk.wall = 150, clk.cpu = 15;
    st_rec_enter(th, 2, NULL);
    clk.wall = 160, clk.cpu = 16;
    st_rec_enter(th, 3, NULL);
    clk.wall = 170, clk.cpu = 17;
    CHECK(st_rec_exit(th) == 1);
    clk.wall = 190, clk.cpu = 19;
    CHECK(st_rec_exit(th) == 1);
    clk.wall = 200, clk.cpu = 20;
    st_rec_enter(th, 2, NULL);
    clk.wall = 250, clk.cpu = 22;
    st_rec_exit(th);
    clk.wall = 300, clk.cpu = 30;
    st_rec_exit(th);
    CHECK(st_rec_exit(th) == 0); /* an exit without its enter is ignored */
    uint32_t main_ = child(&th->paths, 0, 1), f = child(&th->paths, main_, 2),
             g = child(&th->paths, f, 3);
    CHECK(main_ == 1 && f == 2 && g == 3 && th->paths.nnodes == 4);
    const st_tstat_t *sm = wall_of(th, main_), *sf = wall_of(th, f), *sg = wall_of(th, g);
    CHECK(sm->count == 1 && sm->sum == 200 && sm->self == 110);
    CHECK(sf->count == 2 && sf->sum == 90 && sf->self == 80 && sf->min == 40 && sf->max == 50);
    CHECK(sg->count == 1 && sg->sum == 10 && sg->self == 10);
    double mean, var;
    st_tstat_stats(sf, &mean, &var);
    CHECK(mean == 45.0 && var == 25.0);
    const st_tstat_t *cm = &st_mcols_timer(&th->paths.cols, ST_REC_CPU)[main_];
    const st_tstat_t *cf = &st_mcols_timer(&th->paths.cols, ST_REC_CPU)[f];
    CHECK(cm->sum == 20 && cm->self == 14 && cf->sum == 6 && cf->self == 5);

    /* the timeline: begins stamped with the same ticks, ends paired */
    static const struct {
        uint16_t kind;
        uint32_t a;
        uint64_t t;
    } want[] = {{ST_EV_BEGIN, 1, 100}, {ST_EV_BEGIN, 2, 150}, {ST_EV_BEGIN, 3, 160},
                {ST_EV_END, 0, 170},   {ST_EV_END, 0, 190},   {ST_EV_BEGIN, 2, 200},
                {ST_EV_END, 0, 250},   {ST_EV_END, 0, 300}};
    st_ev_reader_t rd;
    st_ev_reader_init(&rd, &th->ev, 0);
    const st_ev_t *e;
    size_t i = 0;
    int same = 1;
    while ((e = st_ev_next(&rd))) {
        if (i >= sizeof want / sizeof want[0] || e->kind != want[i].kind || e->a != want[i].a ||
            e->ticks != want[i].t || e->nextra != 0)
            same = 0;
        i++;
    }
    CHECK(same && i == 8 && !rd.error);
    CHECK(sizeof(st_ev_t) == 16 && st_evbuf_words(&th->ev, 0) == 8); /* 16 bytes a begin/end */

    /* keys: an exit with another key leaves the call open */
    int k1, k2;
    clk.wall = 400;
    st_rec_enter(th, 4, &k1);
    CHECK(st_rec_top_key(th) == &k1);
    CHECK(st_rec_exit_key_t(th, &k2, 1) == 0 && th->depth == 1);
    clk.wall = 410;
    CHECK(st_rec_exit_key_t(th, &k1, 1) == 1 && th->depth == 0);
    CHECK(wall_of(th, child(&th->paths, 0, 4))->sum == 10);

    /* close_all ends open calls at the caller's now, innermost first */
    clk.wall = 500;
    st_rec_enter(th, 5, NULL);
    clk.wall = 510;
    st_rec_enter(th, 6, NULL);
    clk.wall = 530;
    st_rec_close_all(&r);
    uint32_t n5 = child(&th->paths, 0, 5), n6 = child(&th->paths, n5, 6);
    CHECK(th->depth == 0 && wall_of(th, n5)->sum == 30 && wall_of(th, n5)->self == 10);
    CHECK(wall_of(th, n6)->sum == 20);
    st_rec_free(&r);
    CHECK(st_rec_self_sig(&r) == NULL);
}

/* The node limit: calls beyond it, and calls under those, are counted and not
 * recorded; the stack and the timeline stay balanced. */
/* The CPU clock carried forward (cpu_every): read at most once every 100 ticks and at
 * the end of a call that lasted 100 or more; in between, the last reading plus the
 * rate of the interval before it. */
static void test_cpu_carried_forward(void)
{
    fake_clock_t clk = {0, 0, 0};
    st_rec_config_t c = config(0, 1 << 20, ST_EV_DISCARD);
    c.cpu = 1;
    c.wall = fake_wall;
    c.cpu_clock = fake_cpu;
    c.clock_ctx = &clk;
    c.cpu_every = 100;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    /* main starts at 1000 (read: the first); the thread computes at half speed */
    clk.wall = 1000, clk.cpu = 500;
    st_rec_enter(th, 1, NULL);
    CHECK(clk.cpu_reads == 1);
    /* 200 ticks later: read (the rate is now 0.5), f starts */
    clk.wall = 1200, clk.cpu = 600;
    st_rec_enter(th, 2, NULL);
    CHECK(clk.cpu_reads == 2 && th->cpu_rate == 32768); /* 0.5 */
    /* short calls of g within 100 ticks: carried forward, no reading */
    for (int i = 0; i < 4; i++) {
        clk.wall += 10, clk.cpu += 5;
        st_rec_enter(th, 3, NULL);
        clk.wall += 10, clk.cpu += 5;
        st_rec_exit(th);
    }
    CHECK(clk.cpu_reads == 2);
    /* f then sleeps: it ends at 1500 having lasted 300 ticks, so its end is read */
    clk.wall = 1500, clk.cpu = 640;
    st_rec_exit(th);
    CHECK(clk.cpu_reads == 3 && th->cpu_rate == (uint64_t)(40.0 * 65536 / 300.0));
    /* main ends 20 ticks later: carried at the sleepy rate */
    clk.wall = 1520, clk.cpu = 660;
    st_rec_exit(th);
    CHECK(clk.cpu_reads == 4); /* main lasted 520 ticks: its end is read */
    uint32_t m = child(&th->paths, 0, 1), f = child(&th->paths, m, 2), g = child(&th->paths, f, 3);
    const st_tstat_t *cm = &st_mcols_timer(&th->paths.cols, ST_REC_CPU)[m];
    const st_tstat_t *cf = &st_mcols_timer(&th->paths.cols, ST_REC_CPU)[f];
    const st_tstat_t *cg = &st_mcols_timer(&th->paths.cols, ST_REC_CPU)[g];
    CHECK(cm->sum == 160);          /* both ends read: exact */
    CHECK(cf->sum == 40);           /* read at its start and at its end: exact */
    CHECK(cg->count == 4 && cg->sum == 20); /* 10 ticks at 0.5 each: the rate before */
    st_rec_free(&r);
}

static void test_node_limit(void)
{
    fake_clock_t clk = {0, 0, 0};
    st_rec_config_t c = config(1, 1 << 20, ST_EV_DISCARD);
    c.max_nodes = 3; /* the root and two paths */
    c.wall = fake_wall;
    c.clock_ctx = &clk;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    for (uint32_t l = 1; l <= 4; l++) {
        clk.wall += 10;
        st_rec_enter(th, l, NULL);
    }
    for (int i = 0; i < 4; i++) {
        clk.wall += 10;
        CHECK(st_rec_exit(th) == 1);
    }
    CHECK(th->paths.nnodes == 3 && th->paths.dropped == 2 && th->depth == 0);
    uint32_t a = child(&th->paths, 0, 1), b = child(&th->paths, a, 2);
    CHECK(wall_of(th, a)->sum == 70 && wall_of(th, b)->sum == 50);
    CHECK(wall_of(th, b)->self == 50); /* its unrecorded children are its own time */
    CHECK(st_evbuf_words(&th->ev, 0) == 8 && th->ev.depth == 0);
    st_rec_free(&r);
}

/* Fake event counters: two values the test sets, read at every enter and exit. */
typedef struct {
    uint64_t v[2];
    int opened, closed, fail_read;
} fake_counters_t;

static void *fake_cnt_open(void *ctx)
{
    ((fake_counters_t *)ctx)->opened++;
    return ctx;
}
static int fake_cnt_read(void *h, uint64_t *vals)
{
    fake_counters_t *f = h;
    if (f->fail_read)
        return -1;
    vals[0] = f->v[0];
    vals[1] = f->v[1];
    return 0;
}
static void fake_cnt_close(void *h) { ((fake_counters_t *)h)->closed++; }

/* Counters read at enter and exit: each increase goes to the call open meanwhile
 * (a node's own events), calls past the node limit count as their recorded caller,
 * what runs outside any call goes to the root, a failed read charges nothing. */
static void test_counters(void)
{
    fake_counters_t f = {{100, 7}, 0, 0, 0};
    st_rec_counters_t rc = {.n = 2, .open = fake_cnt_open, .read = fake_cnt_read,
                            .close = fake_cnt_close, .ctx = &f};
    st_rec_config_t c = config(1, 1 << 20, ST_EV_DISCARD);
    c.max_nodes = 3; /* the root and two paths */
    c.counters = &rc;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    CHECK(st_rec_add_metric(&r, "ev0", "events", "", ST_METRIC_COUNT, &rc.metric[0]) == 0);
    CHECK(st_rec_add_metric(&r, "ev1", "events", "", ST_METRIC_COUNT, &rc.metric[1]) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    CHECK(th && th->ncounters == 2 && f.opened == 1);
    f.v[0] += 3;             /* outside any call: the root */
    st_rec_enter(th, 1, NULL);
    f.v[0] += 10;
    st_rec_enter(th, 2, NULL);
    f.v[0] += 5;
    f.v[1] += 1;
    st_rec_enter(th, 3, NULL); /* past the limit: counts as label 2 */
    f.v[0] += 4;
    st_rec_exit(th);
    f.v[0] += 1;
    st_rec_exit(th);
    f.v[0] += 2;
    f.fail_read = 1;         /* this exit reads nothing: A's 2 wait for the next read */
    st_rec_exit(th);
    f.fail_read = 0;
    st_rec_enter(th, 1, NULL); /* A again: the 2 went to the root, read outside A */
    f.v[0] += 6;
    st_rec_exit(th);
    uint32_t a = child(&th->paths, 0, 1), b = child(&th->paths, a, 2);
    const uint64_t *e0 = st_mcols_u64(&th->paths.cols, rc.metric[0]);
    const uint64_t *e1 = st_mcols_u64(&th->paths.cols, rc.metric[1]);
    CHECK(e0[0] == 5 && e0[a] == 16 && e0[b] == 10);
    CHECK(e1[0] == 0 && e1[a] == 0 && e1[b] == 1);
    st_rec_thread_finish(th);
    CHECK(f.closed == 1 && th->ncounters == 0);
    st_rec_free(&r);
    CHECK(f.closed == 1);
}

/* A thread that records one call of label 9 and exits. */
static void *record_one(void *arg)
{
    st_rec_thread_t *th = st_rec_self(arg);
    if (th) {
        st_rec_enter(th, 9, NULL);
        st_rec_exit(th);
    }
    return NULL;
}

/* What the Python collector relies on: st_rec_can_grow (it makes labels only then),
 * a call with no label (ST_PATH_NONE) counted and kept off the timeline, naming a
 * thread, a finished thread that gives back its recording memory, keeps its
 * values and records on, and a sealed recorder whose thread ends change nothing. */
static void test_collector_protocol(void)
{
    fake_clock_t clk = {0, 0, 0};
    st_rec_config_t c = config(1, 1 << 20, ST_EV_DISCARD);
    c.max_nodes = 3; /* the root and two paths */
    c.wall = fake_wall;
    c.clock_ctx = &clk;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    CHECK(st_rec_can_grow(th));
    st_rec_enter(th, ST_PATH_NONE, NULL); /* a label that could not be made */
    CHECK(th->depth == 1 && th->stack[0].node == ST_PATH_NONE && !th->stack[0].traced);
    CHECK(!st_rec_can_grow(th)); /* under an unrecorded call */
    CHECK(st_rec_exit(th) == 1 && th->paths.dropped == 1 && th->ev.depth == 0);
    CHECK(st_evbuf_words(&th->ev, 0) == 0);
    clk.wall = 10;
    st_rec_enter(th, 1, NULL);
    CHECK(st_rec_can_grow(th));
    st_rec_enter(th, 2, NULL);
    CHECK(!st_rec_can_grow(th)); /* the node limit */
    clk.wall = 15;
    st_rec_exit(th);
    clk.wall = 20;
    st_rec_exit(th);
    CHECK(strncmp(th->name, "Thread-", 7) == 0); /* until named */
    st_rec_thread_name(th, "MainThread");
    CHECK_STR(th->name, "MainThread");

    /* finished: stack and index go, paths and values stay, recording goes on */
    uint32_t a = child(&th->paths, 0, 1), b = child(&th->paths, a, 2);
    st_rec_thread_finish(th);
    CHECK(th->finished && th->stack == NULL && th->capstack == 0 && th->paths.children.count == 0);
    CHECK(th->paths.capnodes == th->paths.nnodes && th->paths.cols.cap == th->paths.nnodes);
    CHECK(wall_of(th, a)->sum == 10 && wall_of(th, b)->sum == 5);
    CHECK(st_rec_self(&r) == th); /* the thread's pointer still leads to it */
    th->paths.max_nodes = 4;      /* room for one more path */
    clk.wall = 30;
    st_rec_enter(th, 1, NULL);
    st_rec_enter(th, 2, NULL); /* found again through the rebuilt index */
    st_rec_enter(th, 3, NULL); /* a new path */
    clk.wall = 31;
    CHECK(st_rec_exit(th) == 1 && st_rec_exit(th) == 1 && st_rec_exit(th) == 1);
    CHECK(th->paths.nnodes == 4 && child(&th->paths, b, 3) == 3 && !th->paths.failed);
    CHECK(wall_of(th, a)->count == 2 && wall_of(th, b)->count == 2 && wall_of(th, 3)->sum == 1);
    CHECK(st_mcols_timer(&th->paths.cols, ST_REC_WALL)[3].count == 1);

    /* sealed: thread ends leave states as they are, for reading (a finish, and a
     * pthread's exit) */
    st_rec_seal(&r);
    st_rec_thread_finish(th);
    CHECK(th->stack != NULL && th->paths.children.count > 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, record_one, &r) == 0 && pthread_join(t, NULL) == 0);
    CHECK(r.nthreads == 2 && !r.threads[1]->finished && r.threads[1]->stack != NULL);
    CHECK(wall_of(r.threads[1], child(&r.threads[1]->paths, 0, 9))->count == 1);
    st_rec_free(&r);
}

/* Every kind of event, its payload, tracks with foreign clocks, and the columns
 * that alloc and samples fill. */
static void test_event_kinds(void)
{
    fake_clock_t clk = {1000, 0, 0};
    st_rec_config_t c = config(1, 1 << 20, ST_EV_DISCARD);
    c.wall = fake_wall;
    c.clock_ctx = &clk;
    c.sig_chunks = 1;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    uint32_t gpu, ctr, extra;
    CHECK(st_rec_add_metric(&r, "gpu_samples", "samples", "", ST_METRIC_SAMPLES, &extra) == 0);
    /* a GPU stream whose clock counts microseconds from host tick 5000 */
    CHECK(st_rec_add_track(&r, ST_TRACK_GPU_STREAM, "stream 7", 1, 1000.0, 5000, &gpu) == 0);
    CHECK(st_rec_add_track(&r, ST_TRACK_COUNTER, "queue", ST_DOMAIN_HOST, 0, 0, &ctr) == 0);
    CHECK(gpu == 0 && ctr == 1);
    CHECK(st_rec_track_host(&r.tracks[gpu], 3) == 8000);
    st_rec_thread_t *th = st_rec_self(&r);
    uint32_t late;
    CHECK(st_rec_add_metric(&r, "late", "x", "", ST_METRIC_COUNT, &late) == ST_EINVAL);
    st_rec_enter(th, 1, NULL);
    clk.wall = 1010;
    st_rec_alloc(th, 9, 0xabc0, 4096);
    st_rec_alloc(th, 9, 0xdef0, 100);
    st_rec_free_addr(th, 0xabc0);
    st_rec_counter(th, ctr, 2.5);
    st_rec_complete(th, gpu, 3, 7, 42, 77);
    st_rec_instant(th, 8);
    st_rec_flow(th, 77, 5);
    uint32_t stack[5] = {3, 2, 1};
    CHECK(st_rec_sample(th, stack, 3, r.m_samples, 2) == 1);
    CHECK(st_rec_sample(th, stack, 1, extra, 5) == 1);
    clk.wall = 1100;
    st_rec_exit(th);
    uint32_t n1 = child(&th->paths, 0, 1);
    CHECK(st_mcols_u64(&th->paths.cols, r.m_alloc_bytes)[n1] == 4196);
    CHECK(st_mcols_u64(&th->paths.cols, r.m_allocs)[n1] == 2);

    st_ev_reader_t rd;
    st_ev_reader_init(&rd, &th->ev, 0);
    const st_ev_t *e;
    int seen = 0;
    while ((e = st_ev_next(&rd))) {
        const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
        switch (e->kind) {
        case ST_EV_ALLOC:
            seen += e->a == 9 && e->nextra == 1 && e->ticks == 1010 &&
                    (p->u0 == 0xabc0 ? p->u1 == 4096 : p->u0 == 0xdef0 && p->u1 == 100);
            break;
        case ST_EV_FREE:
            seen += p->u0 == 0xabc0;
            break;
        case ST_EV_COUNTER: {
            double v;
            memcpy(&v, &p->u0, sizeof v);
            seen += e->a == ctr && v == 2.5;
            break;
        }
        case ST_EV_COMPLETE: {
            const st_ev_complete_t *cc = (const st_ev_complete_t *)(e + 1);
            seen += e->a == gpu && e->ticks == 3 && cc->t1 == 7 && cc->label == 42 && cc->flow == 77 &&
                    st_rec_track_host(&r.tracks[e->a], cc->t1) == 12000;
            break;
        }
        case ST_EV_INSTANT:
            seen += e->a == 8 && e->nextra == 0;
            break;
        case ST_EV_FLOW:
            seen += p->u0 == 77 && e->a == 5;
            break;
        default:
            break;
        }
    }
    CHECK(seen == 7);
    /* samples are on the signal lane, frames intact */
    st_ev_reader_init(&rd, &th->ev, 1);
    e = st_ev_next(&rd);
    CHECK(e && e->kind == ST_EV_SAMPLE && e->a == r.m_samples && e->nextra == 2);
    const uint32_t *fr = e ? (const uint32_t *)((const st_ev_pair_t *)(e + 1) + 1) : NULL;
    CHECK(fr && fr[0] == 3 && fr[1] == 2 && fr[2] == 1);
    e = st_ev_next(&rd);
    CHECK(e && e->kind == ST_EV_SAMPLE && e->a == extra);
    CHECK(st_ev_next(&rd) == NULL);
    /* folded: root -> 1 -> 2 -> 3 weighs 2 samples; root -> 3 weighs 5 in gpu_samples */
    CHECK(st_rec_fold_samples(&r, NULL, 0) == 0);
    uint32_t n2 = child(&th->paths, n1, 2), n3 = child(&th->paths, n2, 3);
    CHECK(n3 != ST_PATH_NONE && st_mcols_u64(&th->paths.cols, r.m_samples)[n3] == 2);
    CHECK(st_mcols_u64(&th->paths.cols, extra)[child(&th->paths, 0, 3)] == 5);
    CHECK(st_rec_samples_lost(&r) == 0);
    st_rec_free(&r);
}

/* Chains: one sampled id stands for several frames (a native address and the
 * functions inlined there), outermost first; an id with none is left out. */
static void test_fold_chains(void)
{
    st_rec_config_t c = config(0, 1 << 20, ST_EV_DISCARD);
    c.sig_chunks = 1;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    /* id 0 -> main; id 1 -> f, inl_a, inl_b (labels 10, 11, 12); id 2 -> nothing */
    uint32_t first[4] = {0, 1, 4, 4}, labels[4] = {9, 10, 11, 12};
    uint32_t s1[2] = {1, 0}, s2[3] = {2, 1, 0}, s3[2] = {7, 0};
    CHECK(st_rec_sample(th, s1, 2, r.m_samples, 3) == 1);
    CHECK(st_rec_sample(th, s2, 3, r.m_samples, 1) == 1);
    CHECK(st_rec_sample(th, s3, 2, r.m_samples, 2) == 1);
    CHECK(st_rec_fold_chains(&r, first, labels, 3) == 0);
    uint32_t m = child(&th->paths, 0, 9), f = child(&th->paths, m, 10);
    uint32_t a = child(&th->paths, f, 11), b = child(&th->paths, a, 12);
    const uint64_t *col = st_mcols_u64(&th->paths.cols, r.m_samples);
    CHECK(b != ST_PATH_NONE && col[b] == 4); /* s1 and s2 (its id 2 left out) */
    CHECK(col[m] == 2);                      /* s3: id 7 is past nids */
    st_rec_free(&r);
}

/* Discard: once the budget is spent, begins are dropped but the ends of recorded
 * begins go to the reserve, so the timeline stays balanced. */
static void test_discard(void)
{
    fake_clock_t clk = {0, 0, 0};
    /* room for one smallest chunk of 64 words, and nothing for the signal lane */
    st_rec_config_t c = config(1, ST_EV_CHUNK_BYTES(ST_EV_MIN_CHUNK_WORDS), ST_EV_DISCARD);
    c.wall = fake_wall;
    c.clock_ctx = &clk;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    /* 40 nested enters, then 40 exits: 40 begins fit, 24 of the ends too, 16 go to
     * the reserve; then 10 more calls are dropped whole */
    for (int i = 0; i < 40; i++) {
        clk.wall++;
        st_rec_enter(th, (uint32_t)i, NULL);
    }
    for (int i = 0; i < 40; i++) {
        clk.wall++;
        st_rec_exit(th);
    }
    for (int i = 0; i < 10; i++) {
        st_rec_enter(th, 99, NULL);
        st_rec_exit(th);
    }
    CHECK(th->ev.nreserve == 16 && th->ev.dropped == 10 && th->ev.depth == 0);
    CHECK(wall_of(th, child(&th->paths, 0, 99))->count == 10); /* the tree records all */
    st_ev_reader_t rd;
    st_ev_reader_init(&rd, &th->ev, 0);
    const st_ev_t *e;
    int depth = 0, ok = 1, n = 0;
    uint64_t last = 0;
    while ((e = st_ev_next(&rd))) {
        depth += e->kind == ST_EV_BEGIN ? 1 : -1;
        ok &= depth >= 0 && e->ticks >= last;
        last = e->ticks;
        n++;
    }
    CHECK(ok && depth == 0 && n == 80);
    /* no signal chunk could be had: samples are counted lost */
    uint32_t s[1] = {1};
    CHECK(st_rec_sample(th, s, 1, r.m_samples, 1) == 0 && st_rec_samples_lost(&r) == 1);
    st_rec_free(&r);
}

static char tmpdir[64];

/* Flush: full chunks go to the spill file and come back in order. */
static void test_flush(void)
{
    fake_clock_t clk = {0, 0, 0};
    st_rec_config_t c = config(1, ST_EV_CHUNK_BYTES(ST_EV_CHUNK_WORDS) * 2, ST_EV_FLUSH);
    c.wall = fake_wall;
    c.clock_ctx = &clk;
    c.spill_dir = tmpdir;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    st_rec_thread_t *th = st_rec_self(&r);
    const int n = 50000; /* 100,000 events: many chunks' worth */
    for (int i = 0; i < n; i++) {
        clk.wall++;
        st_rec_enter(th, (uint32_t)(i % 7), NULL);
        if (i % 1000 == 0)
            st_rec_counter(th, 0, (double)i); /* a 2-word event now and then */
        clk.wall++;
        st_rec_exit(th);
    }
    CHECK(th->ev.main.spilled > 0 && th->ev.dropped == 0 && !th->ev.main.failed);
    st_ev_reader_t *rd = malloc(sizeof *rd);
    st_ev_reader_init(rd, &th->ev, 0);
    const st_ev_t *e;
    int begins = 0, ends = 0, counters = 0, ok = 1;
    uint64_t last = 0;
    while ((e = st_ev_next(rd))) {
        begins += e->kind == ST_EV_BEGIN;
        ends += e->kind == ST_EV_END;
        counters += e->kind == ST_EV_COUNTER;
        ok &= e->ticks >= last && (e->kind != ST_EV_BEGIN || e->a == (uint32_t)(begins - 1) % 7);
        last = e->ticks;
    }
    CHECK(ok && !rd->error && begins == n && ends == n && counters == n / 1000);
    free(rd);
    /* the thread finishes: its events go to disk, its chunk back to the budget */
    int64_t before = atomic_load(&r.ev.bytes_left);
    st_rec_thread_finish(th);
    CHECK(th->ev.main.head == NULL);
    CHECK(atomic_load(&r.ev.bytes_left) == before + (int64_t)ST_EV_CHUNK_BYTES(ST_EV_CHUNK_WORDS));
    rd = malloc(sizeof *rd);
    st_ev_reader_init(rd, &th->ev, 0);
    int all = 0;
    while (st_ev_next(rd))
        all++;
    CHECK(all == 2 * n + n / 1000 && !rd->error);
    free(rd);
    st_rec_free(&r);

    /* a spill that cannot be made records errno and drops from then on */
    c.spill_dir = "/nonexistent-strata-dir";
    CHECK(st_rec_init(&r, &c) == 0);
    th = st_rec_self(&r);
    for (int i = 0; i < 5000; i++) {
        st_rec_enter(th, 1, NULL);
        st_rec_exit(th);
    }
    CHECK(th->ev.main.failed && th->ev.main.spill_errno == ENOENT && th->ev.dropped > 0);
    CHECK(th->ev.depth == 0);
    st_rec_free(&r);
}

/* ------------------------------------------------------------------------- */
/* Four plain pthreads at once                                               */

#define NTHREADS 4
#define ITERS 20000

typedef struct {
    st_recorder_t *r;
    int index;
    st_rec_thread_t *th;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    st_rec_thread_t *th = st_rec_self(w->r); /* registers: no front end knows us */
    w->th = th;
    if (!th)
        return NULL;
    uint32_t base = (uint32_t)w->index * 10;
    for (int i = 0; i < ITERS; i++) {
        st_rec_enter(th, base + 1, NULL);
        st_rec_enter(th, base + 2, NULL);
        st_rec_exit(th);
        st_rec_enter(th, base + 2, NULL);
        st_rec_enter(th, base + 3, NULL);
        st_rec_exit(th);
        st_rec_exit(th);
        st_rec_exit(th);
    }
    return NULL;
}

static void test_threads(void)
{
    st_rec_config_t c = config(1, 64u << 20, ST_EV_DISCARD);
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    int64_t start = atomic_load(&r.ev.bytes_left);
    pthread_t t[NTHREADS];
    worker_t w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker_t){&r, i, NULL};
        CHECK(pthread_create(&t[i], NULL, worker, &w[i]) == 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(r.nthreads == NTHREADS);
    int64_t chunks = 0;
    for (int i = 0; i < NTHREADS; i++) {
        st_rec_thread_t *th = w[i].th;
        CHECK(th != NULL && th->finished && th->depth == 0);
        if (!th)
            continue;
        uint32_t base = (uint32_t)i * 10;
        uint32_t a = child(&th->paths, 0, base + 1), b = child(&th->paths, a, base + 2),
                 d = child(&th->paths, b, base + 3);
        CHECK(th->paths.nnodes == 4);
        CHECK(wall_of(th, a)->count == ITERS && wall_of(th, b)->count == 2 * ITERS &&
              wall_of(th, d)->count == ITERS);
        CHECK(wall_of(th, a)->self <= wall_of(th, a)->sum - wall_of(th, b)->sum);
        CHECK(st_evbuf_words(&th->ev, 0) == 8u * ITERS && th->ev.dropped == 0);
        /* finished: the last chunk shrank to the events it holds */
        CHECK(th->ev.main.tail && th->ev.main.tail->cap == (8u * ITERS) % ST_EV_CHUNK_WORDS);
        for (const st_evchunk_t *ch = atomic_load(&th->ev.main.head); ch; ch = atomic_load(&ch->next))
            chunks += ch != th->ev.main.tail;
    }
    /* the budget holds the full chunks and the tails' words, nothing more */
    int64_t held = start - atomic_load(&r.ev.bytes_left);
    CHECK(held == chunks * (int64_t)ST_EV_CHUNK_BYTES(ST_EV_CHUNK_WORDS) +
                      NTHREADS * (int64_t)ST_EV_CHUNK_BYTES((8u * ITERS) % ST_EV_CHUNK_WORDS));
    st_rec_free(&r);
}

/* ------------------------------------------------------------------------- */
/* A 1 kHz timer's signal handler writing samples while the thread works     */

#define SIG_FRAMES 40

static st_recorder_t *sig_rec;
static _Atomic uint64_t sig_taken, sig_bad;
static _Atomic int sig_stop;

static void on_timer(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    int saved = errno;
    uint64_t k = atomic_fetch_add(&sig_taken, 1);
    st_rec_thread_t *th = st_rec_self_sig(sig_rec);
    if (th) {
        uint32_t frames[SIG_FRAMES];
        for (uint32_t i = 0; i < SIG_FRAMES; i++)
            frames[i] = (uint32_t)(k % 5) * 100 + i; /* innermost first */
        st_rec_sample(th, frames, SIG_FRAMES, sig_rec->m_samples, 1);
    } else {
        st_rec_sample_lost(sig_rec);
    }
    errno = saved;
}

typedef struct {
    st_recorder_t *r;
    st_rec_thread_t *th;
    uint64_t calls;
    int ok;
} sig_worker_t;

static void *sig_worker(void *arg)
{
    sig_worker_t *w = arg;
    w->th = st_rec_self(w->r);
    timer_t timer;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    struct itimerspec its = {{0, 1000000}, {0, 1000000}}; /* 1 kHz */
    w->ok = w->th && timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0 &&
            timer_settime(timer, 0, &its, NULL) == 0;
    while (w->ok && !atomic_load(&sig_stop)) {
        for (int i = 0; i < 100; i++) {
            st_rec_enter(w->th, 1, NULL);
            st_rec_enter(w->th, 2, NULL);
            st_rec_exit(w->th);
            st_rec_exit(w->th);
            w->calls++;
        }
    }
    /* no handler runs once the thread stops: block the signal, then stop the timer */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (w->ok)
        timer_delete(timer);
    return NULL;
}

/* Runs the worker for `ms` with the main thread maintaining the recorder (refill,
 * drain) every 2 ms; returns the samples read back from the worker's signal lane. */
static uint64_t run_sampled(st_recorder_t *r, int ms, sig_worker_t *w, int maintain)
{
    sig_rec = r;
    atomic_store(&sig_taken, 0);
    atomic_store(&sig_bad, 0);
    atomic_store(&sig_stop, 0);
    *w = (sig_worker_t){r, NULL, 0, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, sig_worker, w) != 0)
        return 0;
    for (int i = 0; i < ms / 2; i++) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        if (maintain)
            st_rec_maintain(r);
    }
    atomic_store(&sig_stop, 1);
    pthread_join(t, NULL);
    CHECK(w->ok);
    st_ev_reader_t *rd = malloc(sizeof *rd);
    st_ev_reader_init(rd, &w->th->ev, 1);
    const st_ev_t *e;
    uint64_t n = 0;
    while ((e = st_ev_next(rd))) {
        const st_ev_pair_t *p = (const st_ev_pair_t *)(e + 1);
        const uint32_t *fr = (const uint32_t *)(p + 1);
        int good = e->kind == ST_EV_SAMPLE && p->u1 == SIG_FRAMES && p->u0 == 1;
        for (uint32_t i = 1; good && i < SIG_FRAMES; i++)
            good = fr[i] == fr[0] + i;
        atomic_fetch_add(&sig_bad, !good);
        n++;
    }
    CHECK(!rd->error);
    free(rd);
    return n;
}

static void test_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_timer;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGPROF, &sa, NULL) == 0);

    /* flush, a budget of a few signal chunks: drained and recycled while running */
    size_t sigchunk = ST_EV_CHUNK_BYTES(ST_EV_SIG_CHUNK_WORDS);
    st_rec_config_t c = config(1, ST_EV_CHUNK_BYTES(ST_EV_CHUNK_WORDS) + 6 * sigchunk, ST_EV_FLUSH);
    c.spill_dir = tmpdir;
    c.sig_chunks = 4;
    st_recorder_t r;
    CHECK(st_rec_init(&r, &c) == 0);
    sig_worker_t w;
    uint64_t read = run_sampled(&r, 400, &w, 1);
    uint64_t taken = atomic_load(&sig_taken);
    uint64_t written = atomic_load(&w.th->ev.sig_written);
    uint64_t lost = st_rec_samples_lost(&r);
    printf("signal, flush: %llu samples taken, %llu recorded, %llu lost, %llu calls\n",
           (unsigned long long)taken, (unsigned long long)written, (unsigned long long)lost,
           (unsigned long long)w.calls);
    CHECK(taken > 50);                    /* the timer ran */
    CHECK(taken == written + lost);       /* every sample recorded or counted */
    CHECK(read == written && atomic_load(&sig_bad) == 0);
    CHECK(w.th->ev.sig.spilled > 0);      /* chunks went through the spill file */
    /* the calls the thread made meanwhile are all in the tree, exactly */
    uint32_t a = child(&w.th->paths, 0, 1), b = child(&w.th->paths, a, 2);
    CHECK(wall_of(w.th, a)->count == w.calls && wall_of(w.th, b)->count == w.calls);
    CHECK(st_rec_fold_samples(&r, NULL, 0) == 0);
    uint64_t folded = 0;
    for (uint32_t i = 0; i < w.th->paths.nnodes; i++)
        folded += st_mcols_u64(&w.th->paths.cols, r.m_samples)[i];
    CHECK(folded == written);
    st_rec_free(&r);

    /* discard with room for one signal chunk and no maintenance: samples beyond it
     * are lost, and counted */
    c = config(1, ST_EV_CHUNK_BYTES(ST_EV_CHUNK_WORDS) + sigchunk, ST_EV_DISCARD);
    c.sig_chunks = 1;
    CHECK(st_rec_init(&r, &c) == 0);
    read = run_sampled(&r, 200, &w, 0);
    taken = atomic_load(&sig_taken);
    written = atomic_load(&w.th->ev.sig_written);
    lost = st_rec_samples_lost(&r);
    printf("signal, discard: %llu samples taken, %llu recorded, %llu lost\n",
           (unsigned long long)taken, (unsigned long long)written, (unsigned long long)lost);
    CHECK(taken == written + lost && read == written && atomic_load(&sig_bad) == 0);
    CHECK(written == (ST_EV_SIG_CHUNK_WORDS / (1 + ST_EV_SAMPLE_EXTRA(SIG_FRAMES))) ||
          taken < ST_EV_SIG_CHUNK_WORDS / (1 + ST_EV_SAMPLE_EXTRA(SIG_FRAMES)));
    CHECK(lost > 0 || taken < ST_EV_SIG_CHUNK_WORDS / (1 + ST_EV_SAMPLE_EXTRA(SIG_FRAMES)));
    st_rec_free(&r);
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = 0;
    sigaction(SIGPROF, &sa, NULL);
}

/* Labels from many threads: 4 threads intern the same 3000 strings (each under two
 * tags) in different orders while reading back what they got; every thread must see
 * one id per (string, tag), dense ids, and the strings it asked for. Under
 * ThreadSanitizer this is the check that interning is thread-safe and reading needs
 * no lock. */
#define INTERN_N 3000
static st_intern_t shared_labels;
static uint32_t intern_ids[4][INTERN_N][2];

static void *intern_worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    char text[32];
    int bad = 0;
    for (int j = 0; j < INTERN_N; j++) {
        int i = w % 2 ? INTERN_N - 1 - j : (j * 7 + w) % INTERN_N;
        for (uint32_t tag = 0; tag < 2; tag++) {
            int len = snprintf(text, sizeof text, "fn_%d", i);
            uint32_t id;
            if (st_intern_tagged(&shared_labels, text, (size_t)len, tag, &id) < 0)
                bad++;
            intern_ids[w][i][tag] = id;
            /* read back without the lock, while others add */
            if (strcmp(st_intern_str(&shared_labels, id), text) != 0 ||
                st_intern_tag(&shared_labels, id) != tag)
                bad++;
        }
    }
    return (void *)(intptr_t)bad;
}

static void test_intern_threads(void)
{
    st_intern_init(&shared_labels);
    pthread_t t[4];
    for (int w = 0; w < 4; w++)
        CHECK(pthread_create(&t[w], NULL, intern_worker, (void *)(intptr_t)w) == 0);
    int bad = 0;
    for (int w = 0; w < 4; w++) {
        void *r;
        pthread_join(t[w], &r);
        bad += (int)(intptr_t)r;
    }
    CHECK(bad == 0);
    CHECK(st_intern_count(&shared_labels) == 2 * INTERN_N);
    int same = 1, shared = 1;
    for (int i = 0; i < INTERN_N; i++)
        for (int tag = 0; tag < 2; tag++) {
            for (int w = 1; w < 4; w++)
                same &= intern_ids[w][i][tag] == intern_ids[0][i][tag];
            shared &= st_intern_shared(&shared_labels, intern_ids[0][i][tag]);
        }
    CHECK(same && shared);
    st_intern_t moved;
    st_intern_init(&moved);
    st_intern_move(&moved, &shared_labels);
    CHECK(st_intern_count(&moved) == 2 * INTERN_N && st_intern_count(&shared_labels) == 0);
    CHECK(strcmp(st_intern_str(&moved, intern_ids[0][INTERN_N - 1][1]), "fn_2999") == 0);
    st_intern_free(&moved);
    st_intern_free(&shared_labels);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-rec-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_metrics_registry();
    test_tstat();
    test_pathtab();
    test_fake_clock();
    test_cpu_carried_forward();
    test_node_limit();
    test_counters();
    test_collector_protocol();
    test_event_kinds();
    test_fold_chains();
    test_discard();
    test_flush();
    test_threads();
    test_signal();
    test_intern_threads();
    rmdir(tmpdir);
    return st_check_report();
}
