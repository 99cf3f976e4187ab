/* The backend for CPython 3.11: the C-level profile hook (PyEval_SetProfile).
 *
 * Every existing thread gets the hook when profiling starts (through
 * _PyEval_SetProfile on its thread state), and new threads through
 * threading.setprofile, whose trampoline installs the C hook on the thread's first
 * event. strata does not import threading itself (2.5 ms of a run that starts no
 * thread): when the program has not imported it yet, the trampoline is set once its
 * import is done, before its first thread starts (st_pybackend_threading_check).
 * The hook turns CALL / RETURN / C_CALL / C_RETURN into the collector's
 * events (collector.h). CPython 3.12 and later use sys.monitoring instead
 * (backend_monitoring.c), behind the same functions; CMake builds the one that fits
 * the interpreter.
 *
 * Design note: a program with its own profiler. A thread has one profile hook, and
 * the program may set its own (sys.setprofile, cProfile's enable) or clear it
 * (disable, sys.setprofile(None)). The program must see what it would see without
 * strata, and strata must not stop silently:
 *
 *   - strata's hook is installed with no object, so sys.getprofile() is None, as
 *     without strata; the hook finds its thread's state through a thread-local
 *     pointer (a thread hooked from another one adopts the state made for it, found
 *     by its thread state, at its first event);
 *   - a thread whose hook the program cleared gets strata's back; a thread with the
 *     program's hook gets `chain`, with the program's object kept (so
 *     sys.getprofile() is what the program set): chain calls the program's function
 *     with the events and arguments it would get alone, and strata's hook beside it
 *     (the program's first on a call, strata's first on a return, so that neither
 *     times the other more than it must). take_back does this for one thread;
 *   - sys.setprofile is strata's while it runs (named, documented and bound as the
 *     interpreter's): it calls the interpreter's, then takes back the thread before
 *     it returns, so that the program's function hears of no event it would not
 *     hear of without strata (swallow);
 *   - for profilers in C (cProfile's enable), an audit hook hears "sys.setprofile",
 *     raised just before any thread's hook changes. It arms a one-shot C trace
 *     function on the calling thread (when it has none: a debugger's is left alone)
 *     and a pending call (run soon by the main thread); whichever runs first takes
 *     back every thread (recheck), and closes the calls whose ends strata missed:
 *     the C call that changed the hook (its return went to the program's hook) and,
 *     on a thread taken back from another one (which may have run meanwhile), every
 *     open call whose frame is gone. Calls made meanwhile on such a thread are lost:
 *     strata says so, once, when it writes its results. */
#include "python/collector.h"

#if PY_VERSION_HEX >= 0x030C0000
#error "backend_profile.c is the CPython 3.11 backend; 3.12+ builds backend_monitoring.c"
#endif

#include <string.h>

/* ------------------------------------------------------------------------- */
/* The code object of a frame                                                 */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* CPython 3.11's frame layout (Include/internal/pycore_frame.h), mirrored to read
 * the code object without PyFrame_GetCode's call and reference count: two of the
 * hook's ~40 ns. Checked against PyFrame_GetCode when the module loads (see
 * check_frame_layout); if they ever disagree, the API is used instead. */
typedef struct {
    PyObject *f_func, *f_globals, *f_builtins, *f_locals;
    PyCodeObject *f_code;
} mirror_interp_frame_t;

typedef struct {
    PyObject_HEAD
    PyFrameObject *f_back;
    mirror_interp_frame_t *f_frame;
    PyObject *f_trace;
    int f_lineno;
    char f_trace_lines;
} mirror_frame_t;

static int frame_layout_ok;
static int trace_lines_ok; /* f_trace_lines found where the mirror has it */

/* Switches a frame's line events off (the trace function still hears its call and
 * return). */
static void no_line_events(PyFrameObject *frame)
{
    if (trace_lines_ok) {
        ((mirror_frame_t *)frame)->f_trace_lines = 0;
    } else if (PyObject_SetAttrString((PyObject *)frame, "f_trace_lines", Py_False) < 0) {
        PyErr_Clear();
    }
}

static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
    if (frame_layout_ok)
        return ((mirror_frame_t *)frame)->f_frame->f_code;
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps it alive */
    return co;
}

