/* The programs a run starts that strata does not follow, and its exec (see spawns.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/spawns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/gotpatch.h"

#define CHILD_VAR "_STRATA_CHILD_OF"
#define DEFAULT_PATH "/usr/bin:/bin"

extern char **environ;

static struct {
    st_pyspawn_fn started;    /* NULL: not watching */
    st_pyspawn_child_fn child;
    long pid;                 /* the watched process */
    struct stat own;          /* this process's interpreter (st_ino 0: unknown) */
} sw;

/* ------------------------------------------------------------------------- */
/* Judging a start: system calls and buffers on the stack only (a child of vfork) */

/* The value of `name` in the environment env (NULL-terminated), or NULL. */
static const char *env_get(char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
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

/* The file the kernel will run for `prog`: a path when it has a slash or the start
 * does not search, else the first executable of that name on `path` (a colon list,
 * "" the current folder). 1 with out filled, 0 when there is none. */
static int find_program(const char *prog, int search, const char *path, char *out, size_t cap)
{
    if (!search || strchr(prog, '/'))
        return executable_at("", 0, prog, out, cap);
    for (const char *p = path ? path : DEFAULT_PATH;;) {
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

/* Whether `exe` is this process's interpreter, or a link (through links) to a file
 * named as a Python interpreter. */
static int python_file(const char *exe)
{
    struct stat st;
    if (sw.own.st_ino && stat(exe, &st) == 0 && st.st_dev == sw.own.st_dev &&
        st.st_ino == sw.own.st_ino)
        return 1;
    char at[PATH_MAX], target[PATH_MAX];
    snprintf(at, sizeof at, "%s", exe);
    for (int hops = 0; hops < 8; hops++) {
        ssize_t n = readlink(at, target, sizeof target - 1);
        if (n <= 0)
            return 0;
        target[n] = '\0';
        if (python_name(target))
            return 1;
        const char *slash = strrchr(at, '/');
        if (target[0] == '/' || !slash) {
            memcpy(at, target, (size_t)n + 1);
        } else { /* relative to the link's folder */
            char joined[PATH_MAX];
            int len = snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - at), at, target);
            if (len < 0 || (size_t)len >= sizeof joined)
                return 0;
            memcpy(at, joined, (size_t)len + 1);
        }
    }
    return 0;
}

/* Whether the file `exe` is a Python interpreter, by its name or its own one's,
 * or runs in one (a `#!` line naming one, directly or through env). */
static int runs_python(const char *exe, const char *path, int depth)
{
    if (python_name(exe) || python_file(exe))
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
                   (find_program(arg, 1, path, found, sizeof found) &&
                    runs_python(found, path, depth + 1)));
}

/* Why the start of `prog` (searched on the environment's PATH when `search`) with
 * environment env is not followed, or NULL when it follows itself; *found: whether
 * there is such a program (a start that cannot succeed is not told). */
static const char *judge(const char *prog, int search, char *const *env, int *found)
{
    const char *path = env_get(env, "PATH");
    char exe[PATH_MAX];
    *found = prog && find_program(prog, search, path, exe, sizeof exe);
    if (!*found)
        return NULL;
    if (!runs_python(exe, path, 0))
        return "not Python";
    return env_get(env, CHILD_VAR) ? NULL : "an environment without strata's variable";
}

static size_t count(char *const *argv)
{
    size_t n = 0;
    while (argv && argv[n])
        n++;
    return n;
}

/* ------------------------------------------------------------------------- */
/* The wrappers                                                              */

/* Before an exec: the watched process's own (its results written first), or a
 * child's about to become a program (its own line in the tree's record). */
static void before_exec(const char *prog, int search, char *const argv[], char *const envp[])
{
    if (!sw.started)
        return;
    int saved = errno, found;
    const char *why = judge(prog, search, envp ? envp : environ, &found);
    if (found) {
        long pid = (long)getpid();
        if (pid != sw.pid) {
            if (why && sw.child)
                sw.child(pid, (long)getppid(), argv, count(argv), why);
        } else if (PyGILState_Check()) {
            sw.started(pid, argv, count(argv), why);
        }
    }
    errno = saved;
}

