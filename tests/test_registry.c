/* test_registry.c — the plugin loader: every rejection path of docs/PLUGINS.md,
 * each with a real plugin built from tests/plugins/test_plugin.c, plus
 * discovery order, duplicates, and the error a config gets for a missing,
 * rejected or unusable plugin. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "search_path.h"

static char plugin_dir[4096];

static void find_plugin_dir(void)
{
    const char *b = getenv("top_builddir");
    snprintf(plugin_dir, sizeof plugin_dir, "%s/tests/plugins/.libs", b ? b : ".");
}

static tf_registry *scan1(const char *dir)
{
    tf_registry *reg = NULL;
    tf_error err = {0};
    const char *dirs[] = {dir};
    ck_assert_int_eq(tf_registry_scan(&reg, dirs, 1, &err), TF_OK);
    return reg;
}

/* The rejection line for file tfcore-model-<name>.so, or NULL. */
static const char *rejection(const tf_registry *reg, const char *name)
{
    char file[128];
    snprintf(file, sizeof file, "/tfcore-model-%s.so", name);
    for (size_t i = 0; i < reg->nrejected; i++) {
        const char *p = reg->rejected[i].path;
        size_t lp = strlen(p), lf = strlen(file);
        if (lp >= lf && strcmp(p + lp - lf, file) == 0) return reg->rejected[i].why;
    }
    return NULL;
}

#define ASSERT_REJECTED(reg, name, fragment)                                                  \
    do {                                                                                      \
        const char *why_ = rejection(reg, name);                                              \
        ck_assert_msg(why_ != NULL, "tfcore-model-%s.so was not rejected", name);            \
        ck_assert_msg(strstr(why_, fragment) != NULL, "rejection of %s: '%s' lacks '%s'", name, \
                      why_, fragment);                                                        \
        ck_assert_msg(strstr(why_, "tfcore-model-" name ".so: ") != NULL,                     \
                      "rejection does not start with the path: '%s'", why_);                  \
        ck_assert_msg(tf_registry_find(reg, TF_KIND_MODEL, name) == NULL, "%s was accepted", name); \
    } while (0)

START_TEST(test_good_plugin_found)
{
    tf_registry *reg = scan1(plugin_dir);
    const tf_loaded_plugin *p = tf_registry_find(reg, TF_KIND_MODEL, "good");
    ck_assert_ptr_nonnull(p);
    ck_assert(p->usable);
    ck_assert_str_eq(p->desc->version, "0.0.1");
    ck_assert_uint_eq(p->desc->abi_major, TF_ABI_MAJOR);
    ck_assert_uint_eq(p->desc->struct_size, sizeof(tf_plugin));
    ck_assert_ptr_nonnull(strstr(p->path, "tfcore-model-good.so"));
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_rejections)
{
    tf_registry *reg = scan1(plugin_dir);
    ASSERT_REJECTED(reg, "badmagic", "bad magic 0xdeadbeef, expected 0x31504654 ('TFP1')");
    char want[160]; /* the versions follow TF_ABI_MINOR: the test plugins are built with it */
    snprintf(want, sizeof want, "built for plugin ABI 2.%d, this tfcore has ABI 1.%d (majors differ", TF_ABI_MINOR,
             TF_ABI_MINOR);
    ASSERT_REJECTED(reg, "othermajor", want);
    snprintf(want, sizeof want, "built for plugin ABI 1.%d, newer than this tfcore's 1.%d", TF_ABI_MINOR + 7,
             TF_ABI_MINOR);
    ASSERT_REJECTED(reg, "newerminor", want);
    ASSERT_REJECTED(reg, "shortstruct", "descriptor struct_size is 16 bytes, ABI 1.0 needs at least");
    ASSERT_REJECTED(reg, "unknownkind", "unknown kind 9, expected 1..5");
    ASSERT_REJECTED(reg, "badname", "invalid plugin name 'Bad_Name' (must match [a-z0-9-]{1,31})");
    ASSERT_REJECTED(reg, "misnamed",
                    "it says it is model 'other', so its file must be named tfcore-model-other.so");
    ASSERT_REJECTED(reg, "noentry", "no 'tfcore_plugin_entry' symbol");
    ASSERT_REJECTED(reg, "unresolved", "cannot load:");
    ASSERT_REJECTED(reg, "unresolved", "tf_test_symbol_that_does_not_exist");
    ASSERT_REJECTED(reg, "shortvtable", "model vtable is 8 bytes, ABI 1.0 needs at least");
    ASSERT_REJECTED(reg, "nullslot", "required model vtable slot 'forward' is NULL");
    ck_assert_uint_eq(reg->nrejected, 11);
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_probe_says_no)
{
    tf_registry *reg = scan1(plugin_dir);
    const tf_loaded_plugin *p = tf_registry_find(reg, TF_KIND_MODEL, "probeno");
    ck_assert_ptr_nonnull(p);
    ck_assert(!p->usable);
    ck_assert_str_eq(p->why, "test plugin: no such device here");
    tf_error err = {0};
    const tf_loaded_plugin *got;
    ck_assert_int_eq(tf_registry_require(reg, TF_KIND_MODEL, "probeno", "a.cfg:3", &got, &err),
                     TF_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(err.msg, "a.cfg:3: model plugin 'probeno' cannot run here: "
                                          "test plugin: no such device here"));
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_duplicate_first_wins)
{
    /* The same plugin in a second folder: the first folder's copy wins, the
     * second is rejected as a duplicate naming the first. */
    char tmp[] = "/tmp/tfcore-test-dupXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    char src[4200], dst[4200], cmd[9000];
    snprintf(src, sizeof src, "%s/tfcore-model-good.so", plugin_dir);
    snprintf(dst, sizeof dst, "%s/tfcore-model-good.so", tmp);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    ck_assert_int_eq(system(cmd), 0);
    tf_registry *reg = NULL;
    tf_error err = {0};
    const char *dirs[] = {tmp, plugin_dir};
    ck_assert_int_eq(tf_registry_scan(&reg, dirs, 2, &err), TF_OK);
    const tf_loaded_plugin *p = tf_registry_find(reg, TF_KIND_MODEL, "good");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->path, dst);
    const char *why = rejection(reg, "good");
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_nonnull(strstr(why, "duplicate model 'good': already found at "));
    ck_assert_ptr_nonnull(strstr(why, tmp));
    tf_registry_free(reg);
    unlink(dst);
    rmdir(tmp);
}
END_TEST

