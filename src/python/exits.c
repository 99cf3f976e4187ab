/* How a profiled run ends (see exits.h for the design). */
#include "python/exits.h"
#include "python/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "python/pystate.h"

/* ------------------------------------------------------------------------- */
/* The terminal                                                               */

static struct {
    int fd;             /* strata's copy of fd 2, or -1 */
    FILE *f;
    dev_t dev;
    ino_t ino;
} term = {-1, NULL, 0, 0};

/* 1 if fd is open on the file (dev, ino). */
static int same_file(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void st_pyexit_keep_terminal(void)
{
    if (term.fd >= 0)
        return;
    struct stat st;
    if (fstat(2, &st) != 0)
        return;
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return;
    }
    term.fd = fd;
    term.f = f;
    term.dev = st.st_dev;
    term.ino = st.st_ino;
}

FILE *st_pyexit_terminal(void)
{
    if (term.fd < 0)
        return stderr;
    if (same_file(term.fd, term.dev, term.ino))
        return term.f;
    if (same_file(2, term.dev, term.ino))
        return stderr;
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* SIGTERM                                                                    */

static struct {
    int installed;
    pid_t owner;                   /* the process that writes the results */
    volatile sig_atomic_t signum;  /* the signal received, or 0 */
    sem_t wake;
    sem_t got_gil;                 /* posted once the watcher holds the GIL */
    pthread_t watcher;
    int watching;                  /* the watcher runs */
    _Atomic int quit;              /* the watcher is to end (a fork is coming) */
    _Atomic int writing;           /* the results are being written (GIL held) */
} sig;

/* How long the watcher may wait for the GIL before the process ends without
 * writing: a program stuck in C code that holds the GIL must still die by SIGTERM. */
#define GIL_WAIT_S 10

/* Ends the process by signal s, as its default action would. */
static void die_by(int s)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(s, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, s);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(s);
    kill(getpid(), s);
    _exit(128 + s);
}

static void on_term(int s)
{
    int saved = errno;
    if (getpid() != sig.owner) /* a forked child that kept the handler */
        die_by(s);
    if (!sig.signum) {
        sig.signum = s;
        sem_post(&sig.wake);
    }
    errno = saved;
}

/* Ends the process if the watcher has not had the GIL after GIL_WAIT_S, unless the
 * GIL is held to write the results (a SIGTERM during the atexit write): that ends
 * the process itself once written (st_pyexit_finished). */
static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += GIL_WAIT_S;
        int rc;
        while ((rc = sem_timedwait(&sig.got_gil, &until)) != 0 && errno == EINTR)
            ;
        if (rc == 0)
            return NULL;
        if (!atomic_load(&sig.writing))
            die_by(sig.signum);
    }
}

void st_pyexit_writing(void)
{
    atomic_store(&sig.writing, 1);
}

static void *watch(void *arg)
{
    (void)arg;
    while (sem_wait(&sig.wake) != 0)
        ; /* EINTR */
    if (atomic_load(&sig.quit))
        return NULL; /* os.fork: restarted in the parent afterwards */
    pthread_t dog;
    if (pthread_create(&dog, NULL, watchdog, NULL) == 0)
        pthread_detach(dog);
    PyGILState_STATE g = PyGILState_Ensure();
    sem_post(&sig.got_gil);
    if (st_py.live && !st_py.finalized && !st_py.forked_child) {
        st_py_finalize(0);
    } else if (atomic_load(&sig.writing)) {
        /* the results are being written (os._exit's, or at exit), and the thread
         * that writes them let the GIL go on the way: it ends the process once they
         * are written (st_pyexit_finished) */
        PyGILState_Release(g);
        return NULL;
    }
    die_by(sig.signum); /* never returns; the GIL goes with the process */
    return NULL;
}

/* Starts the watcher, which blocks every signal: it must never run the handler.
 * Joinable, so that a fork can wait for it to end. */
static int start_watcher(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&sig.quit, 0);
    int rc = pthread_create(&sig.watcher, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    sig.watching = rc == 0;
    return rc == 0 ? 0 : -1;
}

/* Ends the waiting watcher (no SIGTERM came: it is in sem_wait, without the GIL). */
static void end_watcher(void)
{
    atomic_store(&sig.quit, 1);
    sem_post(&sig.wake);
    pthread_join(sig.watcher, NULL); /* quick: it ends without the GIL */
    sig.watching = 0;
}

/* os.fork: the watcher (and the stack sampler's thread) ends before, so that the parent forks with the threads the
 * program made (3.12+ warns about forking a process that has several) and starts
 * again after, in the parent (see after_fork_parent). Not when a SIGTERM is being
 * handled: the watcher may be waiting for the GIL this thread holds, and the process
 * is ending anyway. */
static PyObject *before_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    st_pysampler_before_fork();
    if (!sig.watching)
        Py_RETURN_NONE;
    atomic_store(&sig.quit, 1);
    if (sig.signum) {
        atomic_store(&sig.quit, 0);
        Py_RETURN_NONE;
    }
    end_watcher();
    Py_RETURN_NONE;
}

