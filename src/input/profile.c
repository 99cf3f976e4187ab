#include "input/profile.h"

#include "base/fsutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/components.h"
#include "base/u64map.h"
#include "input/jsonpull.h"
#include "model/version.h"

/* ------------------------------------------------------------------ parsing */

/* What one node's record holds, cell by cell of the profile's registry. */
typedef struct {
    uint64_t count;
    uint32_t have;                  /* bit id: the record has metric id */
    st_tstat_t timer[ST_MCOLS_MAX];
    double mean[ST_MCOLS_MAX], var[ST_MCOLS_MAX];
    uint32_t have_min;              /* bit id: the timer had a "min" */
    uint64_t u64[ST_MCOLS_MAX];
    st_gauge_t gauge[ST_MCOLS_MAX];
} cells_t;

typedef struct {
    st_jp_t jp;
    st_profile_t *p;
    st_strbuf_t key, str;
    int64_t version;
    int have_version, have_threads, have_components;
    unsigned components;    /* from "components" */
    unsigned timers_seen;   /* timer components found on nodes */
    /* node -> index in the file's "functions", per thread (resolved at the end) */
    uint32_t **node_fn;
    uint32_t *fn_map;       /* the file's function index -> loctab id */
    uint32_t nfns;
    int have_rank;
    uint32_t rank;
    uint32_t nranks, nruns;
    cells_t cells;          /* the node being read */
} reader_t;

#define FAIL(r, ...) st_jp_fail(&(r)->jp, __VA_ARGS__)

static int read_string_dup(reader_t *r, char **out)
{
    free(*out);
    *out = NULL;
    return st_jp_string_dup(&r->jp, &r->str, out);
}

static int read_command(reader_t *r)
{
    return st_jp_strings(&r->jp, &r->str, &r->p->command, &r->p->ncommand);
}

static int read_metadata(reader_t *r)
{
    st_model_t *m = &r->p->model;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        uint64_t u;
        int64_t i;
        int rc;
        if (strcmp(k, "command") == 0) {
            rc = read_command(r);
        } else if (strcmp(k, "python_version") == 0) {
            rc = read_string_dup(r, &r->p->python_version);
        } else if (strcmp(k, "host") == 0) {
            rc = read_string_dup(r, &r->p->host);
        } else if (strcmp(k, "clock") == 0) {
            rc = read_string_dup(r, &r->p->clock_name);
        } else if (strcmp(k, "pid") == 0) {
            rc = st_jp_int(&r->jp, -1, INT32_MAX, &i);
            m->pid = (long)i;
        } else if (strcmp(k, "start_time_ns") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &m->start_ns);
        } else if (strcmp(k, "end_time_ns") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &m->end_ns);
        } else if (strcmp(k, "dropped_calls") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &m->dropped);
        } else if (strcmp(k, "rank") == 0) {
            rc = st_jp_uint(&r->jp, INT32_MAX, &u);
            r->have_rank = 1;
            r->rank = (uint32_t)u;
        } else if (strcmp(k, "ranks") == 0) {
            rc = st_jp_uint(&r->jp, INT32_MAX, &u);
            r->nranks = (uint32_t)u;
        } else if (strcmp(k, "merged_runs") == 0) {
            rc = st_jp_uint(&r->jp, INT32_MAX, &u);
            r->nruns = (uint32_t)u;
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    return more;
}

static int read_settings(reader_t *r)
{
    st_profile_t *p = r->p;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    st_strbuf_t value, source;
    st_strbuf_init(&value);
    st_strbuf_init(&source);
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        int id = st_setting_find(st_strbuf_cstr(&r->key));
        if (st_jp_obj_begin(&r->jp) < 0)
            break;
        int have_value = 0, m2;
        st_strbuf_reset(&source);
        while ((m2 = st_jp_obj_next(&r->jp, &r->str)) > 0) {
            const char *k = st_strbuf_cstr(&r->str);
            if (strcmp(k, "value") == 0 && st_jp_peek(&r->jp) == ST_JV_STRING) {
                if (st_jp_string(&r->jp, &value) < 0)
                    break;
                have_value = 1;
            } else if (strcmp(k, "source") == 0 && st_jp_peek(&r->jp) == ST_JV_STRING) {
                if (st_jp_string(&r->jp, &source) < 0)
                    break;
            } else if (st_jp_skip(&r->jp) < 0) {
                break;
            }
        }
        if (m2 < 0) {
            more = -1;
            break;
        }
        if (id >= 0 && have_value) {
            st_source_t src = ST_SRC_DEFAULT;
            for (int s = ST_SRC_DEFAULT; s <= ST_SRC_API; s++)
                if (strcmp(st_strbuf_cstr(&source), st_source_name((st_source_t)s)) == 0)
                    src = (st_source_t)s;
            /* A value this strata does not accept (another version's) keeps the
             * default: settings are informative here, never used to run. */
            st_msg_t ignored;
            st_settings_set(&p->settings, (st_setting_id_t)id, st_strbuf_cstr(&value), src,
                            &ignored);
        }
    }
    st_strbuf_free(&value);
    st_strbuf_free(&source);
    return more;
}

static int read_components(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    r->have_components = 1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        if (st_jp_obj_begin(&r->jp) < 0)
            return -1;
        int m2;
        while ((m2 = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            if (strcmp(st_strbuf_cstr(&r->key), "name") == 0) {
                if (st_jp_string(&r->jp, &r->str) < 0)
                    return -1;
                int c = st_component_find(st_strbuf_cstr(&r->str));
                if (c >= 0)
                    r->components |= 1u << c;
            } else if (st_jp_skip(&r->jp) < 0) {
                return -1;
            }
        }
        if (m2 < 0)
            return -1;
    }
    return more;
}

/* "trace": what the run's timeline held and lost. */
static int read_trace(reader_t *r)
{
    st_model_t *m = &r->p->model;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    m->has_trace = 1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc = strcmp(k, "events") == 0  ? st_jp_uint(&r->jp, UINT64_MAX, &m->trace_events)
                 : strcmp(k, "bytes") == 0 ? st_jp_uint(&r->jp, UINT64_MAX, &m->trace_bytes)
                 : strcmp(k, "dropped_calls") == 0
                     ? st_jp_uint(&r->jp, UINT64_MAX, &m->trace_dropped)
                 : strcmp(k, "too_deep_calls") == 0
                     ? st_jp_uint(&r->jp, UINT64_MAX, &m->trace_too_deep)
                 : strcmp(k, "write_seconds") == 0 ? st_jp_double(&r->jp, &m->trace_write_s)
                                                   : st_jp_skip(&r->jp);
        if (rc < 0)
            return -1;
    }
    return more;
}

