/* The MPI summary of a result that holds several MPI ranks, as mpiP gives it: per
 * rank, the application's time, the time in MPI calls and its share; then the
 * MPI call sites (a call and the function that made it) by time and by bytes,
 * summed over the ranks, with how much their time varies from rank to rank.
 *
 * An MPI call is a node labelled MPI_* (the wrappers of `strata run`,
 * native/mpi.h), counted where it is outermost. A rank's application time is the
 * time of the calls at the top of its first thread (the program's main, from its
 * first recorded call to its end); its MPI time is that of the MPI calls of all its
 * threads. A site's COV is the standard deviation of its time across the ranks
 * over their mean (a rank without the site counts 0): 0 when every rank spends as
 * long in it. Bytes are those of the mpi_bytes metric. Times in seconds. */
#ifndef STRATA_OUTPUT_MPISUM_H
#define STRATA_OUTPUT_MPISUM_H

#include "base/strbuf.h"
#include "model/model.h"

/* The call sites shown in each of the two site tables. */
#define ST_MPISUM_TOP 20

/* 1 when m holds MPI calls of ranks (a summary to write). */
int st_mpisum_applies(const st_model_t *m);

/* Appends the summary to out. Returns 0, or ST_ENOMEM. */
int st_mpisum_write(st_strbuf_t *out, const st_model_t *m, int precision);

#endif
