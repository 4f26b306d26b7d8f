/* test_precision.c — the precision plugins (fp32, tf32, fp16, bf16) as the
 * trainer sees them: loaded through the registry from the build tree, each
 * one's compute dtype and matmul mode, tf32 and bf16 treating gradients
 * exactly as fp32 does, and fp16's loss scaler step by step against
 * torch.cuda.amp.GradScaler's algorithm (growth after growth_interval clean
 * steps, backoff and skip on overflow, no growth to inf, the FLT_MIN clamp),
 * unscale_and_check on backend-cpu (exact 1/scale, inf and NaN found, a
 * stale flag cleared, every failing backend op reported), checkpoint state
 * round trips, and every config error with its file:line. */
#include <float.h>
#include <unistd.h>

#include "common.h"
#include "tfcore/config.h"
#include "tfcore/precision.h"

static tf_registry *reg;
static const tf_precision_vtable *pv_fp32, *pv_tf32, *pv_fp16, *pv_bf16;
static const tf_backend_vtable *cpu_vt; /* NULL when backend-cpu is not built */

/* --- loading ---------------------------------------------------------------- */

/* The vtable of plugin (kind, name), or NULL with the registry's line in err. */
static const void *vtable_of(uint32_t kind, const char *name, tf_error *err)
{
    const tf_loaded_plugin *p = tf_test_plugin(reg, kind, name, err);
    return p ? p->desc->vtable : NULL;
}

static void load_plugins(void)
{
    const char *rel[] = {"plugins/precision-fp32", "plugins/precision-tf32", "plugins/precision-fp16",
                         "plugins/precision-bf16", "plugins/backend-cpu"};
    tf_error err = {0};
    if (tf_test_registry(&reg, rel, TF_TEST_COUNT(rel), &err) != TF_OK ||
        !(pv_fp32 = vtable_of(TF_KIND_PRECISION, "fp32", &err)) ||
        !(pv_tf32 = vtable_of(TF_KIND_PRECISION, "tf32", &err)) ||
        !(pv_fp16 = vtable_of(TF_KIND_PRECISION, "fp16", &err)) ||
        !(pv_bf16 = vtable_of(TF_KIND_PRECISION, "bf16", &err))) {
        fprintf(stderr, "test_precision: %s\n", err.msg);
        exit(EXIT_FAILURE);
    }
    tf_error why = {0};
    cpu_vt = vtable_of(TF_KIND_BACKEND, "cpu", &why);
}

/* --- helpers ---------------------------------------------------------------- */

static tf_config *cfg_of(const char *text)
{
    tf_config *cfg = NULL;
    tf_error err = {0};
    ck_assert_msg(tf_config_load_string(&cfg, text, "test.cfg", NULL, &err) == TF_OK, "%s", err.msg);
    return cfg;
}

/* A plugin instance from a config text ("" for defaults). */
static tf_precision *make(const tf_precision_vtable *vt, const char *text, tf_config **cfg_out)
{
    tf_config *cfg = cfg_of(text);
    tf_precision *p = NULL;
    tf_error err = {0};
    ck_assert_msg(vt->check_config(tf_config_section(cfg, "precision"), &err) == TF_OK, "%s", err.msg);
    ck_assert_msg(vt->create(tf_config_section(cfg, "precision"), &p, &err) == TF_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(p);
    if (cfg_out)
        *cfg_out = cfg;
    else
        tf_config_free(cfg);
    return p;
}

static tf_precision *fp16_with(double init, double growth, double backoff, long long interval)
{
    char text[256];
    snprintf(text, sizeof text,
             "precision = { plugin = \"fp16\"; init_scale = %.17g; growth_factor = %.17g;\n"
             "              backoff_factor = %.17g; growth_interval = %lld; };\n",
             init, growth, backoff, interval);
    return make(pv_fp16, text, NULL);
}

static tf_scaler_state state_of(const tf_precision_vtable *vt, tf_precision *p)
{
    tf_scaler_state s;
    memset(&s, 0xa5, sizeof s);
    vt->get_state(p, &s);
    return s;
}

#define ASSERT_STATE(vt, p, sc, good, skip)                                                       \
    do {                                                                                          \
        tf_scaler_state s_ = state_of(vt, p);                                                     \
        ck_assert_msg(s_.scale == (double)(sc) && s_.good_steps == (good) && s_.skipped_steps == (skip), \
                      "state {%g, %lld, %lld}, expected {%g, %lld, %lld}", s_.scale,              \
                      (long long)s_.good_steps, (long long)s_.skipped_steps, (double)(sc),        \
                      (long long)(good), (long long)(skip));                                      \
        ck_assert_msg((double)(vt)->loss_scale(p) == s_.scale, "loss_scale %g != state %g",       \
                      (double)(vt)->loss_scale(p), s_.scale);                                     \
    } while (0)

/* n clean steps; each must not be skipped. */
static void clean(const tf_precision_vtable *vt, tf_precision *p, int n)
{
    for (int i = 0; i < n; i++) ck_assert_msg(!vt->update(p, false), "clean step %d was skipped", i);
}
static void overflow(const tf_precision_vtable *vt, tf_precision *p, int n)
{
    for (int i = 0; i < n; i++) ck_assert_msg(vt->update(p, true), "overflowing step %d was not skipped", i);
}

/* torch.cuda.amp.GradScaler.update, written from its documented algorithm:
 * a float32 scale and an int growth tracker. */
typedef struct ref_scaler {
    float scale;
    int64_t tracker, skipped;
    double growth, backoff;
    int64_t interval;
} ref_scaler;

static bool ref_update(ref_scaler *r, bool found_inf)
{
    if (found_inf) {
        r->scale = (float)((double)r->scale * r->backoff);
        r->tracker = 0;
        r->skipped++;
        return true;
    }
    int64_t successful = r->tracker + 1;
    if (successful == r->interval) {
        float grown = (float)((double)r->scale * r->growth);
        if (isfinite(grown)) r->scale = grown;
        r->tracker = 0;
    } else {
        r->tracker = successful;
    }
    return false;
}

/* Capture what the plugin logs (tf_log writes to stderr). */
static int saved_fd = -1;
static FILE *captured;
static void capture_start(void)
{
    fflush(stderr);
    captured = tmpfile();
    ck_assert_ptr_nonnull(captured);
    saved_fd = dup(STDERR_FILENO);
    dup2(fileno(captured), STDERR_FILENO);
}
/* Stops capturing; returns how many captured lines contain `needle`. */
static int capture_count(const char *needle)
{
    fflush(stderr);
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    rewind(captured);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, captured)) {
        if (strstr(line, needle)) n++;
        fputs(line, stderr); /* keep it visible in the test log */
    }
    fclose(captured);
    return n;
}

