/* The Python stack sampler (see sampler.h). */
#define _GNU_SOURCE
#include "python/sampler.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "python/frames.h"
#include "python/labels.h"
#include "python/pystate.h"
#include "python/threads.h"
#include "sampling/timers.h"

/* The code table: entry i holds a code object's address; i is its id in samples. */
#define CODE_BITS 16
#define NCODES (1u << CODE_BITS)
#define CODE_PROBES 64
#define CODE_UNKNOWN NCODES        /* the id of a frame whose code found no entry */
#define TOMB ((const void *)1)     /* an entry whose code died before it was held */
/* names[] of an entry not held: not named yet (0: the tables start zeroed, and
 * touching 2 MB of them at each start costs page faults), left out, not a code
 * object, or its label + 1 */
#define NAME_NONE 0u
#define NAME_LEFT_OUT UINT32_MAX
#define NAME_UNKNOWN (UINT32_MAX - 1)

#define MAINT_NS 20000000L         /* the maintenance thread's period */
#define RESCAN_TICKS 25            /* threads looked at every half second at least */
#define MAX_THREADS ST_SIGTIMER_SLOTS

/* One sampled thread. The handler reads `tstate`, `th` and writes the counters;
 * the rest is the maintenance thread's (GIL held). */
typedef struct {
    PyThreadState *tstate;
    st_rec_thread_t *th;
    uint64_t tid;
    int slot;
    int named;                 /* threading named it */
    int blocked;               /* found blocking the signal (said once) */
    uint64_t signals_seen;     /* its signals at the last scan */
    uint64_t clock0, clock1;   /* its sampling clock (ns) when armed and at the end (0:
                                * it had ended): the time it was sampled for */
    uint32_t seen;             /* the scan that last found it */
    _Atomic uint64_t signals, periods, failed, empty, delayed, cpu_ns;
    _Atomic uint64_t last_clock; /* its sampling clock at its last signal (ns) */
} sthread_t;

static struct {
    st_sigsampler_t sig;
    st_recorder_t *rec;
    uint32_t metric;
    uint32_t max_periods;         /* the most periods one signal stands for */
    /* the code table */
    _Atomic(const void *) keys[NCODES];
    PyObject *held[NCODES];       /* references to the entries' code objects */
    _Atomic intptr_t sizes[NCODES]; /* a held code's size (code units): the walker
                                   * trusts a held code without reading it */
    _Atomic uint32_t order[NCODES]; /* entry + 1 in the order claimed (0: not written
                                   * yet), so only the claimed entries are visited */
    uint32_t names[NCODES];       /* entries named before they were held (NAME_*) */
    _Atomic uint32_t nclaimed;    /* entries claimed (handlers) */
    uint32_t nheld;               /* entries looked at by maintenance */
    _Atomic uint64_t code_full;   /* frames whose code found no entry */
    /* threads */
    sthread_t *threads[MAX_THREADS];
    uint32_t nthreads;
    uint32_t scan;
    char note[sizeof(st_msg_t) + 64]; /* the first thing that went wrong or changed */
    uint64_t ntasks_seen;         /* /proc/self/task's size at the last scan */
    /* the maintenance thread */
    pthread_t maint;
    int maint_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    uint64_t maint_cpu_ns;
    PyThreadState *maint_ts;
    int watcher;                  /* 3.12+: the code watcher's id, or -1 */
    int on;                       /* sampling runs */
} sp = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .watcher = -1};

/* ------------------------------------------------------------------------- */
/* The handler                                                               */

static inline uint32_t code_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 4;
    x *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> (64 - CODE_BITS));
}

/* The id of code object `code`, claiming a free entry for it if it has none.
 * Async-signal-safe: loads and one compare-and-swap. */