/* One summary of "process_sampling.metrics": {"name", "units", "min", "mean", "max"}. */
static int read_sampled(reader_t *r)
{
    st_profile_t *p = r->p;
    st_model_metric_t *a = realloc(p->sampled, (p->nsampled + 1) * sizeof *a);
    if (!a)
        return FAIL(r, "out of memory");
    p->sampled = a;
    st_model_metric_t *x = &a[p->nsampled];
    memset(x, 0, sizeof *x);
    char *name = NULL, *units = NULL;
    int rc = st_jp_obj_begin(&r->jp), more = 0;
    while (rc == 0 && (more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        rc = strcmp(k, "name") == 0    ? read_string_dup(r, &name)
             : strcmp(k, "units") == 0 ? read_string_dup(r, &units)
             : strcmp(k, "min") == 0   ? st_jp_double(&r->jp, &x->min)
             : strcmp(k, "mean") == 0  ? st_jp_double(&r->jp, &x->mean)
             : strcmp(k, "max") == 0   ? st_jp_double(&r->jp, &x->max)
                                       : st_jp_skip(&r->jp);
    }
    if (rc == 0 && more == 0 && !name)
        rc = FAIL(r, "a sampled metric without a name");
    if (rc < 0 || more < 0) {
        free(name);
        free(units);
        return -1;
    }
    if (!units && !(units = strdup(""))) {
        free(name);
        return FAIL(r, "out of memory");
    }
    x->name = name;
    x->units = units;
    p->nsampled++;
    return 0;
}

/* "lines": the sampled lines, [{"function", "file", "line", "periods"}...]. */
static int read_lines(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int more;
    char *function = NULL, *file = NULL;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        uint64_t line = 0, periods = 0;
        free(function);
        free(file);
        function = file = NULL;
        if (st_jp_obj_begin(&r->jp) < 0)
            break;
        int in, rc = 0;
        while (rc == 0 && (in = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            const char *k = st_strbuf_cstr(&r->key);
            if (strcmp(k, "function") == 0)
                rc = read_string_dup(r, &function);
            else if (strcmp(k, "file") == 0)
                rc = read_string_dup(r, &file);
            else if (strcmp(k, "line") == 0)
                rc = st_jp_uint(&r->jp, UINT32_MAX, &line) < 0 ? -1 : 0;
            else if (strcmp(k, "periods") == 0)
                rc = st_jp_uint(&r->jp, UINT64_MAX, &periods) < 0 ? -1 : 0;
            else
                rc = st_jp_skip(&r->jp);
        }
        if (rc < 0 || in < 0) {
            more = -1;
            break;
        }
        if (!function || !file) {
            more = FAIL(r, "a sampled line without its function or file");
            break;
        }
        if (st_profile_add_line(r->p, function, file, (uint32_t)line, periods) < 0) {
            more = FAIL(r, "out of memory");
            break;
        }
    }
    free(function);
    free(file);
    if (more == 0)
        st_profile_lines_done(r->p);
    return more < 0 ? -1 : 0;
}

/* One function's "lines": [[line, hits, ns], ...] or, with memory, [[line, hits,
 * ns, occurrences, increment, memory], ...] into f's rows (ascending). */
static int read_lrows(reader_t *r, st_model_lfunc_t *f, size_t *cap)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        uint64_t v[4] = {0, 0, 0, 0};
        int64_t signed_v[2] = {0, 0};
        if (st_jp_arr_begin(&r->jp) < 0)
            return -1;
        int i = 0, in;
        while ((in = st_jp_arr_next(&r->jp)) > 0) {
            if (i == 6)
                return FAIL(r, "a profiled line with more than 6 numbers");
            int rc = i < 4 ? st_jp_uint(&r->jp, i == 0 ? UINT32_MAX : UINT64_MAX, &v[i])
                           : st_jp_int(&r->jp, INT64_MIN, INT64_MAX, &signed_v[i - 4]);
            if (rc < 0)
                return -1;
            i++;
        }
        if (in < 0)
            return -1;
        if (i != 3 && i != 6)
            return FAIL(r, "a profiled line without [line, hits, ns] or [line, hits, ns, "
                           "occurrences, increment, memory]");
        if (f->nrows && v[0] <= f->rows[f->nrows - 1].line)
            return FAIL(r, "profiled lines out of order");
        if (f->nrows == *cap) {
            size_t c = *cap ? 2 * *cap : 16;
            st_model_lrow_t *rows = realloc((void *)f->rows, c * sizeof *rows);
            if (!rows)
                return FAIL(r, "out of memory");
            f->rows = rows;
            *cap = c;
        }
        ((st_model_lrow_t *)f->rows)[f->nrows++] =
            (st_model_lrow_t){(uint32_t)v[0], v[1], v[2], v[3], signed_v[0], signed_v[1]};
    }
    return more;
}

/* One function's "source": null, or its block's lines. */
static int read_lsource(reader_t *r, st_model_lfunc_t *f)
{
    if (st_jp_peek(&r->jp) == ST_JV_NULL)
        return st_jp_skip(&r->jp);
    char **src = NULL;
    int rc = st_jp_strings(&r->jp, &r->str, &src, &f->nsource);
    if (!src && !(src = calloc(1, sizeof *src))) /* not NULL: found, if empty */
        rc = FAIL(r, "out of memory");
    f->source = (const char *const *)src;
    return rc;
}

/* "line_timings": [{"function", "file", "first_line", "lines", "source"}...]. */
static int read_line_timings(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        st_model_lfunc_t f = {0};
        size_t cap = 0;
        uint64_t first = 0;
        int in, rc = st_jp_obj_begin(&r->jp);
        while (rc == 0 && (in = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            const char *k = st_strbuf_cstr(&r->key);
            if (strcmp(k, "function") == 0 && !f.function)
                rc = read_string_dup(r, (char **)&f.function);
            else if (strcmp(k, "file") == 0 && !f.file)
                rc = read_string_dup(r, (char **)&f.file);
            else if (strcmp(k, "first_line") == 0)
                rc = st_jp_uint(&r->jp, UINT32_MAX, &first);
            else if (strcmp(k, "lines") == 0 && !f.nrows)
                rc = read_lrows(r, &f, &cap);
            else if (strcmp(k, "source") == 0 && !f.source)
                rc = read_lsource(r, &f);
            else
                rc = st_jp_skip(&r->jp);
        }
        if (rc == 0 && in < 0)
            rc = -1;
        if (rc == 0 && (!f.function || !f.file))
            rc = FAIL(r, "a function's line timings without its function or file");
        f.first_line = (uint32_t)first;
        if (rc == 0 && st_profile_add_lfunc(r->p, &f) < 0)
            rc = FAIL(r, "out of memory");
        st_profile_lfunc_free(&f);
        if (rc < 0)
            return -1;
    }
    return more < 0 ? -1 : 0;
}

