/* Function and module filters: regexes compiled once (PCRE2), asked once per code
 * object; the collector caches the verdict, so the hot path never runs a regex.
 *
 * A name passes when, if the restrict list is non-empty, it matches one of its
 * regexes; otherwise when it matches no exclude regex, or matches an include regex.
 * A function is kept when its name passes the function lists and its file passes
 * the module lists. Matching is a search anywhere in the string (like re.search). */
#ifndef STRATA_CORE_FILTER_H
#define STRATA_CORE_FILTER_H

#include <stddef.h>

#include "base/err.h"
#include "base/regex.h"

struct st_settings;

typedef struct {
    st_regex_list_t func_include, func_exclude, func_restrict;
    st_regex_list_t mod_include, mod_exclude, mod_restrict;
} st_filter_t;

/* Compiles the six regex-list settings. On failure nothing is left allocated. */
int st_filter_init(st_filter_t *f, const struct st_settings *s, st_msg_t *msg);
void st_filter_free(st_filter_t *f);

/* 1 if a function named `func` defined in file `file` is to be recorded. */
int st_filter_keeps(const st_filter_t *f, const char *func, const char *file);

/* 1 if `file` passes the module lists (the function lists aside). */
int st_filter_keeps_module(const st_filter_t *f, const char *file);

/* 1 if a function named `func` passes the function lists (its file aside). */
int st_filter_keeps_function(const st_filter_t *f, const char *func);

#endif
