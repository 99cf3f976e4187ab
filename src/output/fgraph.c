#include "output/fgraph.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/strbuf.h"
#include "model/walk.h"

#define NONE UINT32_MAX

void st_fgraph_free(st_fgraph_t *g)
{
    free(g->fns);
    free(g->edges);
    free(g->fn_of_key);
    free(g->qual_uses);
    free(g->long_name);
    st_u64map_free(&g->emap);
    memset(g, 0, sizeof *g);
}

static size_t key_of(const st_model_t *m, uint32_t label)
{
    uint32_t loc = st_loctab_of(m->locs, label);
    size_t nlocs = m->locs ? m->locs->nlocs : 0;
    return loc != ST_LOC_NONE ? loc : nlocs + label;
}

uint32_t st_fgraph_fn_of(const st_fgraph_t *g, const st_model_t *m, uint32_t label)
{
    size_t k = key_of(m, label);
    return k < g->nkeys ? g->fn_of_key[k] : NONE;
}

static uint32_t fn_for(st_fgraph_t *g, const st_model_t *m, uint32_t label)
{
    size_t k = key_of(m, label);
    if (k >= g->nkeys)
        return NONE;
    if (g->fn_of_key[k] != NONE)
        return g->fn_of_key[k];
    if (g->nfns == g->capfns) {
        uint32_t cap = g->capfns ? g->capfns * 2 : 256;
        st_fnode_t *f = realloc(g->fns, cap * sizeof *f);
        if (!f)
            return NONE;
        g->fns = f;
        g->capfns = cap;
    }
    st_fnode_t *f = &g->fns[g->nfns];
    memset(f, 0, sizeof *f);
    f->loc = st_loctab_of(m->locs, label);
    f->label = label;
    g->fn_of_key[k] = g->nfns;
    return g->nfns++;
}

static uint32_t edge_for(st_fgraph_t *g, uint32_t caller, uint32_t callee)
{
    uint32_t found;
    int r = st_u64map_put(&g->emap, ((uint64_t)caller << 32) | callee, g->nedges, &found);
    if (r < 0)
        return NONE;
    if (r == 1)
        return found;
    if (g->nedges == g->capedges) {
        uint32_t cap = g->capedges ? g->capedges * 2 : 256;
        st_fedge_t *e = realloc(g->edges, cap * sizeof *e);
        if (!e)
            return NONE;
        g->edges = e;
        g->capedges = cap;
    }
    st_fedge_t *e = &g->edges[g->nedges];
    memset(e, 0, sizeof *e);
    e->caller = caller;
    e->callee = callee;
    return g->nedges++;
}

/* Folds one tree. fnof/eof: per-node scratch (function, edge); active counts per
 * function and edge on the current path. */
