/* Error codes shared by every strata module.
 *
 * Functions return 0 on success or a negative st_err_t; st_strerror() gives the
 * text. Where a caller needs more than the code (which setting, which value), the
 * failing function also fills an st_msg_t that the front end prints as
 * "strata: error: <message>". */
#ifndef STRATA_BASE_ERR_H
#define STRATA_BASE_ERR_H

#include <stddef.h>

typedef enum {
    ST_OK = 0,
    ST_ENOMEM = -1,   /* an allocation failed */
    ST_EINVAL = -2,   /* a bad value from the user */
    ST_EIO = -3,      /* a read or write failed */
    ST_ERANGE = -4,   /* a number out of range */
    ST_EUSAGE = -5,   /* a bad command line */
    ST_EHELP = -6,    /* help was asked for and printed: exit 0 */
} st_err_t;

/* One error message, formatted where the error is found. */
typedef struct {
    char text[1024];
} st_msg_t;

/* The text of an error code; never NULL, static storage. */
const char *st_strerror(int err);

/* Formats msg (printf-style) and returns err, so that a failing path reads
 * `return st_msg_set(msg, ST_EINVAL, "bad value '%s'", v);`. msg may be NULL.
 * Control characters and bytes that are not UTF-8 come out escaped
 * (st_strbuf_printable), so the message is always one printable line. */
int st_msg_set(st_msg_t *msg, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
