/* The fixture model of the writer goldens: see fixture_model.h. */
#include "fixture_model.h"

#include <string.h>

#include "base/err.h"
#include "core/components.h"
#include "play.h"
#include "system/sampler.h"

/* Labels, in the order they are interned (their ids). A label is its text and the
 * function it names (core/intern.h, core/loctab.h), as the collector makes them
 * (src/python/labels.c): Python code is (file, first line, co_name, co_qualname),
 * shown as its qualified name; a C function is cProfile's ('~', 0, name). */
enum { L_MAIN, L_FIB, L_SORTED, L_RUN, L_RENDER, L_RUN_B, NLABELS };

static const struct {
    const char *label, *file, *name, *qual;
    int32_t line;
} labels[NLABELS] = {
    [L_MAIN] = {"main", "/app/main.py", "main", "main", 1},
    [L_FIB] = {"fib", "/app/main.py", "fib", "fib", 10},
    /* the tables show a builtin without its module; its function keeps cProfile's name */
    [L_SORTED] = {"<built-in method sorted>", "~", "<built-in method builtins.sorted>", NULL, 0},
    [L_RUN] = {"Job.run", "/app/a.py", "run", "Job.run", 5},
    /* quotes, a non-ASCII letter, </script>, &, a backslash, a semicolon, an
     * escape sequence, BEL and a newline */
    [L_RENDER] = {"render(\"caf\xc3\xa9\") </script><b>&amp; a\\b;c \x1b[31m\x07\nend",
                  "/app/main.py", "render", "render", 20},
    /* another function of the same qualified name, in another file: its own label */
    [L_RUN_B] = {"Job.run", "/app/b.py", "run", "Job.run", 7},
};

/* One event of a thread: a call of `label` begins ('B') or the innermost call
 * ends ('E'), at wall and CPU times in microseconds. */
typedef struct {
    char kind;
    int label;
    uint64_t wall_us, cpu_us;
} event_t;

static const event_t main_thread[] = {
    {'B', L_MAIN, 0, 0},
    {'B', L_FIB, 10000, 9000},
    {'B', L_FIB, 12000, 11000},
    {'B', L_FIB, 13000, 12000},
    {'E', 0, 15000, 13500},
    {'B', L_FIB, 16000, 14000},
    {'E', 0, 19000, 16000},
    {'E', 0, 20000, 17000},
    {'E', 0, 30000, 25000},
    {'B', L_SORTED, 30000, 25000},
    {'E', 0, 32000, 27000},
    {'B', L_RUN, 40000, 30000}, /* /app/a.py:5 Job.run */
    {'B', L_SORTED, 41000, 30500},
    {'E', 0, 42000, 31000},
    {'E', 0, 50000, 34000},
    {'B', L_RENDER, 60000, 40000},
    {'E', 0, 61000, 40500},
    {'E', 0, 100000, 60000},
};

static const event_t worker[] = {
    {'B', L_RUN_B, 5000, 1000}, /* /app/b.py:7 Job.run: another function */
    {'B', L_FIB, 6000, 1500},
    {'E', 0, 8000, 3500},
    {'E', 0, 20000, 6000},
    {'B', L_RUN_B, 25000, 7000},
    {'E', 0, 27000, 8000},
};

static const struct {
    const event_t *events;
    size_t n;
    uint64_t tid;
    const char *name;
} thread_defs[ST_FIXTURE_THREADS] = {
    {main_thread, sizeof main_thread / sizeof main_thread[0], 4242, "MainThread"},
    {worker, sizeof worker / sizeof worker[0], 4243, "worker-1"},
};

/* Process sampling: every 25 ms, three metrics (the sampler's names and units). */
static const struct {
    const char *name, *units;
    double values[ST_FIXTURE_SAMPLES];
} metric_defs[ST_FIXTURE_METRICS] = {
    {"memory.resident", "bytes", {10485760, 12582912, 16777216, 16777216, 14680064}},
    {"cpu.utilization", "%", {50, 100, 75, 25, 0}},
    {"threads", "count", {1, 2, 2, 1, 1}},
};

/* The settings of the run, as its environment gave them. */
static char *const environment[] = {
    "STRATA_COMPONENTS=trip_count,wall_clock,cpu_clock",
    "STRATA_TRACE=ON",
    "STRATA_TRACE_C=ON",
    "STRATA_USE_PROCESS_SAMPLING=ON",
    "STRATA_PROCESS_SAMPLING_FREQ=40",
    NULL,
};

static const char *const command[] = {"strata", "python", "--trace", "--", "app.py",
                                      "--size", "3"};

#define MONO_BASE_NS 5000000000000ull   /* CLOCK_MONOTONIC at tick 0 */
#define BOOT_BASE_NS 5000250000000ull   /* CLOCK_BOOTTIME at tick 0 */
#define START_NS 1700000000000000000ull /* CLOCK_REALTIME when the run started */

