/* Memory for line profiles (see memory.h). */
#include "python/memory.h"

#include "base/u64map.h"
#include "core/recorder.h"
#include "model/model.h"
#include "python/frames.h"
#include "python/memhooks.h"
#include "python/labels.h"
#include "python/threads.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    int mode;
    int fell_back;               /* heap asked, rss used (the raw domain is not malloc) */
    int hooked;
    _Atomic int64_t heap;        /* heap: bytes */
    PyMemAllocatorEx raw;        /* the allocator strata's hooks pass to */
    PyObjectArenaAllocator arena;
    int statm;                   /* rss: /proc/self/statm, or -1 */
    long page;
} mem = {.statm = -1};


static inline void heap_add(int64_t n) { atomic_fetch_add_explicit(&mem.heap, n, memory_order_relaxed); }

/* ------------------------------------------------------------------------- */
/* Allocation sites: what each call path allocates                           */

static struct {
    st_recorder_t *_Atomic rec;  /* NULL: not attributing */
    uint32_t bytes, count;       /* the metrics */
    PyMemAllocatorEx obj, mem;   /* the pymalloc domains' allocators, below the hooks */
} sites;

/* >0 while a pymalloc-domain hook runs on this thread: the raw allocations it makes
 * (large objects) are its own, not attributed twice. */
__thread int st_pymem_nested __attribute__((tls_model("initial-exec")));

/* n bytes allocated by the calling thread: added to its innermost recorded call. */
static inline void attribute(size_t n)
{
    st_recorder_t *rec = atomic_load_explicit(&sites.rec, memory_order_relaxed);
    st_rec_thread_t *th = rec ? st_rec_self_sig(rec) : NULL;
    if (th) {
        st_rec_add_top(th, sites.bytes, n);
        st_rec_add_top(th, sites.count, 1);
    }
}

/* ------------------------------------------------------------------------- */
/* Sampled allocations: what the memory held at its peak and at the end       */

/* One allocation in SAMPLE_MEAN bytes on average is sampled (each byte with the
 * same chance: a gap drawn from the exponential distribution); a sample stands for
 * weight bytes (its size over the chance it had). Live samples are kept in an
 * open-addressing table keyed by address; a free looks in it only when a bit of a
 * filter says the address may be there (a bit counts its live samples, and goes
 * with the last, so that a long run's frees do not all come to take the lock). */
#define SAMPLE_MEAN (512.0 * 1024.0)
#define FILTER_BITS (1u << 16)
#define MAX_LIVE (1u << 20)

typedef struct {
    uintptr_t ptr;           /* 0: empty slot */
    st_rec_thread_t *th;     /* the thread and call path that made it (NULL: none) */
    uint32_t node;
    int32_t idx;             /* the innermost Python frame's instruction, with code */
    const void *code;        /* its code object (a reference in codes), or NULL */
    uint64_t weight;
    uint32_t stack;          /* its Python stack (stack mode), or ST_PATH_NONE */
} live_t;

/* Stack mode (sample mode without the call-tree profile: no hook gives the call
 * path): each sample's Python stack is walked and interned, innermost first, per
 * thread; after the run each stack becomes a call path of its thread, named as the
 * profile names code. At most MAX_STACKS stacks of MAX_FRAMES frames (deeper frames
 * cut); samples past that count for no call path (said as lost). */
#define MAX_FRAMES 64
#define MAX_STACKS 65536

typedef struct {
    uint64_t tid;            /* the thread's kernel id */
    unsigned long ident;     /* its Python id (threading's name for it) */
    uint32_t first, n;       /* its frames: smp.frames[first .. first + n) */
    uint64_t bytes, count;   /* the allocations made from it (estimated) */
} mstack_t;

