/* _strata: the CPython extension's module functions (see collector.h for the
 * design). */
#include "python/collector.h"
#include "python/sampler.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "python/exits.h"
#include "python/frames.h"
#include "python/memory.h"
#include "python/spawns.h"
#include "session/args.h"

st_py_state_t st_py;

/* The metrics of --memory (heap, sample): bytes and allocations made, bytes held at
 * the peak and at the end, each call path's; the allocator hooks add to them. */
static uint32_t mem_metrics[4];
static st_pymem_holdings_t holdings;

static void warn_cb(const char *text) { fprintf(stderr, "strata: warning: %s\n", text); }

static PyObject *raise_msg(const st_msg_t *msg)
{
    PyErr_SetString(st_py.error, msg->text);
    return NULL;
}

/* Unpacks the settings the hook reads and starts a new generation. */
static int apply_settings(st_msg_t *msg)
{
    st_filter_t f;
    int rc = st_filter_init(&f, &st_py.settings, msg);
    if (rc < 0)
        return rc;
    if (st_py.have_filter)
        st_filter_free(&st_py.filter);
    st_py.filter = f;
    st_py.have_filter = 1;
    const st_settings_t *s = &st_py.settings;
    st_py.builtin_mode = st_settings_bool(s, ST_S_BUILTIN);
    st_py.trace_c = st_settings_bool(s, ST_S_TRACE_C);
    st_py.trace_c_ever |= st_py.trace_c;
    st_py.label_args = st_settings_has(s, ST_S_LABEL, "args");
    st_py.label_file = st_settings_has(s, ST_S_LABEL, "file");
    st_py.label_line = st_settings_has(s, ST_S_LABEL, "line");
    st_py.full_filepath = st_settings_bool(s, ST_S_FULL_FILEPATH);
    st_py.include_internal = st_settings_bool(s, ST_S_INCLUDE_INTERNAL);
    st_py.verbose = (int)st_settings_int(s, ST_S_VERBOSE);
    st_py.line_time = st_settings_bool(s, ST_S_LINES);
    const char *memory = st_settings_str(s, ST_S_MEMORY);
    st_py.memory = strcmp(memory, "heap") == 0     ? ST_PYMEM_HEAP
                   : strcmp(memory, "rss") == 0    ? ST_PYMEM_RSS
                   : strcmp(memory, "sample") == 0 ? ST_PYMEM_SAMPLE
                                                   : ST_PYMEM_OFF;
    /* sample: the cheap mode, no line events */
    st_py.line_memory = st_py.memory == ST_PYMEM_HEAP || st_py.memory == ST_PYMEM_RSS;
    st_py.lines = st_py.line_time || st_py.line_memory;
    st_py.lines_restrict = st_py.lines && (st_py.filter.func_restrict.n || st_py.filter.mod_restrict.n);
    st_py.gen++;
    return 0;
}

/* Loads defaults, config file and environment once (for programs that import
 * strata without `strata python`). */
static int ensure_settings(void)
{
    if (st_py.have_settings)
        return 0;
    extern char **environ;
    st_args_t args;
    st_msg_t msg;
    /* Reuse the command-line parser with no flags: it applies file and env. */
    char *argv[] = {"-m", "__main__", NULL};
    int rc = st_args_parse_python(&args, 2, argv, environ, 0, warn_cb, stdout, &msg);
    if (rc < 0) {
        raise_msg(&msg);
        return -1;
    }
    st_py.settings = args.settings;
    st_py.have_settings = 1;
    if (apply_settings(&msg) < 0) {
        raise_msg(&msg);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Module functions                                                           */

/* parse_cli(argv): the words as the interpreter gave them (decoded with the file
 * system encoding and surrogateescape), turned back into the bytes they were, as
 * os.fsencode does: any byte passes, as it would through plain python. */
static PyObject *py_parse_cli(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"argv", "statement", NULL};
    PyObject *list;
    int statement = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|p:parse_cli", kwlist, &PyList_Type, &list,
                                     &statement))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *bytes = PyList_New(n);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!bytes || !argv) {
        Py_XDECREF(bytes);
        free(argv);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(list, i), &b)) {
            Py_DECREF(bytes);
            free(argv);
            return NULL;
        }
        PyList_SET_ITEM(bytes, i, b);
        argv[i] = PyBytes_AS_STRING(b);
    }
    extern char **environ;
    st_args_t a;
    st_msg_t msg;
    PyObject *result = NULL;
    fflush(stdout);
    int rc = st_args_parse_python(&a, (int)n, argv, environ, statement ? ST_ARGS_STATEMENT : 0,
                                  warn_cb, stdout, &msg);
    fflush(stdout);
    if (rc == ST_EHELP) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (rc < 0) {
        raise_msg(&msg);
        goto done;
    }
    if (st_py.have_settings)
        st_settings_free(&st_py.settings);
    st_py.settings = a.settings;
    st_py.have_settings = 1;
    if (apply_settings(&msg) < 0) {
        raise_msg(&msg);
        goto done;
    }
    PyObject *rest = PyList_New(0);
    for (int i = 0; rest && i < a.ntarget_args; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(a.target_args[i]);
        if (!s || PyList_Append(rest, s) < 0)
            Py_CLEAR(rest);
        Py_XDECREF(s);
    }
    /* where the target's word is in argv (n: none, with statement) */
    Py_ssize_t start = n;
    for (Py_ssize_t i = 0; a.target && i < n; i++)
        if (argv[i] == a.target)
            start = i;
    PyObject *target = a.target ? PyUnicode_DecodeFSDefault(a.target) : Py_NewRef(Py_None);
    if (rest && target)
        result = Py_BuildValue("{s:O,s:O,s:N,s:O&,s:n}", "is_module",
                               a.is_module ? Py_True : Py_False, "target", target, "args", rest,
                               "setup", PyUnicode_DecodeFSDefault,
                               st_settings_str(&st_py.settings, ST_S_SETUP), "start", start);
    else
        Py_XDECREF(rest);
    Py_XDECREF(target);
