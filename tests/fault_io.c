/* fault_io.c — an LD_PRELOAD shim for tests/test_checkpoint_faults.sh that
 * makes one file operation fail the way a full disk or a failing disk would,
 * or kills the process at that point the way kill -9 or a power cut would:
 *   TF_TEST_IO_PATH=TEXT    watch files whose path contains TEXT (the path
 *                           given to open/openat; for rename and unlink,
 *                           either name)
 *   TF_TEST_IO_CALL=CALL    write (write, pwrite), fsync (fsync, fdatasync),
 *                           close, rename (rename, renameat) or unlink
 *                           (unlink, unlinkat, rmdir)
 *   TF_TEST_IO_AT=K         the K-th such call on a watched file (1 = first)
 *   TF_TEST_IO_FAULT=WHAT   ENOSPC or EIO: that call fails with it, once;
 *                           KILL: the process gets SIGKILL instead of the call
 * Every other call goes to libc unchanged. A line on stderr says what was
 * injected, so a test can tell a fault that fired from one that did not. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FD 4096

static unsigned char watched[MAX_FD]; /* fd -> opened with a watched path */
static long seen;                     /* matching calls so far */

static int path_watched(const char *path)
{
    const char *text = getenv("TF_TEST_IO_PATH");
    return text && *text && path && strstr(path, text);
}

static void watch_fd(int fd, const char *path)
{
    if (fd >= 0 && fd < MAX_FD) watched[fd] = (unsigned char)path_watched(path);
}

/* 0: go on to libc; otherwise the errno to fail with (the process is gone for KILL). */
static int inject(const char *call, const char *what)
{
    const char *want = getenv("TF_TEST_IO_CALL"), *at = getenv("TF_TEST_IO_AT"), *fault = getenv("TF_TEST_IO_FAULT");
    if (!want || strcmp(want, call) != 0 || !fault) return 0;
    if (++seen != (at ? atol(at) : 1)) return 0;
    fprintf(stderr, "fault_io: %s %s #%ld on %s\n", strcmp(fault, "KILL") ? "failing" : "SIGKILL at", call, seen,
            what);
    if (!strcmp(fault, "KILL")) {
        kill(getpid(), SIGKILL);
        for (;;) pause();
    }
    return !strcmp(fault, "EIO") ? EIO : ENOSPC;
}

static int fd_inject(const char *call, int fd)
{
    if (fd < 0 || fd >= MAX_FD || !watched[fd]) return 0;
    char what[32];
    snprintf(what, sizeof what, "fd %d", fd);
    return inject(call, what);
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

static int open_common(const char *sym, int dirfd, int at, const char *path, int flags, va_list ap)
{
    /* a mode argument is there only with O_CREAT or O_TMPFILE (whose bits include O_DIRECTORY's) */
    mode_t mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
    int fd = at ? REAL(sym, int (*)(int, const char *, int, ...))(dirfd, path, flags, mode)
                : REAL(sym, int (*)(const char *, int, ...))(path, flags, mode);
    watch_fd(fd, path);
    return fd;
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_common("open", 0, 0, path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_common("open64", 0, 0, path, flags, ap);
    va_end(ap);
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_common("openat", dirfd, 1, path, flags, ap);
    va_end(ap);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int fd = open_common("openat64", dirfd, 1, path, flags, ap);
    va_end(ap);
    return fd;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    int e = fd_inject("write", fd);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("write", ssize_t (*)(int, const void *, size_t))(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    int e = fd_inject("write", fd);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("pwrite", ssize_t (*)(int, const void *, size_t, off_t))(fd, buf, n, off);
}

int fsync(int fd)
{
    int e = fd_inject("fsync", fd);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("fsync", int (*)(int))(fd);
}

int fdatasync(int fd)
{
    int e = fd_inject("fsync", fd);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("fdatasync", int (*)(int))(fd);
}

int close(int fd)
{
    int e = fd_inject("close", fd);
    if (fd >= 0 && fd < MAX_FD) watched[fd] = 0;
    int rc = REAL("close", int (*)(int))(fd);
    if (e) { /* as Linux: the descriptor is gone even when close reports an error */
        errno = e;
        return -1;
    }
    return rc;
}

static int names_inject(const char *call, const char *a, const char *b)
{
    const char *hit = path_watched(a) ? a : path_watched(b) ? b : NULL;
    return hit ? inject(call, hit) : 0;
}

int rename(const char *from, const char *to)
{
    int e = names_inject("rename", from, to);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("rename", int (*)(const char *, const char *))(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    int e = names_inject("rename", from, to);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("renameat", int (*)(int, const char *, int, const char *))(fromfd, from, tofd, to);
}

int unlink(const char *path)
{
    int e = names_inject("unlink", path, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("unlink", int (*)(const char *))(path);
}

int unlinkat(int dirfd, const char *path, int flags)
{
    int e = names_inject("unlink", path, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("unlinkat", int (*)(int, const char *, int))(dirfd, path, flags);
}

int rmdir(const char *path)
{
    int e = names_inject("unlink", path, NULL);
    if (e) {
        errno = e;
        return -1;
    }
    return REAL("rmdir", int (*)(const char *))(path);
}