static uint32_t code_id(const void *code)
{
    uint32_t h = code_hash(code);
    for (int probe = 0; probe < CODE_PROBES; probe++, h = (h + 1) & (NCODES - 1)) {
        const void *k = atomic_load_explicit(&sp.keys[h], memory_order_acquire);
        if (k == code)
            return h;
        if (k == NULL) {
            if (atomic_compare_exchange_strong(&sp.keys[h], &k, code)) {
                uint32_t at = atomic_fetch_add(&sp.nclaimed, 1);
                atomic_store_explicit(&sp.order[at], h + 1, memory_order_release);
                return h;
            }
            if (k == code)
                return h;
        }
    }
    atomic_fetch_add_explicit(&sp.code_full, 1, memory_order_relaxed);
    return CODE_UNKNOWN;
}

/* The walker's cache (frames.h): a held code object's size. */
static intptr_t known_code(const void *code, void *ctx)
{
    (void)ctx;
    uint32_t h = code_hash(code);
    for (int probe = 0; probe < CODE_PROBES; probe++, h = (h + 1) & (NCODES - 1)) {
        const void *k = atomic_load_explicit(&sp.keys[h], memory_order_acquire);
        if (k == code)
            return atomic_load_explicit(&sp.sizes[h], memory_order_acquire);
        if (k == NULL)
            return 0;
    }
    return 0;
}

static void on_sample(void *ctx, void *ucontext, uint32_t periods)
{
    (void)ucontext;
    sthread_t *t = ctx;
    /* the handler's own cost in its thread's CPU time (clock_gettime is
     * async-signal-safe): a wall clock would count whatever else the CPU did
     * meanwhile (interrupts, a virtual machine's other guests) */
    uint64_t t0 = st_clock_thread_cpu_ns();
    atomic_store_explicit(&t->last_clock,
                          sp.sig.clock == ST_SIGCLOCK_CPU ? t0 : st_clock_monotonic_ns(),
                          memory_order_relaxed);
    st_pyframe_t fr[ST_EV_MAX_FRAMES];
    uint32_t ids[ST_EV_MAX_FRAMES];
    atomic_fetch_add_explicit(&t->signals, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->periods, periods, memory_order_relaxed);
    /* More periods than the kernel's tick lets pass between two signals (a
     * quarter of a second of them): the thread blocked the signal meanwhile, and
     * where it was then is not known. */
    if (periods > sp.max_periods) {
        atomic_fetch_add_explicit(&t->delayed, periods - sp.max_periods, memory_order_relaxed);
        periods = sp.max_periods;
    }
    int n = st_pyframes_walk_known(t->tstate, fr, ST_EV_MAX_FRAMES, known_code, NULL);
    if (n < 0) {
        atomic_fetch_add_explicit(&t->failed, periods, memory_order_relaxed);
    } else if (n == 0) {
        atomic_fetch_add_explicit(&t->empty, periods, memory_order_relaxed);
    } else {
        for (int i = 0; i < n; i++)
            ids[i] = code_id(fr[i].code);
        st_rec_sample(t->th, ids, (uint32_t)n, sp.metric, periods);
    }
    atomic_fetch_add_explicit(&t->cpu_ns, st_clock_thread_cpu_ns() - t0, memory_order_relaxed);
}

/* ------------------------------------------------------------------------- */
/* Maintenance (GIL held)                                                    */

/* Holds a reference to every entry claimed since the last call, so that its
 * address names one code object until the end. */
static void hold_new_codes(void)
{
    uint32_t n = atomic_load(&sp.nclaimed);
    if (n > NCODES)
        n = NCODES;
    for (; sp.nheld < n; sp.nheld++) {
        uint32_t i = atomic_load_explicit(&sp.order[sp.nheld], memory_order_acquire);
        if (i-- == 0)
            break; /* claimed, its index not written yet: next time */
        if (sp.held[i] || sp.names[i] != NAME_NONE)
            continue;
        const void *k = atomic_load_explicit(&sp.keys[i], memory_order_acquire);
        if (!k || k == TOMB)
            continue;
        /* alive: a frame held it when it was sampled, and on 3.12+ the watcher
         * would have named and retired the entry had it died since; on 3.11 it
         * may have died (the read is checked) */
        if (st_pyframes_is_code(k)) {
            sp.held[i] = Py_NewRef((PyObject *)k);
            atomic_store_explicit(&sp.sizes[i], Py_SIZE(sp.held[i]), memory_order_release);
        } else
            sp.names[i] = NAME_UNKNOWN;
    }
}