done:
    Py_DECREF(bytes);
    free(argv);
    return result;
}

/* The Python backend as one of the session's collectors (session/collector.h): it
 * starts and stops the hook, and gives the model the interpreter's version. */
static char python_version[64];
static int memory_used; /* a session profiled memory (next_session) */

static int python_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    if (st_py.memory) {
        memory_used = 1;
        st_py.memory = st_pymem_start(st_py.memory);
        st_py.line_memory = st_py.line_memory && st_py.memory != ST_PYMEM_OFF;
        /* memory over time: every 20 ms, mprof run's 0.1 s five times over */
        if (st_py.memory && st_pymem_series_start(20000000u) < 0)
            fprintf(stderr, "strata: warning: memory over time cannot be sampled here (no "
                            "/proc/self/statm or no thread)\n");
    }
    if (!st_settings_bool(&st_py.settings, ST_S_PROFILE) && !st_py.tracing && !st_py.lines)
        return 0; /* nothing to record: the hook stays off */
    if (st_pybackend_start() < 0) /* the Python exception says why */
        return st_msg_set(msg, ST_EINVAL, "the profile hook could not be installed");
    s->timed = 1;
    return 0;
}

static void python_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    (void)s;
    st_pybackend_stop();
    st_pymem_series_stop();
    if (st_py.session.nmem_metrics)
        st_pymem_holdings(mem_metrics[2], mem_metrics[3], &holdings);
    st_pymem_stop();
}

static void python_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    m->python_version = python_version;
    st_pylines_contribute(m, s->ns_per_tick[ST_TIMER_WALL]);
    if (st_py.session.nmem_metrics) {
        st_model_memline_t *rows;
        m->nmemlines = st_pymem_lines(&rows);
        m->memlines = rows;
    }
}

static const st_collector_t python_collector = {
    .name = "python",
    .start = python_start,
    .stop = python_stop,
    .contribute = python_contribute,
};

/* What the parts keep of the last session goes, as a new one begins after it or in
 * a forked child; the session itself is the caller's to free or to leave. */
static void forget_session(void)
{
    st_pylines_new_session();
    st_pythread_new_session();
    st_pybackend_new_session();
    memset(&holdings, 0, sizeof holdings);
    st_py.live = st_py.finalized = st_py.running = st_py.tracing = 0;
}

/* A session after one whose results are written (IPython's %strata: one a cell):
 * what the last one kept goes, and every part starts as in a new process. Memory
 * profiling keeps process-wide state (its allocator hooks' samples and their
 * references): one session of a process may have it. -1 with an exception. */
static int next_session(void)
{
    if (memory_used && st_py.memory != ST_PYMEM_OFF) {
        PyErr_SetString(st_py.error, "--memory profiles one session of a process, and an "
                                     "earlier one did: start a new process or kernel to "
                                     "profile memory again");
        return -1;
    }
    st_pyexit_new_session();
    forget_session();
    st_session_free(&st_py.session);
    st_py.gen++; /* the labels were the last session's */
    return 0;
}

static void mpi_hook(void);

/* Creates the session and its results folder for `target`, run as argv (GIL held).
 * 0, or < 0 with msg filled. */
static int begin_session(const char *target, int argc, char *const *argv, st_msg_t *msg)
{
    int rc = st_session_begin(&st_py.session, &st_py.settings, target, argc, argv, msg);
    if (rc < 0)
        return rc;
    mpi_hook();
    snprintf(python_version, sizeof python_version, "%s", Py_GetVersion());
    char *sp = strchr(python_version, ' ');
    if (sp)
        *sp = '\0';
    st_pyexit_keep_terminal();
    st_py.live = 1;
    if (st_py.verbose >= 1)
        fprintf(stderr, "[strata] profiling into %s (clock: %s)\n", st_py.session.outdir,
                st_clock_name());
    return 0;
}

/* The words of a list of str as C strings (bytes that are not UTF-8 as \xNN), held
 * by *hold (a new list); NULL with an exception. */
static char **command_words(PyObject *command, PyObject **hold)
{
    Py_ssize_t n = PyList_GET_SIZE(command);
    PyObject *words = PyList_New(n);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!argv || !words) {
        free(argv);
        Py_XDECREF(words);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = PyList_GET_ITEM(command, i), *keep = NULL;
        const char *text = PyUnicode_Check(w) ? st_pytext_utf8(w, &keep) : NULL;
        argv[i] = (char *)(text ? text : "?");
        PyList_SET_ITEM(words, i, keep ? keep : Py_NewRef(Py_None));
    }
    PyErr_Clear();
    *hold = words;
    return argv;
}

/* begin(target_name, command): creates the session and its results folder. */
static PyObject *py_begin(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *target_bytes;
    PyObject *command;
    if (!PyArg_ParseTuple(args, "O&O!", PyUnicode_FSConverter, &target_bytes, &PyList_Type,
                          &command))
        return NULL;
    if (st_py.live && (!st_py.finalized || st_py.forked_child)) {
        Py_DECREF(target_bytes);
        Py_RETURN_FALSE;
    }
    if (ensure_settings() < 0 || (st_py.live && next_session() < 0)) {
        Py_DECREF(target_bytes);
        return NULL;
    }
    PyObject *words;
    char **argv = command_words(command, &words);
    if (!argv) {
        Py_DECREF(target_bytes);
        return NULL;
    }
    st_msg_t msg;
    int rc = begin_session(PyBytes_AS_STRING(target_bytes), (int)PyList_GET_SIZE(command), argv,
                           &msg);
    free(argv);
    Py_DECREF(words);
    Py_DECREF(target_bytes);
    if (rc < 0)
        return raise_msg(&msg);
    Py_RETURN_TRUE;
}

