#include "model/model.h"

#include <stdlib.h>

int st_model_timer(const st_model_t *m)
{
    if (m->components & (1u << ST_COMP_WALL_CLOCK))
        return ST_TIMER_WALL;
    if (m->components & (1u << ST_COMP_CPU_CLOCK))
        return ST_TIMER_CPU;
    return -1;
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
    return 1;
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
