/* A CUDA-like program for tests/test_gpu.py: instead of cudaLaunchKernel and
 * cudaMemcpyAsync it calls the stand-in libcupti's fake_launch and fake_copy, from
 * known functions, a known number of times (argv[1] launches of each kernel). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void fake_launch(const char *fn, const char *kernel, uint32_t stream, uint64_t ns);
void fake_copy(const char *fn, int copy_kind, uint64_t bytes, uint32_t stream, uint64_t ns);
void fake_set(const char *fn, uint64_t bytes, uint32_t stream, uint64_t ns);
void fake_flush(void);

__attribute__((noinline)) void step(int i)
{
    fake_launch("cudaLaunchKernel", "_Z6matmulPfS_S_i", 7, 20000 + (uint64_t)(i % 3) * 1000);
}

__attribute__((noinline)) void upload(void)
{
    fake_copy("cudaMemcpyAsync", 1, 1 << 20, 13, 100000); /* HtoD: 1 MiB in 100 us */
    fake_set("cudaMemsetAsync", 4096, 13, 2000);
}

__attribute__((noinline)) void reduce(void)
{
    fake_launch("cuLaunchKernel", "reduce_kernel", 7, 5000);
    fake_copy("cudaMemcpy", 2, 4096, 0, 4000);   /* DtoH */
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    upload();
    for (int i = 0; i < n; i++) {
        step(i);
        if (i % 1000 == 999)
            fake_flush();
    }
    reduce();
    printf("launched %d\n", n + 1);
    return 3;
}
