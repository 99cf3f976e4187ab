#include "core/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

st_clock_kind_t st_clock_kind_ = ST_CLOCK_MONOTONIC;

static uint64_t calib_ticks0, calib_ns0, calib_boot0;

/* True when /proc/cpuinfo lists both flags that make the TSC a usable clock. */
static int tsc_is_invariant(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    }
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

double st_clock_pair(uint64_t (*read)(void *arg), void *arg, uint64_t *ticks,
                     uint64_t *value)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = st_clock_ticks();
        uint64_t v = read(arg);
        uint64_t b = st_clock_ticks();
        if (b - a < best) {
            best = b - a;
            *ticks = a + (b - a) / 2;
            *value = v;
        }
    }
    return (double)best / 2.0;
}

static uint64_t monotonic(void *unused)
{
    (void)unused;
    return st_clock_monotonic_ns();
}

/* The ticks and the monotonic clock read together: the calibration's readings, at
 * the start and at the end (read one after the other, a 136 us preemption between
 * them skewed a 20 ms run's ratio by 0.7 %: a test under ASan saw it). */
static void read_pair(uint64_t *ticks, uint64_t *ns)
{
    st_clock_pair(monotonic, NULL, ticks, ns);
}

void st_clock_init(const char *want)
{
    st_clock_kind_ = ST_CLOCK_MONOTONIC;
#if defined(__x86_64__)
    if (want && strcmp(want, "tsc") == 0)
        st_clock_kind_ = ST_CLOCK_TSC;
    else if (!(want && strcmp(want, "monotonic") == 0) && tsc_is_invariant())
        st_clock_kind_ = ST_CLOCK_TSC;
#else
    (void)want;
#endif
    struct timespec boot;
    clock_gettime(CLOCK_BOOTTIME, &boot);
    read_pair(&calib_ticks0, &calib_ns0);
    calib_boot0 = (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec;
}

st_clock_kind_t st_clock_kind(void) { return st_clock_kind_; }

const char *st_clock_name(void) { return st_clock_kind_ == ST_CLOCK_TSC ? "tsc" : "monotonic"; }

double st_clock_ns_per_tick(void)
{
    if (st_clock_kind_ != ST_CLOCK_TSC)
        return 1.0;
    uint64_t ns, ticks;
    read_pair(&ticks, &ns);
    /* A window of 1 ms already gives the ratio to about 1e-5 (both clocks are read
     * to tens of nanoseconds); a shorter run waits for the rest of it. */
    while (ns - calib_ns0 < 1000000u) {
        struct timespec req = {0, 200000};
        nanosleep(&req, NULL);
        read_pair(&ticks, &ns);
    }
    if (ticks <= calib_ticks0)
        return 1.0;
    return (double)(ns - calib_ns0) / (double)(ticks - calib_ticks0);
}

uint64_t st_clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t st_clock_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void st_clock_base(uint64_t *ticks, uint64_t *mono_ns, uint64_t *boot_ns)
{
    *ticks = calib_ticks0;
    *mono_ns = calib_ns0;
    *boot_ns = calib_boot0;
}
