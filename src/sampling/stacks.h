/* A stack sampler's engine, shared by its front ends (issue 11): the Python
 * sampler of `strata python --sample` (src/python/sampler.c) and the native one
 * of `strata sample` (src/native/sampler.c).
 *
 * Design note. A front end knows how to find its threads and how to walk one
 * thread's stack into ids (Python code objects, native return addresses); this
 * module does the rest, alike for both:
 *   - the sampled threads: one st_sthread_t each, added from any thread
 *     (st_stacks_add: registered with the recorder by kernel id, its timer
 *     armed, sampling/timers.h) and dropped when the thread ends; kept until
 *     st_stacks_end, since a signal already sent may still reach the handler;
 *   - the handler: counts the signal and the periods it stands for, caps them at
 *     a quarter of a second's worth (more means the thread kept the signal
 *     blocked: where it was then is not known, counted as `delayed`), calls the
 *     front end's walk, and records the ids as one sample in the thread's signal
 *     lane (st_rec_sample), weighted by the periods; its own CPU time is
 *     counted. No lock, no allocation: what the walk does must be the same;
 *   - the maintenance thread: refills the recorder's signal chunks, moves the
 *     timers when the program takes the signal, looks every half second for
 *     threads that block the signal (their SigBlk in /proc), and calls the
 *     front end's tick (the Python front end takes the GIL there to find new
 *     threads and hold new code objects). It blocks every signal. It wakes
 *     every 20 ms after a tick that found work (threads found or gone, the
 *     signal moved, the front end's news), while the handlers take signal
 *     chunks fast, and after st_stacks_maint_hurry; otherwise every 100 ms,
 *     since each wake-up costs CPU (20 to 35 µs on a virtual machine);
 *   - the samples added up as the run goes: unless a timeline needs them, the
 *     maintenance thread takes each thread's full signal chunks at every tick
 *     (st_rec_set_sink) into a tree of raw id paths per thread (a node per
 *     distinct path, its periods), so a run of hours keeps the memory of its
 *     distinct stacks, not of its samples; st_stacks_fold names the trees'
 *     ids at the end, with the samples still in the lanes;
 *   - the end: every thread's sampled time (its CPU clock or the monotonic
 *     clock, from arming to the end or to its last signal), the timers deleted,
 *     and what sampling did summarised for the model (st_model_stacks_t: rates,
 *     losses, own cost, the first note).
 * One st_stacks_t per process (the signal handler's state is static); a front
 * end owns it. */
#ifndef STRATA_SAMPLING_STACKS_H
#define STRATA_SAMPLING_STACKS_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/err.h"
#include "base/u64map.h"
#include "core/recorder.h"
#include "model/model.h"
#include "sampling/timers.h"

#define ST_STACKS_MAX_THREADS ST_SIGTIMER_SLOTS

typedef struct st_stacks st_stacks_t;

/* One sampled thread. The handler reads `ctx`, `th`, `owner` and writes the
 * counters; the rest is under the sampler's lock. */
typedef struct {
    st_stacks_t *owner;
    void *ctx;                 /* the front end's (its walk gets the thread) */
    uint32_t periods_now;      /* the handler's: the periods the sample being walked
                                * stands for */
    st_rec_thread_t *th;       /* where its samples go (NULL: not sampled) */
    uint64_t tid;
    int slot;                  /* its timer's slot, -1: not armed (any more) */
    int blocked;               /* found blocking the signal (said once) */
    int paused;                /* its timer deleted by st_stacks_pause */
    volatile sig_atomic_t held; /* the front end holds the signal back on purpose (a
                                * wait it wraps): not reported as blocked, and the
                                * periods of the signal that ends it all count */
    uint32_t seen, flags;      /* the front end's (its last scan, what it knows) */
    uint64_t signals_seen;     /* its signals at the last blocked check */
    uint64_t clock0, clock1;   /* its sampling clock when armed and at the end or
                                * when dropped (ns; 0: unknown) */
    _Atomic uint64_t signals, periods, failed, empty, delayed, cpu_ns;
    _Atomic uint64_t last_clock; /* its sampling clock at its last signal (ns) */
} st_sthread_t;

/* The front end's stack walk, in the handler on thread t: up to cap ids into
 * ids, innermost first. Returns their number, 0 when the thread has no stack of
 * the front end's kind (no Python frame), < 0 when it could not be read.
 * Async-signal-safe. */
typedef int (*st_stacks_walk_fn)(st_sthread_t *t, void *ucontext, uint32_t *ids, int cap);

/* The front end's part of maintenance, on the maintenance thread: phase
 * ST_STACKS_BEGIN once when it starts, ST_STACKS_TICK at every tick (every 20 ms
 * while things change, every 100 ms otherwise; s->now_ns is the tick's monotonic
 * time), ST_STACKS_END once before it ends. A tick returns 1 when it found work
 * (the next tick comes after 20 ms), else 0. */
enum { ST_STACKS_BEGIN, ST_STACKS_TICK, ST_STACKS_END };
typedef int (*st_stacks_tick_fn)(st_stacks_t *s, int phase, void *arg);
#define ST_STACKS_HURRY_TICKS 5 /* short ticks after st_stacks_maint_hurry */

/* One thread's samples added up: a tree of id paths (node 0: the root). */
typedef struct {
    st_u64map_t children;        /* parent << 32 | id -> node */
    uint32_t *parent, *id;
    uint64_t *periods;
    uint32_t n, cap;
} st_idtree_t;

#define ST_STACKS_TREE_MAX (1u << 22) /* nodes a thread's tree may have */

