#include "output/table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXCOLS 12
#define MINWIDTH 8

typedef struct {
    const char *header;
    int right;     /* right-aligned (numbers) */
    size_t width;  /* the cell's width, its two padding spaces included */
} column_t;

typedef struct {
    column_t cols[MAXCOLS];
    int ncols;
    char **cells;  /* nrows * ncols strings */
    size_t nrows, caprows;
    int failed;
} grid_t;

static void grid_add_row(grid_t *g)
{
    if (g->failed)
        return;
    if (g->nrows == g->caprows) {
        size_t cap = g->caprows ? g->caprows * 2 : 64;
        char **cells = realloc(g->cells, cap * (size_t)g->ncols * sizeof *cells);
        if (!cells) {
            g->failed = 1;
            return;
        }
        g->cells = cells;
        g->caprows = cap;
    }
    memset(g->cells + g->nrows * (size_t)g->ncols, 0, (size_t)g->ncols * sizeof *g->cells);
    g->nrows++;
}

static void grid_set(grid_t *g, int col, st_strbuf_t *text)
{
    if (g->failed)
        return;
    char *s = strdup(st_strbuf_cstr(text));
    if (!s) {
        g->failed = 1;
        return;
    }
    g->cells[(g->nrows - 1) * (size_t)g->ncols + (size_t)col] = s;
    size_t w = strlen(s) + 2;
    if (w > g->cols[col].width)
        g->cols[col].width = w;
    st_strbuf_reset(text);
}

static void grid_free(grid_t *g)
{
    for (size_t i = 0; i < g->nrows * (size_t)g->ncols; i++)
        free(g->cells[i]);
    free(g->cells);
}

/* timemory's centring of a header in a cell of width w (padding included). */
static void put_header(st_strbuf_t *out, const char *text, size_t width)
{
    int w = (int)width, len = (int)strlen(text);
    int rem = w / 2 - (len + 1) / 2;
    if (rem < 0)
        rem = 0;
    if (len + rem > w - 3)
        rem = w - 3 - len;
    rem -= 1;
    if (rem < 0)
        rem = 0;
    st_strbuf_putc(out, ' ');
    st_strbuf_fill(out, ' ', (size_t)rem);
    st_strbuf_puts(out, text);
    int used = rem + len;
    if (used < w - 2)
        st_strbuf_fill(out, ' ', (size_t)(w - 2 - used));
    st_strbuf_putc(out, ' ');
}

static void put_rule(st_strbuf_t *out, const grid_t *g, char between)
{
    st_strbuf_putc(out, '|');
    for (int c = 0; c < g->ncols; c++) {
        if (c)
            st_strbuf_putc(out, between);
        st_strbuf_fill(out, '-', g->cols[c].width);
    }
    st_strbuf_puts(out, "|\n");
}

static void render(st_strbuf_t *out, const grid_t *g, const char *title)
{
    size_t inner = (size_t)g->ncols - 1;
    for (int c = 0; c < g->ncols; c++)
        inner += g->cols[c].width;
    size_t tlen = strlen(title);
    size_t left = inner > tlen ? (inner - tlen + 1) / 2 : 0;
    size_t right = inner > tlen + left ? inner - tlen - left : 0;

    put_rule(out, g, '-');
    st_strbuf_putc(out, '|');
    st_strbuf_fill(out, ' ', left);
    st_strbuf_puts(out, title);
    st_strbuf_fill(out, ' ', right);
    st_strbuf_puts(out, "|\n");
    put_rule(out, g, '-');
    for (int c = 0; c < g->ncols; c++) {
        st_strbuf_putc(out, '|');
        put_header(out, g->cols[c].header, g->cols[c].width);
    }
    st_strbuf_puts(out, "|\n");
    put_rule(out, g, '|');
    for (size_t r = 0; r < g->nrows; r++) {
        for (int c = 0; c < g->ncols; c++) {
            const char *s = g->cells[r * (size_t)g->ncols + (size_t)c];
            size_t pad = g->cols[c].width - 2 - strlen(s);
            st_strbuf_puts(out, "| ");
            if (g->cols[c].right)
                st_strbuf_fill(out, ' ', pad);
            st_strbuf_puts(out, s);
            if (!g->cols[c].right)
                st_strbuf_fill(out, ' ', pad);
            st_strbuf_putc(out, ' ');
        }
        st_strbuf_puts(out, "|\n");
    }
    put_rule(out, g, '-');
}

