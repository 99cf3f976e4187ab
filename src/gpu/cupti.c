#define _GNU_SOURCE
#include "gpu/cupti.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The part of CUPTI's ABI used here (CUDA 13's headers; see the note in cupti.h). */
#define CUPTI_SUCCESS 0
#define CUPTI_ERROR_MAX_LIMIT_REACHED 12
#define CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED 39
#define CUPTI_ERROR_INSUFFICIENT_PRIVILEGES 35
#define CUPTI_API_ENTER 0
#define CUPTI_CB_DOMAIN_DRIVER_API 1
#define CUPTI_CB_DOMAIN_RUNTIME_API 2
#define KIND_MEMCPY 1
#define KIND_MEMSET 2
#define KIND_DRIVER 4
#define KIND_RUNTIME 5
#define KIND_CONCURRENT_KERNEL 10

#define PACKED __attribute__((packed)) __attribute__((aligned(8)))

typedef struct PACKED {             /* CUpti_ActivityKernel4 .. 10, leading fields */
    uint32_t kind;
    uint8_t cache_config, shared_memory_config;
    uint16_t registers_per_thread;
    uint32_t pgc_requested, pgc_executed;
    uint64_t start, end, completed;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_shared, dynamic_shared;
    uint32_t local_per_thread, local_total;
    uint32_t corr;
    int64_t grid_id;
    const char *name;
} kernel_rec_t;

typedef struct PACKED {             /* CUpti_ActivityMemcpy .. Memcpy6, leading fields */
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, corr;
} memcpy_rec_t;

typedef struct PACKED {             /* CUpti_ActivityMemset .. Memset4, leading fields */
    uint32_t kind;
    uint32_t value;
    uint64_t bytes, start, end;
    uint32_t device, context, stream, corr;
} memset_rec_t;

typedef struct PACKED {             /* CUpti_ActivityAPI (runtime and driver calls) */
    uint32_t kind, cbid;
    uint64_t start, end;
    uint32_t process, thread, corr, ret;
} api_rec_t;

typedef struct {                    /* CUpti_CallbackData */
    int site;
    const char *function;
    const void *params;
    void *ret;
    const char *symbol;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t corr;
} callback_data_t;

typedef void (*callback_fn)(void *, int, uint32_t, const void *);
typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

const char *const st_cupti_api_names[] = {
    "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz",
    "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernel_ptsz", "cudaGraphLaunch",
    "cudaGraphLaunch_ptsz", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz",
    "cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaMemcpy3D", "cudaMemcpy3DAsync", "cudaMemcpyPeer",
    "cudaMemcpyPeerAsync", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemset",
    "cudaMemsetAsync", "cudaMemset2D", "cudaMemset2DAsync", "cudaMemset3D", "cudaMemset3DAsync",
    "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2", "cuMemsetD8_v2", "cuMemsetD32_v2", "cuMemsetD8Async",
    "cuMemsetD32Async",
};
const int st_cupti_napi = (int)(sizeof st_cupti_api_names / sizeof st_cupti_api_names[0]);

/* The one instance: CUPTI's buffer callbacks take no argument. */
static st_cupti_t *_Atomic active;

/* The API function's index, or ST_CUPTI_API_OTHER for those that launch nothing
 * (cudaGetDevice ...): only "cuda"/"cu" + Launch, Memcpy, Memset, Graph. */
static int api_index(const char *fn)
{
    if (!fn || fn[0] != 'c' || fn[1] != 'u')
        return ST_CUPTI_API_OTHER;
    const char *rest = fn + 2;
    if (strncmp(rest, "da", 2) == 0)
        rest += 2;
    if (strncmp(rest, "Launch", 6) && strncmp(rest, "Memcpy", 6) && strncmp(rest, "Memset", 6) &&
        strncmp(rest, "GraphLaunch", 11))
        return ST_CUPTI_API_OTHER;
    for (int i = 0; i < st_cupti_napi; i++) {
        const char *name = st_cupti_api_names[i];
        size_t n = strlen(name);
        /* the name, or the name and a version ("cudaLaunchKernel_v7000") */
        if (strncmp(fn, name, n) == 0 && (!fn[n] || (fn[n] == '_' && fn[n + 1] == 'v')))
            return i;
    }
    return st_cupti_napi; /* a launch, copy or set of a name not listed */
}

