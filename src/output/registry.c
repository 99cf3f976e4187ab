#include "output/registry.h"

#include "base/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/components.h"
#include "model/merge.h"
#include "output/callgrind.h"
#include "output/dot.h"
#include "output/folded.h"
#include "output/gpu.h"
#include "output/html.h"
#include "output/json.h"
#include "output/lineprof.h"
#include "output/memtime.h"
#include "output/loadbal.h"
#include "output/mpisum.h"
#include "output/pstats.h"
#include "output/speedscope.h"
#include "output/table.h"

extern char **environ;

/* The registry itself, defined below with the render functions. */
static const st_output_format_t formats[ST_NFORMATS];

void st_output_opts_init(st_output_opts_t *o)
{
    memset(o, 0, sizeof *o);
    st_dot_opts_t d = ST_DOT_OPTS_DEFAULT;
    o->dot = d;
    o->precision = 6;
}

const char *st_output_title(const st_model_t *m, const char *fallback)
{
    /* `strata python [options] [--] script.py|-m module [args]`: the word after
     * "--", else after -m, else the first word that names a .py file */
    const char *const *c = m->command;
    size_t n = m->ncommand;
    for (size_t i = 2; i + 1 < n; i++) {
        if (strcmp(c[i], "--") == 0) {
            if (strcmp(c[i + 1], "-m") == 0)
                return i + 2 < n ? c[i + 2] : fallback;
            return c[i + 1];
        }
        if (strcmp(c[i], "-m") == 0)
            return c[i + 1];
    }
    static const char *const file_flags[] = {"-s", "--setup", "-c", "--config", "-o",
                                             "--output"};
    for (size_t i = 2; i < n; i++) {
        size_t len = strlen(c[i]);
        int flag_value = 0; /* the file of -s setup.py is not the script */
        for (size_t k = 0; k < sizeof file_flags / sizeof file_flags[0]; k++)
            flag_value |= strcmp(c[i - 1], file_flags[k]) == 0;
        if (!flag_value && len > 3 && strcmp(c[i] + len - 3, ".py") == 0)
            return c[i];
    }
    return n ? c[n - 1] : fallback;
}

int st_format_find(const char *name)
{
    for (int i = 0; i < ST_NFORMATS; i++)
        if (strcmp(formats[i].name, name) == 0)
            return i;
    return -1;
}

const char *st_format_name(st_format_t f) { return formats[f].name; }

int st_formats_parse(const char *list, unsigned *mask, st_msg_t *msg)
{
    *mask = 0;
    const char *seps = ", \t";
    for (const char *p = list; *p;) {
        p += strspn(p, seps);
        size_t n = strcspn(p, seps);
        if (n == 0)
            break;
        char word[64];
        int f = -1;
        if (n < sizeof word) {
            memcpy(word, p, n);
            word[n] = '\0';
            f = st_format_find(word);
        }
        if (f < 0) {
            char names[256] = "";
            for (int k = 0; k < ST_NFORMATS; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         k ? ", " : "", formats[k].name);
            return st_msg_set(msg, ST_EINVAL, "unknown format '%.*s' (choose from %s)",
                              (int)(n > 64 ? 64 : n), p, names);
        }
        *mask |= 1u << f;
        p += n;
    }
    if (!*mask)
        return st_msg_set(msg, ST_EINVAL, "no output format given");
    return 0;
}

void st_format_file_name(st_format_t f, int has_rank, uint32_t rank, char *buf, size_t size)
{
    const char *stem = formats[f].stem;
    if (has_rank)
        snprintf(buf, size, "%s-%u%s", stem, rank, formats[f].ext);
    else
        snprintf(buf, size, "%s%s", stem, formats[f].ext);
}