/* The label of code `co` as the deterministic profile makes it, or ST_PATH_NONE
 * when the profile leaves the code out (filters, strata's own). */
static uint32_t label_of(PyCodeObject *co)
{
    /* 3.13+: the `__init__` cleanup shim, a static code object in read-only memory
     * (no extra slot can be set on it) that sys._getframe hides: left out too */
    if (PyUnicode_Check(co->co_name) && PyUnicode_Check(co->co_filename) &&
        PyUnicode_CompareWithASCIIString(co->co_name, "__init__") == 0 &&
        PyUnicode_CompareWithASCIIString(co->co_filename, "__init__") == 0 &&
        PyCode_Addr2Line(co, 0) < 0)
        return ST_PATH_NONE;
    codeinfo_t *ci = code_info(co);
    if (!ci || !ci->keep)
        return ST_PATH_NONE;
    return ci->label != ST_PATH_NONE ? ci->label : st_pylabel_resolve(ci, co);
}

#if PY_VERSION_HEX >= 0x030C0000
/* A code object dies: if the table has an entry for it not yet held, the entry is
 * named now and retired (TOMB), so that a code object made later at the same
 * address gets an entry of its own. */
static int on_code_event(PyCodeEvent event, PyCodeObject *co)
{
    if (event != PY_CODE_EVENT_DESTROY)
        return 0;
    uint32_t h = code_hash(co);
    for (int probe = 0; probe < CODE_PROBES; probe++, h = (h + 1) & (NCODES - 1)) {
        const void *k = atomic_load_explicit(&sp.keys[h], memory_order_acquire);
        if (k == NULL)
            return 0;
        if (k == (const void *)co) {
            if (!sp.held[h]) {
                PyObject *et, *ev, *tb;
                PyErr_Fetch(&et, &ev, &tb);
                uint32_t label = label_of(co);
                sp.names[h] = label >= NAME_UNKNOWN - 1 ? NAME_LEFT_OUT : label + 1;
                PyErr_Restore(et, ev, tb);
                atomic_store(&sp.keys[h], TOMB);
            }
            return 0;
        }
    }
    return 0;
}
#endif

/* The kernel's count of the process's threads, or 0: /proc/self/task's link
 * count is 2 + its threads (one stat, no directory read). */
static uint64_t count_tasks(void)
{
    struct stat st;
    return stat("/proc/self/task", &st) == 0 ? (uint64_t)st.st_nlink : 0;
}

static sthread_t *find_thread(PyThreadState *ts)
{
    for (uint32_t i = 0; i < sp.nthreads; i++)
        if (sp.threads[i]->tstate == ts && sp.threads[i]->slot >= 0)
            return sp.threads[i];
    return NULL;
}

/* Keeps the first note for the end of the run. */
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    if (*sp.note)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sp.note, sizeof sp.note, fmt, ap);
    va_end(ap);
}

/* Names the thread's results as threading names it, once threading knows it. */
static void name_thread(sthread_t *t, PyThreadState *ts)
{
    char name[64];
    t->named = st_pythread_name(ts->thread_id, name, sizeof name);
    /* a thread the profile hook follows too is named by it (the same name) */
    if (t->named || strncmp(t->th->name, "Thread-", 7) == 0)
        st_rec_thread_name(t->th, name);
}

/* Thread `tid`'s sampling clock now (ns): its CPU time (the kernel's per-thread
 * clock id, as the timers use it) or the monotonic clock; 0 when it has ended. */
