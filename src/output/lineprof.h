/* Line profiles. Line timings (--lines) in line_profiler's two forms: its text (what `kernprof -l
 * -v` and `python -m line_profiler` print) and its `.lprof` file (the pickle of a
 * line_profiler LineStats that `python -m line_profiler` reads).
 *
 * Design note. The text is line_profiler's show_text for the same numbers, byte for
 * byte: times kept in ns (the .lprof's unit is 1e-9 s, as kernprof's timer), shown
 * in microseconds ("Timer unit: 1e-06 s"), the same column widths (the minimum 6, 9,
 * 12, 8, 8, widened by the longest entry), the same number formats (%5.1f, falling
 * back to %5.3g where a value overflows its column) and the same lines: the
 * function's block of source from its first line. A function whose file was not
 * found gets line_profiler's "Could not find file" lines and empty contents. The
 * tests check the text against line_profiler's own rendering of the .lprof. */
#ifndef STRATA_OUTPUT_LINEPROF_H
#define STRATA_OUTPUT_LINEPROF_H

#include <stddef.h>

#include "base/strbuf.h"
#include "model/model.h"

/* Appends the text of m's line timings to out: the timer unit, then at most `limit`
 * functions (0: all), in the order they were chosen. */
void st_lineprof_text_write(st_strbuf_t *out, const st_model_t *m, size_t limit);

/* Appends the .lprof (a pickle, protocol 2) of m's line timings to out. */
void st_lineprof_pickle_write(st_strbuf_t *out, const st_model_t *m);

/* Appends memory_profiler's table of m's line memory (`python -m memory_profiler`'s
 * text: Line #, Mem usage, Increment, Occurrences, Line Contents; MiB with its
 * default precision, 3 decimals),
 * the same widths and formats; a function that never ran, or whose source was not
 * found, is left out as memory_profiler leaves it out. */
void st_memprof_text_write(st_strbuf_t *out, const st_model_t *m);

#endif
