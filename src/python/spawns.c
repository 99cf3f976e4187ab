/* The programs a followed run starts that strata does not follow (see spawns.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/spawns.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHILD_VAR "_STRATA_CHILD_OF"

static st_pyspawn_fn started_cb;
static int hooked;
/* The arguments of this thread's last subprocess.Popen event (a reference): where
 * Popen starts the program by os.posix_spawn (3.13+, often), that event comes
 * next with the same list, and is the same start. */
static _Thread_local PyObject *popen_args;
static char own_exe[PATH_MAX]; /* this process's interpreter, resolved; "" if unknown */

/* A str or bytes as a C string (malloc'd), NULL for anything else: a path object
 * would need its Python __fspath__, which would show in the profile. */
static char *word(PyObject *o)
{
    if (PyBytes_Check(o))
        return strdup(PyBytes_AS_STRING(o));
    if (!PyUnicode_Check(o))
        return NULL;
    PyObject *b = PyUnicode_EncodeFSDefault(o);
    char *w = b ? strdup(PyBytes_AS_STRING(b)) : NULL;
    Py_XDECREF(b);
    PyErr_Clear();
    return w;
}

/* `dir`/`name` into out when it is a file this process may execute. */
static int executable_at(const char *dir, size_t dirlen, const char *name, char *out, size_t cap)
{
    struct stat st;
    int n = dirlen ? snprintf(out, cap, "%.*s/%s", (int)dirlen, dir, name)
                   : snprintf(out, cap, "%s", name);
    return n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
           access(out, X_OK) == 0;
}

/* The file the kernel will run for `prog`: a path (relative to `cwd` when the start
 * changes to it), else the first executable of that name on `path` (a colon list,
 * "" the current folder). 1 with out filled, 0 when there is none. */
static int find_program(const char *prog, const char *cwd, const char *path, char *out, size_t cap)
{
    if (strchr(prog, '/'))
        return prog[0] != '/' && cwd ? executable_at(cwd, strlen(cwd), prog, out, cap)
                                     : executable_at("", 0, prog, out, cap);
    for (const char *p = path ? path : "/usr/bin:/bin";;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len ? executable_at(p, len, prog, out, cap) : executable_at(".", 1, prog, out, cap))
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

/* python, python3, python3.14, python3.14t, python3.13d ... */
static int python_name(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (strncmp(base, "python", 6) != 0)
        return 0;
    return base[6 + strspn(base + 6, "0123456789.tdm")] == '\0';
}

/* Whether the file `exe` is a Python interpreter, by its name or its own one's,
 * or runs in one (a `#!` line naming one, directly or through env). */
static int runs_python(const char *exe, const char *path, int depth)
{
    char real[PATH_MAX];
    if (python_name(exe) || (realpath(exe, real) && (python_name(real) ||
                                                     (own_exe[0] && strcmp(real, own_exe) == 0))))
        return 1;
    char head[256];
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, head, sizeof head - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 2 || head[0] != '#' || head[1] != '!' || depth > 0)
        return 0;
    head[n] = '\0';
    char *save, *line = strtok_r(head + 2, "\n", &save);
    char *interp = line ? strtok_r(line, " \t", &save) : NULL;
    if (!interp)
        return 0;
    const char *base = strrchr(interp, '/');
    if (strcmp(base ? base + 1 : interp, "env") != 0)
        return runs_python(interp, path, depth + 1);
    char *arg;
    while ((arg = strtok_r(NULL, " \t", &save)) && arg[0] == '-') /* env -S ... */
        ;
    char found[PATH_MAX];
    return arg && (python_name(arg) ||
                   (find_program(arg, NULL, path, found, sizeof found) &&
                    runs_python(found, path, depth + 1)));
}

/* Whether a start's environment is one that carries strata's variable: None (the
 * process's own, the C environment) or a dict that has it. Any other mapping
 * (os.environ, whose copy of the environment never shows it) does not. */
static int env_follows(PyObject *env)
{
    if (env == Py_None)
        return 1;
    if (!PyDict_Check(env))
        return 0;
    PyObject *s = PyUnicode_FromString(CHILD_VAR), *b = PyBytes_FromString(CHILD_VAR);
    int has = (s && PyDict_GetItemWithError(env, s)) || (b && PyDict_GetItemWithError(env, b));
    Py_XDECREF(s);
    Py_XDECREF(b);
    PyErr_Clear();
    return has;
}