static void check_frame_layout(void)
{
    PyFrameObject *frame = PyEval_GetFrame();
    if (!frame)
        return;
    PyCodeObject *co = PyFrame_GetCode(frame);
    frame_layout_ok = ((mirror_frame_t *)frame)->f_frame->f_code == co;
    Py_DECREF(co);
    /* f_trace_lines: True by default; False set through the attribute must show */
    mirror_frame_t *mf = (mirror_frame_t *)frame;
    int was = mf->f_trace_lines;
    if (frame_layout_ok && was == 1 &&
        PyObject_SetAttrString((PyObject *)frame, "f_trace_lines", Py_False) == 0) {
        trace_lines_ok = mf->f_trace_lines == 0;
        if (PyObject_SetAttrString((PyObject *)frame, "f_trace_lines", Py_True) < 0)
            PyErr_Clear();
        trace_lines_ok &= mf->f_trace_lines == 1;
    }
    PyErr_Clear();
}
#else
static void no_line_events(PyFrameObject *frame)
{
    if (PyObject_SetAttrString((PyObject *)frame, "f_trace_lines", Py_False) < 0)
        PyErr_Clear();
}

static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps it alive */
    return co;
}

static void check_frame_layout(void) {}
#endif

/* ------------------------------------------------------------------------- */
/* Threads strata hooks                                                       */

/* The calling thread's state: static TLS (initial-exec), a plain load. */
static _Thread_local st_pythread_t *tl_ts __attribute__((tls_model("initial-exec")));

/* A thread state strata has hooked, and the state it records into (the thread's
 * ident too: a thread state's memory may be reused by a later thread). */
typedef struct {
    PyThreadState *t;
    unsigned long ident;
    st_pythread_t *ts;
} hooked_t;

static struct {
    hooked_t *v;
    size_t n, cap;
    int setting;        /* strata itself is changing a hook: the audit hook keeps out */
    int pending;        /* a recheck is queued with Py_AddPendingCall */
    int audit_added;
    int late;           /* a hook was taken back late (from another thread, or a thread
                         * with a trace function): calls there may be lost */
    unsigned long main_ident; /* the thread whose pending calls run (the main one) */
    int threading_set;        /* strata set threading's profile hook */
    int threads_unfollowed;   /* the program cleared threading's profile hook */
    PyObject *setprofile;     /* strata's sys.setprofile while profiling */
    PyObject *sys_setprofile; /* the interpreter's */
} hk;

static hooked_t *find_hooked(PyThreadState *t)
{
    for (size_t i = 0; i < hk.n; i++)
        if (hk.v[i].t == t && hk.v[i].ident == (unsigned long)t->thread_id)
            return &hk.v[i];
    return NULL;
}

/* Notes that strata records thread state t into ts (replacing what was noted for a
 * thread state at that address before). */
static int note_hooked(PyThreadState *t, st_pythread_t *ts)
{
    hooked_t *e = NULL;
    for (size_t i = 0; i < hk.n && !e; i++)
        if (hk.v[i].t == t)
            e = &hk.v[i];
    if (!e) {
        if (hk.n == hk.cap) {
            size_t cap = hk.cap ? hk.cap * 2 : 16;
            hooked_t *v = realloc(hk.v, cap * sizeof *v);
            if (!v) {
                PyErr_NoMemory();
                return -1;
            }
            hk.v = v;
            hk.cap = cap;
        }
        e = &hk.v[hk.n++];
    }
    e->t = t;
    e->ident = (unsigned long)t->thread_id;
    e->ts = ts;
    return 0;
}

/* The calling thread's state when strata's hook runs on it for the first time:
 * the one made for it when it was hooked from another thread, else a new one. */
static __attribute__((noinline, cold)) st_pythread_t *adopt_thread(void)
{
    PyThreadState *t = PyThreadState_Get();
    hooked_t *e = find_hooked(t);
    st_pythread_t *ts = e ? e->ts : NULL;
    if (!ts) {
        ts = st_pythread_new((unsigned long)t->thread_id,
                             (uint64_t)PyThread_get_thread_native_id());
        if (!ts || note_hooked(t, ts) < 0) {
            PyErr_Clear();
            return NULL;
        }
    }
    tl_ts = ts;
    return ts;
}

static inline st_pythread_t *thread_state(void)
{
    st_pythread_t *ts = tl_ts;
    return __builtin_expect(ts != NULL, 1) ? ts : adopt_thread();
}

