/* A growing byte buffer for building text (labels, tables, JSON).
 *
 * Appends never fail loudly: an allocation failure sets a sticky `failed` flag and
 * later appends do nothing, so a writer checks once at the end. Not thread-safe. */
#ifndef STRATA_CORE_STRBUF_H
#define STRATA_CORE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
    char *data;    /* always NUL-terminated when len > 0 or after st_strbuf_cstr */
    size_t len;
    size_t cap;
    int failed;    /* sticky: an allocation failed */
} st_strbuf_t;

void st_strbuf_init(st_strbuf_t *b);
void st_strbuf_free(st_strbuf_t *b);
void st_strbuf_reset(st_strbuf_t *b);             /* len = 0, keeps memory */
void st_strbuf_add(st_strbuf_t *b, const char *s, size_t n);
void st_strbuf_puts(st_strbuf_t *b, const char *s);
void st_strbuf_putc(st_strbuf_t *b, char c);
void st_strbuf_fill(st_strbuf_t *b, char c, size_t n);
void st_strbuf_printf(st_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void st_strbuf_vprintf(st_strbuf_t *b, const char *fmt, va_list ap);
/* The contents as a C string ("" when empty); owned by b. */
const char *st_strbuf_cstr(st_strbuf_t *b);
/* Appends s as a JSON string literal, quotes included, escaping everything JSON
 * requires and any byte that is not printable ASCII or valid UTF-8 (as \uFFFD). */
void st_strbuf_json_string(st_strbuf_t *b, const char *s);

#endif
