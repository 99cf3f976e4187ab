#define _GNU_SOURCE /* renameat2 */

#include "base/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int st_fs_make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int st_fs_out_open(st_fs_out_t *o, const char *path, st_msg_t *msg)
{
    memset(o, 0, sizeof *o);
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path ||
        snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.tmpXXXXXX", dirlen, path,
                 slash ? slash + 1 : path) >= (int)sizeof o->tmp)
        return st_msg_set(msg, ST_EIO, "path too long: '%s'", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0)
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
    if (!(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    st_strbuf_init(&o->buf);
    st_strbuf_stream(&o->buf, o->f);
    return 0;
}

void st_fs_out_abort(st_fs_out_t *o)
{
    if (o->f) {
        fclose(o->f);
        unlink(o->tmp);
    }
    o->f = NULL;
    st_strbuf_free(&o->buf);
}

/* Renames tmp to path unless path exists: atomically where the kernel can
 * (renameat2 RENAME_NOREPLACE), else by a hard link, which fails on an
 * existing name too. */
static int rename_keep(const char *tmp, const char *path)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
#endif
    if (link(tmp, path) != 0)
        return -1;
    unlink(tmp);
    return 0;
}

int st_fs_out_commit(st_fs_out_t *o, int mode, st_msg_t *msg)
{
    int bad = 0, err = 0;
    if (st_strbuf_flush(&o->buf) < 0) {
        bad = 1;
        err = o->buf.sink_errno ? o->buf.sink_errno : ENOMEM;
    }
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    o->f = NULL;
    st_strbuf_free(&o->buf);
    /* mkstemp makes the file 0600: give it the usual permissions */
    mode_t um = umask(0);
    umask(um);
    if (!bad && chmod(o->tmp, 0666 & ~um) != 0) {
        bad = 1;
        err = errno;
    }
    if (!bad && (mode == ST_FS_KEEP ? rename_keep(o->tmp, o->path) : rename(o->tmp, o->path)) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlink(o->tmp);
        if (err == EEXIST)
            return st_msg_set(msg, ST_EIO, "'%s' already exists (use --force to replace it)",
                              o->path);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", o->path,
                          strerror(err ? err : EIO));
    }
    return 0;
}

FILE *st_fs_open_regular(const char *path, st_fs_id_t *id, size_t *size, st_msg_t *msg)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        st_msg_set(msg, ST_EIO, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        st_msg_set(msg, ST_EIO, "cannot read '%s': not a regular file", path);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        st_msg_set(msg, ST_EIO, "cannot read '%s': %s", path, strerror(e));
        return NULL;
    }
    if (id) {
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    }
    if (size)
        *size = (size_t)st.st_size;
    return f;
}

int st_fs_write_atomic(const char *path, const char *data, size_t len, st_msg_t *msg)
{
    char tmp[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    if (snprintf(tmp, sizeof tmp, "%.*s.%s.tmpXXXXXX", dirlen, path, slash ? slash + 1 : path) >=
        (int)sizeof tmp)
        return st_msg_set(msg, ST_EIO, "path too long: '%s'", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(errno));
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    size_t n = len ? fwrite(data, 1, len, f) : 0;
    int bad = n != len || ferror(f);
    int err = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    /* mkstemp makes the file 0600: give it the usual permissions */
    mode_t um = umask(0);
    umask(um);
    if (!bad && chmod(tmp, 0666 & ~um) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad || rename(tmp, path) != 0) {
        if (!bad)
            err = errno;
        unlink(tmp);
        return st_msg_set(msg, ST_EIO, "cannot write '%s': %s", path, strerror(err ? err : EIO));
    }
    return 0;
}
