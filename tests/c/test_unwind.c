/* Native unwinding from a signal handler and symbolisation after it
 * (src/sampling): known chains a -> b -> c -> spin (inlined) with and without
 * frame pointers, a library sampled then unloaded, garbage contexts, and the
 * cost of one unwind. Where libunwind or libdw is missing the cases that need it
 * are skipped with the reason printed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "sampling/ehframe.h"
#include "sampling/elfsym.h"
#include "sampling/modules.h"
#include "sampling/symbols.h"
#include "sampling/unwind.h"
#include "unwind_chain.h"

#define CAP 64

volatile int chain_in_spin, chain_done;
volatile unsigned long chain_spins;

static st_unwind_thread_t self;
/* The sampled thread's struct, as a sampler finds it: thread-local. */
static __thread st_unwind_thread_t *cur;
static int have_libunwind, have_dw;

/* ThreadSanitizer holds an asynchronous signal back until the thread calls into
 * its runtime's interceptors, which a spinning thread never does, and runs the
 * handler later with a stale context: no sampled case can run under it. */
#if defined(__SANITIZE_THREAD__)
static const int can_sample = 0;
#else
static const int can_sample = 1;
#endif

/* What the handler takes: one stack when chain_in_spin is set. */
static volatile int sample_method;
static uintptr_t sample_pcs[CAP];
static volatile int sample_n;

static void on_prof(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si;
    if (!chain_in_spin || chain_done)
        return;
    sample_n = st_unwind(uc, cur, sample_method, sample_pcs, CAP);
    chain_done = 1;
}

/* Runs fn under a 1 ms CPU timer until the handler has sampled inside spin. */
static int sample(int (*fn)(int), int method)
{
    chain_in_spin = 0;
    chain_done = 0;
    sample_n = -100;
    sample_method = method;
    struct itimerval it = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &it, NULL);
    fn(1);
    setitimer(ITIMER_PROF, &off, NULL);
    return sample_n;
}

typedef struct {
    const char *pfx;
    int (*a)(int);
    void (*lines)(chain_lines_t *);
} chain_t;

static const chain_t chains[] = {
    {"chain_fp_o0_", chain_fp_o0_a, chain_fp_o0_lines},
    {"chain_fp_o2_", chain_fp_o2_a, chain_fp_o2_lines},
    {"chain_nofp_o2_", chain_nofp_o2_a, chain_nofp_o2_lines},
};

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Symbolises n pcs and checks that, in order, the chain's c, b, a (each not
 * inlined) appear with file:line inside the function, and, with libdw, that
 * spin appears inlined before c. full: all of a, b, c must be there; else c
 * alone (frame pointers over code built without them). */
static void check_chain(st_symbols_t *sym, const chain_t *ch, const uintptr_t *pcs, int n, int full,
                        int lines_known, const char *what)
{
    chain_lines_t lines[CHAIN_NFUNCS];
    ch->lines(lines);
    static const char *names[] = {"c", "b", "a"};
    static const int which[] = {CHAIN_C, CHAIN_B, CHAIN_A};
    int want = 0, saw_spin = 0, fails0 = failed;
    for (int i = 0; i < n && want < 3; i++) {
        const st_symframe_t *f;
        int nf = st_symbols_resolve(sym, pcs[i], 0, &f);
        CHECK(nf >= 1);
        for (int k = 0; k < nf && want < 3; k++) {
            if (i == 0 && f[k].inlined && strcmp(f[k].function, "spin") == 0) {
                saw_spin = 1;
                CHECK(f[k].file && ends_with(f[k].file, "unwind_chain.c"));
                CHECK(f[k].line >= lines[CHAIN_SPIN].first && f[k].line <= lines[CHAIN_SPIN].last);
                continue;
            }
            char full_name[64];
            snprintf(full_name, sizeof full_name, "%s%s", ch->pfx, names[want]);
            if (strcmp(f[k].function, full_name) != 0)
                continue;
            CHECK(!f[k].inlined);
            if (lines_known) {
                chain_lines_t r = lines[which[want]];
                CHECK(f[k].file && ends_with(f[k].file, "unwind_chain.c"));
                CHECK(f[k].line >= r.first && f[k].line <= r.last);
            }
            want++;
        }
    }
    CHECK(want >= (full ? 3 : 1));
    if (lines_known)
        CHECK(saw_spin);
    if (failed != fails0) {
        fprintf(stderr, "  in %s%s (%d frames):\n", ch->pfx, what, n);
        for (int i = 0; i < n; i++) {
            const st_symframe_t *f;
            int nf = st_symbols_resolve(sym, pcs[i], 0, &f);
            for (int k = 0; k < nf; k++)
                fprintf(stderr, "    %#lx %s%s %s:%d\n", (unsigned long)pcs[i], f[k].function,
                        f[k].inlined ? " (inlined)" : "", f[k].file ? f[k].file : "?", f[k].line);
        }
    }
}

