#include "output/grid.h"

#include "base/number.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MINWIDTH 8

void st_grid_init(st_grid_t *g) { memset(g, 0, sizeof *g); }

void st_grid_column(st_grid_t *g, const char *header, int right)
{
    if (g->ncols == ST_GRID_MAXCOLS || g->nrows) {
        g->failed = 1;
        return;
    }
    st_grid_col_t *c = &g->cols[g->ncols++];
    c->header = header;
    c->right = right;
    c->width = strlen(header) + 2 > MINWIDTH ? strlen(header) + 2 : MINWIDTH;
}

static void put_row(st_strbuf_t *out, const st_grid_t *g, size_t r);
static void end_row(st_grid_t *g);

void st_grid_row(st_grid_t *g)
{
    if (g->failed)
        return;
    if (g->mode != ST_GRID_KEEP) {
        /* one row at a time, its cells written (second pass) or measured as they come */
        if (g->mode == ST_GRID_STREAM && g->nrows)
            end_row(g);
        g->nrows = 1;
        g->next = 0;
        return;
    }
    if (g->nrows == g->caprows) {
        size_t cap = g->caprows ? g->caprows * 2 : 64;
        uint32_t *cells = realloc(g->cells, cap * (size_t)g->ncols * sizeof *cells);
        if (!cells) {
            g->failed = 1;
            return;
        }
        g->cells = cells;
        g->caprows = cap;
    }
    for (int c = 0; c < g->ncols; c++)
        g->cells[g->nrows * (size_t)g->ncols + (size_t)c] = ST_GRID_EMPTY;
    g->nrows++;
}

/* Writes n spaces at p, which has room for SPACES more: most paddings are short,
 * and one store of a constant block is cheaper than memset's call. */
#define SPACES 32
static char *put_spaces(char *p, size_t n)
{
    static const char spaces[SPACES + 1] = "                                ";
    if (n <= SPACES)
        memcpy(p, spaces, SPACES);
    else
        memset(p, ' ', n);
    return p + n;
}

/* "| text |" of column c, the text padded to the column's width (the closing '|' is
 * the next cell's or the row's end). */
static void put_cell(st_strbuf_t *out, const st_grid_col_t *c, const char *s, size_t len)
{
    size_t pad = c->width - 2 > len ? c->width - 2 - len : 0;
    char *p = st_strbuf_room(out, len + pad + 3 + SPACES);
    if (!p)
        return;
    *p++ = '|';
    *p++ = ' ';
    if (c->right)
        p = put_spaces(p, pad);
    memcpy(p, s, len);
    p += len;
    if (!c->right)
        p = put_spaces(p, pad);
    *p = ' ';
    st_strbuf_commit(out, len + pad + 3);
}

/* Streaming: the open row's empty cells before column col. */
static void skip_to(st_grid_t *g, int col)
{
    for (; g->next < col; g->next++)
        put_cell(g->out, &g->cols[g->next], "", 0);
}

/* Streaming: the open row's last empty cells and its end. */
static void end_row(st_grid_t *g)
{
    skip_to(g, g->ncols);
    st_strbuf_puts(g->out, "|\n");
    g->nrows = 0;
}

/* Streaming: cell col of the open row, its printable text s (len bytes), written at
 * once; streamed cells come in the order of their columns, and one that does not
 * fails the table. */
static void stream_cell(st_grid_t *g, int col, const char *s, size_t len)
{
    if (col < g->next) {
        g->failed = 1;
        g->out->failed = 1;
        return;
    }
    skip_to(g, col);
    put_cell(g->out, &g->cols[col], s, len);
    g->next = col + 1;
}

/* Sets a cell of the last row from the C string text, of length n (or longer: the
 * text ends at its first NUL, as escaping reads it). */
static void set_cell(st_grid_t *g, int col, const char *text, size_t n)
{
    if (g->failed || g->nrows == 0 || col < 0 || col >= g->ncols)
        return;
    /* cells carry labels, which carry user data: escaped (the plain case as it is) */
    size_t len = st_text_plain_run(text, n, 0);
    const char *s = text;
    int plain = len == n;
    if (g->mode != ST_GRID_KEEP) {
        /* one cell at a time: the text is measured, or written at once */
        if (!plain) {
            st_strbuf_reset(&g->text);
            st_strbuf_printable(&g->text, text);
            s = st_strbuf_cstr(&g->text);
            len = g->text.len;
        }
        if (g->mode == ST_GRID_MEASURE)
            st_grid_widen(g, col, len);
        else
            stream_cell(g, col, s, len);
        if (g->text.failed)
            g->failed = 1;
        return;
    }
    size_t at = g->text.len;
    if (at >= ST_GRID_EMPTY) {
        g->failed = 1; /* a table of 4 GiB of text */
        return;
    }
    if (!plain)
        st_strbuf_printable(&g->text, text);
    else
        st_strbuf_add(&g->text, text, len);
    size_t w = g->text.len - at + 2;
    st_strbuf_putc(&g->text, '\0');
    if (g->text.failed) {
        g->failed = 1;
        return;
    }
    /* a cell set twice keeps its last text (the first stays in the arena) */
    g->cells[(g->nrows - 1) * (size_t)g->ncols + (size_t)col] = (uint32_t)at;
    if (w > g->cols[col].width)
        g->cols[col].width = w;
}

/* A cell of printable text (a number's): what set_cell does, without its escaping. */
static void set_plain(st_grid_t *g, int col, const char *text, size_t n)
{
    if (g->mode == ST_GRID_STREAM && !g->failed && g->nrows && col >= 0 && col < g->ncols)
        stream_cell(g, col, text, n);
    else
        set_cell(g, col, text, n);
}