static struct {
    _Atomic int on;
    pthread_mutex_t lock;
    live_t *v;               /* cap slots, a power of two */
    size_t cap, n;
    _Atomic uint64_t filter[FILTER_BITS / 64];
    uint16_t fcount[FILTER_BITS]; /* live samples under each bit (saturating): a bit
                                   * goes when its last sample does */
    uint64_t total;          /* bytes the live samples stand for */
    uint64_t peak_total;     /* ... at the peak */
    live_t *peak;            /* the live samples at the peak (compacted) */
    size_t npeak;
    uint64_t samples, lost;
    int estimate_sites;      /* sample mode: the sites' bytes and counts from samples */
    int frames_ok;           /* the frame walker checked: samples know their line */
    st_u64map_t codes;       /* code objects samples point to (references held) ->
                              * their order of first sight */
    int walk_stacks;         /* stack mode */
    mstack_t *stacks;
    uint32_t nstacks, capstacks;
    const void **frames;     /* the stacks' code objects (held in codes) */
    size_t nframes, capframes;
    st_u64map_t stack_index; /* a stack's hash -> its id */
} smp = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Bytes the thread allocates before its next sample; counting: its first gap drawn. */
static __thread int64_t countdown __attribute__((tls_model("initial-exec")));
static __thread int counting __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));

static inline uint64_t hash_ptr(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The filter's bit for an address: its bits above the 16-byte alignment, folded
 * (no multiply: every free computes it). */
static inline uint32_t filter_bit(uintptr_t p)
{
    return (uint32_t)((p >> 4) ^ (p >> 20)) % FILTER_BITS;
}

/* Bytes to the next sample: exponential with mean SAMPLE_MEAN (at least 1). */
static int64_t next_gap(void)
{
    if (!rng)
        rng = (uint64_t)(uintptr_t)&rng ^ 0x2545F4914F6CDD1Dull;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    double u = (double)(rng >> 11) * (1.0 / 9007199254740992.0);
    return (int64_t)(-log1p(-u) * SAMPLE_MEAN) + 1;
}

/* Grows the table (lock held); 0 or -1. */
static int grow_live(void)
{
    size_t cap = smp.cap ? 2 * smp.cap : 1024;
    if (cap > MAX_LIVE)
        return -1;
    live_t *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < smp.cap; i++) {
        if (!smp.v[i].ptr)
            continue;
        size_t j = hash_ptr(smp.v[i].ptr) & (cap - 1);
        while (v[j].ptr)
            j = (j + 1) & (cap - 1);
        v[j] = smp.v[i];
    }
    free(smp.v);
    smp.v = v;
    smp.cap = cap;
    return 0;
}

/* The live samples now are the peak's (lock held): kept compacted. */
static void keep_peak(void)
{
    live_t *peak = realloc(smp.peak, (smp.n ? smp.n : 1) * sizeof *peak);
    if (!peak)
        return;
    size_t k = 0;
    for (size_t i = 0; i < smp.cap; i++)
        if (smp.v[i].ptr)
            peak[k++] = smp.v[i];
    smp.peak = peak;
    smp.npeak = k;
    smp.peak_total = smp.total;
}

/* Holds a reference to code (lock and GIL held) so that a sample's line can be read
 * when the results are written; 0 or -1. */
static int keep_code(const void *code)
{
    int rc = st_u64map_put(&smp.codes, (uintptr_t)code, smp.codes.count, NULL);
    if (rc == 0)
        Py_INCREF((PyObject *)code);
    return rc < 0 ? -1 : 0;
}

/* The id of the stack of n frames (innermost first) of thread tid, made if new
 * (lock and GIL held); ST_PATH_NONE when the stacks are full or memory runs out. */
