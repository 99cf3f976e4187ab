#define _GNU_SOURCE /* fopencookie */
#include "session/session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "input/jsonpull.h"
#include "core/components.h"
#include "base/fsutil.h"
#include "model/model.h"
#include "base/strbuf.h"
#include "output/json.h"
#include "output/lineprof.h"
#include "output/lines.h"
#include "output/sampling.h"
#include "output/summary.h"
#include "output/table.h"
#include "output/gpu.h"
#include "output/registry.h"

/* The process sampler as a collector: it runs its own thread (system/sampler.h) and
 * contributes its metrics' summaries; its counters also go on the timeline
 * (trace_out.c reads them from the session). */
static int sampler_start(st_collector_t *c, st_session_t *s, st_msg_t *msg)
{
    (void)c;
    int rc = st_sampler_start(&s->sampler,
                              st_settings_float(&s->settings, ST_S_PROCESS_SAMPLING_FREQ),
                              s->helper_threads, msg);
    if (rc == 0)
        s->sampling = 1;
    return rc;
}

static void sampler_stop(st_collector_t *c, st_session_t *s)
{
    (void)c;
    st_sampler_stop(&s->sampler);
}

static void sampler_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    st_session_t *own = (st_session_t *)s; /* the summaries live in the session */
    const st_sampler_t *sp = &s->sampler;
    for (int k = 0; k < sp->nmetrics; k++) {
        st_model_metric_t *mm = &own->sampler_metrics[k];
        mm->name = sp->metrics[k].name;
        mm->units = sp->metrics[k].units;
        st_sampler_summary(sp, k, &mm->min, &mm->mean, &mm->max);
    }
    m->sampled = s->sampler_metrics;
    m->nsampled = (size_t)sp->nmetrics;
    m->sampling_freq = sp->freq;
    m->nsamples = sp->n;
    m->sampler_cpu_s = (double)sp->self_cpu_ns * 1e-9;
    m->gpu_note = *sp->gpu_note ? sp->gpu_note : NULL;
}

static const st_collector_t sampler_collector = {
    .name = "process sampler",
    .start = sampler_start,
    .stop = sampler_stop,
    .contribute = sampler_contribute,
};

int st_session_add_collector(st_session_t *s, const st_collector_t *c)
{
    if (s->ncollectors == ST_SESSION_MAX_COLLECTORS)
        return ST_EINVAL;
    s->collectors[s->ncollectors++] = *c;
    return 0;
}

/* The signal chunks a stack sampler at the settings' rate keeps ready. */
static uint32_t sig_chunks_for(const st_settings_t *set)
{
    double n = st_settings_float(set, ST_S_SAMPLING_FREQ) * 32.0 / 1000.0;
    return n < 8 ? 8 : n > 64 ? 64 : (uint32_t)n;
}

/* A count metric for each counter (the recorder's columns for st_rec_count). */
static int add_counter_metrics(st_session_t *s)
{
    for (uint32_t i = 0; i < s->hwc.n; i++) {
        const st_hwc_event_t *e = &s->hwc.ev[i];
        if (st_rec_add_metric(&s->rec, e->metric, e->unit, e->desc, ST_METRIC_COUNT,
                              &s->hwc.rc.metric[i]) < 0)
            return ST_ENOMEM;
    }
    return 0;
}

