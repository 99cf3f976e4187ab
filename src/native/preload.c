/* libstrata-preload.so: `strata sample -- exe [args]` runs the program with this
 * library in LD_PRELOAD (issue 11).
 *
 * Design note. The `strata` command checks the command line, makes the results
 * folder and passes everything through the environment: the settings as
 * STRATA_* variables (the flags given turned into their variables, the results
 * folder as STRATA_OUTPUT_PATH), and _STRATA_SAMPLE=<pid>, the process it
 * replaces itself with. The constructor of the library starts a session in that
 * process only (a child started with fork and exec loads the library too, and
 * stays untouched; an exec of the process itself starts a new session in the
 * new image, into the same folder, so that `strata sample -- env X=1 ./app` or a
 * shell script ending in `exec ./app` profiles the program they run). The
 * results are written by an atexit handler (after the program's own), or by the
 * program's _exit.
 *
 * What the library interposes, each a thin wrapper around the next definition
 * (dlsym RTLD_NEXT):
 *   pthread_create  the new thread starts sampling itself before its routine;
 *   pthread_mutex_lock, pthread_cond_wait, pthread_cond_timedwait
 *                   strata run: time waiting on a lock another thread holds, and
 *                   on a condition variable, as calls of their own;
 *   dlopen, dlclose the module map is refreshed after (sampled addresses in a
 *                   library unloaded later still resolve), and libunwind is kept
 *                   out of a thread inside the loader;
 *   execve, execv, execvp, execvpe, execl, execlp, execle
 *                   the timers stop and the pending signal is drained before an
 *                   exec; it goes on if the exec fails;
 *   _exit, _Exit    the results are written first (in the session's process);
 *   SIGTERM, SIGINT where the program leaves them at their default action (Slurm's
 *                   time limit, mpirun's cleanup, Ctrl-C): a handler that only
 *                   posts a semaphore; strata's watcher thread (every signal
 *                   blocked) writes the results, puts the default action back and
 *                   raises the signal again, so the process still dies by it. A
 *                   program that sets its own handler replaces strata's; a forked
 *                   child's handler acts as the default action;
 *   nanosleep, clock_nanosleep, sleep, usleep, poll, ppoll, select, pselect,
 *   epoll_wait, epoll_pwait, accept, accept4, connect, recv, recvfrom, recvmsg,
 *   sigtimedwait    with the wall clock, the signal is held back while they wait
 *                   (no EINTR the program would not see without strata).
 * Other blocking calls that a handler interrupts even with SA_RESTART (read or
 * write on a socket with a timeout, msgrcv, semop) are not wrapped: under the
 * wall clock they may return EINTR, which careful programs retry.
 * What cannot be caught (a crash, SIGKILL, another fatal signal) leaves the
 * results folder with its incomplete.txt note, which says so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/settings.h"
#include "native/instrument.h"
#include "native/kokkos.h"
#include "native/mpi.h"
#include "native/ompt.h"
#include "native/sampler.h"
#include "session/session.h"

#define EXPORT __attribute__((visibility("default")))

extern char **environ;

static struct {
    st_session_t session;
    pid_t pid;                /* the session's process */
    int live, finished;
    int terminal;             /* strata's copy of the terminal (fd 2 at the start) */
    pthread_mutex_t lock;     /* held while the results are written */
    /* SIGTERM and SIGINT */
    sem_t wake;
    volatile sig_atomic_t signo; /* the signal that came (0: none) */
    int watching;
} pl = {.terminal = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static void fail(const char *what)
{
    fprintf(stderr, "strata: error: %s\n", what);
    fflush(stderr);
    _exit(2);
}

/* The next definition of `name` (libc's, or another preloaded library's). */
static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "strata: error: %s not found: %s\n", name, dlerror());
        abort();
    }
    return f;
}

/* Stops sampling and writes the results, once, in the session's process; a
 * second caller (exit while a SIGTERM's results are being written) waits until
 * they are. */