static void add_memory_metrics(int sampled, int walk_stacks)
{
    static const struct {
        const char *name, *unit, *desc;
        st_metric_kind_t kind;
    } defs[4] = {
        {"alloc_bytes", "bytes", "bytes allocated (asked of Python's allocators)",
         ST_METRIC_BYTES},
        {"allocations", "count", "allocations made (Python's allocators)", ST_METRIC_COUNT},
        {"peak_bytes", "bytes", "bytes held at the peak of the memory (sampled allocations)",
         ST_METRIC_BYTES},
        {"exit_bytes", "bytes", "bytes still held at the end (sampled allocations: leaks)",
         ST_METRIC_BYTES},
    };
    for (int i = 0; i < 4; i++)
        if (st_rec_add_metric(&st_py.session.rec, defs[i].name, defs[i].unit, defs[i].desc,
                              defs[i].kind, &mem_metrics[i]) < 0)
            return;
    for (int i = 0; i < 4; i++)
        st_py.session.mem_metrics[st_py.session.nmem_metrics++] = mem_metrics[i];
    st_pymem_sites(&st_py.session.rec, mem_metrics[0], mem_metrics[1]);
    st_pymem_sample(sampled, walk_stacks);
}

static void finalize_to(int flush_streams, FILE *to);

/* A program the run starts: one that is not followed is named in the tree's record
 * (when the run follows its children). When the process itself becomes a program
 * (exec), its Python run ends there: what it recorded is written first, as at its
 * end (its streams are not flushed: exec does not flush them). */
static void program_started(long pid, char *const *argv, size_t argc, const char *why)
{
    if (!st_py.live || st_py.finalized || st_py.forked_child)
        return;
    if (why)
        st_session_not_followed(&st_py.session, pid, argv, argc, why);
    if (pid == (long)getpid())
        finalize_to(0, NULL);
}

/* A child of this process (between its fork and exec) about to become a program
 * that is not followed: its own line in the tree's record. No allocation, no lock
 * (spawns.h): memory reads and system calls only. */
static void child_started(long pid, long parent, char *const *argv, size_t argc,
                          const char *why)
{
    if (st_py.live && !st_py.finalized && !st_py.forked_child)
        st_session_record_not_followed(st_py.session.tree, pid, parent, why, argv, argc);
}

/* Starts the session begun: its collectors, and what catches the ways the program
 * may end. 0, or < 0 with msg filled or a Python exception set. */
static int start_session(st_msg_t *msg)
{
    /* what starts programs, loaded before anything is profiled (spawns.h) */
    st_pyspawn_prepare();
    /* SIGTERM and os._exit are caught first: the sampler then knows strata's thread */
    st_py.session.helper_threads = st_pyexit_install();
    /* the stack sampler's thread: not one of the program's */
    st_py.session.helper_threads += st_settings_bool(&st_py.settings, ST_S_USE_SAMPLING);
    /* the memory-over-time thread (--memory) */
    st_py.session.helper_threads += st_py.memory != ST_PYMEM_OFF;
    st_py.tracing = st_py.session.tracing;
    /* Stack sampling alone, and sampled memory alone, are the cheap modes: the
     * profile hook stays off unless STRATA_PROFILE was set (file, environment,
     * program) to have both. */
    st_settings_t *set = &st_py.settings;
    if ((st_settings_bool(set, ST_S_USE_SAMPLING) || st_py.memory == ST_PYMEM_SAMPLE) &&
        set->v[ST_S_PROFILE].source == ST_SRC_DEFAULT)
        st_settings_set(set, ST_S_PROFILE, "OFF", ST_SRC_DEFAULT, msg);
    /* allocation sites and holdings (--memory heap or sample): what each call path
     * allocates, and what it holds at the peak and at the end; metrics registered
     * before any thread records. Without the profile, sampled allocations carry
     * their Python stacks instead (memory.c's stack mode). */
    st_py.session.memory_stacks =
        st_py.memory == ST_PYMEM_SAMPLE && !st_settings_bool(set, ST_S_PROFILE);
    if (st_pymem_counts_heap(st_py.memory))
        add_memory_metrics(st_py.memory == ST_PYMEM_SAMPLE, st_py.session.memory_stacks);
    /* the sampler first: it stops last, after the hook, and folds its samples then */
    int rc = st_session_add_collector(&st_py.session, &st_pysampler_collector);
    if (rc == 0)
        rc = st_session_add_collector(&st_py.session, &python_collector);
    if (rc == 0)
        rc = st_session_start(&st_py.session, msg);
    else
        st_msg_set(msg, rc, "too many collectors");
    if (rc < 0) {
        /* Nothing ran: no results are written (the session removed the folder). */
        st_py.finalized = 1;
        st_pyexit_finished();
    } else {
        /* without it, an exec loses the results */
        st_pyspawn_watch(program_started, child_started);
    }
    return rc;
}

static PyObject *py_start(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!st_py.live) {
        PyErr_SetString(st_py.error, "no session: call begin() first");
        return NULL;
    }
    st_msg_t msg;
    if (start_session(&msg) < 0)
        return PyErr_Occurred() ? NULL : raise_msg(&msg);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------- */
/* Child processes (STRATA_FOLLOW_CHILDREN)                                   */

/* What a child's interpreter finds in its environment: "<its parent's pid>:<the
 * STRATA_* variables strata put there, comma-separated>:<the top results folder>"
 * (strata-children.pth then starts strata._child, which hides them from the child's
 * os.environ). */
#define CHILD_VAR "_STRATA_CHILD_OF"
/* A followed child's settings: its parent's (the flags' come through the
 * environment, see export_to_children), into <top>/process-<pid>, the tables not
 * printed (the folder has them). 0, or < 0 with msg filled. */
static int child_settings(st_msg_t *msg)
{
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/process-%ld", st_py.top_dir, (long)getpid());
    int rc = st_settings_set(&st_py.settings, ST_S_OUTPUT_PATH, dir, ST_SRC_API, msg);
    if (rc == 0)
        rc = st_settings_set(&st_py.settings, ST_S_PRINT_TABLES, "OFF", ST_SRC_API, msg);
    return rc == 0 ? apply_settings(msg) : rc;
}