/* A growing array of n values of `size` bytes (memory over time). */
typedef struct {
    void *v;
    size_t n, cap;
} grow_t;

static void *grow_slot(grow_t *g, size_t size)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        void *v = realloc(g->v, cap * size);
        if (!v)
            return NULL;
        g->v = v;
        g->cap = cap;
    }
    return (char *)g->v + size * g->n++;
}

/* A JSON array of numbers into g: doubles (is_double) or int64s. */
static int read_numbers(reader_t *r, grow_t *g, int is_double)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        void *slot = grow_slot(g, is_double ? sizeof(double) : sizeof(int64_t));
        if (!slot)
            return FAIL(r, "out of memory");
        if ((is_double ? st_jp_double(&r->jp, slot)
                       : st_jp_int(&r->jp, INT64_MIN, INT64_MAX, slot)) < 0)
            return -1;
    }
    return more;
}

/* One call: ["f", t0, m0, t1, m1, level]. */
static int read_memcall(reader_t *r, grow_t *calls)
{
    st_model_memcall_t *c = grow_slot(calls, sizeof *c);
    if (!c)
        return FAIL(r, "out of memory");
    memset(c, 0, sizeof *c);
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int i = 0, in, rc = 0;
    while (rc == 0 && (in = st_jp_arr_next(&r->jp)) > 0) {
        int64_t v;
        uint64_t level;
        switch (i++) {
        case 0: rc = read_string_dup(r, (char **)&c->function); break;
        case 1: rc = st_jp_double(&r->jp, &c->t0); break;
        case 2: rc = st_jp_int(&r->jp, INT64_MIN, INT64_MAX, &v), c->m0 = v; break;
        case 3: rc = st_jp_double(&r->jp, &c->t1); break;
        case 4: rc = st_jp_int(&r->jp, INT64_MIN, INT64_MAX, &v), c->m1 = v; break;
        case 5: rc = st_jp_uint(&r->jp, UINT32_MAX, &level), c->level = (uint32_t)level; break;
        default: rc = FAIL(r, "a call of memory_over_time with more than 6 fields");
        }
    }
    if (rc == 0 && in < 0)
        rc = -1;
    if (rc == 0 && (i != 6 || !c->function))
        rc = FAIL(r, "a call of memory_over_time is [function, t0, m0, t1, m1, level]");
    return rc;
}

/* "memory_over_time": {"interval_s", "t", "resident", "heap", "calls", "calls_dropped"}. */
static int read_memtime(reader_t *r)
{
    st_model_memtime_t mt = {0};
    grow_t t = {0}, rss = {0}, heap = {0}, calls = {0};
    int have_heap = 0, rc = st_jp_obj_begin(&r->jp), in = 0;
    while (rc == 0 && (in = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        if (strcmp(k, "interval_s") == 0) {
            rc = st_jp_double(&r->jp, &mt.interval_s);
        } else if (strcmp(k, "t") == 0 && !t.n) {
            rc = read_numbers(r, &t, 1);
        } else if (strcmp(k, "resident") == 0 && !rss.n) {
            rc = read_numbers(r, &rss, 0);
        } else if (strcmp(k, "heap") == 0 && !have_heap) {
            have_heap = st_jp_peek(&r->jp) != ST_JV_NULL;
            rc = have_heap ? read_numbers(r, &heap, 0) : st_jp_skip(&r->jp);
        } else if (strcmp(k, "calls") == 0 && !calls.n) {
            rc = st_jp_arr_begin(&r->jp);
            int more = 0;
            while (rc == 0 && (more = st_jp_arr_next(&r->jp)) > 0)
                rc = read_memcall(r, &calls);
            if (rc == 0 && more < 0)
                rc = -1;
        } else if (strcmp(k, "calls_dropped") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &mt.calls_dropped);
        } else {
            rc = st_jp_skip(&r->jp);
        }
    }
    if (rc == 0 && in < 0)
        rc = -1;
    if (rc == 0 && (t.n != rss.n || (have_heap && heap.n != t.n)))
        rc = FAIL(r, "memory_over_time: t, resident and heap differ in length");
    if (rc == 0) {
        mt.n = t.n;
        mt.t = t.v;
        mt.rss = rss.v;
        mt.heap = have_heap ? heap.v : NULL;
        mt.calls = calls.v;
        mt.ncalls = calls.n;
        if (st_profile_set_memtime(r->p, &mt) < 0)
            rc = FAIL(r, "out of memory");
    }
    for (size_t i = 0; i < calls.n; i++)
        free((char *)((st_model_memcall_t *)calls.v)[i].function);
    free(t.v);
    free(rss.v);
    free(heap.v);
    free(calls.v);
    return rc < 0 ? -1 : 0;
}

/* "memory_lines": [{"function", "file", "line", "peak", "exit"}...]. */
static int read_memlines(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0) {
        st_model_memline_t l = {0};
        uint64_t line = 0;
        int in, rc = st_jp_obj_begin(&r->jp);
        while (rc == 0 && (in = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            const char *k = st_strbuf_cstr(&r->key);
            if (strcmp(k, "function") == 0 && !l.function)
                rc = read_string_dup(r, (char **)&l.function);
            else if (strcmp(k, "file") == 0 && !l.file)
                rc = read_string_dup(r, (char **)&l.file);
            else if (strcmp(k, "line") == 0)
                rc = st_jp_uint(&r->jp, UINT32_MAX, &line);
            else if (strcmp(k, "peak") == 0)
                rc = st_jp_uint(&r->jp, UINT64_MAX, &l.peak);
            else if (strcmp(k, "exit") == 0)
                rc = st_jp_uint(&r->jp, UINT64_MAX, &l.at_exit);
            else
                rc = st_jp_skip(&r->jp);
        }
        if (rc == 0 && in < 0)
            rc = -1;
        if (rc == 0 && (!l.function || !l.file))
            rc = FAIL(r, "a line of memory_lines without its function or file");
        l.line = (uint32_t)line;
        if (rc == 0 && st_profile_add_memline(r->p, &l) < 0)
            rc = FAIL(r, "out of memory");
        free((char *)l.function);
        free((char *)l.file);
        if (rc < 0)
            return -1;
    }
    if (more == 0)
        st_profile_memlines_done(r->p);
    return more < 0 ? -1 : 0;
}

