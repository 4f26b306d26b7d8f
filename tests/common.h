/* tests/common.h — what the C test programs share: plugins loaded from the
 * build tree through the core's registry (the same checks tfcore makes),
 * seeded random fills, the relative-error measures the numeric tests assert
 * on, and the Check runner.
 *
 * Header-only (static inline), so a test program needs nothing else in its
 * SOURCES; it is compiled with TEST_CPPFLAGS (-I core/runtime for registry.h,
 * Check's flags) and linked with TEST_LDADD (the runtime holds the registry).
 * One translation unit per program: the random state below is per file. */
#ifndef TFCORE_TESTS_COMMON_H
#define TFCORE_TESTS_COMMON_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"
#include "tfcore/backend.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"
#include "tfcore/plugin.h"

/* --- plugins from the build tree ------------------------------------------------- */

/* buf = $top_builddir/rel (top_builddir "." when unset, as under make check). */
static inline void tf_test_build_path(char *buf, size_t n, const char *rel)
{
    const char *top = getenv("top_builddir");
    snprintf(buf, n, "%s/%s", top ? top : ".", rel);
}

/* A registry over the libtool output folders of the build-tree parts `rel`
 * ("plugins/backend-cpu" -> $top_builddir/plugins/backend-cpu/.libs), in that
 * order. Indexes only: tf_test_plugin loads what a test asks for. */
static inline tf_status tf_test_registry(tf_registry **out, const char *const *rel, size_t n, tf_error *err)
{
    char bufs[8][4096];
    const char *dirs[8];
    if (n > 8) return tf_error_set(err, TF_ERR_RUNTIME, "tf_test_registry: %zu folders, at most 8", n);
    for (size_t i = 0; i < n; i++) {
        char r[4000];
        snprintf(r, sizeof r, "%s/.libs", rel[i]);
        tf_test_build_path(bufs[i], sizeof bufs[i], r);
        dirs[i] = bufs[i];
    }
    return tf_registry_index(out, dirs, n, err);
}

/* The usable plugin (kind, name) of reg, loaded on first use (every check
 * of docs/PLUGINS.md, the probe included), or NULL with the registry's one
 * line in err: not found (what exists, where it looked), rejected (why), or
 * unusable here (the probe's reason). */
static inline const tf_loaded_plugin *tf_test_plugin(tf_registry *reg, uint32_t kind, const char *name,
                                                     tf_error *err)
{
    const tf_loaded_plugin *p = NULL;
    if (tf_registry_require(reg, kind, name, "test", &p, err) != TF_OK) return NULL;
    return p;
}

/* The vtable of the plugin in file `path` (named tfcore-<kind>-<name>.so, as
 * the registry requires), loaded through a registry over its folder; *reg
 * holds it open (tf_registry_free when done, or at exit). NULL with one line
 * in err when it cannot be loaded or is not of `kind`. */
static inline const void *tf_test_plugin_file(tf_registry **reg, const char *path, uint32_t kind, tf_error *err)
{
    *reg = NULL;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    const char *kname = tf_kind_name(kind);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tfcore-%s-", kname ? kname : "?");
    size_t pl = strlen(prefix), bl = strlen(base);
    if (strncmp(base, prefix, pl) != 0 || bl <= pl + 3 || strcmp(base + bl - 3, ".so") != 0) {
        tf_error_set(err, TF_ERR_PLUGIN, "%s: not named %s<name>.so (the loader's naming)", path, prefix);
        return NULL;
    }
    char name[TF_PLUGIN_NAME_MAX + 2];
    snprintf(name, sizeof name, "%.*s", (int)(bl - pl - 3), base + pl);
    const char *dirs[] = {dir};
    if (tf_registry_index(reg, dirs, 1, err) != TF_OK) return NULL;
    const tf_loaded_plugin *p = NULL;
    if (tf_registry_require(*reg, kind, name, path, &p, err) != TF_OK) return NULL;
    return p->desc->vtable;
}

