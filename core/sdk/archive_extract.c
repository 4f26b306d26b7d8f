/* archive_extract.c — unpacking a downloaded dataset archive safely.
 * libarchive reads the archive (every format and compression it knows);
 * the tree is written here, relative to a descriptor of the destination
 * folder, with every folder along a name opened O_NOFOLLOW: nothing is ever
 * written through a link, whatever order the entries come in. (libarchive's
 * own archive_write_disk resolves names against the process's working
 * folder, which a library must not change, and skips bad entries where we
 * refuse the whole archive with one line.) */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_extract.h"

tf_status archive_limits_from_env(archive_limits *lim, tf_error *err)
{
    lim->max_bytes = 4000000000ULL;
    lim->max_entries = 1000000;
    static const char *const names[] = {"TFCORE_DATASET_MAX_BYTES", "TFCORE_DATASET_MAX_ENTRIES"};
    uint64_t *slots[] = {&lim->max_bytes, &lim->max_entries};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (!v || !v[0]) continue;
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || v[0] == '-' || x == 0)
            return tf_error_set(err, TF_ERR_CONFIG, "%s='%s' is not a positive whole number", names[i], v);
        *slots[i] = x;
    }
    return TF_OK;
}

bool archive_name_clean(const char *name, char *out, size_t n)
{
    if (!name || name[0] == '/' || n == 0) return false;
    size_t o = 0;
    const char *p = name;
    while (*p) {
        while (*p == '/') p++;
        const char *q = p;
        while (*q && *q != '/') q++;
        size_t len = (size_t)(q - p);
        if (len == 0) break;
        if (len == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!(len == 1 && p[0] == '.')) {
            for (const char *c = p; c < q; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f) return false;
            if (o + len + 2 > n) return false;
            if (o) out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p = q;
    }
    out[o] = '\0';
    return o > 0;
}

bool archive_link_inside(const char *name, const char *target)
{
    if (!target || !target[0] || target[0] == '/') return false;
    /* the link's folder depth: the components of name before its last */
    int depth = 0;
    for (const char *c = name; *c; c++) depth += *c == '/';
    /* leading ".." climb out of the link's folder (real folders: nothing is
     * written through a link); after the first name, no ".." (the name may be
     * a link itself, and ".." after a link is not where the names say) */
    bool downward = false;
    const char *p = target;
    while (*p) {
        while (*p == '/') p++;
        const char *q = p;
        while (*q && *q != '/') q++;
        size_t len = (size_t)(q - p);
        if (len == 0) break;
        for (const char *c = p; c < q; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) return false;
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (downward || --depth < 0) return false;
        } else if (!(len == 1 && p[0] == '.')) {
            downward = true;
        }
        p = q;
    }
    return true;
}

#ifndef TF_HAVE_LIBARCHIVE

bool archive_can_extract(void) { return false; }

tf_status archive_extract(const char *archive, const char *what, const char *dest, const archive_limits *lim,
                          tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME,
                        "cannot unpack %s: this tfcore was built without libarchive (install libarchive-dev "
                        "and rebuild, or unpack it yourself and give the folder as data.path)",
                        what);
}

tf_status archive_extract_memory(const void *data, size_t size, const char *what, const char *dest,
                                 const archive_limits *lim, tf_error *err)
{
    return archive_extract(what, what, dest, lim, err);
}

#else

#include <archive.h>
#include <archive_entry.h>

bool archive_can_extract(void) { return true; }

typedef struct unpack {
    struct archive *a;
    const char *what; /* the archive, for messages */
    int root;         /* descriptor of the destination folder */
    const archive_limits *lim;
    uint64_t bytes, entries;
} unpack;

/* The folder that holds `name` (clean), made as needed, each step opened
 * O_NOFOLLOW so that a link (or a file) on the way stops it. *out: a
 * descriptor to close; *base: the last component. */
static tf_status open_parent(unpack *u, const char *name, int *out, const char **base, tf_error *err)
{
    int fd = dup(u->root);
    if (fd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "%s: %s", u->what, strerror(errno));
    char part[4096];
    const char *p = name;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash) break;
        size_t len = (size_t)(slash - p);
        memcpy(part, p, len);
        part[len] = '\0';
        if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            return tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot create the folder for '%s': %s", u->what, name,
                                strerror(e));
        }
        int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            struct stat sb;
            if (e == ELOOP || e == ENOTDIR) {
                bool link = fstatat(fd, part, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode);
                close(fd);
                return tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' passes through '%.*s', which is a %s",
                                    u->what, name, (int)(slash - name), name, link ? "link" : "file");
            }
            close(fd);
            return tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot open the folder of '%s': %s", u->what, name,
                                strerror(e));
        }
        close(fd);
        fd = next;
        p = slash + 1;
    }
    *base = p;
    *out = fd;
    return TF_OK;
}

