/* NVIDIA GPUs' activities through CUPTI (libcupti.so, part of the CUDA toolkit or
 * of the nvidia-cuda-cupti wheel), loaded with dlopen so that strata builds and
 * runs without CUDA.
 *
 * Design note. CUPTI has two halves, both used here:
 *   - callbacks: the runtime and driver APIs call a subscriber at the enter and the
 *     exit of each API function, in the thread that calls it; the enter of a
 *     launch, copy or set (cudaLaunchKernel, cudaMemcpyAsync, cuLaunchKernel ...)
 *     goes to the sink's api_enter with the call's correlation id, so that the
 *     caller can note which code launched it, and its exit to api_exit (a runtime
 *     call makes driver calls of its own, each with its own id: the sink can tell
 *     them apart as nested);
 *   - activities: kernels, copies and sets (with their device, stream, GPU start
 *     and end, and the same correlation id), and for a timeline the API calls
 *     (their thread, start and end) are written by CUPTI into buffers that
 *     strata lends it (buffer requested) and handed back when full or flushed
 *     (buffer completed), on a thread of CUPTI's; each record goes to the sink's
 *     activity and the buffer back to the pool.
 * The buffers: a fixed pool (ST_CUPTI_BUFFERS of ST_CUPTI_BUFFER_BYTES) made at
 * open; a request finding the pool empty gets none, and CUPTI drops the records it
 * had for it (counted in `dropped`): the program is never held up, memory never
 * grows.
 *
 * The ABI. CUPTI's headers are not needed: the few functions and the leading
 * fields of the records read here are declared in cupti.c, with the values of
 * CUDA 13's cupti_activity.h, cupti_callbacks.h and cupti_result.h. The records'
 * leading fields (up to the correlation id, and the kernel's name) have kept their
 * place since CUDA 9's CUpti_ActivityKernel4, CUpti_ActivityMemcpy and
 * CUpti_ActivityMemset; records are walked with cuptiActivityGetNextRecord, so
 * their full size is CUPTI's business.
 *
 * One per process (CUPTI's buffer callbacks carry no argument). Open, flush and
 * close from one thread; api_enter runs in any thread that calls CUDA, activity
 * in CUPTI's thread or the one that flushes. */
#ifndef STRATA_GPU_CUPTI_H
#define STRATA_GPU_CUPTI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define ST_CUPTI_BUFFERS 16
#define ST_CUPTI_BUFFER_BYTES (1u << 20)

typedef enum {
    ST_CUPTI_KERNEL = 1,
    ST_CUPTI_MEMCPY = 2,
    ST_CUPTI_MEMSET = 3,
    ST_CUPTI_API = 4,          /* a runtime or driver API call, on a CPU thread */
} st_cupti_kind_t;

/* One activity, as the sink gets it. */
typedef struct {
    st_cupti_kind_t kind;
    uint32_t device, stream, corr;
    uint64_t start, end;       /* CUPTI's nanoseconds (st_cupti_timestamp's clock) */
    uint64_t bytes;            /* copies and sets */
    uint32_t copy_kind;        /* copies: CUPTI's CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD ...) */
    const char *name;          /* kernels: CUPTI's (mangled) name; API calls: the
                                * function's ("cudaStreamSynchronize"); valid during
                                * the call, NULL when CUPTI does not say */
    uint32_t thread;           /* API calls: CUPTI's id of the calling thread */
} st_cupti_activity_t;

/* What CUPTI's events go to. `api` is the API function's index in
 * st_cupti_api_names (a launch, copy or set) or ST_CUPTI_API_OTHER (one not
 * listed); `driver` 1 for the driver API (cu...), 0 for the runtime's (cuda...). */
typedef struct {
    void (*api_enter)(void *arg, uint32_t corr, int api, int driver);
    void (*api_exit)(void *arg, uint32_t corr, int driver);
    void (*activity)(void *arg, const st_cupti_activity_t *a);
    void *arg;
    int api_calls;             /* 1: every runtime and driver call's record too (a
                                * timeline's API slices); 0: launches' callbacks only */
} st_cupti_sink_t;

/* The API functions whose enter goes to api_enter, by name. */
extern const char *const st_cupti_api_names[];
extern const int st_cupti_napi;
#define ST_CUPTI_API_OTHER (-1)

typedef struct {
    void *lib;                 /* dlopen handle */
    void *subscriber;
    st_cupti_sink_t sink;
    char path[512];            /* the library loaded */
    pthread_mutex_t lock;      /* the pool */
    uint8_t *pool[ST_CUPTI_BUFFERS];
    int nfree;
    _Atomic uint64_t dropped;  /* records lost: no buffer free, or CUPTI's count */
    _Atomic uint64_t records;  /* records handed to the sink */
    int (*get_ts)(uint64_t *);
    int (*flush_all)(uint32_t);
    int (*next_record)(uint8_t *, size_t, void **);
    int (*num_dropped)(void *, uint32_t, size_t *);
    int (*disable)(int);
    int (*enable_domain)(uint32_t, void *, int);
    int (*unsubscribe)(void *);
    int (*callback_name)(int, uint32_t, const char **); /* may be NULL */
} st_cupti_t;

/* Loads CUPTI (`path` if not NULL or empty, else libcupti.so from the usual places:
 * the library path, the CUDA toolkit under /usr/local/cuda*, the nvidia-cuda-cupti
 * wheel under the folder `site` (a site-packages) when given), subscribes to the
 * runtime and driver APIs and enables the activity kinds: concurrent kernels,
 * copies and sets, and with sink->api_calls the runtime and driver API calls (a
 * synchronisation is such a call, cudaStreamSynchronize ..., whose record spans
 * the wait on the calling thread). Returns 0, or -1 with `why` saying in one
 * phrase what failed (no libcupti, no driver, another subscriber such as Nsight);
 * then nothing is left loaded. */
int st_cupti_open(st_cupti_t *c, const char *path, const char *site,
                  const st_cupti_sink_t *sink, char *why, size_t whysize);

/* CUPTI's clock now (ns); 0 when it cannot be read. */
uint64_t st_cupti_timestamp(const st_cupti_t *c);

/* Hands every record CUPTI holds to the sink (buffers completed in this thread),
 * then stops: no more callbacks or records. The end of the run. */
void st_cupti_stop(st_cupti_t *c);

/* Frees the pool (after st_cupti_stop). The library stays loaded: CUPTI cannot be
 * unloaded from a process that used it. */
void st_cupti_close(st_cupti_t *c);

/* A direction's name ("HtoD") for a CUpti_ActivityMemcpyKind, "other" for others. */
const char *st_cupti_copy_name(uint32_t copy_kind);

#endif
