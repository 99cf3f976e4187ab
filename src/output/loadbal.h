/* The load-balance table of a result that holds several MPI ranks: for each
 * function, its time on every rank folded into min, max, mean and standard
 * deviation across ranks, the imbalance, and which ranks did no work in it (Tau's
 * per-rank view: "only 20 of the 32 ranks are actually doing any work").
 *
 * The time of a function on a rank is its cumulative time (output/fgraph.h: own
 * time plus what it called, recursion counted once) over all that rank's
 * threads. A rank did no work in a function when the function never ran there.
 * Imbalance is (max - mean) / max: 0 % when every rank takes as long, near
 * 100 % when one rank does all the work. Ranks with no work count as 0 in min,
 * mean and stddev. Rows are sorted by max, the time the slowest rank spent. A
 * first line says how many ranks did any work at all. */
#ifndef STRATA_OUTPUT_LOADBAL_H
#define STRATA_OUTPUT_LOADBAL_H

#include "model/model.h"
#include "base/strbuf.h"

/* The distinct ranks of m, sorted (malloc'd: free), *nr of them; with none, NULL
 * and *err 0 after a line in out saying there is no `what`; NULL and *err
 * ST_ENOMEM when out of memory. For the writers of per-rank views. */
uint32_t *st_loadbal_ranks(const st_model_t *m, uint32_t *nr, st_strbuf_t *out,
                           const char *what, int *err);

/* What the table's "ranks" are: MPI ranks, or the processes of a run's tree (the
 * ranks of a model made from them are their pids: cli/processes.c). */
typedef struct {
    const char *many;   /* "ranks": "3 of 4 ranks did any work" */
    const char *head;   /* "RANKS": the column heads */
    const char *title;  /* "MPI RANKS": "LOAD BALANCE ACROSS MPI RANKS (SECONDS)" */
    int total;          /* a TOTAL column: the sum over them (a pool's work, whole) */
    uint32_t top;       /* rows shown, the slowest first (0: all), then how many more */
} st_loadbal_unit_t;
extern const st_loadbal_unit_t st_loadbal_mpi;

/* Appends the table to out (times in seconds with `precision` decimals), across
 * MPI ranks (st_loadbal_write) or across `u`. Returns 0, or ST_ENOMEM. A model
 * without ranks gets a one-line note. */
int st_loadbal_write(st_strbuf_t *out, const st_model_t *m, int precision);
int st_loadbal_write_as(st_strbuf_t *out, const st_model_t *m, int precision,
                        const st_loadbal_unit_t *u);

#endif
