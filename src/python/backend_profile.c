/* The backend for CPython 3.11: the C-level profile hook (PyEval_SetProfile).
 *
 * Every existing thread gets the hook when profiling starts (through
 * _PyEval_SetProfile on its thread state), and new threads through
 * threading.setprofile, whose trampoline installs the C hook on the thread's first
 * event. The hook turns CALL / RETURN / C_CALL / C_RETURN into the collector's
 * events (collector.h). CPython 3.12 and later use sys.monitoring instead
 * (backend_monitoring.c), behind the same functions; CMake builds the one that fits
 * the interpreter. */
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
} mirror_frame_t;

static int frame_layout_ok;

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
}
#else
static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps it alive */
    return co;
}

static void check_frame_layout(void) {}
#endif

/* ------------------------------------------------------------------------- */
/* The hook                                                                   */


/* The hook, in one copy with the timeline and one without (`tracing` is a
 * constant in each), so that a run without a timeline pays nothing for it; the
 * one a run needs is installed. */
static inline __attribute__((always_inline)) int hook_impl(PyObject *obj, PyFrameObject *frame,
                                                          int what, PyObject *arg,
                                                          const int tracing)
{
    st_pythread_t *ts = (st_pythread_t *)obj;
    switch (what) {
    case PyTrace_CALL:
        on_call(ts, frame_code(frame), frame, frame, tracing);
        return 0;
    case PyTrace_RETURN:
        on_return(ts, frame, tracing);
        return 0;
    case PyTrace_C_CALL:
        if (st_py.trace_c && !ts->blocked) {
            codeinfo_t *ci = code_info(frame_code(frame));
            if (ci && ci->module_ok)
                on_c_call(ts, st_pylabel_cfunc(arg), (const char *)frame + 1, tracing);
        }
        return 0;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        on_c_return(ts, (const char *)frame + 1, tracing);
        return 0;
    default:
        return 0;
    }
}

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return hook_impl(obj, frame, what, arg, 0);
}

static int hook_traced(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    return hook_impl(obj, frame, what, arg, 1);
}

/* The hook for this run: with the timeline or without. */
static Py_tracefunc run_hook(void) { return st_py.tracing ? hook_traced : hook; }

static int is_ours(Py_tracefunc f) { return f == hook || f == hook_traced; }

/* The calling thread's st_pythread_t, if the hook is installed on it. */
st_pythread_t *st_pybackend_current(void)
{
    PyThreadState *tstate = PyThreadState_Get();
    if (is_ours(tstate->c_profilefunc))
        return (st_pythread_t *)tstate->c_profileobj;
    return NULL;
}

/* Gives tstate a thread state object and the hook. With make_tree, its call tree
 * is made first: naming a thread runs Python code, which must not be recorded. */
static int install_on(PyThreadState *tstate, int is_current, int make_tree)
{
    unsigned long ident = (unsigned long)tstate->thread_id;
    uint64_t tid = is_current ? (uint64_t)PyThread_get_thread_native_id()
                              : (uint64_t)tstate->native_thread_id;
    st_pythread_t *ts = st_pythread_new(ident, tid);
    if (!ts)
        return -1;
    if (make_tree && !st_pythread_tree(ts)) {
        PyErr_NoMemory();
        return -1;
    }
    if (is_current) {
        PyEval_SetProfile(run_hook(), (PyObject *)ts);
        return 0;
    }
    return _PyEval_SetProfile(tstate, run_hook(), (PyObject *)ts);
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

static int set_threading_profile(PyObject *fn)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading)
        return -1;
    PyObject *r = PyObject_CallMethod(threading, "setprofile", "O", fn);
    Py_DECREF(threading);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
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
    /* threading first: importing it now must not be recorded. */
    if (set_threading_profile(st_py.bootstrap) < 0)
        return -1;
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
        if (is_ours(t->c_profilefunc)) {
            if (_PyEval_SetProfile(t, NULL, NULL) < 0)
                PyErr_Clear();
        }
    }
    if (set_threading_profile(Py_None) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