/* 1 if an executable `name` is found on PATH. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char full[PATH_MAX];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? p : ".", name) < (int)sizeof full) {
            struct stat st;
            if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
                return 1;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}

int st_formats_check_tools(unsigned mask, const char *what, st_msg_t *msg)
{
    for (int f = 0; f < ST_NFORMATS; f++)
        if ((mask & (1u << f)) && formats[f].tool && !on_path(formats[f].tool))
            return st_msg_set(msg, ST_EINVAL,
                              "%s: %s needs Graphviz's %s command, which is not on PATH "
                              "(apt-get install graphviz), or choose dot and render it later",
                              what, formats[f].name, formats[f].tool);
    return 0;
}

/* A converter strata runs on a text it made (Graphviz's dot on a graph, librsvg's
 * rsvg-convert on an SVG): argv[0] reads `in` on its standard input and writes the
 * image on its standard output, appended to `out`. `tool` names it in messages,
 * `missing` says what to do when it is not installed; `type` is what is made. */
typedef struct {
    char *const *argv;
    const char *tool, *missing, *type;
} converter_t;

static int run_converter(st_strbuf_t *out, const st_strbuf_t *graph, const converter_t *cv,
                         st_msg_t *msg)
{
    const char *tmpdir = getenv("TMPDIR");
    char in_path[PATH_MAX], err_path[PATH_MAX];
    if (!tmpdir || !*tmpdir)
        tmpdir = "/tmp";
    snprintf(in_path, sizeof in_path, "%s/strata-dot-XXXXXX", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/strata-dot-err-XXXXXX", tmpdir);
    int in_fd = mkstemp(in_path);
    if (in_fd < 0)
        return st_msg_set(msg, ST_EIO, "cannot make a temporary file in %s: %s", tmpdir,
                          strerror(errno));
    int err_fd = mkstemp(err_path);
    if (err_fd < 0) {
        int e = errno;
        close(in_fd);
        unlink(in_path);
        return st_msg_set(msg, ST_EIO, "cannot make a temporary file in %s: %s", tmpdir,
                          strerror(e));
    }
    int rc = 0;
    size_t off = 0;
    while (off < graph->len) {
        ssize_t w = write(in_fd, graph->data + off, graph->len - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            rc = st_msg_set(msg, ST_EIO, "cannot write a temporary file in %s", tmpdir);
            break;
        }
        off += (size_t)w;
    }
    int pipefd[2] = {-1, -1};
    if (rc == 0 && (lseek(in_fd, 0, SEEK_SET) != 0 || pipe(pipefd) != 0))
        rc = st_msg_set(msg, ST_EIO, "cannot run %s: %s", cv->tool, strerror(errno));
    pid_t pid = -1;
    if (rc == 0) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
        posix_spawn_file_actions_addclose(&fa, pipefd[0]);
        int e = posix_spawnp(&pid, cv->argv[0], &fa, NULL, cv->argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0)
            rc = e == ENOENT ? st_msg_set(msg, ST_EIO, "cannot make %s: %s", cv->type, cv->missing)
                             : st_msg_set(msg, ST_EIO, "cannot make %s: cannot run %s", cv->type,
                                          cv->tool);
    }
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (rc == 0) {
        char buf[65536];
        for (;;) {
            ssize_t r = read(pipefd[0], buf, sizeof buf);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            st_strbuf_add(out, buf, (size_t)r);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            char line[200] = "";
            FILE *ef = fopen(err_path, "r");
            if (ef) {
                if (!fgets(line, sizeof line, ef))
                    line[0] = '\0';
                fclose(ef);
            }
            line[strcspn(line, "\n")] = '\0';
            rc = st_msg_set(msg, ST_EIO, "%s failed to make %s%s%s", cv->tool, cv->type,
                            *line ? ": " : "", line);
        }
    }
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    close(in_fd);
    close(err_fd);
    unlink(in_path);
    unlink(err_path);
    return rc;
}

/* A table's number in `tables` and in a planned job: a component, or METRIC_TABLE
 * plus the metric's id. */
#define METRIC_TABLE 256

/* 1 when metric `id` of m has a table of its own: a count, bytes or samples metric
 * that m reports. */
