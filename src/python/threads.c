/* Thread state objects: one per Python thread seen while profiling (threads.h). */
#include "python/threads.h"

#include <stdio.h>

PyObject *st_pythread_threading(void)
{
    PyObject *modname = PyUnicode_FromString("threading");
    PyObject *threading = modname ? PyImport_GetModule(modname) : NULL;
    Py_XDECREF(modname);
    return threading;
}

/* threading._active[ident] (the Thread object), or NULL if it has none; new
 * reference, no exception left set. */
static PyObject *threading_thread(PyObject *threading, unsigned long ident)
{
    PyObject *active = PyObject_GetAttrString(threading, "_active");
    PyObject *key = PyLong_FromUnsignedLong(ident);
    PyObject *t = active && key && PyDict_Check(active) ? PyDict_GetItemWithError(active, key)
                                                         : NULL;
    Py_XINCREF(t);
    Py_XDECREF(key);
    Py_XDECREF(active);
    PyErr_Clear();
    return t;
}

/* Whether Thread object t's attribute `attr` is the number v. */
static int thread_attr_is(PyObject *t, const char *attr, unsigned long v)
{
    PyObject *id = PyObject_GetAttrString(t, attr);
    int is = id && PyLong_Check(id) && PyLong_AsUnsignedLong(id) == v;
    Py_XDECREF(id);
    PyErr_Clear();
    return is;
}

/* A thread that has ended, as threading still knows it: the Thread objects alive
 * are in threading._dangling (a WeakSet), ended ones keep their ident and kernel
 * id. One with that ident and, unless native_id is 0, that kernel id (an ident may
 * have been reused: then any of them), or NULL. */
static PyObject *ended_thread(PyObject *threading, unsigned long ident, unsigned long native_id)
{
    PyObject *all = PyObject_GetAttrString(threading, "_dangling");
    PyObject *it = all ? PyObject_GetIter(all) : NULL, *t, *found = NULL;
    while (it && (t = PyIter_Next(it)) != NULL) {
        if (thread_attr_is(t, "ident", ident) &&
            (!native_id || thread_attr_is(t, "native_id", native_id))) {
            Py_XDECREF(found);
            found = t;
        } else
            Py_DECREF(t);
    }
    Py_XDECREF(it);
    Py_XDECREF(all);
    PyErr_Clear();
    return found;
}

int st_pythread_name(unsigned long ident, char *buf, size_t size)
{
    return st_pythread_name_native(ident, 0, buf, size);
}

int st_pythread_name_native(unsigned long ident, unsigned long native_id, char *buf,
                            size_t size)
{
    int found = 0;
    snprintf(buf, size, "Thread-%lu", ident);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *threading = st_pythread_threading(), *t = NULL;
    if (threading) {
        t = threading_thread(threading, ident);
        if (!t)
            t = ended_thread(threading, ident, native_id);
    } else if (ident == st_py.main_ident) {
        /* A program that never imports threading (strata itself does not) has
         * no Thread objects: its main thread is named as threading would name
         * it. */
        snprintf(buf, size, "MainThread");
        found = 1;
    }
    PyObject *name = t ? PyObject_GetAttrString(t, "name") : NULL;
    const char *s = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s) {
        snprintf(buf, size, "%s", s);
        found = 1;
    }
    Py_XDECREF(name);
    Py_XDECREF(t);
    Py_XDECREF(threading);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return found;
}

/* 1 if threading._active has the thread (0 while it is still starting). */
static int thread_registered(unsigned long ident)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *threading = st_pythread_threading();
    PyObject *t = threading ? threading_thread(threading, ident) : NULL;
    int found = t != NULL;
    Py_XDECREF(t);
    Py_XDECREF(threading);
    PyErr_Restore(et, ev, tb);
    return found;
}

/* A thread's end. An object of this type sits in the thread state's dict of each
 * thread that records; the interpreter clears that dict, with the GIL held, when
 * the thread ends (PyThreadState_Clear), and the object's dealloc then tells the
 * recorder, which gives back the memory only recording needs (st_rec_thread_finish;
 * the recorder's own pthread key would do it later, at the pthread's exit). At exit
 * (the main thread's dict is cleared after the results are written) and in a
 * forked child it does nothing. */
