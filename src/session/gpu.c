#define _GNU_SOURCE /* dladdr */
#include "session/gpu.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "core/clock.h"
#include "gpu/cupti.h"
#include "session/session.h"

#define NCOPY 12            /* CUpti_ActivityMemcpyKind 0..10, then sets */
#define COPY_MEMSET 11
#define MAX_STREAMS 256     /* tracks: GPU streams and the threads' API calls */
#define API_DEVICE UINT32_MAX /* a track's device for a CPU thread's API calls */
#define MAX_APIS 256        /* API function names kept for the slices */
#define API_WHAT (-100)     /* a slice's `what` for API function i: API_WHAT - i */

typedef struct {            /* a launch: who launched correlation id key - 1 */
    _Atomic uint64_t key;
    _Atomic(st_rec_thread_t *) th;
    _Atomic uint32_t node;
    _Atomic uint32_t flow;  /* the flow its record ends: its own id, or that of the
                             * runtime call it was made in */
} slot_t;

/* The runtime launch the thread is in (its correlation id; 0: none): the driver
 * calls it makes are the same launch, so they note the same flow and start none. */
static __thread uint32_t in_runtime;

typedef struct {
    uint64_t t0, t1;        /* CUPTI's ns */
    uint32_t flow;          /* the flow it ends (0: none) */
    uint16_t stream;        /* index in streams */
    int32_t what;           /* kernel index, -1 - copy row, or API_WHAT - API name */
} slice_t;

typedef struct {
    char *name;             /* CUPTI's, copied; demangled at the end */
    uint64_t count, total, min, max;
    double mean, m2;
} kstat_t;

typedef struct {
    st_rec_thread_t *th;
    uint32_t node;
    uint64_t ns;
} owed_t;

typedef struct st_gpu {
    st_session_t *s;
    st_cupti_t cupti;
    int running;
    uint32_t metric;        /* gpu_time */
    uint32_t api_label[64]; /* the flows' names, by st_cupti_api_names index (+ other) */
    slot_t *ring;
    pthread_mutex_t lock;   /* everything below, while CUPTI hands records over */
    kstat_t *kernels;
    uint32_t nkernels, capkernels;
    st_u64map_t kernel_ix;
    st_model_copy_t copies[NCOPY];
    st_u64map_t owed_ix;    /* thread index << 32 | node -> owed */
    owed_t *owed;
    uint32_t nowed, capowed;
    slice_t *slices;
    size_t nslices, capslices;
    uint64_t slices_lost;
    uint32_t streams[MAX_STREAMS][2]; /* device, stream (API_DEVICE, CUPTI's thread id) */
    uint32_t nstreams;
    const char *apis[MAX_APIS];   /* API functions' names (CUPTI's constants) */
    uint32_t napis;
    uint64_t launches, attributed;
    /* the two clocks read together at the start and at the end */
    uint64_t h0, c0, h1, c1;
    double err_ticks;
    /* what contribute gives */
    st_model_gpu_t model;
    st_model_kernel_t *mk;
    st_model_copy_t mc[NCOPY];
} st_gpu_t;

static void api_enter(void *arg, uint32_t corr, int api, int driver)
{
    st_gpu_t *g = arg;
    st_rec_thread_t *th = st_rec_self(&g->s->rec);
    if (!th)
        return;
    uint32_t node = th->depth ? th->stack[th->depth - 1].node : 0;
    uint32_t flow = driver && in_runtime ? in_runtime : corr;
    slot_t *sl = &g->ring[corr & (ST_GPU_RING - 1)];
    atomic_store_explicit(&sl->key, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release); /* the slot is seen emptied before refilled */
    atomic_store_explicit(&sl->th, th, memory_order_relaxed);
    atomic_store_explicit(&sl->node, node, memory_order_relaxed);
    atomic_store_explicit(&sl->flow, flow, memory_order_relaxed);
    atomic_store_explicit(&sl->key, (uint64_t)corr + 1, memory_order_release);
    if (!driver)
        in_runtime = corr;
    if (th->tracing && flow == corr)
        st_rec_flow(th, corr, g->api_label[api >= 0 && api < st_cupti_napi ? api : st_cupti_napi]);
}

static void api_exit(void *arg, uint32_t corr, int driver)
{
    (void)arg;
    if (!driver && in_runtime == corr)
        in_runtime = 0;
}