static tf_status write_file(unpack *u, struct archive_entry *e, const char *name, tf_error *err)
{
    int64_t announced = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (announced < 0 || (uint64_t)announced > u->lim->max_bytes - u->bytes)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: refused: entry '%s' (%" PRId64 " bytes) would take the unpacked size past %" PRIu64
                            " bytes (TFCORE_DATASET_MAX_BYTES raises the limit)",
                            u->what, name, announced, u->lim->max_bytes);
    const char *base;
    int dir;
    tf_status st0 = open_parent(u, name, &dir, &base, err);
    if (st0) return st0;
    int fd = openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int e0 = errno;
    close(dir);
    if (fd < 0) {
        if (e0 == EEXIST)
            return tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is given twice", u->what, name);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot create '%s': %s", u->what, name, strerror(e0));
    }
    static _Thread_local char buf[1 << 16];
    tf_status st = TF_OK;
    for (;;) {
        la_ssize_t r = archive_read_data(u->a, buf, sizeof buf);
        if (r == 0) break;
        if (r < 0) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: damaged at entry '%s': %s", u->what, name,
                              archive_error_string(u->a) ? archive_error_string(u->a) : "read error");
            break;
        }
        u->bytes += (uint64_t)r;
        if (u->bytes > u->lim->max_bytes) {
            st = tf_error_set(err, TF_ERR_DATA,
                              "%s: refused: entry '%s' takes the unpacked size past %" PRIu64
                              " bytes (TFCORE_DATASET_MAX_BYTES raises the limit)",
                              u->what, name, u->lim->max_bytes);
            break;
        }
        for (size_t done = 0; done < (size_t)r;) {
            ssize_t w = write(fd, buf + done, (size_t)r - done);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                st = tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot write '%s': %s", u->what, name,
                                  errno == ENOSPC ? "disk full" : strerror(errno));
                break;
            }
            done += (size_t)w;
        }
        if (st) break;
    }
    if (close(fd) != 0 && !st)
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot write '%s': %s", u->what, name, strerror(errno));
    return st;
}

static tf_status make_dir(unpack *u, const char *name, tf_error *err)
{
    const char *base;
    int dir;
    tf_status st0 = open_parent(u, name, &dir, &base, err);
    if (st0) return st0;
    struct stat sb;
    tf_status st = TF_OK;
    if (mkdirat(dir, base, 0755) != 0) {
        if (errno != EEXIST)
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot create the folder '%s': %s", u->what, name,
                              strerror(errno));
        else if (fstatat(dir, base, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode))
            st = tf_error_set(err, TF_ERR_DATA, "%s: refused: folder '%s' is also given as a file or link",
                              u->what, name);
    }
    close(dir);
    return st;
}

static tf_status make_symlink(unpack *u, struct archive_entry *e, const char *name, tf_error *err)
{
    const char *target = archive_entry_symlink(e);
    if (!archive_link_inside(name, target))
        return tf_error_set(err, TF_ERR_DATA, "%s: refused: link '%s' points outside the dataset ('%s')", u->what,
                            name, target ? target : "");
    const char *base;
    int dir;
    tf_status st0 = open_parent(u, name, &dir, &base, err);
    if (st0) return st0;
    tf_status st = TF_OK;
    if (symlinkat(target, dir, base) != 0)
        st = errno == EEXIST
                 ? tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is given twice", u->what, name)
                 : tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot create the link '%s': %s", u->what, name,
                                strerror(errno));
    close(dir);
    return st;
}