/* api_index by the name's address: CUPTI's function names are global constants, so
 * a launch costs one load here rather than a scan of the names (a launch takes a few
 * microseconds; the scan would be a few per cent of it). Each slot holds the
 * address << 8 | index + 1 in one word (addresses below 2^56), so that threads
 * filling it meanwhile never pair an address with another's index. */
static _Atomic uint64_t api_cache[256];

static int api_lookup(const char *fn)
{
    uint64_t key = (uint64_t)(uintptr_t)fn;
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 56);
    uint64_t e = atomic_load_explicit(&api_cache[h], memory_order_relaxed);
    if (e && e >> 8 == key)
        return (int)(e & 0xff) - 1;
    int api = api_index(fn);
    if (key < (1ull << 56))
        atomic_store_explicit(&api_cache[h], key << 8 | (uint64_t)(api + 1), memory_order_relaxed);
    return api;
}

static void on_api(void *arg, int domain, uint32_t cbid, const void *data)
{
    (void)cbid;
    st_cupti_t *c = arg;
    const callback_data_t *cb = data;
    if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) || !cb)
        return;
    int api = api_lookup(cb->function);
    if (api == ST_CUPTI_API_OTHER)
        return;
    int driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if (cb->site == CUPTI_API_ENTER)
        c->sink.api_enter(c->sink.arg, cb->corr, api < st_cupti_napi ? api : ST_CUPTI_API_OTHER,
                          driver);
    else
        c->sink.api_exit(c->sink.arg, cb->corr, driver);
}

static void on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    st_cupti_t *c = atomic_load(&active);
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    if (c->nfree > 0) {
        *buffer = c->pool[--c->nfree];
        *size = ST_CUPTI_BUFFER_BYTES;
    }
    pthread_mutex_unlock(&c->lock);
}

static void deliver(st_cupti_t *c, const void *rec)
{
    st_cupti_activity_t a;
    memset(&a, 0, sizeof a);
    uint32_t kind;
    memcpy(&kind, rec, sizeof kind);
    if (kind == KIND_CONCURRENT_KERNEL) {
        const kernel_rec_t *k = rec;
        a = (st_cupti_activity_t){.kind = ST_CUPTI_KERNEL, .device = k->device,
                                  .stream = k->stream, .corr = k->corr, .start = k->start,
                                  .end = k->end, .name = k->name};
    } else if (kind == KIND_MEMCPY) {
        const memcpy_rec_t *m = rec;
        a = (st_cupti_activity_t){.kind = ST_CUPTI_MEMCPY, .device = m->device,
                                  .stream = m->stream, .corr = m->corr, .start = m->start,
                                  .end = m->end, .bytes = m->bytes, .copy_kind = m->copy_kind};
    } else if (kind == KIND_MEMSET) {
        const memset_rec_t *m = rec;
        a = (st_cupti_activity_t){.kind = ST_CUPTI_MEMSET, .device = m->device,
                                  .stream = m->stream, .corr = m->corr, .start = m->start,
                                  .end = m->end, .bytes = m->bytes};
    } else if (kind == KIND_RUNTIME || kind == KIND_DRIVER) {
        const api_rec_t *r = rec;
        const char *name = NULL;
        if (!c->callback_name ||
            c->callback_name(kind == KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                  : CUPTI_CB_DOMAIN_DRIVER_API,
                             r->cbid, &name) != CUPTI_SUCCESS)
            name = NULL;
        a = (st_cupti_activity_t){.kind = ST_CUPTI_API, .corr = r->corr, .start = r->start,
                                  .end = r->end, .name = name, .thread = r->thread};
    } else {
        return;
    }
    atomic_fetch_add(&c->records, 1);
    c->sink.activity(c->sink.arg, &a);
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    st_cupti_t *c = atomic_load(&active);
    if (!c || !buffer)
        return;
    void *rec = NULL;
    while (valid && c->next_record(buffer, valid, &rec) == CUPTI_SUCCESS && rec)
        deliver(c, rec);
    size_t lost = 0;
    if (c->num_dropped && c->num_dropped(ctx, stream, &lost) == CUPTI_SUCCESS && lost)
        atomic_fetch_add(&c->dropped, lost);
    pthread_mutex_lock(&c->lock);
    if (c->nfree < ST_CUPTI_BUFFERS)
        c->pool[c->nfree++] = buffer;
    pthread_mutex_unlock(&c->lock);
}