/* "stack_sampling": what the stack sampler did. */
static int read_stacks(reader_t *r)
{
    st_model_stacks_t *st = &r->p->stacks;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        struct {
            const char *name;
            uint64_t *v;
        } counts[] = {{"threads", &st->threads},       {"samples", &st->signals},
                      {"periods", &st->periods},       {"promised_periods", &st->promised},
                      {"lost", &st->lost},
                      {"unreadable", &st->unreadable}, {"no_python", &st->no_python},
                      {"unnamed_frames", &st->unnamed}, {"left_out", &st->left_out},
                      {"delayed", &st->delayed}};
        int rc = 1;
        for (size_t i = 0; i < sizeof counts / sizeof counts[0] && rc == 1; i++)
            if (strcmp(k, counts[i].name) == 0)
                rc = st_jp_uint(&r->jp, UINT64_MAX, counts[i].v);
        if (rc != 1) {
            /* a count, read */
        } else if (strcmp(k, "frequency") == 0) {
            rc = st_jp_double(&r->jp, &st->freq);
        } else if (strcmp(k, "sampler_cpu_s") == 0) {
            rc = st_jp_double(&r->jp, &st->self_cpu_s);
        } else if (strcmp(k, "threads_rated") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &st->rated);
        } else if (strcmp(k, "rate_min") == 0) {
            rc = st_jp_double(&r->jp, &st->rate_min);
        } else if (strcmp(k, "rate_max") == 0) {
            rc = st_jp_double(&r->jp, &st->rate_max);
        } else if (strcmp(k, "period_rate_min") == 0) {
            rc = st_jp_double(&r->jp, &st->prate_min);
        } else if (strcmp(k, "period_rate_max") == 0) {
            rc = st_jp_double(&r->jp, &st->prate_max);
        } else if (strcmp(k, "lines") == 0) {
            rc = read_lines(r);
        } else if (strcmp(k, "clock") == 0) {
            char *clock = NULL;
            rc = read_string_dup(r, &clock);
            if (rc == 0) {
                snprintf(r->p->stacks_clock, sizeof r->p->stacks_clock, "%s", clock);
                free(clock);
            }
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    if (more < 0)
        return -1;
    r->p->has_stacks = 1;
    return 0;
}

/* "process_sampling": the run's sampler, and each metric it sampled, summarised. */
static int read_sampling(reader_t *r)
{
    st_model_t *m = &r->p->model;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc;
        if (strcmp(k, "frequency") == 0) {
            rc = st_jp_double(&r->jp, &m->sampling_freq);
        } else if (strcmp(k, "samples") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &m->nsamples);
        } else if (strcmp(k, "sampler_cpu_s") == 0) {
            rc = st_jp_double(&r->jp, &m->sampler_cpu_s);
        } else if (strcmp(k, "gpu_note") == 0) {
            rc = st_jp_peek(&r->jp) == ST_JV_NULL ? st_jp_skip(&r->jp)
                                                  : read_string_dup(r, &r->p->gpu_note);
        } else if (strcmp(k, "metrics") == 0) {
            rc = st_jp_arr_begin(&r->jp);
            int m2 = 0;
            while (rc == 0 && (m2 = st_jp_arr_next(&r->jp)) > 0)
                rc = read_sampled(r);
            if (m2 < 0)
                rc = -1;
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    return more;
}

/* One of "gpu.kernels": {"name", "count", "total_ns", "mean_ns", "min_ns", "max_ns",
 * "stddev_ns"}. */
static int read_kernel(reader_t *r)
{
    st_profile_t *p = r->p;
    st_model_kernel_t *a = realloc(p->kernels, (p->gpu.nkernels + 1) * sizeof *a);
    if (!a)
        return FAIL(r, "out of memory");
    p->kernels = a;
    st_model_kernel_t *x = &a[p->gpu.nkernels];
    memset(x, 0, sizeof *x);
    char *name = NULL;
    int rc = st_jp_obj_begin(&r->jp), more = 0;
    while (rc == 0 && (more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        rc = strcmp(k, "name") == 0        ? read_string_dup(r, &name)
             : strcmp(k, "count") == 0     ? st_jp_uint(&r->jp, UINT64_MAX, &x->count)
             : strcmp(k, "total_ns") == 0  ? st_jp_uint(&r->jp, UINT64_MAX, &x->total_ns)
             : strcmp(k, "min_ns") == 0    ? st_jp_uint(&r->jp, UINT64_MAX, &x->min_ns)
             : strcmp(k, "max_ns") == 0    ? st_jp_uint(&r->jp, UINT64_MAX, &x->max_ns)
             : strcmp(k, "mean_ns") == 0   ? st_jp_double(&r->jp, &x->mean_ns)
             : strcmp(k, "stddev_ns") == 0 ? st_jp_double(&r->jp, &x->stddev_ns)
                                           : st_jp_skip(&r->jp);
    }
    if (rc == 0 && more == 0 && !name)
        rc = FAIL(r, "a GPU kernel without a name");
    if (rc < 0 || more < 0) {
        free(name);
        return -1;
    }
    x->name = name;
    p->gpu.nkernels++;
    return 0;
}

/* One of "gpu.copies": {"direction", "count", "bytes", "total_ns"}. */
static int read_copy(reader_t *r)
{
    st_profile_t *p = r->p;
    st_model_copy_t *a = realloc(p->copies, (p->gpu.ncopies + 1) * sizeof *a);
    if (!a)
        return FAIL(r, "out of memory");
    p->copies = a;
    st_model_copy_t *x = &a[p->gpu.ncopies];
    memset(x, 0, sizeof *x);
    char *direction = NULL;
    int rc = st_jp_obj_begin(&r->jp), more = 0;
    while (rc == 0 && (more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        rc = strcmp(k, "direction") == 0  ? read_string_dup(r, &direction)
             : strcmp(k, "count") == 0    ? st_jp_uint(&r->jp, UINT64_MAX, &x->count)
             : strcmp(k, "bytes") == 0    ? st_jp_uint(&r->jp, UINT64_MAX, &x->bytes)
             : strcmp(k, "total_ns") == 0 ? st_jp_uint(&r->jp, UINT64_MAX, &x->total_ns)
                                          : st_jp_skip(&r->jp);
    }
    if (rc == 0 && more == 0 && !direction)
        rc = FAIL(r, "a GPU copy without its direction");
    if (rc < 0 || more < 0) {
        free(direction);
        return -1;
    }
    x->direction = direction;
    p->gpu.ncopies++;
    return 0;
}

/* "gpu": what CUPTI recorded (the kernel and copy tables). */
static int read_gpu(reader_t *r)
{
    st_model_gpu_t *g = &r->p->gpu;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    r->p->has_gpu = 1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc, m2 = 0;
        if (strcmp(k, "library") == 0) {
            char *lib = NULL;
            rc = read_string_dup(r, &lib);
            if (rc == 0) {
                free((char *)g->library);
                g->library = lib;
            }
        } else if (strcmp(k, "activities") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &g->launches);
        } else if (strcmp(k, "attributed") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &g->attributed);
        } else if (strcmp(k, "dropped") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &g->dropped);
        } else if (strcmp(k, "clock_error_ns") == 0) {
            rc = st_jp_double(&r->jp, &g->clock_error_ns);
        } else if (strcmp(k, "kernels") == 0 || strcmp(k, "copies") == 0) {
            int kernels = k[0] == 'k';
            rc = st_jp_arr_begin(&r->jp);
            while (rc == 0 && (m2 = st_jp_arr_next(&r->jp)) > 0)
                rc = kernels ? read_kernel(r) : read_copy(r);
            if (m2 < 0)
                rc = -1;
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    return more;
}

