/* Allocations Python's allocator hooks do not see: the mallocs of C libraries
 * (extension modules and what they load, numpy's array data among them), counted
 * once with the rest (memhooks.h). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "base/gotpatch.h"
#include "python/memhooks.h"
#include "python/memory.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* C libraries' mallocs                                                       */

/* The calls to malloc and its kin that the loaded shared objects make are sent to
 * strata's wrappers by rewriting their global offset tables (base/gotpatch.h), as
 * each object loads: those already loaded when counting starts, and those a dlopen
 * brings. dlopen itself is redirected only in the objects where that changes nothing
 * (no search path of their own: glibc searches the caller's DT_RUNPATH for a bare
 * name), so the objects loaded by others are looked for at Python's audit events
 * "import" (before the next module is imported) and "ctypes.dlsym" (before a
 * function of a ctypes library is called), and every 20 ms (st_pymem_native_poll).
 *
 * Left alone: the C library and the dynamic linker (their own inner mallocs and
 * frees pair among themselves), the interpreter (its mallocs are the raw domain,
 * counted there), the sanitizers' runtimes and strata itself.
 *
 * A block is counted (malloc's usable size, into the heap) when a wrapper makes it,
 * and uncounted when a wrapper frees it only if it was counted: the counted blocks
 * are kept in a set, so that a free of a block made elsewhere (before counting
 * began, or inside the C library) never takes the heap below what it holds. Inside
 * one of strata's Python allocator hooks the wrappers pass calls down. */

#define SHARDS 64

typedef struct {
    pthread_mutex_t lock;
    uintptr_t *v;            /* cap slots, a power of two; 0: empty */
    size_t cap, n;
} shard_t;

static struct {
    _Atomic int on;
    shard_t shard[SHARDS];
    pthread_mutex_t scan;    /* one redirect at a time */
    unsigned long long loads;  /* the dynamic linker's count at the last scan */
    int settle;              /* scans still to make after the count last changed */
    const void *interp;      /* an address inside the interpreter */
} cm = {.scan = PTHREAD_MUTEX_INITIALIZER};

static inline size_t hash_block(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20);
}

static shard_t *shard_of(uintptr_t p) { return &cm.shard[(p >> 4) % SHARDS]; }

/* Adds p to its shard (with its lock held). 0, or -1 when the set cannot grow. */
static int set_add(shard_t *s, uintptr_t p)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        uintptr_t *v = calloc(cap, sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->v[i])
                continue;
            size_t j = hash_block(s->v[i]) & (cap - 1);
            while (v[j])
                j = (j + 1) & (cap - 1);
            v[j] = s->v[i];
        }
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    size_t j = hash_block(p) & (s->cap - 1);
    while (s->v[j] && s->v[j] != p)
        j = (j + 1) & (s->cap - 1);
    if (!s->v[j]) {
        s->v[j] = p;
        s->n++;
    }
    return 0;
}

/* Takes p out of its shard (with its lock held): 1 when it was there. */
static int set_remove(shard_t *s, uintptr_t p)
{
    if (!s->cap)
        return 0;
    size_t j = hash_block(p) & (s->cap - 1);
    while (s->v[j] && s->v[j] != p)
        j = (j + 1) & (s->cap - 1);
    if (!s->v[j])
        return 0;
    size_t hole = j, k = j; /* backward-shift deletion: no tombstones */
    for (;;) {
        k = (k + 1) & (s->cap - 1);
        if (!s->v[k])
            break;
        size_t home = hash_block(s->v[k]) & (s->cap - 1);
        if (((k - home) & (s->cap - 1)) >= ((k - hole) & (s->cap - 1))) {
            s->v[hole] = s->v[k];
            hole = k;
        }
    }
    s->v[hole] = 0;
    s->n--;
    return 1;
}

/* p (n bytes asked) was made by a wrapper. */
static void counted(void *p, size_t n)
{
    shard_t *s = shard_of((uintptr_t)p);
    pthread_mutex_lock(&s->lock);
    int ok = set_add(s, (uintptr_t)p) == 0;
    pthread_mutex_unlock(&s->lock);
    if (!ok)
        return; /* not counted: its free will not be either */
    st_pymem_heap_add((int64_t)malloc_usable_size(p));
    st_pymem_alloc_seen(p, n);
}

/* p is about to be freed or moved by a wrapper: uncounted if it was counted. */
static void uncounted(void *p)
{
    shard_t *s = shard_of((uintptr_t)p);
    pthread_mutex_lock(&s->lock);
    int was = set_remove(s, (uintptr_t)p);
    pthread_mutex_unlock(&s->lock);
    if (was) {
        st_pymem_heap_add(-(int64_t)malloc_usable_size(p));
        st_pymem_free_seen(p);
    }
}

static inline int counting(void)
{
    return !st_pymem_nested && atomic_load_explicit(&cm.on, memory_order_relaxed);
}

static void *c_malloc(size_t n)
{
    void *p = malloc(n);
    if (p && counting())
        counted(p, n);
    return p;
}

static void *c_calloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p && counting())
        counted(p, n * size);
    return p;
}

static void *c_realloc(void *p, size_t n)
{
    if (!counting())
        return realloc(p, n);
    if (p)
        uncounted(p);
    void *q = realloc(p, n);
    if (q)
        counted(q, n);
    else if (p && n)
        counted(p, malloc_usable_size(p)); /* it failed: p is still the program's */
    return q;
}

static void *c_reallocarray(void *p, size_t n, size_t size)
{
    if (!counting())
        return reallocarray(p, n, size);
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return reallocarray(p, n, size); /* fails as it would (ENOMEM) */
    return c_realloc(p, bytes);
}

static void c_free(void *p)
{
    if (p && counting())
        uncounted(p);
    free(p);
}