/* The kernel's index for `name` (made if new); the last one stands for the names
 * past ST_GPU_MAX_KERNELS. UINT32_MAX when out of memory. Under the lock. */
static uint32_t kernel_index(st_gpu_t *g, const char *name)
{
    if (!name)
        name = "<unnamed kernel>";
    if (g->nkernels == ST_GPU_MAX_KERNELS)
        name = "<other kernels>";
    uint64_t key = st_u64map_text_key(name, 0x6b65726e);
    uint32_t got;
    while ((got = st_u64map_get(&g->kernel_ix, key)) != UINT32_MAX &&
           strcmp(g->kernels[got].name, name) != 0)
        key = st_u64map_next_key(key);
    if (got != UINT32_MAX)
        return got;
    if (g->nkernels == g->capkernels) {
        uint32_t cap = g->capkernels ? g->capkernels * 2 : 64;
        kstat_t *k = realloc(g->kernels, cap * sizeof *k);
        if (!k)
            return UINT32_MAX;
        g->kernels = k;
        g->capkernels = cap;
    }
    kstat_t *k = &g->kernels[g->nkernels];
    memset(k, 0, sizeof *k);
    k->min = UINT64_MAX;
    if (!(k->name = strdup(name)) || st_u64map_put(&g->kernel_ix, key, g->nkernels, NULL) < 0) {
        free(k->name);
        return UINT32_MAX;
    }
    return g->nkernels++;
}

/* The GPU time `ns` owed to (th, node). Under the lock. */
static void owe(st_gpu_t *g, st_rec_thread_t *th, uint32_t node, uint64_t ns)
{
    uint64_t key = (uint64_t)th->index << 32 | node;
    uint32_t i = st_u64map_get(&g->owed_ix, key);
    if (i == UINT32_MAX) {
        if (g->nowed == g->capowed) {
            uint32_t cap = g->capowed ? g->capowed * 2 : 256;
            owed_t *o = realloc(g->owed, cap * sizeof *o);
            if (!o)
                return;
            g->owed = o;
            g->capowed = cap;
        }
        if (st_u64map_put(&g->owed_ix, key, g->nowed, NULL) < 0)
            return;
        i = g->nowed++;
        g->owed[i] = (owed_t){th, node, 0};
    }
    g->owed[i].ns += ns;
}

/* Room for one more slice; 0 or -1. Under the lock. */
static int grow_slices(st_gpu_t *g)
{
    if (g->nslices < g->capslices)
        return 0;
    size_t cap = g->capslices ? g->capslices * 2 : 1024;
    slice_t *p = realloc(g->slices, cap * sizeof *p);
    if (!p)
        return -1;
    g->slices = p;
    g->capslices = cap;
    return 0;
}

static int stream_index(st_gpu_t *g, uint32_t device, uint32_t stream)
{
    for (uint32_t i = 0; i < g->nstreams; i++)
        if (g->streams[i][0] == device && g->streams[i][1] == stream)
            return (int)i;
    if (g->nstreams == MAX_STREAMS)
        return -1;
    g->streams[g->nstreams][0] = device;
    g->streams[g->nstreams][1] = stream;
    return (int)g->nstreams++;
}

/* The index of API function `name` in g->apis (added if new; the last stands for
 * the names past MAX_APIS). Under the lock. */
static int32_t api_name_index(st_gpu_t *g, const char *name)
{
    if (!name)
        name = "CUDA API call";
    for (uint32_t i = 0; i < g->napis; i++)
        if (g->apis[i] == name || strcmp(g->apis[i], name) == 0)
            return (int32_t)i;
    if (g->napis == MAX_APIS)
        return MAX_APIS - 1;
    g->apis[g->napis] = name;
    return (int32_t)g->napis++;
}

/* A runtime or driver call's span, as a slice of its thread's API track. */
static void api_call(st_gpu_t *g, const st_cupti_activity_t *a)
{
    pthread_mutex_lock(&g->lock);
    int st = stream_index(g, API_DEVICE, a->thread);
    if (st < 0 || g->nslices == ST_GPU_MAX_SLICES || grow_slices(g) < 0)
        g->slices_lost++;
    else
        g->slices[g->nslices++] =
            (slice_t){a->start, a->end, 0, (uint16_t)st, API_WHAT - api_name_index(g, a->name)};
    pthread_mutex_unlock(&g->lock);
}

