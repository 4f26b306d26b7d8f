/* fuzz_archive_extract.c — libFuzzer target for unpacking a downloaded
 * dataset (core/sdk/archive_extract.c): any bytes as an archive, unpacked
 * into a fresh folder with small limits, and any bytes as an entry name and
 * a link target. What is accepted must stay inside: after an unpack the
 * folder holds only files, folders and links whose targets stay inside it,
 * within the limits; a cleaned name is relative with no ".." or empty part.
 * Run: scripts/fuzz.sh 60 archive_extract (needs libarchive-dev) */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_extract.h"
#include "tfcore/file.h"

static void must(int ok)
{
    if (!ok) __builtin_trap();
}

static const char *root;
static size_t root_len;
static uint64_t seen_bytes;

static int check_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    must(strncmp(path, root, root_len) == 0);
    if (ftw->level == 0) return 0;
    const char *rel = path + root_len + 1;
    must(S_ISREG(sb->st_mode) || S_ISDIR(sb->st_mode) || S_ISLNK(sb->st_mode));
    /* a file with hard links is seen once per name: its share per name */
    if (S_ISREG(sb->st_mode)) seen_bytes += (uint64_t)sb->st_size / (uint64_t)(sb->st_nlink ? sb->st_nlink : 1);
    if (S_ISLNK(sb->st_mode)) {
        char target[4096];
        ssize_t n = readlink(path, target, sizeof target - 1);
        must(n > 0);
        target[n] = '\0';
        must(archive_link_inside(rel, target));
    }
    return 0;
}

static void check_name(const char *s)
{
    char out[256];
    if (!archive_name_clean(s, out, sizeof out)) return;
    must(out[0] && out[0] != '/' && out[strlen(out) - 1] != '/');
    must(!strstr(out, "//"));
    for (const char *p = out; p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        must(!(len == 2 && p[0] == '.' && p[1] == '.'));
        must(!(len == 1 && p[0] == '.'));
        p = slash ? slash + 1 : NULL;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* names: the input up to the first NUL, and the rest as a link target */
    char name[300], target[300];
    size_t a = strnlen((const char *)data, size < 299 ? size : 299);
    memcpy(name, data, a);
    name[a] = '\0';
    size_t rest = size > a + 1 ? size - a - 1 : 0;
    size_t b = strnlen((const char *)data + (size > a ? a + 1 : size), rest < 299 ? rest : 299);
    memcpy(target, data + (size > a ? a + 1 : size), b);
    target[b] = '\0';
    check_name(name);
    char clean[300];
    if (archive_name_clean(name, clean, sizeof clean)) archive_link_inside(clean, target);

    /* the whole input as an archive */
    char dir[] = "/tmp/fuzz-archive-XXXXXX";
    if (!mkdtemp(dir)) return 0;
    archive_limits lim = {.max_bytes = 1 << 20, .max_entries = 200};
    tf_error err = {0};
    tf_status st = archive_extract_memory(data, size, "fuzz", dir, &lim, &err);
    must(st == TF_OK || err.msg[0]);
    must(!strchr(err.msg, '\n'));
    root = dir;
    root_len = strlen(dir);
    seen_bytes = 0;
    nftw(dir, check_entry, 16, FTW_PHYS);
    must(seen_bytes <= lim.max_bytes);
    tf_error ignored = {0};
    tf_file_remove_tree(dir, &ignored);
    return 0;
}
