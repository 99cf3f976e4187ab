#include "core/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void st_welford_batch(uint64_t n, double mean, double m2, uint64_t bn, uint64_t bsum,
                      unsigned __int128 bsq, double *out_mean, double *out_m2)
{
    if (bn == 0) {
        *out_mean = mean;
        *out_m2 = m2;
        return;
    }
    /* bn * bsq - bsum^2 >= 0 (Cauchy-Schwarz), exact in 128 bits for bn <= ST_BATCH. */
    unsigned __int128 num = (unsigned __int128)bn * bsq - (unsigned __int128)bsum * bsum;
    double bmean = (double)bsum / (double)bn;
    double bm2 = (double)num / (double)bn;
    double total = (double)(n + bn);
    double delta = bmean - mean;
    *out_mean = mean + delta * (double)bn / total;
    *out_m2 = m2 + bm2 + delta * delta * (double)n * (double)bn / total;
}

void st_welford_merge(uint64_t na, double *mean_a, double *m2_a, uint64_t nb, double mean_b,
                      double m2_b)
{
    if (nb == 0)
        return;
    double total = (double)na + (double)nb;
    double delta = mean_b - *mean_a;
    *mean_a += delta * (double)nb / total;
    *m2_a += m2_b + delta * delta * (double)na * (double)nb / total;
}

void st_tstat_init(st_tstat_t *s)
{
    memset(s, 0, sizeof *s);
    s->min = UINT64_MAX;
}

void st_tstat_fold(st_tstat_t *s)
{
    st_welford_batch(s->merged, s->mean, s->m2, s->count - s->merged, s->sum - s->merged_sum,
                     s->batch_sq, &s->mean, &s->m2);
    s->merged = s->count;
    s->merged_sum = s->sum;
    s->batch_sq = 0;
}

void st_tstat_stats(const st_tstat_t *s, double *mean, double *var)
{
    double m2;
    st_welford_batch(s->merged, s->mean, s->m2, s->count - s->merged, s->sum - s->merged_sum,
                     s->batch_sq, mean, &m2);
    *var = s->count ? m2 / (double)s->count : 0.0;
}

static uint64_t sat_add(uint64_t a, uint64_t b, int *sat)
{
    if (a > ST_COUNT_MAX - (b > ST_COUNT_MAX ? ST_COUNT_MAX : b)) {
        if (sat)
            *sat = 1;
        return ST_COUNT_MAX;
    }
    return a + b;
}

void st_tstat_merge(st_tstat_t *dst, const st_tstat_t *src, int *sat)
{
    if (dst->count != dst->merged)
        st_tstat_fold(dst);
    if (src->count == 0)
        return;
    double mb, vb;
    st_tstat_stats(src, &mb, &vb);
    st_welford_merge(dst->count, &dst->mean, &dst->m2, src->count, mb, vb * (double)src->count);
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->sum = sat_add(dst->sum, src->sum, sat);
    dst->self = sat_add(dst->self, src->self, sat);
    dst->count = sat_add(dst->count, src->count, sat);
    dst->merged = dst->count;
    dst->merged_sum = dst->sum;
    dst->batch_sq = 0;
}

void st_metrics_init(st_metrics_t *m)
{
    memset(m, 0, sizeof *m);
}

void st_metrics_free(st_metrics_t *m)
{
    free(m->defs);
    memset(m, 0, sizeof *m);
}

uint32_t st_metrics_find(const st_metrics_t *m, const char *name)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (strcmp(m->defs[i].name, name) == 0)
            return i;
    return ST_METRIC_NONE;
}

int st_metrics_add(st_metrics_t *m, const char *name, const char *unit, const char *desc,
                   st_metric_kind_t kind, uint32_t *id)
{
    if (!name || !*name || strlen(name) >= sizeof m->defs[0].name)
        return ST_EINVAL;
    uint32_t found = st_metrics_find(m, name);
    if (found != ST_METRIC_NONE) {
        if (m->defs[found].kind != kind)
            return ST_EINVAL;
        *id = found;
        return 0;
    }
    if (m->n >= ST_MCOLS_MAX)
        return ST_EINVAL;
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 8;
        st_metric_def_t *d = realloc(m->defs, cap * sizeof *d);
        if (!d)
            return ST_ENOMEM;
        m->defs = d;
        m->cap = cap;
    }
    st_metric_def_t *d = &m->defs[m->n];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->unit, sizeof d->unit, "%s", unit ? unit : "");
    snprintf(d->desc, sizeof d->desc, "%s", desc ? desc : "");
    d->kind = kind;
    *id = m->n++;
    return 0;
}

