/* The process sampler: a background thread that records process- and system-level
 * metrics while the program runs (STRATA_USE_PROCESS_SAMPLING).
 *
 * Design note. Every 1/freq seconds the thread reads /proc/self/stat, status and
 * io, /proc/self/net/dev, each CPU's cpufreq, and, when an NVIDIA driver is there,
 * each GPU's memory, power, temperature and utilisation (gpu/nvml.h). It never touches the interpreter and takes no lock the program
 * could hold. What it costs is measured, and kept out of what it measures: its own
 * CPU time (read from /proc/self/task/<tid>/stat) is subtracted from the process's
 * user and system time and utilisation, and it does not count itself as a thread (nor
 * the other threads strata runs, other_threads).
 *
 * network.received and network.sent count the bytes through every interface of the
 * network namespace (/proc/self/net/dev: every process in it, not only this one),
 * from the start of sampling: each sample is the counters' value less their value
 * at st_sampler_start(), so the figures are the run's, not the machine's since boot.
 *
 * Memory is bounded: at most ST_SAMPLER_MAX_SAMPLES samples are kept; when that
 * many are held, every other one is dropped and the interval doubles, so a long
 * run keeps its whole span at a coarser step.
 *
 * start() and stop() are called from one thread (the session's); the arrays may be
 * read once stop() has returned. */
#ifndef STRATA_SYSTEM_SAMPLER_H
#define STRATA_SYSTEM_SAMPLER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "gpu/nvml.h"

#define ST_SAMPLER_MAX_METRICS 96
#define ST_SAMPLER_MAX_SAMPLES 100000

typedef struct {
    char name[48];          /* "memory.rss", "cpu3.frequency", "gpu0.power" */
    const char *units;      /* "bytes", "count", "s", "%", "MHz", "W", "C" */
    double *values;         /* one per sample */
} st_metric_t;

typedef struct {
    double freq;                       /* samples per second asked for */
    uint64_t interval_ns;              /* current interval (doubles when decimating) */
    uint64_t *ns;                      /* CLOCK_MONOTONIC of each sample */
    size_t n, cap;
    st_metric_t metrics[ST_SAMPLER_MAX_METRICS];
    int nmetrics;
    int ncpus, ngpus;
    char gpu_note[160];                /* why there are no GPU metrics, or "" */
    uint64_t self_cpu_ns;              /* the sampler thread's own CPU time */
    uint64_t started_ns, stopped_ns;
    /* private */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int running, stop;
    int other_threads;                 /* strata's threads besides this one */
    int tid;
    st_nvml_t nvml;                    /* the GPUs (gpu/nvml.h) */
    double last_cpu_s, last_ns_s;
    double net_base[2];                /* network counters at the start (received, sent) */
    int failed;                        /* an allocation failed: sampling stopped early */
} st_sampler_t;

/* Starts sampling at `freq` per second. other_threads: strata's own threads
 * besides the sampler, left out of `threads` as the sampler is. Returns 0, or an
 * error (msg filled) when the thread cannot start. */
int st_sampler_start(st_sampler_t *s, double freq, int other_threads, st_msg_t *msg);

/* Stops the thread and waits for it, taking one last sample. */
void st_sampler_stop(st_sampler_t *s);

void st_sampler_free(st_sampler_t *s);

/* Minimum, mean and maximum of metric k over the samples (0 when there are none). */
void st_sampler_summary(const st_sampler_t *s, int k, double *min, double *mean, double *max);

#endif
