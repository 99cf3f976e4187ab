/* What the writers read: the finished profile of a run, independent of any
 * collector. The session builds it from its threads once recording has stopped;
 * tests build it from hand-made trees. Nothing here is owned by the model. */
#ifndef STRATA_MODEL_MODEL_H
#define STRATA_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/calltree.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "core/settings.h"

typedef struct {
    const st_calltree_t *tree;
    uint32_t index;         /* |N>>> in the tables */
    uint64_t tid;           /* the kernel's thread id */
    const char *name;       /* e.g. "MainThread" */
    int has_rank;           /* 1: it ran in MPI rank `rank` (0: no rank known) */
    uint32_t rank;
} st_model_thread_t;

typedef struct {
    const st_intern_t *labels;
    const st_model_thread_t *threads;
    size_t nthreads;
    double ns_per_tick[ST_NTIMERS]; /* converts each timer's ticks to ns */
    const st_settings_t *settings;
    unsigned components;    /* bit (1 << st_component_t) for each component chosen */
    /* metadata for profile.json */
    const char *const *command;
    size_t ncommand;
    const char *python_version;
    const char *clock_name;
    long pid;
    const char *host;
    uint64_t start_ns, end_ns;  /* CLOCK_REALTIME */
    uint64_t dropped;           /* calls not recorded (node limit, memory) */
    /* where each label's code lives (pstats, callgrind, dot); NULL: unknown */
    const st_loctab_t *locs;
    int has_rank;               /* 1: the process was MPI rank `rank` */
    uint32_t rank;
    uint32_t nranks;            /* ranks merged into this model (0: not a merge of ranks) */
    uint32_t nruns;             /* runs summed into this model (0 or 1: one run) */
    /* process sampling (nmetrics 0: none) */
    const struct st_model_metric *metrics;
    size_t nmetrics;
    double sampling_freq;       /* samples per second asked for */
    uint64_t nsamples;
    double sampler_cpu_s;       /* what the sampler thread itself cost */
    const char *gpu_note;       /* why there are no GPU metrics, or NULL */
    /* the timeline (has_trace 0: none) */
    int has_trace;
    uint64_t trace_events, trace_dropped, trace_too_deep, trace_bytes;
    double trace_write_s;       /* time spent writing the timeline files at exit */
} st_model_t;

/* One sampled metric, summarised. */
typedef struct st_model_metric {
    const char *name;
    const char *units;
    double min, mean, max;
} st_model_metric_t;

#endif