static int c_posix_memalign(void **out, size_t align, size_t n)
{
    int rc = posix_memalign(out, align, n);
    if (rc == 0 && *out && counting())
        counted(*out, n);
    return rc;
}

static void *c_aligned_alloc(size_t align, size_t n)
{
    void *p = aligned_alloc(align, n);
    if (p && counting())
        counted(p, n);
    return p;
}

static void *c_memalign(size_t align, size_t n)
{
    void *p = memalign(align, n);
    if (p && counting())
        counted(p, n);
    return p;
}

static void *c_valloc(size_t n)
{
    void *p = valloc(n);
    if (p && counting())
        counted(p, n);
    return p;
}

static void *c_dlopen(const char *file, int flags)
{
    void *h = dlopen(file, flags);
    if (h && atomic_load_explicit(&cm.on, memory_order_relaxed))
        st_pymem_native_poll();
    return h;
}

/* The functions redirected (malloc's kin, then dlopen), and where their calls go
 * back to at the end. */
#define MALLOCS 9
static const struct {
    const char *symbol;
    void *wrapper, *real;
} fns[] = {
    {"malloc", (void *)c_malloc, (void *)malloc},
    {"calloc", (void *)c_calloc, (void *)calloc},
    {"realloc", (void *)c_realloc, (void *)realloc},
    {"reallocarray", (void *)c_reallocarray, (void *)reallocarray},
    {"free", (void *)c_free, (void *)free},
    {"posix_memalign", (void *)c_posix_memalign, (void *)posix_memalign},
    {"aligned_alloc", (void *)c_aligned_alloc, (void *)aligned_alloc},
    {"memalign", (void *)c_memalign, (void *)memalign},
    {"valloc", (void *)c_valloc, (void *)valloc},
    {"dlopen", (void *)c_dlopen, (void *)dlopen},
};
#define NFNS (sizeof fns / sizeof *fns)

/* Redirects fns[first .. first + n) in the objects keep accepts: to strata's
 * wrappers, or (back) from them to the real functions. */
static void redirect(size_t first, size_t n, int back, st_got_keep_t keep)
{
    st_got_redirect_t r[NFNS];
    for (size_t i = 0; i < n; i++)
        r[i] = back ? (st_got_redirect_t){fns[first + i].symbol, fns[first + i].wrapper,
                                          fns[first + i].real}
                    : (st_got_redirect_t){fns[first + i].symbol, NULL, fns[first + i].wrapper};
    st_got_redirect(r, n, keep, NULL);
}

/* 1 for the objects whose mallocs are counted. */
static int keep_mallocs(const struct dl_phdr_info *obj, void *arg)
{
    (void)arg;
    if (st_got_holds(obj, (const void *)c_malloc) || st_got_holds(obj, cm.interp))
        return 0;
    const char *slash = strrchr(obj->dlpi_name, '/');
    const char *base = slash ? slash + 1 : obj->dlpi_name;
    if (!*base)
        return 0; /* the program (the interpreter, or what embeds it) or the vDSO */
    return !st_got_runtime(obj);
}

/* 1 for the objects whose dlopens strata's makes as well as they would. */
static int keep_dlopens(const struct dl_phdr_info *obj, void *arg)
{
    if (st_got_holds(obj, (const void *)c_malloc) || st_got_has_search_path(obj))
        return 0;
    const char *slash = strrchr(obj->dlpi_name, '/');
    const char *base = slash ? slash + 1 : obj->dlpi_name;
    if (!*base)
        return 1; /* the program */
    return keep_mallocs(obj, arg) || st_got_holds(obj, cm.interp);
}

void st_pymem_native_poll(void)
{
    if (!atomic_load_explicit(&cm.on, memory_order_relaxed))
        return;
    unsigned long long loads = st_got_loads();
    pthread_mutex_lock(&cm.scan);
    if ((loads != cm.loads || cm.settle > 0) && atomic_load(&cm.on)) {
        /* The dynamic linker counts an object in when it maps it, and fills its
         * slots after: one another thread is loading may be seen half done, its
         * slots filled again after strata's. The next three looks redirect again. */
        cm.settle = loads != cm.loads ? 3 : cm.settle - 1;
        cm.loads = loads;
        redirect(0, MALLOCS, 0, keep_mallocs);
        redirect(MALLOCS, NFNS - MALLOCS, 0, keep_dlopens);
    }
    pthread_mutex_unlock(&cm.scan);
}

/* Python's audit events (a hook cannot be taken off: it stays, doing nothing). */
static int on_audit(const char *event, PyObject *args, void *data)
{
    (void)args;
    (void)data;
    if (atomic_load_explicit(&cm.on, memory_order_relaxed) &&
        (strcmp(event, "import") == 0 || strcmp(event, "ctypes.dlsym") == 0))
        st_pymem_native_poll();
    return 0;
}

void st_pymem_native_start(void)
{
    static int audit;
    if (!audit++ && PySys_AddAuditHook(on_audit, NULL) < 0)
        PyErr_Clear(); /* another hook refused it: the 20 ms look remains */
    cm.interp = (const void *)PyMem_RawMalloc;
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&cm.shard[i].lock, NULL);
    atomic_store(&cm.on, 1);
    cm.loads = 0;
    st_pymem_native_poll();
}

void st_pymem_native_stop(void)
{
    atomic_store(&cm.on, 0);
    pthread_mutex_lock(&cm.scan);
    redirect(0, NFNS, 1, NULL); /* every slot still holding a wrapper */
    pthread_mutex_unlock(&cm.scan);
}

void st_pymem_native_after_fork(void)
{
    atomic_store(&cm.on, 0);
    pthread_mutex_init(&cm.scan, NULL);
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&cm.shard[i].lock, NULL);
}
