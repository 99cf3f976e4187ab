/* The rest of <strata.h>: strata_stop/strata_start around what is not profiled,
 * counters and a mark (tests/test_run.py). fib(15) makes 1973 calls of fib,
 * fib(5) 15. */
#include <stdio.h>

#include <strata.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void phase(const char *name, int n)
{
    strata_push(name);
    fib(n);
    strata_pop();
}

int main(void)
{
    strata_stop();
    phase("setup", 10);          /* not profiled */
    strata_start();
    for (int it = 0; it < 5; it++) {
        phase("solve", 15);
        strata_counter("residual", 1.0 / (double)(1 << it));
    }
    strata_mark("converged");
    strata_push("outer");        /* open across a stop: ends as it would */
    strata_stop();
    fib(12);                     /* not profiled */
    strata_push("teardown");     /* pushed while stopped ... */
    strata_start();
    strata_pop();                /* ... so its pop closes nothing */
    strata_pop();                /* outer */
    fib(5);
    printf("done\n");
    return 0;
}