/* A followed child's session, begun with child_settings and added to the tree's
 * record. 0, or < 0 with msg filled. */
static int begin_child_session(int argc, char *const *argv, st_msg_t *msg)
{
    int rc = child_settings(msg);
    if (rc == 0)
        rc = begin_session("child", argc, argv, msg);
    if (rc == 0)
        st_session_follow(&st_py.session, st_py.top_dir, st_py.parent_pid);
    return rc;
}

/* The settings this run took from strata python's flags go into the process's
 * environment as STRATA_* variables (those of the environment and the config file
 * reach a child as they reached this process), with CHILD_VAR. The C environment:
 * child processes inherit it, os.environ does not show it to the program. */
static void export_to_children(void)
{
    st_strbuf_t b, names;
    st_strbuf_init(&b);
    st_strbuf_init(&names);
    for (int id = 0; id < ST_NSETTINGS; id++) {
        if (st_py.settings.v[id].source != ST_SRC_FLAG || id == ST_S_OUTPUT_PATH ||
            id == ST_S_CONFIG_FILE || id == ST_S_SETUP)
            continue;
        const char *env = st_setting_def((st_setting_id_t)id)->env;
        st_strbuf_reset(&b);
        st_settings_format(&st_py.settings, (st_setting_id_t)id, &b);
        if (setenv(env, st_strbuf_cstr(&b), 1) == 0)
            st_strbuf_printf(&names, "%s%s", names.len ? "," : "", env);
    }
    st_strbuf_reset(&b);
    st_strbuf_printf(&b, "%ld:%s:%s", (long)getpid(), st_strbuf_cstr(&names), st_py.top_dir);
    setenv(CHILD_VAR, st_strbuf_cstr(&b), 1);
    st_strbuf_free(&names);
    st_strbuf_free(&b);
}

/* follow_children() -> bool: this run's child processes are followed (when
 * STRATA_FOLLOW_CHILDREN is on): called by strata python's runner once the session
 * has begun, and by a followed child's start (strata._child). */
static PyObject *py_follow_children(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!st_py.live || st_py.finalized || !st_settings_bool(&st_py.settings, ST_S_FOLLOW_CHILDREN))
        Py_RETURN_FALSE;
    if (!st_py.top_dir[0])
        snprintf(st_py.top_dir, sizeof st_py.top_dir, "%s", st_py.session.outdir);
    if (!*st_py.session.tree)
        st_session_follow(&st_py.session, st_py.top_dir, st_py.parent_pid);
    export_to_children();
    Py_RETURN_TRUE;
}

/* begin_child(parent_pid, top_folder, command) -> bool: a child process's
 * interpreter, started by a followed run, begins its session (strata._child). */
static PyObject *py_begin_child(PyObject *self, PyObject *args)
{
    (void)self;
    long parent;
    const char *top;
    PyObject *command;
    if (!PyArg_ParseTuple(args, "lsO!", &parent, &top, &PyList_Type, &command))
        return NULL;
    if (st_py.live)
        Py_RETURN_FALSE;
    if (ensure_settings() < 0)
        return NULL;
    st_py.parent_pid = parent;
    snprintf(st_py.top_dir, sizeof st_py.top_dir, "%s", top);
    st_msg_t msg;
    PyObject *words;
    char **argv = command_words(command, &words);
    if (!argv)
        return NULL;
    int rc = begin_child_session((int)PyList_GET_SIZE(command), argv, &msg);
    free(argv);
    Py_DECREF(words);
    if (rc < 0)
        return raise_msg(&msg);
    Py_RETURN_TRUE;
}

/* In a forked child of a followed run (os.register_at_fork's after_in_child, the
 * GIL held, no other thread): the parent's session is left as the fork copied it
 * (its threads are not here; its memory is never touched again, so never copied)
 * and the child gets its own, with the parent's settings but memory profiling and
 * the GPU, which are the parent's, into <top>/process-<pid>. 0, or -1 with the
 * child's run left unprofiled. */
static int fork_session(void)
{
    int argc = (int)st_py.session.ncommand;
    char **argv = st_py.session.command; /* the parent's copy, still there */
    st_pybackend_stop();
    st_pysampler_after_fork_child();
    st_pyexit_after_fork_child();
    forget_session();
    memset(&st_py.session, 0, sizeof st_py.session);
    st_py.parent_pid = (long)getppid();
    st_msg_t msg;
    int rc = st_settings_set(&st_py.settings, ST_S_MEMORY, "off", ST_SRC_API, &msg);
    if (rc == 0)
        rc = st_settings_set(&st_py.settings, ST_S_USE_CUPTI, "OFF", ST_SRC_API, &msg);
    if (rc == 0)
        rc = begin_child_session(argc, argv, &msg);
    if (rc == 0)
        rc = start_session(&msg);
    if (rc < 0) {
        PyErr_Clear();
        fprintf(stderr, "strata: warning: the forked child %ld is not profiled: %s\n",
                (long)getpid(), msg.text);
        return -1;
    }
    export_to_children();
    return 0;
}

void st_py_finalize(int flush_streams)
{
    finalize_to(flush_streams, NULL);
}

/* st_py_finalize, with the tables and notes written to `to` when it is not NULL
 * (else to the terminal kept at the start). */
