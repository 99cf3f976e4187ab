/* The differential flame graph (see diffgraph.h). */
#include "output/diffgraph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/names.h"
#include "model/walk.h"
#include "output/fgraph.h"
#include "output/html.h"

#define WIDTH 1200.0
#define ROW 17
#define MAX_ROWS 256
#define HIDDEN UINT32_MAX

int st_dtree_init(st_dtree_t *t)
{
    memset(t, 0, sizeof *t);
    t->nodes = calloc(64, sizeof *t->nodes);
    if (!t->nodes)
        return ST_ENOMEM;
    t->capnodes = 64;
    t->nnodes = 1;
    t->nodes[0].parent = t->nodes[0].first_child = t->nodes[0].next_sibling = UINT32_MAX;
    t->nodes[0].last_child = UINT32_MAX;
    return 0;
}

void st_dtree_free(st_dtree_t *t)
{
    for (uint32_t i = 0; t->nodes && i < t->nnodes; i++)
        free(t->nodes[i].name);
    free(t->nodes);
    st_u64map_free(&t->index);
    memset(t, 0, sizeof *t);
}

/* The child `name` of `parent`, made when new; UINT32_MAX when out of memory. */
static uint32_t child(st_dtree_t *t, uint32_t parent, const char *name)
{
    for (uint64_t k = st_u64map_text_key(name, parent);; k = st_u64map_next_key(k)) {
        uint32_t i = st_u64map_get(&t->index, k);
        if (i != UINT32_MAX) {
            if (t->nodes[i].parent == parent && strcmp(t->nodes[i].name, name) == 0)
                return i;
            continue;
        }
        if (t->nnodes == t->capnodes) {
            st_dnode_t *n = realloc(t->nodes, 2 * (size_t)t->capnodes * sizeof *n);
            if (!n)
                return UINT32_MAX;
            t->nodes = n;
            t->capnodes *= 2;
        }
        st_dnode_t *n = &t->nodes[t->nnodes];
        memset(n, 0, sizeof *n);
        n->parent = parent;
        n->first_child = n->next_sibling = n->last_child = UINT32_MAX;
        if (!(n->name = strdup(name)) || st_u64map_put(&t->index, k, t->nnodes, NULL) < 0) {
            free(n->name);
            return UINT32_MAX;
        }
        st_dnode_t *p = &t->nodes[parent];
        if (p->last_child == UINT32_MAX)
            p->first_child = t->nnodes;
        else
            t->nodes[p->last_child].next_sibling = t->nnodes;
        p->last_child = t->nnodes;
        return t->nnodes++;
    }
}

int st_dtree_add_run(st_dtree_t *t, int side, const st_model_t *m)
{
    int rc = 0;
    st_strbuf_t name;
    st_strbuf_init(&name);
    for (size_t ti = 0; ti < m->nthreads && rc == 0; ti++) {
        const st_pathtab_t *p = m->threads[ti].paths;
        double *incl, *self;
        uint32_t *map = malloc((size_t)p->nnodes * sizeof *map);
        if (!map || st_tree_values(m, &m->threads[ti], &incl, &self) < 0) {
            free(map);
            rc = ST_ENOMEM;
            break;
        }
        map[0] = 0; /* every thread under the one root */
        st_walk_t w;
        st_walk_begin(&w, p, 0);
        while (rc == 0 && st_walk_pre(&w)) {
            uint32_t n = w.node;
            st_strbuf_reset(&name);
            st_name_unique(m, p->nodes[n].label, &name);
            uint32_t d = name.failed ? UINT32_MAX
                                     : child(t, map[p->nodes[n].parent], st_strbuf_cstr(&name));
            if (d == UINT32_MAX) {
                rc = ST_ENOMEM;
                break;
            }
            map[n] = d;
            t->nodes[d].self[side] += self[n];
            t->nodes[d].incl[side] += incl[n];
            if (p->nodes[n].parent == 0)
                t->nodes[0].incl[side] += incl[n];
        }
        free(map);
        free(incl);
        free(self);
    }
    st_strbuf_free(&name);
    if (rc == 0)
        t->runs[side]++;
    return rc;
}

static double mean(const st_dtree_t *t, const double *v, int side)
{
    return t->runs[side] ? v[side] / t->runs[side] : 0;
}

/* One frame: its box, coloured by the relative change of its own time (full colour
 * at FULL_CHANGE); grey when its own time is under a thousandth of the total in
 * both sides (a change of almost nothing is noise). */
