#include "input/jsonpull.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_jp_init(st_jp_t *jp, const char *buf, size_t len)
{
    memset(jp, 0, sizeof *jp);
    jp->start = jp->p = buf;
    jp->end = buf + len;
}

int st_jp_fail(st_jp_t *jp, const char *fmt, ...)
{
    if (jp->failed)
        return -1;
    jp->failed = 1;
    size_t line = 1, col = 1;
    const char *stop = jp->p < jp->end ? jp->p : jp->end;
    for (const char *q = jp->start; q < stop; q++) {
        if (*q == '\n')
            line++, col = 1;
        else
            col++;
    }
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(jp->err, sizeof jp->err, "%s at line %zu, column %zu", what, line, col);
    return -1;
}

static void skip_ws(st_jp_t *jp)
{
    while (jp->p < jp->end &&
           (*jp->p == ' ' || *jp->p == '\n' || *jp->p == '\r' || *jp->p == '\t'))
        jp->p++;
}

/* The next significant byte, or -1 at the end. */
static int next_char(st_jp_t *jp)
{
    skip_ws(jp);
    return jp->p < jp->end ? (unsigned char)*jp->p : -1;
}

static int unexpected(st_jp_t *jp, const char *wanted)
{
    if (jp->p >= jp->end)
        return st_jp_fail(jp, "unexpected end of file (truncated?), expected %s", wanted);
    unsigned char c = (unsigned char)*jp->p;
    if (c >= 0x20 && c < 0x7f)
        return st_jp_fail(jp, "unexpected '%c', expected %s", c, wanted);
    return st_jp_fail(jp, "unexpected byte 0x%02x, expected %s", c, wanted);
}

st_jv_kind_t st_jp_peek(st_jp_t *jp)
{
    if (jp->failed)
        return ST_JV_ERROR;
    switch (next_char(jp)) {
    case '{': return ST_JV_OBJECT;
    case '[': return ST_JV_ARRAY;
    case '"': return ST_JV_STRING;
    case 't':
    case 'f': return ST_JV_BOOL;
    case 'n': return ST_JV_NULL;
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9': return ST_JV_NUMBER;
    default: unexpected(jp, "a value"); return ST_JV_ERROR;
    }
}

static int open_container(st_jp_t *jp, char c, const char *what)
{
    if (jp->failed)
        return -1;
    if (next_char(jp) != c)
        return unexpected(jp, what);
    if (jp->depth >= ST_JP_MAXDEPTH)
        return st_jp_fail(jp, "nested deeper than %d levels", ST_JP_MAXDEPTH);
    jp->depth++;
    jp->p++;
    return 0;
}

/* Whether the container just opened is still empty: the previous significant
 * byte is its opening bracket. */
static int just_opened(const st_jp_t *jp, char open)
{
    const char *q = jp->p;
    while (q > jp->start) {
        char c = *--q;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        return c == open;
    }
    return 0;
}

int st_jp_obj_begin(st_jp_t *jp) { return open_container(jp, '{', "an object"); }
int st_jp_arr_begin(st_jp_t *jp) { return open_container(jp, '[', "an array"); }

/* Before the next member: 1 if one follows (its comma consumed), 0 after the
 * closing bracket. */
static int member_follows(st_jp_t *jp, char open, char close)
{
    if (jp->failed)
        return -1;
    int first = just_opened(jp, open);
    int c = next_char(jp);
    if (c == close) {
        jp->p++;
        jp->depth--;
        return 0;
    }
    if (!first) {
        if (c != ',')
            return unexpected(jp, close == '}' ? "',' or '}'" : "',' or ']'");
        jp->p++;
        c = next_char(jp);
        if (c == close)
            return st_jp_fail(jp, "trailing comma");
    }
    return 1;
}

int st_jp_obj_next(st_jp_t *jp, st_strbuf_t *key)
{
    int r = member_follows(jp, '{', '}');
    if (r <= 0)
        return r;
    if (next_char(jp) != '"')
        return unexpected(jp, "a key (a string)");
    if (st_jp_string(jp, key) < 0)
        return -1;
    if (next_char(jp) != ':')
        return unexpected(jp, "':'");
    jp->p++;
    return 1;
}

int st_jp_arr_next(st_jp_t *jp) { return member_follows(jp, '[', ']'); }

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static void put_utf8(st_strbuf_t *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    st_strbuf_add(b, u, n);
}