/* dlopen's first success among the usual places; NULL when none. */
static void *load(const char *path, const char *site, char *got, size_t gotsize)
{
    void *h;
    if (path && *path) {
        snprintf(got, gotsize, "%s", path);
        return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    static const char *const fixed[] = {
        "libcupti.so", "/usr/local/cuda/lib64/libcupti.so",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so", "/usr/local/cuda/lib/libcupti.so",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if ((h = dlopen(fixed[i], RTLD_NOW | RTLD_LOCAL)) != NULL) {
            snprintf(got, gotsize, "%s", fixed[i]);
            return h;
        }
    char pattern[1024];
    const char *patterns[3] = {"/usr/local/cuda-*/lib*/libcupti.so",
                               "/usr/local/cuda-*/extras/CUPTI/lib64/libcupti.so", NULL};
    if (site && *site &&
        snprintf(pattern, sizeof pattern, "%s/nvidia/*/lib/libcupti.so*", site) < (int)sizeof pattern)
        patterns[2] = pattern;
    for (int p = 2; p >= 0; p--) { /* the wheel in the program's environment first */
        glob_t g;
        if (!patterns[p] || glob(patterns[p], 0, NULL, &g) != 0)
            continue;
        h = NULL;
        for (size_t i = g.gl_pathc; i > 0 && !h; i--) /* the newest version, sorted last */
            if ((h = dlopen(g.gl_pathv[i - 1], RTLD_NOW | RTLD_LOCAL)) != NULL)
                snprintf(got, gotsize, "%s", g.gl_pathv[i - 1]);
        globfree(&g);
        if (h)
            return h;
    }
    *got = '\0';
    return NULL;
}

/* CUPTI's text for a result code, or its number. */
static const char *result_text(void *lib, int rc, char *buf, size_t size)
{
    int (*text)(int, const char **) = (int (*)(int, const char **))dlsym(lib, "cuptiGetResultString");
    const char *s = NULL;
    if (text && text(rc, &s) == CUPTI_SUCCESS && s)
        snprintf(buf, size, "%s", s);
    else
        snprintf(buf, size, "CUPTI error %d", rc);
    return buf;
}

int st_cupti_open(st_cupti_t *c, const char *path, const char *site,
                  const st_cupti_sink_t *sink, char *why, size_t whysize)
{
    memset(c, 0, sizeof *c);
    c->sink = *sink;
    void *h = load(path, site, c->path, sizeof c->path);
    if (!h) {
        if (path && *path)
            snprintf(why, whysize, "cannot load CUPTI from '%s' (%s)", path, dlerror());
        else
            snprintf(why, whysize, "libcupti.so not found (CUDA toolkit, or pip install "
                                   "nvidia-cuda-cupti; STRATA_CUPTI_LIBRARY names it)");
        return -1;
    }
    int (*subscribe)(void **, callback_fn, void *) =
        (int (*)(void **, callback_fn, void *))dlsym(h, "cuptiSubscribe");
    int (*reg)(request_fn, complete_fn) =
        (int (*)(request_fn, complete_fn))dlsym(h, "cuptiActivityRegisterCallbacks");
    int (*enable)(int) = (int (*)(int))dlsym(h, "cuptiActivityEnable");
    c->get_ts = (int (*)(uint64_t *))dlsym(h, "cuptiGetTimestamp");
    c->flush_all = (int (*)(uint32_t))dlsym(h, "cuptiActivityFlushAll");
    c->next_record = (int (*)(uint8_t *, size_t, void **))dlsym(h, "cuptiActivityGetNextRecord");
    c->num_dropped = (int (*)(void *, uint32_t, size_t *))dlsym(h, "cuptiActivityGetNumDroppedRecords");
    c->disable = (int (*)(int))dlsym(h, "cuptiActivityDisable");
    c->enable_domain = (int (*)(uint32_t, void *, int))dlsym(h, "cuptiEnableDomain");
    c->unsubscribe = (int (*)(void *))dlsym(h, "cuptiUnsubscribe");
    c->callback_name = (int (*)(int, uint32_t, const char **))dlsym(h, "cuptiGetCallbackName");
    if (!subscribe || !reg || !enable || !c->get_ts || !c->flush_all || !c->next_record ||
        !c->disable || !c->enable_domain || !c->unsubscribe) {
        snprintf(why, whysize, "'%s' is not a CUPTI library (functions missing)", c->path);
        goto fail_lib;
    }
    pthread_mutex_init(&c->lock, NULL);
    for (c->nfree = 0; c->nfree < ST_CUPTI_BUFFERS; c->nfree++)
        if (!(c->pool[c->nfree] = aligned_alloc(8, ST_CUPTI_BUFFER_BYTES))) {
            snprintf(why, whysize, "out of memory for CUPTI's buffers");
            goto fail_pool;
        }
    char text[160];
    int rc = subscribe(&c->subscriber, on_api, c);
    if (rc != CUPTI_SUCCESS) {
        if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            snprintf(why, whysize, "another CUPTI subscriber (Nsight Systems or Nsight Compute?) "
                                   "holds the GPU's callbacks");
        else if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD) &&
                 !dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))
            snprintf(why, whysize, "no NVIDIA driver (libcuda.so.1 not found; cuptiSubscribe: %s)",
                     result_text(h, rc, text, sizeof text));
        else
            snprintf(why, whysize, "CUPTI did not start (cuptiSubscribe: %s)",
                     result_text(h, rc, text, sizeof text));
        c->subscriber = NULL;
        goto fail_pool;
    }
    if ((rc = c->enable_domain(1, c->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)) != CUPTI_SUCCESS ||
        (rc = c->enable_domain(1, c->subscriber, CUPTI_CB_DOMAIN_DRIVER_API)) != CUPTI_SUCCESS) {
        snprintf(why, whysize, "CUPTI did not start (cuptiEnableDomain: %s)",
                 result_text(h, rc, text, sizeof text));
        goto fail_sub;
    }
    atomic_store(&active, c);
    if ((rc = reg(on_request, on_complete)) != CUPTI_SUCCESS) {
        snprintf(why, whysize, "CUPTI did not start (cuptiActivityRegisterCallbacks: %s)",
                 result_text(h, rc, text, sizeof text));
        goto fail_active;
    }
    static const int kinds[] = {KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME,
                                KIND_DRIVER};
    size_t nkinds = sink->api_calls ? 5 : 3; /* the API calls' records: for a timeline */
    for (size_t i = 0; i < nkinds; i++)
        if ((rc = enable(kinds[i])) != CUPTI_SUCCESS) {
            if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
                snprintf(why, whysize, "another CUPTI client (Nsight Systems or Nsight Compute?) "
                                       "holds the GPU's activity records");
            else
                snprintf(why, whysize, "CUPTI did not start (cuptiActivityEnable: %s)",
                         result_text(h, rc, text, sizeof text));
            for (size_t j = 0; j < i; j++)
                c->disable(kinds[j]);
            goto fail_active;
        }
    c->lib = h;
    return 0;
