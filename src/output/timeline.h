/* What the timeline writers (Perfetto, Chrome JSON) read: every thread's events
 * (core/events.h, read with st_ev_next),
 * the counter tracks of the process sampler, and how to turn ticks into time.
 * Built by the session once recording has stopped; nothing here is owned. */
#ifndef STRATA_OUTPUT_TIMELINE_H
#define STRATA_OUTPUT_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/intern.h"
#include "core/loctab.h"
#include "core/events.h"

typedef struct {
    const st_evbuf_t *events;   /* its begin and end events, and its stack samples (other
                                 * kinds are skipped) */
    uint32_t index;          /* |N>>> in the tables */
    uint64_t tid;
    const char *name;
} st_timeline_thread_t;

typedef struct {
    const char *name;        /* "memory.rss" */
    const char *units;       /* "bytes", "count", "%", "MHz", "s", "W", "C" */
    size_t n;                /* samples */
    const uint64_t *ns;      /* CLOCK_MONOTONIC nanoseconds of each sample */
    const double *values;
} st_timeline_counter_t;

/* An activity on a GPU stream's track (a kernel, a copy), in CLOCK_MONOTONIC ns;
 * `flow` (0: none) is the flow from the CPU call that launched it (the thread's
 * ST_EV_FLOW event of the same id). */
typedef struct {
    uint64_t t0, t1;
    uint32_t track;          /* index in gpu_tracks */
    uint32_t label;
    uint64_t flow;
} st_timeline_slice_t;

typedef struct {
    const st_intern_t *labels;
    const st_loctab_t *locs;        /* the labels' functions (model/names.h); may be NULL */
    const st_timeline_thread_t *threads;
    size_t nthreads;
    const st_timeline_counter_t *counters;
    size_t ncounters;
    long pid;
    const char *process_name;
    double ns_per_tick;      /* ticks -> ns */
    uint64_t base_ticks;     /* a tick reading ... */
    uint64_t base_mono_ns;   /* ... and CLOCK_MONOTONIC at the same moment */
    uint64_t base_boot_ns;   /* CLOCK_BOOTTIME at the same moment */
    uint64_t base_real_ns;   /* CLOCK_REALTIME at the same moment (0: not known), so
                              * that traces of several hosts can be aligned */
    /* stack samples (metric sample_metric of the signal lane): sampled id f is
     * the labels sample_chain[sample_first[f] .. sample_first[f + 1]), outermost
     * first; sample_first NULL: no samples on the timeline */
    const uint32_t *sample_first, *sample_chain;
    uint32_t sample_nids;
    uint32_t sample_metric;
    uint64_t sample_period_ns;  /* a sample's weight is periods of this */
    const char *sample_clock;   /* "cpu" or "wall" */
    /* GPU streams' tracks (names) and their slices, by start time */
    const char *const *gpu_tracks;
    size_t ngpu_tracks;
    const st_timeline_slice_t *gpu_slices;
    size_t ngpu_slices;
    const char *const *attr_keys;   /* metadata: key/value pairs */
    const char *const *attr_values;
    size_t nattrs;
} st_timeline_t;

/* CLOCK_MONOTONIC nanoseconds of a tick reading. */
static inline uint64_t st_timeline_ns(const st_timeline_t *m, uint64_t ticks)
{
    double d = (double)(int64_t)(ticks - m->base_ticks) * m->ns_per_tick;
    double ns = (double)m->base_mono_ns + d;
    return ns < 0 ? 0 : (uint64_t)(ns + 0.5);
}

#endif
