/* _strata: the CPython collector.
 *
 * Design note. One process has one profiling session. Every Python thread that
 * runs while the session is live gets a ThreadState object, passed to the C
 * profile hook as its `obj` argument, so the hook finds its thread's call tree
 * without a thread-local lookup. The hook (see `hook` below) is the hot path:
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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/components.h"
#include "core/filter.h"
#include "core/settings.h"
#include "session/args.h"
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

/* ------------------------------------------------------------------------- */
/* Thread state objects                                                      */

typedef struct {
    PyObject_HEAD
    st_thread_t *th;         /* NULL until the thread records its first call */
    unsigned long ident;     /* threading ident */
    uint64_t tid;            /* kernel thread id */
    int scope_depth;         /* open `with profile:` blocks */
    const void *scope_root;  /* frame of the @profile call that opened the scope */
    const void *suppress;    /* frame of the running @noprofile call */
    int blocked;             /* derived: calls are not recorded now */
} ThreadState;

static PyTypeObject ThreadState_Type;

/* ------------------------------------------------------------------------- */
/* The process-wide state                                                     */

static struct {
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
    PyObject *threads;        /* list of ThreadState, keeps them alive */
    PyObject *bootstrap;      /* the threading.setprofile trampoline */
    cfunc_entry_t *cfuncs;
    size_t ncfunc_slots, ncfuncs;
    PyObject *error;          /* _strata.Error */
} g;

static void warn_cb(const char *text) { fprintf(stderr, "strata: warning: %s\n", text); }

static PyObject *raise_msg(const st_msg_t *msg)
{
    PyErr_SetString(g.error, msg->text);
    return NULL;
}

/* Unpacks the settings the hook reads and starts a new generation. */
static int apply_settings(st_msg_t *msg)
{
    st_filter_t f;
    int rc = st_filter_init(&f, &g.settings, msg);
    if (rc < 0)
        return rc;
    if (g.have_filter)
        st_filter_free(&g.filter);
    g.filter = f;
    g.have_filter = 1;
    const st_settings_t *s = &g.settings;
    g.builtin_mode = st_settings_bool(s, ST_S_BUILTIN);
    g.trace_c = st_settings_bool(s, ST_S_TRACE_C);
    g.label_args = st_settings_has(s, ST_S_LABEL, "args");
    g.label_file = st_settings_has(s, ST_S_LABEL, "file");
    g.label_line = st_settings_has(s, ST_S_LABEL, "line");
    g.full_filepath = st_settings_bool(s, ST_S_FULL_FILEPATH);
    g.include_internal = st_settings_bool(s, ST_S_INCLUDE_INTERNAL);
    g.verbose = (int)st_settings_int(s, ST_S_VERBOSE);
    g.gen++;
    return 0;
}

/* Loads defaults, config file and environment once (for programs that import
 * strata without `strata python`). */
static int ensure_settings(void)
{
    if (g.have_settings)
        return 0;
    extern char **environ;
    st_args_t args;
    st_msg_t msg;
    /* Reuse the command-line parser with no flags: it applies file and env. */
    char *argv[] = {"-m", "__main__", NULL};
    int rc = st_args_parse_python(&args, 2, argv, environ, warn_cb, stdout, &msg);
    if (rc < 0) {
        raise_msg(&msg);
        return -1;
    }
    g.settings = args.settings;
    g.have_settings = 1;
    if (apply_settings(&msg) < 0) {
        raise_msg(&msg);
        return -1;
    }
    return 0;
}

static void update_blocked(ThreadState *ts)
{
    ts->blocked = ts->suppress != NULL ||
                  (g.builtin_mode && ts->scope_root == NULL && ts->scope_depth == 0);
}

/* ------------------------------------------------------------------------- */
/* Labels                                                                     */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void add_location(st_strbuf_t *b, PyCodeObject *co)
{
    if (!g.label_file && !g.label_line)
        return;
    const char *file = PyUnicode_AsUTF8(co->co_filename);
    if (!file) {
        PyErr_Clear();
        file = "?";
    }
    st_strbuf_puts(b, " [");
    if (g.label_file)
        st_strbuf_puts(b, g.full_filepath ? file : base_name(file));
    if (g.label_line)
        st_strbuf_printf(b, ":%d", co->co_firstlineno);
    st_strbuf_putc(b, ']');
}

