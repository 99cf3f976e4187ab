/* Inside libstrata-mpi.so: the front (mpifront.c) and each MPI implementation's
 * wrappers (mpi.c, mpigather.c, built once per implementation with ST_MPI_FLAVOUR
 * set and that implementation's <mpi.h> included first).
 *
 * Design note. Open MPI's handles are pointers, MPICH's are ints: a wrapper is
 * built for one ABI. Which one a process uses is only known once its MPI library
 * is loaded (mpi4py's wheels carry both and choose at import; a launcher's
 * variables say little under srun), so the library exports one entry point per
 * MPI name (the front) taking its arguments as 64-bit words, and calls the
 * wrapper of the implementation loaded (decided at the first call after it is)
 * with them: on x86-64 every argument of these functions is an integer or a
 * pointer passed in its own register or 8-byte stack slot, so the words are the
 * caller's arguments whatever their C types. The lists below are the names both
 * sides know; the library is linked with --no-undefined, so a name listed and
 * not wrapped fails the build. */
#ifndef STRATA_NATIVE_MPIWRAP_H
#define STRATA_NATIVE_MPIWRAP_H

#include <stdint.h>

/* The recorder's calls (native/mpi.h's, or strata python's hooks). */
typedef int (*st_mpi_enter_fn)(const char *name, uint64_t bytes);
typedef void (*st_mpi_exit_fn)(const char *name);
typedef void (*st_mpi_rank_fn)(int rank, int size);
typedef const char *(*st_mpi_finish_fn)(int write);

/* strata python's hooks (strata_mpi_hooks), in the front; read atomically. */
typedef struct {
    st_mpi_enter_fn enter;
    st_mpi_exit_fn exit;
    st_mpi_rank_fn rank;
    st_mpi_finish_fn finish;
} st_mpi_hooks_t;
extern st_mpi_hooks_t st_mpi_hook;

/* The calling thread is inside an MPI call strata records: calls the
 * implementation makes of its own API are part of it, not calls of their own. */
extern __thread int st_mpi_inside __attribute__((tls_model("initial-exec")));

/* C functions wrapped, with their number of arguments. */
#define ST_MPI_C_CALLS(X)                                                                  \
    X(MPI_Send, 6) X(MPI_Ssend, 6) X(MPI_Rsend, 6) X(MPI_Bsend, 6) X(MPI_Recv, 7)          \
    X(MPI_Isend, 7) X(MPI_Issend, 7) X(MPI_Irecv, 7) X(MPI_Sendrecv, 12) X(MPI_Wait, 2)    \
    X(MPI_Waitall, 3) X(MPI_Waitany, 4) X(MPI_Test, 3) X(MPI_Probe, 4) X(MPI_Barrier, 1)   \
    X(MPI_Bcast, 5) X(MPI_Reduce, 7) X(MPI_Allreduce, 6) X(MPI_Scan, 6) X(MPI_Gather, 8)   \
    X(MPI_Scatter, 8) X(MPI_Allgather, 7) X(MPI_Alltoall, 7) X(MPI_Gatherv, 9)             \
    X(MPI_Allgatherv, 8) X(MPI_Scatterv, 9) X(MPI_Init, 2) X(MPI_Init_thread, 4)           \
    X(MPI_Finalize, 0)

/* Fortran routines wrapped (each in five spellings: mpi_send_, mpi_send__,
 * mpi_send, MPI_SEND, mpi_send_f08_), with their number of arguments. */
#define ST_MPI_F_CALLS(X)                                                                  \
    X(mpi_send, MPI_SEND, 7) X(mpi_ssend, MPI_SSEND, 7) X(mpi_recv, MPI_RECV, 8)           \
    X(mpi_isend, MPI_ISEND, 8) X(mpi_irecv, MPI_IRECV, 8) X(mpi_sendrecv, MPI_SENDRECV, 13) \
    X(mpi_wait, MPI_WAIT, 3) X(mpi_waitall, MPI_WAITALL, 4) X(mpi_barrier, MPI_BARRIER, 2) \
    X(mpi_bcast, MPI_BCAST, 6) X(mpi_reduce, MPI_REDUCE, 8)                                \
    X(mpi_allreduce, MPI_ALLREDUCE, 7) X(mpi_gather, MPI_GATHER, 9)                        \
    X(mpi_allgather, MPI_ALLGATHER, 8) X(mpi_finalize, MPI_FINALIZE, 1)                    \
    X(mpi_init, MPI_INIT, 1) X(mpi_init_thread, MPI_INIT_THREAD, 3)

/* An implementation's own name for `name`: st_mpi_openmpi_MPI_Send. */
#define ST_MPI_FN_(flavour, name) st_mpi_##flavour##_##name
#define ST_MPI_FN(flavour, name) ST_MPI_FN_(flavour, name)

#ifdef ST_MPI_FLAVOUR
#define ST_MPI_OWN(name) ST_MPI_FN(ST_MPI_FLAVOUR, name)
/* what one implementation's files share, under names of their own */
#define st_mpi_real ST_MPI_OWN(real)
#define st_mpi_object ST_MPI_OWN(object)
#define st_mpi_finisher ST_MPI_OWN(finisher)
#define st_mpi_gather_arm ST_MPI_OWN(gather_arm)

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

#endif