static void test_chains(st_symbols_t *sym, st_symbols_t *elf)
{
    uintptr_t pcs[CAP];
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        const chain_t *ch = &chains[c];
        int fp_frames = strstr(ch->pfx, "nofp") == NULL;
        int n = sample(ch->a, ST_UNWIND_FP);
        CHECK(n >= 1 && n <= CAP);
        if (n < 1)
            continue;
        memcpy(pcs, sample_pcs, sizeof pcs);
        /* frame pointers: the whole chain where the code keeps them, at least c
         * (and never a fault) where it does not */
        check_chain(sym, ch, pcs, n, fp_frames, have_dw, " (frame pointers)");
        check_chain(elf, ch, pcs, n, fp_frames, 0, " (frame pointers, ELF symbols)");
        if (have_libunwind) {
            n = sample(ch->a, ST_UNWIND_LIBUNWIND);
            CHECK(n >= 3 && n <= CAP);
            if (n >= 1) {
                memcpy(pcs, sample_pcs, sizeof pcs);
                check_chain(sym, ch, pcs, n, 1, have_dw, " (libunwind)");
            }
        }
    }
    if (!have_libunwind)
        printf("skipped: libunwind unwinds of the chains (libunwind not loaded)\n");
}

/* Another thread: its own bounds and libunwind warm-up, sampled there. */
static st_symbols_t *thread_sym;

static void *sampled_thread(void *arg)
{
    (void)arg;
    sigset_t prof;   /* inherited blocked from the main thread */
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
    st_unwind_thread_t t;
    st_msg_t msg;
    CHECK(st_unwind_thread_init(&t, &msg) == 0);
    CHECK(t.stack_lo < (uintptr_t)&t && (uintptr_t)&t < t.stack_hi);
    CHECK(t.stack_hi <= self.stack_lo || t.stack_lo >= self.stack_hi);
    CHECK(t.libunwind_warm == have_libunwind);
    cur = &t;
    int method = have_libunwind ? ST_UNWIND_LIBUNWIND : ST_UNWIND_FP;
    const chain_t *ch = &chains[have_libunwind ? 2 : 1];
    int n = sample(ch->a, method);
    CHECK(n >= 3);
    uintptr_t pcs[CAP];
    memcpy(pcs, sample_pcs, sizeof pcs);
    if (n >= 1)
        check_chain(thread_sym, ch, pcs, n, 1, have_dw, " (another thread)");
    return NULL;
}