static int intern_buf(st_strbuf_t *b, uint32_t *id)
{
    if (b->failed)
        return -1;
    return st_intern_id(&g.session.labels, st_strbuf_cstr(b), b->len, id);
}

/* The label of a call with its arguments: name(a=1, b='x') [file:line]. */
__attribute__((noinline, cold)) static uint32_t args_label(PyFrameObject *frame, PyCodeObject *co, uint32_t fallback)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    uint32_t id = fallback;
    st_strbuf_t b;
    st_strbuf_init(&b);
    const char *name = PyUnicode_AsUTF8(co->co_qualname);
    st_strbuf_puts(&b, name ? name : "?");
    st_strbuf_putc(&b, '(');
    PyObject *locals = PyFrame_GetLocals(frame);
    PyObject *names = PyCode_GetVarnames(co);
    if (locals && names && PyTuple_Check(names)) {
        int n = co->co_argcount + co->co_kwonlyargcount;
        if (co->co_flags & CO_VARARGS)
            n++;
        if (co->co_flags & CO_VARKEYWORDS)
            n++;
        for (int i = 0; i < n && i < PyTuple_GET_SIZE(names); i++) {
            PyObject *key = PyTuple_GET_ITEM(names, i);
            PyObject *val = PyMapping_Check(locals) ? PyObject_GetItem(locals, key) : NULL;
            PyObject *repr = val ? PyObject_Repr(val) : NULL;
            const char *k = PyUnicode_AsUTF8(key);
            const char *r = repr ? PyUnicode_AsUTF8(repr) : NULL;
            if (i)
                st_strbuf_puts(&b, ", ");
            st_strbuf_puts(&b, k ? k : "?");
            st_strbuf_putc(&b, '=');
            if (!r) {
                st_strbuf_puts(&b, "?");
            } else if (strlen(r) > 32) {
                st_strbuf_add(&b, r, 29);
                st_strbuf_puts(&b, "...");
            } else {
                st_strbuf_puts(&b, r);
            }
            Py_XDECREF(val);
            Py_XDECREF(repr);
            PyErr_Clear();
        }
    }
    Py_XDECREF(locals);
    Py_XDECREF(names);
    PyErr_Clear();
    st_strbuf_putc(&b, ')');
    add_location(&b, co);
    uint32_t got;
    if (intern_buf(&b, &got) == 0)
        id = got;
    st_strbuf_free(&b);
    PyErr_Restore(et, ev, tb);
    return id;
}

/* The code object's info, made or refreshed for this generation. NULL when out
 * of memory (the call is then not recorded). */
/* The code object's extra slot, read directly: CPython 3.11 to 3.13 keep them as
 * {Py_ssize_t size; void *extras[]} behind co_extra (the layout of
 * _PyCodeObjectExtra, unchanged since 3.6); this saves a call per event. */
static inline codeinfo_t *cached_info(PyCodeObject *co)
{
    Py_ssize_t *extra = co->co_extra;
    if (extra && g.extra_index < extra[0]) {
        codeinfo_t *ci = ((codeinfo_t **)(extra + 1))[g.extra_index];
        if (ci && ci->gen == g.gen)
            return ci;
    }
    return NULL;
}

