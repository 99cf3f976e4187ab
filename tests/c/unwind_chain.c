/* The chain a -> b -> c -> spin of unwind_chain.h; CHAIN_PFX names this build. */
#include "unwind_chain.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(CHAIN_PFX, name)

#if defined(__clang__)
#define CHAIN_NOINLINE __attribute__((noinline))
#else
#define CHAIN_NOINLINE __attribute__((noinline, noipa))
#endif

enum { SPIN_FIRST = __LINE__ };
static inline __attribute__((always_inline)) void spin(void)
{
    while (!chain_done) {
        chain_in_spin = 1;
        chain_spins++;
    }
}
enum { SPIN_LAST = __LINE__, C_FIRST };
/* c keeps a value on the stack: GCC gives a leaf that needs no stack no frame,
 * even with -fno-omit-frame-pointer, and a frame-pointer walk from inside such
 * a leaf skips its caller (a limit stated in unwind.h). */
CHAIN_NOINLINE int FN(c)(int n)
{
    volatile int kept = n;
    spin();
    return kept + 1;
}
enum { C_LAST = __LINE__, B_FIRST };
CHAIN_NOINLINE int FN(b)(int n)
{
    int r = FN(c)(n + 1);
    return r * 2;
}
enum { B_LAST = __LINE__, A_FIRST };
CHAIN_NOINLINE int FN(a)(int n)
{
    int r = FN(b)(n + 1);
    return r + 3;
}
enum { A_LAST = __LINE__ };

void FN(lines)(chain_lines_t out[CHAIN_NFUNCS])
{
    out[CHAIN_A] = (chain_lines_t){A_FIRST, A_LAST};
    out[CHAIN_B] = (chain_lines_t){B_FIRST, B_LAST};
    out[CHAIN_C] = (chain_lines_t){C_FIRST, C_LAST};
    out[CHAIN_SPIN] = (chain_lines_t){SPIN_FIRST, SPIN_LAST};
}