START_TEST(test_require_missing_lists_what_exists)
{
    tf_registry *reg = scan1(plugin_dir);
    tf_error err = {0};
    const tf_loaded_plugin *got;
    ck_assert_int_eq(tf_registry_require(reg, TF_KIND_MODEL, "goood", "x.cfg:2", &got, &err),
                     TF_ERR_PLUGIN);
    ck_assert_ptr_null(got);
    ck_assert_ptr_nonnull(strstr(err.msg, "x.cfg:2: no model plugin named 'goood' (did you mean 'good'?)"));
    ck_assert_ptr_nonnull(strstr(err.msg, "model plugins found: good, probeno"));
    ck_assert_ptr_nonnull(strstr(err.msg, "searched "));
    ck_assert_ptr_nonnull(strstr(err.msg, plugin_dir));
    /* a kind with nothing found */
    ck_assert_int_eq(tf_registry_require(reg, TF_KIND_COMM, "nccl", NULL, &got, &err), TF_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(err.msg, "no comm plugin named 'nccl'; comm plugins found: none"));
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_require_rejected_says_why)
{
    tf_registry *reg = scan1(plugin_dir);
    tf_error err = {0};
    const tf_loaded_plugin *got;
    ck_assert_int_eq(tf_registry_require(reg, TF_KIND_MODEL, "nullslot", "c.cfg:9", &got, &err),
                     TF_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(err.msg, "c.cfg:9: model plugin 'nullslot' was rejected: "));
    ck_assert_ptr_nonnull(strstr(err.msg, "required model vtable slot 'forward' is NULL"));
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_missing_dir_is_searched_not_fatal)
{
    tf_registry *reg = scan1("/nonexistent/tfcore/plugins");
    ck_assert_uint_eq(reg->nfound, 0);
    ck_assert_uint_eq(reg->nsearched, 1);
    ck_assert_str_eq(reg->searched[0], "/nonexistent/tfcore/plugins");
    tf_registry_free(reg);
}
END_TEST

START_TEST(test_name_rules)
{
    ck_assert(tf_plugin_name_valid("cpu"));
    ck_assert(tf_plugin_name_valid("dp-master"));
    ck_assert(tf_plugin_name_valid("a"));
    ck_assert(tf_plugin_name_valid("abcdefghijklmnopqrstuvwxyz01234")); /* 31 */
    ck_assert(!tf_plugin_name_valid("abcdefghijklmnopqrstuvwxyz012345")); /* 32 */
    ck_assert(!tf_plugin_name_valid(""));
    ck_assert(!tf_plugin_name_valid(NULL));
    ck_assert(!tf_plugin_name_valid("Cpu"));
    ck_assert(!tf_plugin_name_valid("dp_master"));
    ck_assert(!tf_plugin_name_valid("a.b"));
}
END_TEST

START_TEST(test_vtable_check_direct)
{
    char why[256];
    ck_assert(!tf_vtable_check(TF_KIND_BACKEND, NULL, why, sizeof why));
    ck_assert_str_eq(why, "the descriptor's vtable is NULL");
    struct { uint32_t size; } tiny = {4};
    ck_assert(!tf_vtable_check(TF_KIND_PRECISION, &tiny, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "precision vtable is 4 bytes"));
    ck_assert_uint_gt(tf_vtable_min_size(TF_KIND_BACKEND), tf_vtable_min_size(TF_KIND_MODEL));
    ck_assert_uint_eq(tf_vtable_min_size(0), 0);
}
END_TEST