/* ------------------------------------------------------------------------- */
/* The hook                                                                   */

/* The hook's four events. The hook is only a dispatch (tail calls) to a copy of
 * each made out of line (HOOK, below), with the registers it needs, so that the
 * events that do nothing (a C call without --trace-c) cost no stack frame. */
static inline __attribute__((always_inline)) int py_call_event(PyFrameObject *frame,
                                                              const int tracing)
{
    st_pythread_t *ts = thread_state();
    if (ts)
        on_call(ts, frame_code(frame), frame, frame, tracing);
    return 0;
}

static inline __attribute__((always_inline)) int py_return_event(PyFrameObject *frame,
                                                                const int tracing)
{
    st_pythread_t *ts = thread_state();
    if (!ts)
        return 0;
    /* A C call of this frame still open is one whose end went to another hook
     * (the program's, while it held the thread): it is over. (No C call is open in
     * a run that never recorded one.) */
    if (__builtin_expect(st_py.trace_c_ever && ts->th &&
                             st_rec_top_key(ts->th) == (const char *)frame + 1,
                         0))
        on_c_return(ts, (const char *)frame + 1, tracing);
    on_return(ts, frame, tracing);
    return 0;
}

static inline __attribute__((always_inline)) int c_call_event(PyFrameObject *frame,
                                                             PyObject *arg, const int tracing)
{
    st_pythread_t *ts = thread_state();
    if (ts && !ts->blocked) {
        codeinfo_t *ci = code_info(frame_code(frame));
        if (ci && ci->module_ok)
            on_c_call(ts, st_pylabel_cfunc(arg), (const char *)frame + 1, tracing);
    }
    return 0;
}

/* Closes the recorded C call on top (out of line: most C calls are not recorded,
 * and their ends then cost no stack frame). Without --trace-c at any time in the
 * run no C call was recorded: the hook then answers their ends at once. */
static __attribute__((noinline)) int close_c_call(st_pythread_t *ts, const void *key,
                                                  int tracing)
{
    on_c_return(ts, key, tracing);
    return 0;
}

static inline __attribute__((always_inline)) int c_exit_event(PyFrameObject *frame,
                                                             const int tracing)
{
    st_pythread_t *ts = thread_state();
    const void *key = (const char *)frame + 1;
    if (ts && ts->th && st_rec_top_key(ts->th) == key)
        return close_c_call(ts, key, tracing);
    return 0;
}

/* The hook `name`, in one copy with the timeline (tracing 1) and one without
 * (0), so that a run without a timeline pays nothing for it; the one a run needs
 * is installed. */
#define HOOK(name, tracing)                                                                 \
    static __attribute__((noinline)) int name##_call(PyFrameObject *frame)                  \
    {                                                                                       \
        return py_call_event(frame, tracing);                                               \
    }                                                                                       \
    static __attribute__((noinline)) int name##_return(PyFrameObject *frame)                \
    {                                                                                       \
        return py_return_event(frame, tracing);                                             \
    }                                                                                       \
    static __attribute__((noinline)) int name##_c_call(PyFrameObject *frame, PyObject *arg) \
    {                                                                                       \
        return c_call_event(frame, arg, tracing);                                           \
    }                                                                                       \
    static __attribute__((noinline)) int name##_c_exit(PyFrameObject *frame)                \
    {                                                                                       \
        return c_exit_event(frame, tracing);                                                \
    }                                                                                       \
    static int name(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)           \
    {                                                                                       \
        (void)obj;                                                                          \
        switch (what) {                                                                     \
        case PyTrace_CALL:                                                                  \
            return name##_call(frame);                                                      \
        case PyTrace_RETURN:                                                                \
            return name##_return(frame);                                                    \
        case PyTrace_C_CALL:                                                                \
            return st_py.trace_c ? name##_c_call(frame, arg) : 0;                           \
        case PyTrace_C_RETURN:                                                              \
        case PyTrace_C_EXCEPTION:                                                           \
            return st_py.trace_c_ever ? name##_c_exit(frame) : 0;                           \
        default:                                                                            \
            return 0;                                                                       \
        }                                                                                   \
    }
HOOK(hook, 0)
HOOK(hook_traced, 1)
#undef HOOK