static void test_thread(st_symbols_t *sym)
{
    /* the main thread blocks the signal, so that it lands in the spinning one */
    sigset_t prof, old;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, &old);
    thread_sym = sym;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, sampled_thread, NULL) == 0);
    pthread_join(th, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A library loaded, sampled, unloaded, then symbolised: still named. */
static void test_dlclose(st_modules_t *mods, st_symbols_t *sym, st_symbols_t *elf)
{
    void *h = dlopen(UNWIND_DSO, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return;
    }
    int (*outer)(volatile int *, volatile int *) =
        (int (*)(volatile int *, volatile int *))dlsym(h, "unwind_dso_outer");
    CHECK(outer != NULL);
    CHECK(st_modules_refresh(mods) == 0);
    uint32_t gen = mods->gen;
    int before = mods->count;
    /* sampled in the library: inner, then outer; without sampling, the
     * addresses of outer (the symbols' part of the case still runs) */
    const char *want[2] = {"unwind_dso_inner", "unwind_dso_outer"};
    uintptr_t pcs[CAP];
    int n = 2;
    if (can_sample) {
        chain_in_spin = 0;
        chain_done = 0;
        sample_n = -100;
        sample_method = ST_UNWIND_FP;
        struct itimerval it = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_PROF, &it, NULL);
        outer(&chain_in_spin, &chain_done);
        setitimer(ITIMER_PROF, &off, NULL);
        n = sample_n;
        memcpy(pcs, sample_pcs, sizeof pcs);
    } else {
        pcs[0] = pcs[1] = (uintptr_t)outer + 1;
        want[0] = want[1];
    }
    CHECK(n >= 2);
    int at = n >= 1 ? st_modules_find(mods, pcs[0], gen) : -1;
    CHECK(at >= 0 && ends_with(mods->mods[at].path, "unwind_dso.so"));
    dlclose(h);
    st_unwind_libunwind_flush();
    CHECK(st_modules_refresh(mods) == 0);
    CHECK(mods->count == before);
    if (at >= 0) {
        CHECK(mods->mods[at].loaded == 0);
        CHECK(mods->mods[at].last_gen == gen);
    }
    CHECK(st_modules_find(mods, pcs[0], gen) == at);
    Dl_info info;
    CHECK(n < 1 || dladdr((void *)pcs[0], &info) == 0 || !info.dli_fname ||
          !ends_with(info.dli_fname, "unwind_dso.so"));   /* really gone */
    st_symbols_t *both[] = {sym, elf};
    for (int k = 0; k < 2 && n >= 2; k++) {
        const st_symframe_t *f;
        CHECK(st_symbols_resolve(both[k], pcs[0], gen, &f) >= 1);
        CHECK_STR(f[0].function, want[0]);
        CHECK(f[0].module && ends_with(f[0].module, "unwind_dso.so"));
        if (k == 0 && have_dw)
            CHECK(f[0].file && ends_with(f[0].file, "unwind_dso.c") && f[0].line > 0);
        CHECK(st_symbols_resolve(both[k], pcs[1], gen, &f) >= 1);
        CHECK_STR(f[0].function, want[1]);
    }
    /* loaded again: a new entry, the old one kept */
    h = dlopen(UNWIND_DSO, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    CHECK(st_modules_refresh(mods) == 0);
    CHECK(mods->count == before + 1);
    CHECK(st_modules_find(mods, (uintptr_t)dlsym(h, "unwind_dso_outer"), 0) == before);
    /* the sample's generation still names the first load, also where the
     * second one reuses its addresses */
    CHECK(n < 1 || st_modules_find(mods, pcs[0], gen) == at);
    dlclose(h);
}

/* Garbage contexts and smashed frame pointers: never a fault, at least the PC. */
static void test_garbage(void)
{
    ucontext_t uc;
    uintptr_t pcs[CAP];
    uint64_t x = 88172645463325252ull;
    unsigned char *bytes = (unsigned char *)&uc;
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof uc; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bytes[i] = (unsigned char)x;
        }
        if (round & 1) {   /* an rsp inside the stack, rbp anywhere near it */
            uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)&uc;
            uc.uc_mcontext.gregs[REG_RBP] =
                (greg_t)((uintptr_t)&uc + (x % 8192) - 4096 + (round & 2 ? 0 : 4));
        }
        int n = st_unwind(&uc, &self, ST_UNWIND_FP, pcs, CAP);
        if (n < 1 || n > CAP) {
            CHECK(n >= 1 && n <= CAP);
            break;
        }
    }
    passed++;
    /* a real context with its rbp smashed */
    getcontext(&uc);
    static const uintptr_t bad[] = {0, 1, 8, 4095, UINTPTR_MAX, UINTPTR_MAX - 7};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uc.uc_mcontext.gregs[REG_RBP] = (greg_t)bad[i];
        CHECK(st_unwind(&uc, &self, ST_UNWIND_FP, pcs, CAP) == 1);
    }
    uc.uc_mcontext.gregs[REG_RBP] = (greg_t)(self.stack_hi - 8);   /* no room for two words */
    CHECK(st_unwind(&uc, &self, ST_UNWIND_FP, pcs, CAP) == 1);
    /* no bounds recorded: the PC alone; no context: nothing */
    st_unwind_thread_t none = {0};
    getcontext(&uc);
    CHECK(st_unwind(&uc, &none, ST_UNWIND_FP, pcs, CAP) == 1);
    CHECK(st_unwind(NULL, &self, ST_UNWIND_FP, pcs, CAP) == 0);
    CHECK(st_unwind(&uc, &self, 99, pcs, CAP) == ST_EINVAL);
    if (!have_libunwind)
        CHECK(st_unwind(&uc, &self, ST_UNWIND_LIBUNWIND, pcs, CAP) == ST_EINVAL);
    /* the cap holds */
    CHECK(st_unwind(&uc, &self, ST_UNWIND_FP, pcs, 2) == 2);
    /* libunwind on garbage: its reads are validated (Debian builds it with
     * conservative checks), so no fault either */
    for (int round = 0; have_libunwind && round < 300; round++) {
        for (size_t i = 0; i < sizeof uc; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bytes[i] = (unsigned char)x;
        }
        if (round & 1) {
            uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)&uc;
            uc.uc_mcontext.gregs[REG_RIP] = (greg_t)((uintptr_t)chain_nofp_o2_b + (x % 64));
        }
        int n = st_unwind(&uc, &self, ST_UNWIND_LIBUNWIND, pcs, CAP);
        if (n < 0 || n > CAP) {
            CHECK(n >= 0 && n <= CAP);
            break;
        }
    }
}

