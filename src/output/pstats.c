#include "output/pstats.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "output/fgraph.h"
#include "output/folded.h"

/* marshal type codes (Python/marshal.c) */
#define TYPE_NULL '0'
#define TYPE_INT 'i'
#define TYPE_LONG 'l'
#define TYPE_BINARY_FLOAT 'g'
#define TYPE_UNICODE 'u'
#define TYPE_SMALL_TUPLE ')'
#define TYPE_DICT '{'

static void put_u32(st_strbuf_t *out, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    st_strbuf_add(out, (const char *)b, 4);
}

static void put_int(st_strbuf_t *out, uint64_t v)
{
    if (v <= 0x7fffffff) {
        st_strbuf_putc(out, TYPE_INT);
        put_u32(out, (uint32_t)v);
        return;
    }
    /* a long: 15-bit digits, least significant first */
    unsigned char digits[2 * 5];
    uint32_t n = 0;
    while (v) {
        uint16_t d = (uint16_t)(v & 0x7fff);
        digits[2 * n] = (unsigned char)d;
        digits[2 * n + 1] = (unsigned char)(d >> 8);
        n++;
        v >>= 15;
    }
    st_strbuf_putc(out, TYPE_LONG);
    put_u32(out, n);
    st_strbuf_add(out, (const char *)digits, 2 * n);
}

static void put_float(st_strbuf_t *out, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    st_strbuf_putc(out, TYPE_BINARY_FLOAT);
    put_u32(out, (uint32_t)bits);
    put_u32(out, (uint32_t)(bits >> 32));
}

/* A tuple of `size` items opening with (a, b, tt, ct), times given in ns: cProfile's
 * (cc, nc, tt, ct, callers) for a function (size 5: the callers dict follows) and
 * (nc, cc, tt, ct) for a caller's edge (size 4). */
static void put_stats(st_strbuf_t *out, int size, uint64_t a, uint64_t b, double tt_ns,
                      double ct_ns)
{
    st_strbuf_putc(out, TYPE_SMALL_TUPLE);
    st_strbuf_putc(out, (char)size);
    put_int(out, a);
    put_int(out, b);
    put_float(out, tt_ns * 1e-9);
    put_float(out, ct_ns * 1e-9);
}

/* A str: valid UTF-8 only (marshal refuses anything else), bad bytes as U+FFFD. */
static void put_str(st_strbuf_t *out, const char *s)
{
    st_strbuf_t tmp;
    st_strbuf_init(&tmp);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = 1;
        if (*p >= 0x80) {
            n = (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
            for (size_t i = 1; i < n; i++)
                if ((p[i] & 0xC0) != 0x80)
                    n = 0;
            if (n == 2 && *p < 0xC2)
                n = 0;
            if (n == 3) {
                unsigned cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
                if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))
                    n = 0;
            }
            if (n == 4) {
                unsigned cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12);
                if (cp < 0x10000 || cp > 0x10FFFF)
                    n = 0;
            }
        }
        if (n == 0) {
            st_strbuf_puts(&tmp, "\xEF\xBF\xBD");
            p++;
        } else {
            st_strbuf_add(&tmp, (const char *)p, n);
            p += n;
        }
    }
    st_strbuf_putc(out, TYPE_UNICODE);
    put_u32(out, (uint32_t)tmp.len);
    st_strbuf_add(out, tmp.data ? tmp.data : "", tmp.len);
    if (tmp.failed)
        out->failed = 1;
    st_strbuf_free(&tmp);
}

static void put_key(st_strbuf_t *out, const st_fgraph_t *g, const st_model_t *m, uint32_t fn)
{
    const st_fnode_t *f = &g->fns[fn];
    st_strbuf_putc(out, TYPE_SMALL_TUPLE);
    st_strbuf_putc(out, 3);
    if (f->loc == ST_LOC_NONE) {
        put_str(out, "~");
        put_int(out, 0);
        put_str(out, st_intern_str(m->labels, f->label));
        return;
    }
    const st_loc_t *l = st_loctab_get(m->locs, f->loc);
    put_str(out, st_loctab_str(m->locs, l->file));
    put_int(out, (uint64_t)(l->line < 0 ? 0 : l->line));
    put_str(out, st_loctab_str(m->locs, l->name));
}

/* A call from a thread's root into a function the thread ran at its top. */
typedef struct {
    uint32_t thread, fn;
    uint64_t nc;
    double tt, ct;
} root_edge_t;

/* The key of thread ti's root: ("~", 0, "<thread 0 (MainThread)>"). */
static void put_root_key(st_strbuf_t *out, const st_model_t *m, size_t ti, st_strbuf_t *tmp)
{
    st_strbuf_reset(tmp);
    st_strbuf_putc(tmp, '<');
    st_thread_title(tmp, &m->threads[ti]);
    st_strbuf_putc(tmp, '>');
    st_strbuf_putc(out, TYPE_SMALL_TUPLE);
    st_strbuf_putc(out, 3);
    put_str(out, "~");
    put_int(out, 0);
    put_str(out, st_strbuf_cstr(tmp));
}

/* The calls from each thread's root, grouped by function (counting sort):
 * edges[order[start[f]] .. order[start[f + 1]]) call f. */
