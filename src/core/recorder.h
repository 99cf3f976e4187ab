/* The recorder: the one interface every collector feeds.
 *
 * Design note. A collector (the Python hook, a signal-driven stack sampler, the
 * preload library's wrappers, CUPTI) turns its source into calls on this interface;
 * it knows nothing of the path table's layout, the event chunks or the order of
 * clock reads. The recorder owns, per thread:
 *   - a path table (pathtab.h) with metric columns (metrics.h) over its nodes;
 *   - a shadow stack of open calls, each with its start time, its children's time
 *     and whether its begin is on the timeline, so that tree and timeline stay paired
 *     (a call's end goes on the timeline exactly when its begin did);
 *   - an event buffer (events.h): the main lane for the thread's own events, the
 *     signal lane for samples written by signal handlers.
 *
 * The clock. enter() does its bookkeeping first and reads the clock last; exit()
 * reads the clock first and does its bookkeeping after, so that the recorder's own
 * work is charged to the caller's caller as little as possible (cProfile's rule).
 * The wall timer is metric 0 (ST_REC_WALL, ticks of st_clock, or of an injected
 * clock); with `cpu`, thread CPU time (ns) is metric 1 (ST_REC_CPU), taken after the
 * wall clock on enter and on exit.
 *
 * The CPU clock carried forward. A thread's CPU clock is a system call
 * (CLOCK_THREAD_CPUTIME_ID, some 600 ns on virtual machines without perf's user
 * page), 30 times what an event costs otherwise. With cpu_every set, the clock is
 * read at most once every cpu_every wall ticks, and at the end of any call that
 * lasted that long; in between it is carried forward from the last reading at the
 * rate the thread had over the interval before it (CPU ns per wall tick, 0 to 1 of
 * wall time). So the CPU time in an interval is spread over the calls in it in
 * proportion to their wall time: a call that lasted cpu_every or more gets its end
 * exact and its start within cpu_every times the change of rate (a thread that
 * computed, then slept: at most cpu_every of CPU time); shorter calls get their share.
 * Values may step back at a reading (a call's CPU time is then 0, never negative).
 * cpu_every 0 reads the clock at every event.
 *
 * Threads. A thread's state is found through one thread-local pointer; a thread is
 * registered on its first call of st_rec_self() (a lock on that slow path only), so
 * that threads no front end knows (a native program's pthreads) record like any
 * other. At the thread's exit (a pthread key destructor) its event memory goes back
 * to the budget and what only recording needs is freed; its path table stays, for
 * the results.
 *
 * Protocol, who may call what:
 *   st_rec_init/free, st_rec_add_metric, st_rec_add_track: setup, one thread, before
 *     (add_track: or while) threads record; add_track takes the lock.
 *   st_rec_self: any thread; registers on first use (lock, allocation). Not
 *     signal-safe: a signal handler uses st_rec_self_sig (NULL if unregistered).
 *   st_rec_register_tid: any thread, for another (a sampler); the lock.
 *   enter, exit, alloc, free, counter, complete, instant, flow: the thread that owns
 *     `th`, in thread context. No lock, no allocation once warm (a new path or chunk
 *     is the slow path). Not signal-safe.
 *   st_rec_sample: the owning thread or a signal handler running on it:
 *     async-signal-safe (no lock, no allocation; an injected clock must be too).
 *     Every sample is either recorded or counted (`lost` of the thread, or
 *     st_rec_sample_lost for a thread with no state).
 *   st_rec_maintain: any thread (a sampler thread, the end of the run): refills the
 *     ring of signal chunks, spills full ones under flush. Takes the locks.
 *   st_rec_thread_finish: the owner, or any thread after the owner's end; takes the
 *     lock (a pthread key destructor does it at thread exit, unless done already).
 *   st_rec_seal: after recording has stopped; then thread ends change nothing.
 *   st_rec_close_all, st_rec_fold_samples, reading: after recording has stopped
 *     (and st_rec_seal, where threads may still exit meanwhile).
 * Ownership: the recorder owns every thread state, track and metric; pointers it
 * returns live until st_rec_free. */