static void add_column(grid_t *g, const char *header, int right)
{
    column_t *c = &g->cols[g->ncols++];
    c->header = header;
    c->right = right;
    c->width = strlen(header) + 2 > MINWIDTH ? strlen(header) + 2 : MINWIDTH;
}

static void add_rows(grid_t *g, const st_model_t *m, const st_model_thread_t *th,
                     st_component_t comp, int precision)
{
    const st_calltree_t *t = th->tree;
    const st_component_info_t *info = st_component_info(comp);
    st_strbuf_t b;
    st_strbuf_init(&b);
    /* Depth-first, children in the order they were first called, without recursion
     * (trees can be thousands of levels deep). */
    uint32_t n = t->nodes[0].first_child;
    while (n != ST_NODE_NONE && !g->failed) {
        const st_node_t *node = &t->nodes[n];
        grid_add_row(g);
        st_strbuf_printf(&b, "|%u>>> ", th->index);
        if (node->depth > 0) {
            st_strbuf_fill(&b, ' ', 2 * (size_t)(node->depth - 1));
            st_strbuf_puts(&b, "|_");
        }
        st_strbuf_puts(&b, st_intern_str(m->labels, node->label));
        grid_set(g, 0, &b);
        st_strbuf_printf(&b, "%llu", (unsigned long long)node->count);
        grid_set(g, 1, &b);
        st_strbuf_printf(&b, "%u", node->depth);
        grid_set(g, 2, &b);
        st_strbuf_puts(&b, info->name);
        grid_set(g, 3, &b);
        if (info->timer < 0) {
            st_strbuf_printf(&b, "%llu", (unsigned long long)node->count);
            grid_set(g, 4, &b);
        } else {
            const st_accum_t *a = &node->acc[info->timer];
            double sec = m->ns_per_tick[info->timer] * 1e-9;
            double mean, var;
            st_accum_stats(node, info->timer, &mean, &var);
            var *= sec * sec;
            double vals[6] = {
                (double)a->sum * sec,
                mean * sec,
                node->count ? (double)a->min * sec : 0.0,
                (double)a->max * sec,
                var,
                sqrt(var),
            };
            st_strbuf_puts(&b, info->units);
            grid_set(g, 4, &b);
            for (int i = 0; i < 6; i++) {
                st_strbuf_printf(&b, "%.*f", precision, vals[i]);
                grid_set(g, 5 + i, &b);
            }
            st_strbuf_printf(&b, "%.1f", a->sum ? 100.0 * (double)a->self / (double)a->sum : 0.0);
            grid_set(g, 11, &b);
        }
        /* next in depth-first order */
        if (node->first_child != ST_NODE_NONE) {
            n = node->first_child;
            continue;
        }
        while (n != ST_NODE_NONE && n != 0 && t->nodes[n].next_sibling == ST_NODE_NONE)
            n = t->nodes[n].parent;
        n = (n == ST_NODE_NONE || n == 0) ? ST_NODE_NONE : t->nodes[n].next_sibling;
    }
    if (b.failed)
        g->failed = 1;
    st_strbuf_free(&b);
}

void st_table_write(st_strbuf_t *out, const st_model_t *m, st_component_t comp, int precision)
{
    const st_component_info_t *info = st_component_info(comp);
    grid_t g;
    memset(&g, 0, sizeof g);
    add_column(&g, "LABEL", 0);
    add_column(&g, "COUNT", 1);
    add_column(&g, "DEPTH", 1);
    add_column(&g, "METRIC", 0);
    if (info->timer < 0) {
        add_column(&g, "SUM", 1);
    } else {
        static const char *heads[] = {"UNITS", "SUM", "MEAN", "MIN", "MAX", "VAR", "STDDEV",
                                      "% SELF"};
        for (int i = 0; i < 8; i++)
            add_column(&g, heads[i], i > 0);
    }
    for (size_t i = 0; i < m->nthreads; i++)
        add_rows(&g, m, &m->threads[i], comp, precision);
    if (g.failed)
        out->failed = 1;
    else
        render(out, &g, info->title);
    grid_free(&g);
}
