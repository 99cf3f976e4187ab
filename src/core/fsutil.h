/* Files: making folders and writing a file whole or not at all. */
#ifndef STRATA_CORE_FSUTIL_H
#define STRATA_CORE_FSUTIL_H

#include <stddef.h>

#include "core/err.h"

/* mkdir -p: 0, or -1 with errno set (ENOTDIR when a part is not a folder). */
int st_fs_make_dirs(const char *path);

/* Writes len bytes to path through a temporary file beside it, renamed into place
 * once everything is written and closed: a file with the final name is always
 * whole. Returns 0 or ST_EIO with msg naming the path and the cause. */
int st_fs_write_atomic(const char *path, const char *data, size_t len, st_msg_t *msg);

#endif