/* --- every plugin: dtype, mode, defaults ------------------------------------- */

START_TEST(test_dtype_and_mode)
{
    struct {
        const tf_precision_vtable *vt;
        const char *name;
        tf_dtype dt;
        tf_matmul_mode mm;
        float scale;
    } c[] = {
        {pv_fp32, "fp32", TF_DTYPE_F32, TF_MATMUL_FP32, 1.0f},
        {pv_tf32, "tf32", TF_DTYPE_F32, TF_MATMUL_TF32, 1.0f},
        {pv_fp16, "fp16", TF_DTYPE_F16, TF_MATMUL_F16, 65536.0f},
        {pv_bf16, "bf16", TF_DTYPE_BF16, TF_MATMUL_BF16, 1.0f},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tf_error err = {0};
        const tf_loaded_plugin *lp = tf_test_plugin(reg, TF_KIND_PRECISION, c[i].name, &err);
        ck_assert_msg(lp != NULL, "%s", err.msg);
        ck_assert_str_eq(lp->desc->name, c[i].name);
        ck_assert_uint_eq(lp->desc->kind, TF_KIND_PRECISION);
        ck_assert_msg(lp->desc->description && lp->desc->description[0], "%s has no description", c[i].name);
        ck_assert_uint_eq(c[i].vt->size, sizeof(tf_precision_vtable));
        char plugin_line[64];
        snprintf(plugin_line, sizeof plugin_line, "precision = { plugin = \"%s\"; };", c[i].name);
        tf_precision *p = make(c[i].vt, plugin_line, NULL);
        ck_assert_int_eq(c[i].vt->compute_dtype(p), c[i].dt);
        ck_assert_int_eq(c[i].vt->matmul_mode(p), c[i].mm);
        ck_assert_msg(c[i].vt->loss_scale(p) == c[i].scale, "%s: loss scale %g", c[i].name,
                      (double)c[i].vt->loss_scale(p));
        ASSERT_STATE(c[i].vt, p, c[i].scale, 0, 0);
        c[i].vt->destroy(p);
    }
}
END_TEST

/* tf32 and bf16 do with steps, state and gradients exactly what fp32 does:
 * the same script gives the same states, gradients are never touched. */
