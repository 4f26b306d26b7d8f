/* test_archive_extract.c — unpacking fetched datasets
 * (core/sdk/archive_extract.c): entry names and link targets, links that stay
 * inside the dataset kept, and the refusals on archives built here with
 * libarchive's writer (the hostile archives of tests/test_datasets.sh come
 * from Python's tarfile; these pin the library's rules one by one).
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_extract.h"
#include "tfcore/file.h"

START_TEST(names)
{
    char out[64];
    ck_assert(archive_name_clean("aclImdb/train/pos/0_8.txt", out, sizeof out));
    ck_assert_str_eq(out, "aclImdb/train/pos/0_8.txt");
    ck_assert(archive_name_clean("./aclImdb//train/", out, sizeof out));
    ck_assert_str_eq(out, "aclImdb/train");
    ck_assert(!archive_name_clean("/etc/passwd", out, sizeof out));
    ck_assert(!archive_name_clean("a/../../x", out, sizeof out));
    ck_assert(!archive_name_clean("..", out, sizeof out));
    ck_assert(!archive_name_clean("./", out, sizeof out));
    ck_assert(!archive_name_clean("", out, sizeof out));
    ck_assert(!archive_name_clean("a\nb", out, sizeof out));
    ck_assert(!archive_name_clean("a/..hidden/../b", out, sizeof out));
    ck_assert(archive_name_clean("a/..hidden", out, sizeof out)); /* "..hidden" is a name */
    char small[4];
    ck_assert(!archive_name_clean("abcdef", small, sizeof small));
}
END_TEST

START_TEST(link_targets)
{
    ck_assert(archive_link_inside("a/l", "x"));
    ck_assert(archive_link_inside("a/l", "../x"));
    ck_assert(archive_link_inside("a/b/l", "../../x/y"));
    ck_assert(archive_link_inside("l", "."));
    ck_assert(!archive_link_inside("l", "../x"));         /* climbs out of the root */
    ck_assert(!archive_link_inside("a/l", "../../x"));
    ck_assert(!archive_link_inside("a/l", "b/../x"));     /* ".." after a name that may be a link */
    ck_assert(!archive_link_inside("a/l", "/etc"));
    ck_assert(!archive_link_inside("a/l", ""));
    ck_assert(!archive_link_inside("a/l", NULL));
}
END_TEST

/* An in-memory tar of the entries: name, type, link target or contents. */
typedef struct entry {
    const char *name;
    mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR; 0: a hard link */
    const char *data;
} entry;

static char tar_buf[1 << 20];

static size_t make_tar(const entry *e, int n)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    size_t used = 0;
    ck_assert_int_eq(archive_write_open_memory(a, tar_buf, sizeof tar_buf, &used), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e[i].name);
        if (e[i].type == 0) {
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_hardlink(ae, e[i].data);
        } else {
            archive_entry_set_filetype(ae, e[i].type);
            archive_entry_set_perm(ae, 0644);
            if (e[i].type == AE_IFLNK) archive_entry_set_symlink(ae, e[i].data);
            if (e[i].type == AE_IFREG) archive_entry_set_size(ae, (la_int64_t)strlen(e[i].data));
        }
        ck_assert_int_eq(archive_write_header(a, ae), ARCHIVE_OK);
        if (e[i].type == AE_IFREG) archive_write_data(a, e[i].data, strlen(e[i].data));
        archive_entry_free(ae);
    }
    archive_write_close(a);
    archive_write_free(a);
    return used;
}

static char dir[64];

