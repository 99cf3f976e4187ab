/* The CPython collector's hot path, and the interface of its two backends.
 *
 * Design note. Two backends turn the interpreter's events into the events below:
 * backend_profile.c (CPython 3.11, the C profile hook) and backend_monitoring.c
 * (CPython 3.12 and later, sys.monitoring). The events feed the session's recorder
 * (core/recorder.h), which keeps the thread's call paths, timers and timeline
 * paired and reads the clock in cProfile's order:
 *
 *   CALL    -> the code object's cached verdict (labels.h); skipped code returns at
 *              once; otherwise st_rec_enter_t(label, key).
 *   RETURN  -> st_rec_exit_key_t(key): if the thread's innermost open call is this
 *              event's, it closes; anything else (a call that was never entered) is
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
 * whose frame was never entered can only match an entered call of the same code if
 * something between them was not recorded either; the rules below keep that from
 * happening: nothing is closed while a @noprofile call runs, and the @noprofile and
 * -b scope roots count the nested calls of their own code (suppress_nest,
 * scope_nest), which frame keys never do.
 *
 * Scopes. Under -b (and in a program that imports strata without `strata python`)
 * a thread records only inside a scope: a call of a function marked by @profile,
 * or a `with profile:` block (a per-thread counter). @noprofile marks a function
 * whose calls, and everything under them, are not recorded: while one runs, the
 * thread is "blocked" until that same call returns. Marks live on the code
 * object, so decorated functions are returned unwrapped and cost nothing extra.
 *
 * Threads (threads.h). On 3.11 hooks go on every existing thread when profiling
 * starts and on new threads through threading.setprofile; on 3.12+ sys.monitoring
 * reaches every thread and a thread's state is made at its first event. Everything
 * here runs with the GIL held.
 *
 * Errors. The hook never raises: allocation failures are counted by the recorder
 * (`failed`, `dropped`) and reported when results are written. */
#ifndef STRATA_PYTHON_COLLECTOR_H
#define STRATA_PYTHON_COLLECTOR_H

#include <stdio.h>

#include "core/recorder.h"
#include "python/labels.h"
#include "python/lines.h"
#include "python/pystate.h"
#include "python/threads.h"

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
/* A new session begins: what the last one's report said is forgotten. */
void st_pybackend_new_session(void);
#if PY_VERSION_HEX < 0x030C0000
/* 3.11: sets threading's profile hook if the program's import of threading is done
 * (st_py.threading_due: on_call_slow asks at each call it takes until then). */
void st_pybackend_threading_check(void);
#endif

/* The collector's events, called by the backend with the GIL held. `tracing` is
 * st_py.tracing; a backend may pass it as a constant (backend_profile.c has one copy
 * of its hook for each value), so that a run without a timeline pays nothing for it. `key`
 * identifies the call (its frame, or its code object on 3.12+) so that its end can
 * be matched; `frame` is only read for --label args (NULL: the running frame). */
/* The slow half of on_call (below): lines, scopes, @noprofile calls, code not yet
 * judged or labelled, a thread not yet registered. */
static __attribute__((noinline, unused)) int on_call_slow(st_pythread_t *ts, PyCodeObject *co,
                                                        const void *key, PyFrameObject *frame,
                                                        const int tracing)
{
    codeinfo_t *ci = NULL;
#if PY_VERSION_HEX < 0x030C0000
    /* a thread's first start is a call of code not yet judged: the slow path */
    if (__builtin_expect(st_py.threading_due, 0))
        st_pybackend_threading_check();
#endif
    if (__builtin_expect(st_py.lines, 0)) {
        ci = code_info(co);
        if (ci && ci->lines)
            lines_call(ts, ci, co, key); /* whatever the profile's scopes and filters say */
    }
    if (ts->suppress) {
        if (key == ts->suppress)
            ts->suppress_nest++;
        return 0;
    }
    if (!ci && !(ci = code_info(co)))
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
    st_rec_thread_t *th = thread_rec(ts);
    if (!th)
        return 0;
    /* Labels are made only while the paths can still grow, so that the label and
     * function tables stay bounded by the node limit too: a call of a function
     * that has no label yet would need a new node. */
    uint32_t label = ci->label;
    if (__builtin_expect(label == ST_PATH_NONE || ci->dynamic, 0) && st_rec_can_grow(th)) {
        if (label == ST_PATH_NONE)
            label = st_pylabel_resolve(ci, co);
        if (ci->dynamic && label != ST_PATH_NONE)
            label = st_pylabel_args(frame, co, label);
    }
    st_rec_enter_t(th, label, key, tracing);
    return 0;
}

/* The slow half of on_return. */
static __attribute__((noinline, unused)) int on_return_slow(st_pythread_t *ts, const void *key,
                                                          const int tracing)
{
    if (__builtin_expect(ts->ldepth != 0, 0))
        lines_return(ts, key);
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
    int popped = ts->th && st_rec_exit_key_t(ts->th, key, tracing);
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

/* Whether the thread is in the common case: no --lines, no -b scope, no running
 * @noprofile call (blocked covers it), so that a call is recorded if its code is
 * kept. One branch on the hot path for all of them. */
static inline int thread_plain(const st_pythread_t *ts)
{
    return !(st_py.lines | ts->blocked | ((uintptr_t)ts->scope_root != 0) | ts->ldepth);
}

/* A Python function starts (or a generator or coroutine resumes). Returns 1 when
 * the code is skipped (code_skipped): the backend may switch its events off.
 *
 * The common case first, inline in the backend's callback with `tracing` a
 * constant: a plain thread already registered, calling code of this generation
 * that is kept, unmarked and labelled. Everything else takes on_call_slow, out of
 * line, so that the hot path needs few registers. */
static inline __attribute__((always_inline)) int on_call(st_pythread_t *ts, PyCodeObject *co,
                                                         const void *key, PyFrameObject *frame,
                                                         const int tracing)
{
    st_rec_thread_t *th = ts->th;
    codeinfo_t *ci;
    if (__builtin_expect(thread_plain(ts), 1)) {
        uint64_t hot = stored_hot(co);
        if (__builtin_expect((uint32_t)(hot >> 32) == st_py.gen && th && !ts->unnamed, 1)) {
            st_rec_enter_t(th, (uint32_t)hot, key, tracing);
            return 0;
        }
        if ((ci = stored_info(co)) && ci->gen == st_py.gen && !ci->keep &&
            !(ci->marks & MARK_NOPROFILE)) {
            /* left out (3.11: a lambda, a comprehension, every call) */
            ts->skipped_events += code_skipped(ci);
            return code_skipped(ci);
        }
    }
    return on_call_slow(ts, co, key, frame, tracing);
}

/* A Python function returns, yields or unwinds. Returns 1 when it closed a
 * recorded call. While a @noprofile call runs nothing is closed: whatever was
 * entered before it ends after it. The common case (thread_plain) inline. */
static inline __attribute__((always_inline)) int on_return(st_pythread_t *ts, const void *key,
                                                           const int tracing)
{
    st_rec_thread_t *th = ts->th;
    if (__builtin_expect(thread_plain(ts), 1))
        return th && st_rec_exit_key_t(th, key, tracing);
    return on_return_slow(ts, key, tracing);
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
    st_rec_thread_t *th = thread_rec(ts);
    if (th)
        st_rec_enter_t(th, e->label, key, tracing);
}

/* A C function returns or raises. */
static inline void on_c_return(st_pythread_t *ts, const void *key, const int tracing)
{
    if (!ts->suppress && ts->th)
        st_rec_exit_key_t(ts->th, key, tracing);
}

#endif