static uint32_t intern_stack(const st_pyframe_t *fr, int n, uint64_t tid, unsigned long ident)
{
    uint64_t h = 1469598103934665603ull ^ tid;
    for (int i = 0; i < n; i++)
        h = (h ^ (uintptr_t)fr[i].code) * 1099511628211ull;
    uint64_t key = h == UINT64_MAX ? 0 : h;
    for (;;) {
        uint32_t id = st_u64map_get(&smp.stack_index, key);
        if (id == UINT32_MAX)
            break;
        const mstack_t *st = &smp.stacks[id];
        int same = st->tid == tid && st->n == (uint32_t)n;
        for (int i = 0; same && i < n; i++)
            same = smp.frames[st->first + i] == fr[i].code;
        if (same)
            return id;
        key = st_u64map_next_key(key);
    }
    if (smp.nstacks == MAX_STACKS)
        return ST_PATH_NONE;
    if (smp.nstacks == smp.capstacks) {
        uint32_t cap = smp.capstacks ? 2 * smp.capstacks : 256;
        mstack_t *v = realloc(smp.stacks, cap * sizeof *v);
        if (!v)
            return ST_PATH_NONE;
        smp.stacks = v;
        smp.capstacks = cap;
    }
    if (smp.nframes + (size_t)n > smp.capframes) {
        size_t cap = smp.capframes ? 2 * smp.capframes : 4096;
        while (cap < smp.nframes + (size_t)n)
            cap *= 2;
        const void **v = realloc(smp.frames, cap * sizeof *v);
        if (!v)
            return ST_PATH_NONE;
        smp.frames = v;
        smp.capframes = cap;
    }
    for (int i = 0; i < n; i++)
        if (keep_code(fr[i].code) < 0)
            return ST_PATH_NONE;
    if (st_u64map_put(&smp.stack_index, key, smp.nstacks, NULL) < 0)
        return ST_PATH_NONE;
    for (int i = 0; i < n; i++)
        smp.frames[smp.nframes + (size_t)i] = fr[i].code;
    smp.stacks[smp.nstacks] = (mstack_t){tid, ident, (uint32_t)smp.nframes, (uint32_t)n, 0, 0};
    smp.nframes += (size_t)n;
    return smp.nstacks++;
}

static __attribute__((noinline)) void sample_alloc(void *p, size_t n)
{
    if (!atomic_load_explicit(&smp.on, memory_order_relaxed)) {
        countdown = INT64_MAX; /* off for good (the end, a forked child) */
        return;
    }
    if (!counting) { /* the thread's first allocation: its first gap starts here */
        counting = 1;
        countdown += next_gap();
        if (countdown > 0)
            return;
    }
    countdown = next_gap();
    double chance = -expm1(-(double)n / SAMPLE_MEAN);
    uint64_t weight = (uint64_t)((double)n / (chance > 0 ? chance : 1.0) + 0.5);
    st_recorder_t *rec = atomic_load_explicit(&sites.rec, memory_order_relaxed);
    st_rec_thread_t *th = rec ? st_rec_self_sig(rec) : NULL;
    uint32_t node = th && th->depth ? th->stack[th->depth - 1].node : ST_PATH_NONE;
    /* the line: the innermost Python frame, read without the API (nothing allocated
     * here), when this thread holds the GIL (its frames are its own to read); in
     * stack mode the whole stack */
    st_pyframe_t frs[MAX_FRAMES];
    int nf = 0;
    PyThreadState *ts = smp.frames_ok && PyGILState_Check() ? PyThreadState_Get() : NULL;
    if (ts)
        nf = st_pyframes_walk(ts, frs, smp.walk_stacks ? MAX_FRAMES : 1);
    st_pyframe_t fr = nf > 0 ? frs[0] : (st_pyframe_t){NULL, -1};
    if (th && smp.estimate_sites) {
        st_rec_add_top(th, sites.bytes, weight);
        st_rec_add_top(th, sites.count, (uint64_t)((double)weight / (double)(n ? n : 1) + 0.5));
    }
    pthread_mutex_lock(&smp.lock);
    if (2 * (smp.n + 1) > smp.cap && grow_live() < 0) {
        smp.lost++;
        pthread_mutex_unlock(&smp.lock);
        return;
    }
    uintptr_t key = (uintptr_t)p;
    size_t j = hash_ptr(key) & (smp.cap - 1);
    while (smp.v[j].ptr && smp.v[j].ptr != key)
        j = (j + 1) & (smp.cap - 1);
    if (smp.v[j].ptr != key) {
        smp.n++;
        uint32_t bit = filter_bit(key);
        if (smp.fcount[bit] < UINT16_MAX && smp.fcount[bit]++ == 0)
            atomic_fetch_or_explicit(&smp.filter[bit / 64], 1ull << (bit % 64),
                                     memory_order_relaxed);
    } else
        smp.total -= smp.v[j].weight; /* an address reused without our seeing its free */
    if (fr.code && keep_code(fr.code) < 0)
        fr.code = NULL;
    uint32_t stack = ST_PATH_NONE;
    if (smp.walk_stacks && nf > 0) {
        stack = intern_stack(frs, nf, (uint64_t)ts->native_thread_id, ts->thread_id);
        if (stack != ST_PATH_NONE) {
            smp.stacks[stack].bytes += weight;
            smp.stacks[stack].count += (uint64_t)((double)weight / (double)(n ? n : 1) + 0.5);
        } else
            smp.lost++;
    }
    smp.v[j] = (live_t){key, th, node, fr.idx, fr.code, weight, stack};
    smp.total += weight;
    smp.samples++;
    /* a new peak, 5 % (and 1 MiB) above the last one kept: keep this one */
    if (smp.total > smp.peak_total + smp.peak_total / 20 + (1u << 20))
        keep_peak();
    pthread_mutex_unlock(&smp.lock);
}