/* The PATH a start searches: the dict env's, else this process's. The string is
 * the dict's (borrowed) or the environment's. */
static const char *path_of(PyObject *env)
{
    if (env && PyDict_Check(env)) {
        PyObject *p = PyDict_GetItemString(env, "PATH");
        if (p && PyUnicode_Check(p))
            return PyUnicode_AsUTF8(p);
        if (p && PyBytes_Check(p))
            return PyBytes_AS_STRING(p);
        PyErr_Clear();
    }
    return getenv("PATH");
}

/* Tells of the start of `prog` with arguments `args` (a list or tuple) when it is
 * not followed, or it is an exec (pid: this process's). */
static void judge(long pid, PyObject *prog, PyObject *args, PyObject *cwd, PyObject *env)
{
    char *p = word(prog), *dir = cwd && cwd != Py_None ? word(cwd) : NULL;
    char exe[PATH_MAX];
    const char *path = path_of(env);
    const char *why = NULL;
    int found = p && find_program(p, dir, path, exe, sizeof exe);
    if (found)
        why = !runs_python(exe, path, 0) ? "not Python"
              : !env_follows(env)        ? "an environment without strata's variable"
                                         : NULL;
    free(p);
    free(dir);
    if (!found || (!why && !pid))
        return; /* never starts, or follows itself (an exec is told either way) */
    PyObject *seq = PySequence_Fast(args, "");
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    for (Py_ssize_t i = 0; argv && i < n; i++) {
        PyObject *a = PySequence_Fast_GET_ITEM(seq, i);
        argv[i] = word(a);
        if (!argv[i]) /* a path object: its type, not its text (see word) */
            argv[i] = strdup(Py_TYPE(a)->tp_name);
    }
    Py_XDECREF(seq);
    PyErr_Clear();
    if (argv)
        started_cb(pid, argv, (size_t)n, why);
    for (Py_ssize_t i = 0; argv && i < n; i++)
        free(argv[i]);
    free(argv);
}

static int hook(const char *event, PyObject *args, void *unused)
{
    (void)unused;
    /* "subprocess." or "os.", before any strcmp: CPython 3.13 raises an event each
     * time a traceback's tb_frame is read ("object.__getattr__"), 62,000 times in
     * its test_json */
    int os = event[0] == 'o' && event[1] == 's' && event[2] == '.';
    if (!started_cb || !(os || (event[0] == 's' && event[1] == 'u')) || !PyTuple_Check(args))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (strcmp(event, "subprocess.Popen") == 0 && n == 4) {
        Py_XSETREF(popen_args, Py_NewRef(PyTuple_GET_ITEM(args, 1)));
        judge(0, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1), PyTuple_GET_ITEM(args, 2),
              PyTuple_GET_ITEM(args, 3));
    } else if (strcmp(event, "os.posix_spawn") == 0 && n == 3) {
        int popen = PyTuple_GET_ITEM(args, 1) == popen_args;
        Py_CLEAR(popen_args);
        if (!popen)
            judge(0, PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1), NULL,
                  PyTuple_GET_ITEM(args, 2));
    }
    else if (strcmp(event, "os.exec") == 0 && n == 3)
        judge((long)getpid(), PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1), NULL,
              PyTuple_GET_ITEM(args, 2));
    else if (strcmp(event, "os.system") == 0 && n == 1) {
        PyObject *sh = PyUnicode_FromString("/bin/sh");
        PyObject *argv = sh ? Py_BuildValue("(OsO)", sh, "-c", PyTuple_GET_ITEM(args, 0)) : NULL;
        if (argv)
            judge(0, sh, argv, NULL, Py_None);
        Py_XDECREF(argv);
        Py_XDECREF(sh);
        PyErr_Clear();
    }
    return 0;
}

int st_pyspawn_watch(st_pyspawn_fn started)
{
    started_cb = started;
    if (!started || hooked)
        return 0;
    PyObject *exe = PySys_GetObject("executable"); /* borrowed */
    char *e = exe ? word(exe) : NULL;
    if (!e || !realpath(e, own_exe))
        own_exe[0] = '\0';
    free(e);
    if (PySys_AddAuditHook(hook, NULL) < 0) {
        PyErr_Clear();
        started_cb = NULL;
        return -1;
    }
    hooked = 1;
    return 0;
}