__attribute__((noinline, cold)) static codeinfo_t *code_info_slow(PyCodeObject *co)
{
    void *extra = NULL;
    if (code_get_extra((PyObject *)co, g.extra_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    codeinfo_t *ci = extra;
    if (ci && ci->gen == g.gen)
        return ci;
    if (!ci) {
        ci = calloc(1, sizeof *ci);
        if (!ci)
            return NULL;
        if (code_set_extra((PyObject *)co, g.extra_index, ci) < 0) {
            PyErr_Clear();
            free(ci);
            return NULL;
        }
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const char *name = PyUnicode_AsUTF8(co->co_name);
    const char *file = PyUnicode_AsUTF8(co->co_filename);
    const char *qual = PyUnicode_AsUTF8(co->co_qualname);
    ci->keep = ci->module_ok = 0;
    if (name && file && qual) {
        int internal = g.internal_len && strncmp(file, g.internal_dir, g.internal_len) == 0;
        ci->module_ok = (g.include_internal || !internal) && st_filter_keeps_module(&g.filter, file);
        ci->keep = ci->module_ok && st_filter_keeps(&g.filter, name, file);
        st_strbuf_t b;
        st_strbuf_init(&b);
        st_strbuf_puts(&b, qual);
        add_location(&b, co);
        if (intern_buf(&b, &ci->label) < 0)
            ci->keep = 0;
        st_strbuf_free(&b);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    ci->dynamic = (uint8_t)g.label_args;
    ci->gen = g.gen;
    return ci;
}

static inline codeinfo_t *code_info(PyCodeObject *co)
{
    codeinfo_t *ci = cached_info(co);
    return ci ? ci : code_info_slow(co);
}

/* Label and verdict of a C function (cached by method def and owner). */
__attribute__((noinline, cold)) static cfunc_entry_t *cfunc_info(PyObject *fn)
{
    if (!PyCFunction_Check(fn))
        return NULL;
    PyCFunctionObject *cf = (PyCFunctionObject *)fn;
    PyObject *self = cf->m_self;
    int is_method = self && !PyModule_Check(self);
    const void *owner = is_method ? (const void *)Py_TYPE(self) : (const void *)self;
    if (g.ncfunc_slots == 0 || (g.ncfuncs + 1) * 2 > g.ncfunc_slots) {
        size_t slots = g.ncfunc_slots ? g.ncfunc_slots * 2 : 256;
        cfunc_entry_t *t = calloc(slots, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < g.ncfunc_slots; i++) {
            if (!g.cfuncs[i].ml)
                continue;
            size_t j = (((uintptr_t)g.cfuncs[i].ml >> 4) ^ ((uintptr_t)g.cfuncs[i].owner >> 4)) &
                       (slots - 1);
            while (t[j].ml)
                j = (j + 1) & (slots - 1);
            t[j] = g.cfuncs[i];
        }
        free(g.cfuncs);
        g.cfuncs = t;
        g.ncfunc_slots = slots;
    }
    size_t j = (((uintptr_t)cf->m_ml >> 4) ^ ((uintptr_t)owner >> 4)) & (g.ncfunc_slots - 1);
    while (g.cfuncs[j].ml && !(g.cfuncs[j].ml == cf->m_ml && g.cfuncs[j].owner == owner))
        j = (j + 1) & (g.ncfunc_slots - 1);
    cfunc_entry_t *e = &g.cfuncs[j];
    if (e->ml && e->gen == g.gen)
        return e;
    if (!e->ml)
        g.ncfuncs++;
    e->ml = cf->m_ml;
    e->owner = owner;
    e->gen = g.gen;
    e->keep = 0;

    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const char *fname = cf->m_ml->ml_name;
    const char *module = "builtins";
    PyObject *modname = NULL;
    st_strbuf_t b;
    st_strbuf_init(&b);
    if (is_method) {
        module = Py_TYPE(self)->tp_name;
        st_strbuf_printf(&b, "<method '%s' of '%s' objects>", fname, module);
    } else {
        if (self)
            modname = PyObject_GetAttrString(self, "__name__");
        else if (cf->m_module)
            modname = Py_NewRef(cf->m_module);
        if (modname && PyUnicode_Check(modname))
            module = PyUnicode_AsUTF8(modname);
        if (!module)
            module = "?";
        if (strcmp(module, "builtins") == 0)
            st_strbuf_printf(&b, "<built-in method %s>", fname);
        else
            st_strbuf_printf(&b, "<built-in method %s.%s>", module, fname);
    }
    int internal = strncmp(module, "strata.", 7) == 0;
    if (intern_buf(&b, &e->label) == 0)
        e->keep = (uint8_t)((g.include_internal || !internal) &&
                            st_filter_keeps(&g.filter, fname, module));
    Py_XDECREF(modname);
    st_strbuf_free(&b);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return e;
}

/* ------------------------------------------------------------------------- */
/* The code object of a frame                                                 */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* CPython 3.11's frame layout (Include/internal/pycore_frame.h), mirrored to read
 * the code object without PyFrame_GetCode's call and reference count: two of the
 * hook's ~40 ns. Checked against PyFrame_GetCode when the module loads (see
 * check_frame_layout); if they ever disagree, the API is used instead. */
typedef struct {
    PyObject *f_func, *f_globals, *f_builtins, *f_locals;
    PyCodeObject *f_code;
} mirror_interp_frame_t;

typedef struct {
    PyObject_HEAD
    PyFrameObject *f_back;
    mirror_interp_frame_t *f_frame;
} mirror_frame_t;

static int frame_layout_ok;

static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
    if (frame_layout_ok)
        return ((mirror_frame_t *)frame)->f_frame->f_code;
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps it alive */
    return co;
}

static void check_frame_layout(void)
{
    PyFrameObject *frame = PyEval_GetFrame();
    if (!frame)
        return;
    PyCodeObject *co = PyFrame_GetCode(frame);
    frame_layout_ok = ((mirror_frame_t *)frame)->f_frame->f_code == co;
    Py_DECREF(co);
}
#else
static inline PyCodeObject *frame_code(PyFrameObject *frame)
{
    PyCodeObject *co = PyFrame_GetCode(frame);
    Py_DECREF(co); /* the frame keeps it alive */
    return co;
}

static void check_frame_layout(void) {}
#endif

/* ------------------------------------------------------------------------- */
/* The hook                                                                   */

__attribute__((noinline, cold)) static st_thread_t *thread_tree(ThreadState *ts);

static inline void stamp(st_frame_t *f)
{
    if (g.want_cpu)
        f->t0[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
    if (g.want_wall)
        f->t0[ST_TIMER_WALL] = st_clock_ticks();
}

/* Closes the thread's top call (the caller checked it is this event's), reading
 * the clocks first. The common single-timer case is its own branch so that the
 * accumulation loop is unrolled. */
static inline void pop(st_thread_t *th)
{
    uint64_t now[ST_NTIMERS] = {0, 0};
    if (g.ntimers == 1) {
        now[ST_TIMER_WALL] = st_clock_ticks();
        st_calltree_close_top(&th->tree, now, 1);
        return;
    }
    if (g.want_wall)
        now[ST_TIMER_WALL] = st_clock_ticks();
    if (g.want_cpu)
        now[ST_TIMER_CPU] = st_clock_thread_cpu_ns();
    st_calltree_close_top(&th->tree, now, g.ntimers);
}

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    ThreadState *ts = (ThreadState *)obj;
    switch (what) {
    case PyTrace_CALL: {
        if (ts->suppress)
            return 0;
        PyCodeObject *co = frame_code(frame);
        codeinfo_t *ci = code_info(co);
        if (!ci)
            return 0;
        if (ts->blocked) {
            /* Outside a -b scope only a call of an @profile function gets through,
             * and it opens the scope. */
            if (!(ci->marks & MARK_PROFILE))
                return 0;
            ts->scope_root = frame;
            update_blocked(ts);
        }
        if (ci->marks & MARK_NOPROFILE) {
            ts->suppress = frame;
            ts->blocked = 1;
            return 0;
        }
        if (!ci->keep)
            return 0;
        st_thread_t *th = ts->th ? ts->th : thread_tree(ts);
        if (!th)
            return 0;
        uint32_t label = ci->dynamic ? args_label(frame, co, ci->label) : ci->label;
        st_frame_t *f = st_calltree_push(&th->tree, label, frame);
        if (f)
            stamp(f);
        return 0;
    }
    case PyTrace_RETURN:
        if (ts->th && st_calltree_top_key(&ts->th->tree) == (const void *)frame)
            pop(ts->th);
        if ((const void *)frame == ts->suppress || (const void *)frame == ts->scope_root) {
            if ((const void *)frame == ts->suppress)
                ts->suppress = NULL;
            else
                ts->scope_root = NULL;
            update_blocked(ts);
        }
        return 0;
    case PyTrace_C_CALL: {
        if (!g.trace_c || ts->blocked)
            return 0;
        /* C functions called from left-out files (strata's own, threading's) are
         * left out with them. */
        codeinfo_t *caller = code_info(frame_code(frame));
        if (!caller || !caller->module_ok)
            return 0;
        cfunc_entry_t *e = cfunc_info(arg);
        if (!e || !e->keep)
            return 0;
        st_thread_t *th = ts->th ? ts->th : thread_tree(ts);
        if (!th)
            return 0;
        st_frame_t *f = st_calltree_push(&th->tree, e->label, (const char *)frame + 1);
        if (f)
            stamp(f);
        return 0;
    }
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        if (ts->th && st_calltree_top_key(&ts->th->tree) == (const char *)frame + 1)
            pop(ts->th);
        return 0;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                    */

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

__attribute__((noinline, cold)) static st_thread_t *thread_tree(ThreadState *ts)
{
    char name[64];
    thread_name(ts->ident, name, sizeof name);
    ts->th = st_session_new_thread(&g.session, ts->tid, name);
    return ts->th;
}

static ThreadState *new_thread_state(unsigned long ident, uint64_t tid)
{
    ThreadState *ts = PyObject_New(ThreadState, &ThreadState_Type);
    if (!ts)
        return NULL;
    ts->th = NULL;
    ts->ident = ident;
    ts->tid = tid;
    ts->scope_depth = 0;
    ts->scope_root = NULL;
    ts->suppress = NULL;
    update_blocked(ts);
    if (PyList_Append(g.threads, (PyObject *)ts) < 0) {
        Py_DECREF(ts);
        return NULL;
    }
    Py_DECREF(ts); /* the list holds it */
    return ts;
}

/* The calling thread's ThreadState, if the hook is installed on it. */
static ThreadState *current_state(void)
{
    PyThreadState *tstate = PyThreadState_Get();
    if (tstate->c_profilefunc == hook)
        return (ThreadState *)tstate->c_profileobj;
    return NULL;
}

static int install_on(PyThreadState *tstate, int is_current)
{
    unsigned long ident = (unsigned long)tstate->thread_id;
    uint64_t tid = is_current ? (uint64_t)PyThread_get_thread_native_id() : 0;
#if PY_VERSION_HEX >= 0x030B0000
    if (!is_current)
        tid = (uint64_t)tstate->native_thread_id;
#endif
    ThreadState *ts = new_thread_state(ident, tid);
    if (!ts)
        return -1;
    if (is_current) {
        PyEval_SetProfile(hook, (PyObject *)ts);
        return 0;
    }
    return _PyEval_SetProfile(tstate, hook, (PyObject *)ts);
}

/* threading.setprofile trampoline: the first event of a new thread installs the C
 * hook on it and is passed on. */
static PyObject *bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "OOO", &frame, &event, &arg))
        return NULL;
    if (!g.running || g.forked_child || current_state()) {
        Py_RETURN_NONE;
    }
    if (install_on(PyThreadState_Get(), 1) < 0)
        return NULL;
    ThreadState *ts = current_state();
    const char *ev = PyUnicode_Check(event) ? PyUnicode_AsUTF8(event) : "";
    if (ts && ev && strcmp(ev, "call") == 0 && PyFrame_Check(frame))
        hook((PyObject *)ts, (PyFrameObject *)frame, PyTrace_CALL, Py_None);
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {"_bootstrap", bootstrap, METH_VARARGS, NULL};

static int set_threading_profile(PyObject *fn)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading)
        return -1;
    PyObject *r = PyObject_CallMethod(threading, "setprofile", "O", fn);
    Py_DECREF(threading);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int start_hooks(void)
{
    if (g.running)
        return 0;
    if (!g.bootstrap && !(g.bootstrap = PyCFunction_New(&bootstrap_def, NULL)))
        return -1;
    check_frame_layout();
    /* threading first: importing it now must not be recorded. */
    if (set_threading_profile(g.bootstrap) < 0)
        return -1;
    PyThreadState *me = PyThreadState_Get();
    if (install_on(me, 1) < 0)
        return -1;
    /* The main thread (the one starting the profile) is |0>>>. */
    ThreadState *mine = current_state();
    if (mine && !thread_tree(mine))
        return PyErr_NoMemory(), -1;
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t;
         t = PyThreadState_Next(t)) {
        if (t != me && install_on(t, 0) < 0)
            return -1;
    }
    g.running = 1;
    return 0;
}