/* p of n bytes was allocated by the calling thread. */
static inline void on_alloc(void *p, size_t n)
{
    if (!smp.estimate_sites)
        attribute(n);
    countdown -= (int64_t)n; /* one subtraction: the rest is sample_alloc's */
    if (__builtin_expect(countdown <= 0, 0))
        sample_alloc(p, n);
}

static __attribute__((noinline)) void drop_sample(uintptr_t key)
{
    pthread_mutex_lock(&smp.lock);
    if (smp.cap) {
        size_t j = hash_ptr(key) & (smp.cap - 1);
        while (smp.v[j].ptr && smp.v[j].ptr != key)
            j = (j + 1) & (smp.cap - 1);
        if (smp.v[j].ptr == key) {
            smp.total -= smp.v[j].weight;
            smp.n--;
            uint32_t bit = filter_bit(key);
            if (smp.fcount[bit] < UINT16_MAX && --smp.fcount[bit] == 0)
                atomic_fetch_and_explicit(&smp.filter[bit / 64], ~(1ull << (bit % 64)),
                                          memory_order_relaxed);
            /* backward-shift deletion: no tombstones */
            size_t hole = j, k = j;
            for (;;) {
                k = (k + 1) & (smp.cap - 1);
                if (!smp.v[k].ptr)
                    break;
                size_t home = hash_ptr(smp.v[k].ptr) & (smp.cap - 1);
                if (((k - home) & (smp.cap - 1)) >= ((k - hole) & (smp.cap - 1))) {
                    smp.v[hole] = smp.v[k];
                    hole = k;
                }
            }
            smp.v[hole].ptr = 0;
        }
    }
    pthread_mutex_unlock(&smp.lock);
}

/* p is being freed. */
static inline void on_free(void *p)
{
    if (!p || !atomic_load_explicit(&smp.on, memory_order_relaxed))
        return;
    uint32_t bit = filter_bit((uintptr_t)p);
    if (atomic_load_explicit(&smp.filter[bit / 64], memory_order_relaxed) & (1ull << (bit % 64)))
        drop_sample((uintptr_t)p);
}

void st_pymem_alloc_seen(void *p, size_t n) { on_alloc(p, n); }
void st_pymem_free_seen(void *p) { on_free(p); }
void st_pymem_heap_add(int64_t n) { heap_add(n); }

/* pymalloc passes requests above 512 bytes to the raw domain, whose hooks must not
 * count them again (nested); smaller ones never reach it (a new arena goes through
 * the arena hooks), so the common case skips the guard. A free is forgotten by the
 * sampler here and, for a large block, again in the raw hook: the second finds
 * nothing. */