static void activity(void *arg, const st_cupti_activity_t *a)
{
    st_gpu_t *g = arg;
    if (a->kind == ST_CUPTI_API) {
        if (g->s->tracing)
            api_call(g, a);
        return;
    }
    uint64_t ns = a->end > a->start ? a->end - a->start : 0;
    /* who launched it */
    slot_t *sl = &g->ring[a->corr & (ST_GPU_RING - 1)];
    uint64_t key = atomic_load_explicit(&sl->key, memory_order_acquire);
    st_rec_thread_t *th = atomic_load_explicit(&sl->th, memory_order_relaxed);
    uint32_t node = atomic_load_explicit(&sl->node, memory_order_relaxed);
    uint32_t flow = atomic_load_explicit(&sl->flow, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the fields read before the key again */
    int noted = key == (uint64_t)a->corr + 1 &&
                atomic_load_explicit(&sl->key, memory_order_relaxed) == key && th;
    int known = noted && node != 0 && node != ST_PATH_NONE; /* inside a call */
    pthread_mutex_lock(&g->lock);
    g->launches++;
    int32_t what;
    if (a->kind == ST_CUPTI_KERNEL) {
        uint32_t k = kernel_index(g, a->name);
        if (k == UINT32_MAX) {
            pthread_mutex_unlock(&g->lock);
            return;
        }
        kstat_t *ks = &g->kernels[k];
        ks->count++;
        ks->total += ns;
        ks->min = ns < ks->min ? ns : ks->min;
        ks->max = ns > ks->max ? ns : ks->max;
        double d = (double)ns - ks->mean; /* Welford */
        ks->mean += d / (double)ks->count;
        ks->m2 += d * ((double)ns - ks->mean);
        what = (int32_t)k;
    } else {
        int row = a->kind == ST_CUPTI_MEMSET ? COPY_MEMSET : a->copy_kind <= 10 ? (int)a->copy_kind : 0;
        g->copies[row].count++;
        g->copies[row].bytes += a->bytes;
        g->copies[row].total_ns += ns;
        what = -1 - row;
    }
    if (known) {
        g->attributed++;
        owe(g, th, node, ns);
    }
    if (g->s->tracing) {
        int st = stream_index(g, a->device, a->stream);
        if (st < 0 || g->nslices == ST_GPU_MAX_SLICES || grow_slices(g) < 0)
            g->slices_lost++;
        else
            g->slices[g->nslices++] =
                (slice_t){a->start, a->end, noted ? flow : 0, (uint16_t)st, what};
    }
    pthread_mutex_unlock(&g->lock);
}

static uint64_t cupti_now(void *arg)
{
    return st_cupti_timestamp(&((st_gpu_t *)arg)->cupti);
}

/* strata's ticks and CUPTI's ns read together (st_clock_pair); *err gets the
 * largest half span. */
static void read_both(st_gpu_t *g, uint64_t *h, uint64_t *c, double *err)
{
    double e = st_clock_pair(cupti_now, g, h, c);
    if (e > *err)
        *err = e;
}

static int gpu_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)msg;
    st_gpu_t *g = c->ctx;
    g->s = s;
    for (int i = 0; i <= st_cupti_napi && i < 64; i++) {
        const char *name = i < st_cupti_napi ? st_cupti_api_names[i] : "CUDA launch";
        if (st_intern_id(&s->labels, name, strlen(name), &g->api_label[i]) < 0)
            g->api_label[i] = ST_PATH_NONE;
    }
    st_cupti_sink_t sink = {.api_enter = api_enter, .api_exit = api_exit, .activity = activity,
                            .arg = g, .api_calls = s->tracing};
    char why[400];
    /* the nvidia-cuda-cupti wheel is looked for beside strata's own package: the
     * site-packages holding this code (the _strata module or the preload library) */
    char site[512] = "";
    Dl_info info;
    if (dladdr((void *)st_gpu_add, &info) && info.dli_fname) {
        snprintf(site, sizeof site, "%s", info.dli_fname);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(site, '/');
            if (slash)
                *slash = '\0';
        }
    }
    if (st_cupti_open(&g->cupti, st_settings_str(&s->settings, ST_S_CUPTI_LIBRARY), site, &sink,
                      why, sizeof why) < 0) {
        fprintf(stderr, "strata: warning: no GPU activities recorded: %s\n", why);
        fflush(stderr);
        s->gpu_metric = ST_METRIC_NONE; /* no gpu_time table */
        return 0; /* the run goes on without them */
    }
    read_both(g, &g->h0, &g->c0, &g->err_ticks);
    g->running = 1;
    return 0;
}