static void finalize_to(int flush_streams, FILE *to)
{
    if (!st_py.live || st_py.finalized || st_py.forked_child)
        return;
    st_py.finalized = 1;
    st_pyexit_writing();
    st_session_stop(&st_py.session);
    if (flush_streams) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *out = PySys_GetObject("stdout"), *err = PySys_GetObject("stderr");
        PyObject *r;
        if (out && (r = PyObject_CallMethod(out, "flush", NULL)))
            Py_DECREF(r);
        if (err && (r = PyObject_CallMethod(err, "flush", NULL)))
            Py_DECREF(r);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    /* The terminal strata kept, not whatever the program made fd 2 since; warnings
     * about lost data go there whether or not the tables are printed. A followed
     * child's stderr is its parent's to read: its notes go into its folder. */
    char child_notes[PATH_MAX + 16] = "";
    if (!to && st_py.parent_pid) {
        snprintf(child_notes, sizeof child_notes, "%s/notes.txt", st_py.session.outdir);
        to = fopen(child_notes, "w");
    }
    FILE *notes = to ? to : st_py.parent_pid ? NULL : st_pyexit_terminal();
    FILE *tables = st_settings_bool(&st_py.settings, ST_S_PRINT_TABLES) ? notes : NULL;
    st_msg_t msg;
    /* the session keeps the settings as they ended (the program may change them) */
    st_session_finish(&st_py.session, &st_py.settings, tables, notes, &msg);
    if (notes) {
        st_pybackend_report(notes);
        st_pylines_report(notes);
        st_pymem_report(notes);
        if (st_py.session.nmem_metrics && tables)
            fprintf(tables, "[strata] memory held (from %llu sampled allocations): %.1f MiB at "
                            "the peak, %.1f MiB at the end; by call path in peak_bytes.txt and "
                            "exit_bytes.txt%s\n",
                    (unsigned long long)holdings.samples, (double)holdings.peak_bytes / 1048576.0,
                    (double)holdings.exit_bytes / 1048576.0,
                    holdings.lost ? " (some samples lost: no memory)" : "");
        fflush(notes);
    }
    if (*child_notes && to) {
        int empty = ftell(to) == 0;
        fclose(to);
        if (empty)
            unlink(child_notes);
    }
    st_pyexit_finished();
}

/* finalize(capture=False): with capture, what would go to the terminal (the tables
 * and notes) is returned as a str instead (IPython's %strata shows it in the
 * notebook, whose terminal is the kernel's log). */
static PyObject *py_finalize(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"capture", NULL};
    int capture = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:finalize", kwlist, &capture))
        return NULL;
    if (!capture) {
        st_py_finalize(1);
        Py_RETURN_NONE;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return PyErr_NoMemory();
    finalize_to(1, out);
    fclose(out);
    PyObject *r = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    free(text);
    return r;
}

/* The calling thread's frame chain, recursion depth and frames' memory, hidden
 * while the target runs (run_main). */
typedef struct {
    struct _PyInterpreterFrame *frame;
    int py_depth;
    int c_remaining;
    _PyStackChunk *chunk;
    PyObject **top, **limit;
} hidden_t;

/* Makes the calling thread look as it does when the interpreter starts a __main__:
 * no Python frame below, no recursion depth used, and the frames' memory (the
 * thread's data stack, in chunks of 16 KiB) empty, so that the target's frames lie
 * where they lie under plain python. Below them the runner's would move them by a
 * few hundred bytes, and where a program's calls go up and down across the end of
 * a chunk, the interpreter maps and unmaps a chunk each time: the pytest suite of
 * the bench crossed it 140 times a run more than under plain python (a system call
 * each way, its pages faulted in again), about 1 % of its CPU time. The thread then
 * starts a chain of chunks of its own, as a new thread does (greenlet switches the
 * same way): the interpreter never frees its first one, unhide_caller does. */
static void hide_caller(PyThreadState *t, hidden_t *h)
{
    h->chunk = t->datastack_chunk;
    h->top = t->datastack_top;
    h->limit = t->datastack_limit;
    t->datastack_chunk = NULL;
    t->datastack_top = NULL;
    t->datastack_limit = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    h->frame = t->current_frame;
    t->current_frame = NULL;
#else
    h->frame = t->cframe->current_frame;
    t->cframe->current_frame = NULL;
#endif
#if PY_VERSION_HEX >= 0x030F0000
    /* 3.15's chain ends at the thread state's sentinel base frame, which
     * profilers reading the chain from outside look for: the target's frames
     * hang from it as the first __main__'s do */
    t->current_frame = st_pyframes_bottom(h->frame);
#endif
#if PY_VERSION_HEX >= 0x030C0000
    h->py_depth = t->py_recursion_limit - t->py_recursion_remaining;
    t->py_recursion_remaining = t->py_recursion_limit;
#if PY_VERSION_HEX >= 0x030E0000
    h->c_remaining = 0; /* 3.14 guards C recursion by the stack pointer: no count */
#else
    h->c_remaining = t->c_recursion_remaining;
#if defined(Py_C_RECURSION_LIMIT)
    t->c_recursion_remaining = Py_C_RECURSION_LIMIT;
#elif defined(C_RECURSION_LIMIT)
    t->c_recursion_remaining = C_RECURSION_LIMIT;
#endif
#endif
#else
    h->py_depth = t->recursion_limit - t->recursion_remaining;
    t->recursion_remaining = t->recursion_limit;
    h->c_remaining = 0;
#endif
}

/* Puts back what hide_caller hid (the program may have changed the limit since).
 * The target's frames have all returned: what is left of its chunks is the first
 * one, which the interpreter allocated with the arena allocator (obmalloc's
 * _PyObject_VirtualAlloc) and frees the same way. */
static void unhide_caller(PyThreadState *t, const hidden_t *h)
{
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    for (_PyStackChunk *c = t->datastack_chunk, *prev; c; c = prev) {
        prev = c->previous;
        arena.free(arena.ctx, c, c->size);
    }
    t->datastack_chunk = h->chunk;
    t->datastack_top = h->top;
    t->datastack_limit = h->limit;
#if PY_VERSION_HEX >= 0x030D0000
    t->current_frame = h->frame;
#else
    t->cframe->current_frame = h->frame;
#endif
#if PY_VERSION_HEX >= 0x030C0000
    t->py_recursion_remaining = t->py_recursion_limit - h->py_depth;
#if PY_VERSION_HEX < 0x030E0000
    t->c_recursion_remaining = h->c_remaining;
#endif
#else
    t->recursion_remaining = t->recursion_limit - h->py_depth;
#endif
}

