/* strata run's OpenMP test: 5 parallel regions, each a loop of 80 iterations on 4
 * threads (tests/test_run.py), built with clang -fopenmp (LLVM's libomp: OMPT) and
 * gcc -fopenmp (libgomp: none). */
#include <stdio.h>

double work(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += i * 0.5;
    return s;
}

int main(void)
{
    double total = 0;
    for (int r = 0; r < 5; r++) {
#pragma omp parallel num_threads(4) reduction(+ : total)
        {
#pragma omp for
            for (int i = 0; i < 80; i++)
                total += work(100000);
        }
    }
    printf("%s\n", total > 0 ? "omp" : "none");
    return 0;
}