/* The hook for this run: with the timeline or without. */
static Py_tracefunc run_hook(void) { return st_py.tracing ? hook_traced : hook; }

/* ------------------------------------------------------------------------- */
/* Line timings (lines.h)                                                     */

/* The trace function, on a thread while it runs a chosen function: its line
 * events are timed; any other frame's are switched off at its call. */
static int line_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)arg;
    st_pythread_t *ts = tl_ts;
    if (!ts)
        return 0;
    if (what == PyTrace_LINE) {
        /* the interpreter sets f_lineno for the trace function's call: read in
         * place, without PyFrame_GetLineNumber's call (the layout checked) */
        int line = frame_layout_ok ? ((mirror_frame_t *)frame)->f_lineno : 0;
        lines_line(ts, frame, line ? line : PyFrame_GetLineNumber(frame));
    } else if (what == PyTrace_CALL) {
        /* heard before the profile hook's call: a chosen frame is not pushed yet */
        codeinfo_t *ci = code_info(frame_code(frame));
        if (!ci || !ci->lines)
            no_line_events(frame);
    }
    return 0;
}

/* Called from the profile hook, so that the thread's profile function is set and
 * its tracing flag stays as it is: the trace function is put in place directly,
 * without sys.settrace's audit event at every outermost chosen call. */
void st_pylines_arm(st_pythread_t *ts, st_pyltab_t *tab)
{
    tab->armed = 1;
    if (ts->ldepth != 1)
        return;
    PyThreadState *t = PyThreadState_Get();
    if (!t->c_tracefunc && t->c_profilefunc) {
        t->c_traceobj = NULL;
        t->c_tracefunc = line_trace;
    } else if (t->c_tracefunc != line_trace) {
        st_pylines_lost(); /* the program's trace function (a debugger) keeps the thread */
    }
}

void st_pylines_disarm(st_pythread_t *ts)
{
    (void)ts;
    PyThreadState *t = PyThreadState_Get();
    if (t->c_tracefunc == line_trace)
        t->c_tracefunc = NULL;
}

/* The program's hook and strata's on one thread: the program's function gets its
 * own object and every event as it would alone. */
static int chain(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    st_pythread_t *ts = thread_state();
    Py_tracefunc theirs = ts ? ts->chained : NULL;
    if (!theirs)
        return run_hook()(NULL, frame, what, arg);
    if (__builtin_expect(ts->swallow != NULL, 0)) {
        /* the return of the sys.setprofile call that set theirs, which they would
         * not hear of without strata */
        PyObject *swallow = ts->swallow;
        ts->swallow = NULL;
        if ((what == PyTrace_C_RETURN || what == PyTrace_C_EXCEPTION) && arg == swallow)
            return run_hook()(NULL, frame, what, arg);
    }
    if (what == PyTrace_CALL || what == PyTrace_C_CALL) {
        int r = theirs(obj, frame, what, arg);
        if (r == 0)
            run_hook()(NULL, frame, what, arg); /* stamps the start last */
        return r;
    }
    run_hook()(NULL, frame, what, arg); /* reads the clock first */
    return theirs(obj, frame, what, arg);
}

static int is_ours(Py_tracefunc f) { return f == hook || f == hook_traced || f == chain; }

/* The calling thread's st_pythread_t, if strata's hook is installed on it. */
st_pythread_t *st_pybackend_current(void)
{
    PyThreadState *tstate = PyThreadState_Get();
    if (is_ours(tstate->c_profilefunc))
        return thread_state();
    return NULL;
}

/* Sets thread state t's profile hook, keeping the audit hook out of it. */
static int set_hook(PyThreadState *t, Py_tracefunc f, PyObject *obj)
{
    hk.setting++;
    int rc = _PyEval_SetProfile(t, f, obj);
    hk.setting--;
    return rc;
}

/* Gives tstate a thread state object and the hook. With make_rec (the calling
 * thread only), it registers with the recorder first: naming a thread runs Python
 * code, which must not be recorded. */
