/* The checks of the C unit tests: count what passes, print what fails, and let
 * main() print "N passed, N failed" (st_check_report). */
#ifndef STRATA_TESTS_CHECK_H
#define STRATA_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) {                                                                     \
            passed++;                                                                   \
        } else {                                                                        \
            failed++;                                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)

#define CHECK_STR(got, want)                                                            \
    do {                                                                                \
        const char *g_ = (got), *w_ = (want);                                           \
        if (strcmp(g_, w_) == 0) {                                                      \
            passed++;                                                                   \
        } else {                                                                        \
            failed++;                                                                   \
            fprintf(stderr, "%s:%d: got\n%s\nwanted\n%s\n", __FILE__, __LINE__, g_, w_); \
        }                                                                               \
    } while (0)

/* Prints the closing line; the exit status of a test program. */
static inline int st_check_report(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif
