/* A profile that owns what its model points to: what the profile.json reader
 * fills and what a merge produces. Its `model` is the st_model_t the writers read,
 * kept pointing into the profile by st_profile_sync. Its values are in ns: the
 * registry holds the two timers, wall_clock (metric ST_TIMER_WALL) and cpu_clock
 * (ST_TIMER_CPU), in ns, and each thread a path table with their columns. */
#ifndef STRATA_MODEL_PROFILE_H
#define STRATA_MODEL_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "core/metrics.h"
#include "core/pathtab.h"
#include "core/settings.h"
#include "model/model.h"

typedef struct {
    st_intern_t labels;
    st_loctab_t locs;
    st_settings_t settings;
    st_metrics_t metrics;   /* names the columns of every thread's table */
    st_pathtab_t *paths;
    st_model_thread_t *threads;
    char **thread_names;
    size_t nthreads, capthreads;
    char **command;
    size_t ncommand;
    char *python_version, *clock_name, *host;
    st_model_metric_t *sampled;   /* process sampling summaries; names and units owned */
    size_t nsampled;
    char *gpu_note;
    st_model_gpu_t gpu;           /* CUPTI's tables, when has_gpu (names owned) */
    st_model_kernel_t *kernels;
    st_model_copy_t *copies;
    int has_gpu;
    st_model_stacks_t stacks;     /* stack sampling's summary, when has_stacks */
    st_model_line_t *lines;       /* its lines (texts owned) */
    size_t nlines, caplines;
    int has_stacks;
    char stacks_clock[8];
    st_model_lfunc_t *lfuncs;     /* line timings (rows, texts and source owned) */
    size_t nlfuncs, caplfuncs;
    int line_time;
    char line_memory[8];          /* "heap", "rss" or "" */
    st_model_memtime_t memtime;   /* memory over time, when has_memtime (arrays and
                                   * names owned) */
    int has_memtime;
    st_model_memline_t *memlines; /* texts owned */
    size_t nmemlines, capmemlines;
    st_u64map_t lfunc_index;      /* (file, function, line) -> place in lfuncs */
    st_u64map_t memline_index;    /* ... in memlines (made again when they move) */
    st_u64map_t kernel_index;     /* a kernel's name -> its place in kernels (the same) */
    int have_settings;
    st_model_t model;       /* points into this profile */
} st_profile_t;

/* An empty profile (no threads), ready to be filled by a merge. */
int st_profile_init(st_profile_t *p);
void st_profile_free(st_profile_t *p);

/* Adds an empty thread (a path table with only a root) and returns its index, or
 * -1. The name is copied. */
long st_profile_add_thread(st_profile_t *p, uint32_t index, uint64_t tid, const char *name,
                           int has_rank, uint32_t rank);

/* Registers a metric (or finds it: same name and kind, and then takes the unit
 * and description given, where not NULL) and gives every thread a column for it.
 * The wall and CPU timers are registered by st_profile_init as metrics
 * ST_TIMER_WALL and ST_TIMER_CPU. Returns 0 and sets *id, ST_ENOMEM, or ST_EINVAL
 * (st_metrics_add's reasons). */
int st_profile_add_metric(st_profile_t *p, const char *name, const char *unit, const char *desc,
                          st_metric_kind_t kind, uint32_t *id);

/* Adds a sampled line (its texts copied); st_profile_lines_done
 * then sums the rows of one line and orders them. 0 or ST_ENOMEM. */
int st_profile_add_line(st_profile_t *p, const char *function, const char *file, uint32_t line,
                        uint64_t periods);
void st_profile_lines_done(st_profile_t *p);

/* Adds a function's line timings (everything copied), or sums them into the
 * function of the same file, first line and name: hits and times line by line,
 * the source kept from the first that has one. 0 or ST_ENOMEM. */
int st_profile_add_lfunc(st_profile_t *p, const st_model_lfunc_t *f);
/* Frees what a function's line timings own (names, rows, source), as the profile
 * does; for a reader's copy before it is added. */
void st_profile_lfunc_free(st_model_lfunc_t *f);

/* Adds a line holding memory (texts copied), or sums it into the same line's (same
 * function, file and number); st_profile_memlines_done orders them, most at the peak
 * first. 0 or ST_ENOMEM. */
int st_profile_add_memline(st_profile_t *p, const st_model_memline_t *l);
void st_profile_memlines_done(st_profile_t *p);

/* Adds what CUPTI recorded in one run or rank (a merge's input) to the profile's GPU
 * tables: a kernel's launches by its name (count, total, minimum, maximum, and the
 * mean and standard deviation of the launches of both), a copy direction's count,
 * bytes and time, the launches, attributed and dropped counts; the clock's error is
 * the largest. The kernels stay ordered, most total time first. 0 or ST_ENOMEM. */
int st_profile_add_gpu(st_profile_t *p, const st_model_gpu_t *g);

/* Takes a copy of memory over time (a profile keeps one: a merge, its first
 * input's). 0 or ST_ENOMEM. */
int st_profile_set_memtime(st_profile_t *p, const st_model_memtime_t *mt);

/* Points p->model at the profile's current contents (after adding threads). */
void st_profile_sync(st_profile_t *p);

#endif
