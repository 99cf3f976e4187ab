/* The Python stack sampler (see sampler.h). */
#define _GNU_SOURCE
#include "python/sampler.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gotpatch.h"
#include "core/clock.h"
#include "python/frames.h"
#include "python/labels.h"
#include "python/pystate.h"
#include "python/threads.h"
#include "sampling/ehframe.h"
#include "sampling/addrtab.h"
#include "sampling/nstack.h"
#include "sampling/stacks.h"

/* The code table: entry i holds a code object's address; i is its id in samples. */
#define CODE_BITS 16
#define NCODES (1u << CODE_BITS)
#define CODE_UNKNOWN NCODES        /* the id of a frame whose code found no entry */
#define TOMB ((uintptr_t)1)        /* an entry whose code died before it was held */
/* names[] of an entry not held: not named yet (0: the tables start zeroed, and
 * touching them at each start costs page faults), left out, not a code object,
 * or its label + 1 */
#define NAME_NONE 0u
#define NAME_LEFT_OUT UINT32_MAX
#define NAME_UNKNOWN (UINT32_MAX - 1)

#define RESCAN_NS 500000000ull     /* threads looked at every half second at least */
#define UNBOUND_TRIES 25           /* scans for a thread state not run yet: half a second */
/* How long new code objects wait for the main thread to hold them (hold_soon)
 * before the maintenance thread takes the GIL to hold them itself */
#define HOLD_WAIT_NS 40000000ull

#define NATIVE_BASE (CODE_UNKNOWN + 1) /* native frames' ids: NATIVE_BASE + an nstack id */

/* The line table: entry i holds an innermost frame's code object and instruction
 * (LINE_KEY), the periods of the samples taken there in line_periods[i]; lines
 * are found after the run, from the code objects the code table holds. */
#define LINE_BITS 15
#define NLINES (1u << LINE_BITS)
#define LINE_SHIFT 48 /* code objects are user-space addresses, below 2^47 */
#define LINE_KEY(code, idx)                                                                \
    ((uintptr_t)(code) | (uintptr_t)((idx) < 0xffff ? (idx) : 0xffff) << LINE_SHIFT)

/* A sampled thread's flags: threading named it; or it ended, armed at its start,
 * and a scan tried to name it. */
#define FLAG_NAMED 1u
#define FLAG_TRIED 2u

/* One sampled thread's own state (its st_sthread_t's ctx). */
typedef struct {
    PyThreadState *tstate;       /* read and written with __atomic (the handler of a
                                  * thread armed at its start finds it: see own) */
    unsigned long ident;         /* its Python id (threading's) when last scanned: it
                                  * names the thread after its state is gone */
    int own;                     /* armed by the thread itself when it started
                                  * (boot_thread), before it had a thread state; it
                                  * drops itself when it ends (own_end) */
    st_unwind_thread_t uw;       /* --native: its stack, for the unwinder */
} pythread_t;

#define EVAL_PARTS 3 /* parts of the eval loop outside its symbol, at most */

static st_stacks_t stacks = ST_STACKS_INIT;
static st_nstack_t nstack = ST_NSTACK_INIT;

static struct {
    /* the code table: ids of code objects, and per id */
    st_addrtab_t codes;
    PyObject *held[NCODES];       /* references to the entries' code objects */
    _Atomic intptr_t sizes[NCODES]; /* a held code's size (code units): the walker
                                   * trusts a held code without reading it */
    uint32_t names[NCODES];       /* entries named before they were held (NAME_*) */
    st_addrtab_t lines;           /* the line table */
    _Atomic uint64_t line_periods[NLINES];
    uint32_t nheld;               /* entries looked at by maintenance */
    uint32_t scan;
    uint64_t scan_ns;             /* the last scan's time (monotonic) */
    int unbound;                  /* it met a thread state no thread runs yet */
    uint32_t unbound_tries;       /* scans since, that met one still */
    PyThreadState *maint_ts, *maint_saved; /* the maintenance thread's */
    PyGILState_STATE maint_gil;
    int watcher;                  /* 3.12+: the code watcher's id, or -1 */
    _Atomic int hold_asked;       /* hold_soon is queued as a pending call */
    _Atomic int threads_heard;    /* w_pthread_create hurries the ticks */
    uint64_t hold_asked_ns;       /* since then (monotonic; the maintenance thread's) */
    int on;                       /* sampling runs */
    int native;                   /* --native: C frames too */
    st_range_t eval[1 + EVAL_PARTS]; /* the eval loop's code (_PyEval_EvalFrameDefault)
                                   * and its parts that lie elsewhere */
    int neval;
    uint64_t loads;               /* the loader's count of loads and unloads, last seen */
    _Atomic uint64_t native_cut;  /* --native: samples whose native walk met no eval loop */
} sp; /* zero-initialised (.bss: its tables are 1.5 MB); watcher set at start */