int st_session_init(st_session_t *s, const st_settings_t *settings, st_msg_t *msg)
{
    memset(s, 0, sizeof *s);
    if (st_settings_copy(&s->settings, settings) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    st_intern_init(&s->labels);
    st_loctab_init(&s->locs);
    s->has_rank = st_session_rank_from_env(NULL, &s->rank);
    for (int c = 0; c < ST_NCOMPONENTS; c++)
        if (st_settings_has(settings, ST_S_COMPONENTS, st_component_info((st_component_t)c)->name))
            s->components |= 1u << c;
    /* the counters asked for: each must count here, before the program starts */
    if (st_hwc_parse(settings, &s->hwc, msg) < 0 || st_hwc_check(&s->hwc, msg) < 0) {
        st_session_free(s);
        return ST_EINVAL;
    }
    /* counters alone: the calls are counted too (a timer's table is not asked for) */
    if (!s->components && s->hwc.n)
        s->components = 1u << ST_COMP_TRIP_COUNT;
    if (!s->components) {
        st_session_free(s);
        return st_msg_set(msg, ST_EINVAL, "STRATA_COMPONENTS: no component chosen (choose from "
                                          "trip_count,wall_clock,cpu_clock)");
    }
    const st_settings_t *set = &s->settings;
    s->tracing = st_settings_bool(set, ST_S_TRACE);
    st_rec_config_t cfg = {
        .max_nodes = (uint32_t)st_settings_int(set, ST_S_MAX_NODES),
        .cpu = (s->components & (1u << ST_COMP_CPU_CLOCK)) != 0,
        .trace = s->tracing,
        .budget = (uint64_t)st_settings_int(set, ST_S_TRACE_BUFFER_SIZE),
        .policy = strcmp(st_settings_str(set, ST_S_TRACE_FILL_POLICY), "flush") == 0
                      ? ST_EV_FLUSH
                      : ST_EV_DISCARD,
        .max_depth = (uint32_t)st_settings_int(set, ST_S_TRACE_MAX_DEPTH),
        .spill_dir = s->outdir, /* filled in by st_session_make_outdir */
        /* stack samples are written by signal handlers into chunks kept ready
         * (mapped and faulted in beforehand), refilled at each of the sampler's
         * ticks (every 20 ms while they go fast, sampling/stacks.c): 8 chunks at
         * 100 Hz up to 32 at 1 kHz and 64 above, and one more a thread sampled
         * (st_rec_sig_threads: its lane takes one at its first sample); 32 chunks
         * (512 KB) hold about 4600 samples of 20 frames, 70 ms of 64 threads
         * sampled at 1 kHz of wall time */
        .sig_chunks = st_settings_bool(set, ST_S_USE_SAMPLING) ? sig_chunks_for(set) : 0,
        /* the thread CPU clock read at most every STRATA_CPU_CLOCK_INTERVAL µs */
        .cpu_every = (uint64_t)((double)st_settings_int(set, ST_S_CPU_CLOCK_INTERVAL) * 1000.0 /
                                st_clock_ns_per_tick()),
    };
    if (s->hwc.n) {
        st_hwc_counters(&s->hwc);
        cfg.counters = &s->hwc.rc;
    }
    int rc = st_rec_init(&s->rec, &cfg);
    if (rc == 0 && add_counter_metrics(s) < 0) {
        st_rec_free(&s->rec);
        rc = ST_ENOMEM;
    }
    if (rc < 0) {
        st_intern_free(&s->labels);
        st_loctab_free(&s->locs);
        st_settings_free(&s->settings);
        memset(s, 0, sizeof *s);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    /* the built-in collectors, started before any the front end adds */
    if (st_settings_bool(set, ST_S_USE_PROCESS_SAMPLING))
        st_session_add_collector(s, &sampler_collector);
    s->gpu_metric = ST_METRIC_NONE;
    if (st_settings_bool(set, ST_S_USE_CUPTI) && st_gpu_add(s) < 0) {
        st_session_free(s);
        return st_msg_set(msg, ST_ENOMEM, "out of memory");
    }
    if (s->tracing)
        st_session_add_collector(s, &st_session_timeline_collector);
    s->mpi_bytes = ST_METRIC_NONE;
    s->start_ns = st_clock_realtime_ns();
    return 0;
}

int st_session_begin(st_session_t *s, const st_settings_t *settings, const char *target,
                     int argc, char *const *argv, st_msg_t *msg)
{
    int rc = st_session_init(s, settings, msg);
    if (rc < 0)
        return rc;
    rc = st_session_make_outdir(s, target, msg);
    if (rc == 0 && st_session_set_command(s, argc, argv) < 0)
        rc = st_msg_set(msg, ST_ENOMEM, "out of memory");
    if (rc < 0) {
        st_session_free(s);
        return rc;
    }
    st_clock_init(st_settings_str(&s->settings, ST_S_CLOCK));
    return 0;
}

/* Stops the first `n` collectors started, the last first. */
static void stop_collectors(st_session_t *s)
{
    while (s->nstarted > 0) {
        st_collector_t *c = &s->collectors[--s->nstarted];
        if (c->stop)
            c->stop(c, s);
    }
}

/* Nothing ran: the results folder goes (its note first; the folder only if empty,
 * and the strata-<target>-output folder above it too when strata named both). */
static void discard_outdir(st_session_t *s)
{
    st_session_unmark(s);
    if (rmdir(s->outdir) == 0 && !*st_settings_str(&s->settings, ST_S_OUTPUT_PATH)) {
        char *slash = strrchr(s->outdir, '/');
        if (slash) {
            *slash = '\0';
            rmdir(s->outdir);
            *slash = '/';
        }
    }
}

int st_session_start(st_session_t *s, st_msg_t *msg)
{
    for (int i = 0; i < s->ncollectors; i++) {
        st_collector_t *c = &s->collectors[i];
        int rc = c->start ? c->start(c, s, msg) : 0;
        if (rc < 0) {
            stop_collectors(s);
            discard_outdir(s);
            return rc;
        }
        s->nstarted = s->nran = i + 1;
    }
    return 0;
}

void st_session_stop(st_session_t *s)
{
    stop_collectors(s);
    /* threads that still exit (daemon threads, C threads) leave their state be */
    st_rec_seal(&s->rec);
    st_rec_close_all(&s->rec);
}

int st_session_finish(st_session_t *s, const st_settings_t *settings, FILE *tables, FILE *notes,
                      st_msg_t *msg)
{
    st_settings_t copy;
    if (settings && st_settings_copy(&copy, settings) == 0) {
        st_settings_free(&s->settings);
        s->settings = copy;
    }
    int failed = 0;
    for (uint32_t i = 0; i < s->rec.nthreads; i++)
        failed |= s->rec.threads[i]->failed | s->rec.threads[i]->paths.failed;
    double npt[ST_NTIMERS] = {st_clock_ns_per_tick(), 1.0};
    int rc = st_session_write(s, npt, st_clock_name(), tables, notes, msg);
    if (notes && failed) {
        fprintf(notes, "strata: error: memory ran out while profiling; the profile is "
                       "incomplete\n");
        fflush(notes);
    }
    return rc;
}

void st_session_stacks_contribute(const st_collector_t *c, const st_session_t *s, st_model_t *m)
{
    (void)c;
    if (s->stack_sampling)
        m->stacks = &s->stacks;
}

void st_session_free(st_session_t *s)
{
    st_tree_free(s->children_rec, s->nrec);
    free((void *)s->stacks.lines);
    free(s->stack_first);
    free(s->stack_chain);
    if (s->sampling)
        st_sampler_free(&s->sampler);
    st_gpu_free(s);
    if (s->rec.id) /* set up (ids start at 1) */
        st_rec_free(&s->rec);
    for (size_t i = 0; i < s->ncommand; i++)
        free(s->command[i]);
    free(s->command);
    st_intern_free(&s->labels);
    st_loctab_free(&s->locs);
    st_settings_free(&s->settings);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------- */
/* A followed process tree (STRATA_FOLLOW_CHILDREN)                           */

#define TREE_RECORD "processes.jsonl"

static void proc_free(st_tree_proc_t *p)
{
    free(p->folder);
    free(p->not_followed);
    for (size_t k = 0; k < p->ncommand; k++)
        free(p->command[k]);
    free(p->command);
    memset(p, 0, sizeof *p);
}

void st_tree_free(st_tree_proc_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        proc_free(&v[i]);
    free(v);
}

/* One record line into *p: 0, or -1 when it is not one strata writes. */
static int parse_record(const char *line, size_t len, st_tree_proc_t *p)
{
    st_jp_t jp;
    st_jp_init(&jp, line, len);
    st_strbuf_t key, val;
    st_strbuf_init(&key);
    st_strbuf_init(&val);
    memset(p, 0, sizeof *p);
    int64_t v = 0;
    int rc = st_jp_obj_begin(&jp), more = 0;
    while (rc == 0 && (more = st_jp_obj_next(&jp, &key)) == 1) {
        const char *k = st_strbuf_cstr(&key);
        if (strcmp(k, "pid") == 0 || strcmp(k, "parent") == 0) {
            rc = st_jp_int(&jp, 0, INT64_MAX, &v);
            *(strcmp(k, "pid") == 0 ? &p->pid : &p->parent) = (long)v;
        } else if (strcmp(k, "folder") == 0 && !p->folder) {
            rc = st_jp_string_dup(&jp, &val, &p->folder);
        } else if (strcmp(k, "not_followed") == 0 && !p->not_followed) {
            rc = st_jp_string_dup(&jp, &val, &p->not_followed);
        } else if (strcmp(k, "command") == 0 && !p->command) {
            rc = st_jp_strings(&jp, &val, &p->command, &p->ncommand);
        } else {
            rc = st_jp_skip(&jp);
        }
    }
    /* a followed process has its pid and a folder of the tree's, one that is not
     * followed has neither */
    if (rc == 0 && (more < 0 || (p->not_followed ? p->folder != NULL
                                                 : !p->pid || !p->folder || strchr(p->folder, '/'))))
        rc = -1;
    st_strbuf_free(&key);
    st_strbuf_free(&val);
    if (rc < 0)
        proc_free(p);
    return rc;
}

int st_tree_read(const char *tree, st_tree_proc_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" TREE_RECORD, tree);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    ssize_t len;
    while ((len = getline(&line, &linecap, f)) > 0) {
        st_tree_proc_t one;
        if (parse_record(line, (size_t)len, &one) < 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            st_tree_proc_t *v = realloc(*out, cap * sizeof *v);
            if (!v) {
                proc_free(&one);
                break;
            }
            *out = v;
        }
        (*out)[(*n)++] = one;
    }
    free(line);
    fclose(f);
    return 0;
}

/* A line of the tree's record into b: a followed process (folder) or one not
 * followed (why). No allocation where b's memory is the caller's. */
static void format_line(st_strbuf_t *b, long pid, long parent, const char *folder,
                        const char *why, char *const *command, size_t ncommand)
{
    st_strbuf_puts(b, "{\"pid\": ");
    st_strbuf_u64(b, (uint64_t)(pid > 0 ? pid : 0));
    st_strbuf_puts(b, ", \"parent\": ");
    st_strbuf_u64(b, (uint64_t)(parent > 0 ? parent : 0));
    st_strbuf_puts(b, ", ");
    if (folder) {
        st_strbuf_puts(b, "\"folder\": ");
        st_strbuf_json_string(b, folder);
    } else {
        st_strbuf_puts(b, "\"not_followed\": ");
        st_strbuf_json_string(b, why);
    }
    st_strbuf_puts(b, ", \"command\": ");
    st_strbuf_json_strings(b, (const char *const *)command, ncommand);
    st_strbuf_puts(b, "}\n");
}

/* Appends b's line to the tree's record in one write (processes writing at once
 * never mix their lines); nothing when b failed. No allocation. */
static void append_line(const char *tree, const st_strbuf_t *b)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" TREE_RECORD, tree);
    int fd = b->failed ? -1 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, b->data, b->len);
        (void)w;
        close(fd);
    }
}

