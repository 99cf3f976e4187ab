/* A small strict JSON reader that pulls one token at a time.
 *
 * Design note. profile.json can hold millions of nodes, so the reader builds no
 * document tree: the caller walks the structure it expects (obj_next / arr_next
 * loops) and skips what it does not know (st_jp_skip), in one pass over a buffer
 * in memory. It is strict: RFC 8259 only (no comments, trailing commas, NaN,
 * leading zeros or lone control characters), strings must be valid UTF-8, and
 * \u escapes are decoded (a lone surrogate or \u0000 becomes U+FFFD, since the
 * strings end up as C strings). It is bounded: nesting deeper than ST_JP_MAXDEPTH
 * and strings longer than ST_JP_MAXSTR are errors, and it never reads past `end`.
 * Every error records a message with the line and column where it was found; the
 * first error sticks and every later call fails at once.
 *
 * The buffer must be followed by a NUL byte (buf[len] == 0): numbers are converted
 * with strtod, which stops there. */
#ifndef STRATA_INPUT_JSONPULL_H
#define STRATA_INPUT_JSONPULL_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

#define ST_JP_MAXDEPTH 64
#define ST_JP_MAXSTR (16u << 20)

typedef struct {
    const char *start, *p, *end;
    int depth;
    int failed;
    char err[256];
} st_jp_t;

typedef enum {
    ST_JV_ERROR = -1,
    ST_JV_OBJECT,
    ST_JV_ARRAY,
    ST_JV_STRING,
    ST_JV_NUMBER,
    ST_JV_BOOL,
    ST_JV_NULL,
} st_jv_kind_t;

/* buf[len] must be 0. */
void st_jp_init(st_jp_t *jp, const char *buf, size_t len);

/* Records an error at the current position (printf-style); returns -1. */
int st_jp_fail(st_jp_t *jp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The kind of the next value, without consuming it (ST_JV_ERROR on bad input or
 * at the end). */
st_jv_kind_t st_jp_peek(st_jp_t *jp);

/* Object walking: begin() consumes '{'; next() returns 1 and reads the key into
 * `key` (its ':' consumed) when a member follows, 0 after the closing '}', -1 on
 * error. Arrays the same, without keys. */
int st_jp_obj_begin(st_jp_t *jp);
int st_jp_obj_next(st_jp_t *jp, st_strbuf_t *key);
int st_jp_arr_begin(st_jp_t *jp);
int st_jp_arr_next(st_jp_t *jp);

/* Scalars: 0 or -1. st_jp_string replaces out's contents. st_jp_uint accepts only
 * a whole number from 0 to max; st_jp_int from min to max; st_jp_double any
 * number; st_jp_bool true/false. */
int st_jp_string(st_jp_t *jp, st_strbuf_t *out);
int st_jp_double(st_jp_t *jp, double *out);
int st_jp_uint(st_jp_t *jp, uint64_t max, uint64_t *out);
int st_jp_int(st_jp_t *jp, int64_t min, int64_t max, int64_t *out);
int st_jp_bool(st_jp_t *jp, int *out);

/* A string as a new C string into *out (malloc'd); `tmp` holds its text on the
 * way. 0, or -1 (running out of memory is the parse's failure). */
int st_jp_string_dup(st_jp_t *jp, st_strbuf_t *tmp, char **out);
/* An array of strings, each appended to *v (malloc'd, grown as needed; *n of
 * them). 0, or -1 with *v and *n holding the strings read before (the caller's
 * to free). */
int st_jp_strings(st_jp_t *jp, st_strbuf_t *tmp, char ***v, size_t *n);

/* Skips one value of any kind. */
int st_jp_skip(st_jp_t *jp);

/* Checks that only whitespace remains. */
int st_jp_finish(st_jp_t *jp);

#endif
