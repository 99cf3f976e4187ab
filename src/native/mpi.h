/* MPI calls, through PMPI (issue 14): libstrata-mpi.so, with the wrappers of
 * every implementation found at build time (Open MPI's MPI_Comm is a pointer,
 * MPICH's an int: each ABI has its build of mpi.c, behind one front, mpifront.c,
 * that calls those of the implementation the process loaded: mpiwrap.h).
 *
 * Design note. `strata run` preloads it after libstrata-preload.so when the
 * program runs with MPI (cli/sample.c: the launcher's variables, else the
 * libraries the program needs). Its MPI_Send * libraries the program needs). Its MPI_Send, MPI_Allreduce ... (and the Fortran
 * spellings, mpi_send_, MPI_SEND, mpi_send_f08_ ...: Open MPI's Fortran layers call
 * PMPI_* themselves) come first in the global scope, so the program's calls, and
 * mpi4py's, reach them; each calls the preload library's strata__mpi_enter with the
 * call's name and its bytes (count times the type's size), the real function, and
 * strata__mpi_exit, so that a call is a node under its caller with its time and
 * bytes (the mpi_bytes metric) and a slice on the timeline. Only the outermost
 * MPI call of a thread is recorded (an implementation calling its own API is part
 * of the call). After MPI_Init it tells the preload library the rank and size in
 * MPI_COMM_WORLD (strata__mpi_rank), which names the rank's files when the
 * launcher's variables did not. Under `strata python` (the command preloads the
 * library into the interpreter under an MPI launcher) the extension registers its
 * own three calls instead (strata_mpi_hooks), which record into its session.
 * With STRATA_MPI_GATHER=ON (mpigather.c), MPI_Finalize starts with every rank
 * writing its results (strata__mpi_finish), then rank 0 gathers the ranks' profiles
 * and traces into its folder over MPI and merges them there.
 * The wrapper library links nothing of MPI. */
#ifndef STRATA_NATIVE_MPI_H
#define STRATA_NATIVE_MPI_H

#include <stdint.h>

/* The preload library's side (instrument.c), exported from it. */
int strata__mpi_enter(const char *name, uint64_t bytes);
void strata__mpi_exit(const char *name);
void strata__mpi_rank(int rank, int size);
/* STRATA_MPI_GATHER: with write 0, "" when the setting is on (NULL when off or no
 * session); with write 1, writes this rank's results now (once) and gives their
 * folder, NULL when none were written. Not signal-safe. */
const char *strata__mpi_finish(int write);

#endif