/* The ELF fallback's reader on files that are not what they claim. */
static void test_elf_files(const st_modules_t *mods)
{
    st_elfsyms_t e;
    char path[] = "/tmp/strata-test-elf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    /* an ELF header whose section table lies past the end, then a truncated
     * copy of a real file */
    unsigned char head[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    head[0x3c] = 40;                                 /* e_shnum */
    head[0x3a] = 64;                                 /* e_shentsize */
    memset(head + 0x28, 0xff, 6);                    /* e_shoff: huge */
    CHECK(write(fd, head, sizeof head) == (ssize_t)sizeof head);
    CHECK(st_elfsyms_open(&e, path) == ST_EINVAL && e.map == NULL);
    CHECK(st_elfsyms_open(&e, "/nonexistent/strata") == ST_EIO);
    FILE *self_exe = fopen("/proc/self/exe", "rb");
    unsigned char buf[8192];
    size_t got = self_exe ? fread(buf, 1, sizeof buf, self_exe) : 0;
    if (self_exe)
        fclose(self_exe);
    CHECK(got == sizeof buf && ftruncate(fd, 0) == 0 && pwrite(fd, buf, got, 0) == (ssize_t)got);
    CHECK(st_elfsyms_open(&e, path) < 0);
    close(fd);
    unlink(path);
    /* the real file: a known function by its file address, nothing at 8 */
    CHECK(st_elfsyms_open(&e, "/proc/self/exe") == 0);
    int at = st_modules_find(mods, (uintptr_t)chain_fp_o2_c, 0);
    CHECK(at >= 0);
    if (at >= 0) {
        uint64_t vaddr = (uintptr_t)chain_fp_o2_c - mods->mods[at].bias, start = 0;
        const char *name = st_elfsyms_lookup(&e, vaddr + 3, &start);
        CHECK(name && strcmp(name, "chain_fp_o2_c") == 0 && start == vaddr);
    }
    CHECK(st_elfsyms_lookup(&e, 8, NULL) == NULL);
    st_elfsyms_close(&e);
    CHECK(e.map == NULL && e.n == 0);
}

/* The module map and the symboliser on plain cases. */
static void test_symbols_basics(st_modules_t *mods, st_symbols_t *sym)
{
    CHECK(st_modules_refresh(mods) == 0);   /* libdw and its dependencies since */
    uint32_t gen = mods->gen;
    int count = mods->count;
    CHECK(st_modules_refresh(mods) == 0);
    CHECK(mods->gen == gen + 1 && mods->count == count);
    int at = st_modules_find(mods, (uintptr_t)chain_fp_o0_a + 1, 0);
    CHECK(at >= 0 && mods->mods[at].loaded && mods->mods[at].last_gen == mods->gen);
    CHECK(at >= 0 && ends_with(mods->mods[at].path, "test_unwind"));
    CHECK(at >= 0 && mods->mods[at].build_id_len > 0);
    CHECK(st_modules_find(mods, 16, 0) == -1);
    const st_symframe_t *f, *g;
    CHECK(st_symbols_resolve(sym, 16, 0, &f) == 1);
    CHECK_STR(f[0].function, "0x10");
    CHECK(f[0].module == NULL && f[0].file == NULL);
    /* each address once: the same frames again */
    int n = st_symbols_resolve(sym, (uintptr_t)chain_fp_o2_b + 1, 0, &f);
    CHECK(n >= 1 && st_symbols_resolve(sym, (uintptr_t)chain_fp_o2_b + 1, 0, &g) == n && f == g);
    CHECK_STR(f[n - 1].function, "chain_fp_o2_b");
}

/* A C++ (mangled) symbol, demangled where libstdc++ is loaded. */
int mangled_fn(int) __asm__("_ZN6strata4test7mangledEi");
__attribute__((noinline)) int mangled_fn(int x)
{
    return x + 1;
}

static void test_demangle(st_modules_t *mods)
{
    void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
    st_symbols_t *elf = st_symbols_new(mods, ST_SYMBOLS_NO_DWARF);
    const st_symframe_t *f;
    CHECK(st_symbols_resolve(elf, (uintptr_t)mangled_fn + 1, 0, &f) == 1);
    if (cxx)
        CHECK_STR(f[0].function, "strata::test::mangled(int)");
    else {
        CHECK_STR(f[0].function, "_ZN6strata4test7mangledEi");
        printf("skipped: demangling (libstdc++.so.6 not loaded: %s)\n", dlerror());
    }
    st_symbols_free(elf);
}

/* The cost of one unwind of ~10 frames, from a context taken 10 calls deep. */
__attribute__((noinline)) static void time_at_depth(int depth)
{
    if (depth > 0) {
        time_at_depth(depth - 1);
        __asm__ volatile("" ::: "memory");
        return;
    }
    ucontext_t uc;
    uintptr_t pcs[CAP], fp[CAP];
    getcontext(&uc);
    int nfp = st_unwind(&uc, &self, ST_UNWIND_FP, fp, CAP);
    CHECK(nfp >= 12);
    if (have_libunwind) {
        /* both methods agree on code with frame pointers */
        int n = st_unwind(&uc, &self, ST_UNWIND_LIBUNWIND, pcs, 12);
        CHECK(n == 12 && memcmp(pcs, fp, 12 * sizeof pcs[0]) == 0);
        /* in the loader, or before the thread's warm-up: frame pointers */
        st_unwind_thread_t t = self;
        t.in_loader = 1;
        CHECK(st_unwind(&uc, &t, ST_UNWIND_LIBUNWIND, pcs, CAP) == nfp &&
              memcmp(pcs, fp, (size_t)nfp * sizeof pcs[0]) == 0);
        t.in_loader = 0;
        t.libunwind_warm = 0;
        CHECK(st_unwind(&uc, &t, ST_UNWIND_LIBUNWIND, pcs, CAP) == nfp);
    }
    for (int method = ST_UNWIND_FP; method <= ST_UNWIND_LIBUNWIND; method++) {
        if (method == ST_UNWIND_LIBUNWIND && !have_libunwind)
            break;
        int n = st_unwind(&uc, &self, method, pcs, CAP);
        CHECK(n >= 11);
        enum { ROUNDS = 20000 };
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < ROUNDS; i++)
            st_unwind(&uc, &self, method, pcs, 12);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / ROUNDS;
        printf("one unwind of 12 frames (%s): %.0f ns\n",
               method == ST_UNWIND_FP ? "frame pointers" : "libunwind", ns);
    }
}

