/* strata run's test program: built with -finstrument-functions, known call counts
 * (fib(20) makes 21891 calls of fib, fib(15) 1973), <strata.h> regions on two
 * threads, the worker named with pthread_setname_np (tests/test_run.py). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <strata.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void *worker(void *p)
{
    (void)p;
    pthread_setname_np(pthread_self(), "worker");
    strata_push("worker-region");
    long r = fib(15);
    strata_pop();
    return (void *)r;
}

int main(int argc, char **argv)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    strata_push("compute");
    int r = fib(20);
    strata_pop();
    void *w;
    pthread_join(t, &w);
    printf("%d %ld\n", r, (long)w);
    return argc > 1 && strcmp(argv[1], "fail") == 0 ? 7 : 0;
}