/* Length of the valid UTF-8 sequence at p (at most `avail` bytes), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_valid(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    size_t n;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        n = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (n > avail)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

int st_jp_string(st_jp_t *jp, st_strbuf_t *out)
{
    if (jp->failed)
        return -1;
    if (next_char(jp) != '"')
        return unexpected(jp, "a string");
    st_strbuf_reset(out);
    const char *p = jp->p + 1;
    for (;;) {
        /* the plain run up to the next quote, backslash or control byte */
        const char *run = p;
        while (p < jp->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 &&
               (unsigned char)*p < 0x80)
            p++;
        st_strbuf_add(out, run, (size_t)(p - run));
        if (out->len > ST_JP_MAXSTR) {
            jp->p = p;
            return st_jp_fail(jp, "a string longer than %u bytes", ST_JP_MAXSTR);
        }
        if (p >= jp->end) {
            jp->p = p;
            return st_jp_fail(jp, "unexpected end of file inside a string (truncated?)");
        }
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            jp->p = p + 1;
            if (out->failed)
                return st_jp_fail(jp, "out of memory");
            st_strbuf_cstr(out);
            return 0;
        }
        if (c < 0x20) {
            jp->p = p;
            return st_jp_fail(jp, "a control character inside a string");
        }
        if (c >= 0x80) {
            size_t n = utf8_valid((const unsigned char *)p, (size_t)(jp->end - p));
            if (n == 0) {
                jp->p = p;
                return st_jp_fail(jp, "invalid UTF-8 inside a string");
            }
            st_strbuf_add(out, p, n);
            p += n;
            continue;
        }
        /* a backslash */
        if (jp->end - p < 2) {
            jp->p = p;
            return st_jp_fail(jp, "unexpected end of file inside a string (truncated?)");
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': st_strbuf_putc(out, '"'); break;
        case '\\': st_strbuf_putc(out, '\\'); break;
        case '/': st_strbuf_putc(out, '/'); break;
        case 'b': st_strbuf_putc(out, '\b'); break;
        case 'f': st_strbuf_putc(out, '\f'); break;
        case 'n': st_strbuf_putc(out, '\n'); break;
        case 'r': st_strbuf_putc(out, '\r'); break;
        case 't': st_strbuf_putc(out, '\t'); break;
        case 'u': {
            unsigned cp;
            if (jp->end - p < 4 || hex4(p, &cp) < 0) {
                jp->p = p;
                return st_jp_fail(jp, "a bad \\u escape");
            }
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && jp->end - p >= 6 && p[0] == '\\' &&
                p[1] == 'u') {
                unsigned lo;
                if (hex4(p + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
                cp = 0xFFFD;
            put_utf8(out, cp);
            break;
        }
        default:
            jp->p = p - 1;
            return st_jp_fail(jp, "a bad escape in a string");
        }
    }
}

/* Scans a number's extent by the JSON grammar; *is_int when it has no fraction
 * or exponent. */
static int scan_number(st_jp_t *jp, const char **numend, int *is_int)
{
    const char *p = jp->p, *end = jp->end;
    *is_int = 1;
    if (p < end && *p == '-') {
        p++;
        if (p >= end) /* cut after the sign */
            return st_jp_fail(jp, "unexpected end of file inside a number (truncated?)");
    }
    if (p >= end || *p < '0' || *p > '9')
        return unexpected(jp, "a number");
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9')
            return st_jp_fail(jp, "a number with a leading zero");
    } else {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end)
            return st_jp_fail(jp, "unexpected end of file inside a number (truncated?)");
        if (*p < '0' || *p > '9')
            return st_jp_fail(jp, "a bad number");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end)
            return st_jp_fail(jp, "unexpected end of file inside a number (truncated?)");
        if (*p < '0' || *p > '9')
            return st_jp_fail(jp, "a bad number");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    *numend = p;
    return 0;
}

int st_jp_double(st_jp_t *jp, double *out)
{
    if (jp->failed)
        return -1;
    next_char(jp);
    const char *e;
    int is_int;
    if (scan_number(jp, &e, &is_int) < 0)
        return -1;
    if (is_int && e - jp->p < 19) {
        /* short integers exactly, without strtod */
        const char *q = jp->p;
        int neg = *q == '-';
        q += neg;
        uint64_t v = 0;
        for (; q < e; q++)
            v = v * 10 + (uint64_t)(*q - '0');
        *out = neg ? -(double)v : (double)v;
    } else {
        char *stop;
        double d = strtod(jp->p, &stop);
        if (stop != e)
            return st_jp_fail(jp, "a bad number");
        if (!isfinite(d))
            return st_jp_fail(jp, "a number out of range");
        *out = d;
    }
    jp->p = e;
    return 0;
}

