/* Callgrind's profile format, for KCachegrind and QCachegrind
 * (valgrind.org/docs/manual/cl-format.html): the function graph
 * (output/fgraph.h) with one cost line per function (its own time, at its first
 * line) and one call line per caller -> callee edge (calls, and the time spent
 * under that call, counted once through recursion as cProfile counts it). Events
 * are the timers measured, in nanoseconds (or "Calls" for a profile that only
 * counted calls). Names are compressed ("fn=(3) name" once, then "fn=(3)"). C
 * functions and labels with no location get the file "???", as valgrind writes an
 * unknown file. */
#ifndef STRATA_OUTPUT_CALLGRIND_H
#define STRATA_OUTPUT_CALLGRIND_H

#include "model/model.h"
#include "base/strbuf.h"

/* Appends the profile to out. Returns 0 or ST_ENOMEM. */
int st_callgrind_write(st_strbuf_t *out, const st_model_t *m);

#endif
