#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>

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
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return err;
}
