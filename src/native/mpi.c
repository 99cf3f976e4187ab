/* MPI calls through PMPI: one MPI implementation's wrappers inside
 * libstrata-mpi.so (see mpi.h; mpifront.c picks the implementation).
 *
 * Compiled once per MPI implementation found at build time, against its mpi.h
 * (ST_MPI_FLAVOUR names it, STRATA_MPI_SONAMES its C library), into functions
 * named st_mpi_<flavour>_<MPI name> (mpiwrap.h) that the front calls; linked with
 * nothing of MPI: the real functions are found at their first call in the library
 * already loaded (dlopen with RTLD_NOLOAD: mpi4py's libmpi sits in a local scope
 * that RTLD_NEXT does not search), so that the library loads into any process,
 * MPI or not, and references no MPI data symbol. */
#define _GNU_SOURCE
#include "native/mpi.h"

#include <dlfcn.h>
#include <mpi.h>

#include "native/mpiwrap.h"

#include <stdint.h>
#include <stdio.h>

#ifndef ST_MPI_FLAVOUR
#error "mpi.c is built once per MPI implementation, with ST_MPI_FLAVOUR (CMakeLists.txt)"
#endif

#define NOTRACE __attribute__((no_instrument_function))

/* The preload library's side (mpi.h) is found through the global scope, where
 * the preload library comes first; weak: without it, nothing is recorded. */
#pragma weak strata__mpi_enter
#pragma weak strata__mpi_exit
#pragma weak strata__mpi_rank
#pragma weak strata__mpi_finish

/* A real function: from the MPI library loaded (the C one, or the Fortran layers),
 * else the next definition in the global scope. */
NOTRACE static void *find(const char *name, const char *const *libs)
{
    for (; *libs; libs++) {
        void *h = dlopen(*libs, RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            void *p = dlsym(h, name);
            dlclose(h);
            if (p)
                return p;
        }
    }
    return dlsym(RTLD_NEXT, name);
}

static const char *const c_libs[] = {STRATA_MPI_SONAMES, NULL};
static const char *const f_libs[] = {STRATA_MPI_FORTRAN_SONAMES, STRATA_MPI_SONAMES, NULL};

NOTRACE void *st_mpi_real(const char *name) { return find(name, c_libs); }

NOTRACE void *st_mpi_object(const char *name)
{
    /* the program's copy when it refers to the object (a copy relocation puts it in
     * the executable: libmpi's own is unused then), else libmpi's */
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : find(name, c_libs);
}

NOTRACE st_mpi_finish_fn st_mpi_finisher(void)
{
    st_mpi_finish_fn f = __atomic_load_n(&st_mpi_hook.finish, __ATOMIC_ACQUIRE);
    return f ? f : strata__mpi_finish;
}

/* A real function pointer, found once (a race finds the same value). */
#define REAL(var, name, libs)                                                              \
    do {                                                                                   \
        if (!__atomic_load_n(&var, __ATOMIC_ACQUIRE))                                      \
            __atomic_store_n(&var, (__typeof__(var))find(name, libs), __ATOMIC_RELEASE);   \
    } while (0)