int split_me(int x, int y); /* ehframe_split.c: GCC splits it into two functions */

/* Function bounds from the unwind tables (ehframe.h): a whole function, the
 * part GCC moved out of split_me (two branches jump into it), nothing for an
 * address outside any object. */
static void test_ehframe(void)
{
    st_range_t r;
    uintptr_t main_at = (uintptr_t)test_ehframe;
    CHECK(st_ehframe_function(main_at + 1, &r) == 0 && r.lo == main_at && r.hi > main_at + 1);
    CHECK(st_ehframe_function(16, &r) == -1);
    uintptr_t at = (uintptr_t)split_me;
    st_range_t hot;
    CHECK(split_me(3, 2) == 6);
    CHECK(st_ehframe_function(at, &hot) == 0 && hot.lo == at);
    st_range_t parts[4];
    int n = st_ehframe_parts(at, hot.hi - hot.lo, parts, 4);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    CHECK(n == 1 && (parts[0].hi <= hot.lo || parts[0].lo >= hot.hi));
    /* the part is a function of its own to the unwind tables */
    CHECK(n == 1 && st_ehframe_function(parts[0].lo, &r) == 0 && r.lo == parts[0].lo &&
          r.hi == parts[0].hi);
#else
    (void)n; /* only GCC is asked to split it (CMakeLists.txt) */
#endif
    /* a function that jumps nowhere else has no parts */
    CHECK(st_ehframe_parts(main_at, 16, parts, 4) == 0);
}

