/* The fixture model of the writer goldens (tests/golden/writers/): one small
 * profile, built by hand with exact times, that every writer renders.
 *
 * Design note. The fixture is what the session would hand the writers at the end
 * of a run of `strata python --trace -- app.py --size 3` as MPI rank 3 with
 * process sampling, but with every figure chosen: ticks are nanoseconds
 * (ns_per_tick 1 for both timers), the clock snapshot, pid, host and start time are
 * constants, so each golden is the same on every machine. It covers:
 *
 *   - two threads with names (MainThread, worker-1), both of rank 3;
 *   - nested calls and recursion: main -> fib -> fib -> fib (the innermost fib
 *     twice, so a node has two calls with different times and a variance);
 *   - a C function as --trace-c records it: the label <built-in method sorted>
 *     of the function ('~', 0, '<built-in method builtins.sorted>'), called from
 *     two places;
 *   - two different functions with the same qualified name in different files:
 *     Job.run of /app/a.py:5 (thread 0) and of /app/b.py:7 (thread 1): two labels
 *     of the same text, two nodes and two functions everywhere (core/intern.h);
 *     formats that key frames by name tell them apart (model/names.h);
 *   - wall_clock, cpu_clock and trip_count, with different wall and CPU times;
 *   - a label that needs escaping everywhere: quotes, </script>, &, a backslash,
 *     a semicolon, an escape sequence, BEL, a newline and a non-ASCII letter;
 *   - process sampling: three metrics over five samples (their summary computed
 *     from the samples, as the session computes it), also as counter tracks;
 *   - the timeline: every call's begin and end, stamped with the wall ticks the
 *     call tree was given, as the collector stamps them.
 *
 * The calls, in microseconds of (wall, cpu), are listed in fixture_model.c. A
 * `scale` multiplies every time (a second rank that took twice as long, for the
 * load-balance table). Not thread-safe; free with st_fixture_free(). */
#ifndef STRATA_TESTS_FIXTURE_MODEL_H
#define STRATA_TESTS_FIXTURE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"
#include "core/pathtab.h"
#include "core/intern.h"
#include "core/loctab.h"
#include "core/events.h"
#include "core/settings.h"
#include "model/model.h"
#include "output/timeline.h"

#define ST_FIXTURE_THREADS 2
#define ST_FIXTURE_METRICS 3
#define ST_FIXTURE_SAMPLES 5

typedef struct {
    st_intern_t labels;
    st_loctab_t locs;
    st_settings_t settings;
    st_metrics_t reg;       /* wall_clock, cpu_clock */
    st_pathtab_t paths[ST_FIXTURE_THREADS];
    st_ev_shared_t ev_shared;
    st_evbuf_t events[ST_FIXTURE_THREADS];
    st_model_thread_t threads[ST_FIXTURE_THREADS];
    st_model_metric_t sampled[ST_FIXTURE_METRICS];
    st_timeline_slice_t gpu_slices[3];
    uint64_t sample_ns[ST_FIXTURE_SAMPLES];
    double samples[ST_FIXTURE_METRICS][ST_FIXTURE_SAMPLES];
    st_timeline_thread_t tl_threads[ST_FIXTURE_THREADS];
    st_timeline_counter_t counters[ST_FIXTURE_METRICS];
    st_model_lrow_t lrows[3][5];   /* line timings (scaled) */
    st_model_lfunc_t lfuncs[3];
    st_model_memcall_t memcalls[3];
    double memt[6];
    st_model_memtime_t memtime;
    st_model_t model;        /* what the profile writers read */
    st_timeline_t timeline;  /* what the timeline writers read */
} st_fixture_t;

/* Builds the fixture as MPI rank `rank`, every time multiplied by `scale`.
 * Returns 0, or a negative st_err code (then nothing needs freeing). */
int st_fixture_build(st_fixture_t *f, uint32_t rank, uint64_t scale);

/* Records what writing the timeline gave in the model (profile.json's "trace"),
 * as the session does after writing it. */
void st_fixture_set_trace_stats(st_fixture_t *f, uint64_t events, uint64_t bytes);

void st_fixture_free(st_fixture_t *f);

#endif
