/* test_comm_mpi_config.c — the comm-mpi plugin through the real loader,
 * without mpirun: descriptor and probe, check_config (every key, every bad
 * value naming file:line or the -o override), and init's checks that come
 * before MPI starts. The collectives are tests/test_comm_mpi.sh's. */
#include "common.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"

static tf_registry *reg;
static const tf_loaded_plugin *plugin;
static const tf_comm_vtable *vt;

static void load(void)
{
    const char *rel[] = {"plugins/comm-mpi"};
    tf_error err = {0};
    ck_assert_msg(tf_test_registry(&reg, rel, 1, &err) == TF_OK, "%s", err.msg);
    plugin = tf_test_plugin(reg, TF_KIND_COMM, "mpi", &err);
    ck_assert_msg(plugin != NULL, "%s", err.msg);
    vt = plugin->desc->vtable;
}

static void unload(void)
{
    tf_registry_free(reg);
    reg = NULL;
}

/* check_config on `text` (a whole config) and optionally one -o override. */
static tf_status check_text(const char *text, const char *override, tf_config **cfg, tf_error *err)
{
    ck_assert_int_eq(tf_config_load_string(cfg, text, "t.cfg", NULL, err), TF_OK);
    if (override) ck_assert_int_eq(tf_config_override(*cfg, override, err), TF_OK);
    return vt->check_config(tf_config_section(*cfg, "comm"), err);
}

START_TEST(test_descriptor)
{
    ck_assert(plugin->usable);
    ck_assert_str_eq(plugin->desc->name, "mpi");
    ck_assert_uint_eq(plugin->desc->kind, TF_KIND_COMM);
    ck_assert_ptr_nonnull(strstr(plugin->path, "tfcore-comm-mpi.so"));
    ck_assert_int_eq(vt->launch_mode(), TF_LAUNCH_EXTERNAL);
    ck_assert(!vt->optimizer_on_root_only());
    ck_assert(TF_HAS(vt, abort));
    char why[256] = "";
    ck_assert_int_eq(plugin->desc->probe(why, sizeof why), 1);
}
END_TEST

/* Every key read: nothing left for tf_config_check_unread to complain about. */
START_TEST(test_all_keys_read)
{
    tf_config *cfg;
    tf_error err = {0};
    ck_assert_int_eq(check_text("comm = {\n  device_buffers = \"staged\";\n  progress_thread = false;\n"
                                "  progress_interval_us = 200;\n  chunk_elements = 1000;\n};\n",
                                NULL, &cfg, &err),
                     TF_OK);
    ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_OK);
    tf_config_free(cfg);
}
END_TEST

/* The core's keys are not the plugin's business: neither read nor refused. */
START_TEST(test_core_keys_left_alone)
{
    tf_config *cfg;
    tf_error err = {0};
    ck_assert_int_eq(check_text("comm = { plugin = \"mpi\"; world_size = 4; bucket_mb = 25.0;\n"
                                "  mpirun_args = \"--hostfile h\"; };\n",
                                NULL, &cfg, &err),
                     TF_OK);
    ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "comm.plugin"));
    tf_config_free(cfg);
    /* timeout_s too, even out of the core's bounds: one owner, the core */
    ck_assert_int_eq(check_text("comm = { timeout_s = 0.0; };\n", NULL, &cfg, &err), TF_OK);
    ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "comm.timeout_s"));
    tf_config_free(cfg);
}
END_TEST

START_TEST(test_empty_section_defaults)
{
    tf_config *cfg;
    tf_error err = {0};
    ck_assert_int_eq(check_text("", NULL, &cfg, &err), TF_OK);
    tf_config_free(cfg);
}
END_TEST

