#include "output/loadbal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "output/fgraph.h"
#include "output/grid.h"

typedef struct {
    double min, max, sum, sumsq;
    uint32_t working;
    uint32_t loc, label;
    uint8_t *idle;       /* one bit per rank index: 1 = did work */
} row_t;

static int cmp_rows(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    return x->max > y->max ? -1 : x->max < y->max ? 1 : 0;
}

/* The ranks that did no work as "3, 5-9, 12"; past 8 ranges, "... (N ranks)" (the
 * unit's plural). */
static void put_ranges(st_strbuf_t *out, const uint32_t *ranks, const uint8_t *worked,
                       uint32_t n, const st_loadbal_unit_t *u)
{
    int first = 1, shown = 0;
    uint32_t idle = 0;
    for (uint32_t i = 0; i < n; i++)
        idle += !(worked[i / 8] & (1u << (i % 8)));
    for (uint32_t i = 0; i < n;) {
        if (worked[i / 8] & (1u << (i % 8))) {
            i++;
            continue;
        }
        uint32_t j = i;
        while (j + 1 < n && !(worked[(j + 1) / 8] & (1u << ((j + 1) % 8))) &&
               ranks[j + 1] == ranks[j] + 1)
            j++;
        if (shown == 8) {
            st_strbuf_printf(out, ", ... (%u %s)", idle, u->many);
            return;
        }
        shown++;
        st_strbuf_puts(out, first ? "" : ", ");
        first = 0;
        if (j == i)
            st_strbuf_printf(out, "%u", ranks[i]);
        else
            st_strbuf_printf(out, "%u-%u", ranks[i], ranks[j]);
        i = j + 1;
    }
    if (first)
        st_strbuf_puts(out, "-");
}

uint32_t *st_loadbal_ranks(const st_model_t *m, uint32_t *nr, st_strbuf_t *out,
                           const char *what, int *err)
{
    uint32_t *ranks = st_model_ranks(m, nr);
    *err = ranks ? 0 : ST_ENOMEM;
    if (ranks && *nr == 0) {
        free(ranks);
        st_strbuf_printf(out, "no MPI ranks in this result: no %s\n", what);
        return NULL;
    }
    return ranks;
}

const st_loadbal_unit_t st_loadbal_mpi = {"ranks", "RANKS", "MPI RANKS", 0, 0};

int st_loadbal_write(st_strbuf_t *out, const st_model_t *m, int precision)
{
    return st_loadbal_write_as(out, m, precision, &st_loadbal_mpi);
}

