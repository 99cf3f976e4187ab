/* The CPython collector's shared state and its hot path.
 *
 * Design note. One process has one profiling session. Every Python thread that
 * runs while the session is live gets a st_pythread_t object, passed to the C
 * profile hook as its `obj` argument, so the hook finds its thread's call tree
 * without a thread-local lookup. The events below are the hot path:
 *
 *   CALL    -> the code object's cached verdict (co_extra); skipped code returns at
 *              once; otherwise push (parent, label) on the thread's tree and stamp
 *              the start time last.
 *   RETURN  -> if the thread's innermost open call is this frame, read the clock
 *              first and pop; anything else (a call that was never pushed) is
 *              ignored, so filters, -b scopes and calls that began before profiling
 *              never unbalance the stack.
 *   C_CALL / C_RETURN -> the same with --trace-c, keyed by (frame + 1): the
 *              calling frame identifies the C call, the +1 tells it from the
 *              frame's own entry.
 *
 * Verdicts and labels are computed once per code object and generation (a
 * counter bumped whenever a setting changes) and kept in the code object's extra
 * slot; the hook never runs a regex, formats a string or allocates, except with
 * --label args, whose labels depend on each call's arguments.
 *
 * Scopes. Under -b (and in a program that imports strata without `strata python`)
 * a thread records only inside a scope: a call of a function marked by @profile,
 * or a `with profile:` block (a per-thread counter). @noprofile marks a function
 * whose calls, and everything under them, are not recorded: while one runs, the
 * thread is "blocked" until that same frame returns. Marks live on the code
 * object, so decorated functions are returned unwrapped and cost nothing extra.
 *
 * Threads. Hooks go on every existing thread when profiling starts (threads made
 * before it included) and on new threads through threading.setprofile, whose
 * trampoline installs the C hook on the thread's first event. Everything here runs
 * with the GIL held.
 *
 * Errors. The hook never raises: allocation failures are counted by the trees
 * (`failed`, `dropped`) and reported when results are written. */
#ifndef STRATA_PYTHON_COLLECTOR_H
#define STRATA_PYTHON_COLLECTOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <limits.h>
#include <stdint.h>

#include "core/clock.h"
#include "core/filter.h"
#include "core/settings.h"
#include "session/session.h"

#if PY_VERSION_HEX >= 0x030C0000
#define code_get_extra PyUnstable_Code_GetExtra
#define code_set_extra PyUnstable_Code_SetExtra
#define request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#else
#define code_get_extra _PyCode_GetExtra
#define code_set_extra _PyCode_SetExtra
#define request_extra_index _PyEval_RequestCodeExtraIndex
#endif

/* ------------------------------------------------------------------------- */
/* Per-code-object information                                               */

enum { MARK_PROFILE = 1, MARK_NOPROFILE = 2 };

typedef struct {
    uint32_t gen;       /* generation of settings it was computed for */
    uint32_t label;     /* interned label (static labels) */
    uint8_t keep;       /* 1: record calls */
    uint8_t module_ok;  /* 1: its file passes the module filters and is not strata's:
                         * the C functions it calls may be recorded (--trace-c) */
    uint8_t dynamic;    /* 1: label depends on the arguments (--label args) */
    uint8_t marks;      /* MARK_PROFILE / MARK_NOPROFILE, kept across generations */
} codeinfo_t;

/* Cache of C functions' labels and verdicts, keyed by (method def, owner). */
typedef struct {
    const void *ml;
    const void *owner;
    uint32_t gen;
    uint32_t label;
    uint8_t keep;
} cfunc_entry_t;

typedef struct {
    PyObject_HEAD
    st_thread_t *th;         /* NULL until the thread records its first call */
    unsigned long ident;     /* threading ident */
    uint64_t tid;            /* kernel thread id */
    int scope_depth;         /* open `with profile:` blocks */
    const void *scope_root;  /* frame of the @profile call that opened the scope */
    const void *suppress;    /* frame of the running @noprofile call */
    int blocked;             /* derived: calls are not recorded now */
} st_pythread_t;

extern PyTypeObject st_pythread_type;

/* The process-wide state (the GIL guards it). */
typedef struct {
    int have_settings;
    st_settings_t settings;   /* live settings (the config object edits them) */
    st_filter_t filter;
    int have_filter;
    st_session_t session;
    int live;                 /* session created */
    int running;              /* hooks installed */
    int finalized;
    int forked_child;
    uint32_t gen;
    /* settings unpacked for the hot path */
    int builtin_mode, trace_c, label_args, label_file, label_line, full_filepath;
    int include_internal, verbose;
    int ntimers, want_wall, want_cpu;
    char internal_dir[PATH_MAX];
    size_t internal_len;
    Py_ssize_t extra_index;
    PyObject *threads;        /* list of st_pythread_t, keeps them alive */
    PyObject *bootstrap;      /* the threading.setprofile trampoline */
    cfunc_entry_t *cfuncs;
    size_t ncfunc_slots, ncfuncs;
    PyObject *error;          /* _strata.Error */
} st_py_state_t;

extern st_py_state_t st_py;

/* labels.c: the slow paths behind the caches. */
codeinfo_t *st_pylabel_code_info(PyCodeObject *co);
uint32_t st_pylabel_args(PyFrameObject *frame, PyCodeObject *co, uint32_t fallback);
cfunc_entry_t *st_pylabel_cfunc(PyObject *fn);