static void stop_hooks(void)
{
    if (!g.running)
        return;
    g.running = 0;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t;
         t = PyThreadState_Next(t)) {
        if (t->c_profilefunc == hook) {
            if (_PyEval_SetProfile(t, NULL, NULL) < 0)
                PyErr_Clear();
        }
    }
    if (set_threading_profile(Py_None) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

/* ------------------------------------------------------------------------- */
/* Module functions                                                           */

static PyObject *py_parse_cli(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!argv)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i));
        if (!s) {
            free(argv);
            return NULL;
        }
        argv[i] = (char *)s;
    }
    extern char **environ;
    st_args_t a;
    st_msg_t msg;
    fflush(stdout);
    int rc = st_args_parse_python(&a, (int)n, argv, environ, warn_cb, stdout, &msg);
    fflush(stdout);
    if (rc == ST_EHELP) {
        free(argv);
        Py_RETURN_NONE;
    }
    if (rc < 0) {
        free(argv);
        return raise_msg(&msg);
    }
    if (g.have_settings)
        st_settings_free(&g.settings);
    g.settings = a.settings;
    g.have_settings = 1;
    if (apply_settings(&msg) < 0) {
        free(argv);
        return raise_msg(&msg);
    }
    PyObject *rest = PyList_New(0);
    for (int i = 0; rest && i < a.ntarget_args; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(a.target_args[i]);
        if (!s || PyList_Append(rest, s) < 0)
            Py_CLEAR(rest);
        Py_XDECREF(s);
    }
    PyObject *result = rest ? Py_BuildValue("{s:O,s:s,s:N,s:s}", "is_module",
                                            a.is_module ? Py_True : Py_False, "target", a.target,
                                            "args", rest, "setup",
                                            st_settings_str(&g.settings, ST_S_SETUP))
                            : NULL;
    free(argv);
    return result;
}