/* Bytes of `count` elements of `type` (0 when the type has no size yet). */
NOTRACE static uint64_t bytes_of(int count, MPI_Datatype type)
{
    static int (*type_size)(MPI_Datatype, int *);
    REAL(type_size, "PMPI_Type_size", c_libs);
    int size = 0;
    if (count <= 0 || !type_size || type_size(type, &size) != MPI_SUCCESS || size < 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

NOTRACE static uint64_t fbytes_of(const MPI_Fint *count, const MPI_Fint *type)
{
#ifdef MPICH_VERSION
    /* MPICH's handles are the Fortran integers (MPI_Type_f2c is a cast) */
    return count && type ? bytes_of((int)*count, MPI_Type_f2c(*type)) : 0;
#else
    static MPI_Datatype (*type_f2c)(MPI_Fint);
    REAL(type_f2c, "PMPI_Type_f2c", c_libs);
    return count && type && type_f2c ? bytes_of((int)*count, type_f2c(*type)) : 0;
#endif
}

/* The communicator's size (1 when unknown). */
NOTRACE static int comm_size(MPI_Comm comm)
{
    static int (*size_of)(MPI_Comm, int *);
    REAL(size_of, "PMPI_Comm_size", c_libs);
    int n = 1;
    if (!size_of || size_of(comm, &n) != MPI_SUCCESS || n < 1)
        n = 1;
    return n;
}

/* 0: not recorded; 1: the preload library's recorder; 2: the hooks'. */
NOTRACE static int enter(const char *name, uint64_t bytes)
{
    if (st_mpi_inside)
        return 0;
    st_mpi_enter_fn hook = __atomic_load_n(&st_mpi_hook.enter, __ATOMIC_ACQUIRE);
    int which = hook ? 2 : strata__mpi_enter ? 1 : 0;
    if (!which)
        return 0;
    st_mpi_inside = 1;
    if (which == 2 ? hook(name, bytes) : strata__mpi_enter(name, bytes))
        return which;
    st_mpi_inside = 0;
    return 0;
}

NOTRACE static void leave_which(const char *name, int which)
{
    st_mpi_exit_fn hook = __atomic_load_n(&st_mpi_hook.exit, __ATOMIC_ACQUIRE);
    if (which == 2 && hook)
        hook(name);
    else if (which == 1)
        strata__mpi_exit(name);
    st_mpi_inside = 0;
}
#define leave(name) leave_which(name, on)

/* MPI_COMM_WORLD's rank and size, told to the preload library after MPI_Init;
 * then STRATA_MPI_GATHER's callback is armed (mpiwrap.h). */
NOTRACE static void tell_rank(void)
{
    static int (*rank_of)(MPI_Comm, int *);
    REAL(rank_of, "PMPI_Comm_rank", c_libs);
    st_mpi_rank_fn tell = __atomic_load_n(&st_mpi_hook.rank, __ATOMIC_ACQUIRE);
    if (!tell)
        tell = strata__mpi_rank;
    if (!tell || !rank_of)
        return;
    MPI_Comm world = ST_MPI_HANDLE(MPI_Comm, ompi_mpi_comm_world, MPI_COMM_WORLD);
    if (!world)
        return;
    int rank, size = comm_size(world);
    if (rank_of(world, &rank) != MPI_SUCCESS)
        return;
    tell(rank, size);
    if (size > 1)
        st_mpi_gather_arm(world);
}

#define FAIL MPI_ERR_OTHER

/* A C wrapper: `ret name(params)` calling P`name`(args), `bytes` an expression of
 * the parameters. */
#define WRAP(name, params, args, bytes)                                                    \
    NOTRACE int ST_MPI_OWN(name) params                                                    \
    {                                                                                      \
        static int(*real) params;                                                          \
        REAL(real, "P" #name, c_libs);                                                     \
        if (!real)                                                                         \
            return FAIL;                                                                   \
        int on = enter(#name, bytes);                                                      \
        int rc = real args;                                                                \
        if (on)                                                                            \
            leave(#name);                                                                  \
        return rc;                                                                         \
    }

WRAP(MPI_Send, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c), bytes_of(n, t))
WRAP(MPI_Ssend, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c), bytes_of(n, t))
WRAP(MPI_Rsend, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c), bytes_of(n, t))
WRAP(MPI_Bsend, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c), bytes_of(n, t))
WRAP(MPI_Recv, (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Status *st),
     (b, n, t, s, g, c, st), bytes_of(n, t))
WRAP(MPI_Isend,
     (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, d, g, c, r), bytes_of(n, t))
WRAP(MPI_Issend,
     (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, d, g, c, r), bytes_of(n, t))
WRAP(MPI_Irecv, (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, s, g, c, r), bytes_of(n, t))
WRAP(MPI_Sendrecv,
     (const void *sb, int sn, MPI_Datatype st, int d, int sg, void *rb, int rn,
      MPI_Datatype rt, int s, int rg, MPI_Comm c, MPI_Status *stat),
     (sb, sn, st, d, sg, rb, rn, rt, s, rg, c, stat), bytes_of(sn, st))
WRAP(MPI_Wait, (MPI_Request *r, MPI_Status *st), (r, st), 0)
WRAP(MPI_Waitall, (int n, MPI_Request r[], MPI_Status st[]), (n, r, st), 0)
WRAP(MPI_Waitany, (int n, MPI_Request r[], int *i, MPI_Status *st), (n, r, i, st), 0)
WRAP(MPI_Test, (MPI_Request *r, int *f, MPI_Status *st), (r, f, st), 0)
WRAP(MPI_Probe, (int s, int g, MPI_Comm c, MPI_Status *st), (s, g, c, st), 0)
WRAP(MPI_Barrier, (MPI_Comm c), (c), 0)
WRAP(MPI_Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c),
     bytes_of(n, t))