/* The registry (format_version 2): [{"name", "unit", "kind", "description"}, ...],
 * each metric registered in the profile (the timers it has already are found). */
static int read_metrics(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    st_strbuf_t name, unit, desc;
    st_strbuf_init(&name);
    st_strbuf_init(&unit);
    st_strbuf_init(&desc);
    int more, rc = 0;
    while (rc == 0 && (more = st_jp_arr_next(&r->jp)) > 0) {
        st_strbuf_reset(&name);
        st_strbuf_reset(&unit);
        st_strbuf_reset(&desc);
        int kind = -1, m2;
        if (st_jp_obj_begin(&r->jp) < 0) {
            rc = -1;
            break;
        }
        while (rc == 0 && (m2 = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            const char *k = st_strbuf_cstr(&r->key);
            if (strcmp(k, "name") == 0)
                rc = st_jp_string(&r->jp, &name);
            else if (strcmp(k, "unit") == 0)
                rc = st_jp_string(&r->jp, &unit);
            else if (strcmp(k, "description") == 0)
                rc = st_jp_string(&r->jp, &desc);
            else if (strcmp(k, "kind") == 0) {
                rc = st_jp_string(&r->jp, &r->str);
                kind = rc == 0 ? st_metric_kind_find(st_strbuf_cstr(&r->str)) : -1;
                if (rc == 0 && kind < 0)
                    rc = FAIL(r, "a metric of unknown kind \"%s\"", st_strbuf_cstr(&r->str));
            } else
                rc = st_jp_skip(&r->jp);
        }
        if (rc < 0 || m2 < 0) {
            rc = -1;
            break;
        }
        if (kind < 0 || name.len == 0) {
            rc = FAIL(r, "a metric without %s", kind < 0 ? "a kind" : "a name");
            break;
        }
        uint32_t id;
        int added = st_profile_add_metric(r->p, st_strbuf_cstr(&name), st_strbuf_cstr(&unit),
                                          st_strbuf_cstr(&desc), (st_metric_kind_t)kind, &id);
        if (added == ST_ENOMEM)
            rc = FAIL(r, "out of memory");
        else if (added < 0)
            rc = FAIL(r, "metric \"%s\": a name too long, registered with another kind, or "
                         "more than %d metrics", st_strbuf_cstr(&name), ST_MCOLS_MAX);
    }
    if (name.failed || unit.failed || desc.failed)
        rc = FAIL(r, "out of memory");
    st_strbuf_free(&name);
    st_strbuf_free(&unit);
    st_strbuf_free(&desc);
    return rc < 0 ? -1 : more;
}

static int read_functions(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    st_strbuf_t file;
    st_strbuf_init(&file);
    int more = 0, rc = 0;
    uint32_t cap = 0;
    while (rc == 0 && (more = st_jp_arr_next(&r->jp)) > 0) {
        if (st_jp_obj_begin(&r->jp) < 0) {
            rc = -1;
            break;
        }
        int64_t line = 0;
        int m2, have_name = 0;
        st_strbuf_reset(&file);
        st_strbuf_reset(&r->str);
        st_strbuf_t name;
        st_strbuf_init(&name);
        int have_qual = 0; /* "qualname", since strata 0.9: absent means "name" */
        while ((m2 = st_jp_obj_next(&r->jp, &r->key)) > 0) {
            const char *k = st_strbuf_cstr(&r->key);
            int c;
            if (strcmp(k, "file") == 0)
                c = st_jp_string(&r->jp, &file);
            else if (strcmp(k, "line") == 0)
                c = st_jp_int(&r->jp, 0, INT32_MAX, &line);
            else if (strcmp(k, "name") == 0)
                c = st_jp_string(&r->jp, &name), have_name = 1;
            else if (strcmp(k, "qualname") == 0)
                c = st_jp_string(&r->jp, &r->str), have_qual = 1;
            else
                c = st_jp_skip(&r->jp);
            if (c < 0)
                break;
        }
        if (m2 < 0) {
            st_strbuf_free(&name);
            rc = -1;
            break;
        }
        if (!have_name) {
            st_strbuf_free(&name);
            rc = FAIL(r, "function %u has no name", r->nfns);
            break;
        }
        if (r->nfns == cap) {
            cap = cap ? cap * 2 : 256;
            uint32_t *m = realloc(r->fn_map, cap * sizeof *m);
            if (!m) {
                st_strbuf_free(&name);
                rc = FAIL(r, "out of memory");
                break;
            }
            r->fn_map = m;
        }
        uint32_t id;
        if (st_loctab_add_qual(&r->p->locs, st_strbuf_cstr(&file), (int32_t)line,
                               st_strbuf_cstr(&name), have_qual ? st_strbuf_cstr(&r->str) : NULL,
                               &id) < 0)
            rc = FAIL(r, "out of memory");
        st_strbuf_free(&name);
        r->fn_map[r->nfns++] = id;
        if (r->nfns > (1u << 28))
            rc = FAIL(r, "too many functions");
    }
    st_strbuf_free(&file);
    return rc < 0 ? -1 : more;
}

/* One timer's statistics: {"sum":..,"self":..,"min":..,"max":..,"mean":..,"var":..} */
static int read_accum(reader_t *r, st_tstat_t *a, double *mean, double *var)
{
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc;
        double d;
        if (strcmp(k, "sum") == 0)
            rc = st_jp_uint(&r->jp, ST_COUNT_MAX, &a->sum);
        else if (strcmp(k, "self") == 0)
            rc = st_jp_uint(&r->jp, ST_COUNT_MAX, &a->self);
        else if (strcmp(k, "min") == 0)
            rc = st_jp_uint(&r->jp, ST_COUNT_MAX, &a->min);
        else if (strcmp(k, "max") == 0)
            rc = st_jp_uint(&r->jp, ST_COUNT_MAX, &a->max);
        else if (strcmp(k, "mean") == 0) {
            rc = st_jp_double(&r->jp, &d);
            if (rc == 0 && d < 0)
                rc = FAIL(r, "a negative mean");
            *mean = d;
        } else if (strcmp(k, "var") == 0) {
            rc = st_jp_double(&r->jp, &d);
            if (rc == 0 && d < 0)
                rc = FAIL(r, "a negative variance");
            *var = d;
        } else
            rc = st_jp_skip(&r->jp);
        if (rc < 0)
            return -1;
    }
    return more;
}

