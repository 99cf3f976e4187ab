/* The backend for CPython 3.12 and later: sys.monitoring (PEP 669).
 *
 * Design note. On 3.12+ the old profile hook is a compatibility layer over
 * sys.monitoring and costs about three times a native callback, so strata
 * registers C callbacks itself: PyCFunction objects with METH_FASTCALL, which the
 * interpreter calls through vectorcall with no tuple and no frame object, under
 * tool id 4 (else 3), which CPython assigns to no kind of tool: the program's own
 * profiler (cProfile, `python -m cProfile`), debugger and coverage tool find their
 * ids free, and run beside strata, each hearing every event. Only with 4 and 3
 * taken does strata take an assigned one (a one-line warning says which); with
 * none free, start() fails and `strata python` stops with status 2 before the
 * target runs.
 *
 *   PY_START, PY_RESUME, PY_THROW   -> on_call: a call starts, or a generator or
 *                                      coroutine resumes (3.11's CALL)
 *   PY_RETURN, PY_YIELD, PY_UNWIND  -> on_return (3.11's RETURN)
 *   CALL + C_RETURN, C_RAISE        -> on_c_call / on_c_return, with --trace-c only
 *
 * so that every table and profile.json is what 3.11 gives for the same program.
 *
 * Keys: the code object (collector.h says why that is enough); for C calls, the
 * callable. CALL reports every call; only C functions are recorded: PyCFunction
 * objects, and method descriptors called with a self, which 3.11 saw as a
 * PyCFunction bound to that self (labelled the same way, without making one).
 *
 * Paying nothing for what is left out: PY_START, PY_RESUME, PY_RETURN and PY_YIELD
 * of skipped code (code_skipped: left out by the filters on every thread,
 * whatever its -b scope or @noprofile state) answer sys.monitoring.DISABLE, which
 * switches that event off at that place in that code object: after its first call
 * such code runs uninstrumented. Exits are switched off only for code that was
 * never recorded (ever_kept), so a call pushed before a settings change still
 * finds its end; CALL is switched off in code whose file is left out. When the
 * settings change (a new generation) or a switched-off function gets a mark,
 * sys.monitoring.restart_events() switches everything on again and the verdicts
 * are made anew. PY_THROW, PY_UNWIND, C_RETURN and C_RAISE cannot be switched off.
 *
 * Threads: sys.monitoring reaches every thread, those started before profiling
 * included. A thread's st_pythread_t is found through a thread-local pointer, made
 * at the thread's first event (a thread that existed when profiling started gets
 * its recorder state at its first recorded call, as on 3.11).
 *
 * The callbacks run with the GIL held and with monitoring off for the calling
 * thread (code they run makes no events); they never raise and never allocate,
 * but on a thread's first event and in the caches' slow paths. */
#include "python/collector.h"

#if PY_VERSION_HEX < 0x030C0000
#error "backend_monitoring.c needs CPython 3.12 or later; 3.11 builds backend_profile.c"
#endif
#ifdef Py_GIL_DISABLED
#error "strata needs a CPython with the GIL (not a free-threaded build)"
#endif

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* State                                                                      */

/* The calling thread's state: static TLS (initial-exec), a plain load. */
static _Thread_local st_pythread_t *tl_ts __attribute__((tls_model("initial-exec")));

enum { EV_START, EV_RESUME, EV_THROW, EV_RETURN, EV_YIELD, EV_UNWIND, EV_CALL, EV_C_RETURN,
       EV_C_RAISE, EV_COUNT };

static const char *const event_names[EV_COUNT] = {
    "PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND",
    "CALL", "C_RETURN", "C_RAISE",
};

static struct {
    PyObject *monitoring;          /* sys.monitoring */
    PyObject *disable;             /* sys.monitoring.DISABLE */
    PyObject *missing;             /* sys.monitoring.MISSING (CALL with no argument) */
    long bits[EV_COUNT];           /* sys.monitoring.events.<name> */
    PyObject *all_callbacks[2][EV_COUNT]; /* callback_defs' functions */
    PyObject **callbacks;          /* the copy registered: this run's (st_py.tracing) */
    int tool;                      /* the tool id held, -1 when none */
    int lost_tool;                 /* the id the program freed under strata, or -1 */
    unsigned long *before;         /* idents of the threads that existed at start */
    size_t nbefore;
    long line_bit;                 /* sys.monitoring.events.LINE (--lines) */
    PyObject *line_callback;
    int started;                   /* a session started the events before */
} mon = {.tool = -1, .lost_tool = -1};

