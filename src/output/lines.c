/* The sampled lines' table (see lines.h). */
#include "output/lines.h"

#include "output/grid.h"

void st_lines_table_write(st_strbuf_t *out, const st_model_t *m, size_t limit)
{
    const st_model_stacks_t *st = m->stacks;
    if (!st || !st->nlines)
        return;
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "LINE", 0);
    st_grid_column(&g, "FUNCTION", 0);
    st_grid_column(&g, "SELF", 1);
    st_grid_column(&g, "% SELF", 1);
    st_strbuf_t b;
    st_strbuf_init(&b);
    size_t n = limit && limit < st->nlines ? limit : st->nlines;
    double all = st->periods ? (double)st->periods : 1.0;
    uint64_t rest = 0;
    for (size_t i = n; i < st->nlines; i++)
        rest += st->lines[i].periods;
    for (size_t i = 0; i < n; i++) {
        const st_model_line_t *l = &st->lines[i];
        st_grid_row(&g);
        st_strbuf_printf(&b, "%s:%u", l->file, l->line);
        st_grid_cell(&g, 0, &b);
        st_grid_cell_str(&g, 1, l->function);
        st_strbuf_printf(&b, "%llu", (unsigned long long)l->periods);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.1f", 100.0 * (double)l->periods / all);
        st_grid_cell(&g, 3, &b);
    }
    if (n < st->nlines) {
        st_grid_row(&g);
        st_strbuf_printf(&b, "... %zu more lines", st->nlines - n);
        st_grid_cell(&g, 0, &b);
        st_strbuf_printf(&b, "%llu", (unsigned long long)rest);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.1f", 100.0 * (double)rest / all);
        st_grid_cell(&g, 3, &b);
    }
    st_strbuf_free(&b);
    st_grid_render(out, &g, "SAMPLED LINES (THE INNERMOST PYTHON FRAME'S)");
    if (g.failed)
        out->failed = 1;
    st_grid_free(&g);
}

void st_memlines_table_write(st_strbuf_t *out, const st_model_t *m, size_t limit)
{
    if (!m->nmemlines)
        return;
    const double mib = 1024.0 * 1024.0;
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "LINE", 0);
    st_grid_column(&g, "FUNCTION", 0);
    st_grid_column(&g, "AT PEAK (MiB)", 1);
    st_grid_column(&g, "AT END (MiB)", 1);
    st_strbuf_t b;
    st_strbuf_init(&b);
    size_t n = limit && limit < m->nmemlines ? limit : m->nmemlines;
    uint64_t peak = 0, end = 0;
    for (size_t i = n; i < m->nmemlines; i++) {
        peak += m->memlines[i].peak;
        end += m->memlines[i].at_exit;
    }
    for (size_t i = 0; i < n; i++) {
        const st_model_memline_t *l = &m->memlines[i];
        st_grid_row(&g);
        st_strbuf_printf(&b, "%s:%u", l->file, l->line);
        st_grid_cell(&g, 0, &b);
        st_grid_cell_str(&g, 1, l->function);
        st_strbuf_printf(&b, "%.3f", (double)l->peak / mib);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.3f", (double)l->at_exit / mib);
        st_grid_cell(&g, 3, &b);
    }
    if (n < m->nmemlines) {
        st_grid_row(&g);
        st_strbuf_printf(&b, "... %zu more lines", m->nmemlines - n);
        st_grid_cell(&g, 0, &b);
        st_strbuf_printf(&b, "%.3f", (double)peak / mib);
        st_grid_cell(&g, 2, &b);
        st_strbuf_printf(&b, "%.3f", (double)end / mib);
        st_grid_cell(&g, 3, &b);
    }
    st_strbuf_free(&b);
    st_grid_render(out, &g, "MEMORY HELD BY LINE (SAMPLED ALLOCATIONS)");
    if (g.failed)
        out->failed = 1;
    st_grid_free(&g);
}
