/*
 * benchfloor: the floor of the benchmark.  What any profiler built on the
 * interpreter's event source pays just for being called; whatever a real
 * profiler costs beyond this is its own work.
 *
 * CPython 3.11: an empty C profile hook: every event (call, return, c_call,
 * c_return, c_exception) is answered with 0 and nothing else.
 *
 *   install()            hook the calling thread, and (via threading.setprofile)
 *                        every thread started through `threading` afterwards
 *   uninstall()          remove it from the calling thread and stop following threads
 *   _thread_bootstrap()  what threading.setprofile is given: a new thread calls it
 *                        once (through sys.setprofile's trampoline) and it swaps
 *                        itself for the C hook, so threads run the same bare hook
 *
 * CPython 3.12 and later: empty sys.monitoring callbacks (C functions called by
 * vectorcall, METH_FASTCALL, returning None) for the events strata watches without
 * --trace-c: PY_START, PY_RESUME, PY_THROW, PY_RETURN, PY_YIELD, PY_UNWIND, under
 * the profiler tool id.  sys.monitoring reaches every thread by itself.
 *
 *   install()            take sys.monitoring.PROFILER_ID, register the callbacks
 *   uninstall()          give the id back
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdint.h>

#include "asmain.h"

/* benchfloortsc.c builds this file again as `benchfloortsc`, whose callbacks read
 * the TSC once an event (the floor of any timing profiler: the event and one clock
 * read, nothing else). */
#ifndef FLOOR_NAME
#define FLOOR_NAME benchfloor
#endif
#define FLOOR_STR_(x) #x
#define FLOOR_STR(x) FLOOR_STR_(x)
#define FLOOR_CAT_(a, b) a##b
#define FLOOR_CAT(a, b) FLOOR_CAT_(a, b)

#ifdef FLOOR_TSC
static volatile uint64_t floor_last;
static inline void on_event(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    floor_last = (uint64_t)hi << 32 | lo;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    floor_last = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}
#else
static inline void on_event(void) {}
#endif

#if PY_VERSION_HEX >= 0x030C0000

static PyObject *
empty_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self; (void)args; (void)nargs;
    on_event();
    Py_RETURN_NONE;
}

static PyMethodDef callback_def = {
    "benchfloor_callback", (PyCFunction)(void (*)(void))empty_callback, METH_FASTCALL, NULL};

static const char *const watched[] = {
    "PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND"};

/* sys.monitoring.PROFILER_ID */
static int
profiler_id(PyObject *mon)
{
    PyObject *id = PyObject_GetAttrString(mon, "PROFILER_ID");
    int tool = id ? (int)PyLong_AsLong(id) : -1;
    Py_XDECREF(id);
    return tool;
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyObject *mon = PySys_GetObject("monitoring");  /* borrowed */
    PyObject *events = mon ? PyObject_GetAttrString(mon, "events") : NULL;
    PyObject *cb = PyCFunction_New(&callback_def, NULL);
    int tool = mon ? profiler_id(mon) : -1;
    long set = 0;
    PyObject *r = NULL;
    if (!events || !cb || tool < 0)
        goto done;
    r = PyObject_CallMethod(mon, "use_tool_id", "is", tool, "benchfloor");
    for (size_t i = 0; r && i < sizeof watched / sizeof *watched; i++) {
        Py_DECREF(r);
        PyObject *bit = PyObject_GetAttrString(events, watched[i]);
        long b = bit ? PyLong_AsLong(bit) : -1;
        Py_XDECREF(bit);
        r = b > 0 ? PyObject_CallMethod(mon, "register_callback", "ilO", tool, b, cb) : NULL;
        set |= b;
    }
    if (r) {
        Py_DECREF(r);
        r = PyObject_CallMethod(mon, "set_events", "il", tool, set);
    }
done:
    Py_XDECREF(events);
    Py_XDECREF(cb);
    return r;
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyObject *mon = PySys_GetObject("monitoring");
    int tool = mon ? profiler_id(mon) : -1;
    if (tool < 0)
        return NULL;
    PyObject *r = PyObject_CallMethod(mon, "set_events", "ii", tool, 0);
    Py_XDECREF(r);
    return r ? PyObject_CallMethod(mon, "free_tool_id", "i", tool) : NULL;
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Register the empty sys.monitoring callbacks."},
    {"uninstall", uninstall, METH_NOARGS, "Give the tool id back."},
    FLOOR_RUN_MAIN_DEF,
    {NULL, NULL, 0, NULL},
};

#else

static int
empty_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
    on_event();
    return 0;
}

/* Called by sys.setprofile's trampoline on the new thread's first event. */
static PyObject *
thread_bootstrap(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self; (void)args; (void)nargs;
    PyEval_SetProfile(empty_hook, NULL);
    Py_RETURN_NONE;
}

static PyObject *
set_threading_hook(PyObject *module, int on)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (threading == NULL)
        return NULL;
    PyObject *hook = Py_None;
    if (on) {
        hook = PyObject_GetAttrString(module, "_thread_bootstrap");
        if (hook == NULL) {
            Py_DECREF(threading);
            return NULL;
        }
    } else {
        Py_INCREF(hook);
    }
    PyObject *res = PyObject_CallMethod(threading, "setprofile", "O", hook);
    Py_DECREF(hook);
    Py_DECREF(threading);
    return res;
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)unused;
    PyObject *res = set_threading_hook(module, 1);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    PyEval_SetProfile(empty_hook, NULL);
    Py_RETURN_NONE;
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    (void)unused;
    PyEval_SetProfile(NULL, NULL);
    return set_threading_hook(module, 0);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Install the empty profile hook."},
    {"uninstall", uninstall, METH_NOARGS, "Remove the empty profile hook."},
    {"_thread_bootstrap", (PyCFunction)(void (*)(void))thread_bootstrap, METH_FASTCALL,
     "threading.setprofile target: installs the C hook on the new thread."},
    FLOOR_RUN_MAIN_DEF,
    {NULL, NULL, 0, NULL},
};

#endif

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = FLOOR_STR(FLOOR_NAME),
    .m_doc = "Empty profiling callbacks: the floor for profiler overhead.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
FLOOR_CAT(PyInit_, FLOOR_NAME)(void)
{
    return PyModule_Create(&moduledef);
}
