/* Kokkos Tools in the preloaded library (issue 14): kokkos.c exports the
 * kokkosp_* calls Kokkos makes. */
#ifndef STRATA_NATIVE_KOKKOS_H
#define STRATA_NATIVE_KOKKOS_H

/* strata run set KOKKOS_TOOLS_LIBS to this library (and _STRATA_KOKKOS_LIB): sets
 * KOKKOS_PROFILE_LIBRARY to it too when a Kokkos core library loaded is a Kokkos 3
 * (its file does not hold the text KOKKOS_TOOLS_LIBS). In the constructor, before
 * the program runs Kokkos::initialize. */
void st_nkokkos_env(void);

#endif