/* Appends one record line to the tree's processes.jsonl; a line that cannot be
 * written loses that line only. */
static void record_line(const char *tree, long pid, long parent, const char *folder,
                        const char *why, char *const *command, size_t ncommand)
{
    st_strbuf_t b;
    st_strbuf_init(&b);
    format_line(&b, pid, parent, folder, why, command, ncommand);
    append_line(tree, &b);
    st_strbuf_free(&b);
}

void st_session_record_not_followed(const char *tree, long pid, long parent, const char *why,
                                    char *const *command, size_t ncommand)
{
    if (!tree || !*tree)
        return;
    /* the line's longest: every byte escaped as \\u00XX, and the fixed text */
    size_t need = 6 * strlen(why) + 256;
    for (size_t i = 0; i < ncommand; i++)
        need += 6 * strlen(command[i]) + 4;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    need = (need + page - 1) / page * page;
    void *mem = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return;
    st_strbuf_t b;
    st_strbuf_init_fixed(&b, mem, need);
    format_line(&b, pid, parent, NULL, why, command, ncommand);
    append_line(tree, &b);
    munmap(mem, need);
}

void st_session_follow(st_session_t *s, const char *tree, long parent)
{
    snprintf(s->tree, sizeof s->tree, "%s", tree);
    s->tree_parent = parent;
    if (!parent)
        return;
    const char *folder = strrchr(s->outdir, '/');
    record_line(s->tree, (long)getpid(), parent, folder ? folder + 1 : s->outdir, NULL,
                s->command, s->ncommand);
}

void st_session_not_followed(st_session_t *s, long pid, char *const *command, size_t ncommand,
                             const char *why)
{
    /* a process that becomes the program (exec) is its parent's child still */
    long parent = pid == (long)getpid() ? s->tree_parent : (long)getpid();
    if (*s->tree)
        record_line(s->tree, pid, parent, NULL, why, command, ncommand);
}

int st_session_set_command(st_session_t *s, int argc, char *const *argv)
{
    char **cmd = calloc((size_t)argc + 1, sizeof *cmd);
    if (!cmd)
        return ST_ENOMEM;
    for (int i = 0; i < argc; i++) {
        if (!(cmd[i] = strdup(argv[i]))) {
            for (int j = 0; j < i; j++)
                free(cmd[j]);
            free(cmd);
            return ST_ENOMEM;
        }
    }
    for (size_t i = 0; i < s->ncommand; i++)
        free(s->command[i]);
    free(s->command);
    s->command = cmd;
    s->ncommand = (size_t)argc;
    return 0;
}

/* The note left in the results folder while the program runs. */
static const char incomplete_note[] =
    "This run of strata has not written its results: the program is still running, or it\n"
    "ended in a way that let strata write nothing (SIGKILL, a crash, a signal strata does\n"
    "not catch). strata removes this file once the results are written. See\n"
    "docs/usage.md, \"When the program does not end normally\".\n";

void st_session_file_name(const st_session_t *s, const char *stem, const char *ext, char *buf,
                          size_t size)
{
    if (s->has_rank)
        snprintf(buf, size, "%s-%u%s", stem, s->rank, ext);
    else
        snprintf(buf, size, "%s%s", stem, ext);
}

static void incomplete_path(const st_session_t *s, char *buf, size_t size)
{
    char name[64];
    st_session_file_name(s, "incomplete", ".txt", name, sizeof name);
    if (snprintf(buf, size, "%s/%s", s->outdir, name) >= (int)size)
        *buf = '\0';
}

/* Leaves the note under the run's current name: 0, or < 0 (why says why). */
static int mark(const st_session_t *s, st_msg_t *why)
{
    char note[PATH_MAX];
    incomplete_path(s, note, sizeof note);
    return *note ? st_fs_write_atomic(note, incomplete_note, sizeof incomplete_note - 1, why) : 0;
}

void st_session_unmark(st_session_t *s)
{
    char path[PATH_MAX];
    incomplete_path(s, path, sizeof path);
    if (*path)
        unlink(path);
}

void st_session_set_rank(st_session_t *s, uint32_t rank)
{
    if (s->has_rank && s->rank == rank)
        return;
    st_session_unmark(s);
    s->has_rank = 1;
    s->rank = rank;
    st_msg_t why;
    mark(s, &why);
}