#define SMALL_REQUEST 512
#define SITE_HOOKS(dom)                                                                 \
    static void *dom##_malloc(void *ctx, size_t n)                                      \
    {                                                                                   \
        (void)ctx;                                                                      \
        void *p;                                                                        \
        if (n <= SMALL_REQUEST) {                                                       \
            p = sites.dom.malloc(sites.dom.ctx, n);                                     \
        } else {                                                                        \
            st_pymem_nested++;                                                          \
            p = sites.dom.malloc(sites.dom.ctx, n);                                     \
            st_pymem_nested--;                                                          \
        }                                                                               \
        if (p)                                                                          \
            on_alloc(p, n);                                                             \
        return p;                                                                       \
    }                                                                                   \
    static void *dom##_calloc(void *ctx, size_t n, size_t size)                         \
    {                                                                                   \
        (void)ctx;                                                                      \
        st_pymem_nested++;                                                              \
        void *p = sites.dom.calloc(sites.dom.ctx, n, size);                             \
        st_pymem_nested--;                                                              \
        if (p)                                                                          \
            on_alloc(p, n * size);                                                      \
        return p;                                                                       \
    }                                                                                   \
    static void *dom##_realloc(void *ctx, void *old, size_t n)                          \
    {                                                                                   \
        (void)ctx;                                                                      \
        on_free(old);                                                                   \
        st_pymem_nested++;                                                              \
        void *p = sites.dom.realloc(sites.dom.ctx, old, n);                             \
        st_pymem_nested--;                                                              \
        if (p)                                                                          \
            on_alloc(p, n);                                                             \
        return p;                                                                       \
    }                                                                                   \
    static void dom##_free(void *ctx, void *p)                                          \
    {                                                                                   \
        (void)ctx;                                                                      \
        on_free(p);                                                                     \
        sites.dom.free(sites.dom.ctx, p);                                               \
    }
SITE_HOOKS(obj)
SITE_HOOKS(mem)
#undef SITE_HOOKS

void st_pymem_sites(st_recorder_t *rec, uint32_t bytes, uint32_t count)
{
    sites.bytes = bytes;
    sites.count = count;
    atomic_store(&sites.rec, rec);
}

static void *raw_malloc(void *ctx, size_t n)
{
    (void)ctx;
    void *p = mem.raw.malloc(mem.raw.ctx, n);
    if (p) {
        heap_add((int64_t)malloc_usable_size(p));
        if (!st_pymem_nested)
            on_alloc(p, n);
    }
    return p;
}

static void *raw_calloc(void *ctx, size_t n, size_t size)
{
    (void)ctx;
    void *p = mem.raw.calloc(mem.raw.ctx, n, size);
    if (p) {
        heap_add((int64_t)malloc_usable_size(p));
        if (!st_pymem_nested)
            on_alloc(p, n * size);
    }
    return p;
}

static void *raw_realloc(void *ctx, void *p, size_t n)
{
    (void)ctx;
    int64_t old = p ? (int64_t)malloc_usable_size(p) : 0;
    if (!st_pymem_nested)
        on_free(p);
    void *q = mem.raw.realloc(mem.raw.ctx, p, n);
    if (q) {
        heap_add((int64_t)malloc_usable_size(q) - old);
        if (!st_pymem_nested)
            on_alloc(q, n);
    }
    return q;
}

static void raw_free(void *ctx, void *p)
{
    (void)ctx;
    if (p) {
        heap_add(-(int64_t)malloc_usable_size(p));
        if (!st_pymem_nested)
            on_free(p);
    }
    mem.raw.free(mem.raw.ctx, p);
}

/* pymalloc's arenas. In sample mode the pymalloc domains have no hooks of their own
 * (a hook on every small object and its free cost 3.13 a sixth of its time): small
 * objects are seen as the arenas that hold them, sampled when one is made and
 * forgotten when it goes back, as memray sees them by default. */
static void *arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    void *p = mem.arena.alloc(mem.arena.ctx, size);
    if (p) {
        heap_add((int64_t)size);
        if (smp.estimate_sites)
            on_alloc(p, size);
    }
    return p;
}

static void arena_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    if (p) {
        heap_add(-(int64_t)size);
        if (smp.estimate_sites)
            on_free(p);
    }
    mem.arena.free(mem.arena.ctx, p, size);
}

