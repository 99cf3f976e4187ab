/* Tables of lines. sampled_lines.txt: the lines the innermost Python frames of stack
 * samples were running (py-spy's and Austin's line view), most periods first; and
 * memory_lines.txt: the lines holding memory (memray's view of the peak and leaks). */
#ifndef STRATA_OUTPUT_LINES_H
#define STRATA_OUTPUT_LINES_H

#include <stddef.h>

#include "base/strbuf.h"
#include "model/model.h"

/* Appends the table of m's sampled lines (m->stacks) to out: at most `limit`
 * rows (0: all), then a row saying how many more there are. Nothing when no line
 * was sampled. */
void st_lines_table_write(st_strbuf_t *out, const st_model_t *m, size_t limit);

/* memory_lines.txt (--memory): the lines whose sampled allocations held memory at
 * the peak and at the end, most at the peak first, in MiB; at most `limit` rows (0:
 * all), then a row of the rest. Nothing when there are none. */
void st_memlines_table_write(st_strbuf_t *out, const st_model_t *m, size_t limit);

#endif