START_TEST(test_unscaled_modes_match_fp32)
{
    const tf_precision_vtable *others[] = {pv_tf32, pv_bf16};
    const bool script[] = {false, false, true, false, true, true, false};
    for (size_t k = 0; k < 2; k++) {
        tf_precision *ref = make(pv_fp32, "", NULL), *p = make(others[k], "", NULL);
        for (size_t i = 0; i < sizeof script; i++) {
            ck_assert_int_eq(others[k]->update(p, script[i]), pv_fp32->update(ref, script[i]));
            tf_scaler_state a = state_of(pv_fp32, ref), b = state_of(others[k], p);
            ck_assert(a.scale == b.scale && a.good_steps == b.good_steps && a.skipped_steps == b.skipped_steps);
            ck_assert(b.scale == 1.0);
        }
        ASSERT_STATE(others[k], p, 1.0, 1, 3);
        /* set_state keeps the counts and forces the scale back to 1 */
        tf_scaler_state in = {1024.0, 7, 5};
        others[k]->set_state(p, &in);
        pv_fp32->set_state(ref, &in);
        ASSERT_STATE(others[k], p, 1.0, 7, 5);
        ASSERT_STATE(pv_fp32, ref, 1.0, 7, 5);
        /* unscale_and_check: found_inf false and the gradients untouched, even
         * with inf/NaN in them (fp32 leaves those to the loss check) */
        float g[4] = {1.5f, INFINITY, NAN, -2.0f};
        int32_t flag = 0;
        bool found = true;
        tf_error err = {0};
        ck_assert_int_eq(others[k]->unscale_and_check(p, NULL, NULL, g, 4, &flag, &found, &err), TF_OK);
        ck_assert(!found);
        ck_assert(g[0] == 1.5f && isinf(g[1]) && isnan(g[2]) && g[3] == -2.0f);
        found = true;
        ck_assert_int_eq(pv_fp32->unscale_and_check(ref, NULL, NULL, g, 4, &flag, &found, &err), TF_OK);
        ck_assert(!found);
        others[k]->destroy(p);
        pv_fp32->destroy(ref);
    }
}
END_TEST

/* tf32 and bf16 have no keys: any key but `plugin` is unknown to the core. */
START_TEST(test_unscaled_modes_have_no_keys)
{
    const tf_precision_vtable *vts[] = {pv_tf32, pv_bf16};
    const char *names[] = {"tf32", "bf16"};
    for (int k = 0; k < 2; k++) {
        char text[160];
        snprintf(text, sizeof text, "precision = { plugin = \"%s\";\n  init_scale = 1024.0; };\n", names[k]);
        tf_config *cfg = cfg_of(text);
        tf_section *sec = tf_config_section(cfg, "precision");
        tf_error err = {0};
        const char *name;
        ck_assert_int_eq(tf_cfg_string(sec, "plugin", NULL, &name, &err), TF_OK);
        ck_assert_int_eq(vts[k]->check_config(sec, &err), TF_OK);
        ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_ERR_CONFIG);
        ck_assert_msg(strstr(err.msg, "test.cfg:2: unknown key 'precision.init_scale'"), "%s", err.msg);
        tf_config_free(cfg);
    }
}
END_TEST

/* --- fp16: the scaler, step by step ------------------------------------------ */

START_TEST(test_fp16_defaults_grow_after_2000)
{
    tf_precision *p = make(pv_fp16, "precision = { plugin = \"fp16\"; };", NULL);
    ASSERT_STATE(pv_fp16, p, 65536.0, 0, 0);
    clean(pv_fp16, p, 1999);
    ASSERT_STATE(pv_fp16, p, 65536.0, 1999, 0);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 131072.0, 0, 0);
    clean(pv_fp16, p, 4000);
    ASSERT_STATE(pv_fp16, p, 524288.0, 0, 0);
    pv_fp16->destroy(p);
}
END_TEST

START_TEST(test_fp16_back_to_back_overflows)
{
    tf_precision *p = make(pv_fp16, "", NULL);
    clean(pv_fp16, p, 5);
    ASSERT_STATE(pv_fp16, p, 65536.0, 5, 0);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 32768.0, 0, 1);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 16384.0, 0, 2);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 8192.0, 0, 3);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 8192.0, 1, 3);
    /* an overflow mid-interval restarts the count: 1500 + overflow + 1999 does not grow */
    clean(pv_fp16, p, 1499);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 4096.0, 0, 4);
    clean(pv_fp16, p, 1999);
    ASSERT_STATE(pv_fp16, p, 4096.0, 1999, 4);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 8192.0, 0, 4);
    pv_fp16->destroy(p);
}
END_TEST

START_TEST(test_fp16_growth_interval_1_and_3)
{
    tf_precision *p = fp16_with(1.0, 2.0, 0.5, 1);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 2.0, 0, 0);
    clean(pv_fp16, p, 3);
    ASSERT_STATE(pv_fp16, p, 16.0, 0, 0);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 8.0, 0, 1);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 16.0, 0, 1);
    pv_fp16->destroy(p);

    /* interval 3, custom factors: x4 on growth, x0.25 on overflow */
    p = fp16_with(8.0, 4.0, 0.25, 3);
    clean(pv_fp16, p, 2);
    ASSERT_STATE(pv_fp16, p, 8.0, 2, 0);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 32.0, 0, 0);
    clean(pv_fp16, p, 2);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 8.0, 0, 1);
    overflow(pv_fp16, p, 2);
    ASSERT_STATE(pv_fp16, p, 0.5, 0, 3);
    clean(pv_fp16, p, 3);
    ASSERT_STATE(pv_fp16, p, 2.0, 0, 3);
    pv_fp16->destroy(p);

    /* factors that are not powers of 2: each product is rounded to float */
    p = fp16_with(1000.0, 1.5, 0.9, 2);
    clean(pv_fp16, p, 2);
    ASSERT_STATE(pv_fp16, p, (float)(1000.0 * 1.5), 0, 0);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, (float)((double)(float)(1500.0) * 0.9), 0, 1);
    pv_fp16->destroy(p);
}
END_TEST

