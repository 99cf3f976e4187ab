#include "output/dot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "output/fgraph.h"

#define MULT "\xC3\x97" /* U+00D7, gprof2dot's MULTIPLICATION SIGN */

static double hue_to_rgb(double m1, double m2, double h)
{
    if (h < 0.0)
        h += 1.0;
    else if (h > 1.0)
        h -= 1.0;
    if (h * 6 < 1.0)
        return m1 + (m2 - m1) * h * 6.0;
    if (h * 2 < 1.0)
        return m2;
    if (h * 3 < 2.0)
        return m1 + (m2 - m1) * (2.0 / 3.0 - h) * 6.0;
    return m1;
}

static int to_byte(double f)
{
    if (f <= 0.0)
        return 0;
    if (f >= 1.0)
        return 255;
    return (int)(255.0 * f + 0.5);
}

void st_dot_colour(double w, char out[8])
{
    /* TEMPERATURE_COLORMAP: hsl (2/3, 0.80, 0.25) dark blue to (0, 1, 0.5) red,
     * gamma 1 */
    w = w < 0 ? 0 : w > 1 ? 1 : w;
    double h = 2.0 / 3.0 + w * (0.0 - 2.0 / 3.0);
    double s = 0.80 + w * (1.0 - 0.80);
    double l = 0.25 + w * (0.5 - 0.25);
    h = fmod(h, 1.0);
    double m2 = l <= 0.5 ? l * (s + 1.0) : l + s - l * s;
    double m1 = l * 2.0 - m2;
    snprintf(out, 8, "#%02x%02x%02x", to_byte(hue_to_rgb(m1, m2, h + 1.0 / 3.0)),
             to_byte(hue_to_rgb(m1, m2, h)), to_byte(hue_to_rgb(m1, m2, h - 1.0 / 3.0)));
}

/* gprof2dot's ratio(): 0/0 is 1, clamped to [0, 1]. */
static double ratio(double a, double b)
{
    if (b == 0.0)
        return 1.0;
    double r = a / b;
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

static void put_escaped(st_strbuf_t *out, const char *s)
{
    st_strbuf_putc(out, '"');
    for (; *s; s++) {
        switch (*s) {
        case '\\': st_strbuf_puts(out, "\\\\"); break;
        case '\n': st_strbuf_puts(out, "\\n"); break;
        case '\t': st_strbuf_puts(out, "\\t"); break;
        case '"': st_strbuf_puts(out, "\\\""); break;
        case '\r': st_strbuf_puts(out, "\\r"); break;
        default:
            if ((unsigned char)*s < 0x20)
                st_strbuf_putc(out, ' ');
            else
                st_strbuf_putc(out, *s);
        }
    }
    st_strbuf_putc(out, '"');
}

int st_dot_write(st_strbuf_t *out, const st_model_t *m, const st_dot_opts_t *o)
{
    st_fgraph_t g;
    int rc = st_fgraph_build(&g, m, -1);
    if (rc < 0)
        return rc;
    /* counts-only profiles: weigh by calls */
    if (g.timer < 0) {
        for (uint32_t f = 0; f < g.nfns; f++) {
            g.fns[f].tt = (double)g.fns[f].nc;
            g.fns[f].ct = (double)g.fns[f].cc;
            g.total_tt += g.fns[f].tt;
        }
        for (uint32_t e = 0; e < g.nedges; e++)
            g.edges[e].ct = (double)g.edges[e].cc;
        g.max_ct = 0;
        for (uint32_t f = 0; f < g.nfns; f++)
            if (g.fns[f].ct > g.max_ct)
                g.max_ct = g.fns[f].ct;
    }
    double total = g.total_tt > g.max_ct ? g.total_tt : g.max_ct;
    double max_self = 0;
    for (uint32_t f = 0; f < g.nfns; f++) {
        double r = ratio(g.fns[f].tt, g.total_tt);
        if (r > max_self)
            max_self = r;
    }
    if (max_self == 0)
        max_self = 1;
    double nthres = o->node_thres / 100.0, ethres = o->edge_thres / 100.0;
    char *keep = calloc((size_t)g.nfns + 1, 1);
    if (!keep) {
        st_fgraph_free(&g);
        return ST_ENOMEM;
    }
    for (uint32_t f = 0; f < g.nfns; f++)
        keep[f] = ratio(g.fns[f].ct, total) >= nthres;

    st_strbuf_puts(out, "digraph {\n\ttooltip=\" \"\n"
                        "\tgraph [fontname=Arial, nodesep=0.125, ranksep=0.25];\n"
                        "\tnode [fontcolor=white, fontname=Arial, height=0, shape=box, "
                        "style=filled, width=0];\n"
                        "\tedge [fontname=Arial];\n");
    st_strbuf_t label;
    st_strbuf_init(&label);
    for (uint32_t f = 0; f < g.nfns; f++) {
        if (!keep[f])
            continue;
        const st_fnode_t *fn = &g.fns[f];
        double tr = ratio(fn->ct, total), sr = ratio(fn->tt, g.total_tt);
        double w = o->colour_by_self ? sr / max_self : tr;
        char colour[8];
        st_dot_colour(w, colour);
        st_strbuf_reset(&label);
        st_fgraph_name(&g, m, f, 1, &label);
        st_strbuf_printf(&label, "\n%.2f%%\n(%.2f%%)\n%llu" MULT, tr * 100.0, sr * 100.0,
                         (unsigned long long)fn->nc);
        st_strbuf_printf(out, "\t%u [color=\"%s\", fontcolor=\"#ffffff\", fontsize=\"%.2f\", "
                              "label=",
                         f, colour, fmax(w * w * 10.0, 10.0));
        put_escaped(out, st_strbuf_cstr(&label));
        if (fn->loc != ST_LOC_NONE) {
            st_strbuf_puts(out, ", tooltip=");
            put_escaped(out, st_loctab_str(m->locs, st_loctab_get(m->locs, fn->loc)->file));
        }
        st_strbuf_puts(out, "];\n");
    }
    for (uint32_t e = 0; e < g.nedges; e++) {
        const st_fedge_t *ed = &g.edges[e];
        if (!keep[ed->caller] || !keep[ed->callee])
            continue;
        double w = ratio(ed->ct, total);
        if (w < ethres)
            continue;
        char colour[8];
        st_dot_colour(w, colour);
        double pen = fmax(w * 4.0, 0.5);
        st_strbuf_printf(out,
                         "\t%u -> %u [arrowsize=\"%.2f\", color=\"%s\", fontcolor=\"%s\", "
                         "fontsize=\"%.2f\", label=\"%.2f%%\\n%llu" MULT "\", "
                         "labeldistance=\"%.2f\", penwidth=\"%.2f\"];\n",
                         ed->caller, ed->callee, 0.5 * sqrt(pen), colour, colour,
                         fmax(w * w * 10.0, 10.0), w * 100.0, (unsigned long long)ed->cc, pen,
                         pen);
    }
    st_strbuf_puts(out, "}\n");
    if (label.failed)
        out->failed = 1;
    st_strbuf_free(&label);
    free(keep);
    st_fgraph_free(&g);
    return out->failed ? ST_ENOMEM : 0;
}
