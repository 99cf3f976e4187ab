#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

int st_model_timer(const st_model_t *m)
{
    if (m->components & (1u << ST_COMP_WALL_CLOCK))
        return ST_TIMER_WALL;
    if (m->components & (1u << ST_COMP_CPU_CLOCK))
        return ST_TIMER_CPU;
    return -1;
}

/* 1 when column `id` of some thread holds a value (a gauge reading, a count). */
static int has_values(const st_model_t *m, uint32_t id)
{
    for (size_t t = 0; t < m->nthreads; t++) {
        const st_pathtab_t *p = m->threads[t].paths;
        if (id >= p->cols.ncols)
            continue;
        for (uint32_t i = 1; i < p->nnodes; i++)
            if (p->cols.kinds[id] == ST_METRIC_GAUGE ? st_mcols_gauge(&p->cols, id)[i].n != 0
                                                     : st_mcols_u64(&p->cols, id)[i] != 0)
                return 1;
    }
    return 0;
}

int st_model_reports(const st_model_t *m, uint32_t id)
{
    const st_metric_def_t *d = m->metrics ? st_metrics_get(m->metrics, id) : NULL;
    if (!d)
        return 0;
    if (id == ST_TIMER_WALL)
        return (m->components >> ST_COMP_WALL_CLOCK) & 1u;
    if (id == ST_TIMER_CPU && d->kind == ST_METRIC_TIMER)
        return (m->components >> ST_COMP_CPU_CLOCK) & 1u;
    return d->kind == ST_METRIC_TIMER || has_values(m, id);
}

uint32_t st_model_weight(const st_model_t *m)
{
    int timer = st_model_timer(m);
    if (timer >= 0)
        return (uint32_t)timer;
    for (uint32_t id = 0; m->metrics && id < m->metrics->n; id++)
        if (m->metrics->defs[id].kind == ST_METRIC_SAMPLES && st_model_reports(m, id))
            return id;
    return ST_METRIC_NONE;
}

int st_model_values(const st_model_t *m, const st_model_thread_t *th, uint32_t metric,
                    double **incl, double **self)
{
    const st_pathtab_t *t = th->paths;
    const st_mcols_t *c = &t->cols;
    st_metric_kind_t kind = metric == ST_METRIC_NONE ? ST_METRIC_COUNT
                            : metric < c->ncols      ? c->kinds[metric]
                                                     : ST_METRIC_GAUGE;
    if (kind == ST_METRIC_GAUGE)
        return ST_EINVAL;
    double *in = malloc((size_t)t->nnodes * sizeof *in);
    double *se = malloc((size_t)t->nnodes * sizeof *se);
    if (!in || !se) {
        free(in);
        free(se);
        return ST_ENOMEM;
    }
    in[0] = se[0] = 0.0;
    if (kind == ST_METRIC_TIMER) {
        double k = metric < ST_NTIMERS ? m->ns_per_tick[metric] : 1.0;
        const st_tstat_t *s = st_mcols_timer(c, metric);
        for (uint32_t i = 1; i < t->nnodes; i++) {
            in[i] = (double)s[i].sum * k;
            se[i] = (double)s[i].self * k;
        }
    } else {
        for (uint32_t i = 1; i < t->nnodes; i++)
            in[i] = se[i] = metric == ST_METRIC_NONE ? (double)st_model_calls(th, i)
                                                     : (double)st_mcols_u64(c, metric)[i];
        /* children come after their parent: add each subtree upwards, last first */
        for (uint32_t i = t->nnodes - 1; i >= 1; i--) {
            uint32_t p = t->nodes[i].parent;
            if (p != 0 && p < i)
                in[p] += in[i];
        }
    }
    *incl = in;
    *self = se;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

uint32_t *st_model_ranks(const st_model_t *m, uint32_t *n)
{
    uint32_t *r = malloc((m->nthreads + 1) * sizeof *r);
    *n = 0;
    if (!r)
        return NULL;
    for (size_t i = 0; i < m->nthreads; i++)
        if (m->threads[i].has_rank)
            r[(*n)++] = m->threads[i].rank;
    qsort(r, *n, sizeof *r, cmp_u32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < *n; i++)
        if (k == 0 || r[k - 1] != r[i])
            r[k++] = r[i];
    *n = k;
    return r;
}

uint32_t st_model_count_ranks(const st_model_t *m)
{
    uint32_t n;
    free(st_model_ranks(m, &n));
    return n;
}

static int line_place(const void *a, const void *b)
{
    const st_model_line_t *x = a, *y = b;
    int c = strcmp(x->function, y->function);
    if (!c)
        c = strcmp(x->file, y->file);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int line_periods(const void *a, const void *b)
{
    const st_model_line_t *x = a, *y = b;
    if (x->periods != y->periods)
        return x->periods < y->periods ? 1 : -1;
    return line_place(a, b);
}

size_t st_model_lines_coalesce(st_model_line_t *rows, size_t n,
                               void (*drop)(st_model_line_t *row))
{
    if (n == 0)
        return 0;
    qsort(rows, n, sizeof *rows, line_place);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (m && line_place(&rows[m - 1], &rows[k]) == 0) {
            rows[m - 1].periods += rows[k].periods;
            if (drop)
                drop(&rows[k]);
        } else
            rows[m++] = rows[k];
    }
    qsort(rows, m, sizeof *rows, line_periods);
    return m;
}