#ifndef STRATA_CORE_RECORDER_H
#define STRATA_CORE_RECORDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/clock.h"
#include "core/events.h"
#include "core/metrics.h"
#include "core/pathtab.h"

#define ST_REC_WALL 0      /* the wall timer's metric id */
#define ST_REC_CPU 1       /* the CPU timer's metric id (with cpu) */
#define ST_REC_CPU_NEVER (1ull << 63) /* cpu_wall before the first reading: far from
                                       * any tick, so the first call reads the clock */

/* A clock: returns ticks. Tests inject one; NULL means st_clock_ticks() (wall) or
 * st_clock_thread_cpu_ns() (cpu). Used from st_rec_sample, so it must be
 * async-signal-safe where samples are taken in handlers. */
typedef uint64_t (*st_rec_clock_fn)(void *ctx);

/* Event counters read at every enter and exit of a thread (hardware and software
 * event counts: src/system/hwc.h). Each reading's increase since the thread's last
 * one is added to the count column of the call open meanwhile (the innermost
 * recorded one; the root outside any), so that a node holds its calls' own counts
 * and its total is the sum over its subtree. A thread opens its counters itself, at
 * its first st_rec_register; a thread whose open fails reads none. */
#define ST_REC_MAX_COUNTERS 8

typedef struct {
    uint32_t n;                                  /* counters, <= ST_REC_MAX_COUNTERS */
    uint32_t metric[ST_REC_MAX_COUNTERS];        /* their count metrics (st_rec_add_metric) */
    void *(*open)(void *ctx);                    /* on the thread; NULL: none */
    int (*read)(void *handle, uint64_t *vals);   /* n values; 0, or < 0: none read */
    void (*close)(void *handle);                 /* any thread */
    void *ctx;
} st_rec_counters_t;

typedef struct {
    uint32_t max_nodes;       /* per thread; 0: no limit */
    int cpu;                  /* 1: time thread CPU too (metric ST_REC_CPU) */
    int trace;                /* 1: record events (begin/end, alloc, counters...) */
    uint64_t budget;          /* event bytes, all threads */
    int policy;               /* ST_EV_DISCARD or ST_EV_FLUSH */
    uint32_t max_depth;       /* deepest begin on the timeline */
    const char *spill_dir;    /* flush: where the spill file goes; not owned */
    uint32_t sig_chunks;      /* signal chunks kept ready for samples (0: none; a
                               * sampler asks for a few, ST_EV_RING at most) */
    st_rec_clock_fn wall, cpu_clock;
    void *clock_ctx;
    uint64_t cpu_every;       /* with cpu: wall ticks between readings of a thread's CPU
                               * clock, carried forward in between (0: every event) */
    const st_rec_counters_t *counters; /* NULL: none; not owned, outlives the recorder */
} st_rec_config_t;

/* What a track is. Thread tracks are implicit (a thread's own events); these are
 * the tracks events name explicitly. */
typedef enum {
    ST_TRACK_THREAD = 0,
    ST_TRACK_GPU_STREAM = 1,  /* one thing at a time: its complete events follow */
    ST_TRACK_COUNTER = 2,
    ST_TRACK_GPU_API = 3,     /* a thread's calls into a GPU's runtime: they nest */
} st_track_kind_t;

/* A clock domain: ST_DOMAIN_HOST is the recorder's own ticks; others are foreign
 * clocks (a GPU's timestamps) converted as host = offset + scale * t. */
#define ST_DOMAIN_HOST 0

typedef struct {
    st_track_kind_t kind;
    char name[64];
    uint32_t domain;          /* clock domain of its complete events' times */
    double scale;             /* host ticks per domain unit */
    int64_t offset;           /* host ticks at domain time 0 */
    uint32_t metric;          /* counter tracks: a gauge metric, or ST_METRIC_NONE */
} st_rec_track_t;