static uint64_t sampling_clock(uint64_t tid)
{
    /* the thread's CPU clock exists while the thread does */
    struct timespec ts;
    if (clock_gettime(st_sigsampler_clockid((pid_t)tid, ST_SIGCLOCK_CPU), &ts) < 0)
        return 0;
    if (sp.sig.clock == ST_SIGCLOCK_WALL)
        return st_clock_monotonic_ns();
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads the clock of every thread still alive (the end), so that its sampled
 * time runs to the end; a thread that ended counts to its last signal. */
static void read_clocks(void)
{
    for (uint32_t i = 0; i < sp.nthreads; i++) {
        sthread_t *t = sp.threads[i];
        t->clock1 = t->slot >= 0 ? sampling_clock(t->tid) : 0;
    }
}

/* 1 when thread `tid` blocks the sampling signal (its SigBlk in /proc). */
static int blocks_signal(uint64_t tid)
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
    return found && sp.sig.signo <= 64 && (mask >> (sp.sig.signo - 1)) & 1;
}

/* Arms the timer of every Python thread not armed yet, and disarms those whose
 * thread state is gone. */
static void scan_threads(void)
{
    sp.scan++;
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts;
         ts = PyThreadState_Next(ts)) {
        if (ts == sp.maint_ts || ts->native_thread_id == 0)
            continue;
        sthread_t *t = find_thread(ts);
        if (t && t->tid == (uint64_t)ts->native_thread_id) {
            t->seen = sp.scan;
            if (!t->named && t->th)
                name_thread(t, ts);
            continue;
        }
        if (sp.nthreads == MAX_THREADS)
            continue;
        t = calloc(1, sizeof *t);
        if (!t)
            continue;
        t->tstate = ts;
        t->tid = (uint64_t)ts->native_thread_id;
        t->th = st_rec_register_tid(sp.rec, t->tid);
        t->seen = sp.scan;
        if (t->th)
            name_thread(t, ts);
        st_msg_t msg;
        t->clock0 = t->clock1 = sampling_clock(t->tid);
        t->slot = t->th ? st_sigsampler_arm(&sp.sig, (pid_t)t->tid, t, &msg) : -1;
        if (t->slot < 0)
            note("a thread could not be sampled: %s", t->th ? msg.text : "out of memory");
        /* kept even if not armed: its counters are read at the end */
        sp.threads[sp.nthreads++] = t;
    }
    /* a chunk ready for each thread's first samples, the new ones' included */
    st_rec_sig_threads(sp.rec, sp.nthreads);
    /* threads that ended: their timers go (the states stay for the handler) */
    for (uint32_t i = 0; i < sp.nthreads; i++) {
        sthread_t *t = sp.threads[i];
        if (t->slot >= 0 && t->seen != sp.scan) {
            st_sigsampler_disarm(&sp.sig, t->slot);
            t->slot = -1;
        }
        /* a thread that took no sample since the last scan may block the signal */
        uint64_t n = atomic_load(&t->signals);
        if (t->slot >= 0 && !t->blocked && n == t->signals_seen && blocks_signal(t->tid)) {
            t->blocked = 1;
            note("thread %s blocks signal %d: it is not sampled while it does",
                 t->th ? t->th->name : "?", sp.sig.signo);
        }
        t->signals_seen = n;
    }
}

static void *maintain(void *arg)
{
    (void)arg;
    PyGILState_STATE g = PyGILState_Ensure();
    sp.maint_ts = PyThreadState_Get();
    PyThreadState *saved = PyEval_SaveThread();
    uint64_t cpu0 = st_clock_thread_cpu_ns();
    uint32_t tick = 0;
    pthread_mutex_lock(&sp.lock);
    while (!sp.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += MAINT_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&sp.wake, &sp.lock, &until);
        if (sp.stop)
            break;
        pthread_mutex_unlock(&sp.lock);
        st_rec_maintain(sp.rec);
        st_msg_t msg;
        if (st_sigsampler_check(&sp.sig, &msg) != 0)
            note("%s", msg.text);
        uint64_t tasks = count_tasks();
        int new_threads = tasks != sp.ntasks_seen || ++tick % RESCAN_TICKS == 0;
        int new_codes = atomic_load(&sp.nclaimed) != sp.nheld;
        if (new_threads || new_codes) {
            PyEval_RestoreThread(saved);
            if (new_codes)
                hold_new_codes();
            if (new_threads) {
                sp.ntasks_seen = tasks;
                scan_threads();
            }
            saved = PyEval_SaveThread();
        }
        pthread_mutex_lock(&sp.lock);
    }
    pthread_mutex_unlock(&sp.lock);
    sp.maint_cpu_ns = st_clock_thread_cpu_ns() - cpu0;
    PyEval_RestoreThread(saved);
    PyGILState_Release(g);
    return NULL;
}