WRAP(MPI_Reduce,
     (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c),
     (s, r, n, t, o, root, c), bytes_of(n, t))
WRAP(MPI_Allreduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c),
     (s, r, n, t, o, c), bytes_of(n, t))
WRAP(MPI_Scan, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c),
     (s, r, n, t, o, c), bytes_of(n, t))
WRAP(MPI_Gather,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
      MPI_Comm c),
     (s, sn, st, r, rn, rt, root, c), bytes_of(sn, st))
WRAP(MPI_Scatter,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
      MPI_Comm c),
     (s, sn, st, r, rn, rt, root, c), bytes_of(rn, rt))
WRAP(MPI_Allgather,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rt, c), bytes_of(sn, st))
WRAP(MPI_Alltoall,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rt, c), bytes_of(sn, st) * (uint64_t)comm_size(c))
WRAP(MPI_Gatherv,
     (const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int rd[],
      MPI_Datatype rt, int root, MPI_Comm c),
     (s, sn, st, r, rn, rd, rt, root, c), bytes_of(sn, st))
WRAP(MPI_Allgatherv,
     (const void *s, int sn, MPI_Datatype st, void *r, const int rn[], const int rd[],
      MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rd, rt, c), bytes_of(sn, st))
WRAP(MPI_Scatterv,
     (const void *s, const int sn[], const int sd[], MPI_Datatype st, void *r, int rn,
      MPI_Datatype rt, int root, MPI_Comm c),
     (s, sn, sd, st, r, rn, rt, root, c), bytes_of(rn, rt))

/* MPI_Init and MPI_Init_thread (mpi4py's): timed, then the rank confirmed. */
NOTRACE int ST_MPI_OWN(MPI_Init)(int *argc, char ***argv)
{
    static int (*real)(int *, char ***);
    REAL(real, "PMPI_Init", c_libs);
    if (!real)
        return FAIL;
    int on = enter("MPI_Init", 0);
    int rc = real(argc, argv);
    if (on)
        leave("MPI_Init");
    if (rc == MPI_SUCCESS)
        tell_rank();
    return rc;
}

NOTRACE int ST_MPI_OWN(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided)
{
    static int (*real)(int *, char ***, int, int *);
    REAL(real, "PMPI_Init_thread", c_libs);
    if (!real)
        return FAIL;
    int on = enter("MPI_Init_thread", 0);
    int rc = real(argc, argv, required, provided);
    if (on)
        leave("MPI_Init_thread");
    if (rc == MPI_SUCCESS)
        tell_rank();
    return rc;
}

WRAP(MPI_Finalize, (void), (), 0)

/* ------------------------------------------------------------------------- */
/* Fortran: Open MPI's Fortran layers call PMPI_* themselves, so a Fortran
 * program's calls are wrapped under their own names (mpi_send_, mpi_send__,
 * mpi_send, MPI_SEND, and mpi_f08's mpi_send_f08_). Every argument is passed by
 * reference (handles as MPI_Fint), with no hidden length: each wrapper forwards
 * its pointers to the real function of the same name. */