static int has_table(const st_model_t *m, uint32_t id)
{
    const st_metric_def_t *d = m->metrics ? st_metrics_get(m->metrics, id) : NULL;
    return d && st_model_reports(m, id) &&
           (d->kind == ST_METRIC_COUNT || d->kind == ST_METRIC_BYTES ||
            d->kind == ST_METRIC_SAMPLES);
}

/* The tables of m, or only table `component` (>= 0), the ranks of m summed (for
 * the text tables of a multi-rank result). */
static int tables(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                  int component, st_msg_t *msg)
{
    const st_model_t *tm = m;
    st_profile_t summed;
    int have_summed = 0;
    if (st_model_count_ranks(m) > 1) {
        if (st_merge(&summed, &m, 1, ST_MERGE_SUM_RANKS, msg) < 0)
            return ST_ENOMEM;
        have_summed = 1;
        tm = &summed.model;
    }
    int first = 1;
    for (int c = 0; c < ST_NCOMPONENTS; c++) {
        if (!(tm->components & (1u << c)) || (component >= 0 && c != component))
            continue;
        if (!first)
            st_strbuf_putc(out, '\n');
        first = 0;
        st_table_write(out, tm, (st_component_t)c, o->precision);
    }
    for (uint32_t id = 0; m->metrics && id < m->metrics->n; id++) {
        if (!has_table(m, id) || (component >= 0 && component != METRIC_TABLE + (int)id))
            continue;
        /* the summed ranks' registry names the metric too, maybe with another id */
        uint32_t tid = st_metrics_find(tm->metrics, m->metrics->defs[id].name);
        if (tid == ST_METRIC_NONE)
            continue;
        if (!first)
            st_strbuf_putc(out, '\n');
        first = 0;
        if (st_table_write_metric(out, tm, tid) < 0)
            out->failed = 1;
    }
    if (have_summed)
        st_profile_free(&summed);
    return out->failed ? st_msg_set(msg, ST_ENOMEM, "out of memory") : 0;
}

/* The render functions of the registry: each writer behind the one signature. */

static int render_text(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                       st_msg_t *msg)
{
    int rc = tables(out, m, o, -1, msg);
    if (rc == 0 && st_model_count_ranks(m) > 1) {
        st_strbuf_putc(out, '\n');
        rc = st_loadbal_write(out, m, o->precision);
    }
    return rc;
}

static int render_json(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                       st_msg_t *msg)
{
    (void)o, (void)msg;
    st_json_write(out, m);
    return 0;
}

static int render_pstats(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                         st_msg_t *msg)
{
    (void)o, (void)msg;
    return st_pstats_write(out, m);
}

static int render_dot(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                      st_msg_t *msg)
{
    (void)msg;
    return st_dot_write(out, m, &o->dot);
}

/* The call graph through Graphviz's dot, as an image of `type`. */
static int render_image(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                        const char *type, st_msg_t *msg)
{
    st_strbuf_t graph;
    st_strbuf_init(&graph);
    int rc = st_dot_write(&graph, m, &o->dot);
    char targ[16];
    snprintf(targ, sizeof targ, "-T%s", type);
    char *argv[] = {"dot", targ, NULL};
    const converter_t dot = {argv, "Graphviz's dot",
                             "Graphviz's dot command is not installed (apt-get install graphviz), "
                             "or use --format dot",
                             type};
    if (rc == 0)
        rc = run_converter(out, &graph, &dot, msg);
    st_strbuf_free(&graph);
    return rc;
}

static int render_png(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                      st_msg_t *msg)
{
    return render_image(out, m, o, "png", msg);
}

static int render_svg(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                      st_msg_t *msg)
{
    return render_image(out, m, o, "svg", msg);
}

static int render_folded(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                         st_msg_t *msg)
{
    (void)o, (void)msg;
    return st_folded_write(out, m);
}

static int render_speedscope(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                             st_msg_t *msg)
{
    (void)msg;
    return st_speedscope_write(out, m, o->title);
}

static int render_callgrind(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                            st_msg_t *msg)
{
    (void)o, (void)msg;
    return st_callgrind_write(out, m);
}