struct st_stacks {
    st_sigsampler_t sig;
    st_recorder_t *rec;
    uint32_t metric;             /* the recorder's samples metric */
    uint32_t max_periods;        /* the most periods one signal stands for */
    st_stacks_walk_fn walk;
    pthread_mutex_t lock;        /* threads added, armed, dropped; the timers moved;
                                  * sampling stopped */
    st_sthread_t *threads[ST_STACKS_MAX_THREADS];
    _Atomic uint32_t nthreads;
    char note[sizeof(st_msg_t) + 64]; /* the first thing that went wrong or changed */
    uint64_t ntasks_seen;        /* st_stacks_tasks_changed's last count */
    /* the maintenance thread */
    pthread_t maint;
    int maint_running;
    pthread_mutex_t mlock;
    pthread_cond_t wake;
    int stop;
    uint32_t hurry;              /* short ticks still owed to st_stacks_maint_hurry
                                  * (under mlock) */
    uint64_t now_ns, blocked_ns; /* the tick's time, the last blocked check's */
    uint32_t chunks_seen;        /* signal chunks taken, at the last tick */
    uint64_t maint_cpu_ns;
    st_stacks_tick_fn tick;
    void *tick_arg;
    int on;
    uint32_t epoch;              /* starts of sampling so far (st_stacks_add_own) */
    /* the samples added up (maintenance thread; read at the end) */
    st_idtree_t *trees;          /* by the recorder's thread index */
    uint32_t ntrees;
    uint64_t tree_lost;          /* samples no tree had room for */
};

/* Zero-initialised storage with the two locks and the condition initialised. */
#define ST_STACKS_INIT                                                                  \
    {                                                                                   \
        .lock = PTHREAD_MUTEX_INITIALIZER, .mlock = PTHREAD_MUTEX_INITIALIZER,          \
        .wake = PTHREAD_COND_INITIALIZER                                                \
    }

/* Installs the signal (sampling/timers.h: signo 0 picks a free one) for timers
 * on `clock` at `freq` a second, for samples into rec's metric `metric`.
 * Returns 0, or the install's error with msg saying why. */
int st_stacks_start(st_stacks_t *s, st_recorder_t *rec, uint32_t metric, int signo,
                    st_sigclock_t clock, double freq, st_stacks_walk_fn walk, st_msg_t *msg);

/* Samples thread `tid` from now on: its state (registered with the recorder,
 * its clock read, its timer armed), or NULL when out of memory, past
 * ST_STACKS_MAX_THREADS or once st_stacks_stop has run. A thread that could not be armed is kept (its state
 * says so: slot -1) and noted. Any thread, not a handler; takes the lock. */
st_sthread_t *st_stacks_add(st_stacks_t *s, uint64_t tid, void *ctx);

/* Thread t ends (or is no longer to be sampled): its timer goes, its sampled
 * time ends now. Any thread; takes the lock. */
void st_stacks_drop(st_stacks_t *s, st_sthread_t *t);

/* st_stacks_add for a thread that drops itself when it ends, which may come after
 * sampling stopped and its state was freed: *epoch says which start of sampling
 * it belongs to, for st_stacks_drop_own. */
st_sthread_t *st_stacks_add_own(st_stacks_t *s, uint64_t tid, void *ctx, uint32_t *epoch);
/* Thread t, added by st_stacks_add_own in `epoch`, ends: dropped if sampling still
 * runs in that epoch (otherwise st_stacks_stop ended its sampling, and t may be
 * freed: it is not touched). Any thread; takes the lock. */
void st_stacks_drop_own(st_stacks_t *s, st_sthread_t *t, uint32_t epoch);

/* Deletes every armed timer (before an exec: see native/sampler.h);
 * st_stacks_resume arms them again (the exec failed). Any thread, not a handler. */
void st_stacks_pause(st_stacks_t *s);
void st_stacks_resume(st_stacks_t *s);

/* Keeps the first note for the end of the run (the note field). Any thread. */
__attribute__((format(printf, 2, 3))) void st_stacks_note(st_stacks_t *s, const char *fmt, ...);

/* 1 when the process's thread count (/proc/self/task's link count, one stat)
 * changed since the last call. */
int st_stacks_tasks_changed(st_stacks_t *s);

/* Starts the maintenance thread with the front end's tick (may be NULL). It
 * blocks every signal. 0 or ST_EIO. */
int st_stacks_maint_start(st_stacks_t *s, st_stacks_tick_fn tick, void *arg);

/* Something is about to change (the front end heard a thread start): the next
 * ST_STACKS_HURRY_TICKS ticks come after 20 ms, the one under way included. Any
 * thread, not a handler. */
void st_stacks_maint_hurry(st_stacks_t *s);
/* Ends the maintenance thread and waits for it (the Python front end lets the
 * GIL go around this: its tick takes it). */
void st_stacks_maint_stop(st_stacks_t *s);

/* Sampling ends: every live thread's clock is read, the timers are deleted and
 * the previous handler is put back; no walk runs after this. */
void st_stacks_stop(st_stacks_t *s);

/* Folds every sample into its thread's paths (the metric given at start): those
 * the trees added up and those still in the lanes, an id `f` standing for the
 * labels chain[first[f] .. first[f + 1]) (st_rec_fold_chains). After
 * st_stacks_stop and st_stacks_maint_stop. 0, ST_ENOMEM or ST_EIO. */
int st_stacks_fold(st_stacks_t *s, const uint32_t *first, const uint32_t *chain, uint32_t nids);

/* What sampling did, for the model (after st_stacks_stop and the fold): rates,
 * counts, own cost, the note. `unnamed`: frames the front end could not name. */
void st_stacks_summarise(st_stacks_t *s, st_model_stacks_t *st, uint64_t unnamed);

/* Frees the threads' states (after st_stacks_summarise); s can start again. */
void st_stacks_end(st_stacks_t *s);

#endif