int st_session_outdir(const st_settings_t *set, const char *target, int has_rank,
                      char abs[PATH_MAX], char shown[PATH_MAX], st_msg_t *msg)
{
    const char *want = st_settings_str(set, ST_S_OUTPUT_PATH);
    char path[PATH_MAX];
    if (*want) {
        if (snprintf(path, sizeof path, "%s", want) >= (int)sizeof path)
            return st_msg_set(msg, ST_EINVAL, "output folder name too long: '%s'", want);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char stamp[64];
        strftime(stamp, sizeof stamp, "%Y-%m-%d_%H.%M.%S", &tm);
        char base[PATH_MAX];
        if (snprintf(base, sizeof base, "strata-%s-output/%s", target, stamp) >= (int)sizeof base)
            return st_msg_set(msg, ST_EINVAL, "output folder name too long");
        snprintf(path, sizeof path, "%s", base);
        struct stat st;
        /* MPI ranks share the folder of the second they started in */
        for (int k = 2; !has_rank && stat(path, &st) == 0 && k < 1000; k++)
            if (snprintf(path, sizeof path, "%s_%d", base, k) >= (int)sizeof path)
                return st_msg_set(msg, ST_EINVAL, "output folder name too long");
    }
    /* Absolute now, while the working directory is still the user's. */
    if (path[0] == '/') {
        snprintf(abs, PATH_MAX, "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return st_msg_set(msg, ST_EIO, "cannot create the results folder '%s': the current "
                                           "directory is not reachable (%s)",
                              path, strerror(errno));
        if (snprintf(abs, PATH_MAX, "%s/%s", strcmp(cwd, "/") ? cwd : "", path) >= PATH_MAX)
            return st_msg_set(msg, ST_EINVAL, "output folder name too long: '%s'", path);
    }
    errno = 0;
    if (st_fs_make_dirs(abs) != 0 || access(abs, W_OK | X_OK) != 0)
        return st_msg_set(msg, ST_EIO, "cannot create the results folder '%s': %s", path,
                          strerror(errno ? errno : EACCES));
    snprintf(shown, PATH_MAX, "%s", path);
    return 0;
}

int st_session_make_outdir(st_session_t *s, const char *target, st_msg_t *msg)
{
    snprintf(s->target, sizeof s->target, "%s", target);
    int rc = st_session_outdir(&s->settings, target, s->has_rank, s->outdir, s->outdir_shown, msg);
    if (rc < 0)
        return rc;
    st_msg_t why;
    if (mark(s, &why) < 0)
        return st_msg_set(msg, ST_EIO, "cannot write in the results folder '%s': %s",
                          s->outdir_shown, why.text);
    /* a folder used again: the record of an earlier run's children is not this
     * run's (its lines would be counted, and shown as this run's tree) */
    char record[PATH_MAX + 32];
    snprintf(record, sizeof record, "%s/" TREE_RECORD, s->outdir);
    unlink(record);
    return 0;
}

/* Streams one file into dir/name, whole or not at all: `render` appends to the
 * streaming buffer (memory stays bounded however large the file). */
typedef void (*render_fn)(st_strbuf_t *out, const st_model_t *m, int arg);

static int stream_file(const char *dir, const char *name, render_fn render, const st_model_t *m,
                       int arg, st_msg_t *msg)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return st_msg_set(msg, ST_EIO, "results path too long in '%s'", dir);
    st_fs_out_t fo;
    int rc = st_fs_out_open(&fo, path, msg);
    if (rc < 0)
        return rc;
    render(&fo.buf, m, arg);
    if (fo.buf.failed && !fo.buf.sink_errno) {
        st_fs_out_abort(&fo);
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing '%s'", path);
    }
    return st_fs_out_commit(&fo, ST_FS_REPLACE, msg);
}

/* Renders straight to the terminal, streaming (a table not written to a file). */
static void render_to(FILE *to, render_fn render, const st_model_t *m, int arg)
{
    st_strbuf_t buf;
    st_strbuf_init(&buf);
    st_strbuf_stream(&buf, to);
    render(&buf, m, arg);
    st_strbuf_flush(&buf);
    st_strbuf_free(&buf);
}

/* Copies the file dir/name to the terminal (the table just written), or renders
 * it again when the file cannot be read back (removed since). */
static void copy_file(FILE *to, const char *dir, const char *name, render_fn render,
                      const st_model_t *m, int arg)
{
    char path[PATH_MAX];
    FILE *f = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
        f = fopen(path, "rb");
    if (!f) {
        render_to(to, render, m, arg);
        return;
    }
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (fwrite(chunk, 1, n, to) != n)
            break;
    fclose(f);
}

static void render_sampling(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_sampling_table_write(out, m);
}
/* arg: the most rows (0: all) */
static void render_lines(st_strbuf_t *out, const st_model_t *m, int arg)
{
    st_lines_table_write(out, m, (size_t)arg);
}
static void render_memlines(st_strbuf_t *out, const st_model_t *m, int arg)
{
    st_memlines_table_write(out, m, (size_t)arg);
}
static void render_lineprof(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_lineprof_text_write(out, m, 0);
}
static void render_memprof(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_memprof_text_write(out, m);
}
/* arg: the component, and the precision times 256 */
static void render_table(st_strbuf_t *out, const st_model_t *m, int arg)
{
    st_table_write(out, m, (st_component_t)(arg & 255), arg >> 8);
}
/* The metrics with a table of their own besides the components: the counters,
 * then MPI's bytes when MPI calls were wrapped, then --memory's (bytes and
 * allocations made, bytes held at the peak and at the end). Returns how many. */
#define ST_SESSION_MAX_EXTRA (ST_REC_MAX_COUNTERS + 6)
static uint32_t extra_tables(const st_session_t *s, uint32_t *ids)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->hwc.n; i++)
        ids[n++] = s->hwc.rc.metric[i];
    if (s->mpi_bytes != ST_METRIC_NONE)
        ids[n++] = s->mpi_bytes;
    if (s->gpu_metric != ST_METRIC_NONE)
        ids[n++] = s->gpu_metric;
    for (uint32_t i = 0; i < s->nmem_metrics; i++)
        ids[n++] = s->mem_metrics[i];
    return n;
}

/* arg: the metric's id (samples, a counter) */
static void render_metric(st_strbuf_t *out, const st_model_t *m, int arg)
{
    if (st_table_write_metric(out, m, (uint32_t)arg) < 0)
        out->failed = 1;
}
static void render_gpu_kernels(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_gpu_kernels_write(out, m);
}
static void render_gpu_copies(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_gpu_copies_write(out, m);
}
static void render_json(st_strbuf_t *out, const st_model_t *m, int arg)
{
    (void)arg;
    st_json_write(out, m);
}

