#include "base/strbuf.h"

#include "base/number.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_strbuf_init(st_strbuf_t *b) { memset(b, 0, sizeof *b); }

void st_strbuf_init_fixed(st_strbuf_t *b, char *buf, size_t cap)
{
    st_strbuf_init(b);
    b->data = buf;
    b->cap = cap;
    b->fixed = 1;
    b->failed = cap == 0;
    if (cap)
        buf[0] = '\0';
}

void st_strbuf_free(st_strbuf_t *b)
{
    if (!b->fixed)
        free(b->data);
    st_strbuf_init(b);
}

/* Streaming: writes out the buffer once a chunk has gathered. */
static void drain(st_strbuf_t *b, size_t at_least)
{
    if (!b->sink || b->len < at_least || b->failed)
        return;
    if (b->len && fwrite(b->data, 1, b->len, b->sink) != b->len) {
        b->failed = 1;
        b->sink_errno = errno ? errno : EIO;
    }
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void st_strbuf_stream(st_strbuf_t *b, FILE *f)
{
    b->sink = f;
    drain(b, ST_STRBUF_CHUNK);
}

int st_strbuf_flush(st_strbuf_t *b)
{
    drain(b, 0);
    if (b->sink && !b->failed && fflush(b->sink) != 0) {
        b->failed = 1;
        b->sink_errno = errno ? errno : EIO;
    }
    return b->failed ? -1 : 0;
}

void st_strbuf_reset(st_strbuf_t *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int reserve(st_strbuf_t *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    if (b->fixed) {
        b->failed = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void st_strbuf_add_slow(st_strbuf_t *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    drain(b, ST_STRBUF_CHUNK);
}

char *st_strbuf_room_slow(st_strbuf_t *b, size_t n)
{
    return reserve(b, n) < 0 ? NULL : b->data + b->len;
}

void st_strbuf_commit_slow(st_strbuf_t *b) { drain(b, ST_STRBUF_CHUNK); }

void st_strbuf_u64(st_strbuf_t *b, uint64_t v)
{
    char *p = st_strbuf_room(b, 20);
    if (p)
        st_strbuf_commit(b, st_num_u64(p, v));
}

size_t st_text_g17(char *buf, double v)
{
    size_t n = st_num_g17(buf, v);
    return n ? n : (size_t)snprintf(buf, 32, "%.17g", v); /* 24 bytes at most */
}

void st_strbuf_g17(st_strbuf_t *b, double v)
{
    char *p = st_strbuf_room(b, 32);
    if (p)
        st_strbuf_commit(b, st_text_g17(p, v));
}

void st_strbuf_fill(st_strbuf_t *b, char c, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
    drain(b, ST_STRBUF_CHUNK);
}

void st_strbuf_vprintf(st_strbuf_t *b, const char *fmt, va_list ap)
{
    if (b->failed)
        return;
    /* Format straight into the free space; only when it does not fit, grow and
     * format again (one vsnprintf instead of two in the common case). */
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        if (room)
            b->data[b->len] = '\0';
        return;
    }
    if ((size_t)n < room) {
        b->len += (size_t)n;
        drain(b, ST_STRBUF_CHUNK);
        return;
    }
    if (reserve(b, (size_t)n) < 0) {
        if (b->data)
            b->data[b->len] = '\0';
        return;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    drain(b, ST_STRBUF_CHUNK);
}

void st_strbuf_printf(st_strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *st_strbuf_cstr(st_strbuf_t *b) { return b->data ? b->data : ""; }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

void st_strbuf_json_string(st_strbuf_t *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    st_strbuf_putc(b, '"');
    while (p < end) {
        /* the longest run of printable ASCII that needs no escape, in one append */
        const unsigned char *q = p + st_text_plain_run((const char *)p, (size_t)(end - p), 1);
        if (q > p) {
            st_strbuf_add(b, (const char *)p, (size_t)(q - p));
            p = q;
            continue;
        }
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            st_strbuf_putc(b, '\\');
            st_strbuf_putc(b, (char)c);
            p++;
        } else if (c == '\n') {
            st_strbuf_puts(b, "\\n"), p++;
        } else if (c == '\t') {
            st_strbuf_puts(b, "\\t"), p++;
        } else if (c == '\r') {
            st_strbuf_puts(b, "\\r"), p++;
        } else if (c < 0x20 || c == 0x7F) {
            st_strbuf_printf(b, "\\u%04x", c), p++;
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                st_strbuf_puts(b, "\\ufffd");
                p++;
            } else {
                st_strbuf_add(b, (const char *)p, n);
                p += n;
            }
        }
    }
    st_strbuf_putc(b, '"');
}

void st_strbuf_json_strings(st_strbuf_t *b, const char *const *v, size_t n)
{
    st_strbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            st_strbuf_puts(b, ", ");
        st_strbuf_json_string(b, v[i]);
    }
    st_strbuf_putc(b, ']');
}

/* The escape of one control character c (C0, DEL or a C1 code point). */
static void put_control(st_strbuf_t *b, unsigned c)
{
    switch (c) {
    case '\n': st_strbuf_puts(b, "\\n"); break;
    case '\t': st_strbuf_puts(b, "\\t"); break;
    case '\r': st_strbuf_puts(b, "\\r"); break;
    case 0x1B: st_strbuf_puts(b, "\\e"); break;
    default:
        if (c < 0x80)
            st_strbuf_printf(b, "\\x%02x", c);
        else
            st_strbuf_printf(b, "\\u%04x", c);
    }
}

void st_strbuf_printable(st_strbuf_t *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        /* the longest run of plain printable ASCII, in one append */
        const unsigned char *q = p;
        while (*q >= 0x20 && *q < 0x7F)
            q++;
        if (q > p) {
            st_strbuf_add(b, (const char *)p, (size_t)(q - p));
            p = q;
            continue;
        }
        if (*p < 0x20 || *p == 0x7F) {
            put_control(b, *p++);
            continue;
        }
        size_t n = utf8_len(p);
        if (n == 0) {
            st_strbuf_printf(b, "\\x%02x", *p++);
        } else if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0) {
            put_control(b, p[1]); /* U+0080..U+009F: C1 controls (0x9B is CSI) */
            p += 2;
        } else {
            st_strbuf_add(b, (const char *)p, n);
            p += n;
        }
    }
}

char *st_text_printable(char *dst, size_t size, const char *s)
{
    if (!size)
        return dst;
    st_strbuf_t b;
    st_strbuf_init(&b);
    st_strbuf_printable(&b, s);
    if (b.failed) {
        /* out of memory: the crude way, byte by byte */
        size_t i = 0;
        for (; s[i] && i + 1 < size; i++)
            dst[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7F ? '?' : s[i];
        dst[i] = '\0';
        st_strbuf_free(&b);
        return dst;
    }
    const char *t = st_strbuf_cstr(&b);
    size_t n = strlen(t);
    if (n >= size) {
        n = size - 1;
        /* never cut a UTF-8 sequence in half */
        while (n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, t, n);
    dst[n] = '\0';
    st_strbuf_free(&b);
    return dst;
}