/* ------------------------------------------------------------------------- */
/* Threads                                                                    */

/* Makes the calling thread's state (cold). NULL when not profiling or out of
 * memory. In a callback (its first event), a new thread registers with the
 * recorder too: threads are numbered by when they first ran Python code, as on
 * 3.11. Outside one (a `with profile:` block on a thread that had no event yet)
 * registering waits for the first recorded call: naming the thread runs Python code, whose events only a
 * callback keeps from coming back here. */
static __attribute__((noinline, cold)) st_pythread_t *new_thread_state(int in_callback)
{
    if (!st_py.running || st_py.forked_child)
        return NULL;
    unsigned long ident = PyThread_get_thread_ident();
    st_pythread_t *ts = st_pythread_new(ident, (uint64_t)PyThread_get_thread_native_id());
    if (!ts) {
        PyErr_Clear();
        return NULL;
    }
    tl_ts = ts;
    int existed = 0;
    for (size_t i = 0; i < mon.nbefore; i++)
        existed |= mon.before[i] == ident;
    if (!existed && in_callback)
        st_pythread_rec_early(ts);
    return ts;
}

/* The calling thread's state in a callback, made at its first event. */
static inline st_pythread_t *thread_state(void)
{
    st_pythread_t *ts = tl_ts;
    return __builtin_expect(ts != NULL, 1) ? ts : new_thread_state(1);
}

st_pythread_t *st_pybackend_current(void)
{
    return tl_ts ? tl_ts : new_thread_state(0);
}

/* ------------------------------------------------------------------------- */
/* The callbacks: (code, instruction_offset[, value]) and                     */
/* (code, instruction_offset, callable, arg0) for CALL, C_RETURN, C_RAISE.     */

/* Switches an event off at this place of skipped code (noted on the code, so that
 * a later mark switches it on again). */
static __attribute__((noinline)) PyObject *disable(PyCodeObject *co)
{
    codeinfo_t *ci = cached_info(co);
    if (ci)
        ci->disabled = 1;
    return Py_NewRef(mon.disable);
}

/* A call starts or resumes; skipped code's event is switched off where allowed. */
static inline __attribute__((always_inline)) PyObject *enter(PyObject *const *args,
                                                             int may_disable, const int tracing)
{
    st_pythread_t *ts = thread_state();
    PyCodeObject *co = (PyCodeObject *)args[0];
    if (ts && on_call(ts, co, co, NULL, tracing) && may_disable)
        return disable(co);
    Py_RETURN_NONE;
}

/* Whether an exit that closed nothing may be switched off: code that no thread
 * records and that never was recorded. */
static inline int exit_skipped(st_pythread_t *ts, PyCodeObject *co)
{
    codeinfo_t *ci = code_info(co);
    if (!ci || !code_skipped(ci) || ci->ever_kept)
        return 0;
    ts->skipped_events++;
    return 1;
}

/* A call returns, yields or unwinds; likewise. */
static inline __attribute__((always_inline)) PyObject *leave(PyObject *const *args,
                                                             int may_disable, const int tracing)
{
    st_pythread_t *ts = thread_state();
    PyCodeObject *co = (PyCodeObject *)args[0];
    if (ts && !on_return(ts, co, tracing) && exit_skipped(ts, co) && may_disable)
        return disable(co);
    Py_RETURN_NONE;
}

/* The callbacks of the four kinds of Python events, in one copy with the timeline
 * and one without (`tracing` a constant in each, as 3.11's hook has), so that a
 * run without a timeline pays nothing for it; start() registers the copy the run
 * needs. PY_START and PY_RESUME may switch skipped code off; PY_THROW (an
 * exception thrown into a generator or coroutine resumes it) and PY_UNWIND (a
 * frame ends by an exception) cannot be switched off. */