fail_active:
    atomic_store(&active, NULL);
fail_sub:
    c->unsubscribe(c->subscriber);
    c->subscriber = NULL;
fail_pool:
    for (int i = 0; i < c->nfree; i++)
        free(c->pool[i]);
    c->nfree = 0;
    pthread_mutex_destroy(&c->lock);
fail_lib:
    /* CUPTI may have started threads: it stays loaded */
    return -1;
}

uint64_t st_cupti_timestamp(const st_cupti_t *c)
{
    uint64_t t = 0;
    if (!c->lib || c->get_ts(&t) != CUPTI_SUCCESS)
        return 0;
    return t;
}

void st_cupti_stop(st_cupti_t *c)
{
    if (!c->lib)
        return;
    c->flush_all(1 /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */);
    static const int kinds[] = {KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_RUNTIME,
                                KIND_DRIVER};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        c->disable(kinds[i]);
    c->enable_domain(0, c->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    c->enable_domain(0, c->subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    c->unsubscribe(c->subscriber);
    c->subscriber = NULL;
    c->flush_all(1); /* what the disabling completed */
}

void st_cupti_close(st_cupti_t *c)
{
    if (!c->lib)
        return;
    atomic_store(&active, NULL);
    pthread_mutex_lock(&c->lock);
    /* buffers CUPTI still holds (never completed) are left to it */
    for (int i = 0; i < c->nfree; i++)
        free(c->pool[i]);
    c->nfree = 0;
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_destroy(&c->lock);
    c->lib = NULL;
}

const char *st_cupti_copy_name(uint32_t k)
{
    static const char *const names[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
    return k < sizeof names / sizeof names[0] ? names[k] : "other";
}
