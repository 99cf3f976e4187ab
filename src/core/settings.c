#include "core/settings.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/components.h"
#include "base/fsutil.h"
#include "base/number.h"
#include "base/regex.h"

/* A setting's flag, spelled once: FLAG gives both the text `strata avail` shows
 * ("-E, --function-exclude") and the parser's st_flag_t. */
#define FLAG(s, l, arity, metavar, order, help) s ", " l, {s, l, arity, metavar, help, order}
#define LFLAG(l, arity, metavar, order, help) l, {NULL, l, arity, metavar, help, order}
#define NOFLAG NULL, {NULL, NULL, ST_ARG_NONE, NULL, NULL, 0}

/* The registry. Keep it in the order of st_setting_id_t. */
/* Every entry names all the fields of st_setting_def_t (clang's
 * -Wmissing-field-initializers): its range is NO_RANGE, INT_RANGE (int, size; bool as
 * 0 to 1) or FLOAT_RANGE. */
#define NO_RANGE 0, 0, 0.0, 0.0
#define INT_RANGE(lo, hi) (lo), (hi), 0.0, 0.0
#define FLOAT_RANGE(lo, hi) 0, 0, (lo), (hi)

static const st_setting_def_t defs[ST_NSETTINGS] = {
    [ST_S_PROFILE] = {"profile", "STRATA_PROFILE", ST_TYPE_BOOL, "ON", "general",
                      "Build the call-tree profile and its tables", NULL, NOFLAG, INT_RANGE(0, 1)},
    [ST_S_COMPONENTS] = {"components", "STRATA_COMPONENTS", ST_TYPE_LIST, "wall_clock", "general",
                         "What the profile measures on every call",
                         "trip_count,wall_clock,cpu_clock",
                         LFLAG("--components", ST_ARG_ONE, "LIST", 15,
                               "What to measure: trip_count, wall_clock, cpu_clock"), NO_RANGE},
    [ST_S_OUTPUT_PATH] = {"output_path", "STRATA_OUTPUT_PATH", ST_TYPE_STRING, "", "output",
                          "Results folder (empty: strata-<target>-output/<date_time>)", NULL,
                          FLAG("-o", "--output", ST_ARG_ONE, "DIR", 14,
                               "Results folder (default: strata-<script>-output/<date_time>)"), NO_RANGE},
    [ST_S_PRINT_TABLES] = {"print_tables", "STRATA_PRINT_TABLES", ST_TYPE_BOOL, "ON", "output",
                           "Print the tables to standard error when the program ends", NULL,
                           NOFLAG, INT_RANGE(0, 1)},
    [ST_S_PRECISION] = {"precision", "STRATA_PRECISION", ST_TYPE_INT, "6", "output",
                        "Decimals of the times in the tables", NULL, NOFLAG, INT_RANGE(0, 12)},
    [ST_S_VERBOSE] = {"verbose", "STRATA_VERBOSE", ST_TYPE_INT, "0", "general",
                      "Logging verbosity: 0 quiet, 1 what strata does, 2 debug", NULL,
                      FLAG("-v", "--verbosity", ST_ARG_ONE, "VERBOSITY", 1, "Logging verbosity"), INT_RANGE(0, 3)},
    [ST_S_CONFIG_FILE] = {"config_file", "STRATA_CONFIG_FILE", ST_TYPE_STRING, "", "general",
                          "Configuration file of NAME = value lines (empty: ~/.strata.cfg)",
                          NULL,
                          FLAG("-c", "--config", ST_ARG_ONE, "FILE", 3,
                               "strata configuration file"), NO_RANGE},
    [ST_S_SETUP] = {"setup", "STRATA_SETUP", ST_TYPE_STRING, "", "python",
                    "Python file run (unprofiled, in its own namespace) before the script",
                    NULL, FLAG("-s", "--setup", ST_ARG_ONE, "FILE", 4,
                         "Code to execute before the code to profile"), NO_RANGE},
    [ST_S_BUILTIN] = {"builtin", "STRATA_BUILTIN", ST_TYPE_BOOL, "OFF", "python",
                      "Record only @profile functions and 'with profile:' blocks", NULL,
                      FLAG("-b", "--builtin", ST_ARG_NONE, NULL, 2,
                           "Put 'profile' in the builtins. Use '@profile' to decorate a single "
                           "function, or 'with profile:' to profile a single section of code."), INT_RANGE(0, 1)},
    [ST_S_FULL_FILEPATH] = {"full_filepath", "STRATA_FULL_FILEPATH", ST_TYPE_BOOL, "OFF",
                            "python", "Full file paths in labels instead of base names", NULL,
                            FLAG("-F", "--full-filepath", ST_ARG_OPT_BOOL, "BOOL", 5,
                                 "Encode the full function filename (instead of basename)"), INT_RANGE(0, 1)},
    [ST_S_LABEL] = {"label", "STRATA_LABEL", ST_TYPE_LIST, "", "python",
                    "Add the arguments, file and/or line to function labels", "args,file,line",
                    LFLAG("--label", ST_ARG_ANY, NULL, 6,
                          "Encode the function arguments, filename, and/or line number into the "
                          "profiling function label"), NO_RANGE},
    [ST_S_TRACE_C] = {"trace_c", "STRATA_TRACE_C", ST_TYPE_BOOL, "OFF", "python",
                      "Record C functions under their own names", NULL,
                      LFLAG("--trace-c", ST_ARG_OPT_BOOL, "BOOL", 13,
                            "Enable profiling C functions"), INT_RANGE(0, 1)},
    [ST_S_INCLUDE_INTERNAL] = {"include_internal", "STRATA_INCLUDE_INTERNAL", ST_TYPE_BOOL, "OFF",
                               "python", "Record strata's own Python code", NULL, NOFLAG, INT_RANGE(0, 1)},
    [ST_S_FUNCTION_INCLUDE] = {"function_include", "STRATA_FUNCTION_INCLUDE", ST_TYPE_REGEX_LIST,
                               "", "filters",
                               "Keep functions whose names match these regexes even if excluded",
                               NULL, FLAG("-I", "--function-include", ST_ARG_MANY, "FUNC", 7,
                                    "Include any entries with these function names"), NO_RANGE},
    [ST_S_FUNCTION_EXCLUDE] = {"function_exclude", "STRATA_FUNCTION_EXCLUDE",
                               ST_TYPE_REGEX_LIST, "^<.*>$", "filters",
                               "Leave out functions whose names match these regexes", NULL,
                               FLAG("-E", "--function-exclude", ST_ARG_MANY, "FUNC", 8,
                                    "Filter out any entries with these function names"), NO_RANGE},
    [ST_S_FUNCTION_RESTRICT] = {"function_restrict", "STRATA_FUNCTION_RESTRICT",
                                ST_TYPE_REGEX_LIST, "", "filters",
                                "Record only functions whose names match these regexes", NULL,
                                FLAG("-R", "--function-restrict", ST_ARG_MANY, "FUNC", 9,
                                     "Select only entries with these function names"), NO_RANGE},
    [ST_S_MODULE_INCLUDE] = {"module_include", "STRATA_MODULE_INCLUDE", ST_TYPE_REGEX_LIST, "",
                             "filters", "Keep code from files matching these regexes", NULL,
                             FLAG("-MI", "--module-include", ST_ARG_MANY, "FILE", 10,
                                  "Include any entries from these files"), NO_RANGE},
    [ST_S_MODULE_EXCLUDE] = {"module_exclude", "STRATA_MODULE_EXCLUDE", ST_TYPE_REGEX_LIST,
                             "(encoder|decoder|threading).py$ ^<.*>$", "filters",
                             "Leave out code from files matching these regexes", NULL,
                             FLAG("-ME", "--module-exclude", ST_ARG_MANY, "FILE", 11,
                                  "Filter out any entries from these files"), NO_RANGE},
    [ST_S_MODULE_RESTRICT] = {"module_restrict", "STRATA_MODULE_RESTRICT", ST_TYPE_REGEX_LIST,
                              "", "filters", "Record only code from files matching these regexes",
                              NULL, FLAG("-MR", "--module-restrict", ST_ARG_MANY, "FILE", 12,
                                   "Select only entries from these files"), NO_RANGE},
    [ST_S_MAX_NODES] = {"max_nodes", "STRATA_MAX_NODES", ST_TYPE_INT, "1000000", "general",
                        "Most call-tree nodes per thread (about 250 bytes each, index "
                        "included); calls on new paths beyond it are counted as dropped",
                        NULL, NOFLAG, INT_RANGE(1, 100000000)},
    [ST_S_CLOCK] = {"clock", "STRATA_CLOCK", ST_TYPE_CHOICE, "auto", "general",
                    "Time source: auto (the TSC where the CPU says it is invariant, else "
                    "CLOCK_MONOTONIC), tsc, or monotonic",
                    "auto,tsc,monotonic", NOFLAG, NO_RANGE},
    [ST_S_TRACE] = {"trace", "STRATA_TRACE", ST_TYPE_BOOL, "OFF", "trace",
                    "Record every call and return in a timeline (trace.pftrace, for Perfetto)",
                    NULL, LFLAG("--trace", ST_ARG_OPT_BOOL, "BOOL", 16,
                          "Record every call in a timeline (trace.pftrace, Perfetto)"), INT_RANGE(0, 1)},
    [ST_S_TRACE_FORMAT] = {"trace_format", "STRATA_TRACE_FORMAT", ST_TYPE_LIST, "perfetto",
                           "trace", "Timeline formats: perfetto (trace.pftrace), chrome "
                           "(trace.json, Chrome trace events)",
                           "perfetto,chrome", LFLAG("--trace-format", ST_ARG_ONE, "LIST", 17,
                                 "Timeline formats: perfetto, chrome (trace.json)"), NO_RANGE},
    [ST_S_TRACE_BUFFER_SIZE] = {"trace_buffer_size", "STRATA_TRACE_BUFFER_SIZE", ST_TYPE_SIZE,
                                "256MB", "trace",
                                "Most memory the timeline of all threads may take (16 bytes an "
                                "event); see STRATA_TRACE_FILL_POLICY for what happens then",
                                NULL, NOFLAG, INT_RANGE(1 << 20, (int64_t)1 << 40)},
    [ST_S_TRACE_FILL_POLICY] = {"trace_fill_policy", "STRATA_TRACE_FILL_POLICY", ST_TYPE_CHOICE,
                                "discard", "trace",
                                "When the buffer is full: discard (stop recording new calls and "
                                "count them) or flush (write full chunks to disk while running)",
                                "discard,flush", NOFLAG, NO_RANGE},
    [ST_S_TRACE_MAX_DEPTH] = {"trace_max_depth", "STRATA_TRACE_MAX_DEPTH", ST_TYPE_INT, "500",
                              "trace",
                              "Deepest call nesting shown as slices (Perfetto drops slices "
                              "nested deeper than 512); deeper calls are counted, not shown",
                              NULL, NOFLAG, INT_RANGE(1, 512)},
    [ST_S_USE_PROCESS_SAMPLING] = {"use_process_sampling", "STRATA_USE_PROCESS_SAMPLING",
                                   ST_TYPE_BOOL, "OFF", "sampling",
                                   "Sample process and system metrics (memory, faults, context "
                                   "switches, CPU, I/O, network, threads, GPUs) in the background",
                                   NULL, NOFLAG, INT_RANGE(0, 1)},
    [ST_S_PROCESS_SAMPLING_FREQ] = {"process_sampling_freq", "STRATA_PROCESS_SAMPLING_FREQ",
                                    ST_TYPE_FLOAT, "50", "sampling",
                                    "Samples per second of the process sampler (0.001 to 10000)",
                                    NULL, NOFLAG, FLOAT_RANGE(0.001, 10000)},
    [ST_S_OUTPUT_FORMATS] = {"output_formats", "STRATA_OUTPUT_FORMATS", ST_TYPE_LIST,
                             "text,json", "output",
                             "Formats written into the results folder when the program ends "
                             "(strata report renders any of them later from profile.json)",
                             "text,json,pstats,dot,png,svg,folded,speedscope,callgrind,html,lines,lprof,memory,"
                             "mprof,memplot,memplot-png",
                             NOFLAG, NO_RANGE},
    [ST_S_USE_SAMPLING] = {"use_sampling", "STRATA_USE_SAMPLING", ST_TYPE_BOOL, "OFF", "sampling",
                           "Sample every thread's call stack (Python frames) periodically; "
                           "alone, the profile hook stays off unless STRATA_PROFILE is set",
                           NULL, LFLAG("--sample", ST_ARG_OPT_BOOL, "BOOL", 18,
                                 "Sample call stacks instead of profiling every call"),
                           INT_RANGE(0, 1)},
    [ST_S_SAMPLING_FREQ] = {"sampling_freq", "STRATA_SAMPLING_FREQ", ST_TYPE_FLOAT, "100",
                            "sampling", "Stack samples per second of each thread's clock "
                            "(1 to 20000)", NULL,
                            FLAG("-f", "--sampling-freq", ST_ARG_ONE, "HZ", 19,
                                 "Stack samples per second per thread"), FLOAT_RANGE(1, 20000)},
    [ST_S_SAMPLING_CLOCK] = {"sampling_clock", "STRATA_SAMPLING_CLOCK", ST_TYPE_CHOICE, "cpu",
                             "sampling", "What the stack sampler's period counts: cpu (each "
                             "thread's CPU time: busy threads) or wall (waiting threads too)",
                             "cpu,wall", LFLAG("--sample-clock", ST_ARG_ONE, "CLOCK", 20,
                                   "Sample every period of CPU time (cpu) or of wall time (wall)"),
                             NO_RANGE},
    [ST_S_SAMPLING_SIGNAL] = {"sampling_signal", "STRATA_SAMPLING_SIGNAL", ST_TYPE_INT, "0",
                              "sampling", "The real-time signal the stack sampler uses (0: the "
                              "highest free one)", NULL, NOFLAG, INT_RANGE(0, 64)},
    [ST_S_SAMPLING_UNWIND] = {"sampling_unwind", "STRATA_SAMPLING_UNWIND", ST_TYPE_CHOICE, "auto",
                              "sampling", "How strata sample walks native stacks: fp (frame "
                              "pointers: lock-free, misses code built without them), libunwind "
                              "(unwind tables: any code) or auto (libunwind where it is "
                              "installed)", "auto,fp,libunwind", NOFLAG, NO_RANGE},
    [ST_S_SAMPLING_NATIVE] = {"sampling_native", "STRATA_SAMPLING_NATIVE", ST_TYPE_BOOL, "OFF",
                              "sampling", "With stack sampling of a Python program: the native "
                              "(C) frames too, the interpreter's eval loop replaced by the "
                              "Python frames it runs", NULL,
                              LFLAG("--native", ST_ARG_OPT_BOOL, "BOOL", 21,
                                    "With --sample: C frames too (extensions, libraries)"),
                              INT_RANGE(0, 1)},
    [ST_S_PRINT_SUMMARY] = {"print_summary", "STRATA_PRINT_SUMMARY", ST_TYPE_BOOL, "OFF", "output",
                            "Print the table of strata.region timings (strata.summary()) when "
                            "the program ends, as PyOP2's PYOP2_PRINT_SUMMARY does", NULL, NOFLAG,
                            INT_RANGE(0, 1)},
    [ST_S_MPI_GATHER] = {"mpi_gather", "STRATA_MPI_GATHER", ST_TYPE_BOOL, "OFF", "output",
                         "MPI programs: at MPI_Finalize every rank writes its results and "
                         "rank 0 gathers them into its folder and merges them (merged/)",
                         NULL, NOFLAG, INT_RANGE(0, 1)},
    [ST_S_LINES] = {"lines", "STRATA_LINES", ST_TYPE_BOOL, "OFF", "python",
                    "Time every line of the functions marked @profile, and of those the "
                    "-R/-MR filters select when given (line_profiler's kernprof -l)",
                    NULL, FLAG("-l", "--lines", ST_ARG_OPT_BOOL, "BOOL", 22,
                               "Time the lines of @profile functions (and of -R/-MR ones)"),
                    INT_RANGE(0, 1)},
    [ST_S_MEMORY] = {"memory", "STRATA_MEMORY", ST_TYPE_CHOICE, "off", "python",
                     "Memory of every line of the @profile functions (and of those -R/-MR select), "
                     "memory_profiler's table, the memory over time and what each call path "
                     "allocates and holds: heap (the bytes Python holds, from strata's allocator "
                     "hooks; ON), rss (the resident size, memory_profiler's meaning) or sample "
                     "(no line table and, unless STRATA_PROFILE is set, no call-tree profile: "
                     "sampled allocations with their stacks, the cheap mode)",
                     "off,heap,rss,sample", LFLAG("--memory", ST_ARG_OPT_BOOL, "MODE", 23,
                                           "Memory of each line of @profile functions: "
                                           "--memory (heap) or --memory=rss; "
                                           "--memory=sample: sampled allocations only"),
                     NO_RANGE},
    [ST_S_CPU_CLOCK_INTERVAL] = {"cpu_clock_interval", "STRATA_CPU_CLOCK_INTERVAL", ST_TYPE_INT,
                                 "50", "general",
                                 "cpu_clock: microseconds of wall time between readings of a "
                                 "thread's CPU clock (a system call), carried forward at the "
                                 "thread's rate in between; a call that lasts this long gets "
                                 "its end read exactly (0: read at every call and return)",
                                 NULL, NOFLAG, INT_RANGE(0, 1000000)},
    [ST_S_USE_CUPTI] = {"use_cupti", "STRATA_USE_CUPTI", ST_TYPE_BOOL, "OFF", "gpu",
                        "Record NVIDIA GPU kernels, copies and sets through CUPTI: the kernel "
                        "and copy tables, each call's gpu_time, a track per GPU stream on the "
                        "timeline (without libcupti or a driver: one warning, no GPU data)",
                        NULL, LFLAG("--gpu", ST_ARG_OPT_BOOL, "BOOL", 24,
                                    "Record GPU kernels and copies (CUPTI)"),
                        INT_RANGE(0, 1)},
    [ST_S_CUPTI_LIBRARY] = {"cupti_library", "STRATA_CUPTI_LIBRARY", ST_TYPE_STRING, "", "gpu",
                            "The libcupti.so to load (empty: the library path, the CUDA toolkit "
                            "under /usr/local/cuda*, the nvidia-cuda-cupti wheel)",
                            NULL, NOFLAG, NO_RANGE},
    [ST_S_FOLLOW_CHILDREN] = {"follow_children", "STRATA_FOLLOW_CHILDREN", ST_TYPE_BOOL, "ON",
                              "python",
                              "Profile the program's child processes that run Python (forked, "
                              "multiprocessing's workers, subprocesses of the same "
                              "interpreter) with the same settings, each into a folder "
                              "process-<pid> of the results folder",
                              NULL, LFLAG("--follow-children", ST_ARG_OPT_BOOL, "BOOL", 25,
                                          "Profile child Python processes too (default ON)"),
                              INT_RANGE(0, 1)},
};