static int render_lines(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                        st_msg_t *msg)
{
    (void)o, (void)msg;
    st_lineprof_text_write(out, m, 0);
    return 0;
}

static int render_lprof(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                        st_msg_t *msg)
{
    (void)o, (void)msg;
    st_lineprof_pickle_write(out, m);
    return 0;
}

static int render_memory(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                         st_msg_t *msg)
{
    (void)o, (void)msg;
    st_memprof_text_write(out, m);
    return 0;
}

static int render_mprof(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                        st_msg_t *msg)
{
    (void)o, (void)msg;
    st_mprof_write(out, m);
    return 0;
}

static int render_memplot(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                          st_msg_t *msg)
{
    (void)msg;
    st_memplot_write(out, m, o->title);
    return 0;
}

/* The plot as PNG: the SVG, drawn by librsvg's rsvg-convert (mprof plot's PNG). */
static int render_memplot_png(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                              st_msg_t *msg)
{
    st_strbuf_t svg;
    st_strbuf_init(&svg);
    st_memplot_write(&svg, m, o->title);
    char *argv[] = {"rsvg-convert", "--format", "png", "--background-color", "white", NULL};
    const converter_t rsvg = {argv, "librsvg's rsvg-convert",
                              "librsvg's rsvg-convert command is not installed (apt-get install "
                              "librsvg2-bin), or use --format memplot (SVG)",
                              "png"};
    int rc = svg.failed ? ST_ENOMEM : run_converter(out, &svg, &rsvg, msg);
    st_strbuf_free(&svg);
    return rc;
}

static int render_html(st_strbuf_t *out, const st_model_t *m, const st_output_opts_t *o,
                       st_msg_t *msg)
{
    (void)msg;
    return st_html_write(out, m, o->title);
}

/* The registry. Text's file name is the first component's (a results folder gets
 * one file per component: see plan()). */
static const st_output_format_t formats[ST_NFORMATS] = {
    [ST_FMT_TEXT] = {"text", "wall_clock", ".txt", render_text, NULL},
    [ST_FMT_JSON] = {"json", "profile", ".json", render_json, NULL},
    [ST_FMT_PSTATS] = {"pstats", "profile", ".prof", render_pstats, NULL},
    [ST_FMT_DOT] = {"dot", "callgraph", ".dot", render_dot, NULL},
    [ST_FMT_PNG] = {"png", "callgraph", ".png", render_png, "dot"},
    [ST_FMT_SVG] = {"svg", "callgraph", ".svg", render_svg, "dot"},
    [ST_FMT_FOLDED] = {"folded", "profile", ".folded", render_folded, NULL},
    [ST_FMT_SPEEDSCOPE] = {"speedscope", "profile", ".speedscope.json", render_speedscope, NULL},
    [ST_FMT_CALLGRIND] = {"callgrind", "callgrind.out", "", render_callgrind, NULL},
    [ST_FMT_HTML] = {"html", "report", ".html", render_html, NULL},
    [ST_FMT_LINES] = {"lines", "line_profile", ".txt", render_lines, NULL},
    [ST_FMT_LPROF] = {"lprof", "profile", ".lprof", render_lprof, NULL},
    [ST_FMT_MEMORY] = {"memory", "memory_profile", ".txt", render_memory, NULL},
    [ST_FMT_MPROF] = {"mprof", "mprofile", ".dat", render_mprof, NULL},
    [ST_FMT_MEMPLOT] = {"memplot", "memplot", ".svg", render_memplot, NULL},
    [ST_FMT_MEMPLOT_PNG] = {"memplot-png", "memplot", ".png", render_memplot_png, "rsvg-convert"},
};

const st_output_format_t *st_output_format(st_format_t f) { return &formats[f]; }

int st_format_render(st_strbuf_t *out, const st_model_t *m, st_format_t f,
                     const st_output_opts_t *o, st_msg_t *msg)
{
    if ((unsigned)f >= ST_NFORMATS)
        return st_msg_set(msg, ST_EINVAL, "unknown format");
    int rc = formats[f].render(out, m, o, msg);
    if (rc == 0 && out->failed)
        rc = ST_ENOMEM;
    if (rc == ST_ENOMEM)
        return st_msg_set(msg, ST_ENOMEM, "out of memory rendering %s", st_format_name(f));
    return rc;
}

