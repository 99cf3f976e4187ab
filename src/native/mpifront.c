/* libstrata-mpi.so's entry points: one per MPI name, calling the wrappers of the
 * MPI implementation the process has loaded (mpiwrap.h's design note; the
 * wrappers: mpi.c). Built without any <mpi.h>. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "native/mpiwrap.h"

#define EXPORT __attribute__((visibility("default")))
#define NOTRACE __attribute__((no_instrument_function))

st_mpi_hooks_t st_mpi_hook;
__thread int st_mpi_inside __attribute__((tls_model("initial-exec")));

/* strata python registers its recorder's calls (native/mpi.h). */
EXPORT NOTRACE void strata_mpi_hooks(st_mpi_enter_fn e, st_mpi_exit_fn x, st_mpi_rank_fn r,
                                     st_mpi_finish_fn f)
{
    __atomic_store_n(&st_mpi_hook.exit, x, __ATOMIC_RELEASE);
    __atomic_store_n(&st_mpi_hook.rank, r, __ATOMIC_RELEASE);
    __atomic_store_n(&st_mpi_hook.finish, f, __ATOMIC_RELEASE);
    __atomic_store_n(&st_mpi_hook.enter, e, __ATOMIC_RELEASE);
}

#if defined(STRATA_MPI_HAVE_OPENMPI) && defined(STRATA_MPI_HAVE_MPICH)
enum { NONE, OPENMPI, MPICH };

static const char *const openmpi_libs[] = {STRATA_OPENMPI_SONAMES, NULL};
static const char *const mpich_libs[] = {STRATA_MPICH_SONAMES, NULL};

NOTRACE static int loaded(const char *const *libs)
{
    for (; *libs; libs++) {
        void *h = dlopen(*libs, RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            dlclose(h);
            return 1;
        }
    }
    return 0;
}

/* The implementation loaded, kept once known: Open MPI's by its library (or its
 * world communicator in the program: a static libmpi), MPICH's by its library;
 * MPICH's ABI (Intel MPI's, MVAPICH's, Cray's) until one is seen. */
NOTRACE static int pick(void)
{
    static int known;
    int f = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (__builtin_expect(f != NONE, 1))
        return f;
    f = loaded(openmpi_libs) || dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world") ? OPENMPI
        : loaded(mpich_libs)                                               ? MPICH
                                                                           : NONE;
    if (f != NONE)
        __atomic_store_n(&known, f, __ATOMIC_RELAXED);
    return f == NONE ? MPICH : f;
}
#define CALL(name, args)                                                                   \
    (pick() == OPENMPI ? ST_MPI_FN(openmpi, name) args : ST_MPI_FN(mpich, name) args)
#elif defined(STRATA_MPI_HAVE_OPENMPI)
#define CALL(name, args) ST_MPI_FN(openmpi, name) args
#else
#define CALL(name, args) ST_MPI_FN(mpich, name) args
#endif

/* Arguments as words: G<n> declares n of them, A<n> passes them on. */
typedef uintptr_t w_;
#define G0 void
#define G1 w_ a1
#define G2 G1, w_ a2
#define G3 G2, w_ a3
#define G4 G3, w_ a4
#define G5 G4, w_ a5
#define G6 G5, w_ a6
#define G7 G6, w_ a7
#define G8 G7, w_ a8
#define G9 G8, w_ a9
#define G12 G9, w_ a10, w_ a11, w_ a12
#define G13 G12, w_ a13
#define A0
#define A1 a1
#define A2 A1, a2
#define A3 A2, a3
#define A4 A3, a4
#define A5 A4, a5
#define A6 A5, a6
#define A7 A6, a7
#define A8 A7, a8
#define A9 A8, a9
#define A12 A9, a10, a11, a12
#define A13 A12, a13

#define FRONT_C(name, n)                                                                   \
    int ST_MPI_FN(openmpi, name)(G##n);                                                    \
    int ST_MPI_FN(mpich, name)(G##n);                                                      \
    EXPORT NOTRACE int name(G##n) { return CALL(name, (A##n)); }
ST_MPI_C_CALLS(FRONT_C)

#define FRONT_F1(sym, n)                                                                   \
    void ST_MPI_FN(openmpi, sym)(G##n);                                                    \
    void ST_MPI_FN(mpich, sym)(G##n);                                                      \
    EXPORT NOTRACE void sym(G##n) { CALL(sym, (A##n)); }
#define FRONT_F(lower, upper, n)                                                           \
    FRONT_F1(lower##_, n)                                                                  \
    FRONT_F1(lower##__, n) FRONT_F1(lower, n) FRONT_F1(upper, n) FRONT_F1(lower##_f08_, n)
ST_MPI_F_CALLS(FRONT_F)
