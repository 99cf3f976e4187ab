/* The CPython collector's shared state and its hot path.
 *
 * Design note. One process has one profiling session. Every Python thread that
 * runs while the session is live gets a st_pythread_t object; the backend finds it
 * without a lookup (3.11: the profile hook's `obj` argument; 3.12+: a thread-local
 * pointer). Two backends turn the interpreter's events into the events below, the
 * hot path: backend_profile.c (CPython 3.11, the C profile hook) and
 * backend_monitoring.c (CPython 3.12 and later, sys.monitoring).
 *
 *   CALL    -> the code object's cached verdict (co_extra); skipped code returns at
 *              once; otherwise push (parent, label) on the thread's tree and stamp
 *              the start time last.
 *   RETURN  -> if the thread's innermost open call is this event's, read the clock
 *              first and pop; anything else (a call that was never pushed) is
 *              ignored, so filters, -b scopes and calls that began before profiling
 *              never unbalance the stack.
 *   C_CALL / C_RETURN -> the same with --trace-c.
 *
 * Keys. Each open call carries a key that its end must present. On 3.11 it is the
 * frame (and frame + 1 for the C calls it makes). sys.monitoring gives no frame, so
 * there the key is the code object (and the callable for C calls): a thread's
 * enter and exit events nest strictly (a generator's resume and yield, a
 * coroutine's too, are one enter and one exit on the thread that runs them), so the
 * innermost open call with a given key is the one an exit with that key ends. An exit
 * whose frame was never pushed can only match a pushed call of the same code if
 * something between them was not recorded either; the rules below keep that from
 * happening: nothing is popped while a @noprofile call runs, and the @noprofile and
 * -b scope roots count the nested calls of their own code (suppress_nest,
 * scope_nest), which frame keys never do.
 *
 * Verdicts and labels are computed once per code object and generation (a
 * counter bumped whenever a setting changes) and kept in the code object's extra
 * slot; the hook never runs a regex, formats a string or allocates, except with
 * --label args, whose labels depend on each call's arguments. A code object that
 * no thread may record, whatever its state (left out by the filters, no @profile or
 * @noprofile mark), is "skipped": on 3.12+ its events are switched off
 * (sys.monitoring.DISABLE) until the settings change.
 *
 * Scopes. Under -b (and in a program that imports strata without `strata python`)
 * a thread records only inside a scope: a call of a function marked by @profile,
 * or a `with profile:` block (a per-thread counter). @noprofile marks a function
 * whose calls, and everything under them, are not recorded: while one runs, the
 * thread is "blocked" until that same call returns. Marks live on the code
 * object, so decorated functions are returned unwrapped and cost nothing extra.
 *
 * Threads. Every thread is followed, those started before profiling included. On
 * 3.11 hooks go on every existing thread when profiling starts and on new threads
 * through threading.setprofile; on 3.12+ sys.monitoring reaches every thread and a
 * thread's state is made at its first event. Everything here runs with the GIL
 * held.
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
    uint32_t label;     /* interned label (static labels); ST_NODE_NONE until a tree
                         * first records a call (st_pylabel_resolve) */
    uint8_t keep;       /* 1: record calls */
    uint8_t module_ok;  /* 1: its file passes the module filters and is not strata's:
                         * the C functions it calls may be recorded (--trace-c) */
    uint8_t dynamic;    /* 1: label depends on the arguments (--label args) */
    uint8_t marks;      /* MARK_PROFILE / MARK_NOPROFILE, kept across generations */
    uint8_t ever_kept;  /* 1: recorded in some generation (its exits may pop) */
    uint8_t disabled;   /* 1: its events were switched off (3.12+): a new mark must
                         * switch them on again */
} codeinfo_t;

/* No thread may record a call of this code, whatever its state: its events can be
 * switched off until the settings change. */
static inline int code_skipped(const codeinfo_t *ci)
{
    return !ci->keep && !ci->marks;
}

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
    const void *scope_root;  /* key of the @profile call that opened the scope */
    const void *suppress;    /* key of the running @noprofile call */
    int scope_nest;          /* calls with scope_root's key open inside it */
    int suppress_nest;       /* calls with suppress's key open inside it */
    int blocked;             /* derived: calls are not recorded now */
    int unnamed;             /* th was made before the thread had a name (3.12+) */
    uint64_t skipped_events; /* events of skipped code seen (tests: they stop) */
    Py_tracefunc chained;    /* 3.11: the program's own profile function on this
                              * thread, which strata's hook calls (backend_profile.c) */
    PyObject *swallow;       /* 3.11: the C function whose next return the program's
                              * function must not hear of (borrowed) */
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
    int tracing;              /* threads record timelines (want_wall is then set) */
    char internal_dir[PATH_MAX];
    size_t internal_len;
    Py_ssize_t extra_index;
    PyObject *threads;        /* list of st_pythread_t, keeps them alive */
    PyObject *bootstrap;      /* the threading.setprofile trampoline (3.11) */
    cfunc_entry_t *cfuncs;
    size_t ncfunc_slots, ncfuncs;
    PyObject *error;          /* _strata.Error */
} st_py_state_t;

