/* A library that tests/c/test_unwind.c loads with dlopen, samples inside, and
 * unloads before symbolising: unwind_dso_outer -> unwind_dso_inner, which loops
 * (setting *in) until the test's handler sets *done. */
__attribute__((visibility("default"))) int unwind_dso_outer(volatile int *in, volatile int *done);

#if defined(__clang__)
#define DSO_NOINLINE __attribute__((noinline))
#else
#define DSO_NOINLINE __attribute__((noinline, noipa))
#endif

DSO_NOINLINE static int unwind_dso_inner(volatile int *in, volatile int *done)
{
    volatile int spins = 0;   /* on the stack, so that the leaf has a frame */
    while (!*done) {
        *in = 1;
        spins++;
    }
    return spins & 1;
}

int unwind_dso_outer(volatile int *in, volatile int *done)
{
    int r = unwind_dso_inner(in, done);
    return r + 1;
}
