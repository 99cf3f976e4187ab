/* Native unwinding from a signal handler: frame pointers, and libunwind loaded
 * with dlopen. See the design note in unwind.h. */
#define _GNU_SOURCE
#include "sampling/unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#ifdef STRATA_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#if defined(__x86_64__)

/* Addresses below this are never code: a zero or tiny return address ends the
 * chain (the outermost frame's saved rbp and return address are often 0). */
#define ST_UNWIND_MIN_PC 4096u

#ifdef STRATA_HAVE_LIBUNWIND
static int lu_warm(void);
static int lu_static_tls;
#endif

/* The stack bounds of thread `th` into t. */
static int stack_bounds(st_unwind_thread_t *t, pthread_t th, st_msg_t *msg)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    int rc = pthread_getattr_np(th, &attr);
    if (rc != 0)
        return st_msg_set(msg, ST_EINVAL, "the thread's stack bounds: pthread_getattr_np: %s",
                          strerror(rc));
    rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return st_msg_set(msg, ST_EINVAL, "the thread's stack bounds: pthread_attr_getstack: %s",
                          strerror(rc));
    t->stack_lo = (uintptr_t)addr;
    t->stack_hi = (uintptr_t)addr + size;
    t->in_loader = 0;
    t->libunwind_warm = 0;
    return 0;
}

int st_unwind_thread_init(st_unwind_thread_t *t, st_msg_t *msg)
{
    int rc = stack_bounds(t, pthread_self(), msg);
    if (rc < 0)
        return rc;
#ifdef STRATA_HAVE_LIBUNWIND
    if (st_unwind_libunwind_loaded() && lu_warm() > 0)
        t->libunwind_warm = 1;
#endif
    return 0;
}

int st_unwind_thread_init_of(st_unwind_thread_t *t, pthread_t th, st_msg_t *msg)
{
    int rc = stack_bounds(t, th, msg);
    if (rc == 0)
        t->libunwind_warm = st_unwind_libunwind_static_tls();
    return rc;
}

/* One word of the stack; the caller has checked that it lies in the bounds.
 * Not instrumented by ASan: see the design note. */
__attribute__((no_sanitize_address)) static inline uintptr_t stack_word(uintptr_t at)
{
    return *(const volatile uintptr_t *)at;
}

/* The rbp chain from the interrupted registers. */
static int unwind_fp(const ucontext_t *uc, const st_unwind_thread_t *t, uintptr_t *pcs, int cap)
{
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    int n = 0;
    pcs[n++] = pc;
    if (!t || t->stack_hi <= t->stack_lo || sp < t->stack_lo || sp >= t->stack_hi)
        return n;
    uintptr_t lo = sp, hi = t->stack_hi;
    for (int hop = 0; n < cap && hop < ST_UNWIND_MAX_HOPS; hop++) {
        if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) || (fp & (sizeof(uintptr_t) - 1)))
            break;
        uintptr_t next = stack_word(fp);
        uintptr_t ret = stack_word(fp + sizeof(uintptr_t));
        /* a return address is code: not near 0, not in the stack (code without
         * frame pointers leaves rbp pointing at data that is not a frame) */
        if (ret < ST_UNWIND_MIN_PC || (ret >= t->stack_lo && ret < t->stack_hi))
            break;
        pcs[n++] = ret - 1;
        if (next <= fp)
            break;
        lo = fp + 2 * sizeof(uintptr_t);
        fp = next;
    }
    return n;
}

#ifdef STRATA_HAVE_LIBUNWIND

/* libunwind's local-only entry points (the names its header's macros expand
 * to for UNW_LOCAL_ONLY on x86-64), found with dlsym. */
static struct {
    void *lib;
    int (*init_local)(unw_cursor_t *, unw_context_t *);
    int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
    int (*step)(unw_cursor_t *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
    void (*flush_cache)(unw_addr_space_t, unw_word_t, unw_word_t);
    int (*getcontext)(unw_context_t *);
    unw_addr_space_t *local_as;
} lu;
static int lu_loaded;

/* One unwind of the calling thread, outside handlers: libunwind's one-time init
 * and the thread's cache. Returns the number of frames, or < 0. */
static int lu_warm(void)
{
    unw_context_t ctx;
    unw_cursor_t cur;
    if (lu.getcontext(&ctx) != 0 || lu.init_local(&cur, &ctx) != 0)
        return -1;
    int n = 1;
    while (n < ST_UNWIND_MAX_HOPS && lu.step(&cur) > 0)
        n++;
    return n;
}

int st_unwind_libunwind_load(st_msg_t *msg)
{
    if (lu_loaded)
        return 0;
    /* libunwind.so.8 (the nongnu libunwind); not libunwind.so.1, LLVM's
     * unwinder of the same name with another interface. */
    /* loaded with the program (LD_PRELOAD): its thread-local data is in every
     * thread's static TLS, allocated when the thread is made */
    void *pre = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
    const char *env = getenv("LD_PRELOAD");
    lu_static_tls = pre && env && strstr(env, "libunwind.so.8");
    if (pre)
        dlclose(pre);
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return st_msg_set(msg, ST_EINVAL, "libunwind is not loaded: %s", dlerror());
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
        {"_ULx86_64_init_local", offsetof(__typeof__(lu), init_local)},
        {"_ULx86_64_init_local2", offsetof(__typeof__(lu), init_local2)},
        {"_ULx86_64_step", offsetof(__typeof__(lu), step)},
        {"_ULx86_64_get_reg", offsetof(__typeof__(lu), get_reg)},
        {"_Ux86_64_flush_cache", offsetof(__typeof__(lu), flush_cache)},
        {"_Ux86_64_getcontext", offsetof(__typeof__(lu), getcontext)},
        {"_ULx86_64_local_addr_space", offsetof(__typeof__(lu), local_as)},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            dlclose(h);
            memset(&lu, 0, sizeof lu);
            return st_msg_set(msg, ST_EINVAL,
                              "libunwind is not loaded: libunwind.so.8 has no %s (before 1.3?)",
                              syms[i].name);
        }
        memcpy((char *)&lu + syms[i].off, &p, sizeof p);
    }
    lu.lib = h;
    /* The caching policy stays UNW_CACHE_GLOBAL: see the design note. */
    if (lu_warm() < 1) {
        dlclose(h);
        memset(&lu, 0, sizeof lu);
        return st_msg_set(msg, ST_EINVAL,
                          "libunwind is not loaded: its first unwind failed");
    }
    lu_loaded = 1;
    return 0;
}