/* ------------------------------------------------------------------------- */
/* The handler                                                               */

/* The walker's cache (frames.h): a held code object's size. */
static intptr_t known_code(const void *code, void *ctx)
{
    (void)ctx;
    uint32_t id = st_addrtab_find(&sp.codes, (uintptr_t)code);
    return id == ST_ADDRTAB_NONE ? 0 : atomic_load_explicit(&sp.sizes[id], memory_order_acquire);
}

/* The stack walk (sampling/stacks.h): the thread's Python frames as code ids;
 * with --native, first the C frames called from the innermost Python frame (the
 * native stack down to the interpreter's eval loop, whose frames the Python ones
 * stand for), as NATIVE_BASE + their ids. A native walk that meets no eval loop
 * (the thread is outside Python, or its stack could not be walked that far) adds
 * nothing: its frames could not be put in order with the Python ones. */
static int walk(st_sthread_t *t, void *ucontext, uint32_t *ids, int cap)
{
    pythread_t *p = t->ctx;
    int n = 0;
    if (sp.native) {
        int stopped = 0;
        n = st_nstack_walk(&nstack, ucontext, &p->uw, 0, sp.eval, sp.neval, NATIVE_BASE,
                           ids, cap, &stopped);
        if (n < 0 || !stopped) {
            atomic_fetch_add_explicit(&sp.native_cut, 1, memory_order_relaxed);
            n = 0;
        }
    }
    PyThreadState *ts = __atomic_load_n(&p->tstate, __ATOMIC_ACQUIRE);
    if (!ts && p->own) {
        /* a thread armed at its start: its state once the interpreter gave it one
         * (its thread-specific slot: one read, no lock); before, no Python frame */
        ts = PyGILState_GetThisThreadState();
        if (!ts)
            return 0;
        __atomic_store_n(&p->tstate, ts, __ATOMIC_RELEASE);
    }
    st_pyframe_t fr[ST_EV_MAX_FRAMES];
    int room = cap - n < ST_EV_MAX_FRAMES ? cap - n : ST_EV_MAX_FRAMES;
    int np = st_pyframes_walk_known(ts, fr, room, known_code, NULL);
    if (np <= 0)
        return np; /* no Python frame: the thread is not sampled (its C frames alone
                    * would hang from no Python caller) */
    for (int i = 0; i < np; i++) {
        uint32_t id = st_addrtab_id(&sp.codes, (uintptr_t)fr[i].code, NULL);
        ids[n + i] = id == ST_ADDRTAB_NONE ? CODE_UNKNOWN : id;
    }
    if (fr[0].idx >= 0) {
        uint32_t line = st_addrtab_id(&sp.lines, LINE_KEY(fr[0].code, fr[0].idx), NULL);
        if (line != ST_ADDRTAB_NONE)
            atomic_fetch_add_explicit(&sp.line_periods[line], t->periods_now,
                                      memory_order_relaxed);
    }
    return n + np;
}

/* ------------------------------------------------------------------------- */
/* Maintenance (GIL held)                                                    */

/* Holds a reference to every entry claimed since the last call, so that its
 * address names one code object until the end. */
static void hold_new_codes(void)
{
    uint32_t n = st_addrtab_count(&sp.codes);
    for (; sp.nheld < n; sp.nheld++) {
        uint32_t i = st_addrtab_claimed(&sp.codes, sp.nheld);
        if (i == ST_ADDRTAB_NONE)
            break; /* claimed, its index not written yet: next time */
        if (sp.held[i] || sp.names[i] != NAME_NONE)
            continue;
        uintptr_t k = st_addrtab_key(&sp.codes, i);
        if (!k || k == TOMB)
            continue;
        /* alive: a frame held it when it was sampled, and on 3.12+ the watcher
         * would have named and retired the entry had it died since. Without a
         * watcher (3.11) it may have died and its memory been reused: the reads
         * are checked, and the whole object's, not only its header (a pytest run
         * under callgrind held a block whose count and type were a code's and
         * whose name was not an object, and crashed on naming it) */
        if (sp.watcher >= 0 ? st_pyframes_is_code((const void *)k)
                            : st_pyframes_is_whole_code((const void *)k)) {
            sp.held[i] = Py_NewRef((PyObject *)k);
            atomic_store_explicit(&sp.sizes[i], Py_SIZE(sp.held[i]), memory_order_release);
        } else
            sp.names[i] = NAME_UNKNOWN;
    }
}

