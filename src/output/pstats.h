/* pstats: the file cProfile's dump_stats() writes and pstats.Stats, SnakeViz and
 * `gprof2dot -f pstats` read, written directly in Python's marshal format.
 *
 * The marshalled object is cProfile's stats dict:
 *     {(file, line, name): (cc, nc, tt, ct, {caller key: (nc, cc, tt, ct)})}
 * with cc the primitive (non-recursive) calls, nc all calls, tt the time in the
 * function itself and ct the cumulative time, in seconds (floats). Keys are the
 * functions' locations, cProfile's (co_filename, co_firstlineno, co_name), and
 * ('~', 0, '<built-in method sorted>') for C functions; a label with no recorded
 * location (an older profile.json) is keyed ('~', 0, label). Every thread (and MPI
 * rank) of the model is folded in, as one cProfile run would be. Each thread has
 * one root, ('~', 0, '<thread 0 (MainThread)>') ('<rank 3 thread 0 (...)>' under
 * MPI), called once, whose cumulative time is the thread's, and which calls the
 * functions the thread ran at its top level (import-time calls included): SnakeViz
 * and gprof2dot see one tree per thread, as in cProfile's files. Profiles that
 * only counted calls get zero times. */
#ifndef STRATA_OUTPUT_PSTATS_H
#define STRATA_OUTPUT_PSTATS_H

#include "model/model.h"
#include "base/strbuf.h"

/* Appends the marshalled dict to out (binary). Returns 0 or ST_ENOMEM. */
int st_pstats_write(st_strbuf_t *out, const st_model_t *m);

#endif