int st_jp_uint(st_jp_t *jp, uint64_t max, uint64_t *out)
{
    if (jp->failed)
        return -1;
    next_char(jp);
    const char *start = jp->p, *e;
    int is_int;
    if (scan_number(jp, &e, &is_int) < 0)
        return -1;
    if (!is_int || *start == '-') {
        /* 12.0 and 1e3 are whole numbers too; -0 is 0 */
        double d;
        if (st_jp_double(jp, &d) < 0)
            return -1;
        if (d < 0 || d != floor(d) || d > (double)max) {
            jp->p = start;
            return st_jp_fail(jp, "expected a whole number from 0 to %llu",
                              (unsigned long long)max);
        }
        *out = (uint64_t)d;
        return 0;
    }
    uint64_t v = 0;
    for (const char *q = start; q < e; q++) {
        unsigned dgt = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - dgt) / 10 || v * 10 + dgt > max)
            return st_jp_fail(jp, "a number above %llu", (unsigned long long)max);
        v = v * 10 + dgt;
    }
    jp->p = e;
    *out = v;
    return 0;
}

int st_jp_int(st_jp_t *jp, int64_t min, int64_t max, int64_t *out)
{
    if (jp->failed)
        return -1;
    next_char(jp);
    const char *start = jp->p;
    double d;
    if (st_jp_double(jp, &d) < 0)
        return -1;
    if (d != floor(d) || d < (double)min || d > (double)max) {
        jp->p = start;
        return st_jp_fail(jp, "expected a whole number from %lld to %lld", (long long)min,
                          (long long)max);
    }
    *out = (int64_t)d;
    return 0;
}

static int literal(st_jp_t *jp, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, word, n) != 0)
        return unexpected(jp, "a value");
    jp->p += n;
    return 0;
}

int st_jp_bool(st_jp_t *jp, int *out)
{
    int c = next_char(jp);
    if (jp->failed)
        return -1;
    if (c == 't' && literal(jp, "true") == 0)
        return *out = 1, 0;
    if (c == 'f' && literal(jp, "false") == 0)
        return *out = 0, 0;
    return jp->failed ? -1 : unexpected(jp, "true or false");
}

/* Recursive, bounded by ST_JP_MAXDEPTH. */
int st_jp_skip(st_jp_t *jp)
{
    switch (st_jp_peek(jp)) {
    case ST_JV_OBJECT: {
        if (st_jp_obj_begin(jp) < 0)
            return -1;
        st_strbuf_t key;
        st_strbuf_init(&key);
        int r;
        while ((r = st_jp_obj_next(jp, &key)) > 0)
            if (st_jp_skip(jp) < 0) {
                r = -1;
                break;
            }
        st_strbuf_free(&key);
        return r < 0 ? -1 : 0;
    }
    case ST_JV_ARRAY: {
        if (st_jp_arr_begin(jp) < 0)
            return -1;
        int r;
        while ((r = st_jp_arr_next(jp)) > 0)
            if (st_jp_skip(jp) < 0)
                return -1;
        return r < 0 ? -1 : 0;
    }
    case ST_JV_STRING: {
        st_strbuf_t s;
        st_strbuf_init(&s);
        int r = st_jp_string(jp, &s);
        st_strbuf_free(&s);
        return r;
    }
    case ST_JV_NUMBER: {
        double d;
        return st_jp_double(jp, &d);
    }
    case ST_JV_BOOL: {
        int b;
        return st_jp_bool(jp, &b);
    }
    case ST_JV_NULL:
        return literal(jp, "null");
    default:
        return -1;
    }
}

int st_jp_finish(st_jp_t *jp)
{
    if (jp->failed)
        return -1;
    if (next_char(jp) != -1)
        return st_jp_fail(jp, "extra data after the end of the document");
    return 0;
}

int st_jp_string_dup(st_jp_t *jp, st_strbuf_t *tmp, char **out)
{
    if (st_jp_string(jp, tmp) < 0)
        return -1;
    if (!(*out = strdup(st_strbuf_cstr(tmp))))
        return st_jp_fail(jp, "out of memory");
    return 0;
}

int st_jp_strings(st_jp_t *jp, st_strbuf_t *tmp, char ***v, size_t *n)
{
    if (st_jp_arr_begin(jp) < 0)
        return -1;
    int more;
    while ((more = st_jp_arr_next(jp)) > 0) {
        /* room for 8, then doubled whenever n reaches a power of two: the capacity
         * follows from n (a long function's source is thousands of lines) */
        if (*n == 0 || (*n >= 8 && (*n & (*n - 1)) == 0)) {
            char **grown = realloc(*v, (*n ? 2 * *n : 8) * sizeof *grown);
            if (!grown)
                return st_jp_fail(jp, "out of memory");
            *v = grown;
        }
        if (st_jp_string_dup(jp, tmp, &(*v)[*n]) < 0)
            return -1;
        (*n)++;
    }
    return more;
}