typedef struct {
    st_pathtab_t *t;
    uint32_t *fn;       /* node -> file function index (ST_LOC_NONE) */
    uint32_t capfn;
    st_u64map_t ids;    /* id -> node index, for files whose ids are not their positions */
    int dense;          /* so far every node's id equals its index */
} nodes_ctx_t;

static int grow_fn(reader_t *r, nodes_ctx_t *c)
{
    st_pathtab_t *t = c->t;
    if (t->nnodes >= ST_PROFILE_MAX_NODES)
        return FAIL(r, "a thread with more than %u nodes", ST_PROFILE_MAX_NODES);
    if (t->nnodes >= c->capfn) {
        uint32_t cap = c->capfn ? c->capfn * 2 : 64;
        while (cap <= t->nnodes)
            cap *= 2;
        uint32_t *f = realloc(c->fn, (size_t)cap * sizeof *f);
        if (!f)
            return FAIL(r, "out of memory");
        c->fn = f;
        c->capfn = cap;
    }
    return 0;
}

/* A gauge cell: {"n", "last", "min", "max"}. */
static int read_gauge(reader_t *r, st_gauge_t *g)
{
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc = strcmp(k, "n") == 0      ? st_jp_uint(&r->jp, ST_COUNT_MAX, &g->n)
                 : strcmp(k, "last") == 0 ? st_jp_double(&r->jp, &g->last)
                 : strcmp(k, "min") == 0  ? st_jp_double(&r->jp, &g->min)
                 : strcmp(k, "max") == 0  ? st_jp_double(&r->jp, &g->max)
                                          : st_jp_skip(&r->jp);
        if (rc < 0)
            return -1;
    }
    return more;
}

/* The cell of metric `id` (its value follows). */
static int read_cell(reader_t *r, cells_t *cl, uint32_t id)
{
    const st_metric_def_t *d = st_metrics_get(&r->p->metrics, id);
    cl->have |= 1u << id;
    switch (d->kind) {
    case ST_METRIC_TIMER: {
        st_tstat_t *a = &cl->timer[id];
        a->min = UINT64_MAX;
        int rc = read_accum(r, a, &cl->mean[id], &cl->var[id]);
        if (a->min != UINT64_MAX)
            cl->have_min |= 1u << id;
        if (id == ST_TIMER_WALL || id == ST_TIMER_CPU)
            r->timers_seen |= 1u << (id == ST_TIMER_WALL ? ST_COMP_WALL_CLOCK : ST_COMP_CPU_CLOCK);
        return rc;
    }
    case ST_METRIC_GAUGE:
        return read_gauge(r, &cl->gauge[id]);
    default:
        return st_jp_uint(&r->jp, ST_COUNT_MAX, &cl->u64[id]);
    }
}

/* A node's "metrics" (format_version 2): {"name": cell, ...}. */
static int read_cells(reader_t *r, cells_t *cl)
{
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        uint32_t id = st_metrics_find(&r->p->metrics, st_strbuf_cstr(&r->key));
        if (id == ST_METRIC_NONE)
            return FAIL(r, "a node's metric \"%s\" is not in \"metrics\"",
                        st_strbuf_cstr(&r->key));
        if (read_cell(r, cl, id) < 0)
            return -1;
    }
    return more;
}

/* Puts a node's cells into its columns. Every timer counts the node's calls (the
 * wall timer's count is its calls), the wall and CPU timers even when the record
 * has no times for them. */
static void store_cells(st_pathtab_t *t, uint32_t idx, const st_metrics_t *reg, cells_t *cl)
{
    for (uint32_t id = 0; id < reg->n && id < t->cols.ncols; id++) {
        const st_metric_def_t *d = &reg->defs[id];
        int have = (cl->have >> id) & 1u;
        if (d->kind == ST_METRIC_TIMER && (have || id < ST_NTIMERS)) {
            st_tstat_t *a = &cl->timer[id];
            if (!have)
                st_tstat_init(a);
            a->count = a->merged = cl->count;
            if (cl->count == 0) {
                a->min = UINT64_MAX;
            } else {
                if (!((cl->have_min >> id) & 1u))
                    a->min = 0;
                if (a->self > a->sum)
                    a->self = a->sum;
                a->mean = have ? cl->mean[id] : 0.0;
                a->m2 = have ? cl->var[id] * (double)cl->count : 0.0;
                a->merged_sum = a->sum;
            }
            st_mcols_timer(&t->cols, id)[idx] = *a;
        } else if (have && d->kind == ST_METRIC_GAUGE) {
            st_mcols_gauge(&t->cols, id)[idx] = cl->gauge[id];
        } else if (have && d->kind != ST_METRIC_TIMER) {
            st_mcols_u64(&t->cols, id)[idx] = cl->u64[id];
        }
    }
}