const st_setting_def_t *st_setting_def(st_setting_id_t id) { return &defs[id]; }

int st_setting_find(const char *name)
{
    const char *bare = strncasecmp(name, "STRATA_", 7) == 0 ? name + 7 : name;
    for (int i = 0; i < ST_NSETTINGS; i++)
        if (strcasecmp(defs[i].name, bare) == 0)
            return i;
    return -1;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 64;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = toupper((unsigned char)a[i - 1]) != toupper((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *st_setting_closest(const char *name)
{
    const char *bare = strncasecmp(name, "STRATA_", 7) == 0 ? name + 7 : name;
    size_t best = (size_t)-1;
    const char *env = defs[0].env;
    for (int i = 0; i < ST_NSETTINGS; i++) {
        size_t d = edit_distance(bare, defs[i].name);
        if (d < best) {
            best = d;
            env = defs[i].env;
        }
    }
    return env;
}

const char *st_source_name(st_source_t src)
{
    static const char *names[] = {"default", "file", "environment", "flag", "program"};
    return names[src];
}

static void value_clear(st_value_t *v)
{
    free(v->s);
    for (size_t i = 0; i < v->nlist; i++)
        free(v->list[i]);
    free(v->list);
    v->s = NULL;
    v->list = NULL;
    v->nlist = 0;
    v->i = 0;
}

int st_settings_init(st_settings_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < ST_NSETTINGS; i++) {
        st_msg_t msg;
        int rc = st_settings_set(s, (st_setting_id_t)i, defs[i].defval, ST_SRC_DEFAULT, &msg);
        if (rc < 0) {
            st_settings_free(s);
            return rc;
        }
    }
    return 0;
}

void st_settings_free(st_settings_t *s)
{
    for (int i = 0; i < ST_NSETTINGS; i++)
        value_clear(&s->v[i]);
}

int st_settings_copy(st_settings_t *dst, const st_settings_t *src)
{
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < ST_NSETTINGS; i++) {
        const st_value_t *a = &src->v[i];
        st_value_t *b = &dst->v[i];
        b->i = a->i;
        b->f = a->f;
        b->source = a->source;
        if (a->s && !(b->s = strdup(a->s)))
            goto fail;
        if (a->nlist) {
            if (!(b->list = calloc(a->nlist, sizeof *b->list)))
                goto fail;
            for (size_t j = 0; j < a->nlist; j++) {
                if (!(b->list[j] = strdup(a->list[j])))
                    goto fail;
                b->nlist++;
            }
        }
    }
    return 0;
fail:
    st_settings_free(dst);
    return ST_ENOMEM;
}

static int parse_bool(const char *t, int64_t *out)
{
    static const char *yes[] = {"on", "true", "yes", "1"};
    static const char *no[] = {"off", "false", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(t, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Bytes from "65536", "64MB", "64 MiB", "1g": decimal units KB/MB/GB are 1000-based,
 * KiB/MiB/GiB and the bare K/M/G 1024-based. */
static int parse_size(const char *t, uint64_t *out)
{
    double x;
    const char *end;
    if (st_num_scan(t, &x, &end) < 0 || x < 0)
        return -1;
    while (*end == ' ')
        end++;
    size_t ulen = strlen(end);
    while (ulen && (end[ulen - 1] == ' ' || end[ulen - 1] == '\t'))
        ulen--;
    static const struct {
        const char *unit;
        double mult;
    } units[] = {
        {"", 1},           {"b", 1},           {"k", 1024.0},     {"kb", 1e3},
        {"kib", 1024.0},   {"m", 1048576.0},   {"mb", 1e6},       {"mib", 1048576.0},
        {"g", 1073741824.0}, {"gb", 1e9},      {"gib", 1073741824.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].unit) == ulen && strncasecmp(end, units[i].unit, ulen) == 0) {
            double bytes = x * units[i].mult;
            if (!(bytes <= 9.0e18))
                return -1;
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -1;
}

static int in_choices(const char *choices, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = choices; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* Checks one list item (a choice or a regex). */
static int check_item(st_setting_id_t id, const char *item, st_msg_t *msg)
{
    const st_setting_def_t *d = &defs[id];
    if (d->type == ST_TYPE_REGEX_LIST)
        return st_regex_check(item, d->env, msg);
    /* a counter: its source's name for it, checked by the source (system/hwc.h) */
    if (id == ST_S_COMPONENTS && (strncmp(item, "perf:", 5) == 0 || strncmp(item, "papi:", 5) == 0)) {
        if (!item[5])
            return st_msg_set(msg, ST_EINVAL, "%s: '%s' names no event", d->env, item);
        return 0;
    }
    if (d->choices && !in_choices(d->choices, item))
        return st_msg_set(msg, ST_EINVAL, "%s: unknown value '%s' (choose from %s%s)", d->env,
                          item, d->choices,
                          id == ST_S_COMPONENTS ? ", perf:EVENT, papi:EVENT" : "");
    return 0;
}

static int list_push(st_value_t *v, const char *item, size_t n)
{
    char **list = realloc(v->list, (v->nlist + 1) * sizeof *list);
    if (!list)
        return ST_ENOMEM;
    v->list = list;
    if (!(list[v->nlist] = strndup(item, n)))
        return ST_ENOMEM;
    v->nlist++;
    return 0;
}

int st_settings_append(st_settings_t *s, st_setting_id_t id, const char *item, st_source_t src,
                       st_msg_t *msg)
{
    int rc = check_item(id, item, msg);
    if (rc < 0)
        return rc;
    st_value_t *v = &s->v[id];
    /* A list keeps each item once. */
    for (size_t i = 0; i < v->nlist; i++)
        if (strcmp(v->list[i], item) == 0)
            return v->source = src, 0;
    if (list_push(v, item, strlen(item)) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    v->source = src;
    return 0;
}

int st_settings_set_list(st_settings_t *s, st_setting_id_t id, char *const *items, size_t n,
                         st_source_t src, st_msg_t *msg)
{
    for (size_t i = 0; i < n; i++) {
        int rc = check_item(id, items[i], msg);
        if (rc < 0)
            return rc;
    }
    st_value_t fresh = {0};
    for (size_t i = 0; i < n; i++) {
        if (list_push(&fresh, items[i], strlen(items[i])) < 0) {
            value_clear(&fresh);
            return st_msg_set(msg, ST_ENOMEM, "out of memory");
        }
    }
    value_clear(&s->v[id]);
    s->v[id] = fresh;
    s->v[id].source = src;
    return 0;
}

int st_settings_set(st_settings_t *s, st_setting_id_t id, const char *text, st_source_t src,
                    st_msg_t *msg)
{
    const st_setting_def_t *d = &defs[id];
    st_value_t *v = &s->v[id];
    switch (d->type) {
    case ST_TYPE_BOOL: {
        int64_t b;
        if (parse_bool(text, &b) < 0)
            return st_msg_set(msg, ST_EINVAL,
                              "%s: '%s' is not a boolean (use ON/OFF, true/false, yes/no, 1/0)",
                              d->env, text);
        v->i = b;
        break;
    }
    case ST_TYPE_INT: {
        int64_t n;
        if (st_num_int(text, d->min, d->max, &n) < 0)
            return st_msg_set(msg, ST_EINVAL,
                              "%s: '%s' is not a whole number from %lld to %lld (k, M and G "
                              "suffixes allowed)",
                              d->env, text, (long long)d->min, (long long)d->max);
        v->i = n;
        break;
    }
    case ST_TYPE_SIZE: {
        uint64_t n;
        if (parse_size(text, &n) < 0 || n < (uint64_t)d->min || n > (uint64_t)d->max)
            return st_msg_set(msg, ST_EINVAL,
                              "%s: '%s' is not a size from %lld to %lld bytes (a number with "
                              "an optional unit: B, KB, MB, GB, KiB, MiB, GiB)",
                              d->env, text, (long long)d->min, (long long)d->max);
        v->i = (int64_t)n;
        break;
    }
    case ST_TYPE_FLOAT: {
        double x;
        if (st_num_double(text, d->fmin, d->fmax, &x) < 0)
            return st_msg_set(msg, ST_EINVAL, "%s: '%s' is not a number from %g to %g", d->env,
                              text, d->fmin, d->fmax);
        v->f = x;
        break;
    }
    case ST_TYPE_STRING: {
        char *copy = strdup(text);
        if (!copy)
            return st_msg_set(msg, ST_ENOMEM, "out of memory");
        free(v->s);
        v->s = copy;
        break;
    }
    case ST_TYPE_CHOICE: {
        /* a choice that starts with "off" takes a yes or no too (a flag given alone
         * says ON): yes is the first choice after off */
        int64_t b;
        char first[32];
        if (!in_choices(d->choices, text) && strncmp(d->choices, "off,", 4) == 0 &&
            parse_bool(text, &b) == 0) {
            const char *c = d->choices + 4, *e = strchr(c, ',');
            size_t n = e ? (size_t)(e - c) : strlen(c);
            snprintf(first, sizeof first, "%.*s", (int)(n < sizeof first ? n : sizeof first - 1), c);
            text = b ? first : "off";
        }
        if (!in_choices(d->choices, text))
            return st_msg_set(msg, ST_EINVAL, "%s: unknown value '%s' (choose from %s)", d->env,
                              text, d->choices);
        char *copy = strdup(text);
        if (!copy)
            return st_msg_set(msg, ST_ENOMEM, "out of memory");
        free(v->s);
        v->s = copy;
        break;
    }
    case ST_TYPE_LIST:
    case ST_TYPE_REGEX_LIST: {
        const char *seps = d->type == ST_TYPE_LIST ? ", \t\n" : " \t\n";
        st_value_t fresh = {0};
        char source[6] = "";  /* the last counter source named */
        for (const char *p = text; *p;) {
            p += strspn(p, seps);
            size_t n = strcspn(p, seps);
            if (n == 0)
                break;
            char item[4096];
            if (n >= sizeof item) {
                value_clear(&fresh);
                return st_msg_set(msg, ST_EINVAL, "%s: an item is longer than %zu bytes", d->env,
                                  sizeof item - 1);
            }
            memcpy(item, p, n);
            item[n] = '\0';
            /* components: "perf:cycles,instructions" counts both with perf */
            if (id == ST_S_COMPONENTS && (strncmp(item, "perf:", 5) == 0 ||
                                          strncmp(item, "papi:", 5) == 0)) {
                memcpy(source, item, 5);
            } else if (id == ST_S_COMPONENTS && *source && !in_choices(d->choices, item) &&
                       n + 5 < sizeof item) {
                memmove(item + 5, item, n + 1);
                memcpy(item, source, 5);
            }
            int rc = check_item(id, item, msg);
            if (rc == 0 && list_push(&fresh, item, strlen(item)) < 0)
                rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
            if (rc < 0) {
                value_clear(&fresh);
                return rc;
            }
            p += n;
        }
        value_clear(v);
        *v = fresh;
        break;
    }
    }
    v->source = src;
    return 0;
}

int st_settings_has(const st_settings_t *s, st_setting_id_t id, const char *word)
{
    for (size_t i = 0; i < s->v[id].nlist; i++)
        if (strcmp(s->v[id].list[i], word) == 0)
            return 1;
    return 0;
}

static char *trim(char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    char *e = p + strlen(p);
    while (e > p && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return p;
}

/* Applies one line (NUL-terminated, without its newline). */
static int load_line(st_settings_t *s, const char *path, int lineno, char *line, st_warn_fn warn,
                     st_msg_t *msg)
{
    char *p = trim(line);
    if (*p == '\0' || *p == '#')
        return 0;
    char *eq = strchr(p, '=');
    if (!eq)
        return st_msg_set(msg, ST_EINVAL, "%s:%d: expected 'NAME = value', got '%.200s'", path,
                          lineno, p);
    *eq = '\0';
    char *name = trim(p), *value = trim(eq + 1);
    int id = st_setting_find(name);
    if (id < 0) {
        if (warn) {
            char raw[512], text[1024];
            snprintf(raw, sizeof raw, "%s:%d: unknown setting '%.200s' (did you mean %s?)", path,
                     lineno, name, st_setting_closest(name));
            warn(st_text_printable(text, sizeof text, raw));
        }
        return 0;
    }
    st_msg_t inner;
    if (st_settings_set(s, (st_setting_id_t)id, value, ST_SRC_FILE, &inner) < 0)
        return st_msg_set(msg, ST_EINVAL, "%s:%d: %s", path, lineno, inner.text);
    return 0;
}

int st_settings_load_file(st_settings_t *s, const char *path, st_warn_fn warn, st_msg_t *msg)
{
    size_t size;
    st_msg_t why;
    FILE *f = st_fs_open_regular(path, NULL, &size, &why);
    if (!f)
        return st_msg_set(msg, ST_EIO, "config file: %s", why.text);
    if (size > (size_t)ST_SETTINGS_MAX_FILE) {
        fclose(f);
        return st_msg_set(msg, ST_EINVAL, "config file '%s' is larger than %ld bytes", path,
                          ST_SETTINGS_MAX_FILE);
    }
    /* the whole file, bounded even if it grows while read */
    char *buf = malloc((size_t)ST_SETTINGS_MAX_FILE + 2);
    if (!buf) {
        fclose(f);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    size_t len = fread(buf, 1, (size_t)ST_SETTINGS_MAX_FILE + 1, f);
    int bad = ferror(f);
    fclose(f);
    int rc = 0;
    if (bad)
        rc = st_msg_set(msg, ST_EIO, "cannot read config file '%s'", path);
    else if (len > (size_t)ST_SETTINGS_MAX_FILE)
        rc = st_msg_set(msg, ST_EINVAL, "config file '%s' is larger than %ld bytes", path,
                        ST_SETTINGS_MAX_FILE);
    buf[len] = '\0';
    int lineno = 0;
    for (size_t at = 0; rc == 0 && at < len;) {
        lineno++;
        char *line = buf + at;
        char *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        if (memchr(line, '\0', n))
            rc = st_msg_set(msg, ST_EINVAL, "%s:%d: a NUL byte: not a text file", path, lineno);
        else if (n > ST_SETTINGS_MAX_LINE)
            rc = st_msg_set(msg, ST_EINVAL, "%s:%d: a line longer than %d bytes", path, lineno,
                            ST_SETTINGS_MAX_LINE);
        if (rc < 0)
            break;
        line[n] = '\0';
        rc = load_line(s, path, lineno, line, warn, msg);
        at += n + 1;
    }
    free(buf);
    return rc;
}

/* Variables with the STRATA_ prefix that are not settings but are still ours:
 * STRATA_TEST_* belong to the test suite. */
static int is_known_other(const char *name, size_t n)
{
    return n > 12 && strncmp(name, "STRATA_TEST_", 12) == 0;
}

int st_settings_load_env(st_settings_t *s, char *const *envp, st_warn_fn warn, st_msg_t *msg)
{
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, "STRATA_", 7) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        size_t n = (size_t)(eq - *e);
        char name[256];
        if (n >= sizeof name)
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        int id = -1;
        for (int i = 0; i < ST_NSETTINGS; i++)
            if (strcmp(defs[i].env, name) == 0)
                id = i;
        if (id < 0) {
            if (warn && !is_known_other(name, n)) {
                char raw[512], text[1024];
                snprintf(raw, sizeof raw, "unknown setting %s in the environment (did you mean %s?)",
                         name, st_setting_closest(name));
                warn(st_text_printable(text, sizeof text, raw));
            }
            continue;
        }
        int rc = st_settings_set(s, (st_setting_id_t)id, eq + 1, ST_SRC_ENV, msg);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void st_settings_format(const st_settings_t *s, st_setting_id_t id, st_strbuf_t *out)
{
    const st_value_t *v = &s->v[id];
    switch (defs[id].type) {
    case ST_TYPE_BOOL:
        st_strbuf_puts(out, v->i ? "ON" : "OFF");
        break;
    case ST_TYPE_INT:
    case ST_TYPE_SIZE:
        st_strbuf_printf(out, "%lld", (long long)v->i);
        break;
    case ST_TYPE_FLOAT:
        st_strbuf_printf(out, "%.17g", v->f);
        break;
    case ST_TYPE_STRING:
    case ST_TYPE_CHOICE:
        st_strbuf_puts(out, v->s ? v->s : "");
        break;
    case ST_TYPE_LIST:
    case ST_TYPE_REGEX_LIST:
        for (size_t i = 0; i < v->nlist; i++) {
            if (i)
                st_strbuf_puts(out, defs[id].type == ST_TYPE_LIST ? "," : " ");
            st_strbuf_puts(out, v->list[i]);
        }
        break;
    }
}

static const char *env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

const char *st_settings_config_path(const char *config, char *const *envp, char *buf,
                                    size_t size)
{
    if (!config)
        config = env_lookup(envp, "STRATA_CONFIG_FILE");
    if (config && *config)
        return config;
    const char *home = env_lookup(envp, "HOME");
    struct stat st;
    if (home && snprintf(buf, size, "%s/.strata.cfg", home) < (int)size && stat(buf, &st) == 0)
        return buf;
    return NULL;
}

int st_settings_load_sources(st_settings_t *s, const char *config, char *const *envp,
                             st_warn_fn warn, st_msg_t *msg)
{
    char buf[4096];
    const char *path = st_settings_config_path(config, envp, buf, sizeof buf);
    int rc = path ? st_settings_load_file(s, path, warn, msg) : 0;
    return rc < 0 ? rc : st_settings_load_env(s, envp, warn, msg);
}
