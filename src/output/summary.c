#define _GNU_SOURCE /* qsort_r */
#include "output/summary.h"

#include <stdlib.h>

#include "base/err.h"
#include "core/components.h"
#include "output/fgraph.h"
#include "output/grid.h"

static double weight(const st_fgraph_t *g, const st_fnode_t *f)
{
    return g->timer >= 0 ? f->tt : (double)f->nc;
}

/* Own time (or calls), largest first; ties by first seen. */
static int by_weight(const void *a, const void *b, void *graph)
{
    const st_fgraph_t *g = graph;
    const st_fnode_t *fa = &g->fns[*(const uint32_t *)a];
    const st_fnode_t *fb = &g->fns[*(const uint32_t *)b];
    double wa = weight(g, fa), wb = weight(g, fb);
    if (wa != wb)
        return wa < wb ? 1 : -1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int st_summary_write(st_strbuf_t *out, const st_model_t *m, size_t top, int precision)
{
    st_fgraph_t g;
    int rc = st_fgraph_build(&g, m, -1);
    if (rc < 0)
        return rc;
    uint32_t *order = malloc(((size_t)g.nfns + 1) * sizeof *order);
    if (!order) {
        st_fgraph_free(&g);
        return ST_ENOMEM;
    }
    for (uint32_t f = 0; f < g.nfns; f++)
        order[f] = f;
    qsort_r(order, g.nfns, sizeof *order, by_weight, &g);

    st_grid_t grid;
    st_grid_init(&grid);
    int timed = g.timer >= 0;
    st_grid_column(&grid, "FUNCTION", 0);
    st_grid_column(&grid, "CALLS", 1);
    if (timed) {
        st_grid_column(&grid, "SELF (sec)", 1);
        st_grid_column(&grid, "% SELF", 1);
        st_grid_column(&grid, "TOTAL (sec)", 1);
    } else {
        st_grid_column(&grid, "% CALLS", 1);
    }
    double all = 0;
    for (uint32_t f = 0; f < g.nfns; f++)
        all += weight(&g, &g.fns[f]);
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (size_t i = 0; i < top && i < g.nfns; i++) {
        const st_fnode_t *f = &g.fns[order[i]];
        st_grid_row(&grid);
        st_fgraph_name(&g, m, order[i], 0, &b);
        st_grid_cell(&grid, 0, &b);
        if (f->cc != f->nc)
            st_strbuf_printf(&b, "%llu/%llu", (unsigned long long)f->nc, (unsigned long long)f->cc);
        else
            st_strbuf_printf(&b, "%llu", (unsigned long long)f->nc);
        st_grid_cell(&grid, 1, &b);
        double share = all > 0 ? 100.0 * weight(&g, f) / all : 0.0;
        if (timed) {
            st_strbuf_printf(&b, "%.*f", precision, f->tt * 1e-9);
            st_grid_cell(&grid, 2, &b);
            st_strbuf_printf(&b, "%.1f", share);
            st_grid_cell(&grid, 3, &b);
            st_strbuf_printf(&b, "%.*f", precision, f->ct * 1e-9);
            st_grid_cell(&grid, 4, &b);
        } else {
            st_strbuf_printf(&b, "%.1f", share);
            st_grid_cell(&grid, 2, &b);
        }
    }
    if (b.failed)
        grid.failed = 1;
    st_strbuf_free(&b);
    const st_component_info_t *info =
        st_component_info(g.timer == ST_TIMER_WALL  ? ST_COMP_WALL_CLOCK
                          : g.timer == ST_TIMER_CPU ? ST_COMP_CPU_CLOCK
                                                    : ST_COMP_TRIP_COUNT);
    st_strbuf_t title;
    st_strbuf_init(&title);
    st_strbuf_printf(&title, "TOP %zu FUNCTIONS BY %s (%s)", top < g.nfns ? top : (size_t)g.nfns,
                     timed ? "OWN TIME" : "CALLS", info->name);
    st_grid_render(out, &grid, st_strbuf_cstr(&title));
    st_strbuf_free(&title);
    st_grid_free(&grid);
    free(order);
    st_fgraph_free(&g);
    return out->failed ? ST_ENOMEM : 0;
}