typedef struct {
    const void *key;          /* identity of the call, if the collector gives one */
    uint32_t node;            /* ST_PATH_NONE when not recorded (dropped) */
    uint32_t traced;          /* 1: its begin is on the timeline */
    uint64_t t0[2];           /* wall, cpu */
    uint64_t child[2];
} st_rec_frame_t;

struct st_recorder;

typedef struct st_rec_thread {
    /* hot: what enter and exit touch */
    st_rec_frame_t *stack;
    uint32_t depth, capstack;
    uint32_t unpushed;        /* enters whose frame could not be pushed (no memory) */
    uint32_t ncounters;       /* event counters this thread reads (0: none) */
    int ntimers;              /* 1 wall, 2 wall + cpu */
    int tracing;
    int tsc;                  /* 1: the wall clock is the TSC, read inline (no injected
                               * clock, st_clock_ticks' source the TSC at registration) */
    st_rec_clock_fn wall, cpu_clock;
    void *clock_ctx;
    uint64_t cpu_every;       /* the CPU clock carried forward (see the note) */
    uint64_t cpu_wall, cpu_last; /* the last reading: its wall tick (ST_REC_CPU_NEVER
                                  * before the first) and CPU ns */
    uint64_t cpu_rate;        /* CPU ns per wall tick over the interval before it, in
                               * 1/65536ths (fixed point: no conversion on the hot path) */
    st_pathtab_t paths;
    st_evbuf_t ev;
    /* cold */
    struct st_recorder *rec;
    uint32_t index;           /* order of registration */
    uint64_t tid;             /* kernel thread id */
    char name[64];
    int failed;               /* sticky: an allocation failed */
    int finished;
    void *counters;           /* the counters' handle (st_rec_counters_t.open) */
    uint64_t counted[ST_REC_MAX_COUNTERS]; /* their last reading */
} st_rec_thread_t;

typedef struct st_recorder {
    uint64_t id;              /* unique in the process (thread-local pointers) */
    st_rec_config_t cfg;
    st_metrics_t metrics;
    uint32_t m_alloc_bytes, m_allocs, m_samples;
    st_ev_shared_t ev;
    pthread_mutex_t lock;     /* threads, tracks */
    pthread_key_t key;        /* thread exit: st_rec_thread_finish */
    st_rec_thread_t **threads;
    uint32_t nthreads, capthreads;
    st_rec_track_t *tracks;
    uint32_t ntracks, captracks;
    _Atomic uint64_t sample_lost; /* samples in threads with no state */
    void (*sink)(void *arg, st_rec_thread_t *th, const st_ev_t *e); /* st_rec_set_sink */
    void *sink_arg;
    int started;              /* a thread registered: no new metrics */
    int sealed;               /* recording has stopped: thread ends change nothing */
} st_recorder_t;

/* Sets up a recorder: metrics wall_clock (and cpu_clock), alloc_bytes, allocs,
 * samples; the event budget. Returns 0 or ST_ENOMEM. */
int st_rec_init(st_recorder_t *r, const st_rec_config_t *cfg);
/* Frees every thread state, track and event. No thread may record any more. */
void st_rec_free(st_recorder_t *r);

/* Registers a metric before any thread registers (its columns are made with each
 * thread's path table). Returns 0 and the id, ST_EINVAL (too late, bad name), or
 * ST_ENOMEM. */
int st_rec_add_metric(st_recorder_t *r, const char *name, const char *unit, const char *desc,
                      st_metric_kind_t kind, uint32_t *id);

/* Adds a track; returns 0 and its id, or ST_ENOMEM. Thread-safe (the lock).
 * domain/scale/offset: how its complete events' times become host ticks. */
int st_rec_add_track(st_recorder_t *r, st_track_kind_t kind, const char *name, uint32_t domain,
                     double scale, int64_t offset, uint32_t *id);