static int fold_tree(st_fgraph_t *g, const st_model_t *m, const st_model_thread_t *th,
                     uint32_t **active_fn, uint32_t *capa_fn, uint32_t **active_e,
                     uint32_t *capa_e)
{
    const st_pathtab_t *t = th->paths;
    uint32_t *fnof = malloc((size_t)t->nnodes * sizeof *fnof);
    uint32_t *eof = malloc((size_t)t->nnodes * sizeof *eof);
    double *incl = NULL, *own = NULL;
    int rc = 0;
    if (!fnof || !eof) {
        rc = ST_ENOMEM;
        goto done;
    }
    /* a profile that only counted calls has no times: tt and ct stay 0 */
    if (g->metric != ST_METRIC_NONE && (rc = st_model_values(m, th, g->metric, &incl, &own)) < 0)
        goto done;
    /* functions and edges, in node order (a parent before its children) */
    for (uint32_t i = 1; i < t->nnodes; i++) {
        const st_path_t *n = &t->nodes[i];
        fnof[i] = fn_for(g, m, n->label);
        if (fnof[i] == NONE) {
            rc = ST_ENOMEM;
            goto done;
        }
        eof[i] = NONE;
        if (n->parent != 0 && n->parent < i) {
            eof[i] = edge_for(g, fnof[n->parent], fnof[i]);
            if (eof[i] == NONE) {
                rc = ST_ENOMEM;
                goto done;
            }
        }
    }
    if (g->nfns > *capa_fn) {
        uint32_t *a = realloc(*active_fn, (size_t)g->nfns * 2 * sizeof *a);
        if (!a) {
            rc = ST_ENOMEM;
            goto done;
        }
        memset(a + *capa_fn, 0, ((size_t)g->nfns * 2 - *capa_fn) * sizeof *a);
        *active_fn = a;
        *capa_fn = g->nfns * 2;
    }
    if (g->nedges > *capa_e) {
        uint32_t *a = realloc(*active_e, (size_t)g->nedges * 2 * sizeof *a);
        if (!a) {
            rc = ST_ENOMEM;
            goto done;
        }
        memset(a + *capa_e, 0, ((size_t)g->nedges * 2 - *capa_e) * sizeof *a);
        *active_e = a;
        *capa_e = g->nedges * 2;
    }
    uint32_t *afn = *active_fn, *ae = *active_e;
    /* depth-first: enter a node, leave it after its subtree */
    st_walk_t w;
    st_walk_begin(&w, t, 0);
    while (st_walk_next(&w)) {
        uint32_t n = w.node;
        if (w.leave) {
            afn[fnof[n]]--;
            if (eof[n] != NONE)
                ae[eof[n]]--;
            continue;
        }
        uint64_t calls = st_model_calls(th, n);
        double sum = incl ? incl[n] : 0.0;
        double self = own ? own[n] : 0.0;
        st_fnode_t *f = &g->fns[fnof[n]];
        f->nc += calls;
        f->tt += self;
        if (afn[fnof[n]]++ == 0) {
            f->cc += calls;
            f->ct += sum;
        }
        if (eof[n] != NONE) {
            st_fedge_t *e = &g->edges[eof[n]];
            e->nc += calls;
            e->tt += self;
            if (ae[eof[n]]++ == 0) {
                e->cc += calls;
                e->ct += sum;
            }
        }
    }
done:
    free(fnof);
    free(eof);
    free(incl);
    free(own);
    return rc;
}

int st_fgraph_build(st_fgraph_t *g, const st_model_t *m, long rank)
{
    int timer = st_model_timer(m);
    return st_fgraph_build_metric(g, m, rank, timer >= 0 ? (uint32_t)timer : ST_METRIC_NONE);
}