static const struct {
    const char *text, *override, *want;
} bad[] = {
    {"comm = {\n  device_buffers = \"gpu\";\n};\n", NULL,
     "t.cfg:2: comm.device_buffers must be one of auto, cuda-aware, staged; got 'gpu'"},
    {"comm = {\n  plugin = \"mpi\";\n  device_buffers = \"stagd\";\n};\n", NULL,
     "t.cfg:3: comm.device_buffers must be one of auto, cuda-aware, staged; got 'stagd' (did you "
     "mean 'staged'?)"},
    {"comm = {\n  device_buffers = 1;\n};\n", NULL, "t.cfg:2: comm.device_buffers must be"},
    {"comm = {\n  progress_thread = 3;\n};\n", NULL, "t.cfg:2: comm.progress_thread must be"},
    {"comm = {\n\n  progress_interval_us = 0;\n};\n", NULL,
     "t.cfg:3: comm.progress_interval_us must be in [1, 1000000], got 0"},
    {"comm = {\n  chunk_elements = 0;\n};\n", NULL,
     "t.cfg:2: comm.chunk_elements must be in [1, 2147483647], got 0"},
    {"comm = {\n  chunk_elements = 3000000000L;\n};\n", NULL,
     "t.cfg:2: comm.chunk_elements must be in [1, 2147483647], got 3000000000"},
    {"comm = { device_buffers = \"auto\"; };\n", "comm.device_buffers=gpu",
     "-o comm.device_buffers=gpu: comm.device_buffers must be one of auto, cuda-aware, staged"},
};

START_TEST(test_bad_values)
{
    tf_config *cfg;
    tf_error err = {0};
    tf_status st = check_text(bad[_i].text, bad[_i].override, &cfg, &err);
    ck_assert_int_eq(st, TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, bad[_i].want) != NULL, "got '%s', expected '%s'", err.msg,
                  bad[_i].want);
    tf_config_free(cfg);
}
END_TEST

/* init refuses bad arguments and bad keys before it starts MPI. */
START_TEST(test_init_argument_checks)
{
    tf_config *cfg;
    tf_error err = {0};
    ck_assert_int_eq(tf_config_load_string(&cfg, "comm = { device_buffers = \"gpu\"; };\n", "t.cfg",
                                           NULL, &err),
                     TF_OK);
    tf_comm *c = (tf_comm *)&err;
    int dummy_backend;
    tf_backend_vtable bvt = {.size = sizeof bvt};
    tf_comm_init_args a = {sizeof a, tf_config_section(cfg, "comm"), 0, 2, 0, &bvt,
                           (tf_backend *)&dummy_backend, NULL, 1, TF_COMM_TIMEOUT_DEFAULT};

    ck_assert_int_eq(vt->init(NULL, &c, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-mpi: init: args is NULL");

    tf_comm_init_args small = a;
    small.size = 8;
    ck_assert_int_eq(vt->init(&small, &c, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "comm-mpi: init: init args are 8 bytes, at least"));
    ck_assert_ptr_null(c);

    tf_comm_init_args nobe = a;
    nobe.backend = NULL;
    ck_assert_int_eq(vt->init(&nobe, &c, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-mpi: init: no backend given");

    tf_comm_init_args far = a;
    far.rank = 2;
    ck_assert_int_eq(vt->init(&far, &c, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-mpi: init: rank 2 of world size 2 is out of range");

    /* comm.timeout_s comes from the core in the args (ABI 1.4), checked */
    tf_comm_init_args never = a;
    never.timeout_s = 0;
    ck_assert_int_eq(vt->init(&never, &c, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-mpi: init: timeout_s 0 is outside [0.1, 604800]");
    ck_assert_ptr_null(c);
    /* a 1.3 core's args end before timeout_s: accepted, with the default
     * (init goes on to the config's bad key) */
    tf_comm_init_args old = never;
    old.size = (uint32_t)offsetof(tf_comm_init_args, timeout_s);
    ck_assert_int_eq(vt->init(&old, &c, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "t.cfg:1: comm.device_buffers must be one of"));

    ck_assert_int_eq(vt->init(&a, &c, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "t.cfg:1: comm.device_buffers must be one of"));
    ck_assert_ptr_null(c);
    tf_config_free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm-mpi config");
    TCase *tc = tcase_create("config");
    tcase_add_unchecked_fixture(tc, load, unload);
    tcase_add_test(tc, test_descriptor);
    tcase_add_test(tc, test_all_keys_read);
    tcase_add_test(tc, test_core_keys_left_alone);
    tcase_add_test(tc, test_empty_section_defaults);
    tcase_add_loop_test(tc, test_bad_values, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, test_init_argument_checks);
    suite_add_tcase(s, tc);
    int failed = tf_test_run(s, false);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