/* A track's time `t` in host ticks. */
static inline uint64_t st_rec_track_host(const st_rec_track_t *tr, uint64_t t)
{
    if (tr->domain == ST_DOMAIN_HOST)
        return t;
    double h = (double)tr->offset + tr->scale * (double)t;
    return h <= 0 ? 0 : (uint64_t)h;
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

/* The calling thread's state in r, registered on first use; NULL when out of
 * memory (then the thread records nothing). */
st_rec_thread_t *st_rec_register(st_recorder_t *r);

/* Thread `tid`'s state, made for it by another thread: a sampler that follows
 * threads it does not run on records their samples there (st_rec_sample from a
 * handler on that thread). The thread adopts the same state if it registers
 * itself later. NULL when out of memory or once the recorder is sealed. Takes the
 * lock; not signal-safe. */
st_rec_thread_t *st_rec_register_tid(st_recorder_t *r, uint64_t tid);

typedef struct {
    uint64_t rec_id;
    st_rec_thread_t *th;
} st_rec_tls_t;
extern __thread st_rec_tls_t st_rec_tls __attribute__((tls_model("initial-exec")));

static inline st_rec_thread_t *st_rec_self(st_recorder_t *r)
{
    if (__builtin_expect(st_rec_tls.rec_id == r->id, 1))
        return st_rec_tls.th;
    return st_rec_register(r);
}

/* The calling thread's state if it has one, else NULL: async-signal-safe. */
static inline st_rec_thread_t *st_rec_self_sig(const st_recorder_t *r)
{
    return st_rec_tls.rec_id == r->id ? st_rec_tls.th : NULL;
}

/* The thread has ended: its event memory goes back to the budget (events.h), and
 * what only recording needs (its stack of open calls when none is open, the path
 * table's index and spare capacity: st_pathtab_compact) is freed; its paths and
 * values stay. Called at thread exit for registered threads (unless the owner did
 * it already); the owner may call it earlier, and recording may go on afterwards.
 * Does nothing once the recorder is sealed. */
void st_rec_thread_finish(st_rec_thread_t *th);

/* Names the thread (its track and its results), replacing the "Thread-<tid>" it was
 * registered with. The owner thread, or after recording has stopped. */
void st_rec_thread_name(st_rec_thread_t *th, const char *name);

/* Names the thread as the kernel knows it (pthread_setname_np; its comm in
 * /proc/self/task/<tid>), while it is alive; nothing once it has ended. Same
 * callers as st_rec_thread_name. */
void st_rec_thread_name_kernel(st_rec_thread_t *th);

/* Adds `v` to the count or bytes cell of metric `metric` of the innermost open
 * call's path (nothing when none is open or it was not recorded): what a call
 * carries besides its time (the bytes of an MPI call). Owner thread. */
static inline void st_rec_add_top(st_rec_thread_t *th, uint32_t metric, uint64_t v)
{
    uint32_t node = th->depth ? th->stack[th->depth - 1].node : ST_PATH_NONE;
    if (node == ST_PATH_NONE || metric >= th->paths.cols.ncols)
        return;
    uint64_t *cell = &st_mcols_u64(&th->paths.cols, metric)[node];
    *cell = v > ST_COUNT_MAX - *cell ? ST_COUNT_MAX : *cell + v;
}

/* Adds v to the cell of `metric` of node `node` of th's paths (nothing when either
 * is out of range): for a collector that attributes values after the fact, when the
 * thread no longer records (the recorder stopped). */
static inline void st_rec_add_node(st_rec_thread_t *th, uint32_t metric, uint32_t node,
                                   uint64_t v)
{
    if (node >= th->paths.nnodes || metric >= th->paths.cols.ncols)
        return;
    uint64_t *cell = &st_mcols_u64(&th->paths.cols, metric)[node];
    *cell = v > ST_COUNT_MAX - *cell ? ST_COUNT_MAX : *cell + v;
}

/* Slow halves of enter: grow the stack. */
int st_rec_grow_stack(st_rec_thread_t *th);

static inline uint64_t st_rec_wall(const st_rec_thread_t *th)
{
#if defined(__x86_64__)
    if (__builtin_expect(th->tsc, 1))
        return st_clock_tsc();
#endif
    return th->wall ? th->wall(th->clock_ctx) : st_clock_ticks();
}
static inline uint64_t st_rec_cpu(const st_rec_thread_t *th)
{
    return th->cpu_clock ? th->cpu_clock(th->clock_ctx) : st_clock_thread_cpu_ns();
}

/* Reads the thread's CPU clock at wall tick `wall` and keeps the reading and the
 * rate since the one before (out of line: once every cpu_every ticks at most). */
uint64_t st_rec_cpu_read(st_rec_thread_t *th, uint64_t wall);

/* The thread's CPU time at wall tick `wall`, for a call that started at `since`
 * (enter: `wall`): read when cpu_every ticks have passed since the last reading or
 * since the call started, else carried forward (see the note). Owner thread. */
static inline uint64_t st_rec_cpu_at(st_rec_thread_t *th, uint64_t wall, uint64_t since)
{
    uint64_t dt = wall - th->cpu_wall;
    if (dt < th->cpu_every && wall - since < th->cpu_every)
        return th->cpu_last + ((dt * th->cpu_rate) >> 16);
    return st_rec_cpu_read(th, wall);
}

/* Reads the thread's counters and charges their increase to the innermost recorded
 * open call (out of line: only where counters are read). */
void st_rec_count(st_rec_thread_t *th);

/* ------------------------------------------------------------------------- */
/* The hot path                                                              */

/* A call of `label` starts; `key` (may be NULL) identifies it for st_rec_exit_key.
 * `tracing` is th->tracing, or a constant where the caller has one copy of its
 * hook per value (so that a run without a timeline pays nothing for it). */
static inline void st_rec_enter_t(st_rec_thread_t *th, uint32_t label, const void *key,
                                  const int tracing)
{
    if (__builtin_expect(th->ncounters != 0, 0))
        st_rec_count(th);    /* what ran until now was the caller's */
    if (__builtin_expect(th->depth == th->capstack, 0) && st_rec_grow_stack(th) < 0) {
        th->unpushed++;
        return;
    }
    uint32_t parent = th->depth ? th->stack[th->depth - 1].node : 0;
    uint32_t node = st_pathtab_child(&th->paths, parent, label);
    st_rec_frame_t *f = &th->stack[th->depth++];
    f->key = key;
    f->node = node;
    f->child[0] = 0;
    uint64_t t = st_rec_wall(th);
    if (th->ntimers == 2) {
        f->child[1] = 0;
        f->t0[1] = st_rec_cpu_at(th, t, t);
    }
    f->t0[0] = t;
    /* a call with no label (its collector could not make one) has no slice */
    f->traced = tracing && label != ST_PATH_NONE ? (uint32_t)st_evbuf_begin(&th->ev, label, t) : 0;
}

static inline void st_rec_enter(st_rec_thread_t *th, uint32_t label, const void *key)
{
    st_rec_enter_t(th, label, key, th->tracing);
}

/* Charges the top frame, closed at (wall, cpu), to its node and its parent frame. */
static inline void st_rec_close_top(st_rec_thread_t *th, uint64_t wall, uint64_t cpu,
                                    const int tracing)
{
    st_rec_frame_t *f = &th->stack[--th->depth];
    if (tracing && f->traced)
        st_evbuf_end(&th->ev, wall);
    if (f->node == ST_PATH_NONE)
        return;
    st_rec_frame_t *up = th->depth ? f - 1 : NULL;
    uint64_t el = wall > f->t0[0] ? wall - f->t0[0] : 0;
    st_tstat_add(&((st_tstat_t *)th->paths.cols.cols[ST_REC_WALL])[f->node], el, f->child[0]);
    if (up)
        up->child[0] += el > ST_MAX_TICKS ? ST_MAX_TICKS : el;
    if (th->ntimers == 2) {
        uint64_t ec = cpu > f->t0[1] ? cpu - f->t0[1] : 0;
        st_tstat_add(&((st_tstat_t *)th->paths.cols.cols[ST_REC_CPU])[f->node], ec, f->child[1]);
        if (up)
            up->child[1] += ec > ST_MAX_TICKS ? ST_MAX_TICKS : ec;
    }
}

/* The innermost open call ends. Returns 1 if a call was closed, 0 if none was open
 * (an exit without its enter is ignored). */
static inline int st_rec_exit_t(st_rec_thread_t *th, const int tracing)
{
    if (__builtin_expect(th->unpushed != 0, 0)) {
        th->unpushed--;
        return 0;
    }
    if (th->depth == 0)
        return 0;
    uint64_t wall = st_rec_wall(th);
    uint64_t cpu = th->ntimers == 2 ? st_rec_cpu_at(th, wall, th->stack[th->depth - 1].t0[0]) : 0;
    if (__builtin_expect(th->ncounters != 0, 0))
        st_rec_count(th);
    st_rec_close_top(th, wall, cpu, tracing);
    return 1;
}

static inline int st_rec_exit(st_rec_thread_t *th)
{
    return st_rec_exit_t(th, th->tracing);
}

/* 1 when a call entered now could get a new path: the path table is below its node
 * limit, no allocation failed and the innermost open call was recorded. Collectors
 * make labels only then, so that their label tables stay bounded by the nodes too. */
static inline int st_rec_can_grow(const st_rec_thread_t *th)
{
    return th->paths.nnodes < th->paths.max_nodes && !th->paths.failed &&
           (th->depth == 0 || th->stack[th->depth - 1].node != ST_PATH_NONE);
}

/* The key of the innermost open call, or NULL. */
static inline const void *st_rec_top_key(const st_rec_thread_t *th)
{
    return th->depth ? th->stack[th->depth - 1].key : NULL;
}

/* Ends the innermost open call if its key is `key` (collectors whose events may
 * include exits of calls never entered: Python). Returns 1 if closed. */
static inline int st_rec_exit_key_t(st_rec_thread_t *th, const void *key, const int tracing)
{
    if (th->unpushed || th->depth == 0 || th->stack[th->depth - 1].key != key)
        return 0;
    uint64_t wall = st_rec_wall(th);
    uint64_t cpu = th->ntimers == 2 ? st_rec_cpu_at(th, wall, th->stack[th->depth - 1].t0[0]) : 0;
    if (__builtin_expect(th->ncounters != 0, 0))
        st_rec_count(th);
    st_rec_close_top(th, wall, cpu, tracing);
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Other events (owner thread; recorded on the timeline only with trace)     */

/* A stack sample: `n` label ids, innermost first (at most ST_EV_MAX_FRAMES: deeper
 * frames are cut), weighing `weight` in `metric` (ST_METRIC_SAMPLES kind, e.g.
 * r->m_samples). Async-signal-safe on th's own thread; always recorded as an event
 * (trace or not), folded into the path table by st_rec_fold_samples. Returns 1 if
 * recorded, 0 if counted lost. */
int st_rec_sample(st_rec_thread_t *th, const uint32_t *stack, uint32_t n, uint32_t metric,
                  uint64_t weight);
/* A sample taken in a thread with no state (st_rec_self_sig gave NULL): counted. */
static inline void st_rec_sample_lost(st_recorder_t *r)
{
    atomic_fetch_add_explicit(&r->sample_lost, 1, memory_order_relaxed);
}

/* `bytes` allocated at `addr` from call site `site` (a label): charged to the
 * innermost open call's path (alloc_bytes, allocs). */
void st_rec_alloc(st_rec_thread_t *th, uint32_t site, uint64_t addr, uint64_t bytes);
/* The block at `addr` is freed (an event; the model pairs it with its alloc). */
void st_rec_free_addr(st_rec_thread_t *th, uint64_t addr);
/* Counter track `track` reads `v` now. */
void st_rec_counter(st_rec_thread_t *th, uint32_t track, double v);
/* An activity of `label` ran on `track` from t0 to t1, in the track's clock domain;
 * `flow` (0: none) is the flow it ends, begun by st_rec_flow (a kernel launched by a
 * call on a CPU thread). */
void st_rec_complete(st_rec_thread_t *th, uint32_t track, uint64_t t0, uint64_t t1,
                     uint32_t label, uint32_t flow);
/* A point event of `label` now, on the thread's track. */
void st_rec_instant(st_rec_thread_t *th, uint32_t label);
/* A flow `id` starts (or passes through) the thread now, inside its innermost open
 * call, at a point named `label` (ST_PATH_NONE: unnamed): arrows between tracks,
 * from a CUDA launch to its kernel. */
void st_rec_flow(st_rec_thread_t *th, uint64_t id, uint32_t label);

/* ------------------------------------------------------------------------- */
/* Slow paths and the end                                                    */

/* Refills the signal chunks; spills full ones under flush. Any thread. */
void st_rec_maintain(st_recorder_t *r);
/* From now on st_rec_maintain hands every thread's recorded samples (each sample
 * event, its frames after its st_ev_pair_t) to `fn` on the maintenance thread and
 * frees their room, so that a long run's samples take no more memory than those
 * since the last call: for a sampler that adds them up itself (no timeline needs
 * them). Those still in the lanes at the end are read as before
 * (st_rec_fold_samples). fn runs with the event buffers' lock held and must not
 * record. NULL: keep them (the default). Before the first sample. */
void st_rec_set_sink(st_recorder_t *r, void (*fn)(void *arg, st_rec_thread_t *th, const st_ev_t *e),
                     void *arg);

/* A sampler follows `nthreads` threads: each one's signal lane takes a chunk of
 * its own at its first sample, so the ring keeps at least the configured
 * sig_chunks plus one a thread (up to ST_EV_RING). Any thread, not signal-safe. */
void st_rec_sig_threads(st_recorder_t *r, uint32_t nthreads);

/* Recording has stopped: from now on a thread's end (its pthread key destructor,
 * or st_rec_thread_finish) leaves its state as it is, so that the results can be
 * read while threads still exit; waits for one that is being finished now. Any
 * thread, once recording has stopped, before closing calls and reading. */
void st_rec_seal(st_recorder_t *r);

/* Closes every open call of every thread now (the caller's clocks), innermost
 * first. After recording has stopped (and st_rec_seal where threads may still
 * exit). */
void st_rec_close_all(st_recorder_t *r);

/* Folds every thread's recorded samples into its path table (the sample's metric
 * column, from the root down the frames). A sample's frames are labels, or, with
 * `map`, ids that map[id] turns into labels (a sampler that records raw ids in its
 * handler and names them after the run); a frame whose label is ST_PATH_NONE (or
 * whose id is not below nmap) is left out, its callees hanging from its caller.
 * Once, after recording has stopped. Returns 0, ST_ENOMEM or ST_EIO (a spill could
 * not be read back). */
int st_rec_fold_samples(st_recorder_t *r, const uint32_t *map, uint32_t nmap);

/* The same where one id stands for several frames (a native address: the function
 * there and those inlined into it): id `f` below nids is the labels
 * labels[first[f] .. first[f + 1]), outermost first (none: left out); first has
 * nids + 1 entries, of which only those of the ids the samples hold (and the next
 * one's) are read. */
int st_rec_fold_chains(st_recorder_t *r, const uint32_t *first, const uint32_t *labels,
                       uint32_t nids);

/* Samples lost, all threads (lane busy or no chunk, and threads with no state). */
uint64_t st_rec_samples_lost(st_recorder_t *r);

#endif
