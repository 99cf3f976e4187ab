/* The one clock of strata.
 *
 * Design note. The hot path reads a raw tick counter and never converts: on x86-64
 * with an invariant TSC (the CPU flags `constant_tsc` and `nonstop_tsc`) that is
 * `rdtsc`, a few nanoseconds, where two clock_gettime calls per Python call would
 * cost as much as the interpreter's hook itself. Ticks become nanoseconds only when
 * results are written, with a ratio calibrated against CLOCK_MONOTONIC over the
 * whole run (st_clock_ns_per_tick takes a fresh pair of readings each time it is
 * asked, so a long run calibrates better). Without an invariant TSC, or when the
 * clock setting says "monotonic", ticks are CLOCK_MONOTONIC nanoseconds.
 *
 * Thread CPU time (the cpu_clock component) is CLOCK_THREAD_CPUTIME_ID in
 * nanoseconds: a system call, documented as the costly component.
 *
 * Tests inject time by passing their own timestamps to the call tree, which never
 * reads a clock itself. */
#ifndef STRATA_CORE_CLOCK_H
#define STRATA_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef enum { ST_CLOCK_MONOTONIC = 0, ST_CLOCK_TSC = 1 } st_clock_kind_t;

/* Chooses the tick source and takes the first calibration reading: `want` is the
 * clock setting, "auto" (the TSC where it is invariant), "tsc" (the TSC on x86-64
 * even if the CPU does not say it is invariant) or "monotonic". Call once, before
 * any st_clock_ticks(); not thread-safe. */
void st_clock_init(const char *want);

/* Which source st_clock_ticks() reads. */
st_clock_kind_t st_clock_kind(void);
const char *st_clock_name(void);

/* Nanoseconds per tick, calibrated from st_clock_init() until now (1.0 for the
 * monotonic source). */
double st_clock_ns_per_tick(void);

/* The tick reading taken at st_clock_init() with CLOCK_MONOTONIC and CLOCK_BOOTTIME
 * (nanoseconds) read beside it: what turns ticks into time on a timeline. */
void st_clock_base(uint64_t *ticks, uint64_t *mono_ns, uint64_t *boot_ns);

/* Another clock read together with the ticks: read(arg) between two readings of
 * the ticks, the tightest of five tries (a preemption between two reads one after
 * the other would skew a ratio of the clocks by its length). *ticks gets the two
 * readings' midpoint, *value read's; returns the half of their span (ticks). */
double st_clock_pair(uint64_t (*read)(void *arg), void *arg, uint64_t *ticks,
                     uint64_t *value);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in nanoseconds. */
uint64_t st_clock_monotonic_ns(void);
uint64_t st_clock_realtime_ns(void);

extern st_clock_kind_t st_clock_kind_;

#if defined(__x86_64__)
/* The time-stamp counter itself (x86-64 only): what st_clock_ticks() reads when its
 * source is the TSC. */
static inline uint64_t st_clock_tsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
#endif

/* The raw tick counter: signal-safe, lock-free, no system call on TSC. */
static inline uint64_t st_clock_ticks(void)
{
#if defined(__x86_64__)
    if (st_clock_kind_ == ST_CLOCK_TSC)
        return st_clock_tsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread in nanoseconds (a system call). */
static inline uint64_t st_clock_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
