/* Inside libstrata-mpi-<flavour>.so: what mpi.c gives mpigather.c. Needs the
 * flavour's <mpi.h> included first. */
#ifndef STRATA_NATIVE_MPIWRAP_H
#define STRATA_NATIVE_MPIWRAP_H

/* strata__mpi_finish's shape (mpi.h), also strata python's hook. */
typedef const char *(*st_mpi_finish_fn)(int write);

/* The real MPI function `name` (a PMPI_ one) in the MPI library loaded, or NULL. */
void *st_mpi_real(const char *name);

/* Open MPI's predefined object `name` (ompi_mpi_comm_world ...), or NULL: its
 * handles are addresses of data symbols, found at run time, never referenced, so
 * that the library loads into a process without MPI. */
void *st_mpi_object(const char *name);

/* A predefined handle: Open MPI's object, MPICH's constant. */
#ifdef OPEN_MPI
#define ST_MPI_HANDLE(type, ompi, mpich) ((type)st_mpi_object(#ompi))
#else
#define ST_MPI_HANDLE(type, ompi, mpich) (mpich)
#endif

/* The recorder's finish call: strata python's hook, else the preload library's,
 * else NULL. */
st_mpi_finish_fn st_mpi_finisher(void);

/* After MPI_Init, on every rank of a job of several: when STRATA_MPI_GATHER is on,
 * duplicates `world` and sets the attribute on MPI_COMM_SELF whose deletion (the
 * first thing MPI_Finalize does) gathers the results (mpigather.c). Collective
 * over the ranks that have the setting on: every rank must run under strata with
 * the same setting. */
void st_mpi_gather_arm(MPI_Comm world);

#endif