/* 1 when the raw domain hands out malloc's own blocks (no debug hooks). */
static int raw_is_malloc(void)
{
    const char *pm = getenv("PYTHONMALLOC");
    if (pm && *pm && strcmp(pm, "malloc") != 0 && strcmp(pm, "pymalloc") != 0 &&
        strcmp(pm, "mimalloc") != 0)
        return 0;
    PyObject *flags = PySys_GetObject("flags"); /* borrowed */
    PyObject *dev = flags ? PyObject_GetAttrString(flags, "dev_mode") : NULL;
    int dev_mode = dev && PyObject_IsTrue(dev) == 1;
    Py_XDECREF(dev);
    PyErr_Clear();
    return !dev_mode;
}

static int open_statm(void)
{
    if (mem.statm < 0)
        mem.statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    mem.page = sysconf(_SC_PAGESIZE);
    return mem.statm >= 0;
}

/* In a forked child: no thread of the parent's holds a lock here any more, strata's
 * threads are gone, and the child does not record (the collector stops there): the
 * hooks go on passing calls down and counting the heap, nothing else. */
static void after_fork_child(void)
{
    atomic_store(&smp.on, 0);
    atomic_store(&sites.rec, NULL);
    pthread_mutex_init(&smp.lock, NULL);
    st_pymem_series_after_fork();
    st_pymem_native_after_fork();
}

int st_pymem_start(int mode)
{
    static int atfork;
    if (!atfork++)
        pthread_atfork(NULL, NULL, after_fork_child);
    if (st_pymem_counts_heap(mode) && !raw_is_malloc()) {
        mode = ST_PYMEM_RSS;
        mem.fell_back = 1;
        atomic_store(&smp.on, 0);
    }
    if (st_pymem_counts_heap(mode)) {
        struct mallinfo2 mi = mallinfo2();
        atomic_store(&mem.heap, (int64_t)(mi.uordblks + mi.hblkhd));
        if (!mem.hooked) {
            PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &mem.raw);
            PyObject_GetArenaAllocator(&mem.arena);
            PyMemAllocatorEx raw = {NULL, raw_malloc, raw_calloc, raw_realloc, raw_free};
            PyObjectArenaAllocator arena = {NULL, arena_alloc, arena_free};
            PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &raw);
            PyObject_SetArenaAllocator(&arena);
            if (atomic_load(&sites.rec) && !smp.estimate_sites) { /* heap mode */
                PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &sites.obj);
                PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &sites.mem);
                PyMemAllocatorEx obj = {NULL, obj_malloc, obj_calloc, obj_realloc, obj_free};
                PyMemAllocatorEx pmem = {NULL, mem_malloc, mem_calloc, mem_realloc, mem_free};
                PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj);
                PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &pmem);
            }
            mem.hooked = 1;
            st_pymem_native_start();
        }
    }
    if (!open_statm() && mode == ST_PYMEM_RSS)
        mode = ST_PYMEM_OFF;
    mem.mode = mode;
    return mode;
}

/* Takes strata's hooks off where they are still on top: a program that put its own
 * above them (tracemalloc.start()) keeps them, and strata's go on passing its calls
 * to the allocator below, counting for nobody. */
void st_pymem_stop(void)
{
    atomic_store(&sites.rec, NULL); /* the profile is being written: no more adds */
    if (!mem.hooked)
        return;
    st_pymem_native_stop();
    PyMemAllocatorEx raw, obj, pmem;
    PyObjectArenaAllocator arena;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &raw);
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &obj);
    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &pmem);
    PyObject_GetArenaAllocator(&arena);
    if (raw.malloc == raw_malloc)
        PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &mem.raw);
    if (obj.malloc == obj_malloc)
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &sites.obj);
    if (pmem.malloc == mem_malloc)
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &sites.mem);
    if (arena.alloc == arena_alloc)
        PyObject_SetArenaAllocator(&mem.arena);
    mem.hooked = 0;
}

int st_pymem_hooked(void) { return mem.hooked; }

int64_t st_pymem_heap(void) { return atomic_load_explicit(&mem.heap, memory_order_relaxed); }

int st_pymem_mode(void) { return mem.statm < 0 ? ST_PYMEM_OFF : mem.mode; }

int64_t st_pymem_now(void)
{
    if (st_pymem_counts_heap(mem.mode))
        return atomic_load_explicit(&mem.heap, memory_order_relaxed);
    return mem.mode == ST_PYMEM_RSS ? st_pymem_rss() : 0;
}