/* begin(target_name, command): creates the session and its results folder. */
static PyObject *py_begin(PyObject *self, PyObject *args)
{
    (void)self;
    const char *target;
    PyObject *command;
    if (!PyArg_ParseTuple(args, "sO!", &target, &PyList_Type, &command))
        return NULL;
    if (g.live)
        Py_RETURN_FALSE;
    if (ensure_settings() < 0)
        return NULL;
    st_msg_t msg;
    if (st_session_init(&g.session, &g.settings, &msg) < 0)
        return raise_msg(&msg);
    if (st_session_make_outdir(&g.session, target, &msg) < 0) {
        st_session_free(&g.session);
        return raise_msg(&msg);
    }
    Py_ssize_t n = PyList_GET_SIZE(command);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!argv) {
        st_session_free(&g.session);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s = PyUnicode_AsUTF8(PyList_GET_ITEM(command, i));
        argv[i] = (char *)(s ? s : "?");
    }
    PyErr_Clear();
    st_session_set_command(&g.session, (int)n, argv);
    free(argv);
    snprintf(g.session.python_version, sizeof g.session.python_version, "%s",
             Py_GetVersion());
    char *sp = strchr(g.session.python_version, ' ');
    if (sp)
        *sp = '\0';
    g.ntimers = g.session.ntimers;
    g.want_wall = (g.session.components & (1u << ST_COMP_WALL_CLOCK)) != 0;
    g.want_cpu = (g.session.components & (1u << ST_COMP_CPU_CLOCK)) != 0;
    st_clock_init();
    g.live = 1;
    if (g.verbose >= 1)
        fprintf(stderr, "[strata] profiling into %s (clock: %s)\n", g.session.outdir,
                st_clock_name());
    Py_RETURN_TRUE;
}