static tf_status unpack(const entry *e, int n, uint64_t max_bytes, tf_error *err)
{
    snprintf(dir, sizeof dir, "/tmp/tfcore-archive-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    archive_limits lim = {.max_bytes = max_bytes, .max_entries = 100};
    size_t len = make_tar(e, n);
    return archive_extract_memory(tar_buf, len, "test.tar", dir, &lim, err);
}

static void done(void)
{
    tf_error ignored = {0};
    tf_file_remove_tree(dir, &ignored);
}

static mode_t kind(const char *rel)
{
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return lstat(p, &sb) == 0 ? (sb.st_mode & S_IFMT) : 0;
}

START_TEST(links_inside_are_kept)
{
    const entry e[] = {
        {"d", AE_IFDIR, NULL},
        {"d/f.txt", AE_IFREG, "review"},
        {"d/s", AE_IFLNK, "f.txt"},
        {"d/up", AE_IFLNK, "../d/f.txt"},
        {"h", 0, "d/f.txt"},
        {"./e/g.txt", AE_IFREG, "x"}, /* parent made on the way */
    };
    tf_error err = {0};
    ck_assert_msg(unpack(e, 6, 1000, &err) == TF_OK, "%s", err.msg);
    ck_assert_int_eq(kind("d/f.txt"), S_IFREG);
    ck_assert_int_eq(kind("d/s"), S_IFLNK);
    ck_assert_int_eq(kind("d/up"), S_IFLNK);
    ck_assert_int_eq(kind("h"), S_IFREG);
    ck_assert_int_eq(kind("e/g.txt"), S_IFREG);
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s/h", dir);
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq((int)sb.st_nlink, 2);
    done();
}
END_TEST

/* each archive is refused with one line naming test.tar and the pattern */
static void refused(const entry *e, int n, uint64_t max_bytes, const char *want)
{
    tf_error err = {0};
    ck_assert_int_eq(unpack(e, n, max_bytes, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "test.tar: ") && strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    ck_assert_ptr_null(strchr(err.msg, '\n'));
    done();
}

START_TEST(refusals)
{
    refused((entry[]){{"../x", AE_IFREG, "x"}}, 1, 1000, "'../x' is not a name inside");
    refused((entry[]){{"/tmp/x", AE_IFREG, "x"}}, 1, 1000, "'/tmp/x' is an absolute path");
    refused((entry[]){{"l", AE_IFLNK, "../x"}}, 1, 1000, "link 'l' points outside");
    refused((entry[]){{"l", AE_IFLNK, "/etc"}}, 1, 1000, "link 'l' points outside");
    refused((entry[]){{"d", AE_IFDIR, NULL}, {"l", AE_IFLNK, "d"}, {"l/x", AE_IFREG, "x"}}, 3, 1000,
            "'l/x' passes through 'l', which is a link");
    refused((entry[]){{"f", AE_IFREG, "x"}, {"f/x", AE_IFREG, "x"}}, 2, 1000, "passes through 'f', which is a file");
    refused((entry[]){{"h", 0, "../x"}}, 1, 1000, "hard link 'h' points outside");
    refused((entry[]){{"h", 0, "missing"}}, 1, 1000, "not a file unpacked before it");
    refused((entry[]){{"n", AE_IFCHR, NULL}}, 1, 1000, "'n' is a character device");
    refused((entry[]){{"p", AE_IFIFO, NULL}}, 1, 1000, "'p' is a FIFO");
    refused((entry[]){{"f", AE_IFREG, "x"}, {"f", AE_IFREG, "y"}}, 2, 1000, "'f' is given twice");
    refused((entry[]){{"a", AE_IFREG, "12345"}, {"b", AE_IFREG, "67890"}}, 2, 8,
            "'b' (5 bytes) would take the unpacked size past 8 bytes");
}
END_TEST

START_TEST(not_an_archive)
{
    snprintf(dir, sizeof dir, "/tmp/tfcore-archive-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    archive_limits lim = {.max_bytes = 1000, .max_entries = 10};
    tf_error err = {0};
    static const char junk[] = "this is not an archive of any kind, only some words";
    ck_assert_int_eq(archive_extract_memory(junk, sizeof junk, "junk.bin", dir, &lim, &err), TF_ERR_DATA);
    ck_assert_ptr_nonnull(strstr(err.msg, "junk.bin: not a readable archive"));
    done();
}
END_TEST

START_TEST(limits_from_env)
{
    archive_limits lim;
    tf_error err = {0};
    unsetenv("TFCORE_DATASET_MAX_BYTES");
    unsetenv("TFCORE_DATASET_MAX_ENTRIES");
    ck_assert_int_eq(archive_limits_from_env(&lim, &err), TF_OK);
    ck_assert_uint_eq(lim.max_bytes, 4000000000ULL);
    ck_assert_uint_eq(lim.max_entries, 1000000);
    setenv("TFCORE_DATASET_MAX_BYTES", "123", 1);
    ck_assert_int_eq(archive_limits_from_env(&lim, &err), TF_OK);
    ck_assert_uint_eq(lim.max_bytes, 123);
    setenv("TFCORE_DATASET_MAX_ENTRIES", "-1", 1);
    ck_assert_int_eq(archive_limits_from_env(&lim, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "TFCORE_DATASET_MAX_ENTRIES='-1'"));
    unsetenv("TFCORE_DATASET_MAX_BYTES");
    unsetenv("TFCORE_DATASET_MAX_ENTRIES");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("archive_extract");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, names);
    tcase_add_test(tc, link_targets);
    tcase_add_test(tc, links_inside_are_kept);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, not_an_archive);
    tcase_add_test(tc, limits_from_env);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