/* run_main(code, globals) or run_main(fn, arg): runs the target as the interpreter
 * runs a __main__ (PyEval_EvalCode, or runpy._run_module_as_main(arg) for -m), with
 * the runner's frames cut off the thread's frame chain for the call: tracebacks,
 * sys._getframe, inspect and faulthandler see what they see under plain python, and
 * the recursion limit counts from the same depth. */
static PyObject *py_run_main(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *what, *arg;
    if (!PyArg_ParseTuple(args, "OO", &what, &arg))
        return NULL;
    PyThreadState *t = PyThreadState_Get();
    hidden_t h;
    hide_caller(t, &h);
    PyObject *r = PyCode_Check(what) ? PyEval_EvalCode(what, arg, arg)
                                     : PyObject_CallOneArg(what, arg);
    unhide_caller(t, &h);
    return r;
}

/* compile_source(source, filename): the script's code, as compile(source, filename,
 * "exec") makes it from bytes (the coding cookie read, the interpreter's -O), less
 * what the builtin does first: asking whether the source is an AST object, which
 * makes the ast module's hundred-odd classes (about 1 ms of every run, which plain
 * python does not spend on a script). Its errors are the builtin's (the same call,
 * the same flags); a NUL byte, which would cut the source short here, the runner
 * finds first and reports as python does for a file. */
static PyObject *py_compile_source(PyObject *self, PyObject *args)
{
    (void)self;
    const char *src;
    Py_ssize_t n;
    PyObject *filename;
    if (!PyArg_ParseTuple(args, "y#U", &src, &n, &filename))
        return NULL;
    if (strlen(src) != (size_t)n) {
        PyErr_SetString(PyExc_ValueError, "source code string cannot contain null bytes");
        return NULL;
    }
    PyCompilerFlags cf = {.cf_flags = PyCF_SOURCE_IS_UTF8, .cf_feature_version = PY_MINOR_VERSION};
    return Py_CompileStringObject(src, filename, Py_file_input, &cf, -1);
}

static PyObject *py_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (st_py.live && !st_py.forked_child) {
        if (*st_py.session.tree && !st_py.finalized && fork_session() == 0) /* followed */
            Py_RETURN_NONE;
        st_py.forked_child = 1;
        st_pybackend_stop();
        st_pyexit_after_fork_child();
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
    if (ci && bit == MARK_PROFILE && st_py.lines)
        ci->lines = st_pylines_choose(ci, (PyCodeObject *)code) == 0;
    Py_DECREF(code);
    if (!ci)
        return PyErr_NoMemory();
    ci->marks |= bit;
    code_hot_update(ci, (PyCodeObject *)code);
    if (ci->disabled && st_py.running)
        st_pybackend_refresh(); /* its events were switched off as unmarked */
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
    st_pythread_t *ts = st_pybackend_current();
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
    st_pythread_t *ts = st_pybackend_current();
    if (ts && ts->scope_depth > 0) {
        ts->scope_depth--;
        update_blocked(ts);
    }
    Py_RETURN_NONE;
}

/* region_enter(name, key) -> bool: opens region `name` (a call of its own in the
 * tree, labelled by the name) on the calling thread, closed by region_exit(key)
 * with the same key; False when the thread records nothing now. */
