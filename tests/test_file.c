/* test_file.c — tfcore/file.h's folder helpers and the atomic write's
 * handling of non-regular targets: tf_file_remove_tree never follows a link,
 * tf_file_replace_dir never loses the old folder (a failing rename is
 * injected), tf_file_tidy_dir restores or removes what an interrupted one
 * left, and tf_file_write_atomic writes through a FIFO or device, replaces a
 * link's target, and refuses a folder. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tfcore/file.h"

/* ---- fault injection: this rename replaces libc's for libtfcore too ------ */

static const char *fail_rename_to; /* rename(.., new) fails with EXDEV when new equals it */

int rename(const char *oldpath, const char *newpath)
{
    if (fail_rename_to && strcmp(newpath, fail_rename_to) == 0) {
        errno = EXDEV;
        return -1;
    }
    return (int)syscall(SYS_renameat2, AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

static char root[64];

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/tfcore-test-file-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    fail_rename_to = NULL;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *at(const char *rel)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
    return buf[k];
}

static void put(const char *rel, const char *text)
{
    FILE *f = fopen(at(rel), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static bool has(const char *rel, const char *text)
{
    char got[256] = "";
    FILE *f = fopen(at(rel), "r");
    if (!f) return false;
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    return strcmp(got, text) == 0;
}

static bool exists(const char *rel)
{
    struct stat sb;
    return lstat(at(rel), &sb) == 0;
}

START_TEST(remove_tree_never_follows_links)
{
    tf_error err = {0};
    ck_assert_int_eq(mkdir(at("outside"), 0777), 0);
    put("outside/keep", "k");
    ck_assert_int_eq(mkdir(at("tree"), 0777), 0);
    ck_assert_int_eq(mkdir(at("tree/sub"), 0777), 0);
    put("tree/sub/f", "x");
    ck_assert_int_eq(symlink(at("outside"), at("tree/sub/link")), 0);
    ck_assert_int_eq(symlink(at("outside/keep"), at("tree/filelink")), 0);
    ck_assert_int_eq(tf_file_remove_tree(at("tree"), &err), TF_OK);
    ck_assert(!exists("tree"));
    ck_assert(has("outside/keep", "k"));
    /* the path itself a link to a folder: the link goes, never the folder's content */
    ck_assert_int_eq(symlink(at("outside"), at("top")), 0);
    ck_assert_int_eq(tf_file_remove_tree(at("top"), &err), TF_OK);
    ck_assert(!exists("top"));
    ck_assert(has("outside/keep", "k"));
    ck_assert_int_eq(symlink(at("outside"), at("slash")), 0); /* "slash/" still names the link */
    char with_slash[300];
    snprintf(with_slash, sizeof with_slash, "%s/", at("slash"));
    ck_assert_int_eq(tf_file_remove_tree(with_slash, &err), TF_OK);
    ck_assert(!exists("slash"));
    ck_assert(has("outside/keep", "k"));
    ck_assert_int_eq(tf_file_remove_tree(at("missing"), &err), TF_OK);
    /* nothing left beside: no .NAME.deleting-<pid> folder */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep -v '^outside$')\"", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(replace_dir_keeps_the_old_one_until_the_new_one_is_in)
{
    tf_error err = {0};
    ck_assert_int_eq(mkdir(at("ck"), 0777), 0);
    put("ck/state", "old");
    ck_assert_int_eq(mkdir(at("ck.tmp"), 0777), 0);
    put("ck.tmp/state", "new");
    /* the rename of the new one fails: the old one is back in place, the new one stays */
    static char ck[256];
    snprintf(ck, sizeof ck, "%s/ck", root);
    fail_rename_to = ck;
    ck_assert_int_eq(tf_file_replace_dir(at("ck.tmp"), at("ck"), &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "cannot rename ") && strstr(err.msg, "Invalid cross-device link"), "%s", err.msg);
    ck_assert(has("ck/state", "old"));
    ck_assert(has("ck.tmp/state", "new"));
    fail_rename_to = NULL;
    ck_assert_int_eq(tf_file_replace_dir(at("ck.tmp"), at("ck"), &err), TF_OK);
    ck_assert(has("ck/state", "new"));
    ck_assert(!exists("ck.tmp"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s')\" = ck", root);
    ck_assert_int_eq(system(cmd), 0);
    /* no old one: a plain rename */
    ck_assert_int_eq(mkdir(at("fresh.tmp"), 0777), 0);
    ck_assert_int_eq(tf_file_replace_dir(at("fresh.tmp"), at("fresh"), &err), TF_OK);
    ck_assert(exists("fresh") && !exists("fresh.tmp"));
}
END_TEST

START_TEST(tidy_restores_or_removes_asides)
{
    tf_error err = {0};
    ck_assert_int_eq(mkdir(at(".gone.replaced-12"), 0777), 0); /* its replacement never got in */
    put(".gone.replaced-12/state", "old");
    ck_assert_int_eq(mkdir(at("there"), 0777), 0);             /* its replacement is in */
    ck_assert_int_eq(mkdir(at(".there.replaced-12"), 0777), 0);
    ck_assert_int_eq(mkdir(at(".half.deleting-12"), 0777), 0);
    put(".half.deleting-12/f", "x");
    ck_assert_int_eq(mkdir(at(".keep.replaced-x1"), 0777), 0); /* not ours: no pid */
    int n = -1;
    ck_assert_int_eq(tf_file_tidy_dir(root, &n, &err), TF_OK);
    ck_assert_int_eq(n, 3);
    ck_assert(has("gone/state", "old"));
    ck_assert(exists("there") && !exists(".there.replaced-12") && !exists(".half.deleting-12"));
    ck_assert(exists(".keep.replaced-x1"));
}
END_TEST

START_TEST(write_atomic_never_replaces_a_non_regular_file)
{
    tf_error err = {0};
    /* a link to a regular file: the target is replaced, the link stays */
    put("real", "old");
    ck_assert_int_eq(symlink(at("real"), at("link")), 0);
    ck_assert_int_eq(tf_file_write_text_atomic(at("link"), "new", &err), TF_OK);
    struct stat sb;
    ck_assert_int_eq(lstat(at("link"), &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert(has("real", "new"));
    /* a FIFO is written through */
    ck_assert_int_eq(mkfifo(at("fifo"), 0666), 0);
    int r = open(at("fifo"), O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(r, 0);
    ck_assert_int_eq(tf_file_write_text_atomic(at("fifo"), "through", &err), TF_OK);
    char got[16] = "";
    ck_assert_int_eq(read(r, got, sizeof got - 1), 7);
    ck_assert_str_eq(got, "through");
    close(r);
    ck_assert_int_eq(lstat(at("fifo"), &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
    /* a character device (a copy of /dev/null; mknod needs root) */
    if (mknod(at("null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        ck_assert_int_eq(tf_file_write_text_atomic(at("null"), "gone", &err), TF_OK);
        ck_assert_int_eq(lstat(at("null"), &sb), 0);
        ck_assert(S_ISCHR(sb.st_mode));
    }
    /* a folder and a dangling link are refused */
    ck_assert_int_eq(mkdir(at("dir"), 0777), 0);
    ck_assert_int_eq(tf_file_write_text_atomic(at("dir"), "x", &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "it is a folder; not replacing it"), "%s", err.msg);
    ck_assert_int_eq(symlink(at("nowhere"), at("dangling")), 0);
    ck_assert_int_eq(tf_file_write_text_atomic(at("dangling"), "x", &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "symbolic link to a missing file"), "%s", err.msg);
    ck_assert(!exists("nowhere"));
    /* the rename over a regular file fails: the old content stays, no temporary file is left */
    static char target[256];
    snprintf(target, sizeof target, "%s/real", root);
    fail_rename_to = target;
    ck_assert_int_eq(tf_file_write_text_atomic(target, "newer", &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "cannot rename") && strstr(err.msg, "Invalid cross-device link"), "%s", err.msg);
    fail_rename_to = NULL;
    ck_assert(has("real", "new"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' | grep -F .tmp.)\"", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("file");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, remove_tree_never_follows_links);
    tcase_add_test(tc, replace_dir_keeps_the_old_one_until_the_new_one_is_in);
    tcase_add_test(tc, tidy_restores_or_removes_asides);
    tcase_add_test(tc, write_atomic_never_replaces_a_non_regular_file);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
