/* Files: making folders and writing a file whole or not at all. */
#ifndef STRATA_BASE_FSUTIL_H
#define STRATA_BASE_FSUTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/strbuf.h"

/* mkdir -p: 0, or -1 with errno set (ENOTDIR when a part is not a folder). */
int st_fs_make_dirs(const char *path);

/* Writes len bytes to path through a temporary file beside it, renamed into place
 * once everything is written and closed: a file with the final name is always
 * whole. Returns 0 or ST_EIO with msg naming the path and the cause. */
int st_fs_write_atomic(const char *path, const char *data, size_t len, st_msg_t *msg);

/* A file being written: a temporary file beside `path`, created exclusively
 * (mkstemp), that `buf` streams into (base/strbuf.h); commit renames it into
 * place. Memory stays bounded however large the file. */
typedef struct {
    FILE *f;
    st_strbuf_t buf;                /* append here; it streams into f */
    char path[PATH_MAX], tmp[PATH_MAX];
} st_fs_out_t;

/* How commit treats a file already at the final path. */
#define ST_FS_REPLACE 0     /* replaced, atomically */
#define ST_FS_KEEP 1        /* kept: commit fails with EEXIST, nothing replaced */

/* Opens the temporary file for path. Returns 0 or ST_EIO (msg says why). */
int st_fs_out_open(st_fs_out_t *o, const char *path, st_msg_t *msg);
/* Flushes, closes and renames the file into place (mode: ST_FS_REPLACE or
 * ST_FS_KEEP); on any failure (a write, the disk, an existing file under
 * ST_FS_KEEP) removes the temporary file and returns ST_EIO with msg naming the
 * path and the cause. Always releases o. */
int st_fs_out_commit(st_fs_out_t *o, int mode, st_msg_t *msg);
/* Drops the file being written (after an error). */
void st_fs_out_abort(st_fs_out_t *o);

/* Identity of a file (device and inode), to tell whether two paths are one file. */
typedef struct {
    dev_t dev;
    ino_t ino;
} st_fs_id_t;

/* Opens path for reading only if it is a regular file: a FIFO, a device or a
 * folder is refused at once (opening never blocks). Returns the open stream, or
 * NULL with msg set ("not a regular file", or the open error); *id, if not NULL,
 * gets the file's identity and *size its size. */
FILE *st_fs_open_regular(const char *path, st_fs_id_t *id, size_t *size, st_msg_t *msg);

#endif