#define PY_CALLBACKS(suffix, tracing)                                                       \
    static PyObject *cb_enter##suffix(PyObject *self, PyObject *const *args, Py_ssize_t n) \
    {                                                                                      \
        (void)self;                                                                        \
        (void)n;                                                                           \
        return enter(args, 1, tracing);                                                    \
    }                                                                                      \
    static PyObject *cb_throw##suffix(PyObject *self, PyObject *const *args, Py_ssize_t n) \
    {                                                                                      \
        (void)self;                                                                        \
        (void)n;                                                                           \
        return enter(args, 0, tracing);                                                    \
    }                                                                                      \
    static PyObject *cb_exit##suffix(PyObject *self, PyObject *const *args, Py_ssize_t n)  \
    {                                                                                      \
        (void)self;                                                                        \
        (void)n;                                                                           \
        return leave(args, 1, tracing);                                                    \
    }                                                                                      \
    static PyObject *cb_unwind##suffix(PyObject *self, PyObject *const *args,              \
                                       Py_ssize_t n)                                       \
    {                                                                                      \
        (void)self;                                                                        \
        (void)n;                                                                           \
        return leave(args, 0, tracing);                                                    \
    }
PY_CALLBACKS(, 0)
PY_CALLBACKS(_traced, 1)
#undef PY_CALLBACKS

/* CALL (--trace-c): records C functions; Python callables start their own
 * frames, whose PY_START is theirs. */
static PyObject *cb_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    st_pythread_t *ts = thread_state();
    if (!ts || ts->blocked || nargs < 4)
        Py_RETURN_NONE;
    PyObject *fn = args[2], *arg0 = args[3];
    PyCodeObject *caller = (PyCodeObject *)args[0];
    codeinfo_t *ci = code_info(caller);
    if (!ci)
        Py_RETURN_NONE;
    if (!ci->module_ok) {
        /* Nothing this code calls is recorded, on any thread: the CALL event (and
         * its C_RETURN and C_RAISE) go off at this call site. */
        ts->skipped_events++;
        return disable(caller);
    }
    if (PyCFunction_CheckExact(fn) || PyCMethod_CheckExact(fn)) {
        on_c_call(ts, st_pylabel_cfunc(fn), fn, st_py.tracing);
    } else if (Py_IS_TYPE(fn, &PyMethodDescr_Type) && arg0 != mon.missing) {
        PyMethodDescrObject *d = (PyMethodDescrObject *)fn;
        if (PyObject_TypeCheck(arg0, PyDescr_TYPE(d)))
            on_c_call(ts, st_pylabel_cmethod(d->d_method, arg0), fn, st_py.tracing);
    }
    Py_RETURN_NONE;
}

/* C_RETURN, C_RAISE. A call made from left-out code was not recorded, and must
 * not close a recorded call of the same callable further out. */
static PyObject *cb_c_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    st_pythread_t *ts = thread_state();
    if (!ts || nargs < 3 || !ts->th || st_rec_top_key(ts->th) != args[2])
        Py_RETURN_NONE;
    codeinfo_t *ci = code_info((PyCodeObject *)args[0]);
    if (ci && ci->module_ok)
        on_c_return(ts, args[2], st_py.tracing);
    Py_RETURN_NONE;
}

/* LINE (--lines), switched on for the chosen code objects only: (code, line). */
static PyObject *cb_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    st_pythread_t *ts = tl_ts;
    if (ts && nargs >= 2 && ts->ldepth) {
        long line = PyLong_AsLong(args[1]);
        if (line < 0 || line > INT_MAX)
            PyErr_Clear();
        else
            lines_line(ts, args[0], (int)line);
    }
    Py_RETURN_NONE;
}

#define CB(name, fn) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, NULL}
static PyMethodDef line_def = CB("strata_line", cb_line);
/* [0] without the timeline, [1] with it; the C ones read st_py.tracing. */
static PyMethodDef callback_defs[2][EV_COUNT] = {
    {
        [EV_START] = CB("strata_py_start", cb_enter),
        [EV_RESUME] = CB("strata_py_resume", cb_enter),
        [EV_THROW] = CB("strata_py_throw", cb_throw),
        [EV_RETURN] = CB("strata_py_return", cb_exit),
        [EV_YIELD] = CB("strata_py_yield", cb_exit),
        [EV_UNWIND] = CB("strata_py_unwind", cb_unwind),
        [EV_CALL] = CB("strata_call", cb_call),
        [EV_C_RETURN] = CB("strata_c_return", cb_c_exit),
        [EV_C_RAISE] = CB("strata_c_raise", cb_c_exit),
    },
    {
        [EV_START] = CB("strata_py_start", cb_enter_traced),
        [EV_RESUME] = CB("strata_py_resume", cb_enter_traced),
        [EV_THROW] = CB("strata_py_throw", cb_throw_traced),
        [EV_RETURN] = CB("strata_py_return", cb_exit_traced),
        [EV_YIELD] = CB("strata_py_yield", cb_exit_traced),
        [EV_UNWIND] = CB("strata_py_unwind", cb_unwind_traced),
        [EV_CALL] = CB("strata_call", cb_call),
        [EV_C_RETURN] = CB("strata_c_return", cb_c_exit),
        [EV_C_RAISE] = CB("strata_c_raise", cb_c_exit),
    },
};
#undef CB

