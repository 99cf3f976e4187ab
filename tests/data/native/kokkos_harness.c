/* Calls the Kokkos Tools ABI as Kokkos does: the tool library named by
 * KOKKOS_TOOLS_LIBS, opened with dlopen, its kokkosp_* functions looked up and
 * called around kernels, fences, regions, deep copies and allocations
 * (tests/test_run.py; no Kokkos build needed). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    char name[64];
} space_handle_t;

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile double sink;

static void spin(double secs)
{
    double t0 = cpu(), x = 0;
    while (cpu() - t0 < secs)
        for (int i = 0; i < 1000; i++)
            x += i;
    sink = x;
}

#define GET(name) void *name##_p = dlsym(h, #name); if (!name##_p) { fprintf(stderr, "no " #name "\n"); return 1; }

int main(void)
{
    const char *path = getenv("KOKKOS_TOOLS_LIBS");
    if (!path || !*path) {
        printf("no tools\n");
        return 0;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    GET(kokkosp_init_library) GET(kokkosp_finalize_library) GET(kokkosp_begin_parallel_for)
    GET(kokkosp_end_parallel_for) GET(kokkosp_begin_parallel_reduce)
    GET(kokkosp_end_parallel_reduce) GET(kokkosp_begin_fence) GET(kokkosp_end_fence)
    GET(kokkosp_push_profile_region) GET(kokkosp_pop_profile_region)
    GET(kokkosp_allocate_data) GET(kokkosp_deallocate_data) GET(kokkosp_begin_deep_copy)
    GET(kokkosp_end_deep_copy)
    ((void (*)(int, uint64_t, uint32_t, void *))kokkosp_init_library_p)(0, 20211015, 0, NULL);
    ((void (*)(const char *))kokkosp_push_profile_region_p)("setup");
    space_handle_t host;
    memset(&host, 0, sizeof host);
    strcpy(host.name, "Host");
    double *x = malloc(8000000), *y = malloc(8000000);
    ((void (*)(space_handle_t, const char *, const void *, uint64_t))kokkosp_allocate_data_p)(
        host, "x", x, 8000000);
    uint64_t id;
    for (int k = 0; k < 10; k++) {
        ((void (*)(const char *, uint32_t, uint64_t *))kokkosp_begin_parallel_for_p)("axpy", 0, &id);
        spin(0.005);
        ((void (*)(uint64_t))kokkosp_end_parallel_for_p)(id);
    }
    ((void (*)(const char *, uint32_t, uint64_t *))kokkosp_begin_parallel_reduce_p)("dot", 0, &id);
    spin(0.01);
    ((void (*)(uint64_t))kokkosp_end_parallel_reduce_p)(id);
    ((void (*)(const char *, uint32_t, uint64_t *))kokkosp_begin_fence_p)("sync", 0, &id);
    ((void (*)(uint64_t))kokkosp_end_fence_p)(id);
    ((void (*)(space_handle_t, const char *, const void *, space_handle_t, const char *,
               const void *, uint64_t))kokkosp_begin_deep_copy_p)(host, "y", y, host, "x", x,
                                                                  8000000);
    memcpy(y, x, 8000000);
    ((void (*)(void))kokkosp_end_deep_copy_p)();
    ((void (*)(space_handle_t, const char *, const void *, uint64_t))kokkosp_deallocate_data_p)(
        host, "x", x, 8000000);
    ((void (*)(void))kokkosp_pop_profile_region_p)();
    ((void (*)(void))kokkosp_finalize_library_p)();
    free(x);
    free(y);
    printf("kokkos\n");
    return 0;
}
