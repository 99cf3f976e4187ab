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