/* ------------------------------------------------------------------------- */
/* Starting and stopping                                                      */

/* sys.monitoring.<method>(args...) with its result dropped; -1 on error. */
static int mon_call(const char *method, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *fn = PyObject_GetAttrString(mon.monitoring, method);
    PyObject *args = fn ? Py_VaBuildValue(fmt, va) : NULL;
    va_end(va);
    PyObject *r = args ? PyObject_Call(fn, args, NULL) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The events to watch: the Python ones always, CALL and its ends with --trace-c. */
static long event_set(void)
{
    long set = 0;
    for (int e = EV_START; e <= EV_UNWIND; e++)
        set |= mon.bits[e];
    if (st_py.trace_c)
        set |= mon.bits[EV_CALL] | mon.bits[EV_C_RETURN] | mon.bits[EV_C_RAISE];
    return set;
}

/* The name of the tool holding id, or NULL (new reference; -1 on error). */
static int tool_holder(int id, PyObject **name)
{
    *name = PyObject_CallMethod(mon.monitoring, "get_tool", "i", id);
    if (!*name)
        return -1;
    if (*name == Py_None)
        Py_CLEAR(*name);
    return 0;
}

/* The tool ids strata tries, in order: the two that CPython assigns to no kind of
 * tool first, so that the program's own profiler (cProfile takes PROFILER_ID, 2),
 * debugger (0), coverage tool (1) or optimizer (5) finds its id free; then those,
 * the profiler's last. */
static const int tool_order[] = {4, 3, 5, 1, 0, 2};

/* Takes the first free id of tool_order, warning when it has to take one that a
 * kind of tool is assigned; fails with _strata.Error when every id is taken. */
static int claim_tool_id(void)
{
    int id = -1;
    PyObject *first_holder = NULL;
    for (size_t i = 0; id < 0 && i < sizeof tool_order / sizeof *tool_order; i++) {
        PyObject *holder;
        if (tool_holder(tool_order[i], &holder) < 0) {
            Py_XDECREF(first_holder);
            return -1;
        }
        if (!holder)
            id = tool_order[i];
        else if (!first_holder)
            first_holder = holder;
        else
            Py_DECREF(holder);
    }
    if (first_holder) {
        PyObject *s = PyObject_Str(first_holder);
        const char *who = s ? PyUnicode_AsUTF8(s) : NULL;
        if (!who) {
            PyErr_Clear();
            who = "another tool";
        }
        if (id < 0)
            PyErr_Format(st_py.error,
                         "sys.monitoring tool ids 0 to 5 are all in use (id %d by %s): nothing "
                         "to profile with (free one in the program or its setup)",
                         tool_order[0], who);
        else if (id != 3)
            PySys_WriteStderr("strata: warning: sys.monitoring tool ids 4 and 3 are in use (4 "
                              "by %s); using id %d, which the program cannot then take\n",
                              who, id);
        Py_XDECREF(s);
        Py_DECREF(first_holder);
        if (id < 0)
            return -1;
    }
    if (mon_call("use_tool_id", "(is)", id, "strata") < 0)
        return -1;
    mon.tool = id;
    return 0;
}

/* Reads sys.monitoring's objects and event numbers, and makes the callbacks. */
static int load_monitoring(void)
{
    if (mon.monitoring)
        return 0;
    PyObject *m = PySys_GetObject("monitoring"); /* borrowed */
    if (!m) {
        PyErr_SetString(st_py.error, "this Python has no sys.monitoring");
        return -1;
    }
    PyObject *events = PyObject_GetAttrString(m, "events");
    if (!events)
        return -1;
    for (int e = 0; e < EV_COUNT; e++) {
        PyObject *v = PyObject_GetAttrString(events, event_names[e]);
        mon.bits[e] = v ? PyLong_AsLong(v) : -1;
        Py_XDECREF(v);
        if (mon.bits[e] <= 0) {
            Py_DECREF(events);
            if (!PyErr_Occurred())
                PyErr_Format(st_py.error, "sys.monitoring has no event %s", event_names[e]);
            return -1;
        }
    }
    PyObject *line = PyObject_GetAttrString(events, "LINE");
    mon.line_bit = line ? PyLong_AsLong(line) : -1;
    Py_XDECREF(line);
    Py_DECREF(events);
    if (mon.line_bit <= 0)
        return -1;
    if (!mon.line_callback && !(mon.line_callback = PyCFunction_New(&line_def, NULL)))
        return -1;
    mon.disable = PyObject_GetAttrString(m, "DISABLE");
    mon.missing = PyObject_GetAttrString(m, "MISSING");
    if (!mon.disable || !mon.missing)
        return -1;
    for (int t = 0; t < 2; t++)
        for (int e = 0; e < EV_COUNT; e++)
            if (!mon.all_callbacks[t][e] &&
                !(mon.all_callbacks[t][e] = PyCFunction_New(&callback_defs[t][e], NULL)))
                return -1;
    mon.monitoring = Py_NewRef(m);
    return 0;
}

/* Remembers the threads that exist now (they register lazily, as on 3.11). */
static int note_threads(PyThreadState *me)
{
    size_t n = 0;
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t; t = PyThreadState_Next(t))
        n++;
    unsigned long *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids) {
        PyErr_NoMemory();
        return -1;
    }
    size_t k = 0;
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t && k < n;
         t = PyThreadState_Next(t))
        if (t != me)
            ids[k++] = (unsigned long)t->thread_id;
    free(mon.before);
    mon.before = ids;
    mon.nbefore = k;
    return 0;
}