static int root_edges(const st_fgraph_t *g, const st_model_t *m, root_edge_t **edges,
                      uint32_t *nedges, uint32_t **start, uint32_t **order)
{
    root_edge_t *e = NULL;
    uint32_t n = 0, cap = 0;
    uint32_t *slot = malloc(((size_t)g->nfns + 1) * sizeof *slot);
    *start = calloc((size_t)g->nfns + 2, sizeof **start);
    if (!slot || !*start)
        goto nomem;
    memset(slot, 0xff, ((size_t)g->nfns + 1) * sizeof *slot);
    double k = g->timer >= 0 ? m->ns_per_tick[g->timer] : 0.0;
    for (size_t ti = 0; ti < m->nthreads; ti++) {
        const st_model_thread_t *th = &m->threads[ti];
        const st_pathtab_t *t = th->paths;
        uint32_t first = n;
        for (uint32_t c = t->nodes[0].first_child; c != ST_PATH_NONE; c = t->nodes[c].next_sibling) {
            const st_path_t *nd = &t->nodes[c];
            uint32_t fn = st_fgraph_fn_of(g, m, nd->label);
            if (fn >= g->nfns)
                continue;
            if (slot[fn] == UINT32_MAX) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 64;
                    root_edge_t *q = realloc(e, cap * sizeof *q);
                    if (!q)
                        goto nomem;
                    e = q;
                }
                slot[fn] = n;
                e[n++] = (root_edge_t){(uint32_t)ti, fn, 0, 0.0, 0.0};
            }
            root_edge_t *r = &e[slot[fn]];
            r->nc += st_model_calls(th, c);
            if (g->timer >= 0) {
                const st_tstat_t *s = st_model_tstat(th, g->timer, c);
                r->tt += (double)s->self * k;
                r->ct += (double)s->sum * k;
            }
        }
        for (uint32_t i = first; i < n; i++)
            slot[e[i].fn] = UINT32_MAX;
    }
    free(slot);
    slot = NULL;
    if (!(*order = malloc(((size_t)n + 1) * sizeof **order)))
        goto nomem;
    for (uint32_t i = 0; i < n; i++)
        (*start)[e[i].fn + 1]++;
    for (uint32_t f = 0; f < g->nfns; f++)
        (*start)[f + 1] += (*start)[f];
    uint32_t *fill = calloc((size_t)g->nfns + 1, sizeof *fill);
    if (!fill)
        goto nomem;
    for (uint32_t i = 0; i < n; i++)
        (*order)[(*start)[e[i].fn] + fill[e[i].fn]++] = i;
    free(fill);
    *edges = e;
    *nedges = n;
    return 0;
nomem:
    free(slot);
    free(e);
    free(*start);
    *start = NULL;
    return ST_ENOMEM;
}

int st_pstats_write(st_strbuf_t *out, const st_model_t *m)
{
    st_fgraph_t g;
    int rc = st_fgraph_build(&g, m, -1);
    if (rc < 0)
        return rc;
    /* edges grouped by callee (a counting sort) */
    uint32_t *start = calloc((size_t)g.nfns + 1, sizeof *start);
    uint32_t *order = malloc(((size_t)g.nedges + 1) * sizeof *order);
    if (!start || !order) {
        free(start);
        free(order);
        st_fgraph_free(&g);
        return ST_ENOMEM;
    }
    for (uint32_t e = 0; e < g.nedges; e++)
        start[g.edges[e].callee + 1]++;
    for (uint32_t f = 0; f < g.nfns; f++)
        start[f + 1] += start[f];
    uint32_t *fill = calloc((size_t)g.nfns + 1, sizeof *fill);
    if (!fill) {
        free(start);
        free(order);
        st_fgraph_free(&g);
        return ST_ENOMEM;
    }
    for (uint32_t e = 0; e < g.nedges; e++) {
        uint32_t c = g.edges[e].callee;
        order[start[c] + fill[c]++] = e;
    }
    free(fill);
    root_edge_t *re = NULL;
    uint32_t nre = 0, *rstart = NULL, *rorder = NULL;
    if (root_edges(&g, m, &re, &nre, &rstart, &rorder) < 0) {
        free(start);
        free(order);
        st_fgraph_free(&g);
        return ST_ENOMEM;
    }
    st_strbuf_t tmp;
    st_strbuf_init(&tmp);

    st_strbuf_putc(out, TYPE_DICT);
    for (uint32_t f = 0; f < g.nfns; f++) {
        const st_fnode_t *fn = &g.fns[f];
        put_key(out, &g, m, f);
        put_stats(out, 5, fn->cc, fn->nc, fn->tt, fn->ct);
        st_strbuf_putc(out, TYPE_DICT);
        for (uint32_t i = start[f]; i < start[f + 1]; i++) {
            const st_fedge_t *e = &g.edges[order[i]];
            put_key(out, &g, m, e->caller);
            put_stats(out, 4, e->nc, e->cc, e->tt, e->ct);
        }
        for (uint32_t i = rstart[f]; i < rstart[f + 1]; i++) {
            const root_edge_t *r = &re[rorder[i]];
            put_root_key(out, m, r->thread, &tmp);
            put_stats(out, 4, r->nc, r->nc, r->tt, r->ct);
        }
        st_strbuf_putc(out, TYPE_NULL);
    }
    /* one root per thread, called once, as cProfile's files have one */
    uint32_t ri = 0; /* root edges are in thread order */
    for (size_t ti = 0; ti < m->nthreads; ti++) {
        double ct = 0;
        for (; ri < nre && re[ri].thread == ti; ri++)
            ct += re[ri].ct;
        put_root_key(out, m, ti, &tmp);
        put_stats(out, 5, 1, 1, 0.0, ct);
        st_strbuf_putc(out, TYPE_DICT);
        st_strbuf_putc(out, TYPE_NULL);
    }
    st_strbuf_putc(out, TYPE_NULL);
    if (tmp.failed)
        out->failed = 1;
    st_strbuf_free(&tmp);
    free(re);
    free(rstart);
    free(rorder);
    free(start);
    free(order);
    st_fgraph_free(&g);
    return out->failed ? ST_ENOMEM : 0;
}