int st_fgraph_build_metric(st_fgraph_t *g, const st_model_t *m, long rank, uint32_t metric)
{
    memset(g, 0, sizeof *g);
    g->timer = st_model_timer(m);
    g->metric = metric;
    g->nkeys = (m->locs ? m->locs->nlocs : 0) + (size_t)st_intern_count(m->labels) + 1;
    g->fn_of_key = malloc(g->nkeys * sizeof *g->fn_of_key);
    if (!g->fn_of_key)
        return ST_ENOMEM;
    memset(g->fn_of_key, 0xff, g->nkeys * sizeof *g->fn_of_key);
    uint32_t *afn = NULL, *ae = NULL, capfn = 0, cape = 0;
    int rc = 0;
    for (size_t i = 0; i < m->nthreads && rc == 0; i++) {
        const st_model_thread_t *th = &m->threads[i];
        if (rank >= 0 && (!th->has_rank || th->rank != (uint32_t)rank))
            continue;
        rc = fold_tree(g, m, th, &afn, &capfn, &ae, &cape);
    }
    free(afn);
    free(ae);
    if (rc < 0) {
        st_fgraph_free(g);
        return rc;
    }
    /* Own time never exceeds cumulative time; summed in a different order, the
     * doubles can disagree in the last bit, which pstats readers check. */
    for (uint32_t f = 0; f < g->nfns; f++)
        if (g->fns[f].ct < g->fns[f].tt)
            g->fns[f].ct = g->fns[f].tt;
    for (uint32_t e = 0; e < g->nedges; e++)
        if (g->edges[e].ct < g->edges[e].tt)
            g->edges[e].ct = g->edges[e].tt;
    size_t nstr = m->locs ? st_intern_count(&m->locs->strings) : 0;
    g->qual_uses = calloc(nstr ? nstr : 1, sizeof *g->qual_uses);
    if (!g->qual_uses) {
        st_fgraph_free(g);
        return ST_ENOMEM;
    }
    for (uint32_t f = 0; f < g->nfns; f++)
        if (g->fns[f].loc != ST_LOC_NONE)
            g->qual_uses[st_loctab_get(m->locs, g->fns[f].loc)->qual]++;
    /* the module-qualified names of functions that share a qualified name: those
     * that are still not unique are named by their file's path */
    g->long_name = calloc(g->nfns ? g->nfns : 1, 1);
    st_intern_t seen;
    st_intern_init(&seen);
    st_strbuf_t name;
    st_strbuf_init(&name);
    int bad = !g->long_name;
    for (uint32_t f = 0; f < g->nfns && !bad; f++) {
        st_strbuf_reset(&name);
        st_fgraph_name(g, m, f, 0, &name);
        uint32_t id;
        bad = name.failed || st_intern_tagged(&seen, name.data ? name.data : "", name.len, f, &id) < 0;
    }
    for (uint32_t id = 0; id < seen.count && !bad; id++)
        if (st_intern_shared(&seen, id))
            g->long_name[st_intern_tag(&seen, id)] = 1;
    st_intern_free(&seen);
    st_strbuf_free(&name);
    if (bad) {
        st_fgraph_free(g);
        return ST_ENOMEM;
    }
    for (uint32_t f = 0; f < g->nfns; f++) {
        g->total_tt += g->fns[f].tt;
        if (g->fns[f].ct > g->max_ct)
            g->max_ct = g->fns[f].ct;
    }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void st_fgraph_name(const st_fgraph_t *g, const st_model_t *m, uint32_t fn, int qualified,
                    st_strbuf_t *out)
{
    const st_fnode_t *f = &g->fns[fn];
    if (f->loc == ST_LOC_NONE) {
        st_strbuf_puts(out, st_intern_str(m->labels, f->label));
        return;
    }
    const st_loc_t *l = st_loctab_get(m->locs, f->loc);
    const char *file = st_loctab_str(m->locs, l->file);
    const char *name = st_loctab_str(m->locs, l->name);
    if (strcmp(file, "~") == 0) {
        st_strbuf_puts(out, name);
        return;
    }
    if (!qualified) {
        const char *qual = st_loctab_str(m->locs, l->qual);
        if (g->qual_uses[l->qual] <= 1) {
            st_strbuf_puts(out, qual);
            return;
        }
        if (g->long_name && g->long_name[fn]) {
            st_strbuf_printf(out, "%s [%s:%d]", qual, file, (int)l->line);
            return;
        }
        /* module.qualname:line */
        const char *b = base_name(file);
        size_t blen = strlen(b);
        if (blen > 3 && strcmp(b + blen - 3, ".py") == 0)
            blen -= 3;
        if (blen == 8 && strncmp(b, "__init__", 8) == 0 && b > file + 1) {
            const char *end = b - 1, *start = end;
            while (start > file && start[-1] != '/')
                start--;
            if (end > start) {
                b = start;
                blen = (size_t)(end - start);
            }
        }
        st_strbuf_add(out, b, blen);
        st_strbuf_printf(out, ".%s:%d", qual, (int)l->line);
        return;
    }
    if (g->long_name && g->long_name[fn]) {
        st_strbuf_printf(out, "%s:%d:%s", file, (int)l->line, name);
        return;
    }
    /* gprof2dot's pstats names: module (base name without extension):line:name */
    const char *b = base_name(file);
    const char *dot = strrchr(b, '.');
    st_strbuf_add(out, b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
    st_strbuf_printf(out, ":%d:", (int)l->line);
    st_strbuf_puts(out, name);
}

int st_tree_values(const st_model_t *m, const st_model_thread_t *th, double **incl,
                   double **self)
{
    return st_model_values(m, th, st_model_weight(m), incl, self);
}