static PyObject *py_start(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!g.live) {
        PyErr_SetString(g.error, "no session: call begin() first");
        return NULL;
    }
    if (!st_settings_bool(&g.settings, ST_S_PROFILE))
        Py_RETURN_NONE;
    if (start_hooks() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_finalize(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!g.live || g.finalized || g.forked_child)
        Py_RETURN_NONE;
    g.finalized = 1;
    stop_hooks();
    uint64_t now[ST_NTIMERS] = {st_clock_ticks(), st_clock_thread_cpu_ns()};
    for (size_t i = 0; i < g.session.nthreads; i++)
        st_calltree_close_all(&g.session.threads[i]->tree, now, g.ntimers);
    /* The session keeps the settings as they ended (the program may change them). */
    st_settings_t copy;
    if (st_settings_copy(&copy, &g.settings) == 0) {
        st_settings_free(&g.session.settings);
        g.session.settings = copy;
    }
    double npt[ST_NTIMERS] = {st_clock_ns_per_tick(), 1.0};
    FILE *tables = st_settings_bool(&g.settings, ST_S_PRINT_TABLES) ? stderr : NULL;
    PyObject *out = PySys_GetObject("stdout"), *err = PySys_GetObject("stderr");
    PyObject *r;
    if (out && (r = PyObject_CallMethod(out, "flush", NULL)))
        Py_DECREF(r);
    if (err && (r = PyObject_CallMethod(err, "flush", NULL)))
        Py_DECREF(r);
    PyErr_Clear();
    st_msg_t msg;
    int failed = 0;
    for (size_t i = 0; i < g.session.nthreads; i++)
        failed |= g.session.threads[i]->tree.failed;
    if (st_session_write(&g.session, npt, st_clock_name(), tables, &msg) < 0)
        fprintf(stderr, "strata: error: %s\n", msg.text);
    if (failed)
        fprintf(stderr, "strata: error: memory ran out while profiling; the profile is "
                        "incomplete\n");
    Py_RETURN_NONE;
}