int st_unwind_libunwind_loaded(void)
{
    return lu_loaded;
}

int st_unwind_libunwind_static_tls(void)
{
    return lu_loaded && lu_static_tls;
}

void st_unwind_libunwind_flush(void)
{
    if (lu_loaded)
        lu.flush_cache(*lu.local_as, 0, 0);
}

static int unwind_libunwind(const void *uc, uintptr_t *pcs, int cap)
{
    unw_cursor_t cur;
    unw_word_t ip = 0;
    if (lu.init_local2(&cur, (unw_context_t *)(uintptr_t)uc, UNW_INIT_SIGNAL_FRAME) != 0 ||
        lu.get_reg(&cur, UNW_REG_IP, &ip) != 0)
        return 0;
    int n = 0;
    pcs[n++] = (uintptr_t)ip;
    while (n < cap && n < ST_UNWIND_MAX_HOPS && lu.step(&cur) > 0) {
        if (lu.get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip < ST_UNWIND_MIN_PC)
            break;
        pcs[n++] = (uintptr_t)ip - 1;
    }
    return n;
}

#else /* !STRATA_HAVE_LIBUNWIND */

int st_unwind_libunwind_load(st_msg_t *msg)
{
    return st_msg_set(msg, ST_EINVAL,
                      "libunwind is not loaded: strata was built without libunwind's headers "
                      "(Debian: libunwind-dev)");
}

int st_unwind_libunwind_loaded(void)
{
    return 0;
}

int st_unwind_libunwind_static_tls(void)
{
    return 0;
}

void st_unwind_libunwind_flush(void)
{
}

#endif /* STRATA_HAVE_LIBUNWIND */

int st_unwind(const void *uc, const st_unwind_thread_t *t, int method, uintptr_t *pcs, int cap)
{
    if (method != ST_UNWIND_FP && method != ST_UNWIND_LIBUNWIND)
        return ST_EINVAL;
    if (method == ST_UNWIND_LIBUNWIND && !st_unwind_libunwind_loaded())
        return ST_EINVAL;
    if (!uc || cap <= 0)
        return 0;
    int saved = errno;
    int n;
#ifdef STRATA_HAVE_LIBUNWIND
    if (method == ST_UNWIND_LIBUNWIND && t && t->libunwind_warm && !t->in_loader)
        n = unwind_libunwind(uc, pcs, cap);
    else
#endif
        n = unwind_fp((const ucontext_t *)uc, t, pcs, cap);
    errno = saved;
    return n;
}

#else /* !__x86_64__ */

int st_unwind_thread_init(st_unwind_thread_t *t, st_msg_t *msg)
{
    memset(t, 0, sizeof *t);
    return st_msg_set(msg, ST_EINVAL,
                      "native unwinding is not supported on this architecture (x86-64 only)");
}

int st_unwind_libunwind_load(st_msg_t *msg)
{
    return st_msg_set(msg, ST_EINVAL,
                      "libunwind is not loaded: native unwinding is not supported on this "
                      "architecture (x86-64 only)");
}

int st_unwind_libunwind_loaded(void)
{
    return 0;
}

int st_unwind_libunwind_static_tls(void)
{
    return 0;
}

int st_unwind_thread_init_of(st_unwind_thread_t *t, pthread_t th, st_msg_t *msg)
{
    (void)th;
    return st_unwind_thread_init(t, msg);
}

void st_unwind_libunwind_flush(void)
{
}

int st_unwind(const void *uc, const st_unwind_thread_t *t, int method, uintptr_t *pcs, int cap)
{
    (void)uc, (void)t, (void)pcs, (void)cap;
    return method == ST_UNWIND_FP || method == ST_UNWIND_LIBUNWIND ? 0 : ST_EINVAL;
}

#endif /* __x86_64__ */