#if PY_VERSION_HEX >= 0x030C0000
/* A code object dies: if the table has an entry for it not yet held, the entry is
 * named now and retired (TOMB), so that a code object made later at the same
 * address gets an entry of its own. */
static int on_code_event(PyCodeEvent event, PyCodeObject *co)
{
    if (event != PY_CODE_EVENT_DESTROY || !sp.codes.keys)
        return 0;
    uint32_t i = st_addrtab_find(&sp.codes, (uintptr_t)co);
    if (i != ST_ADDRTAB_NONE && !sp.held[i]) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        uint32_t label = st_pylabel_of(co);
        sp.names[i] = label >= NAME_UNKNOWN - 1 ? NAME_LEFT_OUT : label + 1;
        PyErr_Restore(et, ev, tb);
        st_addrtab_set_key(&sp.codes, i, TOMB);
    }
    return 0;
}
#endif

/* The armed thread of state ts: found by its state, or for a thread armed at its
 * start whose handler has not met its state yet, by its kernel id (ts is then
 * bound to it). */
static st_sthread_t *find_thread(PyThreadState *ts)
{
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = stacks.threads[i];
        pythread_t *p = t->ctx;
        if (t->slot < 0)
            continue;
        PyThreadState *known = __atomic_load_n(&p->tstate, __ATOMIC_ACQUIRE);
        if (known == ts)
            return t;
        if (!known && p->own && t->tid == (uint64_t)ts->native_thread_id) {
            __atomic_store_n(&p->tstate, ts, __ATOMIC_RELEASE);
            return t;
        }
    }
    return NULL;
}

/* Starts sampling thread `ts`: its state, and with --native its stack bounds
 * (the calling thread's own, with libunwind's first unwind, when it is ts). */
static st_sthread_t *add_thread(PyThreadState *ts)
{
    pythread_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    __atomic_store_n(&p->tstate, ts, __ATOMIC_RELEASE);
    if (sp.native) {
        st_msg_t msg;
        int rc = ts == PyThreadState_Get()
                     ? st_unwind_thread_init(&p->uw, &msg)
                     : st_unwind_thread_init_of(&p->uw, (pthread_t)ts->thread_id, &msg);
        if (rc < 0)
            st_stacks_note(&stacks, "%s", msg.text);
    }
    st_sthread_t *t = st_stacks_add(&stacks, (uint64_t)ts->native_thread_id, p);
    if (!t)
        free(p);
    return t;
}

/* Names the thread's results as threading names it, once threading knows it
 * (also after it ended, while the program holds its Thread object); returns 1
 * when threading named it. */
static int name_thread(st_sthread_t *t)
{
    char name[64];
    int named = st_pythread_name_native(((pythread_t *)t->ctx)->ident, (unsigned long)t->tid,
                                        name, sizeof name);
    /* a thread the profile hook follows too is named by it (the same name) */
    if (named || strncmp(t->th->name, "Thread-", 7) == 0)
        st_rec_thread_name(t->th, name);
    return named;
}

/* Whether thread state ts is made for a thread that does not run it yet. 3.12+
 * gives a state its thread's ids when the thread binds it (0 before). 3.11 gives a
 * state made for a new thread the ids of the thread that made it, until the new
 * thread starts: of two states with one kernel id the newer is that one (the
 * interpreter lists its states newest first). Its timer would be the maker's, and
 * the maker's samples the new thread's frames. */
static int unbound(PyThreadState *ts)
{
    if (ts->native_thread_id == 0)
        return 1;
#if PY_VERSION_HEX < 0x030C0000
    for (PyThreadState *o = PyThreadState_Next(ts); o; o = PyThreadState_Next(o))
        if (o->native_thread_id == ts->native_thread_id)
            return 1;
#endif
    return 0;
}

/* Arms the timer of thread state ts when it is not armed yet, and marks it seen in
 * this scan. A thread's `flags` say whether threading named it. */
static void scan_thread(PyThreadState *ts)
{
    if (ts == sp.maint_ts)
        return;
    if (unbound(ts)) { /* looked for again at the next ticks */
        sp.unbound = 1;
        return;
    }
    st_sthread_t *t = find_thread(ts);
    if (!t || t->tid != (uint64_t)ts->native_thread_id)
        t = add_thread(ts);
    if (!t)
        return;
    t->seen = sp.scan;
    ((pythread_t *)t->ctx)->ident = ts->thread_id;
    if (!t->flags && t->th)
        t->flags = name_thread(t);
}

