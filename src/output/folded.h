/* Folded stacks, the input of Brendan Gregg's flamegraph.pl (and of speedscope's
 * and Perfetto's importers): one line per call path with time of its own,
 *     main;solve;fib 12345
 * frames root first, separated by ';', then a space and the path's self time in
 * whole nanoseconds of the primary timer (or its calls, for a profile that only
 * counted calls). Paths with no time of their own are left out. Every thread and
 * rank is written; equal paths from different threads are summed by the tools.
 * In labels, ';' becomes ':' and control characters become spaces, so that every
 * line parses. */
#ifndef STRATA_OUTPUT_FOLDED_H
#define STRATA_OUTPUT_FOLDED_H

#include "core/model.h"
#include "core/strbuf.h"

/* Appends the lines to out. Returns 0 or ST_ENOMEM. */
int st_folded_write(st_strbuf_t *out, const st_model_t *m);

#endif