int st_loadbal_write_as(st_strbuf_t *out, const st_model_t *m, int precision,
                        const st_loadbal_unit_t *u)
{
    uint32_t nr;
    int err;
    uint32_t *ranks = st_loadbal_ranks(m, &nr, out, "load-balance table", &err);
    if (!ranks)
        return err;
    /* functions are keyed as the function graph keys them: build one graph over all
     * ranks for the list, then one per rank for the times */
    /* what a rank's work is measured in: the primary timer, else stack samples
     * (a sampled run), else calls */
    uint32_t metric = st_model_weight(m);
    int by_samples = metric != ST_METRIC_NONE && m->metrics &&
                     m->metrics->defs[metric].kind == ST_METRIC_SAMPLES;
    st_fgraph_t all;
    int rc = st_fgraph_build_metric(&all, m, -1, metric);
    if (rc < 0) {
        free(ranks);
        return rc;
    }
    size_t bytes = ((size_t)nr + 7) / 8;
    row_t *rows = calloc((size_t)all.nfns + 1, sizeof *rows);
    uint8_t *bits = calloc(((size_t)all.nfns + 1) * bytes, 1);
    uint8_t *any = calloc(bytes, 1);
    if (!rows || !bits || !any) {
        rc = ST_ENOMEM;
        goto done;
    }
    for (uint32_t f = 0; f < all.nfns; f++) {
        rows[f].min = INFINITY;
        rows[f].loc = all.fns[f].loc;
        rows[f].label = all.fns[f].label;
        rows[f].idle = bits + (size_t)f * bytes;
    }
    int by_calls = metric == ST_METRIC_NONE;
    for (uint32_t ri = 0; ri < nr && rc == 0; ri++) {
        st_fgraph_t g;
        rc = st_fgraph_build_metric(&g, m, (long)ranks[ri], metric);
        if (rc < 0)
            break;
        for (uint32_t f = 0; f < g.nfns; f++) {
            uint32_t a = st_fgraph_fn_of(&all, m, g.fns[f].label);
            if (a == UINT32_MAX)
                continue;
            double v = by_calls     ? (double)g.fns[f].nc
                       : by_samples ? g.fns[f].ct
                                    : g.fns[f].ct * 1e-9;
            row_t *r = &rows[a];
            if (by_samples ? v <= 0 : g.fns[f].nc == 0)
                continue;
            r->idle[ri / 8] |= (uint8_t)(1u << (ri % 8));
            any[ri / 8] |= (uint8_t)(1u << (ri % 8));
            r->working++;
            r->sum += v;
            r->sumsq += v * v;
            if (v > r->max)
                r->max = v;
            if (v < r->min)
                r->min = v;
        }
        st_fgraph_free(&g);
    }
    if (rc < 0)
        goto done;
    uint32_t nany = 0;
    for (uint32_t ri = 0; ri < nr; ri++)
        nany += (any[ri / 8] >> (ri % 8)) & 1u;
    st_strbuf_printf(out, "%u of %u %s did any work", nany, nr, u->many);
    if (nany < nr) {
        st_strbuf_puts(out, " (no work: ");
        put_ranges(out, ranks, any, nr, u);
        st_strbuf_putc(out, ')');
    }
    st_strbuf_puts(out, "\n");
    qsort(rows, all.nfns, sizeof *rows, cmp_rows);

    st_grid_t grid;
    st_grid_init(&grid);
    char idle_head[64];
    snprintf(idle_head, sizeof idle_head, "%s WITH NO WORK", u->head);
    const char *heads[] = {"FUNCTION", u->head, "MIN", "MAX", "MEAN", "STDDEV",
                           "IMBALANCE %", idle_head, "TOTAL"};
    int ncols = u->total ? 9 : 8;
    for (int i = 0; i < ncols; i++)
        st_grid_column(&grid, heads[i], i > 0 && i != 7);
    uint32_t shown = 0, more = 0;
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (uint32_t f = 0; f < all.nfns; f++) {
        row_t *r = &rows[f];
        if (r->working == 0)
            continue;
        if (u->top && shown == u->top) {
            more++;
            continue;
        }
        shown++;
        /* idle ranks count as 0 */
        double mean = r->sum / nr;
        double var = r->sumsq / nr - mean * mean;
        double min = r->working < nr ? 0.0 : r->min;
        st_grid_row(&grid);
        if (r->loc != ST_LOC_NONE) {
            const st_loc_t *l = st_loctab_get(m->locs, r->loc);
            const char *file = st_loctab_str(m->locs, l->file);
            const char *base = strrchr(file, '/');
            st_strbuf_puts(&b, st_loctab_str(m->locs, l->name));
            if (strcmp(file, "~") != 0 && l->line > 0)
                st_strbuf_printf(&b, " [%s:%d]", base ? base + 1 : file, (int)l->line);
            else if (strcmp(file, "~") != 0) /* a native function: its file alone */
                st_strbuf_printf(&b, " [%s]", base ? base + 1 : file);
        } else {
            st_strbuf_puts(&b, st_intern_str(m->labels, r->label));
        }
        st_grid_cell(&grid, 0, &b);
        st_strbuf_printf(&b, "%u", r->working);
        st_grid_cell(&grid, 1, &b);
        double vals[4] = {min, r->max, mean, sqrt(var > 0 ? var : 0)};
        for (int i = 0; i < 4; i++) {
            if (by_calls || by_samples)
                st_strbuf_printf(&b, "%.0f", vals[i]);
            else
                st_strbuf_printf(&b, "%.*f", precision, vals[i]);
            st_grid_cell(&grid, 2 + i, &b);
        }
        st_strbuf_printf(&b, "%.1f", r->max > 0 ? 100.0 * (r->max - mean) / r->max : 0.0);
        st_grid_cell(&grid, 6, &b);
        put_ranges(&b, ranks, r->idle, nr, u);
        st_grid_cell(&grid, 7, &b);
        if (u->total) {
            if (by_calls || by_samples)
                st_strbuf_printf(&b, "%.0f", r->sum);
            else
                st_strbuf_printf(&b, "%.*f", precision, r->sum);
            st_grid_cell(&grid, 8, &b);
        }
    }
    if (b.failed)
        grid.failed = 1;
    st_strbuf_free(&b);
    char title[96];
    snprintf(title, sizeof title, "LOAD BALANCE ACROSS %s (%s)", u->title,
             by_calls ? "CALLS" : by_samples ? "SAMPLES" : "SECONDS");
    st_grid_render(out, &grid, title);
    st_grid_free(&grid);
    if (more)
        st_strbuf_printf(out, "... and %u more function%s\n", more, more == 1 ? "" : "s");
done:
    free(rows);
    free(bits);
    free(any);
    free(ranks);
    st_fgraph_free(&all);
    if (rc == 0 && out->failed)
        rc = ST_ENOMEM;
    return rc;
}