/* --- seeded random numbers ---------------------------------------------------------- */

/* xorshift64* (Vigna): one stream per program, from a fixed seed unless
 * reseeded by tf_test_seed (-DTF_TEST_DEFAULT_SEED=N builds the fixed-seed
 * suites on another draw, to see that their tolerances do not rest on one). */
#ifndef TF_TEST_DEFAULT_SEED
#define TF_TEST_DEFAULT_SEED 88172645463325252ull
#endif
__attribute__((unused)) static uint64_t tf_test_rng = TF_TEST_DEFAULT_SEED;

static inline void tf_test_seed(uint64_t seed) { tf_test_rng = seed ? seed : 1; }

static inline uint64_t tf_test_next(void)
{
    tf_test_rng ^= tf_test_rng >> 12;
    tf_test_rng ^= tf_test_rng << 25;
    tf_test_rng ^= tf_test_rng >> 27;
    return tf_test_rng * 0x2545F4914F6CDD1Dull;
}

static inline double tf_test_urand(void) /* [0, 1) */
{
    return (double)(tf_test_next() >> 11) * (1.0 / 9007199254740992.0);
}

static inline float tf_test_frand(float lo, float hi) /* [lo, hi) */
{
    return lo + (hi - lo) * (float)tf_test_urand();
}

static inline int tf_test_irand(int n) /* [0, n) */ { return (int)(tf_test_next() % (uint64_t)n); }

static inline void tf_test_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = tf_test_frand(lo, hi);
}

/* The seed of a run with fresh random numbers: TF_TEST_SEED when set (to
 * repeat a run), else from the clock; seeds the stream and prints
 * "<test>: seed N (TF_TEST_SEED=N repeats this run)". */
static inline uint64_t tf_test_seed_run(const char *test)
{
    const char *env = getenv("TF_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) * 2654435761u;
    tf_test_seed(seed);
    printf("%s: seed %llu (TF_TEST_SEED=%llu repeats this run)\n", test, (unsigned long long)seed,
           (unsigned long long)seed);
    return seed;
}

/* --- activations in 16 bits, on the host ----------------------------------------------- */

/* v rounded to dt (f32, f16 or bf16): the value a backend computing in dt sees */
static inline float tf_test_round(float v, tf_dtype dt)
{
    if (dt == TF_DTYPE_F16) return tf_f16_to_f32(tf_f32_to_f16(v));
    if (dt == TF_DTYPE_BF16) return tf_bf16_to_f32(tf_f32_to_bf16(v));
    return v;
}

/* x[n] rounded to dt in place */
static inline void tf_test_quantize(float *x, size_t n, tf_dtype dt)
{
    for (size_t i = 0; i < n; i++) x[i] = tf_test_round(x[i], dt);
}

/* x[n] f32 -> a new host buffer of n elements of dt (malloc; free it) */
static inline void *tf_test_to_dt(const float *x, size_t n, tf_dtype dt)
{
    void *p = malloc(n * tf_dtype_size(dt) + 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        if (dt == TF_DTYPE_F32)
            ((float *)p)[i] = x[i];
        else if (dt == TF_DTYPE_F16)
            ((uint16_t *)p)[i] = tf_f32_to_f16(x[i]);
        else
            ((uint16_t *)p)[i] = tf_f32_to_bf16(x[i]);
    }
    return p;
}

/* p[n] in dt -> out[n] f32 */
static inline void tf_test_from_dt(const void *p, size_t n, tf_dtype dt, float *out)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == TF_DTYPE_F32)
            out[i] = ((const float *)p)[i];
        else if (dt == TF_DTYPE_F16)
            out[i] = tf_f16_to_f32(((const uint16_t *)p)[i]);
        else
            out[i] = tf_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* --- errors and tolerances ------------------------------------------------------------ */

/* Elementwise against a double reference: max over i of
 * |got - want| / max(|want|, floor); NaN propagates (fails every <=). */