typedef void *p_;
#define FP1 p_ a1
#define FP2 FP1, p_ a2
#define FP3 FP2, p_ a3
#define FP4 FP3, p_ a4
#define FP5 FP4, p_ a5
#define FP6 FP5, p_ a6
#define FP7 FP6, p_ a7
#define FP8 FP7, p_ a8
#define FP9 FP8, p_ a9
#define FP10 FP9, p_ a10
#define FP13 FP10, p_ a11, p_ a12, p_ a13
#define FA1 a1
#define FA2 FA1, a2
#define FA3 FA2, a3
#define FA4 FA3, a4
#define FA5 FA4, a5
#define FA6 FA5, a6
#define FA7 FA6, a7
#define FA8 FA7, a8
#define FA9 FA8, a9
#define FA10 FA9, a10
#define FA13 FA10, a11, a12, a13

/* One Fortran entry point `sym` of `mpi` with n pointer arguments, then `after`. */
#define FCALL(sym, mpi, n, bytes, after)                                                   \
    NOTRACE void ST_MPI_OWN(sym)(FP##n)                                                    \
    {                                                                                      \
        static void (*real)(FP##n);                                                        \
        REAL(real, #sym, f_libs);                                                          \
        if (!real)                                                                         \
            return;                                                                        \
        int on = enter(mpi, bytes);                                                        \
        real(FA##n);                                                                       \
        if (on)                                                                            \
            leave(mpi);                                                                    \
        after;                                                                             \
    }
#define FONE(sym, mpi, n, bytes) FCALL(sym, mpi, n, bytes, (void)0)
/* Every spelling of a Fortran MPI routine. */
#define FWRAP(lower, upper, mpi, n, bytes)                                                 \
    FONE(lower##_, mpi, n, bytes)                                                          \
    FONE(lower##__, mpi, n, bytes)                                                         \
    FONE(lower, mpi, n, bytes)                                                             \
    FONE(upper, mpi, n, bytes)                                                             \
    FONE(lower##_f08_, mpi, n, bytes)

#define FB(c, t) fbytes_of((const MPI_Fint *)(c), (const MPI_Fint *)(t))

FWRAP(mpi_send, MPI_SEND, "MPI_Send", 7, FB(a2, a3))
FWRAP(mpi_ssend, MPI_SSEND, "MPI_Ssend", 7, FB(a2, a3))
FWRAP(mpi_recv, MPI_RECV, "MPI_Recv", 8, FB(a2, a3))
FWRAP(mpi_isend, MPI_ISEND, "MPI_Isend", 8, FB(a2, a3))
FWRAP(mpi_irecv, MPI_IRECV, "MPI_Irecv", 8, FB(a2, a3))
FWRAP(mpi_sendrecv, MPI_SENDRECV, "MPI_Sendrecv", 13, FB(a2, a3))
FWRAP(mpi_wait, MPI_WAIT, "MPI_Wait", 3, 0)
FWRAP(mpi_waitall, MPI_WAITALL, "MPI_Waitall", 4, 0)
FWRAP(mpi_barrier, MPI_BARRIER, "MPI_Barrier", 2, 0)
FWRAP(mpi_bcast, MPI_BCAST, "MPI_Bcast", 6, FB(a2, a3))
FWRAP(mpi_reduce, MPI_REDUCE, "MPI_Reduce", 8, FB(a3, a4))
FWRAP(mpi_allreduce, MPI_ALLREDUCE, "MPI_Allreduce", 7, FB(a3, a4))
FWRAP(mpi_gather, MPI_GATHER, "MPI_Gather", 9, FB(a2, a3))
FWRAP(mpi_allgather, MPI_ALLGATHER, "MPI_Allgather", 8, FB(a2, a3))
FWRAP(mpi_finalize, MPI_FINALIZE, "MPI_Finalize", 1, 0)

/* Fortran's MPI_Init and MPI_Init_thread, then the rank (the Fortran layer calls
 * PMPI_Init itself: the C wrapper never sees it). */
#define FINIT(sym, mpi, n) FCALL(sym, mpi, n, 0, tell_rank())
#define FINITS(lower, upper, mpi, n)                                                       \
    FINIT(lower##_, mpi, n) FINIT(lower##__, mpi, n) FINIT(lower, mpi, n)                 \
    FINIT(upper, mpi, n) FINIT(lower##_f08_, mpi, n)

FINITS(mpi_init, MPI_INIT, "MPI_Init", 1)
FINITS(mpi_init_thread, MPI_INIT_THREAD, "MPI_Init_thread", 3)
