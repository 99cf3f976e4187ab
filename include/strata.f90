! strata's public Fortran API: regions of a program's own, timed by strata.
!
!     use strata
!     call strata_push("solve")
!     ...
!     call strata_pop()
!     call strata_mark("converged")
!     call strata_counter("residual", r)       ! r: any real kind
!     call strata_stop() ... call strata_start()
!
! Link the program with -lstrata (libstrata.so, installed beside this module: empty
! stubs, so that the program runs as before without strata); under `strata run --
! program`, strata's preloaded library comes first and times the regions (see
! strata.h for the C and C++ API).
module strata
    use, intrinsic :: iso_c_binding, only: c_char, c_null_char, c_double
    implicit none
    private
    public :: strata_push, strata_pop, strata_mark, strata_counter, strata_start, strata_stop

    interface strata_counter
        module procedure strata_counter_r4, strata_counter_r8, strata_counter_i
    end interface

    interface
        subroutine strata_c_push(name) bind(C, name="strata__push")
            import :: c_char
            character(kind=c_char), dimension(*), intent(in) :: name
        end subroutine
        subroutine strata_c_pop() bind(C, name="strata__pop")
        end subroutine
        subroutine strata_c_mark(name) bind(C, name="strata__mark")
            import :: c_char
            character(kind=c_char), dimension(*), intent(in) :: name
        end subroutine
        subroutine strata_c_counter(name, value) bind(C, name="strata__counter")
            import :: c_char, c_double
            character(kind=c_char), dimension(*), intent(in) :: name
            real(c_double), value :: value
        end subroutine
        subroutine strata_start() bind(C, name="strata__start")
        end subroutine
        subroutine strata_stop() bind(C, name="strata__stop")
        end subroutine
    end interface

contains

    ! Opens the region `name` on the calling thread.
    subroutine strata_push(name)
        character(len=*), intent(in) :: name
        call strata_c_push(trim(name) // c_null_char)
    end subroutine

    ! Closes the calling thread's innermost open region.
    subroutine strata_pop()
        call strata_c_pop()
    end subroutine

    ! A mark named `name` now on the calling thread's timeline.
    subroutine strata_mark(name)
        character(len=*), intent(in) :: name
        call strata_c_mark(trim(name) // c_null_char)
    end subroutine

    ! The counter `name` reads `value` now (a counter track on the timeline).
    subroutine strata_counter_r8(name, value)
        character(len=*), intent(in) :: name
        real(kind=8), intent(in) :: value
        call strata_c_counter(trim(name) // c_null_char, real(value, c_double))
    end subroutine

    subroutine strata_counter_r4(name, value)
        character(len=*), intent(in) :: name
        real(kind=4), intent(in) :: value
        call strata_c_counter(trim(name) // c_null_char, real(value, c_double))
    end subroutine

    subroutine strata_counter_i(name, value)
        character(len=*), intent(in) :: name
        integer, intent(in) :: value
        call strata_c_counter(trim(name) // c_null_char, real(value, c_double))
    end subroutine

end module strata