int64_t st_pymem_rss(void)
{
    if (mem.statm < 0)
        return 0;
    char buf[128];
    ssize_t n = pread(mem.statm, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strchr(buf, ' '); /* size, then resident (pages) */
    return p ? (int64_t)strtoll(p + 1, NULL, 10) * mem.page : 0;
}

const char *st_pymem_name(void)
{
    return st_pymem_counts_heap(mem.mode) ? "heap" : mem.mode == ST_PYMEM_RSS ? "rss" : NULL;
}

void st_pymem_report(FILE *err)
{
    if (mem.fell_back)
        fprintf(err, "[strata] memory: Python's allocator has debug hooks here (PYTHONMALLOC, "
                     "-X dev): the lines' memory is the resident size (rss), not the heap\n");
}

/* ------------------------------------------------------------------------- */
/* Holdings                                                                   */

void st_pymem_sample(int estimate_sites, int walk_stacks)
{
    smp.estimate_sites = estimate_sites;
    smp.walk_stacks = walk_stacks;
    smp.frames_ok = st_pyframes_check(NULL) == 0;
    atomic_store(&smp.on, 1);
}

/* Stack mode: each stack's thread and call path (GIL held, before the recorder is
 * sealed), made from its frames outermost first as the profile names them (frames
 * it leaves out are skipped); the stack's estimated allocations added to it. */
static void make_stack_paths(st_recorder_t *rec, st_rec_thread_t **th, uint32_t *node)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (uint32_t k = 0; k < smp.nstacks; k++) {
        const mstack_t *st = &smp.stacks[k];
        node[k] = ST_PATH_NONE;
        /* the thread's state (the one it has, or made now), named once: while it
         * still has the recorder's made-up name */
        th[k] = st_rec_register_tid(rec, st->tid);
        if (!th[k])
            continue;
        char name[64];
        snprintf(name, sizeof name, "Thread-%llu", (unsigned long long)st->tid);
        if (strcmp(th[k]->name, name) == 0) {
            st_pythread_name(st->ident, name, sizeof name);
            st_rec_thread_name(th[k], name);
        }
        uint32_t at = 0;
        for (uint32_t i = st->n; i-- > 0 && at != ST_PATH_NONE;) {
            uint32_t label = st_pylabel_of((PyCodeObject *)smp.frames[st->first + i]);
            if (label != ST_PATH_NONE)
                at = st_pathtab_child(&th[k]->paths, at, label);
        }
        if (at == 0 || at == ST_PATH_NONE)
            continue; /* every frame left out, or the node limit */
        node[k] = at;
        st_rec_add_node(th[k], sites.bytes, at, st->bytes);
        st_rec_add_node(th[k], sites.count, at, st->count);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

/* Adds each sample's bytes to its call path's cell of `metric` (in stack mode, its
 * stack's). */
static void add_holdings(const live_t *v, size_t n, uint32_t metric, st_rec_thread_t **sth,
                         const uint32_t *snode)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i].ptr)
            continue;
        if (v[i].th && v[i].node != ST_PATH_NONE)
            st_rec_add_node(v[i].th, metric, v[i].node, v[i].weight);
        else if (sth && v[i].stack != ST_PATH_NONE && snode[v[i].stack] != ST_PATH_NONE)
            st_rec_add_node(sth[v[i].stack], metric, snode[v[i].stack], v[i].weight);
    }
}

void st_pymem_holdings(uint32_t peak, uint32_t at_exit, st_pymem_holdings_t *out)
{
    atomic_store(&smp.on, 0);
    pthread_mutex_lock(&smp.lock);
    if (smp.total > smp.peak_total)
        keep_peak();
    st_recorder_t *rec = atomic_load(&sites.rec);
    st_rec_thread_t **sth = NULL;
    uint32_t *snode = NULL;
    if (smp.nstacks && rec) {
        sth = malloc(smp.nstacks * sizeof *sth);
        snode = malloc(smp.nstacks * sizeof *snode);
        if (sth && snode)
            make_stack_paths(rec, sth, snode);
        else {
            free(sth);
            free(snode);
            sth = NULL;
            snode = NULL;
        }
    }
    add_holdings(smp.peak, smp.npeak, peak, sth, snode);
    add_holdings(smp.v, smp.cap, at_exit, sth, snode);
    free(sth);
    free(snode);
    out->peak_bytes = smp.peak_total;
    out->exit_bytes = smp.total;
    out->samples = smp.samples;
    out->lost = smp.lost;
    pthread_mutex_unlock(&smp.lock);
}

