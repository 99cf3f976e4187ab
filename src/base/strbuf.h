/* A growing byte buffer for building text (labels, tables, JSON).
 *
 * Appends never fail loudly: an allocation failure sets a sticky `failed` flag and
 * later appends do nothing, so a writer checks once at the end. Not thread-safe.
 *
 * A buffer can stream: with a `sink` (st_strbuf_stream), whatever is appended is
 * written to that file whenever ST_STRBUF_CHUNK bytes have gathered, so a writer
 * that only appends produces a file of any size in bounded memory. A failed write
 * sets `failed` too, and `sink_errno` to the cause; st_strbuf_flush writes the
 * rest. A streaming buffer's data holds only the unwritten tail: a writer never
 * reads back what it appended. */
#ifndef STRATA_BASE_STRBUF_H
#define STRATA_BASE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ST_STRBUF_CHUNK ((size_t)64 << 10)

typedef struct {
    char *data;    /* always NUL-terminated when len > 0 or after st_strbuf_cstr */
    size_t len;
    size_t cap;
    int failed;    /* sticky: an allocation (or, streaming, a write) failed */
    FILE *sink;    /* streaming: where full chunks go (not owned), or NULL */
    int sink_errno; /* streaming: errno of the failed write, 0 if none */
    int fixed;     /* data is the caller's (st_strbuf_init_fixed): never grown nor freed */
} st_strbuf_t;

void st_strbuf_init(st_strbuf_t *b);
/* A buffer on the caller's memory, cap bytes: appends that do not fit fail (no
 * allocation ever: what a child of vfork or a signal handler may use). */
void st_strbuf_init_fixed(st_strbuf_t *b, char *buf, size_t cap);
void st_strbuf_free(st_strbuf_t *b);
void st_strbuf_reset(st_strbuf_t *b);             /* len = 0, keeps memory */
/* Appending: inline while the bytes fit (and, streaming, leave the chunk short of
 * full); st_strbuf_add_slow grows, drains, or fails. */
void st_strbuf_add_slow(st_strbuf_t *b, const char *s, size_t n);
static inline void st_strbuf_add(st_strbuf_t *b, const char *s, size_t n)
{
    size_t len = b->len + n;
    if (__builtin_expect(len < b->cap && !b->failed && (!b->sink || len < ST_STRBUF_CHUNK), 1)) {
        memcpy(b->data + b->len, s, n);
        b->data[len] = '\0';
        b->len = len;
        return;
    }
    st_strbuf_add_slow(b, s, n);
}
static inline void st_strbuf_puts(st_strbuf_t *b, const char *s) { st_strbuf_add(b, s, strlen(s)); }
static inline void st_strbuf_putc(st_strbuf_t *b, char c) { st_strbuf_add(b, &c, 1); }
void st_strbuf_fill(st_strbuf_t *b, char c, size_t n);
/* Encoding in place (a writer of millions of small records): st_strbuf_room gives
 * where up to n more bytes go, or NULL (failed: nothing to write); after writing
 * m <= n of them there, st_strbuf_commit(b, m) appends them. Inline, and no copy. */
char *st_strbuf_room_slow(st_strbuf_t *b, size_t n);
void st_strbuf_commit_slow(st_strbuf_t *b);
static inline char *st_strbuf_room(st_strbuf_t *b, size_t n)
{
    if (__builtin_expect(!b->failed && b->len + n + 1 <= b->cap, 1))
        return b->data + b->len;
    return st_strbuf_room_slow(b, n);
}
static inline void st_strbuf_commit(st_strbuf_t *b, size_t m)
{
    b->len += m;
    b->data[b->len] = '\0';
    if (__builtin_expect(b->sink != NULL && b->len >= ST_STRBUF_CHUNK, 0))
        st_strbuf_commit_slow(b);
}
/* Appends v in decimal, as "%llu" does (without printf). */
void st_strbuf_u64(st_strbuf_t *b, uint64_t v);
/* Appends v as "%.17g" does (its digits without printf where base/number.h can). */
void st_strbuf_g17(st_strbuf_t *b, double v);
/* The same into buf (32 bytes at least; no NUL). Returns the length. */
size_t st_text_g17(char *buf, double v);
void st_strbuf_printf(st_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void st_strbuf_vprintf(st_strbuf_t *b, const char *fmt, va_list ap);
/* Makes b stream into f (b empty or not: what it holds is written first). */
void st_strbuf_stream(st_strbuf_t *b, FILE *f);
/* Streaming: writes what b holds to its sink (and fflushes it). 0, or -1 when a
 * write failed now or before (sink_errno says why, or 0 for an allocation). */
int st_strbuf_flush(st_strbuf_t *b);
/* The contents as a C string ("" when empty); owned by b. */
const char *st_strbuf_cstr(st_strbuf_t *b);
/* Non-zero when one of w's eight bytes is 0 (exact for the word, whichever byte). */
static inline uint64_t st_text_zero_byte(uint64_t w)
{
    return (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
}

/* The length of the run of printable ASCII (0x20 to 0x7E; with json, neither '"'
 * nor '\\') that s[0..n) starts with: what an escaper copies as it is. Eight bytes
 * at a time while no byte of a word can end the run (the test may alarm on a word
 * that holds none, then looked at byte by byte; it never misses one). */
static inline size_t st_text_plain_run(const char *s, size_t n, int json)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        /* a byte under 0x20 or over 0x7E sets its high bit in one of the three */
        uint64_t alarm = ((w - 0x20 * ones) | (w + ones) | w) & highs;
        if (json)
            alarm |= st_text_zero_byte(w ^ ('"' * ones)) | st_text_zero_byte(w ^ ('\\' * ones));
        if (alarm)
            break;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7F || (json && (c == '"' || c == '\\')))
            break;
    }
    return i;
}

/* Appends s as a JSON string literal, quotes included, escaping everything JSON
 * requires and any byte that is not printable ASCII or valid UTF-8 (as \uFFFD). */
void st_strbuf_json_string(st_strbuf_t *b, const char *s);
/* Appends the n strings of v as a JSON array of string literals: ["a", "b"]. */
void st_strbuf_json_strings(st_strbuf_t *b, const char *const *v, size_t n);
/* Appends s for a terminal or a text file: printable ASCII and valid UTF-8 as
 * they are; control characters (C0, DEL, and C1 such as U+009B) as \n, \t, \r,
 * \e, \xNN or \u00NN; bytes that are not valid UTF-8 as \xNN. Nothing in the
 * result can move the cursor, start an escape sequence or break a line. */
void st_strbuf_printable(st_strbuf_t *b, const char *s);
/* The same into a fixed buffer of size bytes (NUL-terminated, cut short if it must
 * be). Returns dst. */
char *st_text_printable(char *dst, size_t size, const char *s);

#endif