/* Long random scripts against the reference, in several configurations. */
START_TEST(test_fp16_matches_gradscaler_on_random_scripts)
{
    struct {
        double init, growth, backoff;
        long long interval;
        double p_inf;
    } c[] = {
        {65536.0, 2.0, 0.5, 2000, 0.0004}, {65536.0, 2.0, 0.5, 1, 0.45}, {8.0, 4.0, 0.25, 3, 0.2},
        {1000.0, 1.5, 0.9, 7, 0.1},        {3.0, 1.0001, 0.999, 2, 0.3},  {1e30, 3.0, 0.7, 5, 0.15},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        tf_precision *p = fp16_with(c[k].init, c[k].growth, c[k].backoff, c[k].interval);
        ref_scaler r = {(float)c[k].init, 0, 0, c[k].growth, c[k].backoff, c[k].interval};
        for (int i = 0; i < 30000; i++) {
            bool inf = tf_test_urand() < c[k].p_inf;
            bool skip = pv_fp16->update(p, inf);
            bool rskip = ref_update(&r, inf);
            ck_assert_msg(r.scale >= FLT_MIN, "config %zu: the script underflows the reference", k);
            tf_scaler_state s = state_of(pv_fp16, p);
            ck_assert_msg(skip == rskip && s.scale == (double)r.scale && s.good_steps == r.tracker &&
                              s.skipped_steps == r.skipped,
                          "config %zu step %d: {%g, %lld, %lld} vs GradScaler {%g, %lld, %lld}", k, i, s.scale,
                          (long long)s.good_steps, (long long)s.skipped_steps, (double)r.scale,
                          (long long)r.tracker, (long long)r.skipped);
            ck_assert(pv_fp16->loss_scale(p) == r.scale);
        }
        pv_fp16->destroy(p);
    }
}
END_TEST

/* Growth that would reach inf is refused (the tracker still restarts). */
START_TEST(test_fp16_never_grows_to_inf)
{
    double big = ldexp(1.0, 127); /* the largest power of 2 a float holds */
    tf_precision *p = fp16_with(big, 2.0, 0.5, 1);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, big, 0, 0);
    clean(pv_fp16, p, 10);
    ASSERT_STATE(pv_fp16, p, big, 0, 0);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, ldexp(1.0, 126), 0, 1);
    pv_fp16->destroy(p);
}
END_TEST

/* The scale stops at FLT_MIN (1/FLT_MIN = 2^126 is finite) and says so once. */
START_TEST(test_fp16_underflow_clamps_and_warns_once)
{
    tf_precision *p = fp16_with(1.0, 2.0, 0.5, 2000);
    capture_start();
    overflow(pv_fp16, p, 126);
    int early = capture_count("smallest normal float");
    ck_assert_int_eq(early, 0);
    ASSERT_STATE(pv_fp16, p, FLT_MIN, 0, 126);
    capture_start();
    overflow(pv_fp16, p, 200);
    ck_assert_int_eq(capture_count("smallest normal float"), 1);
    ASSERT_STATE(pv_fp16, p, FLT_MIN, 0, 326);
    clean(pv_fp16, p, 2000);
    ASSERT_STATE(pv_fp16, p, 2.0 * FLT_MIN, 0, 326);
    pv_fp16->destroy(p);

    /* a factor that lands between FLT_MIN and 0 (not a power of 2) */
    p = fp16_with(1e-37, 2.0, 0.01, 2000);
    capture_start();
    overflow(pv_fp16, p, 1);
    ck_assert_int_eq(capture_count("precision fp16: the loss scale would fall below"), 1);
    ASSERT_STATE(pv_fp16, p, FLT_MIN, 0, 1);
    pv_fp16->destroy(p);
}
END_TEST

/* --- fp16: checkpoint state ---------------------------------------------------- */

