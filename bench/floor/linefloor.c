/*
 * linefloor: the floor of line timing.  What a line profiler pays just for hearing
 * each line of the functions it times, with one clock read per line; whatever a real
 * line profiler costs beyond this is its own work.
 *
 * CPython 3.11: a C trace function (PyEval_SetTrace) on the calling thread whose
 * line events read the clock once; calls and returns are answered with 0.  This is
 * the event source kernprof -l uses there.
 *
 * CPython 3.12 and later: a sys.monitoring LINE callback (a C function called by
 * vectorcall) reading the clock once, switched on for the code objects given to
 * watch() only (set_local_events), under the profiler tool id.
 *
 *   install()      3.11: set the trace function; 3.12+: take the tool id and
 *                  register the callback
 *   watch(code)    3.12+: LINE events for this code object (3.11: nothing to do)
 *   uninstall()    take it all off
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <stdint.h>
#include <time.h>

#include "asmain.h"

static volatile uint64_t last;

static inline uint64_t one_clock_read(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

#if PY_VERSION_HEX >= 0x030C0000

static int tool = -1;
static long line_bit;

static PyObject *
line_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self; (void)args; (void)nargs;
    last = one_clock_read();
    Py_RETURN_NONE;
}

static PyMethodDef callback_def = {
    "linefloor_line", (PyCFunction)(void (*)(void))line_callback, METH_FASTCALL, NULL};

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyObject *mon = PySys_GetObject("monitoring");  /* borrowed */
    PyObject *events = mon ? PyObject_GetAttrString(mon, "events") : NULL;
    PyObject *id = mon ? PyObject_GetAttrString(mon, "PROFILER_ID") : NULL;
    PyObject *bit = events ? PyObject_GetAttrString(events, "LINE") : NULL;
    PyObject *cb = PyCFunction_New(&callback_def, NULL);
    PyObject *r = NULL;
    if (id && bit && cb) {
        tool = (int)PyLong_AsLong(id);
        line_bit = PyLong_AsLong(bit);
        r = PyObject_CallMethod(mon, "use_tool_id", "is", tool, "linefloor");
        if (r) {
            Py_DECREF(r);
            r = PyObject_CallMethod(mon, "register_callback", "ilO", tool, line_bit, cb);
        }
    }
    Py_XDECREF(events);
    Py_XDECREF(id);
    Py_XDECREF(bit);
    Py_XDECREF(cb);
    return r;
}

static PyObject *
watch(PyObject *module, PyObject *code)
{
    (void)module;
    PyObject *mon = PySys_GetObject("monitoring");
    return PyObject_CallMethod(mon, "set_local_events", "iOl", tool, code, line_bit);
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyObject *mon = PySys_GetObject("monitoring");
    PyObject *r = PyObject_CallMethod(mon, "register_callback", "ilO", tool, line_bit, Py_None);
    Py_XDECREF(r);
    return r ? PyObject_CallMethod(mon, "free_tool_id", "i", tool) : NULL;
}

#else

static int
trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)arg;
    if (what == PyTrace_LINE)
        last = one_clock_read();
    return 0;
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyEval_SetTrace(trace, NULL);
    Py_RETURN_NONE;
}

static PyObject *
watch(PyObject *module, PyObject *code)
{
    (void)module; (void)code;
    Py_RETURN_NONE;
}

static PyObject *
uninstall(PyObject *module, PyObject *unused)
{
    (void)module; (void)unused;
    PyEval_SetTrace(NULL, NULL);
    Py_RETURN_NONE;
}

#endif

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Start hearing line events."},
    {"watch", watch, METH_O, "3.12+: line events for this code object."},
    {"uninstall", uninstall, METH_NOARGS, "Stop."},
    FLOOR_RUN_MAIN_DEF,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "linefloor",
    .m_doc = "Line events with one clock read each: the floor of line timing.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit_linefloor(void)
{
    return PyModule_Create(&moduledef);
}