typedef struct {
    PyObject_HEAD
    st_rec_thread_t *th;
    uint64_t rec_id;         /* th's recorder: a later session's is another */
} thread_end_t;

static void thread_end_dealloc(PyObject *self)
{
    thread_end_t *o = (thread_end_t *)self;
    if (o->th && st_py.live && !st_py.finalized && !st_py.forked_child &&
        o->rec_id == st_py.session.rec.id)
        st_rec_thread_finish(o->th);
    PyObject_Free(self);
}

static PyTypeObject thread_end_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_strata.thread_end",
    .tp_basicsize = sizeof(thread_end_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = thread_end_dealloc,
    .tp_doc = "Tells strata that a thread has ended (internal).",
};

/* Puts a thread_end_t for th into the calling thread's state dict. */
static void watch_thread_end(st_rec_thread_t *th)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *dict = PyThreadState_GetDict(); /* borrowed */
    if (dict && (thread_end_type.tp_flags & Py_TPFLAGS_READY || PyType_Ready(&thread_end_type) == 0)) {
        thread_end_t *o = PyObject_New(thread_end_t, &thread_end_type);
        if (o) {
            o->th = th;
            o->rec_id = st_py.session.rec.id;
            PyDict_SetItemString(dict, "strata.thread_end", (PyObject *)o);
            Py_DECREF(o);
        }
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

__attribute__((noinline, cold)) st_rec_thread_t *st_pythread_rec(st_pythread_t *ts)
{
    char name[64];
    if (ts->th) {
        /* Registered at the thread's first event, before threading knew it: named
         * now, at its first recorded call (once; a made-up name stays if it has
         * none). */
        ts->unnamed = 0;
        st_pythread_name(ts->ident, name, sizeof name);
        st_rec_thread_name(ts->th, name);
        return ts->th;
    }
    /* Only the thread itself registers (the recorder's thread-local pointer):
     * threads that ran before profiling register at their first recorded call. */
    if (ts->ident != PyThread_get_thread_ident())
        return NULL;
    st_pythread_name(ts->ident, name, sizeof name);
    st_rec_thread_t *th = st_rec_self(&st_py.session.rec);
    if (!th)
        return NULL;
    st_rec_thread_name(th, name);
    ts->th = th;
    watch_thread_end(th);
    return th;
}

/* Registers a thread at its first event, so that threads are numbered in the order
 * they first ran Python code; if threading does not know the thread yet (it is
 * still starting), the name is filled in at its first recorded call. */
st_rec_thread_t *st_pythread_rec_early(st_pythread_t *ts)
{
    if (ts->th)
        return ts->th;
    int named = thread_registered(ts->ident);
    st_pythread_rec(ts);
    ts->unnamed = ts->th && !named;
    return ts->th;
}

/* What a thread's state holds of one session: none of it. */
static void session_reset(st_pythread_t *ts)
{
    ts->th = NULL;
    ts->scope_depth = 0;
    ts->scope_root = NULL;
    ts->suppress = NULL;
    ts->scope_nest = ts->suppress_nest = 0;
    ts->unnamed = 0;
    ts->ldepth = 0;
    ts->mprev = 0;
    ts->skipped_events = 0;
    ts->swallow = NULL;
    update_blocked(ts);
}

void st_pythread_new_session(void)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(st_py.threads); i++)
        session_reset((st_pythread_t *)PyList_GET_ITEM(st_py.threads, i));
}

st_pythread_t *st_pythread_new(unsigned long ident, uint64_t tid)
{
    st_pythread_t *ts = PyObject_New(st_pythread_t, &st_pythread_type);
    if (!ts)
        return NULL;
    ts->ident = ident;
    ts->tid = tid;
    ts->lstack = NULL;
    ts->lcap = 0;
    ts->chained = NULL;
    session_reset(ts);
    if (PyList_Append(st_py.threads, (PyObject *)ts) < 0) {
        Py_DECREF(ts);
        return NULL;
    }
    Py_DECREF(ts); /* the list holds it */
    return ts;
}

static void pythread_dealloc(PyObject *self)
{
    free(((st_pythread_t *)self)->lstack);
    PyObject_Free(self);
}

PyTypeObject st_pythread_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_strata.st_pythread_t",
    .tp_basicsize = sizeof(st_pythread_t),
    .tp_dealloc = pythread_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A thread's profiling state (internal).",
};