START_TEST(test_search_path_order)
{
    setenv("TFCORE_PLUGIN_PATH", "/env/a::/env/b:/cfg/x", 1);
    tf_search_path sp;
    tf_error err = {0};
    ck_assert_int_eq(tf_search_path_build(&sp, "/cfg/x:/cfg/y", NULL, &err), TF_OK);
    /* config first, then env (duplicates and empty entries dropped), then installed */
    ck_assert_uint_eq(sp.n, 5);
    ck_assert_str_eq(sp.dirs[0], "/cfg/x");
    ck_assert_str_eq(sp.dirs[1], "/cfg/y");
    ck_assert_str_eq(sp.dirs[2], "/env/a");
    ck_assert_str_eq(sp.dirs[3], "/env/b");
    ck_assert_str_eq(sp.dirs[4], tf_installed_plugin_dir());
    tf_search_path_free(&sp);
    unsetenv("TFCORE_PLUGIN_PATH");
}
END_TEST

/* Step 3: the folders beside the loaded libtfcore, derived from where the
 * library is and not from any path compiled in. */
START_TEST(test_search_path_beside_library)
{
    char tmpl[] = "/tmp/tfcore-sp-XXXXXX", path[4200], lib[4200];
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    const char *made[] = {"/core", "/core/.libs", "/plugins", "/plugins/a", "/plugins/a/.libs",
                          "/plugins/b", "/plugins/b/.libs", "/plugins/c"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        snprintf(path, sizeof path, "%s%s", tmpl, made[i]);
        ck_assert_int_eq(mkdir(path, 0700), 0);
    }
    unsetenv("TFCORE_PLUGIN_PATH");
    tf_search_path sp;
    tf_error err = {0};
    /* a build tree (or a bundle shaped like one): every plugins/x/.libs, in order */
    snprintf(lib, sizeof lib, "%s/core/.libs", tmpl);
    ck_assert_int_eq(tf_search_path_build(&sp, "/cfg", lib, &err), TF_OK);
    ck_assert_uint_eq(sp.n, 5);
    ck_assert_str_eq(sp.dirs[0], "/cfg");
    snprintf(path, sizeof path, "%s/plugins/a/.libs", tmpl);
    ck_assert_str_eq(sp.dirs[1], path);
    snprintf(path, sizeof path, "%s/plugins/b/.libs", tmpl);
    ck_assert_str_eq(sp.dirs[2], path);
    snprintf(path, sizeof path, "%s/core/.libs/tfcore/plugins", tmpl);
    ck_assert_str_eq(sp.dirs[3], path);
    ck_assert_str_eq(sp.dirs[4], tf_installed_plugin_dir());
    tf_search_path_free(&sp);
    /* an installed tree moved anywhere: LIBDIR/tfcore/plugins */
    ck_assert_int_eq(tf_search_path_build(&sp, NULL, "/moved/prefix/lib", &err), TF_OK);
    ck_assert_uint_eq(sp.n, 2);
    ck_assert_str_eq(sp.dirs[0], "/moved/prefix/lib/tfcore/plugins");
    ck_assert_str_eq(sp.dirs[1], tf_installed_plugin_dir());
    tf_search_path_free(&sp);
    const char *gone[] = {"/plugins/c", "/plugins/b/.libs", "/plugins/b", "/plugins/a/.libs",
                          "/plugins/a", "/plugins", "/core/.libs", "/core", ""};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
        snprintf(path, sizeof path, "%s%s", tmpl, gone[i]);
        ck_assert_int_eq(rmdir(path), 0);
    }
}
END_TEST

/* This test links the build tree's libtfcore: the loader says where it is. */
START_TEST(test_libtfcore_dir_is_where_loaded)
{
    char dir[4096];
    ck_assert(tf_libtfcore_dir(dir, sizeof dir));
    ck_assert_msg(strstr(dir, "/core/.libs") != NULL, "libtfcore loaded from '%s'", dir);
    char small[4];
    ck_assert(!tf_libtfcore_dir(small, sizeof small));
    ck_assert_str_eq(small, "");
}
END_TEST

int main(void)
{
    find_plugin_dir();
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, test_good_plugin_found);
    tcase_add_test(tc, test_rejections);
    tcase_add_test(tc, test_probe_says_no);
    tcase_add_test(tc, test_duplicate_first_wins);
    tcase_add_test(tc, test_require_missing_lists_what_exists);
    tcase_add_test(tc, test_require_rejected_says_why);
    tcase_add_test(tc, test_missing_dir_is_searched_not_fatal);
    tcase_add_test(tc, test_name_rules);
    tcase_add_test(tc, test_vtable_check_direct);
    tcase_add_test(tc, test_search_path_order);
    tcase_add_test(tc, test_search_path_beside_library);
    tcase_add_test(tc, test_libtfcore_dir_is_where_loaded);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
