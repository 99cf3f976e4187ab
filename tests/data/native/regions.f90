! strata run's Fortran test: `use strata` regions around a kernel built with
! -finstrument-functions (tests/test_run.py).
module kern
contains
    function heavy(n) result(x)
        integer, intent(in) :: n
        real(8) :: x
        integer :: i
        x = 0
        do i = 1, n
            x = x + sqrt(dble(i))
        end do
    end function
end module

program regions
    use strata
    use kern
    real(8) :: x
    integer :: k
    x = 0
    call strata_push("fortran-region")
    do k = 1, 3
        x = x + heavy(200000 + k)
        call strata_counter("x", x)
        call strata_counter("k", k)
    end do
    call strata_pop()
    call strata_mark("done")
    call strata_stop()
    x = x + heavy(10)       ! not profiled
    call strata_start()
    if (x > 0) print '(A)', "fortran ok"
end program
