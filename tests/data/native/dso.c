/* A library the test program loads and unloads (dlopen, dlclose): its functions
 * are named after it is gone. */
#include <time.h>

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

volatile double dso_sink;

__attribute__((noinline)) void dso_inner(double secs)
{
    double t0 = cpu(), x = 0;
    while (cpu() - t0 < secs)
        for (int i = 0; i < 20000; i++)
            x += i * 0.5;
    dso_sink = x;
}

void dso_work(double secs)
{
    dso_inner(secs);
    dso_sink += 1;
}
