/* A function GCC splits (test_unwind.c's ehframe case): its two unlikely paths,
 * each a call to a cold function that does not return, go to a part of its own
 * (split_me.cold, an FDE of its own) that the hot part jumps into. */
#include <stdlib.h>

__attribute__((cold, noreturn, noinline)) void split_fail(int why)
{
    exit(why);
}

__attribute__((noinline)) int split_me(int x, int y)
{
    int s = 0;
    for (int i = 0; i < x; i++)
        s += i * y;
    if (__builtin_expect(s == 12345, 0))
        split_fail(3);
    if (__builtin_expect(y == 54321, 0))
        split_fail(s);
    return s;
}
