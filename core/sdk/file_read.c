/* file_read.c — opening input files as regular files only (tfcore/file_read.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfcore/file_read.h"

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m)) return "directory";
    if (S_ISFIFO(m)) return "fifo";
    if (S_ISSOCK(m)) return "socket";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    return "not a file";
}

/* "PATH: cannot open WHAT: why", or "PATH: cannot open: why" without a what */
static tf_status open_failed(const char *path, const char *what, tf_status code, int e, tf_error *err)
{
    return tf_error_set(err, code, "%s: cannot open%s%s: %s", path, what ? " " : "", what ? what : "",
                        strerror(e));
}

tf_status tf_file_open_read(const char *path, const char *what, tf_status code, int *fd,
                            tf_error *err)
{
    *fd = -1;
    if (!path || !*path) return tf_error_set(err, code, "no %s given", what ? what : "file");
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) return open_failed(path, what, code, errno, err);
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return open_failed(path, what, code, e, err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return tf_error_set(err, code, "%s: not a regular file (%s)", path, kind_name(st.st_mode));
    }
    int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(f);
        return open_failed(path, what, code, e, err);
    }
    *fd = f;
    return TF_OK;
}

tf_status tf_file_fopen_read(const char *path, const char *what, tf_status code, FILE **f,
                             tf_error *err)
{
    *f = NULL;
    int fd;
    tf_status st = tf_file_open_read(path, what, code, &fd, err);
    if (st != TF_OK) return st;
    *f = fdopen(fd, "rb");
    if (!*f) {
        int e = errno;
        close(fd);
        return open_failed(path, what, code, e, err);
    }
    return TF_OK;
}

tf_status tf_file_check_regular(const char *path, const char *what, tf_status code,
                                tf_error *err)
{
    int fd;
    tf_status st = tf_file_open_read(path, what, code, &fd, err);
    if (st == TF_OK) close(fd);
    return st;
}
