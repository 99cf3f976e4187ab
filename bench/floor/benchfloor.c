/*
 * benchfloor: the floor of the benchmark.  An empty C profile hook: every
 * event (call, return, c_call, c_return, c_exception) is answered with 0 and
 * nothing else.  Whatever a real profiler costs beyond this is its own work;
 * this much any PyEval_SetProfile-based profiler pays just for being called.
 *
 *   install()            hook the calling thread, and (via threading.setprofile)
 *                        every thread started through `threading` afterwards
 *   uninstall()          remove it from the calling thread and stop following threads
 *   _thread_bootstrap()  what threading.setprofile is given: a new thread calls it
 *                        once (through sys.setprofile's trampoline) and it swaps
 *                        itself for the C hook, so threads run the same bare hook
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static int
empty_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj; (void)frame; (void)what; (void)arg;
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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "benchfloor",
    .m_doc = "An empty C profile hook: the floor for profiler overhead.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit_benchfloor(void)
{
    return PyModule_Create(&moduledef);
}