START_TEST(test_fp16_state_round_trip)
{
    tf_precision *a = fp16_with(65536.0, 2.0, 0.5, 5);
    clean(pv_fp16, a, 13);
    overflow(pv_fp16, a, 2);
    clean(pv_fp16, a, 3);
    tf_scaler_state s = state_of(pv_fp16, a);
    ck_assert(s.scale == 65536.0 && s.good_steps == 3 && s.skipped_steps == 2);
    tf_precision *b = fp16_with(65536.0, 2.0, 0.5, 5);
    pv_fp16->set_state(b, &s);
    ASSERT_STATE(pv_fp16, b, s.scale, 3, 2);
    /* both continue identically */
    for (int i = 0; i < 500; i++) {
        bool inf = tf_test_urand() < 0.1;
        ck_assert_int_eq(pv_fp16->update(a, inf), pv_fp16->update(b, inf));
        tf_scaler_state x = state_of(pv_fp16, a), y = state_of(pv_fp16, b);
        ck_assert(x.scale == y.scale && x.good_steps == y.good_steps && x.skipped_steps == y.skipped_steps);
    }
    pv_fp16->destroy(a);
    pv_fp16->destroy(b);
}
END_TEST

START_TEST(test_fp16_set_state_out_of_range)
{
    tf_precision *p = fp16_with(1024.0, 2.0, 0.5, 10);
    /* scales that are not positive numbers are ignored, with a warning each */
    const double bad[] = {0.0, -2.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tf_scaler_state in = {bad[i], 4, 9};
        capture_start();
        pv_fp16->set_state(p, &in);
        ck_assert_int_eq(capture_count("is not a positive number; continuing at 1024"), 1);
        ASSERT_STATE(pv_fp16, p, 1024.0, 4, 9);
    }
    /* tiny and huge scales are clamped to the normal float range */
    tf_scaler_state tiny = {1e-45, 0, 0}, huge = {1e300, 0, 0};
    pv_fp16->set_state(p, &tiny);
    ASSERT_STATE(pv_fp16, p, FLT_MIN, 0, 0);
    pv_fp16->set_state(p, &huge);
    ASSERT_STATE(pv_fp16, p, FLT_MAX, 0, 0);
    /* a tracker past this run's growth_interval grows on the next clean step */
    tf_scaler_state far = {256.0, 5000, 1};
    pv_fp16->set_state(p, &far);
    ASSERT_STATE(pv_fp16, p, 256.0, 9, 1);
    clean(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 512.0, 0, 1);
    /* negative counts become 0 */
    tf_scaler_state neg = {256.0, -3, -7};
    pv_fp16->set_state(p, &neg);
    ASSERT_STATE(pv_fp16, p, 256.0, 0, 0);
    pv_fp16->destroy(p);
}
END_TEST

/* --- fp16: unscale_and_check on backend-cpu --------------------------------- */

static tf_backend *cpu_open(void)
{
    tf_backend_open_args a = {sizeof a, 0, 2, 1, NULL, 1};
    tf_backend *be = NULL;
    tf_error err = {0};
    ck_assert_msg(cpu_vt->open(&a, &be, &err) == TF_OK, "%s", err.msg);
    return be;
}

/* grads [n] f32 and the flag, in backend memory. */
static void cpu_buffers(tf_backend *be, size_t n, float **g, int32_t **flag)
{
    tf_error err = {0};
    ck_assert_int_eq(cpu_vt->alloc(be, n * sizeof(float), TF_MEM_DEVICE, (void **)g, &err), TF_OK);
    ck_assert_int_eq(cpu_vt->alloc(be, sizeof(int32_t), TF_MEM_DEVICE, (void **)flag, &err), TF_OK);
}

START_TEST(test_fp16_unscale_is_exact)
{
    const double scales[] = {65536.0, 1000.0, 3.0, 1.0, 0.125};
    const size_t n = 100003; /* large enough to be split over the threads */
    tf_backend *be = cpu_open();
    float *g, *orig = malloc(n * sizeof *orig);
    int32_t *flag;
    cpu_buffers(be, n, &g, &flag);
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        tf_precision *p = fp16_with(scales[k], 2.0, 0.5, 2000);
        for (size_t i = 0; i < n; i++) {
            /* magnitudes from 2^-30 to 2^30, both signs, some exact zeros */
            double m = ldexp(tf_test_urand() + 0.5, (int)(tf_test_urand() * 60) - 30);
            orig[i] = i % 97 == 0 ? 0.0f : (float)(i % 2 ? m : -m);
        }
        memcpy(g, orig, n * sizeof *g);
        *flag = 1; /* stale: unscale_and_check must clear it first */
        bool found = true;
        tf_error err = {0};
        ck_assert_msg(pv_fp16->unscale_and_check(p, cpu_vt, be, g, n, flag, &found, &err) == TF_OK, "%s",
                      err.msg);
        ck_assert_msg(!found, "scale %g: clean gradients reported as overflowing", scales[k]);
        float inv = (float)(1.0 / (double)(float)scales[k]);
        for (size_t i = 0; i < n; i++) {
            float want = orig[i] * inv;
            ck_assert_msg(memcmp(&g[i], &want, sizeof want) == 0, "scale %g, grad %zu: %a * %a = %a, got %a",
                          scales[k], i, (double)orig[i], (double)inv, (double)want, (double)g[i]);
        }
        /* a power-of-2 scale unscales without rounding: back to the original */
        if (scales[k] == 65536.0)
            for (size_t i = 0; i < n; i++) ck_assert(g[i] * 65536.0f == orig[i]);
        pv_fp16->destroy(p);
    }
    cpu_vt->free(be, g, TF_MEM_DEVICE);
    cpu_vt->free(be, flag, TF_MEM_DEVICE);
    cpu_vt->close(be);
    free(orig);
}
END_TEST