/* After the watched process started a program (pid: its pid, 0 when not known). */
static void after_spawn(long pid, const char *prog, int search, char *const argv[],
                        char *const envp[])
{
    if (!sw.started || (long)getpid() != sw.pid)
        return;
    int saved = errno, found;
    const char *why = judge(prog, search, envp ? envp : environ, &found);
    if (found && why)
        sw.started(pid, argv, count(argv), why);
    errno = saved;
}

static int w_execv(const char *path, char *const argv[])
{
    before_exec(path, 0, argv, NULL);
    return execv(path, argv);
}

static int w_execve(const char *path, char *const argv[], char *const envp[])
{
    before_exec(path, 0, argv, envp);
    return execve(path, argv, envp);
}

static int w_execvp(const char *file, char *const argv[])
{
    before_exec(file, 1, argv, NULL);
    return execvp(file, argv);
}

static int w_execvpe(const char *file, char *const argv[], char *const envp[])
{
    before_exec(file, 1, argv, envp);
    return execvpe(file, argv, envp);
}

static int w_fexecve(int fd, char *const argv[], char *const envp[])
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    before_exec(path, 0, argv, envp);
    return fexecve(fd, argv, envp);
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);

/* posix_spawn or posix_spawnp (search), told once the program started. */
static int spawn(spawn_fn real, int search, pid_t *pid, const char *prog,
                 const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[])
{
    pid_t child = 0;
    int rc = real(&child, prog, fa, attr, argv, envp);
    if (pid)
        *pid = child;
    if (rc == 0)
        after_spawn((long)child, prog, search, argv, envp);
    return rc;
}

static int w_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                         const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(posix_spawn, 0, pid, path, fa, attr, argv, envp);
}

static int w_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn(posix_spawnp, 1, pid, file, fa, attr, argv, envp);
}

static int w_system(const char *command)
{
    if (command && sw.started && (long)getpid() == sw.pid) {
        char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
        int saved = errno;
        sw.started(0, argv, 3, "not Python");
        errno = saved;
    }
    return system(command);
}

static const st_got_redirect_t redirects[] = {
    {"execv", NULL, (void *)w_execv},
    {"execve", NULL, (void *)w_execve},
    {"execvp", NULL, (void *)w_execvp},
    {"execvpe", NULL, (void *)w_execvpe},
    {"fexecve", NULL, (void *)w_fexecve},
    {"posix_spawn", NULL, (void *)w_posix_spawn},
    {"posix_spawnp", NULL, (void *)w_posix_spawnp},
    {"system", NULL, (void *)w_system},
};

/* ------------------------------------------------------------------------- */

void st_pyspawn_prepare(void)
{
    PyObject *m = PyImport_ImportModule("_posixsubprocess");
    Py_XDECREF(m);
    PyErr_Clear(); /* a platform without it starts programs otherwise */
}

int st_pyspawn_watch(st_pyspawn_fn started, st_pyspawn_child_fn child)
{
    sw.started = NULL;
    if (!started)
        return 0;
    PyObject *exe = PySys_GetObject("executable"); /* borrowed */
    PyObject *b = exe && PyUnicode_Check(exe) ? PyUnicode_EncodeFSDefault(exe) : NULL;
    if (!b || stat(PyBytes_AS_STRING(b), &sw.own) != 0)
        memset(&sw.own, 0, sizeof sw.own);
    Py_XDECREF(b);
    PyErr_Clear();
    sw.pid = (long)getpid();
    sw.child = child;
    /* again at each watch (a followed child's session): objects loaded since */
    if (st_got_redirect(redirects, sizeof redirects / sizeof *redirects, st_got_keep_others,
                        (void *)w_execv) < 0)
        return -1;
    sw.started = started;
    return 0;
}