/* __cxa_demangle, from the process or libstdc++ (NULL: names stay mangled). */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn find_demangler(void)
{
    void *d = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!d) {
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h)
            d = dlsym(h, "__cxa_demangle");
    }
    demangle_fn fn;
    memcpy(&fn, &d, sizeof fn);
    return fn;
}

static const char *const copy_rows[NCOPY] = {"memcpy", "memcpy HtoD", "memcpy DtoH",
                                              "memcpy HtoA", "memcpy AtoH", "memcpy AtoA",
                                              "memcpy AtoD", "memcpy DtoA", "memcpy DtoD",
                                              "memcpy HtoH", "memcpy PtoP", "memset"};

/* The slices on the timeline: a track per device and stream, in CUPTI's clock
 * (less c0, for precision) converted by the track's domain. */
static void record_slices(st_gpu_t *g, st_session_t *s)
{
    if (!s->tracing || !g->nslices)
        return;
    st_rec_thread_t *th = st_rec_self(&s->rec);
    if (!th)
        return;
    double scale = 1.0 / st_clock_ns_per_tick(); /* ticks per ns */
    if (g->c1 > g->c0 + 1000000 && g->h1 > g->h0)
        scale = (double)(g->h1 - g->h0) / (double)(g->c1 - g->c0);
    uint32_t track[MAX_STREAMS];
    for (uint32_t i = 0; i < g->nstreams; i++) {
        char name[64];
        if (g->streams[i][0] == API_DEVICE)
            snprintf(name, sizeof name, "CUDA API thread %u", g->streams[i][1]);
        else
            snprintf(name, sizeof name, "GPU %u stream %u", g->streams[i][0], g->streams[i][1]);
        st_track_kind_t kind =
            g->streams[i][0] == API_DEVICE ? ST_TRACK_GPU_API : ST_TRACK_GPU_STREAM;
        if (st_rec_add_track(&s->rec, kind, name, 1, scale, (int64_t)g->h0, &track[i]) < 0)
            track[i] = UINT32_MAX;
    }
    uint32_t *klabel = calloc(g->nkernels ? g->nkernels : 1, sizeof *klabel);
    uint32_t clabel[NCOPY];
    if (!klabel)
        return;
    for (uint32_t k = 0; k < g->nkernels; k++)
        if (st_intern_id(&s->labels, g->kernels[k].name, strlen(g->kernels[k].name), &klabel[k]) < 0)
            klabel[k] = ST_PATH_NONE;
    for (int r = 0; r < NCOPY; r++)
        if (st_intern_id(&s->labels, copy_rows[r], strlen(copy_rows[r]), &clabel[r]) < 0)
            clabel[r] = ST_PATH_NONE;
    uint32_t alabel[MAX_APIS];
    for (uint32_t i = 0; i < g->napis; i++)
        if (st_intern_id(&s->labels, g->apis[i], strlen(g->apis[i]), &alabel[i]) < 0)
            alabel[i] = ST_PATH_NONE;
    for (size_t i = 0; i < g->nslices; i++) {
        const slice_t *sl = &g->slices[i];
        uint32_t label = sl->what >= 0         ? klabel[sl->what]
                         : sl->what > API_WHAT ? clabel[-1 - sl->what]
                                               : alabel[API_WHAT - sl->what];
        if (track[sl->stream] == UINT32_MAX || label == ST_PATH_NONE)
            continue;
        uint64_t t0 = sl->t0 > g->c0 ? sl->t0 - g->c0 : 0;
        uint64_t t1 = sl->t1 > g->c0 ? sl->t1 - g->c0 : 0;
        st_rec_complete(th, track[sl->stream], t0, t1, label, sl->flow);
    }
    free(klabel);
}

