/* file_tree.c — removing and replacing folders without following links
 * (tfcore/file.h): everything goes through directory descriptors (openat
 * with O_NOFOLLOW, unlinkat, renameat), so a symbolic link met anywhere is
 * removed as a link and nothing outside the folder's own tree is touched. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfcore/file.h"

#define MAX_DEPTH 128 /* deeper than anything tfcore writes; bounds the open descriptors */

/* The parent folder of path, opened, and path's last component (trailing
 * slashes dropped, so "link/" names the link, not its target). */
static tf_status open_parent(const char *path, int *pfd, char *name, size_t name_cap, tf_error *err)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    const char *slash = NULL;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/') slash = path + i;
    const char *base = slash ? slash + 1 : path;
    size_t blen = len - (size_t)(base - path);
    if (blen == 0 || blen >= name_cap || (blen == 1 && base[0] == '.') || (blen == 2 && !strncmp(base, "..", 2)))
        return tf_error_set(err, TF_ERR_USAGE, "cannot remove or replace '%s': not a folder entry", path);
    memcpy(name, base, blen);
    name[blen] = '\0';
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!parent) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    *pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    free(parent);
    if (*pfd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot open the folder of %s: %s", path, strerror(e));
    return TF_OK;
}

/* Remove entry `name` of the folder open as pfd; shown is its path for messages. */
static tf_status remove_at(int pfd, const char *name, const char *shown, int depth, tf_error *err)
{
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return TF_OK;
        if (errno != ELOOP && errno != ENOTDIR)
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", shown, strerror(errno));
        /* a link or a file: the entry itself goes, never what a link points to */
        if (unlinkat(pfd, name, 0) != 0 && errno != ENOENT)
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", shown, strerror(errno));
        return TF_OK;
    }
    if (depth >= MAX_DEPTH) {
        close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: nested more than %d folders deep", shown,
                            MAX_DEPTH);
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", shown, strerror(e));
    }
    tf_status st = TF_OK;
    struct dirent *e;
    size_t cap = strlen(shown) + 258;
    char *child = malloc(cap);
    if (!child) st = tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: out of memory", shown);
    /* POSIX leaves unspecified what readdir shows after removals: list again
     * while the folder is not empty (a few passes at most) */
    for (int pass = 0; !st && pass < 4; pass++) {
        rewinddir(d);
        while (!st && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(child, cap, "%s/%s", shown, e->d_name);
            st = remove_at(dirfd(d), e->d_name, child, depth + 1, err);
        }
        if (st) break;
        if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) break;
        if (errno != ENOTEMPTY && errno != EEXIST) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", shown, strerror(errno));
        } else if (pass == 3) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: it keeps getting new entries", shown);
        }
    }
    free(child);
    closedir(d);
    return st;
}

/* ".NAME.<what>-<pid>" for this process into out. */
static int aside_name(char *out, size_t cap, const char *name, const char *what)
{
    return snprintf(out, cap, ".%s.%s-%ld", name, what, (long)getpid()) < (int)cap ? 0 : -1;
}

tf_status tf_file_remove_tree(const char *path, tf_error *err)
{
    if (!path || !path[0]) return tf_error_set(err, TF_ERR_USAGE, "tf_file_remove_tree: no path");
    int pfd;
    char name[256], aside[300];
    tf_status st = open_parent(path, &pfd, name, sizeof name, err);
    if (st) return st;
    struct stat sb;
    if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        int e = errno;
        close(pfd);
        return e == ENOENT ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", path, strerror(e));
    }
    if (!S_ISDIR(sb.st_mode)) {
        st = unlinkat(pfd, name, 0) == 0 || errno == ENOENT
                 ? TF_OK
                 : tf_error_set(err, TF_ERR_RUNTIME, "cannot remove %s: %s", path, strerror(errno));
        close(pfd);
        return st;
    }
    /* out of the way first: never a half-emptied folder under its own name */
    const char *victim = name;
    if (aside_name(aside, sizeof aside, name, "deleting") == 0 && renameat(pfd, name, pfd, aside) == 0) victim = aside;
    st = remove_at(pfd, victim, path, 0, err);
    close(pfd);
    return st;
}