int st_format_check_target(const char *path, const st_output_opts_t *o, st_msg_t *msg)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    for (size_t i = 0; i < o->ninputs; i++)
        if (o->inputs[i].dev == st.st_dev && o->inputs[i].ino == st.st_ino)
            return st_msg_set(msg, ST_EIO, "'%s' is an input: it is never written over (choose "
                                           "another -o)",
                              path);
    if (o->keep_existing)
        return st_msg_set(msg, ST_EIO, "'%s' already exists (use --force to replace it)", path);
    return 0;
}

/* One file of a results folder: a format, or one table (comp >= 0: a component,
 * or METRIC_TABLE + a metric), the load-balance table (comp == -2), the MPI
 * summary (comp == -3), or the GPU's kernel and copy tables (-4, -5). */
typedef struct {
    int f, comp;
    char name[128];
} job_t;

/* A metric table's file name without ".txt": the metric's name, characters other
 * than letters, digits, '_' and '-' made '_' (a name read from a file is data),
 * prefixed with "metric_" where it would be another table's (a component's,
 * load_balance) or is empty. */
void st_metric_file_base(const char *name, char *out, size_t size)
{
    char safe[sizeof ((st_metric_def_t *)0)->name];
    size_t n = 0;
    for (; name[n] && n + 1 < sizeof safe; n++) {
        char c = name[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
        safe[n] = ok ? c : '_';
    }
    safe[n] = '\0';
    int clash = n == 0 || st_component_find(safe) >= 0 || strcmp(safe, "load_balance") == 0;
    snprintf(out, size, "%s%s", clash ? "metric_" : "", safe);
}

unsigned st_formats_line_profiles(const st_model_t *m, unsigned mask)
{
    const unsigned timed = 1u << ST_FMT_LINES | 1u << ST_FMT_LPROF, memory = 1u << ST_FMT_MEMORY,
                   over_time = 1u << ST_FMT_MPROF | 1u << ST_FMT_MEMPLOT,
                   png = 1u << ST_FMT_MEMPLOT_PNG; /* asked for by name only */
    int has_time = m->nlfuncs && m->line_time, has_memory = m->nlfuncs && m->line_memory;
    int has_over_time = m->memtime != NULL;
    if (mask & (1u << ST_FMT_TEXT))
        mask |= (has_time ? timed : 0) | (has_memory ? memory : 0) |
                (has_over_time ? over_time : 0);
    return mask & ~(has_time ? 0 : timed) & ~(has_memory ? 0 : memory) &
           ~(has_over_time ? 0 : over_time | png);
}

/* A table's file name: base.txt, or base-RANK.txt for one rank's result. */
static void table_name(job_t *job, const char *base, const st_model_t *m)
{
    if (m->has_rank)
        snprintf(job->name, sizeof job->name, "%s-%u.txt", base, m->rank);
    else
        snprintf(job->name, sizeof job->name, "%s.txt", base);
}

static size_t plan(const st_model_t *m, unsigned mask, job_t *jobs)
{
    size_t n = 0;
    /* Line profiles go with the text tables: timings in both of line_profiler's
     * forms, memory in memory_profiler's; a profile without them has none. */
    mask = st_formats_line_profiles(m, mask);
    for (int f = 0; f < ST_NFORMATS; f++) {
        if (!(mask & (1u << f)))
            continue;
        if (f != ST_FMT_TEXT) {
            jobs[n].f = f;
            jobs[n].comp = -1;
            st_format_file_name((st_format_t)f, m->has_rank, m->rank, jobs[n].name,
                                sizeof jobs[n].name);
            n++;
            continue;
        }
        for (int c = 0; c < ST_NCOMPONENTS; c++) {
            if (!(m->components & (1u << c)))
                continue;
            jobs[n].f = f;
            jobs[n].comp = c;
            table_name(&jobs[n++], st_component_info((st_component_t)c)->name, m);
        }
        for (uint32_t id = 0; m->metrics && id < m->metrics->n; id++) {
            if (!has_table(m, id))
                continue;
            char base[64];
            st_metric_file_base(m->metrics->defs[id].name, base, sizeof base);
            jobs[n].f = f;
            jobs[n].comp = METRIC_TABLE + (int)id;
            table_name(&jobs[n++], base, m);
        }
        if (st_model_count_ranks(m) > 1) {
            jobs[n].f = f;
            jobs[n].comp = -2;
            snprintf(jobs[n].name, sizeof jobs[n].name, "load_balance.txt");
            n++;
        }
        if (st_mpisum_applies(m)) {
            jobs[n].f = f;
            jobs[n].comp = -3;
            snprintf(jobs[n].name, sizeof jobs[n].name, "mpi_summary.txt");
            n++;
        }
        for (int k = 0; m->gpu && k < 2; k++) { /* the GPU's kernels and copies */
            jobs[n].f = f;
            jobs[n].comp = -4 - k;
            table_name(&jobs[n++], k ? "gpu_memcpy" : "gpu_kernels", m);
        }
    }
    return n;
}

/* Streams one planned file into path. */
static int write_job(const st_model_t *m, const job_t *job, const char *path,
                     const st_output_opts_t *o, st_msg_t *msg)
{
    st_fs_out_t fo;
    int rc = st_fs_out_open(&fo, path, msg);
    if (rc < 0)
        return rc;
    if (job->comp >= 0)
        rc = tables(&fo.buf, m, o, job->comp, msg);
    else if (job->comp == -2)
        rc = st_loadbal_write(&fo.buf, m, o->precision) < 0
                 ? st_msg_set(msg, ST_ENOMEM, "out of memory")
                 : 0;
    else if (job->comp == -3)
        rc = st_mpisum_write(&fo.buf, m, o->precision) < 0
                 ? st_msg_set(msg, ST_ENOMEM, "out of memory")
                 : 0;
    else if (job->comp == -4)
        st_gpu_kernels_write(&fo.buf, m);
    else if (job->comp == -5)
        st_gpu_copies_write(&fo.buf, m);
    else
        rc = st_format_render(&fo.buf, m, (st_format_t)job->f, o, msg);
    if (rc < 0 && !fo.buf.sink_errno) { /* not a write that failed: commit says those */
        st_fs_out_abort(&fo);
        return rc;
    }
    return st_fs_out_commit(&fo, o->keep_existing ? ST_FS_KEEP : ST_FS_REPLACE, msg);
}

int st_formats_write_dir(const st_model_t *m, unsigned mask, const char *dir,
                         const st_output_opts_t *o, st_strbuf_t *written, st_strbuf_t *errors,
                         st_msg_t *msg)
{
    job_t jobs[ST_NFORMATS + ST_NCOMPONENTS + ST_MCOLS_MAX + 4];
    size_t n = plan(m, mask, jobs);
    char path[PATH_MAX];
    for (size_t j = 0; j < n; j++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, jobs[j].name) >= (int)sizeof path)
            return st_msg_set(msg, ST_EIO, "path too long in '%s'", dir);
        int rc = st_format_check_target(path, o, msg);
        if (rc < 0)
            return rc;
    }
    /* Every file is tried: one that fails (Graphviz's dot, a full disk) never stops
     * the others. */
    int first_rc = 0;
    for (size_t j = 0; j < n; j++) {
        snprintf(path, sizeof path, "%s/%s", dir, jobs[j].name);
        st_msg_t one;
        int rc = write_job(m, &jobs[j], path, o, &one);
        if (rc == 0 && written) {
            st_strbuf_printable(written, path);
            st_strbuf_putc(written, '\n');
        } else if (rc < 0) {
            if (first_rc == 0) {
                first_rc = rc;
                *msg = one;
            }
            if (errors)
                st_strbuf_printf(errors, "%s\n", one.text);
        }
    }
    return first_rc;
}
