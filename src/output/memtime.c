/* Memory over time: mprof's .dat and the plot (see memtime.h). */
#include "output/memtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "output/html.h"

#define MIB (1024.0 * 1024.0)

/* A function name as one word (mprof's lines are split on spaces). */
static void put_word(st_strbuf_t *out, const char *s)
{
    for (; *s; s++)
        st_strbuf_putc(out, *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' ? '_' : *s);
}

void st_mprof_write(st_strbuf_t *out, const st_model_t *m)
{
    const st_model_memtime_t *mt = m->memtime;
    if (!mt)
        return;
    double epoch = (double)m->start_ns * 1e-9;
    st_strbuf_puts(out, "CMDLINE");
    for (size_t i = 0; i < m->ncommand; i++) {
        st_strbuf_putc(out, ' ');
        put_word(out, m->command[i]);
    }
    st_strbuf_putc(out, '\n');
    for (size_t i = 0; i < mt->n; i++)
        st_strbuf_printf(out, "MEM %.6f %.4f\n", (double)mt->rss[i] / MIB, epoch + mt->t[i]);
    for (size_t i = 0; i < mt->ncalls; i++) {
        const st_model_memcall_t *c = &mt->calls[i];
        st_strbuf_puts(out, "FUNC ");
        put_word(out, c->function);
        st_strbuf_printf(out, " %.4f %.4f %.4f %.4f %u\n", (double)c->m0 / MIB, epoch + c->t0,
                         (double)c->m1 / MIB, epoch + c->t1, c->level);
    }
}

/* ------------------------------------------------------------------------- */
/* The plot                                                                   */

enum { W = 900, H = 500, X0 = 70, Y0 = 40, PW = 780, PH = 340, MAX_POINTS = 4000,
       MAX_BANDS = 2000, MAX_NAMES = 10 };

static const char *const palette[] = {"#e6550d", "#31a354", "#756bb1", "#3182bd", "#de2d26",
                                      "#636363", "#e7ba52", "#7b4173", "#17becf", "#8c6d31"};

/* A step of 1, 2 or 5 times a power of ten that cuts [0, max] in about 5. */
static double nice_step(double max)
{
    double raw = max / 5.0, p = pow(10.0, floor(log10(raw)));
    double f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static double px(double t, double tmax) { return X0 + PW * (tmax > 0 ? t / tmax : 0); }
static double py(double v, double vmax) { return Y0 + PH - PH * (vmax > 0 ? v / vmax : 0); }

/* One curve: the samples, at most MAX_POINTS of them (each the highest of its run of
 * samples, so that no peak is lost). */
static void curve(st_strbuf_t *out, const st_model_memtime_t *mt, const int64_t *v, double tmax,
                  double vmax, const char *colour)
{
    st_strbuf_printf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                     colour);
    size_t step = mt->n > MAX_POINTS ? (mt->n + MAX_POINTS - 1) / MAX_POINTS : 1;
    for (size_t i = 0; i < mt->n; i += step) {
        int64_t hi = v[i];
        size_t at = i;
        for (size_t j = i + 1; j < i + step && j < mt->n; j++)
            if (v[j] > hi)
                hi = v[j], at = j;
        st_strbuf_printf(out, "%.1f,%.1f ", px(mt->t[at], tmax), py((double)hi / MIB, vmax));
    }
    st_strbuf_puts(out, "\"/>\n");
}

/* The index of c's function among the first MAX_NAMES names (the colour), or -1. */
static int name_index(const char **names, int *nnames, const char *f)
{
    for (int i = 0; i < *nnames; i++)
        if (strcmp(names[i], f) == 0)
            return i;
    if (*nnames == MAX_NAMES)
        return -1;
    names[*nnames] = f;
    return (*nnames)++;
}

void st_memplot_write(st_strbuf_t *out, const st_model_t *m, const char *title)
{
    const st_model_memtime_t *mt = m->memtime;
    st_strbuf_printf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
                          "width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                          "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
                          "fill=\"white\"/>\n", W, H, W, H);
    if (!mt || !mt->n) {
        st_strbuf_puts(out, "<text x=\"20\" y=\"40\">no memory over time in this profile (strata "
                            "python --memory records it)</text>\n</svg>\n");
        return;
    }
    double tmax = mt->t[mt->n - 1], vmax = 0;
    for (size_t i = 0; i < mt->n; i++) {
        vmax = fmax(vmax, (double)mt->rss[i] / MIB);
        if (mt->heap)
            vmax = fmax(vmax, (double)mt->heap[i] / MIB);
    }
    for (size_t i = 0; i < mt->ncalls; i++) {
        tmax = fmax(tmax, mt->calls[i].t1);
        vmax = fmax(vmax, fmax((double)mt->calls[i].m0, (double)mt->calls[i].m1) / MIB);
    }
    if (tmax <= 0)
        tmax = 1e-3;
    double vstep = nice_step(vmax > 0 ? vmax : 1), tstep = nice_step(tmax);
    vmax = ceil((vmax > 0 ? vmax : 1) / vstep) * vstep;
    st_strbuf_puts(out, "<text x=\"450\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">");
    st_html_text(out, title ? title : "memory");
    st_strbuf_puts(out, ": memory over time</text>\n");
    /* the calls of chosen functions: bands behind the curves */
    const char *names[MAX_NAMES];
    int nnames = 0;
    size_t drawn = 0;
    for (size_t i = 0; i < mt->ncalls && drawn < MAX_BANDS; i++) {
        const st_model_memcall_t *c = &mt->calls[i];
        int k = name_index(names, &nnames, c->function);
        double x = px(c->t0, tmax), w = fmax(px(c->t1, tmax) - x, 0.5);
        double y = Y0 + PH + 6 + 6.0 * (c->level % 4);
        st_strbuf_printf(out, "<g><title>");
        st_html_text(out, c->function);
        st_strbuf_printf(out, ": %.4f to %.4f s, %.3f to %.3f MiB resident</title>", c->t0, c->t1,
                         (double)c->m0 / MIB, (double)c->m1 / MIB);
        st_strbuf_printf(out, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
                              "opacity=\"0.12\"/><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                              "height=\"5\" fill=\"%s\"/></g>\n",
                         x, Y0, w, PH, k >= 0 ? palette[k] : "#999999", x, y, w,
                         k >= 0 ? palette[k] : "#999999");
        drawn++;
    }
    /* axes, grid and ticks */
    for (double v = 0; v <= vmax + vstep / 2; v += vstep)
        st_strbuf_printf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                         X0, X0 + PW, py(v, vmax), py(v, vmax), X0 - 6, py(v, vmax) + 4, v);
    for (double t = 0; t <= tmax + tstep / 100; t += tstep)
        st_strbuf_printf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                         px(t, tmax), Y0 + PH + 44, t);
    st_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                          "stroke=\"#333\"/>\n", X0, Y0, PW, PH);
    st_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n"
                          "<text transform=\"translate(18 %d) rotate(-90)\" "
                          "text-anchor=\"middle\">memory (MiB)</text>\n",
                     X0 + PW / 2, Y0 + PH + 62, Y0 + PH / 2);
    curve(out, mt, mt->rss, tmax, vmax, "#1f77b4");
    if (mt->heap)
        curve(out, mt, mt->heap, tmax, vmax, "#ff7f0e");
    /* the legend */
    int ly = H - 18, lx = X0;
    st_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"#1f77b4\"/>"
                          "<text x=\"%d\" y=\"%d\">resident</text>\n", lx, ly - 4, lx + 16, ly);
    lx += 90;
    if (mt->heap) {
        st_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"#ff7f0e\"/>"
                              "<text x=\"%d\" y=\"%d\">heap</text>\n", lx, ly - 4, lx + 16, ly);
        lx += 70;
    }
    for (int k = 0; k < nnames && lx < W - 80; k++) {
        st_strbuf_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"8\" fill=\"%s\"/>"
                              "<text x=\"%d\" y=\"%d\">", lx, ly - 8, palette[k], lx + 16, ly);
        st_html_text(out, names[k]);
        st_strbuf_puts(out, "</text>\n");
        lx += 30 + 7 * (int)(strlen(names[k]) < 30 ? strlen(names[k]) : 30);
    }
    if (drawn < mt->ncalls || mt->calls_dropped)
        st_strbuf_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#666\">%llu "
                              "more calls not drawn</text>\n", W - 10, Y0 - 8,
                         (unsigned long long)(mt->ncalls - drawn + mt->calls_dropped));
    st_strbuf_puts(out, "</svg>\n");
}