static tf_status make_hardlink(unpack *u, const char *name, const char *target_raw, tf_error *err)
{
    char target[4096];
    if (!archive_name_clean(target_raw, target, sizeof target))
        return tf_error_set(err, TF_ERR_DATA, "%s: refused: hard link '%s' points outside the dataset ('%s')",
                            u->what, name, target_raw);
    const char *tbase, *base;
    int tdir, dir;
    tf_status st0 = open_parent(u, target, &tdir, &tbase, err);
    if (st0) return st0;
    struct stat sb;
    if (fstatat(tdir, tbase, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) {
        close(tdir);
        return tf_error_set(err, TF_ERR_DATA, "%s: refused: hard link '%s' to '%s', which is not a file unpacked "
                            "before it", u->what, name, target);
    }
    if ((st0 = open_parent(u, name, &dir, &base, err))) {
        close(tdir);
        return st0;
    }
    tf_status st = TF_OK;
    if (linkat(tdir, tbase, dir, base, 0) != 0)
        st = errno == EEXIST
                 ? tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is given twice", u->what, name)
                 : tf_error_set(err, TF_ERR_RUNTIME, "%s: cannot create the hard link '%s': %s", u->what, name,
                                strerror(errno));
    close(dir);
    close(tdir);
    return st;
}

static const char *kind_name(mode_t type)
{
    switch (type) {
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFIFO: return "a FIFO";
    case AE_IFSOCK: return "a socket";
    default: return "of an unknown kind";
    }
}

static tf_status unpack_all(unpack *u, tf_error *err)
{
    struct archive_entry *e;
    char name[4096];
    for (;;) {
        int r = archive_read_next_header(u->a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN)
            return tf_error_set(err, TF_ERR_DATA, "%s: not a readable archive (after %" PRIu64 " entries): %s",
                                u->what, u->entries,
                                archive_error_string(u->a) ? archive_error_string(u->a) : "read error");
        if (++u->entries > u->lim->max_entries)
            return tf_error_set(err, TF_ERR_DATA,
                                "%s: refused: more than %" PRIu64 " entries (TFCORE_DATASET_MAX_ENTRIES raises "
                                "the limit)",
                                u->what, u->lim->max_entries);
        const char *raw = archive_entry_pathname(e);
        if (!archive_name_clean(raw, name, sizeof name)) {
            if (raw && raw[0] == '/')
                return tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is an absolute path", u->what, raw);
            /* "./" alone names the root: nothing to make */
            if (raw && raw[0] && strspn(raw, "./") == strlen(raw) && !strstr(raw, "..")) continue;
            return tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is not a name inside the dataset "
                                "(empty, '..' or control bytes)", u->what, raw ? raw : "");
        }
        tf_status st;
        const char *hard = archive_entry_hardlink(e);
        mode_t type = archive_entry_filetype(e);
        if (hard) st = make_hardlink(u, name, hard, err);
        else if (type == AE_IFREG) st = write_file(u, e, name, err);
        else if (type == AE_IFDIR) st = make_dir(u, name, err);
        else if (type == AE_IFLNK) st = make_symlink(u, e, name, err);
        else st = tf_error_set(err, TF_ERR_DATA, "%s: refused: entry '%s' is %s", u->what, name, kind_name(type));
        if (st) return st;
    }
    return TF_OK;
}

static tf_status run(struct archive *a, int opened, const char *what, const char *dest,
                     const archive_limits *lim, tf_error *err)
{
    tf_status st;
    if (opened != ARCHIVE_OK) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: not a readable archive: %s", what,
                          archive_error_string(a) ? archive_error_string(a) : "unknown format");
        archive_read_free(a);
        return st;
    }
    unpack u = {.a = a, .what = what, .lim = lim};
    u.root = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (u.root < 0) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "cannot open the folder %s: %s", dest, strerror(errno));
        archive_read_free(a);
        return st;
    }
    st = unpack_all(&u, err);
    close(u.root);
    archive_read_free(a);
    return st;
}

static struct archive *reader(void)
{
    struct archive *a = archive_read_new();
    if (!a) return NULL;
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    return a;
}

tf_status archive_extract(const char *archive, const char *what, const char *dest, const archive_limits *lim,
                          tf_error *err)
{
    struct archive *a = reader();
    if (!a) return tf_error_set(err, TF_ERR_RUNTIME, "cannot read %s: out of memory", what);
    return run(a, archive_read_open_filename(a, archive, 1 << 16), what, dest, lim, err);
}

tf_status archive_extract_memory(const void *data, size_t size, const char *what, const char *dest,
                                 const archive_limits *lim, tf_error *err)
{
    struct archive *a = reader();
    if (!a) return tf_error_set(err, TF_ERR_RUNTIME, "cannot read %s: out of memory", what);
    return run(a, archive_read_open_memory(a, data, size), what, dest, lim, err);
}

#endif
