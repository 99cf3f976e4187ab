#include "output/callgrind.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/components.h"
#include "base/err.h"
#include "output/fgraph.h"

/* Names in callgrind are one line: newlines would break the file. */
static void put_name(st_strbuf_t *out, const char *s)
{
    for (; *s; s++)
        st_strbuf_putc(out, (unsigned char)*s < 0x20 ? ' ' : *s);
}

/* An event name is an identifier: other characters become '_'. */
static void put_event_name(st_strbuf_t *out, const char *s)
{
    for (; *s; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (c >= '0' && c <= '9');
        st_strbuf_putc(out, ok ? c : '_');
    }
}

static const char *fn_file(const st_model_t *m, const st_fnode_t *f)
{
    if (f->loc == ST_LOC_NONE)
        return "???";
    const char *file = st_loctab_str(m->locs, st_loctab_get(m->locs, f->loc)->file);
    return strcmp(file, "~") == 0 || !*file ? "???" : file;
}

static int fn_line(const st_model_t *m, const st_fnode_t *f)
{
    if (f->loc == ST_LOC_NONE)
        return 0;
    int l = st_loctab_get(m->locs, f->loc)->line;
    return l > 0 ? l : 0;
}

typedef struct {
    uint32_t *file_id;   /* per function: compressed file id */
    char *file_named;    /* per file id: written once */
    char *fn_named;
} names_t;

static void put_ref(st_strbuf_t *out, const char *key, uint32_t id, char *named, const char *text)
{
    st_strbuf_printf(out, "%s=(%u)", key, id + 1);
    if (!named[id]) {
        st_strbuf_putc(out, ' ');
        put_name(out, text);
        named[id] = 1;
    }
    st_strbuf_putc(out, '\n');
}

