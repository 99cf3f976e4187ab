/* Folded stacks, the input of Brendan Gregg's flamegraph.pl (and of speedscope's
 * and Perfetto's importers): one line per call path with time of its own,
 *     thread 0 (MainThread);main;solve;fib 12345
 * frames root first, separated by ';', then a space and the path's self time in
 * whole nanoseconds of the primary timer (or its calls, for a profile that only
 * counted calls). The bottom frame names the thread ("rank 3 thread 0
 * (MainThread)" under MPI), so each thread is one tower. Paths with no time of
 * their own are left out. Paths deeper than ST_FOLDED_MAX_DEPTH frames (deep
 * recursion) are cut there: the time of everything below a node at that depth is
 * one line ending in the frame "[deeper calls]", so the output grows linearly
 * with the tree's nodes, never with the square of its depth. In labels, ';'
 * becomes ':' and control characters become spaces, so that every line parses. */
#ifndef STRATA_OUTPUT_FOLDED_H
#define STRATA_OUTPUT_FOLDED_H

#include "model/model.h"
#include "base/strbuf.h"

/* Most function frames on one line (the thread's frame not counted). */
#define ST_FOLDED_MAX_DEPTH 256

/* Appends the lines to out (a streaming buffer writes them as they come).
 * Returns 0 or ST_ENOMEM. */
int st_folded_write(st_strbuf_t *out, const st_model_t *m);

/* Appends the name of a thread as the writers show it: "thread 0 (MainThread)",
 * "rank 3 thread 0 (MainThread)" (unescaped). */
void st_thread_title(st_strbuf_t *out, const st_model_thread_t *th);

#endif