size_t st_metric_cell_size(st_metric_kind_t kind)
{
    switch (kind) {
    case ST_METRIC_TIMER:
        return sizeof(st_tstat_t);
    case ST_METRIC_GAUGE:
        return sizeof(st_gauge_t);
    default:
        return sizeof(uint64_t);
    }
}

static const char *const kind_names[] = {"timer", "count", "bytes", "gauge", "samples"};

const char *st_metric_kind_name(st_metric_kind_t kind)
{
    return (unsigned)kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[kind] : "";
}

int st_metric_kind_find(const char *name)
{
    for (int k = 0; k < (int)(sizeof kind_names / sizeof kind_names[0]); k++)
        if (strcmp(kind_names[k], name) == 0)
            return k;
    return -1;
}

/* Empties cells [from, to) of column `i`. */
static void clear_cells(st_mcols_t *c, uint32_t i, uint32_t from, uint32_t to)
{
    size_t size = st_metric_cell_size(c->kinds[i]);
    memset((char *)c->cols[i] + (size_t)from * size, 0, (size_t)(to - from) * size);
    if (c->kinds[i] == ST_METRIC_TIMER)
        for (uint32_t k = from; k < to; k++)
            st_tstat_init(&((st_tstat_t *)c->cols[i])[k]);
}

int st_mcols_init(st_mcols_t *c, const st_metrics_t *m, uint32_t cap)
{
    memset(c, 0, sizeof *c);
    if (cap == 0)
        cap = 1;
    c->ncols = m->n < ST_MCOLS_MAX ? m->n : ST_MCOLS_MAX;
    for (uint32_t i = 0; i < c->ncols; i++) {
        c->kinds[i] = m->defs[i].kind;
        c->cols[i] = malloc((size_t)cap * st_metric_cell_size(c->kinds[i]));
        if (!c->cols[i])
            goto fail;
        clear_cells(c, i, 0, cap);
    }
    c->cap = cap;
    return 0;
fail:
    st_mcols_free(c);
    return ST_ENOMEM;
}

int st_mcols_sync(st_mcols_t *c, const st_metrics_t *m)
{
    uint32_t n = m->n < ST_MCOLS_MAX ? m->n : ST_MCOLS_MAX;
    for (uint32_t i = c->ncols; i < n; i++) {
        c->kinds[i] = m->defs[i].kind;
        c->cols[i] = malloc((size_t)c->cap * st_metric_cell_size(c->kinds[i]));
        if (!c->cols[i])
            return ST_ENOMEM;
        clear_cells(c, i, 0, c->cap);
        c->ncols = i + 1;
    }
    return 0;
}

void st_mcols_free(st_mcols_t *c)
{
    for (uint32_t i = 0; i < c->ncols; i++)
        free(c->cols[i]);
    memset(c, 0, sizeof *c);
}

void st_mcols_shrink(st_mcols_t *c, uint32_t n)
{
    if (n == 0)
        n = 1;
    if (n >= c->cap)
        return;
    for (uint32_t i = 0; i < c->ncols; i++) {
        void *p = realloc(c->cols[i], (size_t)n * st_metric_cell_size(c->kinds[i]));
        if (p)
            c->cols[i] = p; /* else it keeps more cells than it needs */
    }
    c->cap = n;
}

int st_mcols_reserve(st_mcols_t *c, uint32_t n)
{
    if (n <= c->cap)
        return 0;
    uint32_t cap = c->cap;
    while (cap < n)
        cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
    /* grow every column first, so that a failure leaves cap unchanged and every
     * column valid up to it */
    for (uint32_t i = 0; i < c->ncols; i++) {
        void *p = realloc(c->cols[i], (size_t)cap * st_metric_cell_size(c->kinds[i]));
        if (!p)
            return ST_ENOMEM;
        c->cols[i] = p;
    }
    for (uint32_t i = 0; i < c->ncols; i++)
        clear_cells(c, i, c->cap, cap);
    c->cap = cap;
    return 0;
}
