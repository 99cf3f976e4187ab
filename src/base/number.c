#include "base/number.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The extent of a number by the grammar above (no spaces), or NULL. */
static const char *number_end(const char *p)
{
    if (*p == '+' || *p == '-')
        p++;
    const char *d = p;
    while (is_digit(*p))
        p++;
    size_t ndig = (size_t)(p - d);
    if (*p == '.') {
        p++;
        const char *f = p;
        while (is_digit(*p))
            p++;
        ndig += (size_t)(p - f);
    }
    if (ndig == 0)
        return NULL;
    if (*p == 'e' || *p == 'E') {
        const char *e = p + 1;
        if (*e == '+' || *e == '-')
            e++;
        if (!is_digit(*e))
            return NULL;
        while (is_digit(*e))
            e++;
        p = e;
    }
    return p;
}

int st_num_scan(const char *text, double *out, const char **rest)
{
    const char *p = text;
    while (is_space(*p))
        p++;
    const char *end = number_end(p);
    if (!end)
        return -1;
    /* strtod reads exactly this extent: the grammar is a subset of its own */
    char *stop;
    errno = 0;
    double x = strtod(p, &stop);
    if (stop != end || !isfinite(x) || (errno == ERANGE && fabs(x) > 1.0))
        return -1;
    *out = x;
    if (rest)
        *rest = end;
    return 0;
}

/* Only spaces from p on. */
static int only_spaces(const char *p)
{
    while (is_space(*p))
        p++;
    return *p == '\0';
}

int st_num_double(const char *text, double min, double max, double *out)
{
    double x;
    const char *rest;
    if (st_num_scan(text, &x, &rest) < 0 || !only_spaces(rest) || x < min || x > max)
        return -1;
    *out = x;
    return 0;
}

int st_num_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
    const char *p = text;
    while (is_space(*p))
        p++;
    int neg = *p == '-';
    if (*p == '+' || *p == '-')
        p++;
    if (!is_digit(*p))
        return -1;
    /* the magnitude, as an unsigned number up to 2^63 */
    uint64_t v = 0, limit = (uint64_t)INT64_MAX + (neg ? 1u : 0u);
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    uint64_t mult = *p == 'k' || *p == 'K' ? 1000u : *p == 'M' ? 1000000u : *p == 'G' ? 1000000000u : 1u;
    if (mult > 1) {
        if (v > limit / mult)
            return -1;
        v *= mult;
        p++;
    }
    if (!only_spaces(p))
        return -1;
    int64_t n = neg ? (v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    if (n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

size_t st_num_fixed(char *buf, double v, int precision)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    if (precision < 0 || precision > 9 || !(v >= 0) || signbit(v))
        return 0; /* -0.0 prints "-0", nan and inf their names */
    /* x = v * 10^p, within 2^-13 of the exact product below 2^40: where its fraction
     * is clearly on one side of a half, the exact product rounds the same way (one
     * that crosses a whole number near it rounds to that same number). */
    double x = v * pow10[precision];
    if (!(x < 1099511627776.0)) /* 2^40 */
        return 0;
    double whole = floor(x), frac = x - whole;
    if (fabs(frac - 0.5) < 1e-3)
        return 0;
    uint64_t r = (uint64_t)whole + (frac > 0.5);
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + r % 10);
        r /= 10;
    } while (r);
    while (n <= (size_t)precision)
        digits[n++] = '0'; /* one digit before the point at least: 0.005 */
    size_t len = 0;
    while (n > 0) {
        if (n == (size_t)precision && precision > 0)
            buf[len++] = '.';
        buf[len++] = digits[--n];
    }
    return len;
}