/* --lines: a chosen code object's first call switches its LINE events on. */
void st_pylines_arm(st_pythread_t *ts, st_pyltab_t *tab)
{
    (void)ts;
    if (tab->armed || mon.tool < 0 || !mon.line_callback)
        return;
    tab->armed = 1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (mon_call("set_local_events", "(iOl)", mon.tool, tab->code, mon.line_bit) < 0) {
        PyErr_Clear();
        st_pylines_lost();
    }
    PyErr_Restore(et, ev, tb);
}

void st_pylines_disarm(st_pythread_t *ts) { (void)ts; }

/* Switches the chosen code objects' LINE events off. */
static void lines_off(void)
{
    size_t n;
    st_pyltab_t *const *tabs = st_pylines_tables(&n);
    for (size_t i = 0; i < n; i++)
        if (tabs[i]->armed) {
            tabs[i]->armed = 0;
            if (mon_call("set_local_events", "(iOi)", mon.tool, tabs[i]->code, 0) < 0)
                PyErr_Clear();
        }
}

/* Switches the events off, unregisters the callbacks and gives the tool id back
 * (errors dropped; a pending exception is kept). */
static void release_tool(void)
{
    if (mon.tool < 0)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (mon_call("set_events", "(ii)", mon.tool, 0) < 0)
        PyErr_Clear();
    lines_off();
    if (mon.line_callback &&
        mon_call("register_callback", "(ilO)", mon.tool, mon.line_bit, Py_None) < 0)
        PyErr_Clear();
    for (int e = 0; e < EV_COUNT; e++)
        if (mon_call("register_callback", "(ilO)", mon.tool, mon.bits[e], Py_None) < 0)
            PyErr_Clear();
    if (mon_call("free_tool_id", "(i)", mon.tool) < 0)
        PyErr_Clear();
    mon.tool = -1;
    PyErr_Restore(et, ev, tb);
}

