#include "output/sampling.h"

#include <stdio.h>
#include <string.h>

#include "output/grid.h"

/* A value in its unit: bytes in MiB, the rest as they are. */
static void put_value(st_strbuf_t *b, double v, const char *units)
{
    if (strcmp(units, "bytes") == 0)
        st_strbuf_printf(b, "%.3f", v / 1048576.0);
    else if (strcmp(units, "count") == 0)
        st_strbuf_printf(b, "%.0f", v);
    else
        st_strbuf_printf(b, "%.3f", v);
}

void st_sampling_table_write(st_strbuf_t *out, const st_model_t *m)
{
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "METRIC", 0);
    st_grid_column(&g, "UNITS", 0);
    st_grid_column(&g, "MIN", 1);
    st_grid_column(&g, "MEAN", 1);
    st_grid_column(&g, "MAX", 1);
    st_strbuf_t b;
    st_strbuf_init(&b);
    for (size_t k = 0; k < m->nsampled; k++) {
        const st_model_metric_t *x = &m->sampled[k];
        st_grid_row(&g);
        st_grid_cell_str(&g, 0, x->name);
        st_grid_cell_str(&g, 1, strcmp(x->units, "bytes") == 0 ? "MiB" : x->units);
        put_value(&b, x->min, x->units);
        st_grid_cell(&g, 2, &b);
        put_value(&b, x->mean, x->units);
        st_grid_cell(&g, 3, &b);
        put_value(&b, x->max, x->units);
        st_grid_cell(&g, 4, &b);
    }
    char title[96];
    snprintf(title, sizeof title, "PROCESS SAMPLING (%llu SAMPLES AT %g PER SECOND)",
             (unsigned long long)m->nsamples, m->sampling_freq);
    st_grid_render(out, &g, title);
    for (size_t k = 0; k < m->nsampled; k++)
        if (strncmp(m->sampled[k].name, "network.", 8) == 0) {
            st_strbuf_puts(out, "network.received, network.sent: bytes through every interface "
                                "of the network namespace (all its processes, not only this "
                                "one) since sampling began\n");
            break;
        }
    st_grid_free(&g);
    st_strbuf_free(&b);
}
