/* line_profiler's text and .lprof (see lineprof.h). */
#include "output/lineprof.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The .lprof's unit (kernprof's timer: ns) and the text's (microseconds). */
#define UNIT 1e-9
#define OUTPUT_UNIT 1e-6

/* line_profiler's minimum column widths (its rc file's show.column_widths). */
enum { W_LINE = 6, W_HITS = 9, W_TIME = 12, W_PERHIT = 8, W_PERCENT = 8 };

typedef struct {
    char hits[32], time[32], perhit[32], percent[32];
} cells_t;

/* One row's cells, formatted as show_func formats them. */
static void format_cells(cells_t *c, const st_model_lrow_t *r, uint64_t total)
{
    const double scalar = UNIT / OUTPUT_UNIT;
    /* 100 * time / total in Python's integers: exact below 2^53, past 2^64 too */
    if (total == 0)
        c->percent[0] = '\0';
    else
        snprintf(c->percent, sizeof c->percent, "%5.1f",
                 (double)((long double)((unsigned __int128)r->ns * 100) / (long double)total));
    double t = (double)r->ns * scalar;
    snprintf(c->time, sizeof c->time, "%5.1f", t);
    if (strlen(c->time) > W_TIME)
        snprintf(c->time, sizeof c->time, "%5.3g", t);
    double per = r->hits ? t / (double)r->hits : 0.0;
    snprintf(c->perhit, sizeof c->perhit, "%5.1f", per);
    if (strlen(c->perhit) > W_PERHIT)
        snprintf(c->perhit, sizeof c->perhit, "%5.3g", per);
    snprintf(c->hits, sizeof c->hits, "%llu", (unsigned long long)r->hits);
    if (strlen(c->hits) > W_HITS)
        snprintf(c->hits, sizeof c->hits, "%g", (double)r->hits);
}

static size_t wider(size_t w, const char *s)
{
    size_t n = strlen(s);
    return n > w ? n : w;
}

/* The row of line `line` among f's rows (ascending), or NULL. */
static const st_model_lrow_t *row_of(const st_model_lfunc_t *f, uint32_t line, size_t *at)
{
    while (*at < f->nrows && f->rows[*at].line < line)
        (*at)++;
    return *at < f->nrows && f->rows[*at].line == line ? &f->rows[*at] : NULL;
}

static void write_func(st_strbuf_t *out, const st_model_lfunc_t *f)
{
    uint64_t total = 0;
    for (size_t i = 0; i < f->nrows; i++)
        total += f->rows[i].ns;
    st_strbuf_printf(out, "Total time: %g s\n", (double)total * UNIT);
    size_t nlines = f->nsource, first_hit = 0, last_hit = 0;
    while (first_hit < f->nrows && !f->rows[first_hit].hits)
        first_hit++;
    for (size_t i = 0; i < f->nrows; i++)
        if (f->rows[i].hits)
            last_hit = i;
    if (f->source) {
        st_strbuf_printf(out, "File: %s\nFunction: %s at line %u\n", f->file, f->function,
                         f->first_line);
    } else {
        st_strbuf_printf(out, "\nCould not find file %s\n", f->file);
        st_strbuf_puts(out, "Are you sure you are running this program from the same directory\n"
                            "that you ran the profiler from?\n"
                            "Continuing without the function's contents.\n");
        nlines = 1;
        if (first_hit < f->nrows) {
            uint32_t lo = f->rows[first_hit].line;
            lo = lo < f->first_line ? lo : f->first_line;
            nlines = f->rows[last_hit].line - lo + 1;
        }
    }
    /* the columns widened by the longest entry, as show_func does */
    size_t wh = W_HITS, wt = W_TIME, wp = W_PERHIT;
    for (size_t i = 0; i < f->nrows; i++) {
        if (!f->rows[i].hits)
            continue; /* a line with memory only (--memory): not line_profiler's */
        cells_t c;
        format_cells(&c, &f->rows[i], total);
        wh = wider(wh, c.hits);
        wt = wider(wt, c.time);
        wp = wider(wp, c.perhit);
    }
    char header[256];
    int hlen = snprintf(header, sizeof header, "%*s %*s %*s %*s %*s  %s", W_LINE, "Line #",
                        (int)wh, "Hits", (int)wt, "Time", (int)wp, "Per Hit", W_PERCENT,
                        "% Time", "Line Contents");
    st_strbuf_putc(out, '\n');
    st_strbuf_puts(out, header);
    st_strbuf_putc(out, '\n');
    st_strbuf_fill(out, '=', (size_t)hlen);
    st_strbuf_putc(out, '\n');
    size_t at = 0;
    for (size_t i = 0; i < nlines; i++) {
        uint32_t line = f->first_line + (uint32_t)i;
        const st_model_lrow_t *r = row_of(f, line, &at);
        cells_t c = {{0}, {0}, {0}, {0}};
        if (r && r->hits)
            format_cells(&c, r, total);
        st_strbuf_printf(out, "%*u %*s %*s %*s %*s  %s\n", W_LINE, line, (int)wh, c.hits,
                         (int)wt, c.time, (int)wp, c.perhit, W_PERCENT, c.percent,
                         f->source ? f->source[i] : "");
    }
    st_strbuf_putc(out, '\n');
}

void st_lineprof_text_write(st_strbuf_t *out, const st_model_t *m, size_t limit)
{
    st_strbuf_printf(out, "Timer unit: %g s\n\n", OUTPUT_UNIT);
    size_t n = limit && limit < m->nlfuncs ? limit : m->nlfuncs;
    for (size_t i = 0; i < n; i++)
        write_func(out, &m->lfuncs[i]);
}

