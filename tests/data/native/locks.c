/* strata run's lock test: a mutex held by one thread while another waits for it,
 * a condition variable waited on, and many locks nobody contends
 * (tests/test_run.py). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;

__attribute__((noinline)) void holder_work(void)
{
    pthread_mutex_lock(&m);
    usleep(200000);
    pthread_mutex_unlock(&m);
}

static void *holder(void *p)
{
    (void)p;
    holder_work();
    usleep(100000); /* the main thread waits on the condition meanwhile */
    pthread_mutex_lock(&cm);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&cm);
    return NULL;
}

__attribute__((noinline)) void waiter_work(void)
{
    pthread_mutex_lock(&m); /* held by the other thread for about 180 ms more */
    pthread_mutex_unlock(&m);
}

__attribute__((noinline)) void quiet_locks(void)
{
    pthread_mutex_t q = PTHREAD_MUTEX_INITIALIZER;
    for (int i = 0; i < 100000; i++) {
        pthread_mutex_lock(&q);
        pthread_mutex_unlock(&q);
    }
}

__attribute__((noinline)) void wait_ready(void)
{
    pthread_mutex_lock(&cm);
    while (!ready)
        pthread_cond_wait(&cv, &cm);
    pthread_mutex_unlock(&cm);
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    usleep(20000);
    waiter_work();
    quiet_locks();
    wait_ready();
    pthread_join(t, NULL);
    printf("locks\n");
    return 0;
}