/* Starts the maintenance thread, which blocks every signal: signals sent to the
 * process go to the program's threads, as without strata. */
static int start_maint(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    sp.stop = 0;
    int rc = pthread_create(&sp.maint, NULL, maintain, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    sp.maint_running = rc == 0;
    return rc == 0 ? 0 : -1;
}

/* Ends the maintenance thread (GIL held: released while it takes the GIL to
 * leave). */
static void stop_maint(void)
{
    if (!sp.maint_running)
        return;
    pthread_mutex_lock(&sp.lock);
    sp.stop = 1;
    pthread_cond_signal(&sp.wake);
    pthread_mutex_unlock(&sp.lock);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(sp.maint, NULL);
    Py_END_ALLOW_THREADS
    sp.maint_running = 0;
}

void st_pysampler_before_fork(void)
{
    if (sp.on)
        stop_maint();
}

void st_pysampler_after_fork_parent(void)
{
    if (sp.on && !sp.maint_running && start_maint() < 0)
        note("the sampler's thread could not start again after a fork: code objects "
             "sampled since are named at the end, threads started since are not sampled");
}

/* ------------------------------------------------------------------------- */
/* The collector                                                             */

static int sampler_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    const st_settings_t *set = &st_py.settings;
    if (!st_settings_bool(set, ST_S_USE_SAMPLING))
        return 0;
    const char *why = NULL;
    if (st_pyframes_check(&why) < 0) {
        PyErr_Clear();
        fprintf(stderr, "strata: warning: stack sampling is off: %s\n", why);
        return 0;
    }
    double freq = st_settings_float(set, ST_S_SAMPLING_FREQ);
    st_sigclock_t clock =
        strcmp(st_settings_str(set, ST_S_SAMPLING_CLOCK), "wall") == 0 ? ST_SIGCLOCK_WALL
                                                                      : ST_SIGCLOCK_CPU;
    int rc = st_sigsampler_install(&sp.sig, (int)st_settings_int(set, ST_S_SAMPLING_SIGNAL), clock,
                                   (uint64_t)(1e9 / freq), on_sample, msg);
    if (rc < 0)
        return rc;
    /* the code table is empty: never used, or emptied by the last run's stop */
    atomic_store(&sp.code_full, 0);
    *sp.note = '\0';
    sp.rec = &s->rec;
    sp.metric = s->rec.m_samples;
    /* a quarter of a second of periods: far more than the kernel's tick lets pass
     * between two signals of a running thread, even one sharing its CPU with many
     * (64 threads on 2 cores see 30 ms), far less than a signal kept blocked */
    sp.max_periods = 4 + (uint32_t)(freq / 4.0);
    sp.ntasks_seen = count_tasks();
    scan_threads();
#if PY_VERSION_HEX >= 0x030C0000
    sp.watcher = PyCode_AddWatcher(on_code_event);
    if (sp.watcher < 0)
        PyErr_Clear(); /* all taken: 3.11's window (sampler.h) */
#endif
    if (start_maint() < 0) {
        st_sigsampler_uninstall(&sp.sig);
        return st_msg_set(msg, ST_EIO, "cannot start the stack sampler's thread");
    }
    sp.on = 1;
    s->stack_sampling = 1;
    return 0;
}

/* The claimed entries, in the order claimed (after the handlers are drained):
 * entry `i`'s index. */
static uint32_t claimed(uint32_t i)
{
    return atomic_load(&sp.order[i]) - 1;
}

/* The label of every claimed entry (the only ids samples hold); entries left out
 * by the filters map to ST_PATH_NONE, entries with no code to "<unknown>". The
 * map is calloc'd: the pages of ids never claimed are never touched. */
