/* The GPU benchmark's floor (bench/gpu_bench.py): the least a CUPTI client does,
 * preloaded into the program. Its constructor subscribes to the runtime and driver
 * APIs with a callback that reads the clock once, lends CUPTI buffers from a fixed
 * pool and, when one comes back, walks its records reading the clock once a record;
 * it enables the activity kinds strata's --gpu enables without a timeline (kernels,
 * copies, sets), and with CUPTIFLOOR_API=1 those it enables with one (the runtime
 * and driver API calls too). Nothing is kept: the cost of being a CUPTI client at
 * all. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define BUFFERS 16
#define BYTES (1u << 20)

static uint8_t *pool[BUFFERS];
static int nfree;
static volatile uint64_t sink;
static int (*next_record)(uint8_t *, size_t, void **);

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_api(void *ud, int domain, uint32_t cbid, const void *data)
{
    (void)ud, (void)domain, (void)cbid, (void)data;
    sink += clock_ns();
}

static void on_request(uint8_t **buffer, size_t *size, size_t *max)
{
    *buffer = nfree ? pool[--nfree] : NULL; /* CUPTI's threads, one at a time here */
    *size = *buffer ? BYTES : 0;
    *max = 0;
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    void *rec = NULL;
    while (next_record(buffer, valid, &rec) == 0)
        sink += clock_ns();
    pool[nfree++] = buffer;
}

__attribute__((constructor)) static void start(void)
{
    int (*subscribe)(void **, void (*)(void *, int, uint32_t, const void *), void *) =
        (int (*)(void **, void (*)(void *, int, uint32_t, const void *), void *))dlsym(
            RTLD_DEFAULT, "cuptiSubscribe");
    int (*domain)(uint32_t, void *, int) =
        (int (*)(uint32_t, void *, int))dlsym(RTLD_DEFAULT, "cuptiEnableDomain");
    int (*callbacks)(void (*)(uint8_t **, size_t *, size_t *),
                     void (*)(void *, uint32_t, uint8_t *, size_t, size_t)) =
        (int (*)(void (*)(uint8_t **, size_t *, size_t *),
                 void (*)(void *, uint32_t, uint8_t *, size_t, size_t)))
            dlsym(RTLD_DEFAULT, "cuptiActivityRegisterCallbacks");
    int (*enable)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cuptiActivityEnable");
    next_record = (int (*)(uint8_t *, size_t, void **))dlsym(RTLD_DEFAULT,
                                                             "cuptiActivityGetNextRecord");
    void *subscriber;
    if (!subscribe || !domain || !callbacks || !enable || !next_record ||
        subscribe(&subscriber, on_api, NULL) != 0)
        abort(); /* the benchmark would measure nothing */
    for (; nfree < BUFFERS; nfree++)
        if (!(pool[nfree] = aligned_alloc(8, BYTES)))
            abort();
    domain(1, subscriber, 1); /* driver API */
    domain(1, subscriber, 2); /* runtime API */
    callbacks(on_request, on_complete);
    enable(10); /* concurrent kernels */
    enable(1);  /* copies */
    enable(2);  /* sets */
    const char *api = getenv("CUPTIFLOOR_API");
    if (api && *api == '1') {
        enable(4); /* driver API calls */
        enable(5); /* runtime API calls */
    }
}