int main(void)
{
    st_msg_t msg;
    CHECK(st_unwind_thread_init(&self, &msg) == 0);
    CHECK(self.stack_lo < (uintptr_t)&msg && (uintptr_t)&msg < self.stack_hi);
    cur = &self;
    have_libunwind = st_unwind_libunwind_load(&msg) == 0;
    if (have_libunwind)
        CHECK(st_unwind_thread_init(&self, &msg) == 0 && self.libunwind_warm);
    else
        printf("skipped: libunwind cases (%s)\n", msg.text);
    st_modules_t mods = {0};
    CHECK(st_modules_refresh(&mods) == 0);
    st_symbols_t *sym = st_symbols_new(&mods, 0);
    st_symbols_t *elf = st_symbols_new(&mods, ST_SYMBOLS_NO_DWARF);
    CHECK(sym && elf);
    have_dw = strcmp(st_symbols_backend(sym), "libdw") == 0;
    if (!have_dw)
        printf("skipped: file:line and inlined frames (symbols: %s)\n", st_symbols_backend(sym));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);

    test_symbols_basics(&mods, sym);
    if (can_sample) {
        test_chains(sym, elf);
        test_thread(sym);
    } else {
        printf("skipped: the sampled chains (ThreadSanitizer defers asynchronous signals)\n");
    }
    test_dlclose(&mods, sym, elf);
    test_garbage();
    test_elf_files(&mods);
    test_demangle(&mods);
    test_ehframe();
    time_at_depth(10);

    st_symbols_free(sym);
    st_symbols_free(elf);
    st_modules_free(&mods);
    return st_check_report();
}