/* Arms the timer of every Python thread not armed yet, and disarms those whose
 * thread state is gone. */
static void scan_threads(void)
{
    sp.scan++;
    sp.unbound = 0;
    /* the calling thread first: at the start, the one that starts sampling is the
     * first sampled (|0>>>), whatever threads the process had before (a kernel's) */
    PyThreadState *me = PyThreadState_Get();
    scan_thread(me);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts;
         ts = PyThreadState_Next(ts))
        if (ts != me)
            scan_thread(ts);
    /* threads that ended: their timers go (the states stay for the handler); one
     * that ended before threading knew it when it was scanned is named now, while
     * the program may still hold its Thread object. A thread armed at its start
     * drops itself (its state may not be made yet, or not bound): it is named at
     * the first scan after (once: FLAG_TRIED). */
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++) {
        st_sthread_t *t = stacks.threads[i];
        int own = ((pythread_t *)t->ctx)->own;
        if (t->seen == sp.scan || (own && t->slot >= 0) || (!own && t->slot < 0))
            continue;
        if (!own)
            st_stacks_drop(&stacks, t);
        if (!t->flags && t->th)
            t->flags = name_thread(t) ? FLAG_NAMED : (uint32_t)(own ? FLAG_TRIED : 0);
    }
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uint64_t *)arg = (uint64_t)info->dlpi_adds + (uint64_t)info->dlpi_subs;
    return 1; /* the first object says it for all */
}

/* How many objects the dynamic loader has loaded and unloaded so far: a change
 * means the module map is to be taken again. */
static uint64_t loader_count(void)
{
    uint64_t n = 0;
    dl_iterate_phdr(count_loads, &n);
    return n;
}

/* Whether a thread state that no thread ran yet, met by the last scan, is to be
 * looked for again (for a while: a state may be made for a thread that never
 * starts). */
static int unbound_pending(void)
{
    return sp.unbound && sp.unbound_tries < UNBOUND_TRIES;
}

/* A pending call (hold_by_main): the main thread holds the new code objects at
 * its next bytecode. Nothing once sampling has stopped (sampler_stop held them). */
static int hold_soon(void *unused)
{
    (void)unused;
    if (sp.on)
        hold_new_codes();
    atomic_store(&sp.hold_asked, 0);
    return 0;
}

/* Whether the new code objects are left to the main thread (hold_soon, queued now
 * or still waiting): the GIL then does not change hands at each tick that finds
 * some, which on 3.11 cost a pytest run about 13 ms of CPU in 40 samples (the
 * two threads' hand-off, on two CPUs). Not after HOLD_WAIT_NS without it (the main
 * thread runs C code, or waits, while other threads are sampled; and before 3.13 a
 * call queued from another thread is noticed only when the main thread next takes
 * the GIL, after I/O, say): the tick then holds them itself, and the hand-off runs the
 * queued call too, so that 3.11, which has no code watcher, still holds a sampled
 * code object within a few ticks, before it can die and its address name another
 * (test_code_objects_that_die_keep_their_names). */
static int hold_by_main(uint64_t now_ns)
{
    if (atomic_load(&sp.hold_asked))
        return now_ns - sp.hold_asked_ns < HOLD_WAIT_NS;
    atomic_store(&sp.hold_asked, 1);
    sp.hold_asked_ns = now_ns;
    if (Py_AddPendingCall(hold_soon, NULL) == 0)
        return 1;
    atomic_store(&sp.hold_asked, 0); /* the queue is full */
    return 0;
}

/* The maintenance thread's part (sampling/stacks.h): holds the GIL while it
 * starts and ends, and at a tick when the process's threads changed (and every
 * half second), or when new code objects are still to hold after the main
 * thread was asked to (hold_by_main). Work that cannot wait makes the next tick
 * come soon: threads that changed or started (w_pthread_create), an extension
 * loaded, and without a code watcher new code objects (one may die, and its
 * address name another, before they are held). */
