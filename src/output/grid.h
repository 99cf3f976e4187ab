/* A text table in timemory's style: a title row, centred headers, one row per
 * record, '|' borders. Column widths are at least 8 and grow to fit the header and
 * every cell (plus one space of padding each side); headers are centred as
 * timemory centres them (the seed's tables depend on it). Used by the profile
 * tables and by `strata avail`.
 *
 * Memory: a row costs its cells' text plus 4 bytes a cell (the text is one
 * arena, not a string per cell), so a table of a million rows stays a fraction
 * of the call tree's size. Cells are escaped as they are set (st_strbuf_printable): a label's control
 * characters or escape sequences never reach the terminal raw nor break a row.
 *
 * Building never fails loudly: an allocation failure sets `failed`, and render()
 * then marks the output buffer failed instead of writing a partial table.
 *
 * Streaming, for tables of any size (the profile tables: a row a node): the caller
 * makes its rows twice with the same code. After st_grid_measure() cells only widen
 * their columns; after st_grid_stream() each cell is written to the output as it
 * is set, padded to the width the first pass found (so a streamed row sets its
 * cells in the order of their columns, each once; the columns it skips are empty),
 * and st_grid_end() ends the last row and writes the closing rule. The grid then
 * holds no row at all: memory is the longest cell, whatever the row count, and
 * the output is byte for byte what render() writes for the same rows. A failure
 * there marks the output failed (a streamed file is then abandoned by its writer). */
#ifndef STRATA_OUTPUT_GRID_H
#define STRATA_OUTPUT_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

#define ST_GRID_MAXCOLS 16

typedef struct {
    const char *header;  /* not copied: must outlive the grid */
    int right;           /* right-aligned (numbers) */
    size_t width;        /* the cell's width, its two padding spaces included */
} st_grid_col_t;

typedef struct {
    st_grid_col_t cols[ST_GRID_MAXCOLS];
    int ncols;
    uint32_t *cells;     /* nrows * ncols offsets into text; ST_GRID_EMPTY prints empty */
    size_t nrows, caprows;
    st_strbuf_t text;    /* every cell's text, NUL-terminated, one after another
                          * (measuring or streaming: one cell's escaped text) */
    int failed;
    int mode;            /* ST_GRID_KEEP, ST_GRID_MEASURE or ST_GRID_STREAM */
    int next;            /* streaming: the open row's next column */
    st_strbuf_t *out;    /* ST_GRID_STREAM: where rows go (not owned) */
} st_grid_t;

enum { ST_GRID_KEEP, ST_GRID_MEASURE, ST_GRID_STREAM };

#define ST_GRID_EMPTY UINT32_MAX

void st_grid_init(st_grid_t *g);
void st_grid_free(st_grid_t *g);
/* Adds a column; all columns come before the first row. */
void st_grid_column(st_grid_t *g, const char *header, int right);
/* Starts a new row; cells of the row are then set by column index. */
void st_grid_row(st_grid_t *g);
/* Sets a cell of the last row to a copy of text. */
void st_grid_cell_str(st_grid_t *g, int col, const char *text);
/* The same, text's length n known (a number formatted into a small buffer). */
void st_grid_cell_strn(st_grid_t *g, int col, const char *text, size_t n);
/* Sets a cell of the last row from text, then empties text (for reuse). */
void st_grid_cell(st_grid_t *g, int col, st_strbuf_t *text);
/* Number cells: v as "%llu" writes it, or with `precision` decimals as "%.*f" does.
 * Measuring, only their widths count, found without formatting where that is sure
 * (printf of a double is most of a table's time); streaming, the text goes to the
 * row as it is made (digits need no escaping). */
void st_grid_cell_uint(st_grid_t *g, int col, uint64_t v);
void st_grid_cell_fixed(st_grid_t *g, int col, int precision, double v);
/* Appends the table under `title` to out, ending with a newline. */
void st_grid_render(st_strbuf_t *out, const st_grid_t *g, const char *title);
/* Streaming, first pass: rows from now on widen the columns and are then dropped.
 * After the columns, before the first row. */
void st_grid_measure(st_grid_t *g);
/* Streaming, second pass: writes the title and the headers to out with the widths
 * measured; rows from now on are written to out (the same rows, in the same order). */
void st_grid_stream(st_grid_t *g, st_strbuf_t *out, const char *title);
/* Streaming: writes the last row and the closing rule. */
void st_grid_end(st_grid_t *g);
/* Streaming, first pass: widens column col for a cell of n bytes of printable text
 * without making the text (what the second pass writes there must be n bytes). */
void st_grid_widen(st_grid_t *g, int col, size_t n);
/* Streaming, first pass: widens column col for v as st_grid_cell_fixed writes it
 * (the widest of a column's values is enough: for values >= 0 the text only grows
 * with the value). */
void st_grid_widen_fixed(st_grid_t *g, int col, int precision, double v);
/* The length of "%llu" of v. */
size_t st_grid_uint_width(uint64_t v);
/* The length of "%.*f" of v with `precision` decimals, found without formatting, or
 * 0 when that is not sure (negative, huge, or within a rounding of the next power
 * of ten): then only formatting says. */
size_t st_grid_fixed_width(double v, int precision);

#endif