static int read_node(reader_t *r, nodes_ctx_t *c)
{
    st_pathtab_t *t = c->t;
    if (grow_fn(r, c) < 0)
        return -1;
    uint32_t idx = t->nnodes;
    cells_t *cl = &r->cells;
    memset(cl, 0, sizeof *cl);
    uint64_t id = 0;
    int64_t parent = -2;
    int have_id = 0, have_label = 0;
    uint32_t fn = ST_LOC_NONE, label = 0;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc;
        uint64_t u;
        if (strcmp(k, "id") == 0) {
            rc = st_jp_uint(&r->jp, UINT32_MAX - 1, &id);
            have_id = 1;
        } else if (strcmp(k, "parent") == 0) {
            rc = st_jp_int(&r->jp, -1, UINT32_MAX - 1, &parent);
        } else if (strcmp(k, "label") == 0) {
            rc = st_jp_string(&r->jp, &r->str);
            if (rc == 0 && st_intern_id(&r->p->labels, r->str.data ? r->str.data : "",
                                        r->str.len, &label) < 0)
                rc = FAIL(r, "out of memory");
            have_label = 1;
        } else if (strcmp(k, "count") == 0) {
            rc = st_jp_uint(&r->jp, ST_COUNT_MAX, &cl->count);
        } else if (strcmp(k, "function") == 0) {
            rc = st_jp_uint(&r->jp, UINT32_MAX - 1, &u);
            fn = (uint32_t)u;
        } else if (strcmp(k, "metrics") == 0) {
            rc = read_cells(r, cl);
        } else if (strcmp(k, "wall_clock") == 0 || strcmp(k, "cpu_clock") == 0) {
            /* format_version 1: the timers on the node itself */
            rc = read_cell(r, cl, k[0] == 'w' ? ST_TIMER_WALL : ST_TIMER_CPU);
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    if (more < 0)
        return -1;
    if (!have_id || parent == -2 || !have_label)
        return FAIL(r, "a node without %s", !have_id ? "an id" : !have_label ? "a label"
                                                                              : "a parent");
    /* the parent, which must come before */
    uint32_t pidx = 0;
    if (parent >= 0) {
        if (c->dense)
            pidx = (uint64_t)parent < idx && parent > 0 ? (uint32_t)parent : ST_PATH_NONE;
        else
            pidx = st_u64map_get(&c->ids, (uint64_t)parent);
        if (pidx == ST_PATH_NONE)
            return FAIL(r, "node %llu's parent %lld is not a node listed before it",
                        (unsigned long long)id, (long long)parent);
    }
    /* ids: dense while each equals its position, else through the map */
    if (c->dense && id != idx) {
        c->dense = 0;
        for (uint32_t i = 1; i < idx; i++)
            if (st_u64map_put(&c->ids, i, i, NULL) < 0)
                return FAIL(r, "out of memory");
    }
    if (!c->dense) {
        int dup = st_u64map_put(&c->ids, id, idx, NULL);
        if (dup < 0)
            return FAIL(r, "out of memory");
        if (dup)
            return FAIL(r, "two nodes with id %llu", (unsigned long long)id);
    }
    if (st_pathtab_append(t, pidx, label) != idx)
        return FAIL(r, "out of memory");
    store_cells(t, idx, &r->p->metrics, cl);
    c->fn[idx] = fn;
    return 0;
}

static int read_thread(reader_t *r)
{
    st_profile_t *p = r->p;
    long ti = st_profile_add_thread(p, 0, 0, "", 0, 0);
    if (ti < 0)
        return FAIL(r, "out of memory");
    uint32_t **nf = realloc(r->node_fn, p->nthreads * sizeof *nf);
    if (!nf)
        return FAIL(r, "out of memory");
    r->node_fn = nf;
    nf[ti] = NULL;
    nodes_ctx_t c;
    memset(&c, 0, sizeof c);
    c.t = &p->paths[ti];
    c.dense = 1;
    int have_index = 0, rc = 0;
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more = 0;
    while (rc == 0 && (more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        st_model_thread_t *th = &p->threads[ti];
        uint64_t u;
        if (strcmp(k, "index") == 0) {
            rc = st_jp_uint(&r->jp, UINT32_MAX, &u);
            th->index = (uint32_t)u;
            have_index = 1;
        } else if (strcmp(k, "tid") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &th->tid);
        } else if (strcmp(k, "name") == 0) {
            rc = read_string_dup(r, &p->thread_names[ti]);
        } else if (strcmp(k, "rank") == 0) {
            rc = st_jp_uint(&r->jp, INT32_MAX, &u);
            th->has_rank = 1;
            th->rank = (uint32_t)u;
        } else if (strcmp(k, "dropped_calls") == 0) {
            rc = st_jp_uint(&r->jp, UINT64_MAX, &p->paths[ti].dropped);
        } else if (strcmp(k, "nodes") == 0) {
            if (st_jp_arr_begin(&r->jp) < 0) {
                rc = -1;
                break;
            }
            int m2;
            while ((m2 = st_jp_arr_next(&r->jp)) > 0)
                if (read_node(r, &c) < 0)
                    break;
            rc = m2 < 0 || r->jp.failed ? -1 : 0;
        } else {
            rc = st_jp_skip(&r->jp);
        }
    }
    st_u64map_free(&c.ids);
    r->node_fn[ti] = c.fn;
    if (rc < 0 || more < 0)
        return -1;
    if (!have_index)
        p->threads[ti].index = (uint32_t)ti;
    st_profile_sync(p);
    return 0;
}

static int read_threads(reader_t *r)
{
    if (st_jp_arr_begin(&r->jp) < 0)
        return -1;
    r->have_threads = 1;
    int more;
    while ((more = st_jp_arr_next(&r->jp)) > 0)
        if (read_thread(r) < 0)
            return -1;
    return more;
}

static int read_version(reader_t *r)
{
    int64_t v;
    if (st_jp_int(&r->jp, INT32_MIN, INT32_MAX, &v) < 0)
        return -1;
    r->version = v;
    r->have_version = 1;
    return 0;
}

static int check_version(reader_t *r, const char *name, st_msg_t *msg)
{
    if (r->version > ST_PROFILE_FORMAT_VERSION)
        return st_msg_set(msg, ST_EINVAL,
                          "%s: format_version %lld is newer than this strata reads (%d): "
                          "use a newer strata",
                          name, (long long)r->version, ST_PROFILE_FORMAT_VERSION);
    if (r->version < 1)
        return st_msg_set(msg, ST_EINVAL, "%s: bad format_version %lld", name,
                          (long long)r->version);
    return 0;
}

static int read_document(reader_t *r)
{
    if (st_jp_peek(&r->jp) != ST_JV_OBJECT)
        return st_jp_fail(&r->jp, "not a profile.json: expected a JSON object");
    if (st_jp_obj_begin(&r->jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_obj_next(&r->jp, &r->key)) > 0) {
        const char *k = st_strbuf_cstr(&r->key);
        int rc;
        if (strcmp(k, "format_version") == 0) {
            rc = read_version(r);
            /* refuse a newer layout before trying to read it */
            if (rc == 0 && r->version > ST_PROFILE_FORMAT_VERSION)
                return -2;
        } else if (strcmp(k, "metadata") == 0) {
            rc = read_metadata(r);
        } else if (strcmp(k, "settings") == 0) {
            rc = read_settings(r);
        } else if (strcmp(k, "components") == 0) {
            rc = read_components(r);
        } else if (strcmp(k, "metrics") == 0) {
            rc = read_metrics(r);
        } else if (strcmp(k, "trace") == 0) {
            rc = read_trace(r);
        } else if (strcmp(k, "process_sampling") == 0) {
            rc = read_sampling(r);
        } else if (strcmp(k, "gpu") == 0) {
            rc = read_gpu(r);
        } else if (strcmp(k, "stack_sampling") == 0) {
            rc = read_stacks(r);
        } else if (strcmp(k, "line_timings") == 0) {
            rc = read_line_timings(r);
        } else if (strcmp(k, "memory_over_time") == 0) {
            rc = read_memtime(r);
        } else if (strcmp(k, "memory_lines") == 0) {
            rc = read_memlines(r);
        } else if (strcmp(k, "line_time") == 0) {
            rc = st_jp_bool(&r->jp, &r->p->line_time);
        } else if (strcmp(k, "line_memory") == 0) {
            char *kind = NULL;
            rc = st_jp_peek(&r->jp) == ST_JV_NULL ? st_jp_skip(&r->jp) : read_string_dup(r, &kind);
            if (rc == 0 && kind && strcmp(kind, "heap") != 0 && strcmp(kind, "rss") != 0)
                rc = FAIL(r, "line_memory is neither \"heap\" nor \"rss\"");
            if (rc == 0 && kind)
                snprintf(r->p->line_memory, sizeof r->p->line_memory, "%s", kind);
            free(kind);
        } else if (strcmp(k, "functions") == 0) {
            rc = read_functions(r);
        } else if (strcmp(k, "threads") == 0) {
            rc = read_threads(r);
        } else {
            rc = st_jp_skip(&r->jp);
        }
        if (rc < 0)
            return -1;
    }
    if (more < 0)
        return -1;
    return st_jp_finish(&r->jp);
}

/* Node function indices -> labels: a label is its text and its function
 * (core/intern.h), so the labels read as text are made again, each tagged with
 * its node's function; nodes of two functions that share a text (files written
 * before labels had functions merged them; later ones keep them apart) get two
 * labels. */
static int resolve_functions(reader_t *r)
{
    st_profile_t *p = r->p;
    st_intern_t labels;
    st_intern_init(&labels);
    for (size_t t = 0; t < p->nthreads; t++) {
        const uint32_t *fn = r->node_fn[t];
        st_pathtab_t *tree = &p->paths[t];
        for (uint32_t i = 1; i < tree->nnodes; i++) {
            uint32_t loc = fn ? fn[i] : ST_LOC_NONE;
            if (loc != ST_LOC_NONE) {
                if (loc >= r->nfns) {
                    st_intern_free(&labels);
                    return -1 - (int)i;
                }
                loc = r->fn_map[loc];
            }
            const char *text = st_intern_str(&p->labels, tree->nodes[i].label);
            uint32_t id;
            if (st_intern_tagged(&labels, text, strlen(text), loc, &id) < 0 ||
                (loc != ST_LOC_NONE && st_loctab_set_id(&p->locs, id, loc) < 0)) {
                st_intern_free(&labels);
                return ST_ENOMEM;
            }
            tree->nodes[i].label = id;
        }
        if (st_pathtab_reindex(tree) < 0) {
            st_intern_free(&labels);
            return ST_ENOMEM;
        }
    }
    st_intern_move(&p->labels, &labels);
    st_intern_free(&labels);
    return 0;
}

int st_profile_parse(st_profile_t *p, const char *buf, size_t len, const char *name,
                     st_msg_t *msg)
{
    if (st_profile_init(p) < 0)
        return st_msg_set(msg, ST_ENOMEM, "out of memory reading %s", name);
    reader_t r;
    memset(&r, 0, sizeof r);
    r.p = p;
    st_strbuf_init(&r.key);
    st_strbuf_init(&r.str);
    st_jp_init(&r.jp, buf, len);
    int rc = 0;
    int got = len == 0 ? -3 : read_document(&r);
    if (got == -3) {
        rc = st_msg_set(msg, ST_EINVAL, "%s: empty file", name);
    } else if (got == -2 || (got == 0 && r.have_version &&
                              (r.version < 1 || r.version > ST_PROFILE_FORMAT_VERSION))) {
        rc = check_version(&r, name, msg);
    } else if (got < 0) {
        rc = st_msg_set(msg, ST_EINVAL, "%s: not a valid profile.json: %s", name, r.jp.err);
    } else if (!r.have_version) {
        rc = st_msg_set(msg, ST_EINVAL, "%s: not a profile.json (no format_version)", name);
    } else if (!r.have_threads) {
        rc = st_msg_set(msg, ST_EINVAL, "%s: not a profile.json (no threads)", name);
    } else {
        int bad = resolve_functions(&r);
        if (bad == ST_ENOMEM)
            rc = st_msg_set(msg, ST_ENOMEM, "out of memory reading %s", name);
        else if (bad < 0)
            rc = st_msg_set(msg, ST_EINVAL,
                            "%s: not a valid profile.json: a node refers to a function "
                            "that is not listed",
                            name);
    }
    if (rc == 0) {
        st_model_t *m = &p->model;
        m->components = r.have_components ? r.components
                                          : (1u << ST_COMP_TRIP_COUNT) | r.timers_seen;
        /* a profile that only sampled stacks counted no call: no component */
        if (!m->components && !p->has_stacks)
            m->components = 1u << ST_COMP_TRIP_COUNT;
        m->has_rank = r.have_rank;
        m->rank = r.rank;
        m->nranks = r.nranks;
        m->nruns = r.nruns;
        for (size_t i = 0; i < p->nthreads; i++)
            if (!p->threads[i].has_rank && r.have_rank) {
                p->threads[i].has_rank = 1;
                p->threads[i].rank = r.rank;
            }
        st_profile_sync(p);
    }
    for (size_t t = 0; r.node_fn && t < p->nthreads; t++)
        free(r.node_fn[t]);
    free(r.node_fn);
    free(r.fn_map);
    st_strbuf_free(&r.key);
    st_strbuf_free(&r.str);
    if (rc < 0)
        st_profile_free(p);
    return rc;
}

/* The N of a file named profile-N.json, or -1. */
static long rank_of_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "profile-", 8) != 0)
        return -1;
    const char *q = base + 8;
    long v = 0;
    if (*q < '0' || *q > '9')
        return -1;
    for (; *q >= '0' && *q <= '9'; q++) {
        v = v * 10 + (*q - '0');
        if (v > INT32_MAX)
            return -1;
    }
    return strcmp(q, ".json") == 0 ? v : -1;
}

int st_profile_load(st_profile_t *p, const char *path, st_msg_t *msg)
{
    memset(p, 0, sizeof *p);
    size_t size;
    FILE *f = st_fs_open_regular(path, NULL, &size, msg);
    if (!f)
        return ST_EIO;
    if ((uint64_t)size > ST_PROFILE_MAX_BYTES) {
        fclose(f);
        return st_msg_set(msg, ST_EINVAL, "'%s' is larger than %zu GiB", path,
                          ST_PROFILE_MAX_BYTES >> 30);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return st_msg_set(msg, ST_ENOMEM, "out of memory reading '%s'", path);
    }
    size_t got = fread(buf, 1, size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(buf);
        return st_msg_set(msg, ST_EIO, "cannot read '%s'", path);
    }
    buf[size] = '\0';
    int rc = st_profile_parse(p, buf, size, path, msg);
    free(buf);
    if (rc == 0 && !p->model.has_rank) {
        long r = rank_of_name(path);
        if (r >= 0) {
            p->model.has_rank = 1;
            p->model.rank = (uint32_t)r;
            for (size_t i = 0; i < p->nthreads; i++) {
                p->threads[i].has_rank = 1;
                p->threads[i].rank = (uint32_t)r;
            }
        }
    }
    return rc;
}
