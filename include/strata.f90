! strata's public Fortran API: regions of a program's own, timed by strata.
!
!     use strata
!     call strata_push("solve")
!     ...
!     call strata_pop()
!
! Link the program with -lstrata (libstrata.so, installed beside this module: empty
! stubs, so that the program runs as before without strata); under `strata run --
! program`, strata's preloaded library comes first and times the regions (see
! strata.h for the C and C++ API).
module strata
    use, intrinsic :: iso_c_binding, only: c_char, c_null_char
    implicit none
    private
    public :: strata_push, strata_pop

    interface
        subroutine strata_c_push(name) bind(C, name="strata__push")
            import :: c_char
            character(kind=c_char), dimension(*), intent(in) :: name
        end subroutine
        subroutine strata_c_pop() bind(C, name="strata__pop")
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

end module strata
