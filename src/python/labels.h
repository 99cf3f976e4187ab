/* The CPython collector's label cache: verdicts and labels of code objects and C
 * functions.
 *
 * Design note. Verdicts and labels are computed once per code object and generation
 * (a counter bumped whenever a setting changes) and kept in the code object's extra
 * slot; the hook never runs a regex, formats a string or allocates, except with
 * --label args, whose labels depend on each call's arguments. A code object that
 * no thread may record, whatever its state (left out by the filters, no @profile or
 * @noprofile mark), is "skipped": on 3.12+ its events are switched off
 * (sys.monitoring.DISABLE) until the settings change. Labels are made only when a
 * thread's path table can still grow (st_rec_can_grow), so that the label tables
 * stay bounded by the node limit too. With the GIL held. */
#ifndef STRATA_PYTHON_LABELS_H
#define STRATA_PYTHON_LABELS_H

#include "python/pystate.h"

/* labels.c: the slow paths behind the caches. */
/* s as UTF-8 text, where the bytes a file name was decoded from (surrogateescape)
 * are not UTF-8 written \xNN; *hold keeps the text alive (Py_XDECREF it after).
 * NULL (no exception set) if that fails. */
const char *st_pytext_utf8(PyObject *s, PyObject **hold);
codeinfo_t *st_pylabel_code_info(PyCodeObject *co);
/* Makes ci's label (its text and function, core/loctab.h) and returns it, or
 * ST_PATH_NONE when out of memory. Called only when a thread can record the call
 * (st_rec_can_grow), so that labels stay bounded by the nodes. */
uint32_t st_pylabel_resolve(codeinfo_t *ci, PyCodeObject *co);
/* The label of code `co` as the deterministic profile makes it, or ST_PATH_NONE
 * when the profile leaves the code out (filters, strata's own): for collectors that
 * name code objects after the fact (the samplers). */
uint32_t st_pylabel_of(PyCodeObject *co);
/* frame NULL: the running frame (PyEval_GetFrame), used only if its code is co. */
uint32_t st_pylabel_args(PyFrameObject *frame, PyCodeObject *co, uint32_t fallback);
/* A PyCFunction's label and verdict; NULL if fn is none or memory runs out. */
cfunc_entry_t *st_pylabel_cfunc(PyObject *fn);
/* The same for method `ml` called on `self` (a method descriptor's call on 3.12+),
 * labelled as 3.11 labels the bound PyCFunction it makes for that call. */
cfunc_entry_t *st_pylabel_cmethod(const PyMethodDef *ml, PyObject *self);

/* The code object's extra slot `index`, or NULL where its extras have none: read
 * directly, CPython 3.11 to 3.15 keep them as {Py_ssize_t size; void *extras[]}
 * behind co_extra (the layout of _PyCodeObjectExtra, unchanged since 3.6); this
 * saves a call per event. */
static inline void **extra_slot(PyCodeObject *co, Py_ssize_t index)
{
    Py_ssize_t *extra = co->co_extra;
    return extra && index < extra[0] ? (void **)(extra + 1) + index : NULL;
}

static inline codeinfo_t *stored_info(PyCodeObject *co)
{
    void **slot = extra_slot(co, st_py.extra_index);
    return slot ? (codeinfo_t *)*slot : NULL;
}

/* The code's hot word, read on every call: gen << 32 | label while its calls are
 * recorded by the common case (kept, labelled, label not dynamic, not marked
 * @noprofile) in generation gen, else 0. In the extra slot beside the codeinfo's
 * pointer, so that the common case reads no codeinfo_t (a cache miss a call, on
 * programs of many functions). Written directly as it is read: strata takes both
 * slots when it loads, before it sets any, so every code object's extras hold
 * both. */
static inline uint64_t stored_hot(PyCodeObject *co)
{
    void **slot = extra_slot(co, st_py.hot_index);
    return slot ? (uint64_t)(uintptr_t)*slot : 0;
}

/* Sets co's hot word from ci's fields; after any of them changes. */
static inline void code_hot_update(codeinfo_t *ci, PyCodeObject *co)
{
    uint64_t hot = ci->keep && !ci->dynamic && ci->label != ST_PATH_NONE &&
                           !(ci->marks & MARK_NOPROFILE)
                       ? (uint64_t)ci->gen << 32 | ci->label
                       : 0;
    void **slot = extra_slot(co, st_py.hot_index);
    if (slot)
        *slot = (void *)(uintptr_t)hot;
}

/* The code's information if it is of the current generation. */
static inline codeinfo_t *cached_info(PyCodeObject *co)
{
    codeinfo_t *ci = stored_info(co);
    return ci && ci->gen == st_py.gen ? ci : NULL;
}

static inline codeinfo_t *code_info(PyCodeObject *co)
{
    codeinfo_t *ci = cached_info(co);
    return ci ? ci : st_pylabel_code_info(co);
}

#endif
