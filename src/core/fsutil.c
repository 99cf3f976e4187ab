#include "core/fsutil.h"

#include <errno.h>
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