/* The formats STRATA_OUTPUT_FORMATS lists, as a mask of st_format_t bits. */
static unsigned output_formats(const st_settings_t *set)
{
    size_t n;
    char *const *list = st_settings_list(set, ST_S_OUTPUT_FORMATS, &n);
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        int f = st_format_find(list[i]);
        if (f >= 0)
            mask |= 1u << f;
    }
    return mask;
}

int st_session_rank_from_env(char *const *envp, uint32_t *rank)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                 "MV2_COMM_WORLD_RANK", "PALS_RANKID", "SLURM_PROCID"};
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        const char *val = NULL;
        if (envp) {
            size_t n = strlen(vars[v]);
            for (char *const *e = envp; *e && !val; e++)
                if (strncmp(*e, vars[v], n) == 0 && (*e)[n] == '=')
                    val = *e + n + 1;
        } else {
            val = getenv(vars[v]);
        }
        if (!val || !*val)
            continue;
        char *end;
        errno = 0;
        unsigned long r = strtoul(val, &end, 10);
        if (errno || *end || r > INT32_MAX || *val == '-' || *val == '+')
            continue;
        *rank = (uint32_t)r;
        return 1;
    }
    *rank = 0;
    return 0;
}

/* Counts what a table rendered straight to it would print (a table that is not in
 * a file), so that its size is known without holding it. */
typedef struct {
    size_t bytes;
} tally_t;

static ssize_t tally_write(void *cookie, const char *buf, size_t n)
{
    (void)buf;
    ((tally_t *)cookie)->bytes += n;
    return (ssize_t)n;
}

/* The size of a table as the terminal would get it: its file's, or what rendering it
 * again gives. */
static size_t table_size(const char *dir, const char *name, int in_file, render_fn render,
                         const st_model_t *m, int arg)
{
    char path[PATH_MAX];
    struct stat st;
    if (in_file && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
        stat(path, &st) == 0)
        return (size_t)st.st_size;
    tally_t t = {0};
    FILE *f = fopencookie(&t, "w", (cookie_io_functions_t){.write = tally_write});
    if (!f)
        return SIZE_MAX; /* unknown: the summary, which is small, stands for it */
    render_to(f, render, m, arg);
    fclose(f);
    return t.bytes;
}

/* Prints the summary that stands for tables too long for a terminal
 * (output/summary.h): the top functions and where the full tables are (the files
 * written; `strata report` where there are none). */
static void print_summary(FILE *f, const st_session_t *s, const st_model_t *m, size_t bytes,
                          char names[][64], const int *table_ok, int precision)
{
    st_strbuf_t b;
    st_strbuf_init(&b);
    if (st_summary_write(&b, m, ST_SUMMARY_TOP, precision) == 0)
        fputs(st_strbuf_cstr(&b), f);
    st_strbuf_free(&b);
    fprintf(f, "[strata] the tables (%.1f MB) are too long for the terminal: above, "
               "the functions with the most own time; ",
            (double)bytes / 1e6);
    char shown[PATH_MAX];
    st_text_printable(shown, sizeof shown, s->outdir_shown);
    int listed = 0;
    for (int c = 0; c < ST_NCOMPONENTS; c++) {
        if (!(s->components & (1u << c)) || !table_ok[c])
            continue;
        fprintf(f, "%s %s/%s", listed++ ? "" : "the full tables are in", shown, names[c]);
    }
    if (listed)
        fputc('\n', f);
    else
        fputs("`strata report` on the results prints the full tables\n", f);
}

/* The samples table on the terminal (its file's copy), or where it is when it is
 * too long for one; then what the stack sampler did. */
#define ST_TERMINAL_LINES 10 /* sampled lines shown on the terminal */

/* A table on the terminal (its file's copy, or rendered when it has no file), or,
 * when it is too long for one, what it is and where (`what`: "the samples table";
 * `reprint`: the command that prints it when it has no file). */
static void print_table(FILE *f, const st_session_t *s, const st_model_t *m, const char *name,
                        int in_file, int first, render_fn render, int arg, const char *what,
                        const char *reprint)
{
    size_t bytes = table_size(s->outdir, name, in_file, render, m, arg);
    if (!first)
        fputc('\n', f);
    if (bytes <= ST_SUMMARY_TABLE_BYTES) {
        if (in_file)
            copy_file(f, s->outdir, name, render, m, arg);
        else
            render_to(f, render, m, arg);
        return;
    }
    char shown[PATH_MAX];
    fprintf(f, "[strata] %s (%.1f MB) is too long for the terminal: %s%s%s\n", what,
            (double)bytes / 1e6, in_file ? "it is in " : reprint,
            in_file ? st_text_printable(shown, sizeof shown, s->outdir_shown) : "",
            in_file ? "/" : "");
    if (in_file)
        fprintf(f, "%s\n", name);
}

static void print_samples(FILE *f, const st_session_t *s, const st_model_t *m, const char *name,
                          int in_file, int first)
{
    print_table(f, s, m, name, in_file, first, render_metric, (int)s->rec.m_samples,
                "the samples table", "`strata report` prints it");
    /* the hottest lines (sampled_lines.txt has them all) */
    if (m->stacks->nlines) {
        fputc('\n', f);
        render_to(f, render_lines, m, ST_TERMINAL_LINES);
    }
    const st_model_stacks_t *st = m->stacks;
    fprintf(f, "[strata] stack sampling: %llu samples (%llu periods of %g ms of %s time) in %llu "
               "thread%s; the sampler used %.1f ms of CPU\n",
            (unsigned long long)st->signals, (unsigned long long)st->periods, 1e3 / st->freq,
            st->clock, (unsigned long long)st->threads, st->threads == 1 ? "" : "s",
            st->self_cpu_s * 1e3);
    /* short of 99 % of the periods the threads' time stands for */
    if (st->promised && (double)st->periods < 0.99 * (double)st->promised)
        fprintf(f, "[strata] the threads' %s time stands for %llu periods; %llu (%.0f %%) were "
                   "sampled: a CPU timer fires at the kernel's tick, and a thread that ends "
                   "takes its last part period with it (many short threads lose most)\n",
                st->clock, (unsigned long long)st->promised, (unsigned long long)st->periods,
                100.0 * (double)st->periods / (double)st->promised);
    if (st->rated)
        fprintf(f, "[strata] effective rate per thread: %.0f to %.0f samples (%.0f to %.0f "
                   "periods) a second of %s time, in the %llu thread%s sampled for 0.1 s or "
                   "more\n",
                st->rate_min, st->rate_max, st->prate_min, st->prate_max, st->clock,
                (unsigned long long)st->rated, st->rated == 1 ? "" : "s");
}