/* 1 if SIGTERM's handler is still strata's. */
static int handler_is_ours(void)
{
    struct sigaction cur;
    return sigaction(SIGTERM, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
           cur.sa_handler == on_term;
}

/* Starts the watcher again after a fork, while strata's handler is still in place
 * (a pending call may come after the results were written), and the stack
 * sampler's thread. */
static int restart_watcher(void *unused)
{
    (void)unused;
    if (sig.installed && !sig.watching && getpid() == sig.owner && handler_is_ours())
        start_watcher();
    st_pysampler_after_fork_parent();
    return 0;
}

#if PY_VERSION_HEX >= 0x030D0000
/* The process's threads as the kernel counts them (as CPython does before warning),
 * or -1. */
static long process_threads(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    /* after the name: state (field 3) ... num_threads (field 20) */
    for (int field = 2; p && field < 20; field++)
        p = strchr(p + 1, ' ');
    return p ? strtol(p + 1, NULL, 10) : -1;
}
#endif

/* 3.12 warns about threads before the after-fork hooks run, 3.13+ after them. There,
 * when the forking thread is the process's only one (the main thread, back in Python
 * code as soon as os.fork returns), the watcher starts from a pending call, at the
 * main thread's next bytecode: a SIGTERM in between is kept and acted on then. When
 * the program has threads of its own (CPython warns anyway), it starts at once. */
static PyObject *after_fork_parent(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
#if PY_VERSION_HEX >= 0x030D0000
    if (process_threads() == 1 && Py_AddPendingCall(restart_watcher, NULL) == 0)
        Py_RETURN_NONE;
#endif
    restart_watcher(NULL);
    Py_RETURN_NONE;
}

static PyMethodDef fork_defs[] = {
    {"_strata_before_fork", before_fork, METH_NOARGS, NULL},
    {"_strata_after_fork_parent", after_fork_parent, METH_NOARGS, NULL},
};

/* Registers before_fork and after_fork_parent with os.register_at_fork. */
static void watch_forks(void)
{
    PyObject *os = PyImport_ImportModule("os");
    PyObject *reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
    PyObject *before = PyCFunction_New(&fork_defs[0], NULL);
    PyObject *after = PyCFunction_New(&fork_defs[1], NULL);
    PyObject *kw = Py_BuildValue("{s:O,s:O}", "before", before ? before : Py_None,
                                 "after_in_parent", after ? after : Py_None);
    PyObject *args = PyTuple_New(0);
    PyObject *r = reg && before && after && kw && args ? PyObject_Call(reg, args, kw) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(after);
    Py_XDECREF(before);
    Py_XDECREF(reg);
    Py_XDECREF(os);
    PyErr_Clear();
}

/* Returns the threads started (0 or 1). */
static int catch_sigterm(void)
{
    struct sigaction cur;
    if (sig.installed || sigaction(SIGTERM, NULL, &cur) != 0 || cur.sa_handler != SIG_DFL ||
        (cur.sa_flags & SA_SIGINFO))
        return 0;
    if (sem_init(&sig.wake, 0, 0) != 0)
        return 0;
    if (sem_init(&sig.got_gil, 0, 0) != 0) {
        sem_destroy(&sig.wake);
        return 0;
    }
    sig.owner = getpid();
    sig.signum = 0;
    if (start_watcher() < 0) {
        sem_destroy(&sig.wake);
        sem_destroy(&sig.got_gil);
        return 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sig.installed = 1;
    return 1;
}

/* ------------------------------------------------------------------------- */
/* os._exit                                                                   */

static PyObject *real_exit;   /* posix._exit */
static PyObject *our_exit;    /* the wrapper while it is installed */

static PyObject *wrapped_exit(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *kwlist[] = {"status", NULL};
    int status;
    if (PyArg_ParseTupleAndKeywords(args, kwargs, "i:_exit", kwlist, &status) &&
        st_py.live && !st_py.finalized && !st_py.forked_child)
        st_py_finalize(0);
    PyErr_Clear(); /* a bad argument: the real one says so, in its own words */
    return PyObject_Call(real_exit, args, kwargs);
}

static PyMethodDef exit_def = {"_exit", (PyCFunction)(void (*)(void))wrapped_exit,
                               METH_VARARGS | METH_KEYWORDS,
                               "Exit to the system with specified status, without normal exit "
                               "processing."};

static void wrap_os_exit(void)
{
    if (our_exit)
        return;
    PyObject *os = PyImport_ImportModule("os");
    PyObject *real = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    PyObject *mod = PyUnicode_FromString("posix");
    PyObject *w = real && mod ? PyCFunction_NewEx(&exit_def, NULL, mod) : NULL;
    if (w && PyObject_SetAttrString(os, "_exit", w) == 0) {
        real_exit = real;
        our_exit = w;
        real = w = NULL;
    }
    Py_XDECREF(w);
    Py_XDECREF(real);
    Py_XDECREF(mod);
    Py_XDECREF(os);
    PyErr_Clear();
}

static void unwrap_os_exit(void)
{
    if (!our_exit)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *os = PyImport_ImportModule("os");
    PyObject *cur = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    if (cur == our_exit)
        PyObject_SetAttrString(os, "_exit", real_exit);
    Py_XDECREF(cur);
    Py_XDECREF(os);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    /* kept alive: a program may hold the wrapper (from os import _exit) */
}

/* ------------------------------------------------------------------------- */

int st_pyexit_install(void)
{
    static int forks_watched;
    wrap_os_exit();
    if (!forks_watched) {
        watch_forks(); /* once: the hooks stay registered, and check what runs */
        forks_watched = 1;
    }
    return catch_sigterm();
}

void st_pyexit_finished(void)
{
    unwrap_os_exit();
    if (!sig.installed)
        return;
    if (handler_is_ours()) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGTERM, &dfl, NULL);
    }
    if (sig.signum) /* came while the results were written: now it ends the process */
        die_by(sig.signum);
}

void st_pyexit_new_session(void)
{
    if (sig.watching)
        end_watcher();
    if (sig.installed) {
        sem_destroy(&sig.wake);
        sem_destroy(&sig.got_gil);
        sig.installed = 0;
    }
    atomic_store(&sig.writing, 0);
}

void st_pyexit_after_fork_child(void)
{
    if (sig.installed && handler_is_ours()) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGTERM, &dfl, NULL);
    }
    sig.installed = 0;
}