START_TEST(test_fp16_finds_inf_and_nan)
{
    const size_t n = 70001;
    const float bad[] = {INFINITY, -INFINITY, NAN, -NAN};
    const size_t where[] = {0, 12345, n - 1};
    tf_backend *be = cpu_open();
    float *g;
    int32_t *flag;
    cpu_buffers(be, n, &g, &flag);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
            tf_precision *p = make(pv_fp16, "", NULL);
            for (size_t i = 0; i < n; i++) g[i] = (float)(i % 13) - 6.0f;
            g[where[w]] = bad[b];
            bool found = false;
            tf_error err = {0};
            ck_assert_int_eq(pv_fp16->unscale_and_check(p, cpu_vt, be, g, n, flag, &found, &err), TF_OK);
            ck_assert_msg(found, "%g at %zu not found", (double)bad[b], where[w]);
            /* the finite ones were still unscaled, as torch does */
            size_t other = where[w] == 0 ? 1 : 0;
            ck_assert(g[other] == ((float)(other % 13) - 6.0f) / 65536.0f);
            /* the trainer then calls update: skipped, scale halved */
            ck_assert(pv_fp16->update(p, found));
            ASSERT_STATE(pv_fp16, p, 32768.0, 0, 1);
            pv_fp16->destroy(p);
        }
    }
    /* an empty gradient buffer is clean */
    tf_precision *p = make(pv_fp16, "", NULL);
    bool found = true;
    tf_error err = {0};
    ck_assert_int_eq(pv_fp16->unscale_and_check(p, cpu_vt, be, g, 0, flag, &found, &err), TF_OK);
    ck_assert(!found);
    pv_fp16->destroy(p);
    cpu_vt->free(be, g, TF_MEM_DEVICE);
    cpu_vt->free(be, flag, TF_MEM_DEVICE);
    cpu_vt->close(be);
}
END_TEST

/* A backend that is backend-cpu except for one slot that fails. */
enum { FAIL_NONE, FAIL_MEMSET, FAIL_CHECK, FAIL_CHECK_SILENT, FAIL_SCALE, FAIL_MEMCPY, FAIL_SYNC };
static int fail_slot;
static tf_status f_memset(tf_backend *be, void *dst, int v, size_t n, tf_stream *s)
{
    return fail_slot == FAIL_MEMSET ? TF_ERR_RUNTIME : cpu_vt->memset(be, dst, v, n, s);
}
static tf_status f_finite(tf_backend *be, tf_stream *s, const void *x, size_t n, tf_dtype dt, int32_t *found,
                          tf_error *err)
{
    if (fail_slot == FAIL_CHECK) return tf_error_set(err, TF_ERR_RUNTIME, "device lost");
    if (fail_slot == FAIL_CHECK_SILENT) return TF_ERR_RUNTIME;
    return cpu_vt->finite_check(be, s, x, n, dt, found, err);
}
static tf_status f_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float a, tf_dtype dt, tf_error *err)
{
    if (fail_slot == FAIL_SCALE) return tf_error_set(err, TF_ERR_RUNTIME, "kernel launch failed");
    return cpu_vt->scale(be, s, x, n, a, dt, err);
}
static tf_status f_memcpy(tf_backend *be, void *d, const void *src, size_t n, tf_memcpy_kind k, tf_stream *s)
{
    return fail_slot == FAIL_MEMCPY ? TF_ERR_RUNTIME : cpu_vt->memcpy(be, d, src, n, k, s);
}
static tf_status f_sync(tf_backend *be, tf_stream *s, tf_error *err)
{
    if (fail_slot == FAIL_SYNC) return tf_error_set(err, TF_ERR_RUNTIME, "illegal address");
    return cpu_vt->stream_sync(be, s, err);
}