static int tick(st_stacks_t *s, int phase, void *arg)
{
    (void)arg;
    if (phase == ST_STACKS_BEGIN) {
        sp.maint_gil = PyGILState_Ensure();
        sp.maint_ts = PyThreadState_Get();
        sp.maint_saved = PyEval_SaveThread();
        return 0;
    }
    if (phase == ST_STACKS_END) {
        PyEval_RestoreThread(sp.maint_saved);
        PyGILState_Release(sp.maint_gil);
        return 0;
    }
    int busy = 0;
    if (sp.native && loader_count() != sp.loads) {
        sp.loads = loader_count(); /* the importer loaded (or unloaded) an extension */
        st_nstack_refresh(&nstack, 0);
        busy = 1;
    }
    int changed = st_stacks_tasks_changed(s);
    int retry = unbound_pending();
    int new_threads = changed || retry || s->now_ns - sp.scan_ns >= RESCAN_NS;
    int new_codes = st_addrtab_count(&sp.codes) != sp.nheld;
    if (new_codes && !new_threads && hold_by_main(s->now_ns))
        new_codes = 0;
    if (new_threads || new_codes) {
        PyEval_RestoreThread(sp.maint_saved);
        if (new_codes)
            hold_new_codes();
        if (new_threads) {
            scan_threads();
            sp.scan_ns = s->now_ns;
            sp.unbound_tries = sp.unbound ? sp.unbound_tries + retry : 0;
        }
        sp.maint_saved = PyEval_SaveThread();
    }
    return busy || changed || unbound_pending() || (new_codes && sp.watcher < 0);
}

/* A thread that starts while sampling runs makes the next ticks come soon, so that
 * it is found within about 20 ms; quiet, they come every 100 ms. The calls to
 * pthread_create of every loaded object but strata's, the runtimes' and the
 * interpreter's come here (base/gotpatch.h). An audit hook would hear 3.12+'s
 * "cpython.PyThreadState_New", but any audit hook makes CPython build the
 * arguments of every event it raises (spawns.h). Once sampling has stopped the
 * redirection stays, passing calls through. */
static int w_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                            void *(*start)(void *), void *arg)
{
    int rc = pthread_create(thread, attr, start, arg);
    if (rc == 0 && atomic_load_explicit(&sp.threads_heard, memory_order_relaxed))
        st_stacks_maint_hurry(&stacks);
    return rc;
}

/* The interpreter's threads (threading's, _thread's) are armed by themselves as
 * they start, before their first bytecode: a scan finds a thread only when the
 * maintenance thread gets the GIL, which 64 threads that keep it busy hand on in
 * turn, each for the switch interval; they could all have run and ended by then,
 * unsampled (a test of 64 threads kept 4 % of their time). The handler finds the
 * thread's state once the interpreter gives it one. */
typedef struct {
    void *(*start)(void *);
    void *arg;
} boot_t;

/* What a thread armed at its start keeps for its end (its thread-specific value:
 * the destructor runs however the thread ends). */
typedef struct {
    st_sthread_t *t;
    uint32_t epoch;
} own_t;

static pthread_key_t own_key;
static int own_key_made;

static void own_end(void *arg)
{
    own_t *o = arg;
    st_stacks_drop_own(&stacks, o->t, o->epoch);
    free(o);
}

static void make_own_key(void)
{
    own_key_made = pthread_key_create(&own_key, own_end) == 0;
}

/* Arms the calling thread, which is starting (no Python state yet). */
static void arm_self(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_own_key);
    pythread_t *p = calloc(1, sizeof *p);
    own_t *o = malloc(sizeof *o);
    if (!own_key_made || !p || !o) {
        free(p);
        free(o);
        return; /* a scan finds it */
    }
    p->own = 1;
    p->ident = (unsigned long)pthread_self(); /* PyThread_get_thread_ident's */
    if (sp.native) {
        st_msg_t msg;
        if (st_unwind_thread_init(&p->uw, &msg) < 0)
            st_stacks_note(&stacks, "%s", msg.text);
    }
    o->t = st_stacks_add_own(&stacks, (uint64_t)st_sigsampler_gettid(), p, &o->epoch);
    if (!o->t) {
        free(p);
        free(o);
        return;
    }
    if (pthread_setspecific(own_key, o) != 0)
        own_end(o);
}

static void *boot_thread(void *arg)
{
    boot_t b = *(boot_t *)arg;
    free(arg);
    if (atomic_load_explicit(&sp.threads_heard, memory_order_relaxed))
        arm_self();
    return b.start(b.arg);
}

static int w_pthread_create_py(pthread_t *thread, const pthread_attr_t *attr,
                               void *(*start)(void *), void *arg)
{
    boot_t *b = atomic_load_explicit(&sp.threads_heard, memory_order_relaxed)
                    ? malloc(sizeof *b)
                    : NULL;
    if (!b)
        return pthread_create(thread, attr, start, arg);
    b->start = start;
    b->arg = arg;
    int rc = pthread_create(thread, attr, boot_thread, b);
    if (rc != 0)
        free(b);
    else /* a scan names it while threading knows it */
        st_stacks_maint_hurry(&stacks);
    return rc;
}