tf_status tf_file_replace_dir(const char *new_dir, const char *dir, tf_error *err)
{
    if (!new_dir || !dir) return tf_error_set(err, TF_ERR_USAGE, "tf_file_replace_dir: no path");
    int pfd;
    char name[256], aside[300];
    tf_status st = open_parent(dir, &pfd, name, sizeof name, err);
    if (st) return st;
    if (aside_name(aside, sizeof aside, name, "replaced") != 0) {
        close(pfd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot replace %s: name too long", dir);
    }
    struct stat sb;
    bool had_old = fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (had_old) {
        /* a leftover aside of this very pid would block the rename */
        if ((st = remove_at(pfd, aside, aside, 0, err))) goto out;
        if (renameat(pfd, name, pfd, aside) != 0) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot replace %s: cannot move the old one aside: %s", dir,
                              strerror(errno));
            goto out;
        }
    }
    if (rename(new_dir, dir) != 0) {
        int e = errno;
        if (had_old && renameat(pfd, aside, pfd, name) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME,
                              "cannot rename %s to %s (%s), and the old one stays at .../%s: %s", new_dir, dir,
                              strerror(e), aside, strerror(errno));
        else
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s to %s: %s", new_dir, dir, strerror(e));
        goto out;
    }
    if (fsync(pfd) != 0) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: renamed into place, but flushing its folder failed: %s", dir,
                          strerror(errno));
        goto out;
    }
    if (had_old) st = remove_at(pfd, aside, aside, 0, err);
out:
    close(pfd);
    return st;
}

/* Entry ".NAME.<what>-<digits>": NAME into out (cap bytes) when it has that form. */
static bool parse_aside(const char *entry, const char *what, char *out, size_t cap)
{
    if (entry[0] != '.') return false;
    char key[32];
    snprintf(key, sizeof key, ".%s-", what);
    const char *at = NULL;
    for (const char *p = strstr(entry + 1, key); p; p = strstr(p + 1, key)) at = p;
    if (!at || at == entry + 1) return false;
    const char *digits = at + strlen(key);
    if (!*digits || strspn(digits, "0123456789") != strlen(digits)) return false;
    size_t n = (size_t)(at - (entry + 1));
    if (n >= cap) return false;
    memcpy(out, entry + 1, n);
    out[n] = '\0';
    return true;
}

tf_status tf_file_tidy_dir(const char *dir, int *n_tidied, tf_error *err)
{
    if (n_tidied) *n_tidied = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", dir, strerror(errno));
    int lfd = dup(fd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0) close(lfd);
        close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot list %s: %s", dir, strerror(errno));
    }
    /* collect first: renaming while listing could show an entry twice */
    char **names = NULL;
    size_t n = 0, cap = 0;
    tf_status st = TF_OK;
    struct dirent *e;
    char base[256];
    while (!st && (e = readdir(d))) {
        if (!parse_aside(e->d_name, "deleting", base, sizeof base) &&
            !parse_aside(e->d_name, "replaced", base, sizeof base))
            continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *g);
            if (!g) {
                st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", dir);
                break;
            }
            names = g;
        }
        if (!(names[n] = strdup(e->d_name))) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", dir);
        else n++;
    }
    closedir(d);
    size_t shown_cap = strlen(dir) + 258;
    char *shown = malloc(shown_cap);
    if (!st && !shown) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", dir);
    for (size_t i = 0; !st && i < n; i++) {
        struct stat sb;
        snprintf(shown, shown_cap, "%s/%s", dir, names[i]);
        if (parse_aside(names[i], "replaced", base, sizeof base) &&
            fstatat(fd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
            if (renameat(fd, names[i], fd, base) != 0)
                st = tf_error_set(err, TF_ERR_RUNTIME, "cannot restore %s as %s/%s: %s", shown, dir, base,
                                  strerror(errno));
        } else {
            st = remove_at(fd, names[i], shown, 0, err);
        }
        if (!st && n_tidied) (*n_tidied)++;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(shown);
    close(fd);
    return st;
}
