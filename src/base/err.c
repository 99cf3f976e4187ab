#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/strbuf.h"

const char *st_strerror(int err)
{
    switch (err) {
    case ST_OK: return "success";
    case ST_ENOMEM: return "out of memory";
    case ST_EINVAL: return "invalid value";
    case ST_EIO: return "input/output error";
    case ST_ERANGE: return "value out of range";
    case ST_EUSAGE: return "bad command line";
    case ST_EHELP: return "help printed";
    default: return "unknown error";
    }
}

int st_msg_set(st_msg_t *msg, int err, const char *fmt, ...)
{
    if (msg) {
        /* messages quote what the user gave (names, values, file lines): escape
         * what would reach the terminal raw or break the one line */
        char raw[sizeof msg->text];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        st_text_printable(msg->text, sizeof msg->text, raw);
    }
    return err;
}