/* The object that holds the interpreter's thread starts (libpython, or the
 * executable it is linked into). */
static int keep_interpreter(const struct dl_phdr_info *obj, void *arg)
{
    (void)arg;
    return !st_got_runtime(obj) && st_got_holds(obj, (const void *)PyThread_start_new_thread);
}

/* Every other object but strata's and the runtimes'. */
static int keep_others(const struct dl_phdr_info *obj, void *arg)
{
    return st_got_keep_others(obj, arg) && !keep_interpreter(obj, NULL);
}

/* Ends the maintenance thread (GIL held: released while it takes the GIL to
 * leave). */
static void stop_maint(void)
{
    Py_BEGIN_ALLOW_THREADS
    st_stacks_maint_stop(&stacks);
    Py_END_ALLOW_THREADS
}

void st_pysampler_before_fork(void)
{
    if (sp.on)
        stop_maint();
}

void st_pysampler_after_fork_parent(void)
{
    if (sp.on && !stacks.maint_running && st_stacks_maint_start(&stacks, tick, NULL) < 0)
        st_stacks_note(&stacks, "the sampler's thread could not start again after a fork: code "
                                "objects sampled since are named at the end, threads started "
                                "since are not sampled");
}

/* ------------------------------------------------------------------------- */
/* The collector                                                             */

/* The eval loop's code range, whose native frames the Python frames replace. */
static int eval_loop_range(st_msg_t *msg)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    void *eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    if (!eval || !dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
        sym->st_size == 0)
        return st_msg_set(msg, ST_EINVAL, "--native: the interpreter's eval loop "
                                          "(_PyEval_EvalFrameDefault) is not found with its size");
    sp.eval[0].lo = (uintptr_t)eval;
    sp.eval[0].hi = sp.eval[0].lo + sym->st_size;
    /* GCC may move most of the loop out of the symbol (ehframe.h: Debian's 3.14
     * and 3.15): the native walk must stop there too */
    sp.neval = 1 + st_ehframe_parts(sp.eval[0].lo, sym->st_size, sp.eval + 1, EVAL_PARTS);
    return 0;
}

