! strata run's Fortran MPI test (tests/test_mpi.py): known call counts through
! the `mpi` module (Open MPI's Fortran layer calls PMPI_* itself: strata wraps the
! Fortran names). Every rank: MPI_Bcast of 10 integers once, MPI_Allreduce of one
! double 5 times, MPI_Barrier once.
program mpi_calls
    use mpi
    implicit none
    integer :: ierr, rank, size, k
    integer :: buf(10)
    double precision :: x, y
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
    buf = rank
    call MPI_Bcast(buf, 10, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    y = 0
    do k = 1, 5
        x = rank + k
        call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(A,I0,A,F0.1)', "ranks ", size, " sum ", y
    call MPI_Finalize(ierr)
end program