static PyObject *py_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (g.live && !g.forked_child) {
        g.forked_child = 1;
        stop_hooks();
    }
    Py_RETURN_NONE;
}

/* Marks a function's code object (MARK_PROFILE / MARK_NOPROFILE). */
static PyObject *mark(PyObject *fn, uint8_t bit)
{
    PyObject *code = PyObject_GetAttrString(fn, "__code__");
    if (!code || !PyCode_Check(code)) {
        Py_XDECREF(code);
        PyErr_Format(PyExc_TypeError, "can only mark Python functions, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    codeinfo_t *ci = code_info((PyCodeObject *)code);
    Py_DECREF(code);
    if (!ci)
        return PyErr_NoMemory();
    ci->marks |= bit;
    Py_RETURN_NONE;
}

static PyObject *py_mark_profile(PyObject *self, PyObject *fn)
{
    (void)self;
    if (ensure_settings() < 0)
        return NULL;
    return mark(fn, MARK_PROFILE);
}

static PyObject *py_mark_noprofile(PyObject *self, PyObject *fn)
{
    (void)self;
    if (ensure_settings() < 0)
        return NULL;
    return mark(fn, MARK_NOPROFILE);
}

static PyObject *py_scope_enter(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    ThreadState *ts = current_state();
    if (ts) {
        ts->scope_depth++;
        update_blocked(ts);
    }
    Py_RETURN_NONE;
}

static PyObject *py_scope_exit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    ThreadState *ts = current_state();
    if (ts && ts->scope_depth > 0) {
        ts->scope_depth--;
        update_blocked(ts);
    }
    Py_RETURN_NONE;
}

static PyObject *py_set_internal_dir(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s)
        return NULL;
    snprintf(g.internal_dir, sizeof g.internal_dir, "%s/", s);
    g.internal_len = strlen(g.internal_dir);
    Py_RETURN_NONE;
}

static PyObject *py_get(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name || ensure_settings() < 0)
        return NULL;
    int id = st_setting_find(name);
    if (id < 0)
        return PyErr_Format(PyExc_KeyError, "unknown setting '%s'", name);
    const st_setting_def_t *d = st_setting_def((st_setting_id_t)id);
    const st_value_t *v = &g.settings.v[id];
    switch (d->type) {
    case ST_TYPE_BOOL:
        return PyBool_FromLong((long)v->i);
    case ST_TYPE_INT:
        return PyLong_FromLongLong((long long)v->i);
    case ST_TYPE_STRING:
    case ST_TYPE_CHOICE:
        return PyUnicode_FromString(v->s ? v->s : "");
    default: {
        PyObject *l = PyList_New((Py_ssize_t)v->nlist);
        for (size_t i = 0; l && i < v->nlist; i++) {
            PyObject *s = PyUnicode_FromString(v->list[i]);
            if (!s) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, (Py_ssize_t)i, s);
        }
        return l;
    }
    }
}

/* set(name, value): value is a str (parsed as the environment would be), a bool,
 * an int, or a list of str. Raises ValueError naming what is accepted. */
