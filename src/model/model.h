/* What the writers read: the finished profile of a run, independent of any
 * collector. The session builds it from its threads once recording has stopped;
 * tests build it from hand-made path tables. Nothing here is owned by the model.
 *
 * Design note. A thread is a path table (core/pathtab.h): the shape of its calls,
 * and a metric column per entry of the model's registry (`metrics`) holding the
 * values. Metric 0 is always the wall timer (ST_TIMER_WALL), whose count is the
 * node's calls whatever components were chosen; metric 1 is the CPU timer
 * (ST_TIMER_CPU) when the cpu_clock component was chosen. A timer's cells are in
 * ticks; ns_per_tick[timer] converts them. Other metrics (allocations, samples)
 * follow, each named by the registry. Writers walk a table with st_walk
 * (model/walk.h) and read cells with the accessors below. */
#ifndef STRATA_MODEL_MODEL_H
#define STRATA_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/components.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "core/metrics.h"
#include "core/pathtab.h"
#include "core/settings.h"

typedef struct {
    const st_pathtab_t *paths; /* its call paths and their metric columns */
    uint32_t index;         /* |N>>> in the tables */
    uint64_t tid;           /* the kernel's thread id */
    const char *name;       /* e.g. "MainThread" */
    int has_rank;           /* 1: it ran in MPI rank `rank` (0: no rank known) */
    uint32_t rank;
} st_model_thread_t;

/* What a stack sampler did in a run (the samples themselves are a samples metric
 * of the threads' call paths). */
typedef struct {
    double freq;                /* samples per second per thread asked for */
    const char *clock;          /* "cpu" or "wall" */
    uint64_t threads;           /* threads sampled */
    uint64_t signals;           /* samples taken (timer signals handled) */
    uint64_t periods;           /* periods they stand for (1 + the timers' overruns) */
    uint64_t promised;          /* periods the threads' sampled time stands for at the
                                 * rate asked (their clocks from their timers' start to
                                 * the end, or to their own end, together): `periods`
                                 * falls short by what no signal came for (a CPU timer
                                 * fires at the kernel's tick, and a thread's last
                                 * part period goes with it) */
    uint64_t lost;              /* samples not recorded: no buffer room */
    uint64_t unreadable;        /* periods whose stack could not be read */
    uint64_t no_python;         /* periods when the thread ran no Python code */
    uint64_t unnamed;           /* frames whose code could not be named */
    uint64_t left_out;          /* periods whose every frame the filters leave out */
    uint64_t delayed;           /* periods a thread kept the signal blocked for (not
                                 * attributed: where it was is not known) */
    double self_cpu_s;          /* the sampler's own CPU (handlers and its thread) */
    uint64_t rated;             /* threads sampled for 0.1 s or more of their clock */
    double rate_min, rate_max;  /* their samples a second of that clock, lowest and
                                 * highest (the effective rate per thread) */
    double prate_min, prate_max; /* the same in periods */
    const char *note;           /* what went wrong or changed while sampling, or NULL */
    const struct st_model_line *lines; /* the lines sampled, most periods first */
    size_t nlines;
} st_model_stacks_t;

/* A line that the innermost Python frame of samples was running: its function's
 * label, file and line number, and the periods of the samples taken there. */
typedef struct st_model_line {
    const char *function, *file;
    uint32_t line;
    uint64_t periods;
} st_model_line_t;

/* Sums the rows of one line (same function, file and number) into one and orders
 * the rows most periods first; returns how many are left. `drop` (may be NULL)
 * is given each row summed into another, before it is written over. */
size_t st_model_lines_coalesce(st_model_line_t *rows, size_t n,
                               void (*drop)(st_model_line_t *row));

/* One line of a chosen function (--lines, --memory). line_profiler's numbers: hits,
 * and the time from each of its starts to the next line event of its frame (callees'
 * time included, as line_profiler counts it). memory_profiler's: occurrences (a
 * measure after the line ran), the increments summed and the highest memory seen
 * (bytes; memory_profiler's quirks kept: an increment is measured from the highest
 * memory of the line measured before). */
