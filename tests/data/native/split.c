/* strata sample's test program: a known split (f 70 %, g 30 % of the CPU), threads
 * started before and after a first stretch of work, fork, exec, dlopen/dlclose, a
 * program with its own SIGPROF timer, waits under the wall clock, a thread that
 * blocks every signal. The mode is the first argument (tests/test_sample.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

volatile double sink;
volatile int calls, profs;

/* Burns `secs` of the thread's CPU time. */
__attribute__((noinline)) void spin(double secs)
{
    double t0 = cpu(), x = 0;
    while (cpu() - t0 < secs)
        for (int i = 0; i < 20000; i++)
            x += i * 0.5;
    sink = x;
}

/* The calls after spin keep f and g on the stack (no tail call at -O2). */
__attribute__((noinline)) void f(double u) { spin(0.007 * u); calls++; }
__attribute__((noinline)) void g(double u) { spin(0.003 * u); calls++; }

/* f then g, 7 to 3, for `secs` of CPU. Each round's length varies (0.5 to 1.5 of
 * 10 ms, a fixed pseudo-random sequence): a strictly periodic program would beat
 * with the kernel's tick, at which CPU-clock timers fire, and its samples would
 * fall on one phase of the cycle. */
static void split(double secs)
{
    unsigned x = 12345;
    for (double done = 0; done < secs;) {
        x = x * 1103515245u + 12345u;
        double u = 0.5 + (double)((x >> 16) % 1000) / 1000.0;
        f(u);
        g(u);
        done += 0.01 * u;
    }
}

__attribute__((noinline)) void *early_worker(void *p) { (void)p; spin(0.3); calls++; return NULL; }
__attribute__((noinline)) void *late_worker(void *p) { (void)p; spin(0.3); calls++; pthread_exit(NULL); }
__attribute__((noinline)) void *deaf_worker(void *p)
{
    (void)p;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    spin(0.8);
    calls++;
    return NULL;
}

static void on_prof(int s) { (void)s; profs++; }

volatile int mine;
volatile sig_atomic_t term;
static void on_term(int s) { (void)s; term = 1; }
static void on_mine(int s) { (void)s; mine++; }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "split";
    if (!strcmp(mode, "split")) {
        split(argc > 2 ? atof(argv[2]) : 1.0);
        printf("done\n");
        return 3;
    }
    if (!strcmp(mode, "threads")) {
        pthread_t a, b;
        pthread_create(&a, NULL, early_worker, NULL);
        pthread_setname_np(a, "early");
        spin(0.1);
        pthread_create(&b, NULL, late_worker, NULL);
        pthread_setname_np(b, "late");
        pthread_join(a, NULL);
        spin(0.1); /* late ends first or not: both are named while alive */
        pthread_join(b, NULL);
        printf("threads\n");
        return 0;
    }
    if (!strcmp(mode, "deaf")) {
        pthread_t a;
        pthread_create(&a, NULL, deaf_worker, NULL);
        pthread_join(a, NULL);
        printf("deaf\n");
        return 0;
    }
    if (!strcmp(mode, "sigprof")) {
        signal(SIGPROF, on_prof);
        struct itimerval it = {{0, 10000}, {0, 10000}};
        setitimer(ITIMER_PROF, &it, NULL);
        spin(0.5);
        printf("sigprof %s\n", profs > 20 ? "ok" : "missing");
        return 0;
    }
    if (!strcmp(mode, "forever")) {
        /* until a signal ends it (the test sends SIGTERM or SIGINT) */
        printf("running\n");
        fflush(stdout);
        for (;;)
            f(1.0);
    }
    if (!strcmp(mode, "ownterm")) {
        /* its own SIGTERM handler: it ends cleanly */
        signal(SIGTERM, on_term);
        printf("running\n");
        fflush(stdout);
        while (!term)
            f(1.0);
        printf("clean exit\n");
        return 4;
    }
    if (!strcmp(mode, "takesig")) {
        /* the program takes the highest real-time signal (strata's by default) */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_mine;
        sigaction(SIGRTMAX, &sa, NULL);
        spin(0.3);
        int before = mine;
        raise(SIGRTMAX);
        spin(0.2);
        printf("takesig %s\n", mine == before + 1 ? "ok" : "stray signals");
        return 0;
    }
    if (!strcmp(mode, "waits")) {
        int eintr = 0, sv[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        struct timeval rto = {0, 30000};
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &rto, sizeof rto);
        for (int i = 0; i < 4; i++) {
            struct timespec ts = {0, 30000000};
            if (nanosleep(&ts, NULL) < 0 && errno == EINTR)
                eintr++;
            if (poll(NULL, 0, 30) < 0 && errno == EINTR)
                eintr++;
            struct timeval tv = {0, 30000};
            if (select(0, NULL, NULL, NULL, &tv) < 0 && errno == EINTR)
                eintr++;
            char c;
            if (recv(sv[0], &c, 1, 0) < 0 && errno == EINTR)
                eintr++;
        }
        usleep(30000);
        printf("eintr %d\n", eintr);
        return 0;
    }
    if (!strcmp(mode, "fork")) {
        spin(0.1);
        pid_t p = fork();
        if (p == 0) {
            spin(0.1);
            _exit(7);
        }
        int st;
        waitpid(p, &st, 0);
        printf("child %d\n", WEXITSTATUS(st));
        return 0;
    }
    if (!strcmp(mode, "exec")) {
        spin(0.1);
        char *again[] = {argv[0], "after-exec", NULL};
        execv(argv[0], again);
        perror("exec");
        return 1;
    }
    if (!strcmp(mode, "after-exec")) {
        split(0.2);
        printf("after exec\n");
        return 5;
    }
    if (!strcmp(mode, "dlopen")) {
        void *h = dlopen(argv[2], RTLD_NOW);
        if (!h)
            return 1;
        void (*fn)(double) = (void (*)(double))dlsym(h, "dso_work");
        fn(0.3);
        dlclose(h);
        spin(0.05);
        printf("dlopen\n");
        return 0;
    }
    if (!strcmp(mode, "abort")) {
        spin(0.05);
        abort();
    }
    return 2;
}
