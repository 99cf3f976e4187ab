/* Unit tests of the per-thread sampling timers (src/sampling/timers.h): four
 * threads spin, each armed by the main thread with its own CPU-clock timer; every
 * signal arrives on the thread it samples, with that thread's context; the wall
 * clock samples a sleeping thread, the CPU clock does not; a handler the program
 * puts on the signal keeps it while the timers move; a signal of ours sent by
 * someone else is forwarded; uninstall leaves no handler running. Also built with
 * ThreadSanitizer (make test-tsan) and ASan/UBSan (make test-asan). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sampling/timers.h"

#include "check.h"

#define NTHREADS 4

typedef struct {
    pid_t tid;
    _Atomic uint64_t hits, periods, wrong_thread;
    _Atomic int ready, stop;
    int sleep_only;
    double cpu_s;              /* its CPU time when it stopped */
} worker_t;

static void on_sample(void *ctx, void *uc, uint32_t periods)
{
    (void)uc;
    worker_t *w = ctx;
    if (st_sigsampler_gettid() != w->tid)
        atomic_fetch_add(&w->wrong_thread, 1);
    atomic_fetch_add(&w->hits, 1);
    atomic_fetch_add(&w->periods, periods);
}

static double now_s(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *work(void *arg)
{
    worker_t *w = arg;
    w->tid = st_sigsampler_gettid();
    atomic_store(&w->ready, 1);
    volatile uint64_t x = 0;
    while (!atomic_load(&w->stop)) {
        if (w->sleep_only) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL); /* restarted by no one: EINTR is fine here */
        } else {
            x++;
        }
    }
    w->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID);
    return NULL;
}

/* Runs n workers under a sampler on `clock` at `hz` for `secs`. */
static void run(st_sigsampler_t *s, worker_t *w, int n, double secs)
{
    pthread_t t[NTHREADS];
    for (int i = 0; i < n; i++) {
        pthread_create(&t[i], NULL, work, &w[i]);
        while (!atomic_load(&w[i].ready))
            sched_yield();
        st_msg_t msg;
        CHECK(st_sigsampler_arm(s, w[i].tid, &w[i], &msg) >= 0);
    }
    double t0 = now_s(CLOCK_MONOTONIC);
    while (now_s(CLOCK_MONOTONIC) - t0 < secs) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++)
        atomic_store(&w[i].stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void test_cpu_threads(void)
{
    static st_sigsampler_t s;
    static worker_t w[NTHREADS];
    memset(w, 0, sizeof w);
    st_msg_t msg;
    CHECK(st_sigsampler_install(&s, 0, ST_SIGCLOCK_CPU, 1000000, on_sample, &msg) == 0);
    CHECK(s.signo >= SIGRTMIN && s.signo <= SIGRTMAX);
    run(&s, w, NTHREADS, 0.6);
    st_sigsampler_uninstall(&s);
    for (int i = 0; i < NTHREADS; i++) {
        CHECK(atomic_load(&w[i].hits) > 5);
        CHECK(atomic_load(&w[i].wrong_thread) == 0);
        /* a period a millisecond of the thread's CPU, whatever the tick rate (the
         * overruns count the periods between signals); the last partial one and
         * the time before arming are not */
        double want = w[i].cpu_s * 1000.0, got = (double)atomic_load(&w[i].periods);
        CHECK(got > 0.75 * want - 5 && got <= want + 1);
        if (!(got > 0.75 * want - 5 && got <= want + 1))
            fprintf(stderr, "thread %d: %.0f periods for %.0f ms of CPU\n", i, got, want);
    }
}

static void test_wall_sees_sleepers(void)
{
    static st_sigsampler_t s;
    static worker_t w[2];
    memset(w, 0, sizeof w);
    w[0].sleep_only = 1;
    st_msg_t msg;
    /* the wall clock: the sleeping thread is sampled too */
    CHECK(st_sigsampler_install(&s, 0, ST_SIGCLOCK_WALL, 5000000, on_sample, &msg) == 0);
    run(&s, w, 1, 0.3);
    st_sigsampler_uninstall(&s);
    CHECK(atomic_load(&w[0].periods) >= 30);
    /* the CPU clock: hardly at all */
    memset(w, 0, sizeof w);
    w[0].sleep_only = 1;
    CHECK(st_sigsampler_install(&s, 0, ST_SIGCLOCK_CPU, 5000000, on_sample, &msg) == 0);
    run(&s, w, 1, 0.3);
    st_sigsampler_uninstall(&s);
    CHECK(atomic_load(&w[0].periods) < 5);
}

static _Atomic int program_hits;
static void program_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&program_hits, 1);
}

static void test_program_takes_the_signal(void)
{
    static st_sigsampler_t s;
    static worker_t w[1];
    memset(w, 0, sizeof w);
    st_msg_t msg;
    CHECK(st_sigsampler_install(&s, 0, ST_SIGCLOCK_CPU, 1000000, on_sample, &msg) == 0);
    int ours = s.signo;
    /* a signal on our number that no timer sent goes where it would have gone:
     * here, to the program's handler installed over ours */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = program_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(ours, &sa, NULL);
    CHECK(st_sigsampler_check(&s, &msg) == 1);
    CHECK(s.signo != ours && strstr(msg.text, "moved to signal") != NULL);
    run(&s, w, 1, 0.2);
    raise(ours);
    CHECK(atomic_load(&program_hits) == 1);
    CHECK(atomic_load(&w[0].hits) > 5);
    CHECK(st_sigsampler_check(&s, &msg) == 0);
    st_sigsampler_uninstall(&s);
    sa.sa_handler = SIG_DFL;
    sigaction(ours, &sa, NULL);
}

static void test_bad_signal(void)
{
    static st_sigsampler_t s;
    st_msg_t msg;
    CHECK(st_sigsampler_install(&s, SIGUSR1, ST_SIGCLOCK_CPU, 1000000, on_sample, &msg) ==
          ST_EINVAL);
    CHECK(strstr(msg.text, "not a real-time signal") != NULL);
}

int main(void)
{
    test_bad_signal();
    test_cpu_threads();
    test_wall_sees_sleepers();
    test_program_takes_the_signal();
    return st_check_report();
}
