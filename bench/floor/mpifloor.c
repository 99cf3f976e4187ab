/* mpifloor: the floor of the MPI benchmark (bench/native_mpi.py), preloaded: the
 * MPI calls the benchmark makes, each reading the TSC once and calling the PMPI
 * function: what any PMPI tool pays just to be in the way. */
#include <mpi.h>
#include <x86intrin.h>

static volatile unsigned long long sink;

__attribute__((visibility("default"))) int MPI_Send(const void *b, int n, MPI_Datatype t, int d,
                                                    int g, MPI_Comm c)
{
    sink = __rdtsc();
    return PMPI_Send(b, n, t, d, g, c);
}

__attribute__((visibility("default"))) int MPI_Recv(void *b, int n, MPI_Datatype t, int s, int g,
                                                    MPI_Comm c, MPI_Status *st)
{
    sink = __rdtsc();
    return PMPI_Recv(b, n, t, s, g, c, st);
}

__attribute__((visibility("default"))) int MPI_Allreduce(const void *s, void *r, int n,
                                                         MPI_Datatype t, MPI_Op o, MPI_Comm c)
{
    sink = __rdtsc();
    return PMPI_Allreduce(s, r, n, t, o, c);
}

__attribute__((visibility("default"))) int MPI_Test(MPI_Request *r, int *f, MPI_Status *st)
{
    sink = __rdtsc();
    return PMPI_Test(r, f, st);
}
