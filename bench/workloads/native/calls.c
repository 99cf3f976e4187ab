/* strata run's benchmark program (bench/native_run.py): built plain and with
 * -finstrument-functions.
 *
 *   calls fib N       fib(N): every call is a call (fib(32): 7 million)
 *   calls kernel N    N sweeps of a 5-point stencil on a 512x512 grid: real work,
 *                     one call a row
 *   calls regions N   N strata_push/strata_pop pairs (<strata.h>)
 *   calls empty       nothing: start-up and exit
 *
 * Prints a checksum that every configuration must reproduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

#define G 512
static double a[G][G], b[G][G];

__attribute__((noinline)) void row(int i)
{
    for (int j = 1; j < G - 1; j++)
        b[i][j] = 0.2 * (a[i][j] + a[i - 1][j] + a[i + 1][j] + a[i][j - 1] + a[i][j + 1]);
}

__attribute__((noinline)) void sweep(void)
{
    for (int i = 1; i < G - 1; i++)
        row(i);
    memcpy(a, b, sizeof a);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "empty";
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (!strcmp(mode, "fib")) {
        printf("%d\n", fib((int)n));
    } else if (!strcmp(mode, "kernel")) {
        for (int i = 0; i < G; i++)
            for (int j = 0; j < G; j++)
                a[i][j] = b[i][j] = (i * 7 + j * 3) % 11;
        for (long k = 0; k < n; k++)
            sweep();
        printf("%.6f\n", a[G / 2][G / 2]);
    } else if (!strcmp(mode, "regions")) {
        for (long k = 0; k < n; k++) {
            strata_push("r");
            strata_pop();
        }
        printf("%ld\n", n);
    } else {
        printf("0\n");
    }
    return 0;
}