/* threads.c */
st_thread_t *st_pythread_tree(st_pythread_t *ts);
st_pythread_t *st_pythread_new(unsigned long ident, uint64_t tid);

/* The backend (backend_profile.c: the C profile hook of CPython 3.11). */
int st_pybackend_start(void);           /* hooks on every thread, now and later */
void st_pybackend_stop(void);
st_pythread_t *st_pybackend_current(void); /* the calling thread's state, if hooked */

/* The code object's extra slot, read directly: CPython 3.11 to 3.13 keep them as
 * {Py_ssize_t size; void *extras[]} behind co_extra (the layout of
 * _PyCodeObjectExtra, unchanged since 3.6); this saves a call per event. */
static inline codeinfo_t *cached_info(PyCodeObject *co)
{
    Py_ssize_t *extra = co->co_extra;
    if (extra && st_py.extra_index < extra[0]) {
        codeinfo_t *ci = ((codeinfo_t **)(extra + 1))[st_py.extra_index];
        if (ci && ci->gen == st_py.gen)
            return ci;
    }
    return NULL;
}

static inline codeinfo_t *code_info(PyCodeObject *co)
{
    codeinfo_t *ci = cached_info(co);
    return ci ? ci : st_pylabel_code_info(co);
}

static inline void update_blocked(st_pythread_t *ts)
{
    ts->blocked = ts->suppress != NULL ||
                  (st_py.builtin_mode && ts->scope_root == NULL && ts->scope_depth == 0);
}

static inline void stamp(st_frame_t *f)
{
    if (st_py.want_cpu)
        f->t0[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
    if (st_py.want_wall)
        f->t0[ST_TIMER_WALL] = st_clock_ticks();
}

/* Closes the thread's top call (the caller checked it is this event's), reading
 * the clocks first. The common single-timer case is its own branch so that the
 * accumulation loop is unrolled. */
static inline void pop(st_thread_t *th)
{
    uint64_t now[ST_NTIMERS] = {0, 0};
    if (st_py.ntimers == 1) {
        now[ST_TIMER_WALL] = st_clock_ticks();
        st_calltree_close_top(&th->tree, now, 1);
        return;
    }
    if (st_py.want_wall)
        now[ST_TIMER_WALL] = st_clock_ticks();
    if (st_py.want_cpu)
        now[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
    st_calltree_close_top(&th->tree, now, st_py.ntimers);
}


/* The collector's events, called by the backend with the GIL held. `key`
 * identifies the call (its frame) so that its end can be matched; `frame` is only
 * read for --label args. */

/* A Python function starts. The caller has checked ts->suppress is not set. */
static inline void on_call(st_pythread_t *ts, PyCodeObject *co, const void *key,
                           PyFrameObject *frame)
{
    codeinfo_t *ci = code_info(co);
    if (!ci)
        return;
    if (ts->blocked) {
        /* Outside a -b scope only a call of an @profile function gets through, and
         * it opens the scope. */
        if (!(ci->marks & MARK_PROFILE))
            return;
        ts->scope_root = key;
        update_blocked(ts);
    }
    if (ci->marks & MARK_NOPROFILE) {
        ts->suppress = key;
        ts->blocked = 1;
        return;
    }
    if (!ci->keep)
        return;
    st_thread_t *th = ts->th ? ts->th : st_pythread_tree(ts);
    if (!th)
        return;
    /* Labels with arguments are made only while the tree can still grow, so that
     * the label table stays bounded by the node limit too. */
    uint32_t label = ci->dynamic && th->tree.nnodes < th->tree.max_nodes
                         ? st_pylabel_args(frame, co, ci->label)
                         : ci->label;
    st_frame_t *f = st_calltree_push(&th->tree, label, key);
    if (f)
        stamp(f);
}

/* A Python function returns, yields or unwinds. */
static inline void on_return(st_pythread_t *ts, const void *key)
{
    if (ts->th && st_calltree_top_key(&ts->th->tree) == key)
        pop(ts->th);
    if (key == ts->suppress || key == ts->scope_root) {
        if (key == ts->suppress)
            ts->suppress = NULL;
        else
            ts->scope_root = NULL;
        update_blocked(ts);
    }
}

/* A C function is called from code `caller`. The caller has checked trace_c and
 * that the thread is not blocked. C functions called from left-out files
 * (strata's own, threading's) are left out with them. */
static inline void on_c_call(st_pythread_t *ts, PyCodeObject *caller, PyObject *fn,
                             const void *key)
{
    codeinfo_t *ci = code_info(caller);
    if (!ci || !ci->module_ok)
        return;
    cfunc_entry_t *e = st_pylabel_cfunc(fn);
    if (!e || !e->keep)
        return;
    st_thread_t *th = ts->th ? ts->th : st_pythread_tree(ts);
    if (!th)
        return;
    st_frame_t *f = st_calltree_push(&th->tree, e->label, key);
    if (f)
        stamp(f);
}

/* A C function returns or raises. */
static inline void on_c_return(st_pythread_t *ts, const void *key)
{
    if (ts->th && st_calltree_top_key(&ts->th->tree) == key)
        pop(ts->th);
}

#endif