#define FULL_CHANGE 0.5
static void frame(st_strbuf_t *out, const st_dtree_t *t, const st_dnode_t *n, double x, double w,
                  uint32_t row, double total)
{
    double a = mean(t, n->self, 0), b = mean(t, n->self, 1);
    double big = a > b ? a : b;
    int r, g, bl;
    if (big < total * 1e-3) {
        r = g = bl = 221;
    } else {
        double c = (b - a) / big / FULL_CHANGE;
        c = c > 1 ? 1 : c < -1 ? -1 : c;
        int shade = (int)lround(255.0 * (1.0 - fabs(c)));
        r = c >= 0 ? 255 : shade;
        g = shade;
        bl = c <= 0 ? 255 : shade;
    }
    st_strbuf_puts(out, "<g><title>");
    st_html_text(out, n->name);
    st_strbuf_printf(out, "\nself: %.6f s in A, %.6f s in B (%+.6f s)\ntotal: %.6f s in A, %.6f s in B",
                     a * 1e-9, b * 1e-9, (b - a) * 1e-9, mean(t, n->incl, 0) * 1e-9,
                     mean(t, n->incl, 1) * 1e-9);
    st_strbuf_printf(out,
                     "</title><rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%d\" "
                     "fill=\"rgb(%d,%d,%d)\" stroke=\"#888\" stroke-width=\"0.3\"/>",
                     x, row * ROW, w, ROW - 1, r, g, bl);
    size_t fit = w > 20 ? (size_t)((w - 6) / 7) : 0;
    if (fit > 0) {
        st_strbuf_printf(out, "<text x=\"%.2f\" y=\"%u\">", x + 3, row * ROW + 12);
        size_t len = strlen(n->name);
        if (len <= fit) {
            st_html_text(out, n->name);
        } else if (fit > 2) {
            char *cut = strndup(n->name, fit - 2);
            if (cut)
                st_html_text(out, cut);
            free(cut);
            st_strbuf_puts(out, "..");
        }
        st_strbuf_puts(out, "</text>");
    }
    st_strbuf_puts(out, "</g>\n");
}

void st_dtree_html_write(st_strbuf_t *out, const st_dtree_t *t, const char *title,
                         const char *table)
{
    const st_dnode_t *root = &t->nodes[0];
    double total = mean(t, root->incl, 1);
    uint32_t rows = 0;
    /* per node: where its next child goes, and its row (the root's 0, above the
     * first; HIDDEN: not drawn, nor anything under it). Parents come before their
     * children. */
    double *x = calloc(t->nnodes, sizeof *x);
    uint32_t *row = calloc(t->nnodes, sizeof *row);
    st_strbuf_t svg;
    st_strbuf_init(&svg);
    for (uint32_t i = 1; x && row && total > 0 && i < t->nnodes; i++) {
        const st_dnode_t *n = &t->nodes[i];
        uint32_t p = n->parent;
        row[i] = HIDDEN;
        if (row[p] == HIDDEN)
            continue;
        double w = mean(t, n->incl, 1) / total * WIDTH, at = x[p];
        x[p] += w;
        if (w < 0.1 || row[p] + 1 > MAX_ROWS)
            continue;
        row[i] = row[p] + 1;
        x[i] = at;
        rows = row[i] > rows ? row[i] : rows;
        frame(&svg, t, n, at, w, row[i] - 1, total);
    }
    if (!x || !row)
        svg.failed = 1;
    free(x);
    free(row);
    st_strbuf_puts(out, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
    st_html_text(out, title);
    st_strbuf_puts(out, "</title>\n<style>body{font-family:sans-serif;margin:1em}"
                        "svg text{font:11px monospace;pointer-events:none}"
                        "pre{font-size:12px}</style></head><body>\n<h1>");
    st_html_text(out, title);
    st_strbuf_printf(out,
                     "</h1>\n<p>B's call paths (%u run%s), a frame's width its time in B; "
                     "its colour the change of its own time from A (%u run%s): "
                     "<span style=\"background:rgb(255,120,120)\">red grew</span>, "
                     "<span style=\"background:rgb(120,120,255)\">blue shrank</span> "
                     "(full colour: 50 %% or more), white the same, grey almost no own time. "
                     "Hover a frame for its times.</p>\n",
                     t->runs[1], t->runs[1] == 1 ? "" : "s", t->runs[0],
                     t->runs[0] == 1 ? "" : "s");
    st_strbuf_printf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                          "height=\"%u\">\n", WIDTH, rows * ROW + 1);
    st_strbuf_add(out, svg.data ? svg.data : "", svg.len);
    st_strbuf_puts(out, "</svg>\n<pre>");
    st_html_text(out, table ? table : "");
    st_strbuf_puts(out, "</pre>\n</body></html>\n");
    if (svg.failed)
        out->failed = 1;
    st_strbuf_free(&svg);
}