/* ------------------------------------------------------------------------- */
/* The pickle                                                                 */

static void put_u32le(st_strbuf_t *out, uint32_t v)
{
    char b[4] = {(char)(v & 255), (char)(v >> 8 & 255), (char)(v >> 16 & 255),
                 (char)(v >> 24 & 255)};
    st_strbuf_add(out, b, 4);
}

static void put_text(st_strbuf_t *out, const char *s)
{
    size_t n = strlen(s);
    st_strbuf_putc(out, 'X'); /* BINUNICODE */
    put_u32le(out, (uint32_t)n);
    st_strbuf_add(out, s, n);
}

static void put_int(st_strbuf_t *out, uint64_t v)
{
    if (v < 256) {
        st_strbuf_putc(out, 'K'); /* BININT1 */
        st_strbuf_putc(out, (char)v);
    } else if (v < 65536) {
        char b[3] = {'M', (char)(v & 255), (char)(v >> 8)}; /* BININT2 */
        st_strbuf_add(out, b, 3);
    } else if (v < 0x80000000u) {
        st_strbuf_putc(out, 'J'); /* BININT */
        put_u32le(out, (uint32_t)v);
    } else {
        /* LONG1: little-endian two's complement, a zero byte on top when the
         * highest byte's top bit is set (the number is positive) */
        char b[10];
        int n = 0;
        for (uint64_t x = v; x; x >>= 8)
            b[n++] = (char)(x & 255);
        if ((unsigned char)b[n - 1] & 0x80)
            b[n++] = 0;
        st_strbuf_putc(out, (char)0x8a);
        st_strbuf_putc(out, (char)n);
        st_strbuf_add(out, b, (size_t)n);
    }
}

static void put_float(st_strbuf_t *out, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    st_strbuf_putc(out, 'G'); /* BINFLOAT: big-endian */
    for (int i = 7; i >= 0; i--)
        st_strbuf_putc(out, (char)(u >> (8 * i) & 255));
}

void st_lineprof_pickle_write(st_strbuf_t *out, const st_model_t *m)
{
    st_strbuf_add(out, "\x80\x02", 2); /* PROTO 2 */
    st_strbuf_puts(out, "cline_profiler.line_profiler\nLineStats\n"); /* GLOBAL */
    st_strbuf_add(out, ")\x81}(", 4); /* EMPTY_TUPLE NEWOBJ EMPTY_DICT MARK */
    put_text(out, "timings");
    st_strbuf_putc(out, '}'); /* EMPTY_DICT */
    for (size_t i = 0; i < m->nlfuncs; i++) {
        const st_model_lfunc_t *f = &m->lfuncs[i];
        /* key: (file, first line, qualified name) */
        put_text(out, f->file);
        put_int(out, f->first_line);
        put_text(out, f->function);
        st_strbuf_putc(out, (char)0x87); /* TUPLE3 */
        st_strbuf_putc(out, ']');        /* EMPTY_LIST */
        size_t timed = 0;
        for (size_t j = 0; j < f->nrows; j++)
            timed += f->rows[j].hits != 0;
        if (timed) {
            st_strbuf_putc(out, '(');
            for (size_t j = 0; j < f->nrows; j++) {
                if (!f->rows[j].hits)
                    continue;
                put_int(out, f->rows[j].line);
                put_int(out, f->rows[j].hits);
                put_int(out, f->rows[j].ns);
                st_strbuf_putc(out, (char)0x87);
            }
            st_strbuf_putc(out, 'e'); /* APPENDS */
        }
        st_strbuf_putc(out, 's'); /* SETITEM */
    }
    put_text(out, "unit");
    put_float(out, UNIT);
    st_strbuf_add(out, "ub.", 3); /* SETITEMS BUILD STOP */
}

/* ------------------------------------------------------------------------- */
/* memory_profiler's table                                                    */

void st_memprof_text_write(st_strbuf_t *out, const st_model_t *m)
{
    const double mib = 1024.0 * 1024.0;
    char header[128];
    int hlen = snprintf(header, sizeof header, "%6s %12s %12s  %10s   %s", "Line #", "Mem usage",
                        "Increment", "Occurrences", "Line Contents");
    for (size_t i = 0; i < m->nlfuncs; i++) {
        const st_model_lfunc_t *f = &m->lfuncs[i];
        int ran = 0;
        for (size_t j = 0; j < f->nrows; j++)
            ran |= f->rows[j].occ != 0;
        if (!ran || !f->source)
            continue;
        st_strbuf_printf(out, "Filename: %s\n\n%s\n", f->file, header);
        st_strbuf_fill(out, '=', (size_t)hlen);
        st_strbuf_putc(out, '\n');
        size_t at = 0;
        for (size_t k = 0; k < f->nsource; k++) {
            uint32_t line = f->first_line + (uint32_t)k;
            const st_model_lrow_t *r = row_of(f, line, &at);
            char usage[40] = "", inc[40] = "", occ[24] = "";
            if (r && r->occ) {
                snprintf(usage, sizeof usage, "%7.3f MiB", (double)r->mem / mib);
                snprintf(inc, sizeof inc, "%7.3f MiB", (double)r->inc / mib);
                snprintf(occ, sizeof occ, "%llu", (unsigned long long)r->occ);
            }
            st_strbuf_printf(out, "%6u %12s %12s  %10s   %s\n", line, usage, inc, occ,
                             f->source[k]);
        }
        st_strbuf_puts(out, "\n\n");
    }
}
