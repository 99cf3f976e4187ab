/* Two sides of runs compared per function (see diff.h). */
#include "output/diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "output/fgraph.h"
#include "output/grid.h"

void st_diff_init(st_diff_t *d, double pct, double min_share)
{
    memset(d, 0, sizeof *d);
    d->timed = 1;
    d->pct = pct;
    d->min_share = min_share;
}

void st_diff_free(st_diff_t *d)
{
    for (int s = 0; s < 2; s++) {
        for (uint32_t r = 0; r < d->runs[s]; r++)
            free(d->self[s][r]);
        free(d->self[s]);
        free(d->nself[s]);
    }
    for (uint32_t i = 0; i < d->nfns; i++)
        free(d->fns[i].name);
    free(d->fns);
    st_u64map_free(&d->index);
    memset(d, 0, sizeof *d);
}

/* The function named `name`, made when new; UINT32_MAX when out of memory. */
static uint32_t fn_of(st_diff_t *d, const char *name)
{
    for (uint64_t k = st_u64map_text_key(name, 0);; k = st_u64map_next_key(k)) {
        uint32_t i = st_u64map_get(&d->index, k);
        if (i != UINT32_MAX) {
            if (strcmp(d->fns[i].name, name) == 0)
                return i;
            continue; /* another name with this hash: the next key */
        }
        if (d->nfns == d->capfns) {
            uint32_t cap = d->capfns ? 2 * d->capfns : 64;
            st_diff_fn_t *f = realloc(d->fns, cap * sizeof *f);
            if (!f)
                return UINT32_MAX;
            d->fns = f;
            d->capfns = cap;
        }
        st_diff_fn_t *f = &d->fns[d->nfns];
        memset(f, 0, sizeof *f);
        if (!(f->name = strdup(name)) || st_u64map_put(&d->index, k, d->nfns, NULL) < 0) {
            free(f->name);
            return UINT32_MAX;
        }
        return d->nfns++;
    }
}

/* The functions of m's rank `rank` (all ranks: -1) into `mine` (this run's self
 * time per function), their names prefixed by the rank's when `rank` >= 0, else
 * by `prefix` (may be NULL). */
static int add_graph(st_diff_t *d, int side, const st_model_t *m, long rank, const char *prefix,
                     double **mine, size_t *cap)
{
    st_fgraph_t g;
    int rc = st_fgraph_build(&g, m, rank);
    if (rc < 0)
        return rc;
    if (g.timer < 0)
        d->timed = 0;
    size_t need = (size_t)d->nfns + g.nfns + 1;
    if (need > *cap) {
        double *more = realloc(*mine, need * sizeof *more);
        if (!more) {
            st_fgraph_free(&g);
            return ST_ENOMEM;
        }
        memset(more + *cap, 0, (need - *cap) * sizeof *more);
        *mine = more;
        *cap = need;
    }
    st_strbuf_t name;
    st_strbuf_init(&name);
    for (uint32_t f = 0; f < g.nfns && rc == 0; f++) {
        if (rank >= 0)
            st_strbuf_printf(&name, "[rank %ld] ", rank);
        else if (prefix)
            st_strbuf_printf(&name, "[%s] ", prefix);
        st_fgraph_name(&g, m, f, 1, &name);
        uint32_t i = name.failed ? UINT32_MAX : fn_of(d, st_strbuf_cstr(&name));
        st_strbuf_reset(&name);
        if (i == UINT32_MAX) {
            rc = ST_ENOMEM;
            break;
        }
        const st_fnode_t *n = &g.fns[f];
        d->fns[i].sum[side][0] += n->ct;
        d->fns[i].sum[side][1] += (double)n->nc;
        (*mine)[i] += n->tt;
        d->self_all[side] += n->tt;
    }
    st_strbuf_free(&name);
    st_fgraph_free(&g);
    return rc;
}