static PyObject *py_set(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO", &name, &value) || ensure_settings() < 0)
        return NULL;
    int id = st_setting_find(name);
    if (id < 0)
        return PyErr_Format(PyExc_KeyError, "unknown setting '%s'", name);
    st_msg_t msg;
    int rc;
    st_settings_t backup;
    if (st_settings_copy(&backup, &g.settings) < 0)
        return PyErr_NoMemory();
    if (PyList_Check(value) || PyTuple_Check(value)) {
        PyObject *seq = PySequence_Fast(value, "a list");
        if (!seq) {
            st_settings_free(&backup);
            return NULL;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        char **items = calloc((size_t)n + 1, sizeof *items);
        rc = items ? 0 : st_msg_set(&msg, ST_ENOMEM, "out of memory");
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
            const char *s = PyUnicode_Check(it) ? PyUnicode_AsUTF8(it) : NULL;
            if (!s) {
                PyErr_Clear();
                rc = st_msg_set(&msg, ST_EINVAL, "%s: items must be strings",
                                st_setting_def((st_setting_id_t)id)->env);
            }
            items[i] = (char *)s;
        }
        if (rc == 0)
            rc = st_settings_set_list(&g.settings, (st_setting_id_t)id, items, (size_t)n,
                                      ST_SRC_API, &msg);
        free(items);
        Py_DECREF(seq);
    } else {
        PyObject *text = PyBool_Check(value) ? PyUnicode_FromString(value == Py_True ? "ON" : "OFF")
                                             : PyObject_Str(value);
        if (!text) {
            st_settings_free(&backup);
            return NULL;
        }
        const char *s = PyUnicode_AsUTF8(text);
        rc = s ? st_settings_set(&g.settings, (st_setting_id_t)id, s, ST_SRC_API, &msg) : -1;
        Py_DECREF(text);
        if (!s) {
            st_settings_free(&backup);
            return NULL;
        }
    }
    if (rc == 0)
        rc = apply_settings(&msg);
    if (rc < 0) {
        st_settings_free(&g.settings);
        g.settings = backup;
        st_msg_t ignored;
        apply_settings(&ignored);
        PyErr_SetString(PyExc_ValueError, msg.text);
        return NULL;
    }
    st_settings_free(&backup);
    if (g.running)
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(g.threads); i++)
            update_blocked((ThreadState *)PyList_GET_ITEM(g.threads, i));
    Py_RETURN_NONE;
}

static PyObject *py_state(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("{s:O,s:O,s:s}", "live", g.live ? Py_True : Py_False, "running",
                         g.running ? Py_True : Py_False, "outdir",
                         g.live ? g.session.outdir : "");
}

static PyMethodDef methods[] = {
    {"parse_cli", py_parse_cli, METH_VARARGS,
     "parse_cli(argv) -> dict or None: parse `strata python` options (None after --help)."},
    {"begin", py_begin, METH_VARARGS,
     "begin(target, command) -> bool: create the session and its results folder."},
    {"start", py_start, METH_NOARGS, "start(): install the profile hook on every thread."},
    {"finalize", py_finalize, METH_NOARGS, "finalize(): stop, write and print the results."},
    {"after_fork_child", py_after_fork_child, METH_NOARGS,
     "after_fork_child(): stop profiling in a forked child."},
    {"mark_profile", py_mark_profile, METH_O, "mark_profile(fn): calls of fn open a -b scope."},
    {"mark_noprofile", py_mark_noprofile, METH_O,
     "mark_noprofile(fn): calls of fn and what they call are not recorded."},
    {"scope_enter", py_scope_enter, METH_NOARGS, "scope_enter(): open a `with profile:` block."},
    {"scope_exit", py_scope_exit, METH_NOARGS, "scope_exit(): close a `with profile:` block."},
    {"set_internal_dir", py_set_internal_dir, METH_O,
     "set_internal_dir(path): code under path is strata's own."},
    {"get", py_get, METH_O, "get(name): a setting's value."},
    {"set", py_set, METH_VARARGS, "set(name, value): change a setting (ValueError if bad)."},
    {"state", py_state, METH_NOARGS, "state() -> dict: live, running, outdir."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ThreadState_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_strata.ThreadState",
    .tp_basicsize = sizeof(ThreadState),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A thread's profiling state (internal).",
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_strata", "strata's CPython collector (internal).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__strata(void)
{
    if (PyType_Ready(&ThreadState_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    g.extra_index = request_extra_index(free);
    if (g.extra_index < 0) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot");
        return NULL;
    }
    g.threads = PyList_New(0);
    g.error = PyErr_NewException("_strata.Error", NULL, NULL);
    if (!g.threads || !g.error || PyModule_AddObjectRef(m, "Error", g.error) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddStringConstant(m, "__version__", STRATA_VERSION);
    return m;
}
