/* Line timings (--lines): line_profiler's job, in the collector.
 *
 * Design note. A function is chosen when it is marked @profile, or, with -R/-MR
 * given, when those filters keep it. A chosen code object gets a table (st_pyltab_t:
 * dense arrays of hits and clock ticks, one slot per line from its first line to
 * its last), made once, in the order functions are chosen (line_profiler's order of
 * decoration), and kept until the results are written. Each thread keeps a stack of
 * the running calls of chosen functions (st_pylframe_t: the call's key, its table,
 * the line it is on and when that line began). A line event of the innermost such
 * call reads the clock once: the line that ends gets the time since it began (its
 * callees' time included, as line_profiler counts it), the line that begins a hit.
 * The call's end gives its last line the rest. A line event of any other frame is
 * ignored.
 *
 * Line events only where they are needed. CPython 3.11: the profile hook sees a
 * chosen function's call and puts strata's trace function on the thread while the
 * thread runs one (lines.c, st_pylines_arm); a frame of other code that starts
 * meanwhile has its line events switched off at its first event (f_trace_lines), so
 * code called from a chosen function runs at the profile hook's speed, and all
 * other code as without --lines. A thread whose trace function is the program's (a
 * debugger, coverage) keeps it, and its chosen calls are counted as not timed.
 * CPython 3.12+: sys.monitoring's LINE events are switched on for the chosen code
 * objects only (set_local_events); nothing else pays for them.
 *
 * Everything here runs with the GIL held. */
#ifndef STRATA_PYTHON_LINES_H
#define STRATA_PYTHON_LINES_H

#include <stdio.h>

#include "core/clock.h"
#include "model/model.h"
#include "python/labels.h"
#include "python/threads.h"

/* A chosen code object's line table. */
typedef struct st_pyltab {
    PyObject *code;          /* the code object (a reference held) */
    uint32_t index;          /* its place among the tables (the order chosen) */
    uint32_t first, n;       /* slots for lines first .. first + n - 1 */
    int armed;               /* 3.12+: its LINE events are switched on */
    uint64_t *hits, *ticks;
    uint64_t *occ;           /* --memory: memory_profiler's occurrences, increments and */
    int64_t *inc, *mem;      /* highest memory (bytes); NULL without --memory */
} st_pyltab_t;

/* A running call of a chosen function. */
typedef struct st_pylframe {
    const void *key;         /* its frame (3.11) or code object (3.12+) */
    st_pyltab_t *tab;
    int64_t slot;            /* the line it is on, as a slot of tab; -1: none yet */
    uint64_t t;              /* when that line began (clock ticks) */
    int mline;               /* --memory: the line to measure at the next event (the
                              * frame's line at its call, then the line running) */
    uint64_t call_ns;        /* --memory: when the call began, and the resident size */
    int64_t call_rss;        /* then (memory over time's calls) */
} st_pylframe_t;

/* lines.c: the slow paths. */
/* Chooses ci's code (makes its table): 0, or -1 when no table could be made (out
 * of memory, or too many functions: counted and said at the end). */
int st_pylines_choose(codeinfo_t *ci, PyCodeObject *co);
/* Grows ts's stack; -1 when it cannot (the call is not timed). */
int st_pylines_grow(st_pythread_t *ts);
/* The thread's first running chosen call begins / its last ends: 3.11 puts
 * strata's trace function on the thread and takes it off; 3.12+ switches the
 * table's LINE events on at its first call. */
void st_pylines_arm(st_pythread_t *ts, st_pyltab_t *tab);
void st_pylines_disarm(st_pythread_t *ts);
/* Chosen functions whose calls could not be timed (the program's own trace
 * function on 3.11, no memory): counted for the note at the end. */
void st_pylines_lost(void);
/* The tables made so far (the backends switch their events off when they stop). */
st_pyltab_t *const *st_pylines_tables(size_t *n);
/* Gives the model the line timings (made once; names, rows and source blocks read
 * with the GIL held) and says on err what could not be timed. */
void st_pylines_contribute(st_model_t *m, double ns_per_tick);
/* --memory: the frame's call (its line then), a line event, its end: memory_profiler's
 * measure of the line that ran (python/memory.h says what is measured). */
void st_pylines_mem_call(st_pylframe_t *f);
void st_pylines_mem_line(st_pythread_t *ts, st_pylframe_t *f, int line);
void st_pylines_mem_return(st_pythread_t *ts, st_pylframe_t *f);
void st_pylines_report(FILE *err);
/* A new session begins (the last one's results are written): the chosen functions'
 * tables, and what the last model was given, go. */
void st_pylines_new_session(void);

/* A call of a chosen function (ci->lines) starts, or its generator resumes: it is
 * pushed. */
static inline void lines_call(st_pythread_t *ts, codeinfo_t *ci, PyCodeObject *co,
                              const void *key)
{
    if (__builtin_expect(!ci->ltab, 0) && st_pylines_choose(ci, co) < 0) {
        ci->lines = 0; /* counted: too many functions, or no memory */
        return;
    }
    if (ts->ldepth == ts->lcap && st_pylines_grow(ts) < 0)
        return;
    st_pylframe_t *f = &ts->lstack[ts->ldepth++];
    f->key = key;
    f->tab = ci->ltab;
    f->slot = -1;
    if (ts->ldepth == 1 || !f->tab->armed)
        st_pylines_arm(ts, f->tab);
    if (__builtin_expect(st_py.line_memory, 0))
        st_pylines_mem_call(f);
    f->t = st_clock_ticks();
}

/* A line of the running frame `key` begins. */
static inline void lines_line(st_pythread_t *ts, const void *key, int line)
{
    if (!ts->ldepth)
        return;
    st_pylframe_t *f = &ts->lstack[ts->ldepth - 1];
    if (f->key != key)
        return;
    uint64_t now = st_clock_ticks();
    st_pyltab_t *tab = f->tab;
    if (f->slot >= 0)
        tab->ticks[f->slot] += now - f->t;
    uint32_t slot = (uint32_t)line - tab->first;
    if ((uint32_t)line >= tab->first && slot < tab->n) {
        tab->hits[slot]++;
        f->slot = slot;
    } else {
        f->slot = -1;
    }
    f->t = now;
    if (__builtin_expect(st_py.line_memory, 0))
        st_pylines_mem_line(ts, f, line);
}

/* A call returns, yields or unwinds: a chosen function's is popped, its last line
 * given the time up to now. */
static inline void lines_return(st_pythread_t *ts, const void *key)
{
    st_pylframe_t *f = &ts->lstack[ts->ldepth - 1];
    if (f->key != key)
        return;
    if (f->slot >= 0)
        f->tab->ticks[f->slot] += st_clock_ticks() - f->t;
    if (__builtin_expect(st_py.line_memory, 0))
        st_pylines_mem_return(ts, f);
    if (--ts->ldepth == 0)
        st_pylines_disarm(ts);
}

#endif