static const char *const attr_keys[] = {"strata.version", "strata.dropped_calls",
                                        "strata.too_deep_calls", "strata.fill_policy",
                                        "strata.command"};
static const char *const attr_values[] = {"0.1.0", "0", "0", "discard",
                                          "strata python --trace -- app.py --size 3"};

/* Plays one thread's events into its path table and timeline, as the collector
 * would: the table gets both timers, the timeline the wall ticks. */
static int play(st_pathtab_t *t, st_evbuf_t *tr, const event_t *ev, size_t n, uint64_t scale)
{
    st_play_t p;
    st_play_init(&p, t, ST_NTIMERS);
    uint32_t traced[64]; /* per depth: the call's begin is in the timeline */
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t now[ST_NTIMERS] = {ev[i].wall_us * 1000 * scale, ev[i].cpu_us * 1000 * scale};
        if (ev[i].kind == 'B') {
            if (p.depth >= 64)
                rc = ST_EINVAL;
            else
                traced[p.depth] =
                    (uint32_t)st_evbuf_begin(tr, (uint32_t)ev[i].label, now[ST_TIMER_WALL]);
            if (rc == 0)
                rc = st_play_enter(&p, (uint32_t)ev[i].label, now);
        } else {
            if (p.depth && traced[p.depth - 1])
                st_evbuf_end(tr, now[ST_TIMER_WALL]);
            rc = st_play_exit(&p, now);
        }
    }
    if (rc == 0 && p.depth != 0)
        rc = ST_EINVAL;
    st_play_free(&p);
    return rc;
}

static int build_labels(st_fixture_t *f)
{
    for (int i = 0; i < NLABELS; i++) {
        uint32_t loc, id;
        if (st_loctab_add_qual(&f->locs, labels[i].file, labels[i].line, labels[i].name,
                               labels[i].qual, &loc) < 0 ||
            st_intern_tagged(&f->labels, labels[i].label, strlen(labels[i].label), loc, &id) < 0 ||
            st_loctab_set_id(&f->locs, id, loc) < 0)
            return ST_ENOMEM;
        if (id != (uint32_t)i)
            return ST_EINVAL; /* two entries of the table are one label */
    }
    return 0;
}

static void build_sampling(st_fixture_t *f)
{
    static st_sampler_t s; /* only n and the values are read by the summary */
    memset(&s, 0, sizeof s);
    s.n = ST_FIXTURE_SAMPLES;
    for (int k = 0; k < ST_FIXTURE_METRICS; k++) {
        memcpy(f->samples[k], metric_defs[k].values, sizeof f->samples[k]);
        s.metrics[k].values = f->samples[k];
        f->sampled[k].name = metric_defs[k].name;
        f->sampled[k].units = metric_defs[k].units;
        st_sampler_summary(&s, k, &f->sampled[k].min, &f->sampled[k].mean, &f->sampled[k].max);
        f->counters[k] = (st_timeline_counter_t){.name = metric_defs[k].name,
                                                 .units = metric_defs[k].units,
                                                 .n = ST_FIXTURE_SAMPLES,
                                                 .ns = f->sample_ns,
                                                 .values = f->samples[k]};
    }
    for (int i = 0; i < ST_FIXTURE_SAMPLES; i++)
        f->sample_ns[i] = MONO_BASE_NS + (uint64_t)i * 25000000u;
}

/* Line timings (--lines): an ordinary function; one whose numbers overflow
 * line_profiler's columns (hits past 9 digits: %g; times past 12 and 8 characters:
 * %5.3g); one whose file was gone (no source: line_profiler's "Could not find
 * file" lines). Times scaled. */
static const char *const solve_source[] = {
    "@profile", "def solve(grid, steps):", "    r = 0", "    for s in range(steps):",
    "        r += grid.relax(s)  # \"quoted\" \\ caf\xc3\xa9", "    return r"};
static const char *const big_source[] = {"    def big(self):", "        for i in self.items:",
                                         "            self.step(i)", ""};

#define MIB 1048576
/* the lines holding sampled memory, the most at the peak first */
static const st_model_memline_t memlines[] = {
    {"solve", "/src/app.py", 14, 48 * MIB, 0},
    {"Grid.<big> & co", "/src/grid.py", 5, 2 * MIB, 3 * MIB},
};