/* Memory over time in one line: its samples, its peak, and its files. */
static void print_memtime(FILE *f, const st_session_t *s, const st_model_memtime_t *mt)
{
    size_t peak = 0, hpeak = 0;
    for (size_t i = 1; i < mt->n; i++) {
        if (mt->rss[i] > mt->rss[peak])
            peak = i;
        if (mt->heap && mt->heap[i] > mt->heap[hpeak])
            hpeak = i;
    }
    char dat[64], svg[64];
    st_format_file_name(ST_FMT_MPROF, s->has_rank, s->rank, dat, sizeof dat);
    st_format_file_name(ST_FMT_MEMPLOT, s->has_rank, s->rank, svg, sizeof svg);
    fprintf(f, "[strata] memory over time: %zu samples every %g ms; peak resident %.1f MiB at "
               "%.2f s",
            mt->n, mt->interval_s * 1e3, (double)mt->rss[peak] / 1048576.0, mt->t[peak]);
    if (mt->heap)
        fprintf(f, ", peak heap %.1f MiB at %.2f s", (double)mt->heap[hpeak] / 1048576.0,
                mt->t[hpeak]);
    fprintf(f, " (%s for mprof plot, %s)\n", dat, svg);
}

/* What stack sampling lost, and why: always said. */
static void print_stack_notes(FILE *f, const st_model_stacks_t *st, int fold_failed)
{
    const struct {
        uint64_t n;
        const char *what;
    } counts[] = {
        {st->lost, "stack samples were lost (the sample buffers were full: "
                   "STRATA_TRACE_BUFFER_SIZE)"},
        {st->unreadable, "sampling periods found a Python stack that could not be read (a "
                         "thread entering or leaving a call) and are not counted"},
        {st->unnamed, "sampled frames are <unknown>: more code objects than the sampler's "
                      "table holds"},
        {st->delayed, "sampling periods passed while a thread blocked the signal and are not "
                      "counted (where it was is not known)"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (counts[i].n)
            fprintf(f, "[strata] %llu %s\n", (unsigned long long)counts[i].n, counts[i].what);
    if (st->left_out)
        fprintf(f, "[strata] %llu sampling periods (%.1f %%) fell only in code the filters leave "
                   "out (by default <module> and threading.py: STRATA_FUNCTION_EXCLUDE, "
                   "STRATA_MODULE_EXCLUDE) and have no row\n",
                (unsigned long long)st->left_out,
                st->periods ? 100.0 * (double)st->left_out / (double)st->periods : 0.0);
    if (st->note)
        fprintf(f, "[strata] stack sampling: %s\n", st->note);
    if (fold_failed)
        fprintf(f, "[strata] some stack samples could not be added up (out of memory, or the "
                   "spill file could not be read back)\n");
}

/* The files of the results that could not be written. */
typedef struct {
    int n;               /* how many */
    st_msg_t *first;     /* the first one's message (the caller's msg) */
    int first_rc;
    st_strbuf_t text;    /* a `strata: error:` line each */
} failures_t;

static void failed(failures_t *f, int rc, const st_msg_t *one)
{
    if (rc >= 0)
        return;
    if (f->n++ == 0) {
        f->first_rc = rc;
        if (f->first)
            *f->first = *one;
    }
    st_strbuf_printf(&f->text, "strata: error: %s\n", one->text);
}

/* " by rank N" under MPI, else "". */
static const char *rank_words(const st_session_t *s, char *buf, size_t size)
{
    if (!s->has_rank)
        return "";
    snprintf(buf, size, " by rank %u", s->rank);
    return buf;
}

int st_session_write(st_session_t *s, const double ns_per_tick[ST_NTIMERS],
                     const char *clock_name, FILE *tables, FILE *notes, st_msg_t *msg)
{
    size_t nthreads = s->rec.nthreads;
    st_model_thread_t *threads = calloc(nthreads ? nthreads : 1, sizeof *threads);
    if (!threads)
        return st_msg_set(msg, ST_ENOMEM, "out of memory writing results");
    uint64_t dropped = 0;
    for (size_t i = 0; i < nthreads; i++) {
        const st_rec_thread_t *th = s->rec.threads[i];
        threads[i].paths = &th->paths;
        threads[i].index = th->index;
        threads[i].tid = th->tid;
        threads[i].name = th->name;
        threads[i].has_rank = s->has_rank;
        threads[i].rank = s->rank;
        dropped += th->paths.dropped;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    st_model_t m = {
        .labels = &s->labels,
        .threads = threads,
        .nthreads = nthreads,
        .metrics = &s->rec.metrics,
        .settings = &s->settings,
        /* a run that only sampled stacks timed no call */
        .components = (s->stack_sampling || s->memory_stacks) && !s->timed ? 0 : s->components,
        .command = (const char *const *)s->command,
        .ncommand = s->ncommand,
        .clock_name = clock_name,
        .pid = (long)getpid(),
        .host = host,
        .start_ns = s->start_ns,
        .end_ns = st_clock_realtime_ns(),
        .dropped = dropped,
        .locs = &s->locs,
        .has_rank = s->has_rank,
        .rank = s->rank,
    };
    for (int i = 0; i < ST_NTIMERS; i++)
        m.ns_per_tick[i] = ns_per_tick[i];
    /* a followed tree: this process's children, from the tree's record */
    st_model_child_t *kids = NULL;
    if (*s->tree && !s->children_rec && st_tree_read(s->tree, &s->children_rec, &s->nrec) == 0 &&
        s->nrec && (kids = calloc(s->nrec, sizeof *kids))) {
        for (size_t i = 0; i < s->nrec; i++) {
            const st_tree_proc_t *r = &s->children_rec[i];
            if (r->parent == m.pid)
                kids[m.nchildren++] = (st_model_child_t){r->pid, r->parent, r->folder,
                                                         r->not_followed,
                                                         (const char *const *)r->command,
                                                         r->ncommand};
        }
        m.children = kids;
    }

    /* Every file is tried; each failure is kept for `notes`, the first for msg. */
    failures_t fail = {.n = 0, .first = msg, .first_rc = 0};
    st_strbuf_init(&fail.text);
    st_msg_t one;
    /* The collectors that ran flush first (the timeline: profile.json records what
     * writing it gave), then contribute to the model. */
    for (int i = 0; i < ST_NTIMERS; i++)
        s->ns_per_tick[i] = ns_per_tick[i];
    for (int i = 0; i < s->nran; i++)
        if (s->collectors[i].flush)
            failed(&fail, s->collectors[i].flush(&s->collectors[i], s, &one), &one);
    for (int i = 0; i < s->nran; i++)
        if (s->collectors[i].contribute)
            s->collectors[i].contribute(&s->collectors[i], s, &m);

    int precision = (int)st_settings_int(&s->settings, ST_S_PRECISION);
    unsigned formats = output_formats(&s->settings);
    int profile = st_settings_bool(&s->settings, ST_S_PROFILE);
    int text = (formats & (1u << ST_FMT_TEXT)) != 0;
    /* Every file is streamed as it is rendered, never built whole in memory, and
     * every one is tried: one that fails never stops the others. The terminal then
     * gets the tables copied from their files (or rendered straight to it when a
     * file was not asked for or could not be written). */
    int rc;
    char name[64], sampling_name[64], names[ST_NCOMPONENTS][64];
    int sampling_ok = 0, table_ok[ST_NCOMPONENTS] = {0};
    if (s->sampling) {
        st_session_file_name(s, "process_sampling", ".txt", sampling_name, sizeof sampling_name);
        rc = stream_file(s->outdir, sampling_name, render_sampling, &m, 0, &one);
        sampling_ok = rc == 0;
        failed(&fail, rc, &one);
    }
    for (int c = 0; c < ST_NCOMPONENTS && profile && text; c++) {
        if (!(s->components & (1u << c)))
            continue;
        const st_component_info_t *info = st_component_info((st_component_t)c);
        st_session_file_name(s, info->name, ".txt", names[c], sizeof names[c]);
        rc = stream_file(s->outdir, names[c], render_table, &m, c | precision << 8, &one);
        table_ok[c] = rc == 0;
        failed(&fail, rc, &one);
    }
    char samples_name[64];
    int samples_ok = 0, samples = s->stack_sampling && text;
    if (samples) {
        st_session_file_name(s, "samples", ".txt", samples_name, sizeof samples_name);
        rc = stream_file(s->outdir, samples_name, render_metric, &m, (int)s->rec.m_samples,
                         &one);
        samples_ok = rc == 0;
        failed(&fail, rc, &one);
    }
    char lines_name[64];
    int lines = samples && m.stacks && m.stacks->nlines;
    if (lines) {
        st_session_file_name(s, "sampled_lines", ".txt", lines_name, sizeof lines_name);
        failed(&fail, stream_file(s->outdir, lines_name, render_lines, &m, 0, &one), &one);
    }
    /* a table for each counter (perf:, papi:) and for MPI's bytes: self and total a
     * row */
    uint32_t extra[ST_SESSION_MAX_EXTRA];
    uint32_t nextra = extra_tables(s, extra);
    int metric_tables = (profile || s->memory_stacks) && text;
    char extra_names[ST_SESSION_MAX_EXTRA][96];
    int extra_ok[ST_SESSION_MAX_EXTRA] = {0};
    for (uint32_t i = 0; i < nextra && metric_tables; i++) {
        char base[64];
        st_metric_file_base(st_metrics_get(&s->rec.metrics, extra[i])->name, base, sizeof base);
        st_session_file_name(s, base, ".txt", extra_names[i], sizeof extra_names[i]);
        rc = stream_file(s->outdir, extra_names[i], render_metric, &m, (int)extra[i], &one);
        extra_ok[i] = rc == 0;
        failed(&fail, rc, &one);
    }
    /* the GPU's kernels and copies (CUPTI) */
    char gpu_names[2][64];
    int gpu_ok[2] = {0, 0};
    render_fn gpu_render[2] = {render_gpu_kernels, render_gpu_copies};
    st_session_file_name(s, "gpu_kernels", ".txt", gpu_names[0], sizeof gpu_names[0]);
    st_session_file_name(s, "gpu_memcpy", ".txt", gpu_names[1], sizeof gpu_names[1]);
    for (int k = 0; k < 2 && m.gpu && text; k++) {
        rc = stream_file(s->outdir, gpu_names[k], gpu_render[k], &m, 0, &one);
        gpu_ok[k] = rc == 0;
        failed(&fail, rc, &one);
    }
    if (formats & (1u << ST_FMT_JSON)) {
        st_format_file_name(ST_FMT_JSON, s->has_rank, s->rank, name, sizeof name);
        failed(&fail, stream_file(s->outdir, name, render_json, &m, 0, &one), &one);
    }
    /* The other formats asked for at run time (STRATA_OUTPUT_FORMATS), one at a time:
     * one that fails (Graphviz gone since the start) never stops the others, and each
     * failure is counted. */
    st_output_opts_t ro;
    st_output_opts_init(&ro);
    ro.precision = precision;
    ro.title = st_output_title(&m, *s->target ? s->target : NULL);
    const unsigned line_formats = 1u << ST_FMT_LINES | 1u << ST_FMT_LPROF | 1u << ST_FMT_MEMORY |
                                  1u << ST_FMT_MPROF | 1u << ST_FMT_MEMPLOT;
    for (int f = 0; f < ST_NFORMATS; f++)
        if (f != ST_FMT_TEXT && f != ST_FMT_JSON && !(line_formats & (1u << f)) &&
            (formats & (1u << f)))
            failed(&fail, st_formats_write_dir(&m, 1u << f, s->outdir, &ro, NULL, NULL, &one),
                   &one);
    /* Line profiles (--lines, --memory), whatever the formats: line_profiler's text
     * and .lprof, memory_profiler's text. */
    char lineprof_name[64], memprof_name[64];
    int lineprof_ok = 0;
    st_format_file_name(ST_FMT_LINES, s->has_rank, s->rank, lineprof_name, sizeof lineprof_name);
    st_format_file_name(ST_FMT_MEMORY, s->has_rank, s->rank, memprof_name, sizeof memprof_name);
    unsigned line_mask = st_formats_line_profiles(&m, 1u << ST_FMT_TEXT) & line_formats;
    char memlines_name[64];
    st_session_file_name(s, "memory_lines", ".txt", memlines_name, sizeof memlines_name);
    if (m.nmemlines && text)
        failed(&fail, stream_file(s->outdir, memlines_name, render_memlines, &m, 0, &one), &one);
    if (line_mask) {
        rc = st_formats_write_dir(&m, line_mask, s->outdir, &ro, NULL, NULL, &one);
        lineprof_ok = rc == 0;
        failed(&fail, rc, &one);
    }
    char shown[PATH_MAX];
    if (tables) {
        int first = 1;
        if (s->sampling) {
            if (sampling_ok)
                copy_file(tables, s->outdir, sampling_name, render_sampling, &m, 0);
            else
                render_to(tables, render_sampling, &m, 0);
            first = 0;
        }
        /* Tables too long for a terminal: the top functions, and where the rest is. */
        size_t bytes = 0;
        for (int c = 0; c < ST_NCOMPONENTS && profile; c++)
            if (s->components & (1u << c)) {
                size_t one_size = table_size(s->outdir, names[c], table_ok[c], render_table, &m,
                                             c | precision << 8);
                bytes = one_size > SIZE_MAX - bytes - 1 ? SIZE_MAX : bytes + one_size + 1;
            }
        for (uint32_t i = 0; i < nextra && metric_tables; i++) {
            size_t one_size = table_size(s->outdir, extra_names[i], extra_ok[i], render_metric,
                                         &m, (int)extra[i]);
            bytes = one_size > SIZE_MAX - bytes - 1 ? SIZE_MAX : bytes + one_size + 1;
        }
        if (bytes > ST_SUMMARY_TABLE_BYTES) {
            if (!first)
                fputc('\n', tables);
            print_summary(tables, s, &m, bytes, names, table_ok, precision);
        } else {
            for (int c = 0; c < ST_NCOMPONENTS && profile; c++) {
                if (!(s->components & (1u << c)))
                    continue;
                if (!first)
                    fputc('\n', tables);
                first = 0;
                if (table_ok[c])
                    copy_file(tables, s->outdir, names[c], render_table, &m, c | precision << 8);
                else
                    render_to(tables, render_table, &m, c | precision << 8);
            }
            for (uint32_t i = 0; i < nextra && metric_tables; i++) {
                int id = (int)extra[i];
                if (!first)
                    fputc('\n', tables);
                first = 0;
                if (extra_ok[i])
                    copy_file(tables, s->outdir, extra_names[i], render_metric, &m, id);
                else
                    render_to(tables, render_metric, &m, id);
            }
        }
        if (samples)
            print_samples(tables, s, &m, samples_name, samples_ok, first);
        /* the line profiles, as kernprof -l -v and python -m memory_profiler print them */
        if (line_mask & (1u << ST_FMT_LINES))
            print_table(tables, s, &m, lineprof_name, lineprof_ok, first && !samples,
                        render_lineprof, 0, "the line profile",
                        "`strata report --format lines` prints it");
        if (line_mask & (1u << ST_FMT_MEMORY))
            print_table(tables, s, &m, memprof_name, lineprof_ok, 0, render_memprof, 0,
                        "the memory profile", "`strata report --format memory` prints it");
        if (m.memtime && m.memtime->n)
            print_memtime(tables, s, m.memtime);
        if (m.nmemlines) { /* the ten lines holding the most (memory_lines.txt: all) */
            fputc('\n', tables);
            render_to(tables, render_memlines, &m, 10);
        }
        for (int k = 0; k < 2 && m.gpu; k++) {
            fputc('\n', tables);
            if (gpu_ok[k])
                copy_file(tables, s->outdir, gpu_names[k], gpu_render[k], &m, 0);
            else
                render_to(tables, gpu_render[k], &m, 0);
        }
        if (m.gpu)
            fprintf(tables, "[strata] GPU: %llu kernels, copies and sets; %llu (%.1f %%) tied to "
                            "the code that launched them; the GPU clock converted within "
                            "%.0f ns\n",
                    (unsigned long long)m.gpu->launches, (unsigned long long)m.gpu->attributed,
                    m.gpu->launches ? 100.0 * (double)m.gpu->attributed / (double)m.gpu->launches
                                    : 100.0,
                    m.gpu->clock_error_ns);
        if (fail.n == 0)
            fprintf(tables, "[strata] results in %s\n",
                    st_text_printable(shown, sizeof shown, s->outdir_shown));
        /* the tree's processes, but the run itself when it became a program (exec) */
        size_t followed = 0, others_n = 0;
        char others[48] = "";
        for (size_t i = 0; i < s->nrec; i++) {
            const st_tree_proc_t *r = &s->children_rec[i];
            followed += r->folder != NULL;
            others_n += !r->folder && r->pid != (long)getpid();
        }
        if (others_n)
            snprintf(others, sizeof others, "; %zu not followed", others_n);
        if (*s->tree && !s->tree_parent && followed + others_n)
            fprintf(tables, "[strata] %zu child process%s profiled, each into a folder "
                            "process-<pid> of the results%s (their tree in " TREE_RECORD
                            "; strata report shows it)\n",
                    followed, followed == 1 ? "" : "es", others);
        if (s->tracing)
            st_session_print_trace_summary(tables, NULL, s, s->trace_stats);
        if (s->sampling)
            fprintf(tables, "[strata] process sampling: %zu samples at %g per second; the sampler "
                            "used %.1f ms of CPU%s%s\n",
                    s->sampler.n, s->sampler.freq, (double)s->sampler.self_cpu_ns * 1e-6,
                    m.gpu_note ? "; " : "", m.gpu_note ? m.gpu_note : "");
        fflush(tables);
    }
    /* What was lost, and what could not be written: always said. */
    if (notes) {
        if (dropped)
            fprintf(notes, "[strata] %llu calls were not recorded (STRATA_MAX_NODES reached)\n",
                    (unsigned long long)dropped);
        if (s->tracing)
            st_session_print_trace_summary(NULL, notes, s, s->trace_stats);
        if (m.stacks)
            print_stack_notes(notes, m.stacks, s->stack_failed);
        if (m.gpu && m.gpu->dropped)
            fprintf(notes, "[strata] %llu GPU activity records were lost (CUPTI's buffers were "
                           "full, or the timeline's GPU slices passed their limit)\n",
                    (unsigned long long)m.gpu->dropped);
        if (s->sampling && s->sampler.failed)
            fprintf(notes, "[strata] process sampling stopped early: out of memory\n");
        if (fail.n) {
            fputs(st_strbuf_cstr(&fail.text), notes);
            fprintf(notes, "strata: error: %d file%s of the results could not be written%s; "
                           "what was written is in %s\n",
                    fail.n, fail.n == 1 ? "" : "s", rank_words(s, name, sizeof name),
                    st_text_printable(shown, sizeof shown, s->outdir_shown));
        }
        fflush(notes);
    }
    st_session_unmark(s);
    st_strbuf_free(&fail.text);
    free(kids);
    free(threads);
    s->written = fail.n == 0;
    return fail.first_rc;
}