static uint32_t *code_labels(void)
{
    uint32_t *map = calloc(NCODES + 1, sizeof *map);
    if (!map)
        return NULL;
    uint32_t unknown = ST_PATH_NONE;
    st_intern_id(&st_py.session.labels, "<unknown>", 9, &unknown);
    uint32_t n = atomic_load(&sp.nclaimed);
    for (uint32_t k = 0; k < n && k < NCODES; k++) {
        uint32_t i = claimed(k);
        if (sp.held[i])
            map[i] = label_of((PyCodeObject *)sp.held[i]);
        else if (sp.names[i] == NAME_LEFT_OUT)
            map[i] = ST_PATH_NONE; /* named by the watcher: left out */
        else if (sp.names[i] != NAME_NONE && sp.names[i] != NAME_UNKNOWN)
            map[i] = sp.names[i] - 1; /* named by the watcher */
        else
            map[i] = unknown; /* code that died unheld (3.11) */
    }
    map[CODE_UNKNOWN] = unknown;
    PyErr_Clear();
    return map;
}

/* Empties the code table for a later run: only the claimed entries were written. */
static void clear_codes(void)
{
    uint32_t n = atomic_load(&sp.nclaimed);
    for (uint32_t k = 0; k < n && k < NCODES; k++) {
        uint32_t i = claimed(k);
        atomic_store(&sp.keys[i], NULL);
        atomic_store(&sp.sizes[i], 0);
        atomic_store(&sp.order[k], 0);
        sp.names[i] = NAME_NONE;
        Py_CLEAR(sp.held[i]);
    }
    atomic_store(&sp.nclaimed, 0);
    sp.nheld = 0;
}

/* What the sampler did, for the model (after the handlers are drained). */
static void summarise(st_model_stacks_t *st, st_recorder_t *rec)
{
    memset(st, 0, sizeof *st);
    st->freq = 1e9 / (double)sp.sig.period_ns;
    st->clock = sp.sig.clock == ST_SIGCLOCK_WALL ? "wall" : "cpu";
    st->threads = sp.nthreads;
    uint64_t cpu_ns = 0;
    st->rate_min = st->rate_max = 0;
    for (uint32_t i = 0; i < sp.nthreads; i++) {
        sthread_t *t = sp.threads[i];
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
        st->signals += atomic_load(&t->signals);
        st->periods += atomic_load(&t->periods);
        st->unreadable += atomic_load(&t->failed);
        st->no_python += atomic_load(&t->empty);
        st->delayed += atomic_load(&t->delayed);
        cpu_ns += atomic_load(&t->cpu_ns);
    }
    st->lost = st_rec_samples_lost(rec);
    /* what the fold left on the roots: samples with no frame the filters keep */
    for (uint32_t i = 0; i < rec->nthreads; i++)
        st->left_out += st_mcols_u64(&rec->threads[i]->paths.cols, rec->m_samples)[0];
    st->unnamed = atomic_load(&sp.code_full);
    st->self_cpu_s = (double)(cpu_ns + sp.maint_cpu_ns) * 1e-9;
    st->note = *sp.note ? sp.note : NULL;
}

static void sampler_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    if (!sp.on)
        return;
    sp.on = 0;
    read_clocks(); /* the threads' sampled time, before the timers go */
    st_sigsampler_uninstall(&sp.sig); /* no handler runs after this */
    stop_maint();
#if PY_VERSION_HEX >= 0x030C0000
    if (sp.watcher >= 0)
        PyCode_ClearWatcher(sp.watcher);
    sp.watcher = -1;
#endif
    hold_new_codes();
    uint32_t *map = code_labels();
    if (!map || st_rec_fold_samples(&s->rec, map, NCODES + 1) < 0)
        s->stack_failed = 1;
    free(map);
    clear_codes();
    summarise(&s->stacks, &s->rec);
    for (uint32_t i = 0; i < sp.nthreads; i++)
        free(sp.threads[i]);
    sp.nthreads = 0;
}

static void sampler_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    if (s->stack_sampling)
        m->stacks = &s->stacks;
}

const st_collector_t st_pysampler_collector = {
    .name = "stack sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .contribute = sampler_contribute,
};
