/* The MPI benchmark's program (bench/native_mpi.py): two ranks.
 *
 *   mpi_bench pingpong N    N round trips of one int (rank 0 MPI_Send then MPI_Recv,
 *                           rank 1 the reverse): two calls an iteration a rank
 *   mpi_bench allreduce N   N MPI_Allreduce of one double: one call an iteration
 *   mpi_bench test N        N MPI_Test of MPI_REQUEST_NULL, which returns at once:
 *                           the wrapper's own cost, without communication
 *
 * Rank 0 prints the loop's nanoseconds an iteration (MPI_Wtime, after a warm-up
 * of N/10 iterations and a barrier) and a checksum every configuration must
 * reproduce. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double loop(const char *mode, long n, int rank, double *check)
{
    int v = 0;
    double x = 1.0, y = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        if (strcmp(mode, "pingpong") == 0) {
            if (rank == 0) {
                MPI_Send(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                v++;
                MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
            }
        } else if (strcmp(mode, "test") == 0) {
            MPI_Request req = MPI_REQUEST_NULL;
            int flag;
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            v += flag;
        } else {
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    *check = strcmp(mode, "allreduce") != 0 ? (double)v : y;
    return t;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "pingpong";
    long n = argc > 2 ? atol(argv[2]) : 100000;
    double check;
    loop(mode, n / 10, rank, &check);
    double t = loop(mode, n, rank, &check);
    if (rank == 0)
        printf("%.1f ns %.0f\n", t / (double)n * 1e9, check);
    MPI_Finalize();
    return 0;
}
