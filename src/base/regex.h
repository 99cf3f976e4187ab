/* Regular expressions (PCRE2, UTF-8): compiled once, searched anywhere in a
 * string (like Python's re.search). The settings registry checks patterns with
 * it; the filters compile their lists with it. Knows nothing of settings.
 *
 * Patterns are compiled to machine code where PCRE2 can (its JIT), and interpreted
 * where it cannot: the same matches either way.
 *
 * A compiled list is read-only after st_regex_list_compile: searching it from
 * several threads at once is safe (each search makes its own match data). */
#ifndef STRATA_BASE_REGEX_H
#define STRATA_BASE_REGEX_H

#include <stddef.h>

#include "base/err.h"

typedef struct {
    void **codes;  /* pcre2_code_8 *, owned */
    size_t n;
} st_regex_list_t;

/* Checks that pattern compiles; fills msg naming `what` (e.g. the setting) if not:
 * ST_EINVAL. */
int st_regex_check(const char *pattern, const char *what, st_msg_t *msg);

/* Compiles the n patterns into l. On failure (ST_EINVAL with msg naming `what`
 * and the pattern, or ST_ENOMEM) nothing is left allocated and l is empty. */
int st_regex_list_compile(st_regex_list_t *l, char *const *patterns, size_t n, const char *what,
                          st_msg_t *msg);
void st_regex_list_free(st_regex_list_t *l);

/* 1 if any regex of l matches somewhere in s; 0 if none does (or l is empty). */
int st_regex_list_search(const st_regex_list_t *l, const char *s);

#endif