extern st_py_state_t st_py;

/* labels.c: the slow paths behind the caches. */
/* s as UTF-8 text, where the bytes a file name was decoded from (surrogateescape)
 * are not UTF-8 written \xNN; *hold keeps the text alive (Py_XDECREF it after).
 * NULL (no exception set) if that fails. */
const char *st_pytext_utf8(PyObject *s, PyObject **hold);
codeinfo_t *st_pylabel_code_info(PyCodeObject *co);
/* Makes ci's label (its text and function, core/loctab.h) and returns it, or
 * ST_NODE_NONE when out of memory. Called only when a tree can record the call, so
 * that labels stay bounded by the nodes. */
uint32_t st_pylabel_resolve(codeinfo_t *ci, PyCodeObject *co);
/* frame NULL: the running frame (PyEval_GetFrame), used only if its code is co. */
uint32_t st_pylabel_args(PyFrameObject *frame, PyCodeObject *co, uint32_t fallback);
/* A PyCFunction's label and verdict; NULL if fn is none or memory runs out. */
cfunc_entry_t *st_pylabel_cfunc(PyObject *fn);
/* The same for method `ml` called on `self` (a method descriptor's call on 3.12+),
 * labelled as 3.11 labels the bound PyCFunction it makes for that call. */
cfunc_entry_t *st_pylabel_cmethod(const PyMethodDef *ml, PyObject *self);

/* threads.c */
/* Makes the thread's call tree (naming the thread), or names a tree made unnamed. */
st_thread_t *st_pythread_tree(st_pythread_t *ts);
/* Makes the tree at a thread's first event; names it later if threading does not
 * know the thread yet. NULL when out of memory. */
st_thread_t *st_pythread_tree_early(st_pythread_t *ts);
st_pythread_t *st_pythread_new(unsigned long ident, uint64_t tid);

/* The backend: backend_profile.c (CPython 3.11, the C profile hook) or
 * backend_monitoring.c (3.12 and later, sys.monitoring). With the GIL held. */
int st_pybackend_start(void);           /* every thread, now and later; -1 + exception */
void st_pybackend_stop(void);
st_pythread_t *st_pybackend_current(void); /* the calling thread's state, if followed */
/* Verdicts changed (a new generation, a new mark): on 3.12+ the events are set
 * again and whatever was switched off is switched on, to be judged anew. */
void st_pybackend_refresh(void);
/* Says on err, once, where the backend could not record (the program's own
 * profiler took its place); nothing when it could everywhere. */
void st_pybackend_report(FILE *err);

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

/* Stamps a call just opened with its start times, read last (after the
 * bookkeeping); with a timeline, records its begin at the same tick. */