static PyObject *py_region_enter(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *name, *key;
    if (!PyArg_ParseTuple(args, "UO", &name, &key))
        return NULL;
    st_pythread_t *ts = st_py.live ? st_pybackend_current() : NULL;
    st_rec_thread_t *th = ts && !ts->suppress && !ts->blocked ? thread_rec(ts) : NULL;
    if (!th)
        Py_RETURN_FALSE;
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(name, &n);
    uint32_t label;
    if (!text || st_intern_id(&st_py.session.labels, text, (size_t)n, &label) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    st_rec_enter_t(th, label, key, st_py.tracing);
    Py_RETURN_TRUE;
}

/* MPI calls from the program (mpi4py) under strata python: libstrata-mpi-*.so,
 * preloaded by the command under an MPI launcher (native/mpi.h), calls these
 * through the hooks registered at begin(), from any thread, with or without the
 * GIL: each call a node under the Python function that made it, with its bytes. */
static uint32_t mpi_bytes = ST_METRIC_NONE;

static int mpi_enter(const char *name, uint64_t bytes)
{
    /* mpi4py calls MPI without the GIL: the thread's recorder state is found through
     * its thread-local pointer alone (a thread that ran no profiled Python has none) */
    st_rec_thread_t *th =
        st_py.live && !st_py.finalized ? st_rec_self_sig(&st_py.session.rec) : NULL;
    if (!th)
        return 0;
    /* the wrappers' names are constants: interned once each, known by address */
    static __thread struct {
        const char *name;
        uint32_t label;
    } cache[16];
    uint32_t h = (uint32_t)((uintptr_t)name >> 3) & 15, label;
    if (cache[h].name == name) {
        label = cache[h].label;
    } else {
        if (st_intern_id(&st_py.session.labels, name, strlen(name), &label) < 0)
            return 0;
        cache[h].name = name;
        cache[h].label = label;
    }
    st_rec_enter_t(th, label, name, st_py.tracing);
    if (bytes && mpi_bytes != ST_METRIC_NONE)
        st_rec_add_top(th, mpi_bytes, bytes);
    return 1;
}

static void mpi_exit(const char *name)
{
    /* none once the results are written (MPI_Finalize's gather writes them) */
    st_rec_thread_t *th =
        st_py.live && !st_py.finalized ? st_rec_self_sig(&st_py.session.rec) : NULL;
    if (th)
        st_rec_exit_key_t(th, name, st_py.tracing);
}

static void mpi_rank(int rank, int size)
{
    if (st_py.live && !st_py.finalized && rank >= 0 && size > 1)
        st_session_set_rank(&st_py.session, (uint32_t)rank);
}

/* STRATA_MPI_GATHER (native/mpi.h): the results written at MPI_Finalize, when the
 * program calls it before strata's atexit handler has (mpi4py's own finalization
 * comes after the interpreter's, when they are written already). */
static const char *mpi_finish(int write)
{
    if (!st_py.live || st_py.forked_child || !st_settings_bool(&st_py.settings, ST_S_MPI_GATHER))
        return NULL;
    if (!write)
        return "";
    if (!st_py.finalized && Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        st_py_finalize(1);
        PyGILState_Release(gil);
    }
    return st_py.finalized ? st_py.session.outdir : NULL;
}

typedef void (*mpi_hooks_fn)(int (*)(const char *, uint64_t), void (*)(const char *),
                             void (*)(int, int), const char *(*)(int));

/* Registers the hooks with the MPI wrappers when they are loaded, and the metric
 * of the calls' bytes (before any thread records). */
static void mpi_hook(void)
{
    mpi_hooks_fn set = (mpi_hooks_fn)dlsym(RTLD_DEFAULT, "strata_mpi_hooks");
    if (!set || st_rec_add_metric(&st_py.session.rec, "mpi_bytes", "bytes",
                                  "bytes passed to MPI calls", ST_METRIC_BYTES, &mpi_bytes) < 0)
        return;
    st_py.session.mpi_bytes = mpi_bytes;
    set(mpi_enter, mpi_exit, mpi_rank, mpi_finish);
}

/* region_exit(key): closes the region region_enter opened with key. */
static PyObject *py_region_exit(PyObject *self, PyObject *key)
{
    (void)self;
    st_pythread_t *ts = st_py.live ? st_pybackend_current() : NULL;
    if (ts && ts->th)
        st_rec_exit_key_t(ts->th, key, st_py.tracing);
    Py_RETURN_NONE;
}

static PyObject *py_set_internal_dir(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s)
        return NULL;
    snprintf(st_py.internal_dir, sizeof st_py.internal_dir, "%s/", s);
    st_py.internal_len = strlen(st_py.internal_dir);
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
    const st_value_t *v = &st_py.settings.v[id];
    switch (d->type) {
    case ST_TYPE_BOOL:
        return PyBool_FromLong((long)v->i);
    case ST_TYPE_INT:
    case ST_TYPE_SIZE:
        return PyLong_FromLongLong((long long)v->i);
    case ST_TYPE_FLOAT:
        return PyFloat_FromDouble(v->f);
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
    if (st_settings_copy(&backup, &st_py.settings) < 0)
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
            rc = st_settings_set_list(&st_py.settings, (st_setting_id_t)id, items, (size_t)n,
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
        rc = s ? st_settings_set(&st_py.settings, (st_setting_id_t)id, s, ST_SRC_API, &msg) : -1;
        Py_DECREF(text);
        if (!s) {
            st_settings_free(&backup);
            return NULL;
        }
    }
    if (rc == 0)
        rc = apply_settings(&msg);
    if (rc < 0) {
        st_settings_free(&st_py.settings);
        st_py.settings = backup;
        st_msg_t ignored;
        apply_settings(&ignored);
        PyErr_SetString(PyExc_ValueError, msg.text);
        return NULL;
    }
    st_settings_free(&backup);
    if (st_py.running) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(st_py.threads); i++)
            update_blocked((st_pythread_t *)PyList_GET_ITEM(st_py.threads, i));
        st_pybackend_refresh();
    }
    Py_RETURN_NONE;
}

static PyObject *py_state(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("{s:O,s:O,s:O,s:s,s:s}", "live", st_py.live ? Py_True : Py_False,
                         "running", st_py.running ? Py_True : Py_False, "finalized",
                         st_py.finalized ? Py_True : Py_False, "outdir",
                         st_py.live ? st_py.session.outdir : "", "backend",
                         PY_VERSION_HEX >= 0x030C0000 ? "sys.monitoring" : "profile hook");
}

/* For tests: how many events of skipped code the calling thread has seen (on
 * 3.12+ they stop once such code's events are switched off). */
static PyObject *py_skipped_events(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    st_pythread_t *ts = st_py.running ? st_pybackend_current() : NULL;
    return PyLong_FromUnsignedLongLong(ts ? ts->skipped_events : 0);
}

/* For tests: the calling thread's Python frames as the signal-safe walker sees
 * them, [(code, instruction index), ...] innermost first; _strata.Error with the
 * load check's reason when the walker is off. */
static PyObject *py_pyframes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    const char *why;
    if (st_pyframes_check(&why) < 0) {
        PyErr_SetString(st_py.error, why);
        return NULL;
    }
    st_pyframe_t fr[256];
    int n = st_pyframes_walk(PyThreadState_Get(), fr, 256);
    if (n < 0) {
        PyErr_SetString(st_py.error, "the frame walk failed a check");
        return NULL;
    }
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(Oi)", (PyObject *)fr[i].code, (int)fr[i].idx);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* For tests: _pycode_check(address) -> (header, whole), how the sampler judges the
 * memory at an address it found in a frame (frames.h). */
static PyObject *py_pycode_check(PyObject *self, PyObject *arg)
{
    (void)self;
    uintptr_t at = (uintptr_t)PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    const char *why;
    if (st_pyframes_check(&why) < 0) {
        PyErr_SetString(st_py.error, why);
        return NULL;
    }
    return Py_BuildValue("(ii)", st_pyframes_is_code((const void *)at),
                         st_pyframes_is_whole_code((const void *)at));
}

/* For tests: _datastack() -> (bytes, first): where the calling thread's next frame
 * would go, as bytes from the start of its chunk, and whether that chunk is the
 * first of the thread's chain (run_main puts the target's frames where plain python
 * puts them). */
static PyObject *py_datastack(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyThreadState *t = PyThreadState_Get();
    _PyStackChunk *c = t->datastack_chunk;
    if (!c)
        return Py_BuildValue("(ni)", (Py_ssize_t)0, 1);
    return Py_BuildValue("(ni)", (Py_ssize_t)((char *)t->datastack_top - (char *)c),
                         c->previous == NULL);
}