static int install_on(PyThreadState *tstate, int is_current, int make_rec)
{
    unsigned long ident = (unsigned long)tstate->thread_id;
    uint64_t tid = is_current ? (uint64_t)PyThread_get_thread_native_id()
                              : (uint64_t)tstate->native_thread_id;
    st_pythread_t *ts = st_pythread_new(ident, tid);
    if (!ts || note_hooked(tstate, ts) < 0)
        return -1;
    if (make_rec && !st_pythread_rec(ts)) {
        PyErr_NoMemory();
        return -1;
    }
    if (is_current)
        tl_ts = ts;
    /* A hook the program set before profiling started runs beside strata's. */
    Py_tracefunc theirs = tstate->c_profilefunc;
    if (theirs && !is_ours(theirs) &&
        !(st_py.bootstrap && tstate->c_profileobj == st_py.bootstrap)) {
        PyObject *obj = Py_XNewRef(tstate->c_profileobj);
        ts->chained = theirs;
        int rc = set_hook(tstate, chain, obj);
        Py_XDECREF(obj);
        return rc;
    }
    return set_hook(tstate, run_hook(), NULL);
}

/* ------------------------------------------------------------------------- */
/* The program's own profile hooks                                            */

/* Closes, on thread state t (its state ts), the calls strata saw begin but not end
 * while it was not hooked there: with `here` (the thread's running frame, when t
 * is the calling thread), the C call of that frame whose end went elsewhere; else
 * every call whose frame is no longer on the thread's stack. */
static void close_missed(PyThreadState *t, st_pythread_t *ts, PyFrameObject *here)
{
    st_rec_thread_t *th = ts->th;
    if (!th || !th->depth)
        return;
    if (here) {
        if (st_rec_top_key(th) == (const char *)here + 1)
            on_c_return(ts, (const char *)here + 1, st_py.tracing);
        return;
    }
    /* The frames alive on t, then the open calls from the top down while theirs is
     * not among them (a C call's key is its frame + 1). */
    size_t n = 0, cap = 64;
    const void **live = malloc(cap * sizeof *live);
    PyFrameObject *f = live ? PyThreadState_GetFrame(t) : NULL;
    while (f) {
        if (n == cap) {
            const void **v = realloc(live, (cap *= 2) * sizeof *v);
            if (!v) {
                Py_DECREF(f);
                break;
            }
            live = v;
        }
        live[n++] = f;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f); /* the thread's stack keeps it alive */
        f = back;
    }
    while (live && th->depth) {
        const char *key = st_rec_top_key(th);
        const void *frame = ((uintptr_t)key & 1) ? key - 1 : key;
        size_t i = 0;
        while (i < n && live[i] != frame)
            i++;
        if (i < n)
            break;
        if (!st_rec_exit_key_t(th, key, st_py.tracing))
            break; /* an enter whose frame could not be pushed is open */
    }
    free(live);
}

static int trigger(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg);

/* Puts strata's hook back on thread state t, beside the program's own if it has one
 * (chain), unless it is strata's already or t is a thread strata does not follow.
 * Returns t's state, or NULL when nothing was done. */
static st_pythread_t *take_back(PyThreadState *t)
{
    Py_tracefunc f = t->c_profilefunc;
    if (is_ours(f) || (st_py.bootstrap && t->c_profileobj == st_py.bootstrap))
        return NULL; /* strata's, or a new thread that will install strata's */
    hooked_t *e = find_hooked(t);
    if (!f && !e)
        return NULL; /* a thread strata does not follow */
    st_pythread_t *ts = e ? e->ts : NULL;
    if (!ts) {
        ts = st_pythread_new((unsigned long)t->thread_id, (uint64_t)t->native_thread_id);
        if (!ts || note_hooked(t, ts) < 0) {
            PyErr_Clear();
            return NULL;
        }
    }
    PyObject *obj = f ? Py_XNewRef(t->c_profileobj) : NULL;
    ts->chained = f;
    ts->swallow = NULL;
    if (set_hook(t, f ? chain : run_hook(), obj) < 0)
        PyErr_Clear();
    Py_XDECREF(obj);
    return ts;
}

/* Looks at every thread's hook: a cleared one gets strata's back, the program's
 * own runs beside strata's (chain). `here`: the calling thread's running frame. */
static void recheck(PyFrameObject *here)
{
    if (!st_py.running || st_py.forked_child)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t;
         t = PyThreadState_Next(t)) {
        if (t != me && t->c_tracefunc == trigger)
            continue; /* its own next event puts it right, losing nothing */
        st_pythread_t *ts = take_back(t);
        if (!ts)
            continue;
        if (t != me)
            hk.late = 1;
        close_missed(t, ts, t == me ? (here ? here : PyEval_GetFrame()) : NULL);
    }
    PyErr_Restore(et, ev, tb);
}