START_TEST(test_fp16_unscale_reports_backend_failures)
{
    tf_backend_vtable vt = *cpu_vt;
    vt.memset = f_memset;
    vt.finite_check = f_finite;
    vt.scale = f_scale;
    vt.memcpy = f_memcpy;
    vt.stream_sync = f_sync;
    struct {
        int slot;
        const char *msg;
    } c[] = {
        {FAIL_MEMSET, "precision fp16: clearing the overflow flag in backend memory failed"},
        {FAIL_CHECK, "precision fp16: checking 64 gradients for inf/NaN: device lost"},
        {FAIL_CHECK_SILENT, "precision fp16: checking 64 gradients for inf/NaN failed"},
        {FAIL_SCALE, "precision fp16: unscaling 64 gradients by 1/65536: kernel launch failed"},
        {FAIL_MEMCPY, "precision fp16: copying the overflow flag to the host failed"},
        {FAIL_SYNC, "precision fp16: waiting for the gradient check: illegal address"},
    };
    tf_backend *be = cpu_open();
    float *g;
    int32_t *flag;
    cpu_buffers(be, 64, &g, &flag);
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        tf_precision *p = make(pv_fp16, "", NULL);
        for (int i = 0; i < 64; i++) g[i] = (float)i;
        fail_slot = c[k].slot;
        bool found = true;
        tf_error err;
        tf_error_set(&err, TF_ERR_DATA, "a stale message from earlier");
        ck_assert_int_eq(pv_fp16->unscale_and_check(p, &vt, be, g, 64, flag, &found, &err), TF_ERR_RUNTIME);
        ck_assert_int_eq(err.code, TF_ERR_RUNTIME);
        ck_assert_msg(strcmp(err.msg, c[k].msg) == 0, "got '%s', expected '%s'", err.msg, c[k].msg);
        ck_assert(!found);
        pv_fp16->destroy(p);
    }
    fail_slot = FAIL_NONE;
    tf_precision *p = make(pv_fp16, "", NULL);
    bool found = true;
    tf_error err = {0};
    ck_assert_int_eq(pv_fp16->unscale_and_check(p, &vt, be, g, 64, flag, &found, &err), TF_OK);
    ck_assert(!found);
    /* backend-cpu's own refusal: no flag buffer */
    ck_assert_int_eq(pv_fp16->unscale_and_check(p, cpu_vt, be, g, 64, NULL, &found, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "precision fp16: clearing the overflow flag in backend memory failed");
    pv_fp16->destroy(p);
    cpu_vt->free(be, g, TF_MEM_DEVICE);
    cpu_vt->free(be, flag, TF_MEM_DEVICE);
    cpu_vt->close(be);
}
END_TEST

/* --- fp16: config keys ------------------------------------------------------------ */

START_TEST(test_fp16_config_keys_read)
{
    tf_config *cfg;
    tf_precision *p = make(pv_fp16,
                           "precision = { plugin = \"fp16\"; init_scale = 128; growth_factor = 3.0;\n"
                           "  backoff_factor = 0.125; growth_interval = 4; };\n",
                           &cfg);
    ASSERT_STATE(pv_fp16, p, 128.0, 0, 0);
    clean(pv_fp16, p, 4);
    ASSERT_STATE(pv_fp16, p, 384.0, 0, 0);
    overflow(pv_fp16, p, 1);
    ASSERT_STATE(pv_fp16, p, 48.0, 0, 1);
    /* every key was asked for: nothing is unknown to the core */
    tf_error err = {0};
    const char *name;
    ck_assert_int_eq(tf_cfg_string(tf_config_section(cfg, "precision"), "plugin", NULL, &name, &err), TF_OK);
    ck_assert_msg(tf_config_check_unread(cfg, &err) == TF_OK, "%s", err.msg);
    pv_fp16->destroy(p);
    tf_config_free(cfg);
}
END_TEST

/* check_config on a line that sets one key (on line 2); the message. */
static void expect_config_error(const char *assignment, const char *fragment)
{
    char text[256];
    snprintf(text, sizeof text, "precision = { plugin = \"fp16\";\n  %s };\n", assignment);
    tf_config *cfg = cfg_of(text);
    tf_section *sec = tf_config_section(cfg, "precision");
    tf_error err = {0};
    ck_assert_msg(pv_fp16->check_config(sec, &err) == TF_ERR_CONFIG, "'%s' was accepted", assignment);
    ck_assert_msg(strncmp(err.msg, "test.cfg:2: ", 12) == 0 && strstr(err.msg, fragment),
                  "'%s': got '%s', expected 'test.cfg:2: ...%s...'", assignment, err.msg, fragment);
    /* create refuses it the same way, and makes nothing */
    tf_precision *p = NULL;
    tf_error err2 = {0};
    ck_assert_int_eq(pv_fp16->create(sec, &p, &err2), TF_ERR_CONFIG);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err2.msg, err.msg);
    tf_config_free(cfg);
}