int st_callgrind_write(st_strbuf_t *out, const st_model_t *m)
{
    st_fgraph_t g;
    int rc = st_fgraph_build(&g, m, -1);
    if (rc < 0)
        return rc;
    /* More events: the CPU timer when both clocks were measured, then every count,
     * bytes or samples metric the model reports, each the same graph folded over
     * it (one that cannot be made is left out). */
    st_fgraph_t ex[ST_MCOLS_MAX];
    uint32_t nex = 0;
    for (uint32_t id = 0; m->metrics && id < m->metrics->n && nex < ST_MCOLS_MAX; id++) {
        st_metric_kind_t kind = m->metrics->defs[id].kind;
        int cpu = id == ST_TIMER_CPU && kind == ST_METRIC_TIMER && g.timer == ST_TIMER_WALL;
        if (!st_model_reports(m, id) ||
            (!cpu && (kind == ST_METRIC_TIMER || kind == ST_METRIC_GAUGE)))
            continue;
        if (st_fgraph_build_metric(&ex[nex], m, -1, id) < 0)
            continue;
        if (ex[nex].nfns != g.nfns || ex[nex].nedges != g.nedges)
            st_fgraph_free(&ex[nex]);
        else
            nex++;
    }
    /* file ids: the location's file string; one more for "???" */
    uint32_t nstr = m->locs ? st_intern_count(&m->locs->strings) : 0;
    uint32_t *file_id = malloc(((size_t)g.nfns + 1) * sizeof *file_id);
    char *file_named = calloc((size_t)nstr + 1, 1);
    char *fn_named = calloc((size_t)g.nfns + 1, 1);
    if (!file_id || !file_named || !fn_named) {
        rc = ST_ENOMEM;
        goto done;
    }
    for (uint32_t f = 0; f < g.nfns; f++) {
        const st_fnode_t *fn = &g.fns[f];
        file_id[f] = strcmp(fn_file(m, fn), "???") == 0
                         ? nstr
                         : st_loctab_get(m->locs, fn->loc)->file;
    }
    /* edges grouped by caller */
    uint32_t *start = calloc((size_t)g.nfns + 1, sizeof *start);
    uint32_t *order = malloc(((size_t)g.nedges + 1) * sizeof *order);
    uint32_t *fill = calloc((size_t)g.nfns + 1, sizeof *fill);
    if (!start || !order || !fill) {
        free(start);
        free(order);
        free(fill);
        rc = ST_ENOMEM;
        goto done;
    }
    for (uint32_t e = 0; e < g.nedges; e++)
        start[g.edges[e].caller + 1]++;
    for (uint32_t f = 0; f < g.nfns; f++)
        start[f + 1] += start[f];
    for (uint32_t e = 0; e < g.nedges; e++)
        order[start[g.edges[e].caller] + fill[g.edges[e].caller]++] = e;
    free(fill);

    const char *ev1 = g.timer == ST_TIMER_WALL ? "wall_clock" : g.timer == ST_TIMER_CPU ? "cpu_clock"
                                                                                   : "Calls";
    st_strbuf_printf(out, "# callgrind format\nversion: 1\ncreator: strata %s\npid: %ld\n",
                     STRATA_VERSION, m->pid);
    if (m->ncommand) {
        st_strbuf_puts(out, "cmd:");
        for (size_t i = 0; i < m->ncommand; i++) {
            st_strbuf_putc(out, ' ');
            put_name(out, m->command[i]);
        }
        st_strbuf_putc(out, '\n');
    }
    st_strbuf_puts(out, "positions: line\n");
    if (g.timer >= 0)
        st_strbuf_printf(out, "event: %s : %s time (ns)\n", ev1,
                         g.timer == ST_TIMER_WALL ? "Wall-clock" : "CPU");
    for (uint32_t x = 0; x < nex; x++) {
        if (ex[x].metric == ST_TIMER_CPU) {
            st_strbuf_puts(out, "event: cpu_clock : CPU time (ns)\n");
            continue;
        }
        const st_metric_def_t *d = st_metrics_get(m->metrics, ex[x].metric);
        st_strbuf_puts(out, "event: ");
        put_event_name(out, d->name);
        st_strbuf_puts(out, " : ");
        put_name(out, *d->desc ? d->desc : d->name);
        st_strbuf_puts(out, " (");
        put_name(out, d->unit);
        st_strbuf_puts(out, ")\n");
    }
    st_strbuf_printf(out, "events: %s", ev1);
    for (uint32_t x = 0; x < nex; x++) {
        st_strbuf_putc(out, ' ');
        put_event_name(out, st_metrics_get(m->metrics, ex[x].metric)->name);
    }
    double total = 0;
    for (uint32_t f = 0; f < g.nfns; f++)
        total += g.timer >= 0 ? g.fns[f].tt : (double)g.fns[f].nc;
    st_strbuf_printf(out, "\nsummary: %.0f", total);
    for (uint32_t x = 0; x < nex; x++) {
        double t = 0;
        for (uint32_t f = 0; f < g.nfns; f++)
            t += ex[x].fns[f].tt;
        st_strbuf_printf(out, " %.0f", t);
    }
    st_strbuf_puts(out, "\n\n");
    st_strbuf_t name;
    st_strbuf_init(&name);
    for (uint32_t f = 0; f < g.nfns; f++) {
        const st_fnode_t *fn = &g.fns[f];
        st_strbuf_reset(&name);
        st_fgraph_name(&g, m, f, 0, &name);
        put_ref(out, "fl", file_id[f], file_named, fn_file(m, fn));
        put_ref(out, "fn", f, fn_named, st_strbuf_cstr(&name));
        double self = g.timer >= 0 ? fn->tt : (double)fn->nc;
        st_strbuf_printf(out, "%d %.0f", fn_line(m, fn), floor(self + 0.5));
        for (uint32_t x = 0; x < nex; x++)
            st_strbuf_printf(out, " %.0f", floor(ex[x].fns[f].tt + 0.5));
        st_strbuf_putc(out, '\n');
        for (uint32_t i = start[f]; i < start[f + 1]; i++) {
            const st_fedge_t *e = &g.edges[order[i]];
            const st_fnode_t *callee = &g.fns[e->callee];
            st_strbuf_reset(&name);
            st_fgraph_name(&g, m, e->callee, 0, &name);
            put_ref(out, "cfl", file_id[e->callee], file_named, fn_file(m, callee));
            put_ref(out, "cfn", e->callee, fn_named, st_strbuf_cstr(&name));
            st_strbuf_printf(out, "calls=%llu %d\n", (unsigned long long)e->nc,
                             fn_line(m, callee));
            double incl = g.timer >= 0 ? e->ct : (double)e->nc;
            st_strbuf_printf(out, "%d %.0f", fn_line(m, fn), floor(incl + 0.5));
            for (uint32_t x = 0; x < nex; x++)
                st_strbuf_printf(out, " %.0f", floor(ex[x].edges[order[i]].ct + 0.5));
            st_strbuf_putc(out, '\n');
        }
        st_strbuf_putc(out, '\n');
    }
    if (name.failed)
        out->failed = 1;
    st_strbuf_free(&name);
    free(start);
    free(order);
done:
    free(file_id);
    free(file_named);
    free(fn_named);
    st_fgraph_free(&g);
    for (uint32_t x = 0; x < nex; x++)
        st_fgraph_free(&ex[x]);
    if (rc == 0 && out->failed)
        rc = ST_ENOMEM;
    return rc;
}