/* For tests: SIGPROF walks (the walker in a real handler, interrupting anything). */
static __thread const void *sigtest_ts __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t sigtest_ok, sigtest_bad;

static void sigtest_handler(int sig)
{
    (void)sig;
    int saved = errno;
    st_pyframe_t fr[64];
    if (sigtest_ts) {
        if (st_pyframes_walk(sigtest_ts, fr, 64) > 0)
            atomic_fetch_add(&sigtest_ok, 1);
        else
            atomic_fetch_add(&sigtest_bad, 1);
    }
    errno = saved;
}

/* _pyframes_sigtest(us): every `us` microseconds of process CPU time, SIGPROF
 * walks the calling thread's frames; 0 stops. Returns (walks, failed walks). */
static PyObject *py_pyframes_sigtest(PyObject *self, PyObject *arg)
{
    (void)self;
    long us = PyLong_AsLong(arg);
    if (us < 0 && PyErr_Occurred())
        return NULL;
    const char *why;
    if (us > 0 && st_pyframes_check(&why) < 0) {
        PyErr_SetString(st_py.error, why);
        return NULL;
    }
    struct itimerval it = {{0, us}, {0, us}};
    if (us > 0) {
        atomic_store(&sigtest_ok, 0);
        atomic_store(&sigtest_bad, 0);
        sigtest_ts = PyThreadState_Get();
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = sigtest_handler;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGPROF, &sa, NULL);
    }
    setitimer(ITIMER_PROF, &it, NULL);
    if (us == 0) {
        signal(SIGPROF, SIG_IGN);
        sigtest_ts = NULL;
    }
    return Py_BuildValue("(KK)", (unsigned long long)atomic_load(&sigtest_ok),
                         (unsigned long long)atomic_load(&sigtest_bad));
}

static PyMethodDef methods[] = {
    {"parse_cli", (PyCFunction)(void (*)(void))py_parse_cli, METH_VARARGS | METH_KEYWORDS,
     "parse_cli(argv, statement=False) -> dict or None: parse `strata python` options (None "
     "after --help); statement: IPython's %strata words, whose target is a statement."},
    {"begin", py_begin, METH_VARARGS,
     "begin(target, command) -> bool: create the session and its results folder."},
    {"start", py_start, METH_NOARGS, "start(): install the profile hook on every thread."},
    {"finalize", (PyCFunction)(void (*)(void))py_finalize, METH_VARARGS | METH_KEYWORDS,
     "finalize(capture=False): stop, write and print the results (capture: return what "
     "would be printed)."},
    {"run_main", py_run_main, METH_VARARGS,
     "run_main(code, globals) or run_main(fn, arg): run the target as a __main__."},
    {"compile_source", py_compile_source, METH_VARARGS,
     "compile_source(source, filename) -> code: compile(source, filename, 'exec') for a "
     "script's bytes, without the ast module's types."},
    {"after_fork_child", py_after_fork_child, METH_NOARGS,
     "after_fork_child(): stop profiling in a forked child."},
    {"mark_profile", py_mark_profile, METH_O, "mark_profile(fn): calls of fn open a -b scope."},
    {"mark_noprofile", py_mark_noprofile, METH_O,
     "mark_noprofile(fn): calls of fn and what they call are not recorded."},
    {"scope_enter", py_scope_enter, METH_NOARGS, "scope_enter(): open a `with profile:` block."},
    {"scope_exit", py_scope_exit, METH_NOARGS, "scope_exit(): close a `with profile:` block."},
    {"region_enter", py_region_enter, METH_VARARGS,
     "region_enter(name, key) -> bool: open a region on this thread."},
    {"region_exit", py_region_exit, METH_O, "region_exit(key): close the region of key."},
    {"set_internal_dir", py_set_internal_dir, METH_O,
     "set_internal_dir(path): code under path is strata's own."},
    {"get", py_get, METH_O, "get(name): a setting's value."},
    {"set", py_set, METH_VARARGS, "set(name, value): change a setting (ValueError if bad)."},
    {"follow_children", py_follow_children, METH_NOARGS,
     "follow_children() -> bool: follow this run's child processes (STRATA_FOLLOW_CHILDREN)."},
    {"begin_child", py_begin_child, METH_VARARGS,
     "begin_child(parent_pid, top_folder, command) -> bool: a followed child's session."},
    {"state", py_state, METH_NOARGS, "state() -> dict: live, running, finalized, outdir, backend."},
    {"_pyframes", py_pyframes, METH_NOARGS,
     "_pyframes() -> [(code, index)]: this thread's frames as the sampler walks them (tests)."},
    {"_pycode_check", py_pycode_check, METH_O,
     "_pycode_check(address) -> (header, whole): the sampler's judgement of a code object's "
     "memory (tests)."},
    {"_datastack", py_datastack, METH_NOARGS,
     "_datastack() -> (bytes, first): where this thread's next frame goes in its chunk (tests)."},
    {"_pyframes_sigtest", py_pyframes_sigtest, METH_O,
     "_pyframes_sigtest(us) -> (walks, failed): SIGPROF frame walks on this thread (tests)."},
    {"_skipped_events", py_skipped_events, METH_NOARGS,
     "_skipped_events() -> int: events of left-out code seen on this thread (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_strata", "strata's CPython collector (internal).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__strata(void)
{
    if (PyType_Ready(&st_pythread_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    st_py.extra_index = request_extra_index(free);
    st_py.hot_index = request_extra_index(NULL);
    if (st_py.extra_index < 0 || st_py.hot_index < 0) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot");
        return NULL;
    }
    st_py.main_ident = PyThread_get_thread_ident();
    st_py.threads = PyList_New(0);
    st_py.error = PyErr_NewException("_strata.Error", NULL, NULL);
    if (!st_py.threads || !st_py.error || PyModule_AddObjectRef(m, "Error", st_py.error) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddStringConstant(m, "__version__", STRATA_VERSION);
    return m;
}
