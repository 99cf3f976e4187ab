/* Memory for line profiles (see memory.h). */
#include "python/memory.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
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

static void *raw_malloc(void *ctx, size_t n)
{
    (void)ctx;
    void *p = mem.raw.malloc(mem.raw.ctx, n);
    if (p)
        heap_add((int64_t)malloc_usable_size(p));
    return p;
}

static void *raw_calloc(void *ctx, size_t n, size_t size)
{
    (void)ctx;
    void *p = mem.raw.calloc(mem.raw.ctx, n, size);
    if (p)
        heap_add((int64_t)malloc_usable_size(p));
    return p;
}

static void *raw_realloc(void *ctx, void *p, size_t n)
{
    (void)ctx;
    int64_t old = p ? (int64_t)malloc_usable_size(p) : 0;
    void *q = mem.raw.realloc(mem.raw.ctx, p, n);
    if (q)
        heap_add((int64_t)malloc_usable_size(q) - old);
    return q;
}

static void raw_free(void *ctx, void *p)
{
    (void)ctx;
    if (p)
        heap_add(-(int64_t)malloc_usable_size(p));
    mem.raw.free(mem.raw.ctx, p);
}

static void *arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    void *p = mem.arena.alloc(mem.arena.ctx, size);
    if (p)
        heap_add((int64_t)size);
    return p;
}

static void arena_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    if (p)
        heap_add(-(int64_t)size);
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

int st_pymem_start(int mode)
{
    if (mode == ST_PYMEM_HEAP && !raw_is_malloc()) {
        mode = ST_PYMEM_RSS;
        mem.fell_back = 1;
    }
    if (mode == ST_PYMEM_HEAP) {
        struct mallinfo2 mi = mallinfo2();
        atomic_store(&mem.heap, (int64_t)(mi.uordblks + mi.hblkhd));
        if (!mem.hooked) {
            PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &mem.raw);
            PyObject_GetArenaAllocator(&mem.arena);
            PyMemAllocatorEx raw = {NULL, raw_malloc, raw_calloc, raw_realloc, raw_free};
            PyObjectArenaAllocator arena = {NULL, arena_alloc, arena_free};
            PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &raw);
            PyObject_SetArenaAllocator(&arena);
            mem.hooked = 1;
        }
    } else if (mode == ST_PYMEM_RSS && !open_statm()) {
        mode = ST_PYMEM_OFF;
    }
    mem.mode = mode;
    return mode;
}

/* Takes strata's hooks off where they are still on top: a program that put its own
 * above them (tracemalloc.start()) keeps them, and strata's go on passing its calls
 * to the allocator below, counting for nobody. */
void st_pymem_stop(void)
{
    if (!mem.hooked)
        return;
    PyMemAllocatorEx raw;
    PyObjectArenaAllocator arena;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &raw);
    PyObject_GetArenaAllocator(&arena);
    if (raw.malloc == raw_malloc)
        PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &mem.raw);
    if (arena.alloc == arena_alloc)
        PyObject_SetArenaAllocator(&mem.arena);
    mem.hooked = 0;
}

int64_t st_pymem_now(void)
{
    if (mem.mode == ST_PYMEM_HEAP)
        return atomic_load_explicit(&mem.heap, memory_order_relaxed);
    if (mem.mode != ST_PYMEM_RSS)
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
    return mem.mode == ST_PYMEM_HEAP ? "heap" : mem.mode == ST_PYMEM_RSS ? "rss" : NULL;
}

void st_pymem_report(FILE *err)
{
    if (mem.fell_back)
        fprintf(err, "[strata] memory: Python's allocator has debug hooks here (PYTHONMALLOC, "
                     "-X dev): the lines' memory is the resident size (rss), not the heap\n");
}