int st_diff_add_run(st_diff_t *d, int side, const st_model_t *m)
{
    uint32_t r = d->runs[side];
    double **runs = realloc(d->self[side], (r + 1) * sizeof *runs);
    uint32_t *ns = runs ? realloc(d->nself[side], (r + 1) * sizeof *ns) : NULL;
    if (runs)
        d->self[side] = runs;
    if (!ns)
        return ST_ENOMEM;
    d->nself[side] = ns;
    double *mine = NULL;
    size_t cap = 0;
    uint32_t nranks = 0, *ranks = d->by_rank ? st_model_ranks(m, &nranks) : NULL;
    int rc = 0;
    if (nranks) {
        for (uint32_t k = 0; k < nranks && rc == 0; k++)
            rc = add_graph(d, side, m, (long)ranks[k], NULL, &mine, &cap);
    } else if (d->by_thread) {
        /* a view of the run holding one thread */
        for (size_t k = 0; k < m->nthreads && rc == 0; k++) {
            st_model_t one = *m;
            one.threads = &m->threads[k];
            one.nthreads = 1;
            const char *tn = m->threads[k].name;
            rc = add_graph(d, side, &one, -1, tn && *tn ? tn : "thread", &mine, &cap);
        }
    } else {
        rc = add_graph(d, side, m, -1, NULL, &mine, &cap);
    }
    free(ranks);
    if (rc < 0 || !mine) {
        free(mine);
        return rc < 0 ? rc : ST_ENOMEM;
    }
    d->self[side][r] = mine;
    d->nself[side][r] = d->nfns;
    d->runs[side]++;
    return 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Function i's self time on a side: the median of its runs, and the variance of
 * that median from their median absolute deviation (0 with one run). v: room for
 * the side's runs. */
static void self_stats(const st_diff_t *d, uint32_t i, int side, double *v, double *median,
                       double *var)
{
    uint32_t n = d->runs[side];
    *median = *var = 0;
    if (!n)
        return;
    for (uint32_t r = 0; r < n; r++)
        v[r] = i < d->nself[side][r] ? d->self[side][r][i] : 0;
    *median = median_of(v, n);
    if (n < 2)
        return;
    for (uint32_t r = 0; r < n; r++)
        v[r] = fabs(v[r] - *median);
    double se = 1.253 * 1.4826 * median_of(v, n) / sqrt((double)n);
    *var = se * se;
}

static int by_growth(const void *a, const void *b)
{
    const st_diff_row_t *x = a, *y = b;
    double gx = x->self[1] - x->self[0], gy = y->self[1] - y->self[0];
    if (gx != gy)
        return gx < gy ? 1 : -1;
    return strcmp(x->name, y->name);
}

long st_diff_rows(const st_diff_t *d, st_diff_row_t **rows)
{
    st_diff_row_t *r = calloc(d->nfns ? d->nfns : 1, sizeof *r);
    uint32_t most = d->runs[0] > d->runs[1] ? d->runs[0] : d->runs[1];
    double *v = malloc(((size_t)most + 1) * sizeof *v);
    if (!r || !v) {
        free(r);
        free(v);
        return ST_ENOMEM;
    }
    double all[2];
    for (int s = 0; s < 2; s++)
        all[s] = d->runs[s] ? d->self_all[s] / d->runs[s] : 0;
    for (uint32_t i = 0; i < d->nfns; i++) {
        const st_diff_fn_t *f = &d->fns[i];
        st_diff_row_t *row = &r[i];
        row->name = f->name;
        double var[2] = {0, 0};
        for (int s = 0; s < 2; s++) {
            double n = d->runs[s] ? (double)d->runs[s] : 1.0;
            self_stats(d, i, s, v, &row->self[s], &var[s]);
            row->total[s] = f->sum[s][0] / n;
            row->calls[s] = f->sum[s][1] / n;
        }
        row->noise = 2.0 * sqrt(var[0] + var[1]);
        double grew = row->self[1] - row->self[0];
        row->change = row->self[0] > 0 ? 100.0 * grew / row->self[0]
                      : row->self[1] > 0 ? INFINITY
                                         : 0.0;
        int fresh = row->self[0] <= 0;
        row->share = fresh ? (all[1] > 0 ? 100.0 * row->self[1] / all[1] : 0)
                           : (all[0] > 0 ? 100.0 * row->self[0] / all[0] : 0);
        row->regression = d->timed && row->share >= d->min_share && row->change > d->pct &&
                          grew > row->noise;
    }
    free(v);
    qsort(r, d->nfns, sizeof *r, by_growth);
    *rows = r;
    return (long)d->nfns;
}

static void put_calls(st_strbuf_t *b, double calls)
{
    if (calls == floor(calls))
        st_strbuf_printf(b, "%.0f", calls);
    else
        st_strbuf_printf(b, "%.1f", calls);
}

void st_diff_table_write(st_strbuf_t *out, const st_diff_t *d, const st_diff_row_t *rows,
                         size_t n, size_t top)
{
    st_grid_t g;
    st_grid_init(&g);
    const char *heads[] = {"FUNCTION", "CALLS A", "CALLS B", "SELF A (sec)", "SELF B (sec)",
                           "CHANGE", "NOISE (sec)", "TOTAL A (sec)", "TOTAL B (sec)", "% A",
                           ""};
    for (int c = 0; c < 11; c++)
        st_grid_column(&g, heads[c], c > 0 && c < 10);
    st_strbuf_t b;
    st_strbuf_init(&b);
    size_t shown = top && top < n ? top : n, regressions = 0;
    for (size_t i = 0; i < n; i++)
        regressions += rows[i].regression != 0;
    for (size_t i = 0; i < shown; i++) {
        const st_diff_row_t *r = &rows[i];
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, r->name);
        put_calls(&b, r->calls[0]);
        st_grid_cell(&g, 1, &b);
        put_calls(&b, r->calls[1]);
        st_grid_cell(&g, 2, &b);
        double cells[] = {r->self[0], r->self[1]};
        for (int k = 0; k < 2; k++) {
            st_strbuf_printf(&b, "%.6f", cells[k] * 1e-9);
            st_grid_cell(&g, 3 + k, &b);
        }
        if (isinf(r->change))
            st_strbuf_puts(&b, "new");
        else
            st_strbuf_printf(&b, "%+.1f %%", r->change);
        st_grid_cell(&g, 5, &b);
        st_strbuf_printf(&b, "%.6f", r->noise * 1e-9);
        st_grid_cell(&g, 6, &b);
        st_strbuf_printf(&b, "%.6f", r->total[0] * 1e-9);
        st_grid_cell(&g, 7, &b);
        st_strbuf_printf(&b, "%.6f", r->total[1] * 1e-9);
        st_grid_cell(&g, 8, &b);
        st_strbuf_printf(&b, "%.1f", r->share);
        st_grid_cell(&g, 9, &b);
        const char *says = r->regression ? "SLOWER" : r->calls[0] != r->calls[1] ? "calls" : "";
        st_grid_cell_str(&g, 10, says);
    }
    if (shown < n) {
        st_grid_row(&g);
        st_strbuf_printf(&b, "... %zu more functions", n - shown);
        st_grid_cell(&g, 0, &b);
    }
    st_strbuf_free(&b);
    char title[160];
    snprintf(title, sizeof title, "CHANGES, A (%u RUN%s) TO B (%u RUN%s)", d->runs[0],
             d->runs[0] == 1 ? "" : "S", d->runs[1], d->runs[1] == 1 ? "" : "S");
    st_grid_render(out, &g, title);
    if (g.failed)
        out->failed = 1;
    st_grid_free(&g);
    st_strbuf_printf(out,
                     "%zu function%s slower by more than %g %% beyond the noise, among those "
                     "taking %g %% of the time or more%s\n",
                     regressions, regressions == 1 ? "" : "s", d->pct, d->min_share,
                     d->timed ? "" : " (no timer in every run: calls compared only)");
}