typedef struct st_model_lrow {
    uint32_t line;
    uint64_t hits;
    uint64_t ns;
    uint64_t occ;
    int64_t inc, mem;
} st_model_lrow_t;

/* A function whose lines were timed: line_profiler's key (file, first line,
 * qualified name), its lines run in line order, and the source of its block from
 * first_line on (line_profiler's "Line Contents"; NULL when the file was not found). */
typedef struct st_model_lfunc {
    const char *function, *file;
    uint32_t first_line;
    const st_model_lrow_t *rows;
    size_t nrows;
    const char *const *source;
    size_t nsource;
} st_model_lfunc_t;

/* A line that held sampled allocations (--memory: heap, sample): what they stood for
 * at the peak of the memory and at the end. */
typedef struct st_model_memline {
    const char *function, *file;
    uint32_t line;
    uint64_t peak, at_exit;      /* bytes */
} st_model_memline_t;

/* A call of a chosen function (--memory), for memory over time. */
typedef struct st_model_memcall {
    const char *function;
    double t0, t1;          /* seconds since the run's start (start_ns) */
    int64_t m0, m1;         /* resident bytes at its start and end */
    uint32_t level;         /* calls of chosen functions open around it */
} st_model_memcall_t;

/* Memory over time (--memory): a sample every interval_s (coarser for long runs). */
typedef struct st_model_memtime {
    double interval_s;
    size_t n;
    const double *t;        /* seconds since the run's start (start_ns) */
    const int64_t *rss;     /* resident bytes */
    const int64_t *heap;    /* strata's heap (bytes); NULL when not measured */
    const st_model_memcall_t *calls;
    size_t ncalls;
    uint64_t calls_dropped; /* calls beyond the bound, not kept */
} st_model_memtime_t;

/* A child process of the run, recorded when it began (STRATA_FOLLOW_CHILDREN). */
typedef struct {
    long pid;                    /* 0: not known (a program that is not followed) */
    long parent;                 /* its parent's pid */
    const char *folder;          /* its results folder, in the top run's; NULL when
                                  * it is not followed */
    const char *not_followed;    /* why it is not followed, or NULL */
    const char *const *command;
    size_t ncommand;
} st_model_child_t;

typedef struct {
    const st_intern_t *labels;
    const st_model_thread_t *threads;
    size_t nthreads;
    const st_metrics_t *metrics;    /* names each column of the threads' tables */
    double ns_per_tick[ST_NTIMERS]; /* converts each timer's ticks to ns (by metric id) */
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
    int ranks_are_pids;         /* 1: each rank is a process of a followed tree, its pid
                                 * (children: the tree's every process) */
    uint32_t nruns;             /* runs summed into this model (0 or 1: one run) */
    const st_model_child_t *children; /* the process's children that were followed */
    size_t nchildren;
    /* process sampling (nsampled 0: none) */
    const struct st_model_metric *sampled;
    size_t nsampled;
    double sampling_freq;       /* samples per second asked for */
    uint64_t nsamples;
    double sampler_cpu_s;       /* what the sampler thread itself cost */
    const char *gpu_note;       /* why there are no GPU metrics, or NULL */
    /* stack sampling (NULL: none) */
    const st_model_stacks_t *stacks;
    /* line profiles (--lines, --memory), in the order the functions were chosen */
    const st_model_lfunc_t *lfuncs;
    size_t nlfuncs;
    int line_time;              /* 1: their rows have times (--lines) */
    const char *line_memory;    /* "heap" or "rss": their rows have memory; NULL: none */
    const st_model_memtime_t *memtime; /* memory over time (--memory); NULL: none */
    const st_model_memline_t *memlines; /* the lines holding memory, most at the peak first */
    size_t nmemlines;
    /* GPU activities through CUPTI (NULL: not recorded) */
    const struct st_model_gpu *gpu;
    /* the timeline (has_trace 0: none) */
    int has_trace;
    uint64_t trace_events, trace_dropped, trace_too_deep, trace_bytes;
    double trace_write_s;       /* time spent writing the timeline files at exit */
} st_model_t;