int st_pybackend_start(void)
{
    if (st_py.running)
        return 0;
    if (load_monitoring() < 0)
        return -1;
    PyThreadState *me = PyThreadState_Get();
    if (note_threads(me) < 0 || claim_tool_id() < 0)
        return -1;
    /* The thread starting the profile (the main thread) is |0>>>; it registers
     * now, before any event. */
    st_pythread_t *ts = st_pythread_new(PyThread_get_thread_ident(),
                                        (uint64_t)PyThread_get_thread_native_id());
    if (!ts)
        goto fail;
    if (!st_pythread_rec(ts)) {
        PyErr_NoMemory();
        goto fail;
    }
    mon.callbacks = mon.all_callbacks[st_py.tracing != 0];
    for (int e = 0; e < EV_COUNT; e++) {
        if (mon_call("register_callback", "(ilO)", mon.tool, mon.bits[e], mon.callbacks[e]) < 0)
            goto fail;
    }
    if (st_py.lines &&
        mon_call("register_callback", "(ilO)", mon.tool, mon.line_bit, mon.line_callback) < 0)
        goto fail;
    tl_ts = ts;
    st_py.running = 1;
    if (mon_call("set_events", "(il)", mon.tool, event_set()) < 0) {
        st_py.running = 0;
        goto fail;
    }
    /* a later session: what the last one switched off (DISABLE) is judged anew */
    if (mon.started && mon_call("restart_events", "()") < 0)
        PyErr_Clear();
    mon.started = 1;
    return 0;
fail:
    release_tool();
    return -1;
}

/* Whether strata's callbacks and events are still in place on its tool id (the
 * program may have freed the id and taken it, or changed them): a callback is read
 * by registering None and putting back what comes out. */
static int still_ours(void)
{
    PyObject *reg = PyObject_GetAttrString(mon.monitoring, "register_callback");
    int ours = reg != NULL;
    for (int e = 0; ours && e < EV_COUNT; e++) {
        if (e >= EV_CALL && !st_py.trace_c)
            break;
        PyObject *was = PyObject_CallFunction(reg, "ilO", mon.tool, mon.bits[e], Py_None);
        if (!was) {
            ours = 0;
            break;
        }
        PyObject *back = PyObject_CallFunction(reg, "ilO", mon.tool, mon.bits[e], was);
        ours = back && was == mon.callbacks[e];
        Py_XDECREF(back);
        Py_DECREF(was);
    }
    Py_XDECREF(reg);
    PyObject *ev = ours ? PyObject_CallMethod(mon.monitoring, "get_events", "i", mon.tool) : NULL;
    long set = ev ? PyLong_AsLong(ev) : 0;
    Py_XDECREF(ev);
    PyErr_Clear();
    /* get_events leaves out C_RETURN and C_RAISE (they come with CALL) */
    long want = event_set() & ~(mon.bits[EV_C_RETURN] | mon.bits[EV_C_RAISE]);
    return ours && (set & want) == want;
}

void st_pybackend_stop(void)
{
    if (!st_py.running)
        return;
    st_py.running = 0;
    if (mon.tool < 0)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *holder = NULL;
    int held = tool_holder(mon.tool, &holder) == 0 && holder && PyUnicode_Check(holder) &&
               PyUnicode_CompareWithASCIIString(holder, "strata") == 0;
    PyErr_Clear();
    Py_XDECREF(holder);
    int ours = still_ours();
    if (!ours)
        mon.lost_tool = mon.tool;
    if (held) {
        release_tool();
    } else {
        /* The id is the program's now: strata takes back only its own callbacks. */
        if (ours && st_py.lines) {
            lines_off();
            if (mon_call("register_callback", "(ilO)", mon.tool, mon.line_bit, Py_None) < 0)
                PyErr_Clear();
        }
        for (int e = 0; ours && e < EV_COUNT; e++)
            if (mon_call("register_callback", "(ilO)", mon.tool, mon.bits[e], Py_None) < 0)
                PyErr_Clear();
        mon.tool = -1;
    }
    PyErr_Restore(et, ev, tb);
}

void st_pybackend_report(FILE *err)
{
    if (mon.lost_tool >= 0)
        fprintf(err,
                "strata: warning: the program took over sys.monitoring tool id %d, which "
                "strata held (it changed its callbacks or events); calls made after that may "
                "be missing from the profile\n",
                mon.lost_tool);
}

void st_pybackend_new_session(void)
{
    mon.lost_tool = -1;
}

/* New verdicts: the events (CALL with --trace-c) may change, and whatever was
 * switched off is switched on again to be judged anew. */
void st_pybackend_refresh(void)
{
    if (!st_py.running || mon.tool < 0)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (mon_call("set_events", "(il)", mon.tool, event_set()) < 0 ||
        mon_call("restart_events", "()") < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}