static void build_lines(st_fixture_t *f, uint64_t scale)
{
    /* memory (heap): 40 MiB at the call, 50 MiB more made on line 14 over its runs,
     * 5 MiB given back on line 15; a line with memory but no hits (the def line,
     * measured at the call, as memory_profiler measures it) */
    static const st_model_lrow_t rows[3][5] = {
        {{10, 0, 0, 1, 40 * MIB, 40 * MIB},
         {12, 1, 1500, 1, 0, 40 * MIB},
         {13, 1001, 2500000, 1001, 0, 40 * MIB},
         {14, 1000, 987654321, 1000, 50 * MIB, 90 * MIB},
         {15, 1, 120, 1, -5 * MIB, 85 * MIB}},
        {{4, 12345678901ull, 5000000000ull, 0, 0, 0}, {5, 3, 98765432109876543ull, 0, 0, 0}},
        {{22, 2, 400, 2, MIB / 2, 3 * MIB}, {25, 1, 100, 1, 0, 3 * MIB}},
    };
    static const size_t nrows[3] = {5, 2, 2};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < nrows[i]; j++) {
            f->lrows[i][j] = rows[i][j];
            f->lrows[i][j].ns *= scale;
        }
    f->lfuncs[0] = (st_model_lfunc_t){"solve", "/src/app.py", 10, f->lrows[0], 5, solve_source,
                                      sizeof solve_source / sizeof *solve_source};
    f->lfuncs[1] = (st_model_lfunc_t){"Grid.big", "/src/grid.py", 3, f->lrows[1], 2, big_source,
                                      sizeof big_source / sizeof *big_source};
    f->lfuncs[2] = (st_model_lfunc_t){"lost", "/gone/x.py", 20, f->lrows[2], 2, NULL, 0};
    /* memory over time: six samples 20 ms apart (times scaled), solve() twice, a
     * nested call, a label that needs escaping in the plot and a space in mprof's */
    static const double t[] = {0.0, 0.02, 0.04, 0.06, 0.08, 0.1};
    static const int64_t rss[] = {10 * MIB, 30 * MIB, 50 * MIB, 52 * MIB, 20 * MIB, 21 * MIB};
    static const int64_t heap[] = {2 * MIB, 20 * MIB, 41 * MIB, 42 * MIB, 3 * MIB, 3 * MIB};
    for (int i = 0; i < 6; i++)
        f->memt[i] = t[i] * (double)scale;
    f->memcalls[0] = (st_model_memcall_t){"solve", 0.001 * (double)scale, 0.05 * (double)scale,
                                          10 * MIB, 50 * MIB, 0};
    f->memcalls[1] = (st_model_memcall_t){"Grid.<big> & co", 0.01 * (double)scale,
                                          0.03 * (double)scale, 20 * MIB, 40 * MIB, 1};
    f->memcalls[2] = (st_model_memcall_t){"solve", 0.07 * (double)scale, 0.09 * (double)scale,
                                          40 * MIB, 20 * MIB, 0};
    f->memtime = (st_model_memtime_t){0.02 * (double)scale, 6, f->memt, rss, heap, f->memcalls, 3,
                                      1};
}

/* What CUPTI would have recorded: two kernels (one name that needs escaping), a
 * copy each way and a set; on the timeline, three slices on two streams' tracks. */
static const st_model_kernel_t gpu_kernels[] = {
    {"void gemm<128>(float const*, float const*, float*, int)", 3, 90000, 20000, 40000,
     30000.0, 8164.9658092772603},
    {"k<\"quoted\">", 1, 5000, 5000, 5000, 5000.0, 0.0},
};
static const st_model_copy_t gpu_copies[] = {
    {"HtoD", 2, 2097152, 200000},
    {"DtoH", 1, 4096, 4000},
    {"memset", 1, 4096, 2000},
};
static const st_model_gpu_t gpu = {
    .kernels = gpu_kernels, .nkernels = 2, .copies = gpu_copies, .ncopies = 3,
    .library = "/usr/local/cuda-13.0/lib/libcupti.so", .launches = 8, .attributed = 7,
    .dropped = 0, .clock_error_ns = 35.5,
};
static const char *const gpu_tracks[] = {"GPU 0 stream 7", "GPU 0 stream 13"};

