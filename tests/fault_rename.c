/* fault_rename.c — an LD_PRELOAD shim for tests/test_file_safety.sh that
 * makes one rename fail, the way a full disk, EXDEV or a kill in the window
 * would leave it:
 *   TF_TEST_FAIL_RENAME=SUFFIX    rename(old, new) with new ending in SUFFIX
 *   TF_TEST_FAIL_RENAMEAT=SUFFIX  renameat(.., new) with new ending in SUFFIX
 *   TF_TEST_FAIL_SKIP=K           let the first K matching calls succeed
 * fail with EXDEV, once (the (K+1)-th match: what follows, such as undoing,
 * succeeds); every other call goes to libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int matches(const char *var, const char *newpath)
{
    const char *suffix = getenv(var);
    if (!suffix || !*suffix || !newpath) return 0;
    size_t n = strlen(newpath), k = strlen(suffix);
    if (k > n || strcmp(newpath + n - k, suffix) != 0) return 0;
    static int seen;
    const char *skip = getenv("TF_TEST_FAIL_SKIP");
    if (seen++ != (skip ? atoi(skip) : 0)) return 0;
    fprintf(stderr, "fault_rename: failing the rename to %s\n", newpath);
    return 1;
}

int rename(const char *oldpath, const char *newpath)
{
    if (matches("TF_TEST_FAIL_RENAME", newpath)) {
        errno = EXDEV;
        return -1;
    }
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    return real(oldpath, newpath);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    if (matches("TF_TEST_FAIL_RENAMEAT", newpath)) {
        errno = EXDEV;
        return -1;
    }
    int (*real)(int, const char *, int, const char *) =
        (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    return real(olddirfd, oldpath, newdirfd, newpath);
}
