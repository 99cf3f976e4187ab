/* The CPython collector's process-wide state and what it keeps per code object.
 *
 * Design note. One process has one profiling session at a time (st_py.session,
 * whose recorder every followed thread records into); once its results are written
 * another may begin (IPython's %strata, one a cell: _strata.c's next_session resets
 * each part). Everything here runs with the GIL held, which guards st_py. The collector is split by job:
 *   pystate.h   this state (the settings unpacked for the hot path, the session);
 *   labels.h    the verdict and label cache of code objects and C functions;
 *   threads.h   a thread's state object (scopes, @noprofile, its recorder thread);
 *   lines.h     line timings (--lines): chosen functions' tables, the hot path;
 *   collector.h the hot path the backends call, and the backends' interface.
 * Each includes only those above it in this list. */
#ifndef STRATA_PYTHON_PYSTATE_H
#define STRATA_PYTHON_PYSTATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <limits.h>
#include <stdint.h>

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
    uint32_t label;     /* interned label (static labels); ST_PATH_NONE until a thread
                         * first records a call (st_pylabel_resolve) */
    uint8_t keep;       /* 1: record calls */
    uint8_t module_ok;  /* 1: its file passes the module filters and is not strata's:
                         * the C functions it calls may be recorded (--trace-c) */
    uint8_t dynamic;    /* 1: label depends on the arguments (--label args) */
    uint8_t marks;      /* MARK_PROFILE / MARK_NOPROFILE, kept across generations */
    uint8_t ever_kept;  /* 1: recorded in some generation (its exits may pop) */
    uint8_t disabled;   /* 1: its events were switched off (3.12+): a new mark must
                         * switch them on again */
    uint8_t lines;      /* 1: its lines are timed (--lines; ltab is its table) */
    struct st_pyltab *ltab; /* its line table once chosen, kept across generations */
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
    int trace_c_ever;         /* trace_c was on at some time: C calls may be open */
    int include_internal, verbose;
    int lines;                /* --lines or --memory: follow chosen functions' lines */
    int line_time;            /* --lines: time them */
    int memory;               /* --memory: python/memory.h's mode */
    int line_memory;          /* --memory heap or rss: measure chosen functions' lines */
    int lines_restrict;       /* --lines with -R/-MR: what they select is chosen too */
    int tracing;              /* threads record timelines (the recorder's trace) */
    char internal_dir[PATH_MAX];
    size_t internal_len;
    Py_ssize_t extra_index;   /* the code objects' extra slot for their codeinfo_t */
    Py_ssize_t hot_index;     /* and for their hot word (labels.h) */
    PyObject *threads;        /* list of st_pythread_t, keeps them alive */
    PyObject *bootstrap;      /* the threading.setprofile trampoline (3.11) */
    int threading_due;        /* 3.11: threading is being imported, and its profile
                                 hook is strata's to set once it is (backend_profile.c) */
    cfunc_entry_t *cfuncs;
    size_t ncfunc_slots, ncfuncs;
    PyObject *error;          /* _strata.Error */
    unsigned long main_ident; /* the thread that imported strata: the main one, as
                                 threading takes its importer to be */
    /* child processes (STRATA_FOLLOW_CHILDREN) */
    long parent_pid;          /* a followed child's parent; 0 at the top */
    char top_dir[PATH_MAX];   /* the results folder of the process tree's top run */
} st_py_state_t;

extern st_py_state_t st_py;

#endif