static inline double tf_test_rel_err_floor(const float *got, const double *want, size_t n, double floor_)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor_);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static inline double tf_test_max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Normwise, one backend against another: max |got - want| / max |want| (the
 * absolute error when want is all zeros). A NaN or an infinity counts as
 * equal only to the same value on the other side (INFINITY otherwise). */
static inline double tf_test_rel_err(const float *got, const float *want, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(w) || isnan(g)) {
            if (isnan(w) != isnan(g)) return INFINITY;
            continue;
        }
        if (isinf(w) || isinf(g)) {
            if (g != w) return INFINITY;
            continue;
        }
        double d = fabs(g - w);
        if (d > num) num = d;
        if (fabs(w) > den) den = fabs(w);
    }
    return den > 0.0 ? num / den : num;
}

/* The normwise tolerance of a GPU result in activation dtype dt under matmul
 * mode `mode` against backend-cpu on the same rounded inputs: 16-bit 1e-2,
 * TF32 3e-3, strict fp32 `fp32` (each suite says why its own). */
static inline double tf_test_tol(tf_dtype dt, tf_matmul_mode mode, double fp32)
{
    if (dt != TF_DTYPE_F32) return 1e-2;
    return mode == TF_MATMUL_TF32 ? 3e-3 : fp32;
}

/* got[n] against a double reference want[n], elementwise with the floor at
 * 1% of the largest |want| (elements that cancel to nearly 0 are held to the
 * precision of the terms they came from): relative error <= tol. */
#define TF_TEST_ASSERT_REL(got, want, n, tol)                                                          \
    do {                                                                                               \
        double e_ = tf_test_rel_err_floor((got), (want), (n), 1e-2 * tf_test_max_abs((want), (n)) + 1e-30); \
        ck_assert_msg(e_ <= (tol), "%s vs %s: relative error %.3g > %.3g", #got, #want, e_, (double)(tol)); \
    } while (0)

/* got[n] against want[n] normwise (tf_test_rel_err) within tol; a failure
 * names what (printf format and arguments) and the run's seed. */
#define TF_TEST_ASSERT_NORMWISE(seed, got, want, n, tol, ...)                                          \
    do {                                                                                               \
        double e_ = tf_test_rel_err((got), (want), (n));                                               \
        if (!(e_ <= (tol))) {                                                                          \
            char what_[300];                                                                           \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                                \
            ck_abort_msg("%s: relative error %.3g > %.3g (seed %llu)", what_, e_, (double)(tol),       \
                         (unsigned long long)(seed));                                                  \
        }                                                                                              \
    } while (0)

/* --- the runner --------------------------------------------------------------------------- */

/* One test, as its own tcase named `name` (CK_RUN_CASE=name runs it alone). */
typedef struct tf_test_case {
    const char *name;
    const TTest *test;
} tf_test_case;

/* Adds one tcase per case to s, each test run between setup and teardown
 * when set (a checked fixture), with its timeout when timeout_s > 0. */
static inline void tf_test_add_cases(Suite *s, const tf_test_case *cases, size_t n, void (*setup)(void),
                                     void (*teardown)(void), double timeout_s)
{
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        if (setup || teardown) tcase_add_checked_fixture(tc, setup, teardown);
        if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
}

/* Adds one tcase named `name` holding tests[n], with its timeout when
 * timeout_s > 0 (a group CK_RUN_CASE can run alone). */
static inline void tf_test_add_group(Suite *s, const char *name, const TTest *const *tests, size_t n,
                                     double timeout_s)
{
    TCase *tc = tcase_create(name);
    if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
    for (size_t i = 0; i < n; i++) tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
}

#define TF_TEST_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Runs suite s (freed here), in forked children unless nofork (CUDA cannot
 * be used in a child forked after the parent initialized it); returns the
 * number of failed tests. */
static inline int tf_test_run(Suite *s, bool nofork)
{
    SRunner *sr = srunner_create(s);
    if (nofork) srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

#endif