static inline void stamp(st_thread_t *th, st_frame_t *f, uint32_t label, const int tracing)
{
    if (st_py.want_cpu)
        f->t0[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
    if (st_py.want_wall) {
        uint64_t t = st_clock_ticks();
        f->t0[ST_TIMER_WALL] = t;
        if (tracing && label != ST_NODE_NONE)
            f->traced = (uint32_t)st_trace_begin(&th->trace, label, t);
    }
}

/* Closes the thread's top call (the caller checked it is this event's), reading
 * the clocks first. The common single-timer case is its own branch so that the
 * accumulation loop is unrolled. */
static inline void pop(st_thread_t *th, const int tracing)
{
    uint64_t now[ST_NTIMERS] = {0, 0};
    if (st_py.ntimers == 1 && !tracing) {
        now[ST_TIMER_WALL] = st_clock_ticks();
        st_calltree_close_top(&th->tree, now, 1);
        return;
    }
    uint32_t traced = th->tree.stack[th->tree.depth - 1].traced;
    if (st_py.ntimers == 1) {
        now[ST_TIMER_WALL] = st_clock_ticks();
        st_calltree_close_top(&th->tree, now, 1);
    } else {
        if (st_py.want_wall)
            now[ST_TIMER_WALL] = st_clock_ticks();
        if (st_py.want_cpu)
            now[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
        st_calltree_close_top(&th->tree, now, st_py.ntimers);
    }
    if (tracing && traced)
        st_trace_end(&th->trace, now[ST_TIMER_WALL]);
}


/* The thread's tree, made (or named) on its first recorded call. */
static inline st_thread_t *thread_tree(st_pythread_t *ts)
{
    st_thread_t *th = ts->th;
    if (__builtin_expect(!th || ts->unnamed, 0))
        th = st_pythread_tree(ts);
    return th;
}

/* The collector's events, called by the backend with the GIL held. `tracing` is
 * st_py.tracing; a backend may pass it as a constant (backend_profile.c has one copy
 * of its hook for each value), so that a run without a timeline pays nothing for it. `key`
 * identifies the call (its frame, or its code object on 3.12+) so that its end can
 * be matched; `frame` is only read for --label args (NULL: the running frame). */

/* A Python function starts (or a generator or coroutine resumes). Returns 1 when
 * the code is skipped (code_skipped): the backend may switch its events off. */
static inline int on_call(st_pythread_t *ts, PyCodeObject *co, const void *key,
                          PyFrameObject *frame, const int tracing)
{
    if (ts->suppress) {
        if (key == ts->suppress)
            ts->suppress_nest++;
        return 0;
    }
    codeinfo_t *ci = code_info(co);
    if (!ci)
        return 0;
    if (ts->blocked) {
        /* Outside a -b scope only a call of an @profile function gets through, and
         * it opens the scope. */
        if (!(ci->marks & MARK_PROFILE)) {
            ts->skipped_events += code_skipped(ci);
            return code_skipped(ci);
        }
        ts->scope_root = key;
        ts->scope_nest = 0;
        update_blocked(ts);
    } else if (key == ts->scope_root) {
        ts->scope_nest++;
    }
    if (ci->marks & MARK_NOPROFILE) {
        ts->suppress = key;
        ts->suppress_nest = 0;
        ts->blocked = 1;
        return 0;
    }
    if (!ci->keep) {
        ts->skipped_events += code_skipped(ci);
        return code_skipped(ci);
    }
    st_thread_t *th = thread_tree(ts);
    if (!th)
        return 0;
    /* Labels are made only while the tree can still grow, so that the label and
     * function tables stay bounded by the node limit too: a call of a function
     * that has no label yet would need a new node. */
    uint32_t label = ci->label;
    if (__builtin_expect(label == ST_NODE_NONE || ci->dynamic, 0) &&
        st_calltree_can_grow(&th->tree)) {
        if (label == ST_NODE_NONE)
            label = st_pylabel_resolve(ci, co);
        if (ci->dynamic && label != ST_NODE_NONE)
            label = st_pylabel_args(frame, co, label);
    }
    st_frame_t *f = st_calltree_push(&th->tree, label, key);
    if (f)
        stamp(th, f, label, tracing);
    return 0;
}

/* A Python function returns, yields or unwinds. Returns 1 when it closed a
 * recorded call. While a @noprofile call runs nothing is popped: whatever was
 * pushed before it ends after it. */
static inline int on_return(st_pythread_t *ts, const void *key, const int tracing)
{
    if (ts->suppress) {
        if (key == ts->suppress) {
            if (ts->suppress_nest) {
                ts->suppress_nest--;
            } else {
                ts->suppress = NULL;
                update_blocked(ts);
            }
        }
        return 0;
    }
    int popped = 0;
    if (ts->th && st_calltree_top_key(&ts->th->tree) == key) {
        pop(ts->th, tracing);
        popped = 1;
    }
    if (key == ts->scope_root) {
        if (ts->scope_nest) {
            ts->scope_nest--;
        } else {
            ts->scope_root = NULL;
            update_blocked(ts);
        }
    }
    return popped;
}

/* A C function (its label and verdict `e`, from st_pylabel_cfunc or
 * st_pylabel_cmethod) is called. The caller has checked trace_c, that the thread
 * is not blocked, and that the calling code's file is kept (module_ok): C
 * functions called from left-out files (strata's own, threading's) are left out
 * with them. */
static inline void on_c_call(st_pythread_t *ts, const cfunc_entry_t *e, const void *key,
                             const int tracing)
{
    if (!e || !e->keep)
        return;
    st_thread_t *th = thread_tree(ts);
    if (!th)
        return;
    st_frame_t *f = st_calltree_push(&th->tree, e->label, key);
    if (f)
        stamp(th, f, e->label, tracing);
}

/* A C function returns or raises. */
static inline void on_c_return(st_pythread_t *ts, const void *key, const int tracing)
{
    if (!ts->suppress && ts->th && st_calltree_top_key(&ts->th->tree) == key)
        pop(ts->th, tracing);
}

#endif