/* sys.setprofile, as the program calls it: the interpreter's, then strata's hook
 * back on the thread at once, beside the program's function if it set one. That
 * function gets no event it would not get without strata: the return of this call
 * reaches it only if a function of the program's was set before (the interpreter
 * tells a profile function of a C call's return only if one was set at its start). */
static PyObject *setprofile(PyObject *self, PyObject *fn)
{
    (void)self;
    PyThreadState *t = PyThreadState_Get();
    int was_strata_alone = t->c_profilefunc == hook || t->c_profilefunc == hook_traced;
    hk.setting++;
    PyObject *r = PyObject_CallOneArg(hk.sys_setprofile, fn);
    hk.setting--;
    if (!r || !st_py.running || st_py.forked_child)
        return r;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    st_pythread_t *ts = take_back(t);
    if (ts && ts->chained && was_strata_alone)
        ts->swallow = hk.setprofile;
    PyErr_Restore(et, ev, tb);
    return r;
}

static PyMethodDef setprofile_def = {"setprofile", setprofile, METH_O, NULL};

/* Puts strata's sys.setprofile in the sys module (named, documented and bound as
 * the interpreter's), or the interpreter's back (if strata's is still there). */
static int swap_setprofile(int install)
{
    PyObject *sys = PyImport_ImportModule("sys");
    if (!sys)
        return -1;
    int rc = 0;
    if (install && !hk.setprofile) {
        PyObject *orig = PyObject_GetAttrString(sys, "setprofile");
        if (orig && PyCFunction_Check(orig)) {
            PyMethodDef *ml = ((PyCFunctionObject *)orig)->m_ml;
            setprofile_def.ml_name = ml->ml_name;
            setprofile_def.ml_doc = ml->ml_doc;
            PyObject *modname = PyUnicode_FromString("sys");
            hk.setprofile = modname ? PyCFunction_NewEx(&setprofile_def, sys, modname) : NULL;
            Py_XDECREF(modname);
            if (hk.setprofile && PyObject_SetAttrString(sys, "setprofile", hk.setprofile) == 0) {
                hk.sys_setprofile = orig;
                orig = NULL;
            } else {
                Py_CLEAR(hk.setprofile);
                rc = -1;
            }
        }
        Py_XDECREF(orig);
    } else if (!install && hk.setprofile) {
        PyObject *now = PyObject_GetAttrString(sys, "setprofile");
        if (now == hk.setprofile && PyObject_SetAttrString(sys, "setprofile", hk.sys_setprofile) < 0)
            rc = -1;
        Py_XDECREF(now);
        Py_CLEAR(hk.setprofile);
        Py_CLEAR(hk.sys_setprofile);
    }
    Py_DECREF(sys);
    return rc;
}

/* The one-shot trace function: the next event of a thread whose hook is about to
 * change (it runs after the change) rechecks, then takes itself away. */
static int trigger(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)arg;
    PyThreadState *t = PyThreadState_Get();
    if (t->c_tracefunc == trigger) {
        hk.setting++;
        if (_PyEval_SetTrace(t, NULL, NULL) < 0)
            PyErr_Clear();
        hk.setting--;
    }
    /* On a call the frame is the new one: the C call that changed the hook is its
     * caller's, still counted open until that caller returns (hook_impl). */
    recheck(what == PyTrace_CALL ? NULL : frame);
    return 0;
}

static int pending_recheck(void *arg)
{
    (void)arg;
    hk.pending = 0;
    recheck(NULL);
    return 0;
}

/* Whether code is the threading module's own (threading.py's module code), about to
 * run: every import of it execs that code, whatever started the import (an import
 * statement, importlib.import_module, runpy), and the "exec" audit event says so. */
static int is_threading_module(PyObject *code)
{
    if (!PyCode_Check(code))
        return 0;
    PyCodeObject *co = (PyCodeObject *)code;
    if (PyUnicode_CompareWithASCIIString(co->co_name, "<module>") != 0)
        return 0;
    const char *file = PyUnicode_AsUTF8(co->co_filename);
    if (!file) {
        PyErr_Clear();
        return 0;
    }
    size_t n = strlen(file);
    return n >= 12 && strcmp(file + n - 12, "threading.py") == 0 &&
           (n == 12 || file[n - 13] == '/');
}