/* A GPU kernel's launches, by (demangled) name: their times on the GPU in ns. */
typedef struct {
    const char *name;
    uint64_t count, total_ns, min_ns, max_ns;
    double mean_ns, stddev_ns;
} st_model_kernel_t;

/* The copies of one direction ("HtoD", "DtoH" ...; "memset" for sets). */
typedef struct {
    const char *direction;
    uint64_t count, bytes, total_ns;
} st_model_copy_t;

/* What CUPTI recorded (session/gpu.c): the kernel table (most total time first),
 * the copy table, and how much of it could be tied to the code that launched it. */
typedef struct st_model_gpu {
    const st_model_kernel_t *kernels;
    size_t nkernels;
    const st_model_copy_t *copies;
    size_t ncopies;
    const char *library;        /* the libcupti loaded */
    uint64_t launches;          /* kernels, copies and sets recorded */
    uint64_t attributed;        /* of them, tied to the call that launched them */
    uint64_t dropped;           /* records CUPTI could not hand over (no buffer free) */
    double clock_error_ns;      /* the GPU clock's conversion: its bound (docs/formats.md) */
} st_model_gpu_t;

/* One sampled metric, summarised. */
typedef struct st_model_metric {
    const char *name;
    const char *units;
    double min, mean, max;
} st_model_metric_t;

/* The calls of a node: the count of the wall timer's cell. */
static inline uint64_t st_model_calls(const st_model_thread_t *th, uint32_t node)
{
    return st_mcols_timer(&th->paths->cols, ST_TIMER_WALL)[node].count;
}

/* A timer's cell of a node (timer: ST_TIMER_WALL or ST_TIMER_CPU, present). */
static inline const st_tstat_t *st_model_tstat(const st_model_thread_t *th, int timer,
                                               uint32_t node)
{
    return &st_mcols_timer(&th->paths->cols, (uint32_t)timer)[node];
}

/* 1 when metric `id` of m's registry holds what the profile reports: the wall and
 * CPU timers when their components were chosen (the wall timer's column holds the
 * calls in any case), any other timer, and a count, bytes, samples or gauge metric
 * that holds a value somewhere (a registry lists what could be measured: a metric
 * nothing was recorded in is left out). Scans the columns of such a metric: callers
 * that ask per node ask once per write. */
int st_model_reports(const st_model_t *m, uint32_t id);

/* The primary timer of a model: ST_TIMER_WALL, ST_TIMER_CPU or -1 (counts only). */
int st_model_timer(const st_model_t *m);

/* What the flame-graph writers weigh nodes by: the primary timer, else the first
 * samples metric the model reports (a sampled profile), else ST_METRIC_NONE: the
 * calls. */
uint32_t st_model_weight(const st_model_t *m);

/* Per-node values of `metric` over one thread, as doubles: self (the node's own
 * cell) and inclusive (the node with everything under it). A timer of the wall or
 * CPU clock is in ns (its sum is the inclusive value), another timer in its own
 * unit; a count, bytes or samples metric adds its cells up the tree; metric
 * ST_METRIC_NONE is the calls, added up the same way. Arrays of one double per
 * node of th->paths (the root's 0), the caller's to free. Returns 0, ST_ENOMEM, or
 * ST_EINVAL (a gauge, or a metric the thread has no column for). */
int st_model_values(const st_model_t *m, const st_model_thread_t *th, uint32_t metric,
                    double **incl, double **self);

/* The distinct MPI ranks of m's threads, sorted, *n of them (malloc'd: free); NULL
 * when out of memory. */
uint32_t *st_model_ranks(const st_model_t *m, uint32_t *n);

/* The number of distinct MPI ranks among m's threads (0 when out of memory). */
uint32_t st_model_count_ranks(const st_model_t *m);

#endif
