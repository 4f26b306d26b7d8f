/* test_backend_cpu_threads.c — who decides backend-cpu's thread team: the
 * core's explicit open_args.threads, else the config's backend.threads, else
 * the plugin itself, from open_args.local_world_size (ABI 1.4: the job's
 * workers on this machine, each getting its share of the online cores) or,
 * for one worker, OpenMP's count. The core never reads backend.threads. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu.h"
#include "host_blas.h"
#include "tfcore/backend.h"
#include "tfcore/config.h"
#include "tfcore/plugin.h"

/* Defined by TF_PLUGIN_DEFINE in backend.c, compiled into this program. */
const tf_plugin *tfcore_plugin_entry(void);

static const tf_backend_vtable *vt;
static tf_error err;

static void setup(void) { vt = tfcore_plugin_entry()->vtable; }

/* The team of a backend opened with a; the backend is closed again. */
static int team(const tf_backend_open_args *a)
{
    tf_backend *b = NULL;
    ck_assert_msg(vt->open(a, &b, &err) == TF_OK, "open: %s", err.msg);
    int n = b->threads;
    vt->close(b);
    return n;
}

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

START_TEST(test_share_of_the_cores)
{
    int alone = team(&(tf_backend_open_args){.size = sizeof(tf_backend_open_args), .local_world_size = 1});
    ck_assert_int_ge(alone, 1);
    ck_assert_int_eq(team(&(tf_backend_open_args){.size = sizeof(tf_backend_open_args), .local_world_size = 0}),
                     alone);
    for (int w = 2; w <= 3; w++) {
        int share = cores() / w;
        ck_assert_int_eq(team(&(tf_backend_open_args){.size = sizeof(tf_backend_open_args), .local_world_size = w}),
                         share < 1 ? 1 : share);
    }
    /* more workers than cores: one thread each */
    ck_assert_int_eq(
        team(&(tf_backend_open_args){.size = sizeof(tf_backend_open_args), .local_world_size = 4 * cores()}), 1);
}
END_TEST

START_TEST(test_config_and_core_win)
{
    tf_config *cfg = NULL;
    ck_assert_int_eq(tf_config_load_string(&cfg, "backend = { plugin = \"cpu\"; threads = 3; };", "t.cfg", NULL, &err),
                     TF_OK);
    tf_backend_open_args a = {.size = sizeof a, .section = tf_config_section(cfg, "backend"), .local_world_size = 8};
    ck_assert_int_eq(team(&a), 3); /* the config's number, not a share */
    a.threads = 5;                 /* the core's explicit number over both */
    ck_assert_int_eq(team(&a), 5);
    tf_config_free(cfg);
}
END_TEST

START_TEST(test_args_of_an_older_core)
{
    tf_backend_open_args alone = {.size = sizeof alone, .local_world_size = 1};
    /* a 1.3 core's args end before local_world_size: whatever lies there is
     * not read, and the backend runs as a single worker */
    tf_backend_open_args old = {.size = (uint32_t)offsetof(tf_backend_open_args, local_world_size),
                                .local_world_size = 4 * cores()};
    ck_assert_int_eq(team(&old), team(&alone));
}
END_TEST

int main(void)
{
    tf_host_blas_reexec(NULL); /* OpenBLAS's kernels as tfcore's own processes get them */
    Suite *s = suite_create("backend-cpu threads");
    TCase *tc = tcase_create("threads");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_share_of_the_cores);
    tcase_add_test(tc, test_config_and_core_win);
    tcase_add_test(tc, test_args_of_an_older_core);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
