/* strata run's OpenMP tasks test (tests/test_run.py): one thread of a team of 4
 * makes 20 tasks that each call work(), then computes fib(10) with a task for
 * each recursive call (176 tasks) and taskwaits; the others run tasks at the
 * region's closing barrier. Built with clang -fopenmp (LLVM's libomp: OMPT). */
#include <stdio.h>

double work(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += i * 0.5;
    return s;
}

int fib(int n)
{
    if (n < 2)
        return n;
    int a, b;
#pragma omp task shared(a)
    a = fib(n - 1);
#pragma omp task shared(b)
    b = fib(n - 2);
#pragma omp taskwait
    return a + b;
}

int main(void)
{
    double total = 0;
    int f = 0;
#pragma omp parallel num_threads(4)
#pragma omp single
    {
        for (int i = 0; i < 20; i++) {
#pragma omp task
            {
                double w = work(200000);
#pragma omp atomic
                total += w;
            }
        }
        f = fib(10);
    }
    printf("fib %d %s\n", f, total > 0 ? "tasks" : "none");
    return 0;
}
