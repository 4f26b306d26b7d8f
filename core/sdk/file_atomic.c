/* file_atomic.c — atomic file writes (tfcore/file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfcore/file.h"

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync the directory holding path, so the rename itself is durable. */
static int sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Write the parts straight into an existing device or FIFO: no temp file,
 * no rename (which would replace the node itself). */
static tf_status write_through(const char *path, const tf_file_part *parts, size_t n, tf_error *err)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: %s", path, strerror(errno));
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        if (parts[k].size && write_all(fd, parts[k].data, parts[k].size) != 0) {
            int e = errno;
            close(fd);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: writing failed at byte %zu: %s", path, at,
                                strerror(e));
        }
        at += parts[k].size;
    }
    if (close(fd) != 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: %s", path, strerror(errno));
    return TF_OK;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

static tf_status write_replacing(const char *path, const tf_file_part *parts, size_t n, tf_error *err);

tf_status tf_file_write_atomic(const char *path, const tf_file_part *parts, size_t n, tf_error *err)
{
    if (!path || !path[0]) return tf_error_set(err, TF_ERR_USAGE, "tf_file_write_atomic: no path");
    struct stat sb;
    if (lstat(path, &sb) != 0) return write_replacing(path, parts, n, err); /* a new file */
    if (S_ISREG(sb.st_mode)) return write_replacing(path, parts, n, err);
    if (S_ISLNK(sb.st_mode)) {
        /* replace what the link points to, never the link */
        if (stat(path, &sb) != 0)
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: it is a symbolic link to a missing file", path);
        if (S_ISREG(sb.st_mode)) {
            char *target = realpath(path, NULL);
            if (!target)
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: cannot resolve the symbolic link: %s", path,
                                    strerror(errno));
            tf_status st = write_replacing(target, parts, n, err);
            free(target);
            return st;
        }
    }
    if (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode)) return write_through(path, parts, n, err);
    return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: it is %s; not replacing it", path, kind_of(sb.st_mode));
}

/* A regular file (or none yet) at path: temp file, fsync, rename, fsync the folder. */
static tf_status write_replacing(const char *path, const tf_file_part *parts, size_t n, tf_error *err)
{
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    tf_status rc = TF_OK;
    /* O_EXCL: never write through a link someone placed at the temp name; a
     * leftover of ours (same pid, earlier crash) is removed first */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: cannot create %s: %s", path, tmp, strerror(errno));
        goto out;
    }
    size_t at = 0; /* where the part being written starts */
    int bad = 0;
    for (size_t k = 0; !bad && k < n; k++) {
        bad = parts[k].size && write_all(fd, parts[k].data, parts[k].size);
        if (!bad) at += parts[k].size;
    }
    if (bad) {
        int e = errno;
        close(fd);
        unlink(tmp);
        rc = tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: writing %s failed at byte %zu: %s", path, tmp, at, strerror(e));
        goto out;
    }
    int synced = fsync(fd);
    int e = errno;
    int closed = close(fd);
    if (synced != 0 || closed != 0) {
        if (synced == 0) e = errno;
        unlink(tmp);
        rc = tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: flushing %s to disk failed: %s", path, tmp, strerror(e));
        goto out;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        rc = tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: cannot rename %s over it (renaming it failed: %s)", path, tmp, strerror(e));
        goto out;
    }
    if (sync_dir(path) != 0)
        rc = tf_error_set(err, TF_ERR_RUNTIME,
                          "%s: written, but flushing its directory failed (the rename may not survive a "
                          "crash): %s",
                          path, strerror(errno));
out:
    free(tmp);
    return rc;
}

tf_status tf_file_write_text_atomic(const char *path, const char *text, tf_error *err)
{
    tf_file_part p = {text, strlen(text)};
    return tf_file_write_atomic(path, &p, 1, err);
}