/* Frees every sampled thread's state (no handler runs). */
static void free_threads(void)
{
    uint32_t n = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < n; i++)
        free(stacks.threads[i]->ctx);
    st_stacks_end(&stacks);
}

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
    if (st_addrtab_new(&sp.codes, CODE_BITS) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    if (st_addrtab_new(&sp.lines, LINE_BITS) < 0) {
        st_addrtab_free(&sp.codes);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    char why_fp[sizeof(st_msg_t)] = "";
    sp.native = st_settings_bool(set, ST_S_SAMPLING_NATIVE);
    if (sp.native) {
        int rc = eval_loop_range(msg);
        if (rc == 0)
            rc = st_nstack_start(&nstack, st_settings_str(set, ST_S_SAMPLING_UNWIND), why_fp,
                                 sizeof why_fp, msg);
        if (rc < 0) {
            st_addrtab_free(&sp.codes);
            sp.native = 0;
            return rc;
        }
        sp.loads = loader_count();
    }
    int rc = st_stacks_start(&stacks, &s->rec, s->rec.m_samples,
                             (int)st_settings_int(set, ST_S_SAMPLING_SIGNAL), clock, freq, walk,
                             msg);
    if (rc < 0) {
        st_addrtab_free(&sp.codes);
        if (sp.native)
            st_nstack_end(&nstack);
        return rc;
    }
    if (*why_fp)
        st_stacks_note(&stacks, "native stacks are walked by frame pointers: %s", why_fp);
    else if (sp.native && nstack.method == ST_UNWIND_LIBUNWIND &&
             !st_unwind_libunwind_static_tls())
        st_stacks_note(&stacks, "threads other than the main thread are walked by frame "
                                "pointers (libunwind did not come with the interpreter: "
                                "strata python --native starts it so)");
    scan_threads();
    sp.scan_ns = st_clock_monotonic_ns();
#if PY_VERSION_HEX >= 0x030C0000
    sp.watcher = PyCode_AddWatcher(on_code_event);
    if (sp.watcher < 0)
        PyErr_Clear(); /* all taken: 3.11's window (sampler.h) */
#else
    sp.watcher = -1;
#endif
    if (st_stacks_maint_start(&stacks, tick, NULL) < 0) {
        st_stacks_stop(&stacks);
        free_threads();
        st_addrtab_free(&sp.codes);
        if (sp.native)
            st_nstack_end(&nstack);
        return st_msg_set(msg, ST_EIO, "cannot start the stack sampler's thread");
    }
    sp.on = 1;
    s->stack_sampling = 1;
    static const st_got_redirect_t starts = {"pthread_create", NULL, (void *)w_pthread_create};
    static const st_got_redirect_t py_starts = {"pthread_create", NULL,
                                                (void *)w_pthread_create_py};
    atomic_store(&sp.threads_heard, 1);
    /* failing: the half-second scans find new threads */
    st_got_redirect(&starts, 1, keep_others, (void *)w_pthread_create);
    st_got_redirect(&py_starts, 1, keep_interpreter, NULL);
    return 0;
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
    uint32_t n = st_addrtab_count(&sp.codes);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = st_addrtab_claimed(&sp.codes, k);
        if (i == ST_ADDRTAB_NONE)
            continue;
        if (sp.held[i])
            map[i] = st_pylabel_of((PyCodeObject *)sp.held[i]);
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

/* The lines sampled (GIL held, codes held, before clear_codes): each entry's code
 * named as the profile names it (frames the filters leave out have no line), its
 * instruction turned into a line; entries of one line summed, most periods first,
 * into *rows (texts interned in the session's labels; NULL when none). The line
 * table is emptied for the next start. Returns the number of rows. */
static size_t resolve_lines(st_session_t *s, const uint32_t *map, st_model_line_t **rows_out)
{
    uint32_t n = st_addrtab_count(&sp.lines), out = 0;
    st_model_line_t *rows = n && map ? calloc(n, sizeof *rows) : NULL;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = st_addrtab_claimed(&sp.lines, k);
        if (i == ST_ADDRTAB_NONE)
            continue;
        uint64_t periods = atomic_exchange(&sp.line_periods[i], 0);
        if (!rows || !periods)
            continue;
        uintptr_t key = st_addrtab_key(&sp.lines, i);
        uintptr_t code = key & (((uintptr_t)1 << LINE_SHIFT) - 1);
        uint32_t c = st_addrtab_find(&sp.codes, code);
        if (c == ST_ADDRTAB_NONE || !sp.held[c] || map[c] == ST_PATH_NONE)
            continue;
        PyCodeObject *co = (PyCodeObject *)sp.held[c];
        const char *file = PyUnicode_Check(co->co_filename) ? PyUnicode_AsUTF8(co->co_filename)
                                                            : NULL;
        uint32_t fid;
        int line = PyCode_Addr2Line(co, (int)(key >> LINE_SHIFT) * 2);
        if (!file || st_intern_id(&s->labels, file, strlen(file), &fid) < 0) {
            PyErr_Clear();
            continue;
        }
        rows[out++] = (st_model_line_t){st_intern_str(&s->labels, map[c]),
                                        st_intern_str(&s->labels, fid),
                                        line > 0 ? (uint32_t)line : 0, periods};
    }
    st_addrtab_free(&sp.lines);
    if (!out) {
        free(rows);
        rows = NULL;
    }
    *rows_out = rows;
    return st_model_lines_coalesce(rows, out, NULL);
}

/* Empties the code table: only the claimed entries were written. */
static void clear_codes(void)
{
    uint32_t n = st_addrtab_count(&sp.codes);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = st_addrtab_claimed(&sp.codes, k);
        if (i == ST_ADDRTAB_NONE)
            continue;
        atomic_store(&sp.sizes[i], 0);
        sp.names[i] = NAME_NONE;
        Py_CLEAR(sp.held[i]);
    }
    sp.nheld = 0;
    st_addrtab_free(&sp.codes);
}

/* The samples folded: the Python ids (map: one label each, or none) and with
 * --native the native ids (their chains, from NATIVE_BASE) together, as chains
 * the session keeps for the timeline. */
