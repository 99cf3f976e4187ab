#include "output/table.h"

#include "model/names.h"
#include "base/err.h"
#include "model/walk.h"
#include "output/grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Appends a label escaped as the grid escapes every cell (st_strbuf_printable, whose
 * output it leaves as it is), cut at ST_TABLE_MAX_LABEL bytes of that text (on a
 * UTF-8 character's start), so that escaping cannot make a cut label longer. */
static void put_label(st_strbuf_t *b, const char *label)
{
    size_t start = b->len;
    st_strbuf_printable(b, label);
    if (b->failed || b->len - start <= ST_TABLE_MAX_LABEL)
        return;
    size_t n = ST_TABLE_MAX_LABEL - 3;
    while (n > 0 && ((unsigned char)b->data[start + n] & 0xC0) == 0x80)
        n--;
    b->len = start + n;
    st_strbuf_puts(b, "...");
}

/* The start of a row's LABEL cell: the thread, and under the top the indentation
 * (at most max_indent levels) and "|_". */
static void put_head(st_strbuf_t *b, const st_model_thread_t *th, uint32_t depth,
                     uint32_t max_indent)
{
    st_strbuf_putc(b, '|');
    st_strbuf_u64(b, th->index);
    st_strbuf_puts(b, ">>> ");
    if (depth > 0) {
        uint32_t levels = depth - 1;
        st_strbuf_fill(b, ' ', 2 * (size_t)(levels < max_indent ? levels : max_indent));
        st_strbuf_puts(b, "|_");
    }
}

/* Starts the row that stands for everything under node `top` (at the depth cap):
 * its first cell, which says how many calls in how many nodes it folds. Returns
 * the calls. */
static uint64_t fold_head(st_grid_t *g, const st_model_thread_t *th, uint32_t top,
                          uint32_t max_indent, st_strbuf_t *b)
{
    uint64_t calls = 0, nodes = 0;
    st_walk_t w;
    st_walk_begin(&w, th->paths, top);
    while (st_walk_pre(&w)) {
        calls += st_model_calls(th, w.node);
        nodes++;
    }
    st_grid_row(g);
    put_head(b, th, th->paths->nodes[top].depth + 1, max_indent);
    st_strbuf_printf(b, "... %llu calls in %llu deeper nodes (folded)", (unsigned long long)calls,
                     (unsigned long long)nodes);
    st_grid_cell(g, 0, b);
    return calls;
}

/* The row that stands for everything under node `top` (at the depth cap): its
 * calls and, for a timer, their time (the sum of top's children's times). */
static void fold_row(st_grid_t *g, const st_model_t *m, const st_model_thread_t *th, uint32_t top,
                     st_component_t comp, int precision, uint32_t max_indent, st_strbuf_t *b)
{
    const st_pathtab_t *t = th->paths;
    const st_component_info_t *info = st_component_info(comp);
    uint64_t ticks = 0;
    for (uint32_t c = t->nodes[top].first_child; c != ST_PATH_NONE; c = t->nodes[c].next_sibling)
        ticks += info->timer >= 0 ? st_model_tstat(th, info->timer, c)->sum : 0;
    uint64_t calls = fold_head(g, th, top, max_indent, b);
    uint32_t depth = t->nodes[top].depth + 1;
    st_grid_cell_uint(g, 1, calls);
    st_grid_cell_uint(g, 2, depth);
    st_grid_cell_str(g, 3, info->name);
    if (info->timer < 0) {
        st_grid_cell_uint(g, 4, calls);
        return;
    }
    st_grid_cell_str(g, 4, info->units);
    st_grid_cell_fixed(g, 5, precision, (double)ticks * m->ns_per_tick[info->timer] * 1e-9);
    st_grid_cell_str(g, 11, "100.0");
}

/* The timer cells of node n (SUM MEAN MIN MAX VAR STDDEV, then % SELF), in both
 * passes the same doubles. */
#define TIMER_CELLS 7
static void timer_values(const st_model_t *m, const st_model_thread_t *th, int timer, uint32_t n,
                         uint64_t calls, double v[TIMER_CELLS])
{
    const st_tstat_t *a = st_model_tstat(th, timer, n);
    double sec = m->ns_per_tick[timer] * 1e-9;
    double mean, var;
    st_tstat_stats(a, &mean, &var);
    var *= sec * sec;
    v[0] = (double)a->sum * sec;
    v[1] = mean * sec;
    v[2] = calls ? (double)a->min * sec : 0.0;
    v[3] = (double)a->max * sec;
    v[4] = var;
    v[5] = sqrt(var);
    v[6] = a->sum ? 100.0 * (double)a->self / (double)a->sum : 0.0;
}

/* Timer cell i's column and decimals. */
static int cell_col(int i) { return i < TIMER_CELLS - 1 ? 5 + i : 11; }
static int cell_precision(int i, int precision) { return i < TIMER_CELLS - 1 ? precision : 1; }

/* The depth cap: what node n calls is one folded row. */
static int folds(const st_path_t *node)
{
    return node->first_child != ST_PATH_NONE && node->depth >= ST_TABLE_MAX_DEPTH;
}

static void add_rows(st_grid_t *g, const st_model_t *m, const st_model_thread_t *th,
                     st_component_t comp, int precision, uint32_t max_indent)
{
    const st_pathtab_t *t = th->paths;
    const st_component_info_t *info = st_component_info(comp);
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_walk_t w;
    st_walk_begin(&w, t, 0);
    while (!g->failed && st_walk_pre(&w)) {
        uint32_t n = w.node;
        const st_path_t *node = &t->nodes[n];
        uint64_t calls = st_model_calls(th, n);
        st_grid_row(g);
        put_head(&b, th, node->depth, max_indent);
        put_label(&b, st_name_text(m, node->label));
        st_grid_cell(g, 0, &b);
        st_grid_cell_uint(g, 1, calls);
        st_grid_cell_uint(g, 2, node->depth);
        st_grid_cell_str(g, 3, info->name);
        if (info->timer < 0) {
            st_grid_cell_uint(g, 4, calls);
        } else {
            double v[TIMER_CELLS];
            timer_values(m, th, info->timer, n, calls, v);
            st_grid_cell_str(g, 4, info->units);
            for (int i = 0; i < TIMER_CELLS; i++)
                st_grid_cell_fixed(g, cell_col(i), cell_precision(i, precision), v[i]);
        }
        /* below the depth cap, one row for the rest */
        if (folds(node)) {
            fold_row(g, m, th, n, comp, precision, max_indent, &b);
            st_walk_skip(&w);
        }
    }
    if (b.failed)
        g->failed = 1;
    st_strbuf_free(&b);
}

/* The first pass of a timer or count table, without making each row's text: a
 * column is as wide as its widest cell, and a number column's widest cell is its
 * largest value's (the text of a value >= 0 only grows with it). So each number
 * column keeps its largest value, each label's text is measured once, and the
 * widths are set at the end. Values below 0, infinite or NaN (none in a profile)
 * and the folded rows are measured as they come, as add_rows measures them. */
typedef struct {
    uint64_t calls;
    uint32_t depth;
    double top[TIMER_CELLS];       /* -1: no value yet */
    uint32_t *label_width;         /* per label id: the width of its text + 1; 0: not yet */
    uint32_t nlabels;
    size_t rows;
    st_strbuf_t b;
} measure_t;

/* The width of the label cell's text after its head (set_cell escapes a text that
 * is not plain once more). */
static size_t label_width(measure_t *ms, const st_model_t *m, uint32_t label)
{
    uint32_t *known = label < ms->nlabels ? &ms->label_width[label] : NULL;
    if (known && *known)
        return *known - 1;
    st_strbuf_reset(&ms->b);
    put_label(&ms->b, st_name_text(m, label));
    size_t w = ms->b.len;
    if (st_text_plain_run(st_strbuf_cstr(&ms->b), w, 0) != w) {
        st_strbuf_t e;
        st_strbuf_init(&e);
        st_strbuf_printable(&e, st_strbuf_cstr(&ms->b));
        w = e.len;
        st_strbuf_free(&e);
    }
    if (known && w < UINT32_MAX)
        *known = (uint32_t)w + 1;
    return w;
}

/* The width of put_head's text. */
static size_t head_width(const st_model_thread_t *th, uint32_t depth, uint32_t max_indent)
{
    size_t w = 1 + st_grid_uint_width(th->index) + 4;
    if (depth > 0)
        w += 2 * (size_t)(depth - 1 < max_indent ? depth - 1 : max_indent) + 2;
    return w;
}

static void measure_rows(st_grid_t *g, measure_t *ms, const st_model_t *m,
                         const st_model_thread_t *th, st_component_t comp, int precision,
                         uint32_t max_indent)
{
    const st_pathtab_t *t = th->paths;
    const st_component_info_t *info = st_component_info(comp);
    st_walk_t w;
    st_walk_begin(&w, t, 0);
    while (!g->failed && st_walk_pre(&w)) {
        uint32_t n = w.node;
        const st_path_t *node = &t->nodes[n];
        uint64_t calls = st_model_calls(th, n);
        ms->rows++;
        st_grid_widen(g, 0, head_width(th, node->depth, max_indent) +
                                label_width(ms, m, node->label));
        if (calls > ms->calls)
            ms->calls = calls;
        if (node->depth > ms->depth)
            ms->depth = node->depth;
        if (info->timer >= 0) {
            double v[TIMER_CELLS];
            timer_values(m, th, info->timer, n, calls, v);
            for (int i = 0; i < TIMER_CELLS; i++) {
                if (v[i] >= 0 && isfinite(v[i]) && !signbit(v[i]))
                    ms->top[i] = v[i] > ms->top[i] ? v[i] : ms->top[i];
                else
                    st_grid_widen_fixed(g, cell_col(i), cell_precision(i, precision), v[i]);
            }
        }
        if (folds(node)) {
            st_strbuf_reset(&ms->b);
            fold_row(g, m, th, n, comp, precision, max_indent, &ms->b);
            st_walk_skip(&w);
        }
    }
    if (ms->b.failed)
        g->failed = 1;
}

static void measure_begin(measure_t *ms, const st_model_t *m)
{
    memset(ms, 0, sizeof *ms);
    for (int i = 0; i < TIMER_CELLS; i++)
        ms->top[i] = -1;
    st_strbuf_init(&ms->b);
    ms->nlabels = m->labels ? st_intern_count(m->labels) : 0;
    ms->label_width = ms->nlabels ? calloc(ms->nlabels, sizeof *ms->label_width) : NULL;
    if (!ms->label_width)
        ms->nlabels = 0; /* each label measured at each of its rows */
}

/* The widths measure_rows found, given to the columns; frees what it kept. */
static void measure_end(st_grid_t *g, measure_t *ms, st_component_t comp, int precision)
{
    const st_component_info_t *info = st_component_info(comp);
    free(ms->label_width);
    st_strbuf_free(&ms->b);
    if (!ms->rows)
        return;
    st_grid_widen(g, 1, st_grid_uint_width(ms->calls));
    st_grid_widen(g, 2, st_grid_uint_width(ms->depth));
    st_grid_widen(g, 3, strlen(info->name));
    if (info->timer < 0) {
        st_grid_widen(g, 4, st_grid_uint_width(ms->calls));
        return;
    }
    st_grid_widen(g, 4, strlen(info->units));
    for (int i = 0; i < TIMER_CELLS; i++)
        if (ms->top[i] >= 0)
            st_grid_widen_fixed(g, cell_col(i), cell_precision(i, precision), ms->top[i]);
}

/* The columns of a metric table: an index each, -1 where the table has none. A
 * count or bytes table: LABEL COUNT DEPTH METRIC UNITS SELF TOTAL % SELF (self of
 * total). A samples table (py-spy's and perf's reading): LABEL [COUNT] DEPTH SELF
 * TOTAL % SELF % TOTAL, both percentages of all the samples of the table, with
 * COUNT only where calls were counted too (a profile with a timer). */
typedef struct {
    int count, depth, metric, units, self, total, pself, ptotal;
    double all;               /* samples: the table's samples (percent base) */
} mcols_t;

/* The rows of one thread in the table of a count, bytes or samples metric. */
static void add_metric_rows(st_grid_t *g, const st_model_t *m, const st_model_thread_t *th,
                            const st_metric_def_t *d, uint32_t metric, uint32_t max_indent,
                            const mcols_t *c)
{
    const st_pathtab_t *t = th->paths;
    double *incl, *self;
    if (st_model_values(m, th, metric, &incl, &self) < 0) {
        g->failed = 1;
        return;
    }
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_walk_t w;
    st_walk_begin(&w, t, 0);
    while (!g->failed && st_walk_pre(&w)) {
        uint32_t n = w.node;
        const st_path_t *node = &t->nodes[n];
        uint64_t calls = st_model_calls(th, n);
        double own = self[n], total = incl[n];
        int fold = folds(node);
        for (int row = 0; row <= fold; row++) {
            uint32_t depth = node->depth + (uint32_t)row;
            if (row == 0) {
                st_grid_row(g);
                put_head(&b, th, depth, max_indent);
                put_label(&b, st_name_text(m, node->label));
                st_grid_cell(g, 0, &b);
            } else { /* everything under the depth cap, in one row */
                calls = fold_head(g, th, n, max_indent, &b);
                own = total = incl[n] - self[n];
            }
            if (c->count >= 0)
                st_grid_cell_uint(g, c->count, calls);
            st_grid_cell_uint(g, c->depth, depth);
            if (c->metric >= 0) {
                st_grid_cell_str(g, c->metric, d->name);
                st_grid_cell_str(g, c->units, d->unit);
            }
            st_grid_cell_uint(g, c->self, (uint64_t)own);
            st_grid_cell_uint(g, c->total, (uint64_t)total);
            if (c->ptotal < 0) {
                st_grid_cell_fixed(g, c->pself, 1, total > 0 ? 100.0 * own / total : 0.0);
            } else {
                st_grid_cell_fixed(g, c->pself, 1, c->all > 0 ? 100.0 * own / c->all : 0.0);
                st_grid_cell_fixed(g, c->ptotal, 1, c->all > 0 ? 100.0 * total / c->all : 0.0);
            }
        }
        if (fold)
            st_walk_skip(&w);
    }
    if (b.failed)
        g->failed = 1;
    st_strbuf_free(&b);
    free(incl);
    free(self);
}

/* Rows (at most one a node) decide how far indentation goes. */
static uint32_t max_indent_of(const st_model_t *m)
{
    uint64_t nodes = 0;
    for (size_t i = 0; i < m->nthreads; i++)
        nodes += m->threads[i].paths->nnodes - 1;
    return nodes > ST_TABLE_BIG_ROWS ? ST_TABLE_BIG_INDENT : ST_TABLE_MAX_INDENT;
}

/* The samples of metric `metric` in every thread: its cells summed, the roots'
 * included (samples in code the filters leave out). */
static double all_samples(const st_model_t *m, uint32_t metric)
{
    double all = 0;
    for (size_t i = 0; i < m->nthreads; i++) {
        const st_pathtab_t *t = m->threads[i].paths;
        if (metric < t->cols.ncols)
            for (uint32_t n = 0; n < t->nnodes; n++)
                all += (double)st_mcols_u64(&t->cols, metric)[n];
    }
    return all;
}

int st_table_write_metric(st_strbuf_t *out, const st_model_t *m, uint32_t metric)
{
    const st_metric_def_t *d = m->metrics ? st_metrics_get(m->metrics, metric) : NULL;
    if (!d || (d->kind != ST_METRIC_COUNT && d->kind != ST_METRIC_BYTES &&
               d->kind != ST_METRIC_SAMPLES))
        return ST_EINVAL;
    st_grid_t g;
    st_grid_init(&g);
    mcols_t c;
    if (d->kind == ST_METRIC_SAMPLES) {
        int calls = st_model_timer(m) >= 0;
        c = (mcols_t){.count = calls ? 1 : -1, .depth = 1 + calls, .metric = -1, .units = -1,
                      .self = 2 + calls, .total = 3 + calls, .pself = 4 + calls,
                      .ptotal = 5 + calls, .all = all_samples(m, metric)};
        st_grid_column(&g, "LABEL", 0);
        if (calls)
            st_grid_column(&g, "COUNT", 1);
        static const char *heads[] = {"DEPTH", "SELF", "TOTAL", "% SELF", "% TOTAL"};
        for (int i = 0; i < 5; i++)
            st_grid_column(&g, heads[i], 1);
    } else {
        c = (mcols_t){.count = 1, .depth = 2, .metric = 3, .units = 4, .self = 5, .total = 6,
                      .pself = 7, .ptotal = -1, .all = 0};
        static const char *heads[] = {"LABEL", "COUNT", "DEPTH", "METRIC", "UNITS", "SELF",
                                      "TOTAL", "% SELF"};
        for (int i = 0; i < 8; i++)
            st_grid_column(&g, heads[i], i == 1 || i == 2 || i > 4);
    }
    uint32_t max_indent = max_indent_of(m);
    /* the title: the description in capitals, else the name */
    st_strbuf_t title;
    st_strbuf_init(&title);
    for (const char *t = *d->desc ? d->desc : d->name; *t; t++)
        st_strbuf_putc(&title, *t >= 'a' && *t <= 'z' ? (char)(*t - 'a' + 'A') : *t);
    st_grid_measure(&g);
    for (size_t i = 0; i < m->nthreads; i++)
        add_metric_rows(&g, m, &m->threads[i], d, metric, max_indent, &c);
    st_grid_stream(&g, out, st_strbuf_cstr(&title));
    for (size_t i = 0; i < m->nthreads; i++)
        add_metric_rows(&g, m, &m->threads[i], d, metric, max_indent, &c);
    st_grid_end(&g);
    int failed = g.failed || title.failed;
    st_grid_free(&g);
    st_strbuf_free(&title);
    return failed ? ST_ENOMEM : 0;
}

void st_table_write(st_strbuf_t *out, const st_model_t *m, st_component_t comp, int precision)
{
    const st_component_info_t *info = st_component_info(comp);
    st_grid_t g;
    st_grid_init(&g);
    st_grid_column(&g, "LABEL", 0);
    st_grid_column(&g, "COUNT", 1);
    st_grid_column(&g, "DEPTH", 1);
    st_grid_column(&g, "METRIC", 0);
    if (info->timer < 0) {
        st_grid_column(&g, "SUM", 1);
    } else {
        static const char *heads[] = {"UNITS", "SUM", "MEAN", "MIN", "MAX", "VAR", "STDDEV",
                                      "% SELF"};
        for (int i = 0; i < 8; i++)
            st_grid_column(&g, heads[i], i > 0);
    }
    uint32_t max_indent = max_indent_of(m);
    /* Streamed: a first pass finds the columns' widths, a second writes each row as
     * it is made, so the table costs one row of memory, not a grid of every row
     * (~150 bytes a node, a third of the call tree). */
    st_grid_measure(&g);
    measure_t ms;
    measure_begin(&ms, m);
    for (size_t i = 0; i < m->nthreads; i++)
        measure_rows(&g, &ms, m, &m->threads[i], comp, precision, max_indent);
    measure_end(&g, &ms, comp, precision);
    st_grid_stream(&g, out, info->title);
    for (size_t i = 0; i < m->nthreads; i++)
        add_rows(&g, m, &m->threads[i], comp, precision, max_indent);
    st_grid_end(&g);
    st_grid_free(&g);
}
