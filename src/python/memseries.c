/* Memory over time (see memory.h): a thread of strata's samples the resident size,
 * and the heap in the modes that count it, every interval. */
#include "python/memhooks.h"
#include "python/memory.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

/* The samples (see st_pymem_series_start). */
static struct {
    pthread_t thread;
    int running;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    uint64_t interval_ns;
    uint64_t *t;
    int64_t *rss, *heap;
    size_t n, cap;
    uint64_t mono0, real0;     /* the clocks when the series began */
} ser = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t st_pymem_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One sample (the thread's, or the last one at stop), kept with the lock held. */
static void take_sample(void)
{
    if (ser.n == ST_PYMEM_SERIES_MAX) { /* every other one goes; the step doubles */
        for (size_t i = 0; i < ser.n / 2; i++) {
            ser.t[i] = ser.t[2 * i];
            ser.rss[i] = ser.rss[2 * i];
            if (ser.heap)
                ser.heap[i] = ser.heap[2 * i];
        }
        ser.n /= 2;
        ser.interval_ns *= 2;
    }
    if (ser.n == ser.cap)
        return; /* no room was made at the start */
    ser.t[ser.n] = st_pymem_clock_ns();
    ser.rss[ser.n] = st_pymem_rss();
    if (ser.heap)
        ser.heap[ser.n] = st_pymem_heap();
    ser.n++;
}

static void *series_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ser.lock);
    while (!ser.stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + ser.interval_ns;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        while (!ser.stop && pthread_cond_timedwait(&ser.cond, &ser.lock, &until) == 0) {
        }
        if (!ser.stop) {
            st_pymem_native_poll(); /* objects that came by a dlopen strata did not see */
            take_sample();
        }
    }
    pthread_mutex_unlock(&ser.lock);
    return NULL;
}

int st_pymem_series_start(uint64_t interval_ns)
{
    if (ser.running || st_pymem_mode() == ST_PYMEM_OFF)
        return -1;
    ser.cap = ST_PYMEM_SERIES_MAX;
    ser.t = malloc(ser.cap * sizeof *ser.t);
    ser.rss = malloc(ser.cap * sizeof *ser.rss);
    int heap = st_pymem_counts_heap(st_pymem_mode());
    ser.heap = heap ? malloc(ser.cap * sizeof *ser.heap) : NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int ok = ser.t && ser.rss && (!heap || ser.heap) &&
             pthread_cond_init(&ser.cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (ok) {
        ser.interval_ns = interval_ns;
        ser.stop = 0;
        ser.n = 0;
        struct timespec real;
        clock_gettime(CLOCK_REALTIME, &real);
        ser.mono0 = st_pymem_clock_ns();
        ser.real0 = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
        take_sample(); /* the start, before the program goes on */
        /* the thread takes no signal the program's threads should get */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ok = pthread_create(&ser.thread, NULL, series_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (!ok) {
        free(ser.t);
        free(ser.rss);
        free(ser.heap);
        ser.t = NULL, ser.rss = ser.heap = NULL;
        ser.cap = 0;
        return -1;
    }
    ser.running = 1;
    return 0;
}

void st_pymem_series_stop(void)
{
    if (!ser.running)
        return;
    pthread_mutex_lock(&ser.lock);
    ser.stop = 1;
    pthread_cond_signal(&ser.cond);
    pthread_mutex_unlock(&ser.lock);
    pthread_join(ser.thread, NULL);
    pthread_mutex_lock(&ser.lock);
    take_sample(); /* the end */
    pthread_mutex_unlock(&ser.lock);
    ser.running = 0;
}

void st_pymem_series_base(uint64_t *mono0, uint64_t *real0)
{
    *mono0 = ser.mono0;
    *real0 = ser.real0;
}

size_t st_pymem_series(const uint64_t **t, const int64_t **rss, const int64_t **heap,
                       uint64_t *interval_ns)
{
    *t = ser.t;
    *rss = ser.rss;
    *heap = ser.heap;
    *interval_ns = ser.interval_ns;
    return ser.n;
}

void st_pymem_series_after_fork(void)
{
    pthread_mutex_init(&ser.lock, NULL);
    ser.running = 0;
}