static int fold(st_session_t *s, const uint32_t *map)
{
    uint32_t *nfirst = NULL, *nchain = NULL, nn = 0;
    if (sp.native) {
        st_nstack_refresh(&nstack, 0);
        int rc = st_nstack_chains(&nstack, &s->labels, &s->locs, &nfirst, &nchain, &nn);
        if (rc < 0)
            return rc;
    }
    int rc = 0;
    uint32_t nids = NATIVE_BASE + (sp.native ? ST_NSTACK_IDS : 0);
    uint32_t nclaimed = st_addrtab_count(&sp.codes);
    /* Only the claimed entries (and CODE_UNKNOWN) are in samples: their chains are
     * laid out in id order, found through a bitmap of them; the rest of `first`
     * (calloc'd: its pages are never touched) is never read. Not every one of the
     * 65,537 ids: that was 0.65 M instructions and 768 KiB of pages written at
     * every end. */
    uint64_t *claimed = calloc(NATIVE_BASE / 64 + 1, sizeof *claimed);
    uint32_t *first = calloc((size_t)nids + 1, sizeof *first);
    uint32_t *chain = malloc(((size_t)nclaimed + 1 + nn + 1) * sizeof *chain);
    if (claimed && first && chain) {
        for (uint32_t k = 0; k < nclaimed; k++) {
            uint32_t i = st_addrtab_claimed(&sp.codes, k);
            if (i != ST_ADDRTAB_NONE)
                claimed[i / 64] |= (uint64_t)1 << (i % 64);
        }
        claimed[CODE_UNKNOWN / 64] |= (uint64_t)1 << (CODE_UNKNOWN % 64);
        uint32_t at = 0;
        for (uint32_t w = 0; w <= CODE_UNKNOWN / 64; w++)
            for (uint64_t b = claimed[w]; b; b &= b - 1) {
                uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(b);
                first[i] = at;
                if (map[i] != ST_PATH_NONE)
                    chain[at++] = map[i];
                first[i + 1] = at;
            }
        first[NATIVE_BASE] = at;
        for (uint32_t i = 0; sp.native && i <= ST_NSTACK_IDS; i++)
            first[NATIVE_BASE + i] = at + nfirst[i];
        if (nn)
            memcpy(chain + at, nchain, (size_t)nn * sizeof *chain);
        rc = st_stacks_fold(&stacks, first, chain, nids);
        s->stack_first = first; /* kept for the timeline's samples */
        s->stack_chain = chain;
        s->stack_nids = nids;
    } else {
        free(first);
        free(chain);
        rc = ST_ENOMEM;
    }
    free(claimed);
    free(nfirst);
    free(nchain);
    return rc;
}

/* The code watcher goes (3.12+: it names code objects that die while sampled). */
static void drop_code_watcher(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (sp.watcher >= 0)
        PyCode_ClearWatcher(sp.watcher);
    sp.watcher = -1;
#endif
}

static void sampler_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    if (!sp.on)
        return;
    sp.on = 0;
    atomic_store(&sp.threads_heard, 0);
    st_stacks_stop(&stacks); /* no handler runs after this */
    stop_maint();
    drop_code_watcher();
    hold_new_codes();
    /* threads that ended since the last scan, before threading knew them then */
    uint32_t nthreads = atomic_load(&stacks.nthreads);
    for (uint32_t i = 0; i < nthreads; i++) {
        st_sthread_t *t = stacks.threads[i];
        if (!t->flags && t->th)
            t->flags = name_thread(t);
    }
    uint32_t *map = code_labels();
    if (!map || fold(s, map) < 0)
        s->stack_failed = 1;
    st_model_line_t *lines;
    size_t nlines = resolve_lines(s, map, &lines);
    free(map);
    uint64_t unnamed = atomic_load(&sp.codes.full);
    clear_codes();
    if (sp.native) {
        unnamed += st_nstack_unnamed(&nstack);
        st_nstack_end(&nstack);
        uint64_t cut = atomic_exchange(&sp.native_cut, 0);
        if (cut)
            st_stacks_note(&stacks,
                           "%llu samples have no C frames: their native walk did not reach "
                           "the interpreter's eval loop (_PyEval_EvalFrameDefault)",
                           (unsigned long long)cut);
    }
    st_stacks_summarise(&stacks, &s->stacks, unnamed);
    s->stacks.lines = lines;
    s->stacks.nlines = nlines;
    free_threads();
}

void st_pysampler_after_fork_child(void)
{
    if (!sp.on)
        return;
    sp.on = 0;
    atomic_store(&sp.threads_heard, 0);
    st_stacks_stop(&stacks); /* the handler goes; the parent's timers are not here */
    drop_code_watcher();
    clear_codes();
    st_addrtab_free(&sp.lines);
    if (sp.native)
        st_nstack_end(&nstack);
    atomic_store(&sp.native_cut, 0);
    free_threads();
}

const st_collector_t st_pysampler_collector = {
    .name = "stack sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .contribute = st_session_stacks_contribute,
};