static void gpu_stop(st_collector_t *c, st_session_t *s)
{
    st_gpu_t *g = c->ctx;
    if (!g->running)
        return;
    st_cupti_stop(&g->cupti); /* every record handed over */
    read_both(g, &g->h1, &g->c1, &g->err_ticks);
    /* a buffer CUPTI completes late, on its own thread, waits for the lock (and,
     * after st_cupti_close, is not read) */
    pthread_mutex_lock(&g->lock);
    /* names as people read them */
    demangle_fn demangle = find_demangler();
    for (uint32_t k = 0; k < g->nkernels && demangle; k++) {
        const char *n = g->kernels[k].name;
        if (n[0] != '_' || n[1] != 'Z')
            continue;
        int status = -1;
        char *d = demangle(n, NULL, NULL, &status);
        if (status == 0 && d) {
            free(g->kernels[k].name);
            g->kernels[k].name = d;
        } else {
            free(d);
        }
    }
    record_slices(g, s);
    pthread_mutex_unlock(&g->lock);
    st_cupti_close(&g->cupti);
}

/* Recording has stopped: the GPU times go to the nodes that launched them. */
static int gpu_flush(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)s;
    (void)msg;
    st_gpu_t *g = c->ctx;
    pthread_mutex_lock(&g->lock);
    for (uint32_t i = 0; i < g->nowed; i++)
        st_rec_add_node(g->owed[i].th, g->metric, g->owed[i].node, g->owed[i].ns);
    g->nowed = 0;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

static int by_total(const void *a, const void *b)
{
    const st_model_kernel_t *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void gpu_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)s;
    st_gpu_t *g = c->ctx;
    if (!g->running)
        return;
    free(g->mk);
    g->mk = calloc(g->nkernels ? g->nkernels : 1, sizeof *g->mk);
    if (!g->mk)
        return;
    for (uint32_t k = 0; k < g->nkernels; k++) {
        const kstat_t *ks = &g->kernels[k];
        g->mk[k] = (st_model_kernel_t){
            .name = ks->name, .count = ks->count, .total_ns = ks->total,
            .min_ns = ks->count ? ks->min : 0, .max_ns = ks->max, .mean_ns = ks->mean,
            .stddev_ns = ks->count > 1 ? sqrt(ks->m2 / (double)ks->count) : 0.0};
    }
    qsort(g->mk, g->nkernels, sizeof *g->mk, by_total);
    size_t n = 0;
    for (int r = 0; r < NCOPY; r++)
        if (g->copies[r].count) {
            g->mc[n] = g->copies[r];
            g->mc[n++].direction = r == COPY_MEMSET ? "memset" : st_cupti_copy_name((uint32_t)r);
        }
    g->model = (st_model_gpu_t){
        .kernels = g->mk, .nkernels = g->nkernels, .copies = g->mc, .ncopies = n,
        .library = g->cupti.path, .launches = g->launches, .attributed = g->attributed,
        .dropped = atomic_load(&g->cupti.dropped) + g->slices_lost,
        .clock_error_ns = g->err_ticks * st_clock_ns_per_tick(),
    };
    m->gpu = &g->model;
}

int st_gpu_add(st_session_t *s)
{
    st_gpu_t *g = calloc(1, sizeof *g);
    if (!g)
        return ST_ENOMEM;
    g->ring = calloc(ST_GPU_RING, sizeof *g->ring);
    if (!g->ring ||
        st_rec_add_metric(&s->rec, "gpu_time", "ns",
                          "GPU time of the kernels, copies and sets the call launched",
                          ST_METRIC_COUNT, &g->metric) < 0) {
        free(g->ring);
        free(g);
        return ST_ENOMEM;
    }
    pthread_mutex_init(&g->lock, NULL);
    s->gpu = g;
    s->gpu_metric = g->metric;
    st_collector_t c = {.name = "gpu", .ctx = g, .start = gpu_start, .stop = gpu_stop,
                        .flush = gpu_flush, .contribute = gpu_contribute};
    return st_session_add_collector(s, &c);
}

void st_gpu_free(st_session_t *s)
{
    st_gpu_t *g = s->gpu;
    if (!g)
        return;
    for (uint32_t k = 0; k < g->nkernels; k++)
        free(g->kernels[k].name);
    free(g->kernels);
    st_u64map_free(&g->kernel_ix);
    st_u64map_free(&g->owed_ix);
    free(g->owed);
    free(g->slices);
    free(g->mk);
    free(g->ring);
    pthread_mutex_destroy(&g->lock);
    free(g);
    s->gpu = NULL;
}
