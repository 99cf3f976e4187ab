/* The CPython collector's thread state: one object per Python thread seen while
 * profiling.
 *
 * Design note. Every thread is followed, those started before profiling included.
 * The backend finds a thread's object without a lookup (3.11: a thread-local
 * pointer set when the hook first runs there; 3.12+: the same, made at the
 * thread's first event). The object holds what only Python knows (`with profile:`
 * scopes, the running @noprofile call) and the thread's state in the session's
 * recorder (core/recorder.h), which the recorder registers on the thread's first
 * recorded call (st_rec_self: a thread-local pointer of its own) and which the
 * collector names from threading. A thread's end (issue 9: its Python thread
 * state is cleared) tells the recorder (st_rec_thread_finish), which gives back the
 * memory only recording needs. With the GIL held. */
#ifndef STRATA_PYTHON_THREADS_H
#define STRATA_PYTHON_THREADS_H

#include "core/recorder.h"
#include "python/pystate.h"

typedef struct {
    PyObject_HEAD
    st_rec_thread_t *th;     /* its recorder state; NULL until its first recorded call */
    unsigned long ident;     /* threading ident */
    uint64_t tid;            /* kernel thread id */
    int scope_depth;         /* open `with profile:` blocks */
    const void *scope_root;  /* key of the @profile call that opened the scope */
    const void *suppress;    /* key of the running @noprofile call */
    int scope_nest;          /* calls with scope_root's key open inside it */
    int suppress_nest;       /* calls with suppress's key open inside it */
    int blocked;             /* derived: calls are not recorded now */
    int unnamed;             /* th was registered before the thread had a name (3.12+) */
    uint64_t skipped_events; /* events of skipped code seen (tests: they stop) */
    Py_tracefunc chained;    /* 3.11: the program's own profile function on this
                              * thread, which strata's hook calls (backend_profile.c) */
    PyObject *swallow;       /* 3.11: the C function whose next return the program's
                              * function must not hear of (borrowed) */
    struct st_pylframe *lstack; /* --lines: the running calls of chosen functions,
                                 * innermost last (python/lines.h) */
    uint32_t ldepth, lcap;
    int mprev;               /* --memory: the line measured last (memory_profiler's
                              * prev_lineno) */
} st_pythread_t;

extern PyTypeObject st_pythread_type;

/* threads.c */
/* Registers the calling thread with the session's recorder (naming it), or names a
 * thread registered unnamed. NULL when out of memory. `ts` must be the calling
 * thread's. */
st_rec_thread_t *st_pythread_rec(st_pythread_t *ts);
/* Registers the thread at its first event, so that threads are numbered in the
 * order they first ran Python code; names it later if threading does not know the
 * thread yet. NULL when out of memory. */
st_rec_thread_t *st_pythread_rec_early(st_pythread_t *ts);
st_pythread_t *st_pythread_new(unsigned long ident, uint64_t tid);
/* A new session begins (the last one's results are written): every thread's state
 * forgets its recorder state, scopes and running calls; the objects stay, as the
 * backends' thread-local pointers to them do. */
void st_pythread_new_session(void);
/* The name threading gives thread `ident` into buf (returns 1; a thread that ended
 * while the program still holds its Thread object included), or a made-up one,
 * "Thread-<ident>" (returns 0: threading does not know it, or not yet). */
int st_pythread_name(unsigned long ident, char *buf, size_t size);
/* The same for the thread of kernel id `native_id` too: an ended thread is known by
 * both ids (threads that run one after another often get the same ident). */
int st_pythread_name_native(unsigned long ident, unsigned long native_id, char *buf,
                            size_t size);
/* The threading module if the program imported it (a new reference; strata never
 * imports it), or NULL. */
PyObject *st_pythread_threading(void);

static inline void update_blocked(st_pythread_t *ts)
{
    ts->blocked = ts->suppress != NULL ||
                  (st_py.builtin_mode && ts->scope_root == NULL && ts->scope_depth == 0);
}

/* The thread's recorder state, registered (or named) on its first recorded call. */
static inline st_rec_thread_t *thread_rec(st_pythread_t *ts)
{
    st_rec_thread_t *th = ts->th;
    if (__builtin_expect(!th || ts->unnamed, 0))
        th = st_pythread_rec(ts);
    return th;
}

#endif
