/* enter + exit cost of the recorder, over the floor of two clock reads a call.
 *
 * Each variant runs the calls of a recursive fib(N) (each call one enter and one
 * exit around its two recursive calls, keyed as the Python collector keys them) and
 * reports nanoseconds per enter+exit pair, the fastest of R rounds, with the clock
 * both use (st_clock: the TSC where invariant). "floor" is the same recursion with
 * only the two clock reads: what remains above it is bookkeeping.
 *
 *   recorder: st_rec_enter_t / st_rec_exit_key_t with `tracing` a constant, as
 *             the Python collector (src/python/collector.h) calls them.
 *
 * The timeline is never reset: it takes (and faults in) fresh chunks as it fills
 * them, about 7.5 MiB a round at fib(25). (Until issue 10 this also ran the call
 * tree and timeline the recorder replaced: docs/engine.md has those figures.)
 *
 * Built by CMake outside the Python package (target recorder_bench); run
 *   build/ctest/recorder_bench [N] [R]
 * from `make bench-recorder`. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/clock.h"
#include "core/recorder.h"

static volatile uint64_t sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t calls;

/* ---- floor: two clock reads per call */
static void fib_floor(int n)
{
    uint64_t t0 = st_clock_ticks();
    calls++;
    if (n > 1) {
        fib_floor(n - 1);
        fib_floor(n - 2);
    }
    sink += st_clock_ticks() - t0;
}

#define FIB(name, enter, exit_, tracing)                                               \
    static void name(int n)                                                            \
    {                                                                                  \
        int key = n;                                                                   \
        enter(7, &key, tracing);                                                       \
        calls++;                                                                       \
        if (n > 1) {                                                                   \
            name(n - 1);                                                               \
            name(n - 2);                                                               \
        }                                                                              \
        exit_(&key, tracing);                                                          \
    }

/* ---- the recorder */
static st_rec_thread_t *rec_th;

static inline void rec_enter(uint32_t label, const void *key, const int tracing)
{
    st_rec_enter_t(rec_th, label, key, tracing);
}

static inline void rec_exit(const void *key, const int tracing)
{
    st_rec_exit_key_t(rec_th, key, tracing);
}

FIB(fib_rec, rec_enter, rec_exit, 0)
FIB(fib_rec_traced, rec_enter, rec_exit, 1)

typedef struct {
    const char *name;
    void (*fn)(int);
    double best;
} variant_t;

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 25;
    int rounds = argc > 2 ? atoi(argv[2]) : 15;
    st_clock_init("auto");

    st_rec_config_t cfg = {0};
    cfg.trace = 1;
    cfg.budget = (uint64_t)1 << 32;
    cfg.policy = ST_EV_DISCARD;
    cfg.max_depth = 512;
    st_recorder_t rec;
    if (st_rec_init(&rec, &cfg) < 0 || !(rec_th = st_rec_self(&rec)))
        return 1;

    variant_t v[] = {
        {"floor (2 clock reads)", fib_floor, 1e30},
        {"recorder", fib_rec, 1e30},
        {"recorder + trace", fib_rec_traced, 1e30},
    };
    size_t nv = sizeof v / sizeof v[0];
    /* warm-up: every path and chunk made once */
    for (size_t i = 0; i < nv; i++)
        v[i].fn(n);
    /* rounds interleave the variants, so that noise falls on all alike */
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < nv; i++) {
            calls = 0;
            uint64_t t0 = now_ns();
            v[i].fn(n);
            double ns = (double)(now_ns() - t0) / (double)calls;
            if (ns < v[i].best)
                v[i].best = ns;
        }
    }
    printf("fib(%d): %llu calls a round, best of %d rounds, clock %s\n", n,
           (unsigned long long)calls, rounds, st_clock_name());
    for (size_t i = 0; i < nv; i++)
        printf("  %-24s %6.2f ns per enter+exit (%+.2f over the floor)\n", v[i].name, v[i].best,
               v[i].best - v[0].best);
    st_rec_free(&rec);
    return 0;
}
