/* Numbers from people: the one strict parser behind every numeric setting
 * (environment, config file, flags) and every numeric flag of the commands.
 *
 * A number is decimal: an optional sign, digits with an optional fraction, and an
 * optional exponent ("50", "-1", "0.5", ".5", "2.", "1e3"). Spaces around it are
 * ignored, before and after alike. Anything else is refused: "nan", "inf", hex
 * ("0x10", "0x1p3"), a number that overflows a double, words after it. */
#ifndef STRATA_BASE_NUMBER_H
#define STRATA_BASE_NUMBER_H

#include <stddef.h>
#include <stdint.h>

/* Reads a number at the start of text (after spaces) into *out; *rest, if not
 * NULL, points just past it. Returns 0, or -1 when text does not start with a
 * finite number. */
int st_num_scan(const char *text, double *out, const char **rest);

/* The whole of text as a number from min to max (both included). 0 or -1. */
int st_num_double(const char *text, double min, double max, double *out);

/* The whole of text as a whole number from min to max, written with digits only
 * (no fraction, no exponent), optionally followed by k, M or G (thousands,
 * millions, billions: "500k"). Exact over the whole int64 range. 0 or -1. */
int st_num_int(const char *text, int64_t min, int64_t max, int64_t *out);

/* Formatting without printf, for writers of many numbers (a profile's tables). */
/* v in decimal, as "%llu" writes it, into buf (at least 20 bytes; no NUL). Returns
 * the length. */
size_t st_num_u64(char *buf, uint64_t v);
/* v with `precision` decimals (0 to 9) exactly as printf's "%.*f" writes it, into
 * buf (at least 24 bytes, all of which it may write; no NUL). Returns the length,
 * or 0 where that is not sure without printf (a negative, huge or non-finite v, or
 * v * 10^precision within a thousandth of a half): then use printf. */
size_t st_num_fixed(char *buf, double v, int precision);

/* v exactly as printf's "%.17g" writes it (the digits a double needs to be read
 * back the same), into buf (at least 32 bytes; no NUL). Returns the length, or 0
 * where v is -0.0, not finite, or not above 1e-6 and below 1e30 in size: then use
 * printf. */
size_t st_num_g17(char *buf, double v);

#endif
