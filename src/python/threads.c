/* Thread state objects: one per Python thread seen while profiling. */
#include "python/collector.h"

#include <stdio.h>

/* The thread's name from threading._active, or a made-up one. */
static void thread_name(unsigned long ident, char *buf, size_t size)
{
    snprintf(buf, size, "Thread-%lu", ident);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *modname = PyUnicode_FromString("threading");
    PyObject *threading = modname ? PyImport_GetModule(modname) : NULL;
    Py_XDECREF(modname);
    if (threading) {
        PyObject *active = PyObject_GetAttrString(threading, "_active");
        PyObject *key = PyLong_FromUnsignedLong(ident);
        PyObject *t = active && key ? PyObject_GetItem(active, key) : NULL;
        PyObject *name = t ? PyObject_GetAttrString(t, "name") : NULL;
        const char *s = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (s)
            snprintf(buf, size, "%s", s);
        Py_XDECREF(name);
        Py_XDECREF(t);
        Py_XDECREF(key);
        Py_XDECREF(active);
        Py_DECREF(threading);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

__attribute__((noinline, cold)) st_thread_t *st_pythread_tree(st_pythread_t *ts)
{
    char name[64];
    thread_name(ts->ident, name, sizeof name);
    ts->th = st_session_new_thread(&st_py.session, ts->tid, name);
    return ts->th;
}

st_pythread_t *st_pythread_new(unsigned long ident, uint64_t tid)
{
    st_pythread_t *ts = PyObject_New(st_pythread_t, &st_pythread_type);
    if (!ts)
        return NULL;
    ts->th = NULL;
    ts->ident = ident;
    ts->tid = tid;
    ts->scope_depth = 0;
    ts->scope_root = NULL;
    ts->suppress = NULL;
    update_blocked(ts);
    if (PyList_Append(st_py.threads, (PyObject *)ts) < 0) {
        Py_DECREF(ts);
        return NULL;
    }
    Py_DECREF(ts); /* the list holds it */
    return ts;
}

PyTypeObject st_pythread_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_strata.st_pythread_t",
    .tp_basicsize = sizeof(st_pythread_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A thread's profiling state (internal).",
};