/* The lines of the live samples at the peak and at the end (with the GIL held, once
 * st_pymem_holdings has stopped the sampling): summed per (code, line), the most at
 * the peak first, at most MAX_MEMLINES. */
#define MAX_MEMLINES 1000

typedef struct {
    const void *code;
    int line;
    uint64_t peak, at_exit;
} lsum_t;

/* Adds sample s to its line's sum (found through `index`: the code's order and the
 * line -> the sum's place in v). */
static int add_lsum(lsum_t **v, size_t *n, size_t *cap, st_u64map_t *index, const live_t *s,
                    int at_exit)
{
    if (!s->ptr || !s->code)
        return 0;
    int line = PyCode_Addr2Line((PyCodeObject *)s->code, s->idx < 0 ? 0 : 2 * s->idx);
    uint64_t key = (uint64_t)st_u64map_get(&smp.codes, (uintptr_t)s->code) << 32 | (uint32_t)line;
    uint32_t at;
    int rc = st_u64map_put(index, key, (uint32_t)*n, &at);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        *(at_exit ? &(*v)[at].at_exit : &(*v)[at].peak) += s->weight;
        return 0;
    }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        lsum_t *w = realloc(*v, c * sizeof *w);
        if (!w)
            return -1;
        *v = w;
        *cap = c;
    }
    (*v)[(*n)++] = (lsum_t){s->code, line, at_exit ? 0 : s->weight, at_exit ? s->weight : 0};
    return 0;
}

static int by_bytes(const void *a, const void *b)
{
    const lsum_t *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak < y->peak ? 1 : -1;
    return x->at_exit < y->at_exit ? 1 : x->at_exit > y->at_exit ? -1 : 0;
}

size_t st_pymem_lines(st_model_memline_t **out)
{
    static st_model_memline_t *rows;
    static size_t nrows = (size_t)-1;
    if (nrows != (size_t)-1) {
        *out = rows;
        return nrows;
    }
    nrows = 0;
    lsum_t *v = NULL;
    size_t n = 0, cap = 0;
    st_u64map_t index = {0};
    int ok = 0;
    for (size_t i = 0; i < smp.npeak && ok == 0; i++)
        ok = add_lsum(&v, &n, &cap, &index, &smp.peak[i], 0);
    for (size_t i = 0; i < smp.cap && ok == 0; i++)
        ok = add_lsum(&v, &n, &cap, &index, &smp.v[i], 1);
    st_u64map_free(&index);
    if (n)
        qsort(v, n, sizeof *v, by_bytes);
    if (n > MAX_MEMLINES)
        n = MAX_MEMLINES;
    rows = calloc(n ? n : 1, sizeof *rows);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (size_t i = 0; rows && i < n; i++) {
        PyCodeObject *co = (PyCodeObject *)v[i].code;
        /* as the line tables name them (a file name's undecodable bytes as \xNN) */
        PyObject *hold1 = NULL, *hold2 = NULL;
        const char *qual = st_pytext_utf8(co->co_qualname, &hold1);
        const char *file = st_pytext_utf8(co->co_filename, &hold2);
        char *q = strdup(qual ? qual : "?"), *f = strdup(file ? file : "?");
        Py_XDECREF(hold1);
        Py_XDECREF(hold2);
        PyErr_Clear();
        if (!q || !f) {
            free(q);
            free(f);
            break;
        }
        rows[nrows++] = (st_model_memline_t){q, f, v[i].line > 0 ? (uint32_t)v[i].line : 0,
                                             v[i].peak, v[i].at_exit};
    }
    PyErr_Restore(et, ev, tb);
    free(v);
    *out = rows;
    return nrows;
}

