/* strata run's MPI test program (tests/test_mpi.py): known MPI call counts and a
 * known imbalance. Each rank does its share of work() (rank 0 four times the
 * others'), passes 1000 doubles around a ring with MPI_Sendrecv and sums with
 * MPI_Allreduce, 10 times; then rank 0 sends 100 ints to every other rank, and
 * all meet at a barrier. "never-finalize" leaves out MPI_Finalize (and exits 0);
 * "crash" makes rank 1 die of SIGSEGV after the barrier. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) double work(int units)
{
    double x = 0;
    for (long i = 0; i < units * 200000L; i++)
        x += (double)(i % 7) * 0.5;
    return x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static double out[1000], in[1000];
    double sum = 0;
    for (int it = 0; it < 10; it++) {
        double x = work(rank == 0 ? 40 : 10), y;
        MPI_Sendrecv(out, 1000, MPI_DOUBLE, (rank + 1) % size, 0, in, 1000, MPI_DOUBLE,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        sum += y;
    }
    int msg[100] = {0};
    if (rank == 0)
        for (int r = 1; r < size; r++)
            MPI_Send(msg, 100, MPI_INT, r, 1, MPI_COMM_WORLD);
    else
        MPI_Recv(msg, 100, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("ranks %d sum %.0f\n", size, sum);
    if (argc > 1 && strcmp(argv[1], "never-finalize") == 0)
        return 0;
    if (argc > 1 && strcmp(argv[1], "crash") == 0 && rank == 1)
        raise(SIGSEGV);
    MPI_Finalize();
    return 0;
}