START_TEST(test_fp16_config_errors)
{
    expect_config_error("init_scale = 0.0;", "precision.init_scale must be in [1.17549e-38, 3.40282e+38], got 0 (the scale is a positive normal float)");
    expect_config_error("init_scale = -65536.0;", "precision.init_scale must be in [1.17549e-38, 3.40282e+38], got -65536");
    expect_config_error("init_scale = 1e39;", "precision.init_scale must be in [1.17549e-38, 3.40282e+38], got 1e+39");
    expect_config_error("init_scale = 1e-40;", "precision.init_scale must be in [1.17549e-38, 3.40282e+38], got 1e-40");
    expect_config_error("init_scale = \"big\";", "precision.init_scale must be a number");
    expect_config_error("growth_factor = 1.0;", "precision.growth_factor must be in (1, 3.40282e+38], got 1 (a scale that grows by it must grow)");
    expect_config_error("growth_factor = 0.5;", "precision.growth_factor must be in (1, ");
    expect_config_error("growth_factor = 1e39;", "precision.growth_factor must be in (1, ");
    expect_config_error("growth_factor = true;", "precision.growth_factor must be a number");
    expect_config_error("backoff_factor = 1.0;", "precision.backoff_factor must be in (0, 1), got 1 (an overflow must shrink the scale and keep it positive)");
    expect_config_error("backoff_factor = 0.0;", "precision.backoff_factor must be in (0, 1), got 0");
    expect_config_error("backoff_factor = -0.5;", "precision.backoff_factor must be in (0, 1), got -0.5");
    expect_config_error("backoff_factor = 2;", "precision.backoff_factor must be in (0, 1), got 2");
    expect_config_error("growth_interval = 0;", "precision.growth_interval must be in [1, 2147483647], got 0");
    expect_config_error("growth_interval = -5;", "precision.growth_interval must be in [1, 2147483647]");
    expect_config_error("growth_interval = 3000000000L;", "precision.growth_interval must be in [1, 2147483647]");
    expect_config_error("growth_interval = 2.5;", "precision.growth_interval must be");
}
END_TEST

/* An override is named as the place the value came from; a misspelt key is
 * the core's "unknown key" with a suggestion, since check_config asked for
 * every real one. */
START_TEST(test_fp16_config_override_and_typo)
{
    tf_config *cfg = cfg_of("precision = { plugin = \"fp16\"; };\n");
    tf_error err = {0};
    ck_assert_int_eq(tf_config_override(cfg, "precision.backoff_factor=1.5", &err), TF_OK);
    ck_assert_int_eq(pv_fp16->check_config(tf_config_section(cfg, "precision"), &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "-o precision.backoff_factor=1.5: precision.backoff_factor must be in (0, 1)"),
                  "%s", err.msg);
    tf_config_free(cfg);

    cfg = cfg_of("precision = { plugin = \"fp16\";\n\n  growth_intervall = 100; };\n");
    tf_section *sec = tf_config_section(cfg, "precision");
    const char *name;
    ck_assert_int_eq(tf_cfg_string(sec, "plugin", NULL, &name, &err), TF_OK);
    ck_assert_int_eq(pv_fp16->check_config(sec, &err), TF_OK);
    ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "test.cfg:3: unknown key 'precision.growth_intervall' (did you mean "
                                  "'growth_interval'?)"),
                  "%s", err.msg);
    tf_config_free(cfg);
}
END_TEST

int main(void)
{
    load_plugins();
    Suite *s = suite_create("precision");
    const TTest *const plugins[] = {test_dtype_and_mode, test_unscaled_modes_match_fp32,
                                    test_unscaled_modes_have_no_keys};
    const TTest *const scaler[] = {test_fp16_defaults_grow_after_2000,
                                   test_fp16_back_to_back_overflows,
                                   test_fp16_growth_interval_1_and_3,
                                   test_fp16_matches_gradscaler_on_random_scripts,
                                   test_fp16_never_grows_to_inf,
                                   test_fp16_underflow_clamps_and_warns_once,
                                   test_fp16_state_round_trip,
                                   test_fp16_set_state_out_of_range};
    const TTest *const config[] = {test_fp16_config_keys_read, test_fp16_config_errors,
                                   test_fp16_config_override_and_typo};
    const TTest *const unscale[] = {test_fp16_unscale_is_exact, test_fp16_finds_inf_and_nan,
                                    test_fp16_unscale_reports_backend_failures};
    tf_test_add_group(s, "plugins", plugins, TF_TEST_COUNT(plugins), 0);
    tf_test_add_group(s, "fp16 scaler", scaler, TF_TEST_COUNT(scaler), 0);
    tf_test_add_group(s, "fp16 config", config, TF_TEST_COUNT(config), 0);
    if (cpu_vt)
        tf_test_add_group(s, "fp16 unscale on backend-cpu", unscale, TF_TEST_COUNT(unscale), 0);
    else
        printf("test_precision: backend-cpu is not built (no OpenBLAS): unscale_and_check not tested\n");
    int failed = tf_test_run(s, false);
    tf_registry_free(reg);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
