/* test_cli_launch.c — what the tfcore command tells the launcher
 * (core/cli/cli_launch.c, compiled into this test): the program worker
 * processes re-execute (this executable), the verb's command line, and the
 * CPU config suggested to a machine that cannot run the config. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_launch.h"

static char dir[64];

static void touch(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

static void remove_file(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/tfcore-cli-launch-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    const char *names[] = {"gpu.cfg", "cpu_b.cfg", "cpu_a.cfg", "quickstart.cfg", "cpu_notes.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) remove_file(names[i]);
    rmdir(dir);
}

/* err's message after the hint for config file `name` of dir */
static const char *hint(const char *name, tf_error *err)
{
    static char config[256];
    snprintf(config, sizeof config, "%s/%s", dir, name);
    tf_error_set(err, TF_ERR_CONFIG, "no GPU");
    tf_cli_hint_cpu_config(config, err);
    return err->msg;
}

START_TEST(test_hint_prefers_cpu_configs)
{
    tf_error err;
    char want[256];
    touch("gpu.cfg");
    ck_assert_str_eq(hint("gpu.cfg", &err), "no GPU"); /* nothing runs on the CPU here */
    touch("quickstart.cfg");
    touch("cpu_notes.txt");
    snprintf(want, sizeof want, "no GPU; on this machine run %s/quickstart.cfg instead", dir);
    ck_assert_str_eq(hint("gpu.cfg", &err), want);
    touch("cpu_b.cfg");
    touch("cpu_a.cfg");
    snprintf(want, sizeof want, "no GPU; on this machine run %s/cpu_a.cfg instead", dir);
    ck_assert_str_eq(hint("gpu.cfg", &err), want);
    ck_assert_str_eq(hint("cpu_a.cfg", &err), "no GPU"); /* never itself */
    /* a folder that does not exist: no advice, no error */
    tf_error_set(&err, TF_ERR_CONFIG, "no GPU");
    tf_cli_hint_cpu_config("/nonexistent-tfcore-dir/x.cfg", &err);
    ck_assert_str_eq(err.msg, "no GPU");
}
END_TEST

START_TEST(test_command_is_this_program_and_the_verb)
{
    char *argv[] = {"eval", "-c", "x.cfg", NULL};
    tf_launch_cmd cmd = tf_cli_launch_cmd(3, argv);
    ck_assert_int_eq(cmd.argc, 3);
    ck_assert_ptr_eq(cmd.argv, argv);
    ck_assert_ptr_eq(cmd.short_of_devices, tf_cli_hint_cpu_config);
    char exe[PATH_MAX], self[PATH_MAX];
    tf_error err = {0};
    ck_assert_int_eq(cmd.program(exe, sizeof exe, &err), TF_OK);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    ck_assert_str_eq(exe, self);
    /* too small a buffer is an error naming the executable, not a cut path */
    char tiny[4];
    ck_assert_int_eq(cmd.program(tiny, sizeof tiny, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot find the tfcore executable (/proc/self/exe)"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli launch");
    TCase *tc = tcase_create("launch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hint_prefers_cpu_configs);
    tcase_add_test(tc, test_command_is_this_program_and_the_verb);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
