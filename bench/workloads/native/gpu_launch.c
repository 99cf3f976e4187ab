/* The GPU benchmark's program (bench/gpu_bench.py): a training-loop-like sequence of
 * launches through the stand-in libcupti (tests/data/gpu/fake_cupti.c), whose
 * fake_launch / fake_copy stand where a CUDA program calls cudaLaunchKernel and
 * cudaMemcpyAsync: each calls a CUPTI subscriber's callback at the API's enter and
 * exit and writes the activity record, as CUPTI does. argv[1] steps of 8 kernel
 * launches and one copy; prints how many it made. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void fake_launch(const char *fn, const char *kernel, uint32_t stream, uint64_t ns);
void fake_copy(const char *fn, int copy_kind, uint64_t bytes, uint32_t stream, uint64_t ns);
void fake_flush(void);

__attribute__((noinline)) static void forward(int i)
{
    for (int k = 0; k < 4; k++)
        fake_launch("cudaLaunchKernel", "_Z4gemmILi128EEvPKfS1_Pfi", 7, 20000 + (uint64_t)(i % 3));
}

__attribute__((noinline)) static void backward(int i)
{
    for (int k = 0; k < 4; k++)
        fake_launch("cudaLaunchKernel", "_Z8gemm_btILi64EEvPKfS1_Pfi", 7, 30000 + (uint64_t)(i % 5));
}

__attribute__((noinline)) static void load_batch(void)
{
    fake_copy("cudaMemcpyAsync", 1, 1 << 16, 13, 8000);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 1000;
    long launches = 0;
    for (int i = 0; i < steps; i++) {
        load_batch();
        forward(i);
        backward(i);
        launches += 9;
        if (i % 100 == 99)
            fake_flush(); /* CUPTI hands a buffer back now and then */
    }
    fake_flush();
    printf("launched %ld\n", launches);
    return 0;
}
