/*
 * nsamplefloor: the floor of the native sampling benchmark (bench/native.py), a
 * library preloaded into the program (LD_PRELOAD) as strata sample's is.  What any
 * in-process sampler of native stacks pays just for being interrupted: one POSIX
 * timer per thread on the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID,
 * SIGEV_THREAD_ID) at the sampling rate, whose signal handler reads one clock and
 * does nothing else.  What strata sample costs beyond this is its own work (walking
 * the stack, recording it, its maintenance thread, naming and writing at exit).
 *
 *   NSAMPLEFLOOR_HZ=HZ      the rate (per thread, of its CPU clock); unset or not a
 *                           number in 1..1000000: the library does nothing
 *   NSAMPLEFLOOR_REPORT=1   print the signals handled to stderr at exit (a check
 *                           that the timers ran)
 *
 * The constructor arms the main thread's timer; pthread_create is interposed so that
 * every new thread arms its own before it runs its start routine, and deletes it
 * when the routine returns (a thread that ends by pthread_exit leaves its timer,
 * which stops with the thread's clock).  The signal is SIGRTMAX - 1, as in
 * samplefloor.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static long interval_ns;
static volatile long handled;
static volatile long long last_read;

static void handler(int sig, siginfo_t *info, void *uc)
{
    struct timespec ts;
    int saved = errno;
    (void)sig;
    (void)info;
    (void)uc;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    last_read = ts.tv_nsec;
    __atomic_fetch_add(&handled, 1, __ATOMIC_RELAXED);
    errno = saved;
}

/* A timer on the calling thread's CPU clock, firing every interval_ns; 0 or -errno. */
static int arm_thread(timer_t *out)
{
    struct sigevent sev;
    struct itimerspec its;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMAX - 1;
    sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, out) != 0)
        return -errno;
    its.it_interval.tv_sec = interval_ns / 1000000000L;
    its.it_interval.tv_nsec = interval_ns % 1000000000L;
    its.it_value = its.it_interval;
    if (timer_settime(*out, 0, &its, NULL) != 0) {
        int err = errno;
        timer_delete(*out);
        return -err;
    }
    return 0;
}

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *thread_start(void *p)
{
    struct start s = *(struct start *)p;
    timer_t t;
    free(p);
    int armed = arm_thread(&t) == 0;
    void *ret = s.fn(s.arg);
    if (armed)
        timer_delete(t);
    return ret;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                   void *arg)
{
    static create_fn real;
    if (!real)
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real)
        return EAGAIN;
    struct start *s = interval_ns ? malloc(sizeof *s) : NULL;
    if (!s)
        return real(thread, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int rc = real(thread, attr, thread_start, s);
    if (rc != 0)
        free(s);
    return rc;
}

__attribute__((constructor)) static void nsamplefloor_start(void)
{
    const char *text = getenv("NSAMPLEFLOOR_HZ");
    char *end;
    long hz = text ? strtol(text, &end, 10) : 0;
    timer_t t;
    struct sigaction sa;
    int err;
    if (!text || *end || hz < 1 || hz > 1000000)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGRTMAX - 1, &sa, NULL) != 0)
        return;
    interval_ns = 1000000000L / hz;
    err = arm_thread(&t);
    if (err != 0) {
        fprintf(stderr, "nsamplefloor: cannot arm the main thread's timer: %s\n",
                strerror(-err));
        interval_ns = 0;
    }
}

__attribute__((destructor)) static void nsamplefloor_end(void)
{
    const char *report = getenv("NSAMPLEFLOOR_REPORT");
    if (interval_ns && report && *report && strcmp(report, "0") != 0)
        fprintf(stderr, "nsamplefloor: %ld signals\n", handled);
}
