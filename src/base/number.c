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

/* 10^k, k from 0 to 19: every power of ten a uint64_t holds. */
static const uint64_t pow10_u64[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, 10000000000000000000ull};

/* "00" to "99": two digits at a time halve the divisions. */
static const char digit_pairs[200] = {
    '0','0','0','1','0','2','0','3','0','4','0','5','0','6','0','7','0','8','0','9',
    '1','0','1','1','1','2','1','3','1','4','1','5','1','6','1','7','1','8','1','9',
    '2','0','2','1','2','2','2','3','2','4','2','5','2','6','2','7','2','8','2','9',
    '3','0','3','1','3','2','3','3','3','4','3','5','3','6','3','7','3','8','3','9',
    '4','0','4','1','4','2','4','3','4','4','4','5','4','6','4','7','4','8','4','9',
    '5','0','5','1','5','2','5','3','5','4','5','5','5','6','5','7','5','8','5','9',
    '6','0','6','1','6','2','6','3','6','4','6','5','6','6','6','7','6','8','6','9',
    '7','0','7','1','7','2','7','3','7','4','7','5','7','6','7','7','7','8','7','9',
    '8','0','8','1','8','2','8','3','8','4','8','5','8','6','8','7','8','8','8','9',
    '9','0','9','1','9','2','9','3','9','4','9','5','9','6','9','7','9','8','9','9'};

/* The digits of v, at least `min` of them (leading zeros), ending just before
 * `end`. */
static void digits_before(char *end, uint64_t v, size_t min)
{
    char *p = end;
    while (v >= 100) {
        const char *d = &digit_pairs[2 * (v % 100)];
        v /= 100;
        *--p = d[1];
        *--p = d[0];
    }
    if (v >= 10) {
        *--p = digit_pairs[2 * v + 1];
        *--p = digit_pairs[2 * v];
    } else {
        *--p = (char)('0' + v);
    }
    while ((size_t)(end - p) < min)
        *--p = '0';
}

/* How many digits v has. */
static size_t ndigits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10000) {
        v /= 10000;
        n += 4;
    }
    return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

size_t st_num_u64(char *buf, uint64_t v)
{
    size_t n = ndigits(v);
    digits_before(buf + n, v, 1);
    return n;
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
    uint64_t whole = (uint64_t)x; /* x >= 0: the cast is its floor */
    double frac = x - (double)whole;
    if (fabs(frac - 0.5) < 1e-3)
        return 0;
    uint64_t r = whole + (frac > 0.5); /* v rounded, in units of 10^-precision */
    /* backwards from `end`: `precision` decimals, the point, the whole part (by
     * divisions by constants); the text (at most 23 bytes: r < 2^40 has 13
     * digits) is then copied as one block of 24, which t has room for after end */
    char t[64], *end = t + 40, *p = end;
    int k = precision;
    for (; k >= 2 && r; k -= 2) {
        const char *d = &digit_pairs[2 * (r % 100)];
        r /= 100;
        *--p = d[1];
        *--p = d[0];
    }
    if (k && r) {
        *--p = (char)('0' + r % 10);
        r /= 10;
        k--;
    }
    /* the decimals left are zeros (most of a profile's times are small): one block
     * of 16 ending at p, of which k stay */
    memcpy(p - 16, "0000000000000000", 16);
    p -= k;
    if (precision)
        *--p = '.';
    size_t w = ndigits(r);
    digits_before(p, r, 1);
    p -= w;
    memcpy(buf, p, 24);
    return (size_t)(end - p);
}

/* 10^k as a 128-bit number, k from 0 to 38. */
static unsigned __int128 pow10_u128(int k)
{
    return k < 20 ? pow10_u64[k] : (unsigned __int128)pow10_u64[19] * pow10_u64[k - 19];
}

size_t st_num_g17(char *buf, double v)
{
    if (v == 0.0 && !signbit(v)) {
        buf[0] = '0';
        return 1;
    }
    double a = fabs(v);
    if (!(a > 1e-6 && a < 1e30))
        return 0; /* -0.0, nan, inf, and the sizes below that the arithmetic is not for */
    /* a = m * 2^e exactly; the 17 digits are v * 10^s = m * 2^e * 10^s, s = 16 - d,
     * rounded half to even as printf does; d is a guess of a's decimal exponent, put
     * right by the digits' count. Below 1e30 and above 1e-6, A and B fit in 128 bits:
     * with s <= 22, m * 10^s < 2^127; with e < 0, -e <= 73. */
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int E2 = (int)(bits >> 52) - 1023; /* a is normal: 2^E2 <= a < 2^(E2 + 1) */
    uint64_t m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
    int e = E2 - 52;
    const unsigned __int128 lo = pow10_u128(16), hi = pow10_u128(17);
    /* floor(E2 * log10(2)) (1233 / 4096 is log10(2) to within 2^-15: exact for
     * |E2| < 2^10): floor(log10(a)) or one less, which the first try finds out;
     * never under -6 (a > 1e-6), where s would pass 22 */
    int d = (E2 * 1233) >> 12;
    if (d < -6)
        d = -6;
    unsigned __int128 q = 0;
    for (int tries = 0;; tries++) {
        if (tries == 3)
            return 0;
        int s = 16 - d;
        unsigned __int128 A = m, r, B;
        if (s >= 0)
            A *= pow10_u128(s);
        if (e >= 0) {
            A <<= e;
            B = s >= 0 ? 1 : pow10_u128(-s);
            q = B == 1 ? A : A / B;
            r = A - q * B;
        } else {
            if (s < 0)
                return 0; /* not reached: a >= 1e17 has e >= 4 */
            B = (unsigned __int128)1 << -e;
            q = A >> -e;
            r = A & (B - 1);
        }
        if (q < lo) {
            d--;
            continue;
        }
        if (q >= hi) {
            d++;
            continue;
        }
        if (r > B - r || (r == B - r && (q & 1)))
            q++;
        if (q == hi) {
            q = lo;
            d++;
        }
        break;
    }
    char dig[17];
    digits_before(dig + 17, (uint64_t)q, 17);
    int last = 16; /* the last digit written: trailing zeros go */
    while (last > 0 && dig[last] == '0')
        last--;
    size_t len = 0;
    if (v < 0)
        buf[len++] = '-';
    if (d < -4 || d >= 17) { /* 1.2345e-05, 1.5e+20 */
        buf[len++] = dig[0];
        if (last > 0) {
            buf[len++] = '.';
            for (int i = 1; i <= last; i++)
                buf[len++] = dig[i];
        }
        buf[len++] = 'e';
        buf[len++] = d < 0 ? '-' : '+';
        int x = d < 0 ? -d : d;
        buf[len++] = (char)('0' + x / 10);
        buf[len++] = (char)('0' + x % 10);
    } else if (d >= 0) { /* 1234.5, 12345678901234567 */
        for (int i = 0; i <= d; i++)
            buf[len++] = dig[i];
        if (last > d) {
            buf[len++] = '.';
            for (int i = d + 1; i <= last; i++)
                buf[len++] = dig[i];
        }
    } else { /* 0.00012345 */
        buf[len++] = '0';
        buf[len++] = '.';
        for (int i = 0; i < -d - 1; i++)
            buf[len++] = '0';
        for (int i = 0; i <= last; i++)
            buf[len++] = dig[i];
    }
    return len;
}