static void finish(void)
{
    pthread_mutex_lock(&pl.lock);
    int mine = pl.live && !pl.finished && getpid() == pl.pid;
    pl.finished |= mine;
    if (!mine) {
        pthread_mutex_unlock(&pl.lock);
        return;
    }
    st_session_stop(&pl.session);
    FILE *notes = pl.terminal >= 0 ? fdopen(pl.terminal, "w") : NULL;
    FILE *tables = st_settings_bool(&pl.session.settings, ST_S_PRINT_TABLES) ? notes : NULL;
    st_msg_t msg;
    if (st_session_finish(&pl.session, NULL, tables, notes, &msg) < 0 && !notes)
        fprintf(stderr, "strata: error: %s\n", msg.text);
    if (pl.session.timed) {
        st_nompt_note(notes);
        if (notes && !st_ninstr_entered())
            fprintf(notes, "[strata] nothing was timed: %s has no function built with "
                           "-finstrument-functions and opened no region (strata.h, OpenMP, "
                           "Kokkos); strata sample -- %s samples any program\n",
                    pl.session.target, pl.session.target);
        uint64_t marks, counts;
        st_ninstr_api_events(&marks, &counts);
        if (notes && (marks || counts) && !pl.session.tracing)
            fprintf(notes, "[strata] marks: %llu, counter values: %llu (strata_mark, "
                           "strata_counter): they are drawn on the timeline, which --trace "
                           "writes\n",
                    (unsigned long long)marks, (unsigned long long)counts);
    }
    if (notes)
        fclose(notes);
    pl.terminal = -1;
    pthread_mutex_unlock(&pl.lock);
}

/* SIGTERM or SIGINT at their default action: the watcher writes the results. In a
 * forked child (or once the results are written), the default action at once. */
/* STRATA_MPI_GATHER (native/mpi.h): the rank's results written at MPI_Finalize. */
EXPORT const char *strata__mpi_finish(int write)
{
    if (!pl.live || getpid() != pl.pid ||
        !st_settings_bool(&pl.session.settings, ST_S_MPI_GATHER))
        return NULL;
    if (!write)
        return "";
    finish();
    return pl.session.outdir;
}