/* Hears "sys.setprofile" (raised before a thread's profile hook changes, on the
 * thread that changes it) and arranges a recheck after the change; and "exec" of
 * threading's module code, after which its profile hook is strata's to set. */
static int audit(const char *event, PyObject *args, void *data)
{
    (void)data;
    if (event[0] == 'e' && !hk.threading_set && st_py.running && !st_py.forked_child &&
        strcmp(event, "exec") == 0 && PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0 &&
        is_threading_module(PyTuple_GET_ITEM(args, 0)))
        st_py.threading_due = 1; /* its hook is set once the module has run */
    if (event[0] != 's' || strcmp(event, "sys.setprofile") != 0 || hk.setting ||
        !st_py.running || st_py.forked_child)
        return 0;
    PyThreadState *t = PyThreadState_Get();
    if (!t->c_tracefunc) {
        hk.setting++;
        if (_PyEval_SetTrace(t, trigger, NULL) < 0)
            PyErr_Clear();
        hk.setting--;
    } else if (t->c_tracefunc != trigger && PyThread_get_thread_ident() != hk.main_ident) {
        hk.late = 1; /* a debugger's trace function: only the main thread looks, later */
    }
    if (!hk.pending && Py_AddPendingCall(pending_recheck, NULL) == 0)
        hk.pending = 1;
    return 0;
}

/* threading.setprofile trampoline: the first event of a new thread installs the C
 * hook on it and is passed on. */
static PyObject *bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "OOO", &frame, &event, &arg))
        return NULL;
    if (!st_py.running || st_py.forked_child || st_pybackend_current()) {
        Py_RETURN_NONE;
    }
    if (install_on(PyThreadState_Get(), 1, 1) < 0)
        return NULL;
    st_pythread_t *ts = st_pybackend_current();
    const char *ev = PyUnicode_Check(event) ? PyUnicode_AsUTF8(event) : "";
    if (ts && ev && strcmp(ev, "call") == 0 && PyFrame_Check(frame))
        run_hook()((PyObject *)ts, (PyFrameObject *)frame, PyTrace_CALL, Py_None);
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {"_bootstrap", bootstrap, METH_VARARGS, NULL};

/* The threading module once the program has imported it (its import done), as a
 * new reference; NULL (no exception) before. strata does not import it: that costs
 * a program that never starts a thread about 2.5 ms (collections, functools). */
static PyObject *threading_loaded(void)
{
    PyObject *threading = st_pythread_threading();
    PyObject *spec = threading ? PyObject_GetAttrString(threading, "__spec__") : NULL;
    PyObject *init = spec ? PyObject_GetAttrString(spec, "_initializing") : NULL;
    int running = init && PyObject_IsTrue(init) == 1; /* its module code is running */
    Py_XDECREF(init);
    Py_XDECREF(spec);
    PyErr_Clear();
    if (running)
        Py_CLEAR(threading);
    return threading;
}

/* threading.setprofile(fn) on the loaded module; with `only_if`, only while
 * threading's hook is that one (the program may have set its own since). */
static int set_threading_profile(PyObject *threading, PyObject *fn, PyObject *only_if)
{
    PyObject *r = NULL;
    if (only_if) {
        r = PyObject_CallMethod(threading, "getprofile", NULL);
        int same = r == only_if;
        Py_XDECREF(r);
        if (!r || !same)
            return r ? 0 : -1;
    }
    r = PyObject_CallMethod(threading, "setprofile", "O", fn);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* New threads get strata's hook through threading's trampoline, set at once when
 * the program has imported threading, else when its import is done: from the audit
 * event of its module code's exec on, the slow path of every call asks
 * (on_call_slow), and a thread's first start is such a call (Thread.start, not yet
 * judged). */
