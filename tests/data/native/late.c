/* Threads and strata_stop/strata_start (tests/test_run.py): a thread made while
 * recording is stopped, and one made before any function of the program ran (a
 * constructor's), both work after strata_start(): their calls are recorded from
 * then on, in trees of their own. fib(12) makes 465 calls of fib. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

#include <strata.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static pthread_barrier_t stopped, ready, go;

static void *worker(void *name)
{
    pthread_setname_np(pthread_self(), name);
    pthread_barrier_wait(&stopped); /* main has called strata_stop() */
    fib(12);                    /* before the start: not recorded */
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);  /* main has called strata_start() */
    return (void *)(long)fib(12);
}

static pthread_t early;

__attribute__((constructor)) static void make_early(void)
{
    pthread_barrier_init(&stopped, NULL, 3);
    pthread_barrier_init(&ready, NULL, 3);
    pthread_barrier_init(&go, NULL, 3);
    pthread_create(&early, NULL, worker, "early");
}

int main(void)
{
    strata_stop();
    pthread_t late;
    pthread_create(&late, NULL, worker, "late");
    pthread_barrier_wait(&stopped);
    fib(12);                    /* stopped */
    pthread_barrier_wait(&ready); /* every stopped fib(12) is done */
    strata_start();
    pthread_barrier_wait(&go);
    void *a, *b;
    pthread_join(early, &a);
    pthread_join(late, &b);
    printf("%ld %ld\n", (long)a, (long)b);
    return 0;
}