static void default_action(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

static void on_stop_signal(int sig)
{
    int saved = errno;
    if (getpid() != pl.pid || pl.signo) {
        default_action(sig);
        raise(sig);
    } else {
        pl.signo = sig;
        sem_post(&pl.wake);
    }
    errno = saved;
}

static void *watch(void *arg)
{
    (void)arg;
    while (sem_wait(&pl.wake) != 0)
        ;
    int sig = pl.signo;
    finish();
    /* the process dies by the signal, as it would have without strata */
    default_action(sig);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    kill(getpid(), sig);
    return NULL;
}

/* Catches SIGTERM and SIGINT where they are at their default action. Returns the
 * threads it started (0 or 1). */
static int catch_stop_signals(void)
{
    const int sigs[] = {SIGTERM, SIGINT};
    int any = 0;
    struct sigaction cur;
    for (int i = 0; i < 2; i++)
        any |= sigaction(sigs[i], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
               cur.sa_handler == SIG_DFL;
    if (!any || sem_init(&pl.wake, 0, 0) != 0)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    static int (*real_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real_create)
        real_create = next("pthread_create");
    pthread_t t;
    int rc = real_create(&t, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return 0;
    pthread_detach(t);
    for (int i = 0; i < 2; i++) {
        if (sigaction(sigs[i], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
            cur.sa_handler != SIG_DFL)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        sigaction(sigs[i], &sa, NULL);
    }
    pl.watching = 1;
    return 1;
}

__attribute__((constructor)) static void preload_start(void)
{
    const char *mark = getenv("_STRATA_SAMPLE");
    if (!mark || atol(mark) != (long)getpid())
        return; /* a child of the program: not profiled */
    st_settings_t set;
    st_msg_t msg;
    if (st_settings_init(&set) < 0)
        fail("out of memory");
    if (st_settings_load_sources(&set, NULL, environ, NULL, &msg) < 0)
        fail(msg.text);
    /* strata sample: sampling alone, no call timed; strata run: the calls of
     * -finstrument-functions and the API's regions, timed (and stacks sampled
     * with --sample) */
    const char *mode = getenv("_STRATA_MODE");
    int run = mode && strcmp(mode, "run") == 0;
    if (run)
        st_nkokkos_env();
    if (!run) {
        st_settings_set(&set, ST_S_USE_SAMPLING, "ON", ST_SRC_FLAG, &msg);
        st_settings_set(&set, ST_S_PROFILE, "OFF", ST_SRC_FLAG, &msg);
    }
    /* the program's name, and its command line as the kernel has it */
    char exe[4096] = "", cmdline[8192];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *argv[256];
    int argc = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t got = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
    if (f)
        fclose(f);
    cmdline[got] = '\0';
    for (size_t i = 0; i < got && argc < 255; i += strlen(cmdline + i) + 1)
        argv[argc++] = cmdline + i;
    const char *target = getenv("_STRATA_SAMPLE_TARGET");
    if (!target || !*target)
        target = *exe ? basename(exe) : "program";
    int rc = st_session_begin(&pl.session, &set, target, argc, argv, &msg);
    st_settings_free(&set);
    if (rc < 0)
        fail(msg.text);
    /* strata run with the MPI wrappers preloaded (native/mpi.h): their bytes */
    const char *mpi = getenv("_STRATA_MPI");
    if (run && mpi && *mpi &&
        st_rec_add_metric(&pl.session.rec, "mpi_bytes", "bytes", "bytes passed to MPI calls",
                          ST_METRIC_BYTES, &pl.session.mpi_bytes) == 0)
        st_ninstr_mpi_metric(pl.session.mpi_bytes);
    const char *shown = getenv("_STRATA_SAMPLE_SHOWN");
    if (shown && *shown)
        snprintf(pl.session.outdir_shown, sizeof pl.session.outdir_shown, "%s", shown);
    pl.terminal = fcntl(2, F_DUPFD_CLOEXEC, 10);
    pl.pid = getpid();
    /* strata's threads, left out of the program's: the sampler's and the watcher */
    int sampling = st_settings_bool(&pl.session.settings, ST_S_USE_SAMPLING);
    pl.session.helper_threads = sampling + catch_stop_signals();
    if ((sampling && st_session_add_collector(&pl.session, &st_nsampler_collector) < 0) ||
        (run && st_session_add_collector(&pl.session, &st_ninstr_collector) < 0) ||
        st_session_start(&pl.session, &msg) < 0)
        fail(msg.text);
    pl.live = 1;
    atexit(finish);
}

/* ------------------------------------------------------------------------- */
/* Threads                                                                   */

typedef struct {
    void *(*fn)(void *);
    void *arg;
} start_t;

static void *trampoline(void *p)
{
    start_t s = *(start_t *)p;
    free(p);
    st_nsampler_thread_start();
    st_ninstr_thread_start();
    return s.fn(s.arg);
}

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = next("pthread_create");
    start_t *s = pl.live && !pl.finished ? malloc(sizeof *s) : NULL;
    if (!s)
        return real(thread, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int rc = real(thread, attr, trampoline, s);
    if (rc != 0)
        free(s);
    return rc;
}

/* Locks (strata run): a mutex tried first, its wait measured only when another
 * thread holds it; a condition variable's wait always. */
EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *), (*try)(pthread_mutex_t *);
    if (!real) {
        try = next("pthread_mutex_trylock");
        real = next("pthread_mutex_lock");
    }
    if (!st_ninstr_measuring())
        return real(m);
    int rc = try(m);
    if (rc != EBUSY)
        return rc;
    int measured = st_ninstr_wait_begin(ST_NINSTR_MUTEX);
    rc = real(m);
    if (measured)
        st_ninstr_wait_end();
    return rc;
}

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    static int (*real)(pthread_cond_t *, pthread_mutex_t *);
    if (!real)
        real = next("pthread_cond_wait");
    int measured = st_ninstr_wait_begin(ST_NINSTR_COND);
    int rc = real(c, m);
    if (measured)
        st_ninstr_wait_end();
    return rc;
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (!real)
        real = next("pthread_cond_timedwait");
    int measured = st_ninstr_wait_begin(ST_NINSTR_COND);
    int rc = real(c, m, t);
    if (measured)
        st_ninstr_wait_end();
    return rc;
}

/* ------------------------------------------------------------------------- */
/* The loader                                                                */

EXPORT void *dlopen(const char *file, int flags)
{
    static void *(*real)(const char *, int);
    if (!real)
        real = next("dlopen");
    st_nsampler_loader_enter();
    void *h = real(file, flags);
    int saved = errno;
    st_nsampler_loader_leave(0);
    errno = saved;
    return h;
}

EXPORT int dlclose(void *handle)
{
    static int (*real)(void *);
    if (!real)
        real = next("dlclose");
    st_nsampler_loader_enter();
    int rc = real(handle);
    int saved = errno;
    st_nsampler_loader_leave(1);
    errno = saved;
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Calls that wait                                                           */

/* With the wall clock, the sampling signal is held back while the program waits
 * (native/sampler.h: st_nsampler_wait_begin): nanosleep, poll, select and socket
 * calls with a timeout return EINTR after any handler, SA_RESTART or not, and the
 * program must not see that. The wrappers live in their own section, so that
 * their frames stay in the samples, named as the calls they wrap. */
#define WAITER __attribute__((section("strata_waits"), noinline)) EXPORT
#define WAIT(name, ret, params, args)                                                   \
    WAITER ret name params                                                              \
    {                                                                                   \
        static ret(*real) params;                                                       \
        if (!real)                                                                      \
            real = (ret(*) params)next(#name);                                          \
        sigset_t old;                                                                   \
        int held = st_nsampler_wait_begin(&old);                                        \
        ret rc = real args;                                                             \
        if (held) {                                                                     \
            int saved = errno;                                                          \
            st_nsampler_wait_end(&old);                                                 \
            errno = saved;                                                              \
        }                                                                               \
        return rc;                                                                      \
    }

WAIT(nanosleep, int, (const struct timespec *req, struct timespec *rem), (req, rem))
WAIT(clock_nanosleep, int, (clockid_t c, int flags, const struct timespec *req,
                            struct timespec *rem), (c, flags, req, rem))
WAIT(usleep, int, (useconds_t us), (us))
WAIT(sleep, unsigned int, (unsigned int secs), (secs))
WAIT(poll, int, (struct pollfd *fds, nfds_t n, int ms), (fds, n, ms))
WAIT(ppoll, int, (struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m),
     (fds, n, t, m))
WAIT(select, int, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t))
WAIT(pselect, int, (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                    const sigset_t *m), (n, r, w, e, t, m))
WAIT(epoll_wait, int, (int fd, struct epoll_event *ev, int max, int ms), (fd, ev, max, ms))
WAIT(epoll_pwait, int, (int fd, struct epoll_event *ev, int max, int ms, const sigset_t *m),
     (fd, ev, max, ms, m))
WAIT(accept, int, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
WAIT(accept4, int, (int fd, struct sockaddr *a, socklen_t *l, int flags), (fd, a, l, flags))
WAIT(connect, int, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))
WAIT(recv, ssize_t, (int fd, void *buf, size_t n, int flags), (fd, buf, n, flags))
WAIT(recvfrom, ssize_t, (int fd, void *buf, size_t n, int flags, struct sockaddr *a,
                         socklen_t *l), (fd, buf, n, flags, a, l))
WAIT(recvmsg, ssize_t, (int fd, struct msghdr *m, int flags), (fd, m, flags))
WAIT(sigtimedwait, int, (const sigset_t *set, siginfo_t *info, const struct timespec *t),
     (set, info, t))

/* ------------------------------------------------------------------------- */
/* exec and _exit                                                            */

/* Runs one exec: sampling pauses around it in the session's process. */
#define AROUND_EXEC(call)                                                               \
    do {                                                                                \
        int mine_ = pl.live && !pl.finished && getpid() == pl.pid;                      \
        if (mine_)                                                                      \
            st_nsampler_before_exec();                                                  \
        int rc_ = (call);                                                               \
        int saved_ = errno;                                                             \
        if (mine_)                                                                      \
            st_nsampler_exec_failed();                                                  \
        errno = saved_;                                                                 \
        return rc_;                                                                     \
    } while (0)

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    static int (*real)(const char *, char *const[], char *const[]);
    if (!real)
        real = next("execve");
    AROUND_EXEC(real(path, argv, envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
    static int (*real)(const char *, char *const[]);
    if (!real)
        real = next("execv");
    AROUND_EXEC(real(path, argv));
}

EXPORT int execvp(const char *file, char *const argv[])
{
    static int (*real)(const char *, char *const[]);
    if (!real)
        real = next("execvp");
    AROUND_EXEC(real(file, argv));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    static int (*real)(const char *, char *const[], char *const[]);
    if (!real)
        real = next("execvpe");
    AROUND_EXEC(real(file, argv, envp));
}

/* The arguments of an execl-style call as an array (and, for execle, the
 * environment after the terminating NULL). */
static char **collect(const char *arg0, va_list ap, char ***envp)
{
    va_list c;
    va_copy(c, ap);
    size_t n = 1;
    while (va_arg(c, char *))
        n++;
    va_end(c);
    char **argv = malloc((n + 1) * sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = (char *)arg0;
    for (size_t i = 1; i <= n; i++)
        argv[i] = i < n ? va_arg(ap, char *) : NULL;
    if (envp)
        *envp = va_arg(ap, char **);
    return argv;
}

/* execl, execlp and execle through execv, execvp and execve (their wrappers). */
enum { EXEC_L, EXEC_LP, EXEC_LE };

static int exec_list(int how, const char *path, const char *arg, va_list ap)
{
    char **envp = NULL;
    char **argv = collect(arg, ap, how == EXEC_LE ? &envp : NULL);
    if (!argv) {
        errno = ENOMEM;
        return -1;
    }
    int rc = how == EXEC_L ? execv(path, argv)
             : how == EXEC_LP ? execvp(path, argv)
                              : execve(path, argv, envp);
    int saved = errno;
    free(argv);
    errno = saved;
    return rc;
}

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(EXEC_L, path, arg, ap);
    va_end(ap);
    return rc;
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(EXEC_LP, file, arg, ap);
    va_end(ap);
    return rc;
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    int rc = exec_list(EXEC_LE, path, arg, ap);
    va_end(ap);
    return rc;
}

EXPORT void _exit(int status)
{
    static void (*real)(int) __attribute__((noreturn));
    if (!real)
        real = next("_exit");
    finish();
    real(status);
}

EXPORT void _Exit(int status)
{
    _exit(status);
}