void st_pybackend_threading_check(void)
{
    st_py.threading_due = 0;
    if (!st_py.running || st_py.forked_child || hk.threading_set)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *threading = threading_loaded();
    if (threading) {
        hk.threading_set = set_threading_profile(threading, st_py.bootstrap, NULL) == 0;
        Py_DECREF(threading);
    } else {
        st_py.threading_due = 1; /* its module code still runs */
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

void st_pybackend_new_session(void)
{
    hk.late = 0;
    hk.threads_unfollowed = 0;
}

/* The hook judges every event afresh: nothing to do. */
void st_pybackend_refresh(void) {}

int st_pybackend_start(void)
{
    if (st_py.running)
        return 0;
    if (!st_py.bootstrap && !(st_py.bootstrap = PyCFunction_New(&bootstrap_def, NULL)))
        return -1;
    check_frame_layout();
    hk.threading_set = 0;
    st_py.threading_due = 0;
    PyObject *threading = threading_loaded();
    if (threading && set_threading_profile(threading, st_py.bootstrap, NULL) < 0) {
        Py_DECREF(threading);
        return -1;
    }
    hk.threading_set = threading != NULL;
    if (!hk.audit_added) {
        if (PySys_AddAuditHook(audit, NULL) < 0) {
            Py_XDECREF(threading);
            return -1;
        }
        hk.audit_added = 1;
        /* threading's main thread when it is loaded, else the one that imported
         * strata: the thread that runs pending calls either way */
        PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
        PyObject *ident = main ? PyObject_GetAttrString(main, "ident") : NULL;
        hk.main_ident = ident ? PyLong_AsUnsignedLong(ident) : st_py.main_ident;
        Py_XDECREF(ident);
        Py_XDECREF(main);
        PyErr_Clear();
    }
    Py_XDECREF(threading);
    PyThreadState *me = PyThreadState_Get();
    /* The thread starting the profile (the main thread) is |0>>>. */
    if (install_on(me, 1, 1) < 0)
        return -1;
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t;
         t = PyThreadState_Next(t)) {
        if (t != me && install_on(t, 0, 0) < 0)
            return -1;
    }
    st_py.running = 1;
    /* Without it (out of memory) the audit hook still hears sys.setprofile. */
    if (swap_setprofile(1) < 0)
        PyErr_Clear();
    return 0;
}

void st_pybackend_stop(void)
{
    if (!st_py.running)
        return;
    st_py.running = 0;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t;
         t = PyThreadState_Next(t)) {
        if (t->c_tracefunc == line_trace && _PyEval_SetTrace(t, NULL, NULL) < 0)
            PyErr_Clear();
        Py_tracefunc f = t->c_profilefunc;
        if (is_ours(f)) {
            /* the program's own hook, if it has one, stays on its own */
            hooked_t *e = f == chain ? find_hooked(t) : NULL;
            Py_tracefunc theirs = e && e->ts ? e->ts->chained : NULL;
            PyObject *obj = theirs ? Py_XNewRef(t->c_profileobj) : NULL;
            if (set_hook(t, theirs, obj) < 0)
                PyErr_Clear();
            Py_XDECREF(obj);
        }
        if (t->c_tracefunc == trigger) {
            hk.setting++;
            if (_PyEval_SetTrace(t, NULL, NULL) < 0)
                PyErr_Clear();
            hk.setting--;
        }
    }
    /* threading's hook as the program left it: None means threads it started since
     * had no hook for strata to follow */
    st_py.threading_due = 0;
    PyObject *threading = hk.threading_set ? threading_loaded() : NULL;
    PyObject *left = threading ? PyObject_CallMethod(threading, "getprofile", NULL) : NULL;
    hk.threads_unfollowed = left == Py_None;
    Py_XDECREF(left);
    PyErr_Clear();
    if (threading && set_threading_profile(threading, Py_None, st_py.bootstrap) < 0)
        PyErr_Clear();
    Py_XDECREF(threading);
    hk.threading_set = 0;
    if (swap_setprofile(0) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

void st_pybackend_report(FILE *err)
{
    if (hk.late)
        fprintf(err, "strata: warning: the program's own profile function (sys.setprofile or "
                     "cProfile) took strata's place on a thread where strata could not take it "
                     "back at once (a thread with a trace function, or changed from another "
                     "thread); strata ran beside it from when it could, and calls made there "
                     "before that may be missing\n");
    if (hk.threads_unfollowed)
        fprintf(err, "strata: warning: the program cleared threading's profile function "
                     "(threading.setprofile(None)); threads it started after that were not "
                     "followed\n");
}