void st_grid_cell_uint(st_grid_t *g, int col, uint64_t v)
{
    if (g->mode == ST_GRID_MEASURE) {
        st_grid_widen(g, col, st_grid_uint_width(v));
        return;
    }
    char text[24];
    size_t n = st_num_u64(text, v);
    text[n] = '\0';
    set_plain(g, col, text, n);
}

void st_grid_widen_fixed(st_grid_t *g, int col, int precision, double v)
{
    size_t w = st_grid_fixed_width(v, precision);
    if (w == 0) {
        char text[24];
        w = st_num_fixed(text, v, precision);
    }
    if (w == 0) { /* printf's (number.h) */
        int n = snprintf(NULL, 0, "%.*f", precision, v);
        w = n > 0 ? (size_t)n : 0;
    }
    st_grid_widen(g, col, w);
}

void st_grid_cell_fixed(st_grid_t *g, int col, int precision, double v)
{
    if (g->mode == ST_GRID_MEASURE) {
        st_grid_widen_fixed(g, col, precision, v);
        return;
    }
    char text[24];
    size_t n = st_num_fixed(text, v, precision);
    if (n) {
        text[n] = '\0';
        set_plain(g, col, text, n);
        return;
    }
    st_strbuf_t b; /* printf's: the rounding is not sure without it (number.h) */
    st_strbuf_init(&b);
    st_strbuf_printf(&b, "%.*f", precision, v);
    st_grid_cell(g, col, &b);
    st_strbuf_free(&b);
}

void st_grid_cell_str(st_grid_t *g, int col, const char *text)
{
    set_cell(g, col, text, strlen(text));
}

void st_grid_cell_strn(st_grid_t *g, int col, const char *text, size_t n)
{
    set_cell(g, col, text, n);
}

void st_grid_cell(st_grid_t *g, int col, st_strbuf_t *text)
{
    if (text->failed)
        g->failed = 1;
    const char *s = st_strbuf_cstr(text);
    set_cell(g, col, s, text->len); /* a NUL inside ends the text (not plain: escaped) */
    st_strbuf_reset(text);
}

void st_grid_free(st_grid_t *g)
{
    free(g->cells);
    st_strbuf_free(&g->text);
    memset(g, 0, sizeof *g);
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

static void put_rule(st_strbuf_t *out, const st_grid_t *g, char between)
{
    st_strbuf_putc(out, '|');
    for (int c = 0; c < g->ncols; c++) {
        if (c)
            st_strbuf_putc(out, between);
        st_strbuf_fill(out, '-', g->cols[c].width);
    }
    st_strbuf_puts(out, "|\n");
}

/* The title, the headers and their rules. */
static void put_head(st_strbuf_t *out, const st_grid_t *g, const char *title)
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
}

static void put_row(st_strbuf_t *out, const st_grid_t *g, size_t r)
{
    for (int c = 0; c < g->ncols; c++) {
        uint32_t at = g->cells[r * (size_t)g->ncols + (size_t)c];
        const char *s = at == ST_GRID_EMPTY ? "" : g->text.data + at;
        put_cell(out, &g->cols[c], s, strlen(s));
    }
    st_strbuf_puts(out, "|\n");
}

void st_grid_render(st_strbuf_t *out, const st_grid_t *g, const char *title)
{
    if (g->failed) {
        out->failed = 1;
        return;
    }
    put_head(out, g, title);
    for (size_t r = 0; r < g->nrows; r++)
        put_row(out, g, r);
    put_rule(out, g, '-');
}

void st_grid_measure(st_grid_t *g)
{
    if (g->nrows)
        g->failed = 1; /* rows already kept: a caller's mistake */
    g->mode = ST_GRID_MEASURE;
}

void st_grid_stream(st_grid_t *g, st_strbuf_t *out, const char *title)
{
    g->nrows = 0; /* the first pass's last row, dropped */
    st_strbuf_reset(&g->text);
    g->mode = ST_GRID_STREAM;
    g->out = out;
    if (g->failed) {
        out->failed = 1;
        return;
    }
    put_head(out, g, title);
}

void st_grid_end(st_grid_t *g)
{
    if (g->mode != ST_GRID_STREAM)
        return;
    if (g->failed) {
        g->out->failed = 1;
        return;
    }
    if (g->nrows)
        end_row(g);
    put_rule(g->out, g, '-');
}

void st_grid_widen(st_grid_t *g, int col, size_t n)
{
    if (g->mode == ST_GRID_MEASURE && col >= 0 && col < g->ncols && n + 2 > g->cols[col].width)
        g->cols[col].width = n + 2;
}

size_t st_grid_uint_width(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

size_t st_grid_fixed_width(double v, int precision)
{
    /* powers of ten up to 1e15, all exact in a double */
    static const double pow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    if (!(v >= 0) || signbit(v) || precision < 0 || precision > 12 || !(v < 1e14))
        return 0; /* -0.0 prints "-0.0...", nan and inf their names */
    size_t digits = 1;
    while (v >= pow10[digits])
        digits++;
    /* Rounding to `precision` decimals moves v by half a unit of the last one at most:
     * well short of the next power of ten, the integer part keeps its digits (it
     * cannot round below the power of ten under v, which those decimals write exactly). */
    if (v + 1.0 / pow10[precision] >= pow10[digits])
        return 0;
    return digits + (precision > 0 ? 1 + (size_t)precision : 0);
}
