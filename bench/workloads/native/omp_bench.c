/* The OpenMP benchmark's program (bench/native_omp.py): `omp_bench N` runs N
 * parallel regions, each a worksharing loop over 20,000 doubles with a reduction
 * (and its barrier), and prints a checksum every configuration must reproduce.
 * Built with clang -fopenmp (LLVM's libomp: OMPT). */
#include <stdio.h>
#include <stdlib.h>

#define SIZE 20000

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    static double a[SIZE];
    for (int i = 0; i < SIZE; i++)
        a[i] = (double)(i % 13);
    double sum = 0;
    for (long r = 0; r < n; r++) {
#pragma omp parallel for reduction(+ : sum)
        for (int i = 0; i < SIZE; i++)
            sum += a[i] * 0.5 + (double)(i & 3);
    }
    printf("%.0f\n", sum);
    return 0;
}