void st_diff_json_write(st_strbuf_t *out, const st_diff_t *d, const st_diff_row_t *rows,
                        size_t n)
{
    size_t regressions = 0;
    for (size_t i = 0; i < n; i++)
        regressions += rows[i].regression != 0;
    st_strbuf_printf(out,
                     "{\"runs\": [%u, %u], \"pct\": %.17g, \"min_share\": %.17g, "
                     "\"timed\": %s, \"regressions\": %zu, \"functions\": [",
                     d->runs[0], d->runs[1], d->pct, d->min_share, d->timed ? "true" : "false",
                     regressions);
    for (size_t i = 0; i < n; i++) {
        const st_diff_row_t *r = &rows[i];
        st_strbuf_puts(out, i ? ",\n  {\"name\": " : "\n  {\"name\": ");
        st_strbuf_json_string(out, r->name);
        st_strbuf_printf(out,
                         ", \"self\": [%.17g, %.17g], \"total\": [%.17g, %.17g], "
                         "\"calls\": [%.17g, %.17g], \"noise\": %.17g, \"change\": ",
                         r->self[0] * 1e-9, r->self[1] * 1e-9, r->total[0] * 1e-9,
                         r->total[1] * 1e-9, r->calls[0], r->calls[1], r->noise * 1e-9);
        if (isinf(r->change))
            st_strbuf_puts(out, "null");
        else
            st_strbuf_printf(out, "%.17g", r->change);
        st_strbuf_printf(out, ", \"share\": %.17g, \"regression\": %s}", r->share,
                         r->regression ? "true" : "false");
    }
    st_strbuf_puts(out, n ? "\n]}\n" : "]}\n");
}
