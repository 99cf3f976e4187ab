/* The chain a -> b -> c (-> spin, inlined) that tests/c/test_unwind.c samples,
 * compiled three times (CMakeLists.txt): frame pointers at -O0 (chain_fp_o0_*),
 * at -O2 (chain_fp_o2_*), none at -O2 (chain_nofp_o2_*). spin() loops, setting
 * chain_in_spin, until the test's handler sets chain_done. */
#ifndef STRATA_TESTS_UNWIND_CHAIN_H
#define STRATA_TESTS_UNWIND_CHAIN_H

extern volatile int chain_in_spin, chain_done;
extern volatile unsigned long chain_spins;

/* The source lines of one build: first and last line of a, b, c and spin. */
enum { CHAIN_A, CHAIN_B, CHAIN_C, CHAIN_SPIN, CHAIN_NFUNCS };
typedef struct {
    int first, last;
} chain_lines_t;

#define CHAIN_DECLARE(pfx)                                                           \
    int pfx##a(int n);                                                               \
    int pfx##b(int n);                                                               \
    int pfx##c(int n);                                                               \
    void pfx##lines(chain_lines_t out[CHAIN_NFUNCS]);
CHAIN_DECLARE(chain_fp_o0_)
CHAIN_DECLARE(chain_fp_o2_)
CHAIN_DECLARE(chain_nofp_o2_)

#endif