int st_fixture_build(st_fixture_t *f, uint32_t rank, uint64_t scale)
{
    memset(f, 0, sizeof *f);
    st_intern_init(&f->labels);
    st_loctab_init(&f->locs);
    st_metrics_init(&f->reg);
    st_msg_t msg;
    int rc = st_play_metrics(&f->reg);
    if (rc == 0)
        rc = st_settings_init(&f->settings);
    if (rc == 0)
        rc = st_settings_load_env(&f->settings, environment, NULL, &msg);
    if (rc == 0)
        rc = build_labels(f);
    if (rc == 0)
        rc = st_ev_shared_init(&f->ev_shared,
                               (uint64_t)st_settings_int(&f->settings, ST_S_TRACE_BUFFER_SIZE),
                               ST_EV_DISCARD,
                               (uint32_t)st_settings_int(&f->settings, ST_S_TRACE_MAX_DEPTH), NULL, 0);
    for (int i = 0; i < ST_FIXTURE_THREADS; i++) {
        if (rc == 0)
            rc = st_pathtab_init(&f->paths[i], &f->reg, 0);
        st_evbuf_init(&f->events[i], &f->ev_shared);
        if (rc == 0)
            rc = play(&f->paths[i], &f->events[i], thread_defs[i].events, thread_defs[i].n, scale);
        f->threads[i] = (st_model_thread_t){.paths = &f->paths[i], .index = (uint32_t)i,
                                            .tid = thread_defs[i].tid, .name = thread_defs[i].name,
                                            .has_rank = 1, .rank = rank};
        f->tl_threads[i] = (st_timeline_thread_t){.events = &f->events[i], .index = (uint32_t)i,
                                                  .tid = thread_defs[i].tid,
                                                  .name = thread_defs[i].name};
    }
    if (rc < 0) {
        st_fixture_free(f);
        return rc;
    }
    build_sampling(f);
    build_lines(f, scale);
    f->model = (st_model_t){
        .labels = &f->labels,
        .threads = f->threads,
        .nthreads = ST_FIXTURE_THREADS,
        .metrics = &f->reg,
        .ns_per_tick = {1.0, 1.0},
        .settings = &f->settings,
        .components = (1u << ST_COMP_TRIP_COUNT) | (1u << ST_COMP_WALL_CLOCK) |
                      (1u << ST_COMP_CPU_CLOCK),
        .command = command,
        .ncommand = sizeof command / sizeof command[0],
        .python_version = "3.11.2",
        .clock_name = "tsc",
        .pid = 4242,
        .host = "node7",
        .start_ns = START_NS,
        .end_ns = START_NS + 100000000u * scale,
        .locs = &f->locs,
        .has_rank = 1,
        .rank = rank,
        .sampled = f->sampled,
        .nsampled = ST_FIXTURE_METRICS,
        .sampling_freq = 40,
        .nsamples = ST_FIXTURE_SAMPLES,
        .sampler_cpu_s = 0.0015,
        .gpu_note = "no NVIDIA driver (libnvidia-ml.so.1 not found): GPU metrics skipped",
        .lfuncs = f->lfuncs,
        .nlfuncs = 3,
        .line_time = 1,
        .line_memory = "heap",
        .memtime = &f->memtime,
        .memlines = memlines,
        .nmemlines = sizeof memlines / sizeof *memlines,
        .gpu = &gpu,
    };
    /* labels of the thread 0's calls stand for the kernels' names */
    f->gpu_slices[0] = (st_timeline_slice_t){MONO_BASE_NS + 1000, MONO_BASE_NS + 21000, 0, 1, 5};
    f->gpu_slices[1] = (st_timeline_slice_t){MONO_BASE_NS + 1500, MONO_BASE_NS + 3500, 1, 2, 0};
    f->gpu_slices[2] = (st_timeline_slice_t){MONO_BASE_NS + 21000, MONO_BASE_NS + 61000, 0, 1, 6};
    f->timeline = (st_timeline_t){
        .labels = &f->labels,
        .locs = &f->locs,
        .threads = f->tl_threads,
        .nthreads = ST_FIXTURE_THREADS,
        .counters = f->counters,
        .ncounters = ST_FIXTURE_METRICS,
        .pid = 4242,
        .process_name = "app.py",
        .ns_per_tick = 1.0,
        .base_ticks = 0,
        .base_mono_ns = MONO_BASE_NS,
        .base_boot_ns = BOOT_BASE_NS,
        .base_real_ns = BOOT_BASE_NS + 1700000000000000000ull,
        .attr_keys = attr_keys,
        .attr_values = attr_values,
        .nattrs = sizeof attr_keys / sizeof attr_keys[0],
        .gpu_tracks = gpu_tracks,
        .ngpu_tracks = 2,
        .gpu_slices = f->gpu_slices,
        .ngpu_slices = 3,
    };
    return 0;
}

void st_fixture_set_trace_stats(st_fixture_t *f, uint64_t events, uint64_t bytes)
{
    f->model.has_trace = 1;
    f->model.trace_events = events;
    f->model.trace_bytes = bytes;
    f->model.trace_write_s = 0.002;
}

void st_fixture_free(st_fixture_t *f)
{
    for (int i = 0; i < ST_FIXTURE_THREADS; i++) {
        st_evbuf_free(&f->events[i]);
        st_pathtab_free(&f->paths[i]);
    }
    st_metrics_free(&f->reg);
    st_ev_shared_free(&f->ev_shared);
    st_intern_free(&f->labels);
    st_loctab_free(&f->locs);
    st_settings_free(&f->settings);
    memset(f, 0, sizeof *f);
}
