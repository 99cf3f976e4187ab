/* Event counters' test program (issue 13): toucher(n) takes one page fault on each
 * of n fresh pages (no huge pages), quiet(n) none; with "thread" a second thread,
 * named "toucher", touches 500 pages of its own. Built with -finstrument-functions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

__attribute__((noinline)) long toucher(long pages)
{
    char *p = mmap(NULL, (size_t)pages * 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    madvise(p, (size_t)pages * 4096, MADV_NOHUGEPAGE);
    long s = 0;
    for (long i = 0; i < pages; i++) {
        p[i * 4096] = 1;
        s += p[i * 4096];
    }
    munmap(p, (size_t)pages * 4096);
    return s;
}

__attribute__((noinline)) long quiet(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += i ^ (s >> 3);
    return s;
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "toucher");
    return (void *)toucher(500);
}

int main(int argc, char **argv)
{
    long s = 0;
    volatile long sink = 0;
    pthread_t t;
    int threaded = argc > 1 && strcmp(argv[1], "thread") == 0;
    if (threaded && pthread_create(&t, NULL, worker, NULL) != 0)
        return 3;
    for (int i = 0; i < 4; i++) {
        s += toucher(1000);
        sink += quiet(100000);
    }
    if (threaded) {
        void *r;
        pthread_join(t, &r);
        s += (long)r;
    }
    return s == 4000 + (threaded ? 500 : 0) ? 0 : 1;
}
