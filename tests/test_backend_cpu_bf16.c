/* test_backend_cpu_bf16.c — backend-cpu's bf16 GEMMs (TF_MATMUL_BF16 over
 * f32 activations, plugins/backend-cpu/gemm_bf16.c): supports() and the
 * device name agree; every shape, transpose, leading dimension, batch and
 * epilogue equals a double reference computed on the inputs rounded to bf16
 * (round to nearest even) within fp32-accumulation error; the rounding is
 * really applied (ties to even, NaN kept); and a backend without bf16 GEMMs
 * refuses the mode with the reason. Where this CPU or build has no bf16
 * GEMMs, only the refusal is checked (and the test says so).
 *
 * The plugin's sources are compiled into this program; the vtable comes
 * from tfcore_plugin_entry(). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "tfcore/backend.h"
#include "tfcore/dtype.h"
#include "tfcore/plugin.h"

const tf_plugin *tfcore_plugin_entry(void);

static const tf_backend_vtable *vt;
static tf_backend *be, *be1; /* 2 threads, 1 thread */
static tf_error err;
static bool have_bf16;

static tf_backend *open_threads(int threads)
{
    tf_backend_open_args a = {sizeof a, 0, threads, 1234, NULL};
    tf_backend *b = NULL;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    return b;
}

static void setup(void)
{
    vt = tfcore_plugin_entry()->vtable;
    be = open_threads(2);
    be1 = open_threads(1);
    have_bf16 = vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_F32);
    tf_error_clear(&err);
}

static void teardown(void)
{
    vt->close(be);
    vt->close(be1);
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static double bf(float x) { return tf_bf16_to_f32(tf_f32_to_bf16(x)); }

static double gelu_ref(double x, tf_gelu_kind k)
{
    if (k == TF_GELU_TANH) {
        double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
        return x / (1.0 + exp(-2.0 * u));
    }
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

/* One bf16 GEMM on `b` against double arithmetic on the bf16-rounded A and
 * B; the padding of C's rows is left alone. */
static void check_bf16_gemm(tf_backend *b, bool ta, bool tb, int m, int n, int k, int batch,
                            float alpha, float beta, tf_gemm_epilogue ep, int pad)
{
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    int64_t sa = (int64_t)(ta ? k : m) * lda + 3, sb = (int64_t)(tb ? n : k) * ldb + 5,
            sc = (int64_t)m * ldc + 2;
    size_t na = (size_t)(sa * batch), nb = (size_t)(sb * batch), nc = (size_t)(sc * batch);
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *C0 = malloc(nc * 4),
          *aux = malloc(nc * 4), *bias = malloc((size_t)n * 4);
    for (size_t i = 0; i < na; i++) A[i] = frand();
    for (size_t i = 0; i < nb; i++) B[i] = frand();
    for (size_t i = 0; i < nc; i++) C0[i] = C[i] = frand();
    for (int j = 0; j < n; j++) bias[j] = frand();
    tf_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                      .beta = beta, .a = A, .lda = lda, .stride_a = sa, .b = B, .ldb = ldb,
                      .stride_b = sb, .c = C, .ldc = ldc, .stride_c = sc, .batch = batch,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_BF16,
                      .epilogue = ep, .bias = bias, .aux = aux, .gelu = TF_GELU_ERF};
    ck_assert_msg(vt->gemm(b, NULL, &g, &err) == TF_OK, "%s", err.msg);
    /* fp32 accumulation of k exact bf16 products */
    double tol = 4e-6 * sqrt((double)k + 1);
    for (int bi = 0; bi < batch; bi++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0.0;
                for (int l = 0; l < k; l++) {
                    const float *a = A + bi * sa, *bb = B + bi * sb;
                    s += bf(ta ? a[l * lda + i] : a[i * lda + l]) *
                         bf(tb ? bb[j * ldb + l] : bb[l * ldb + j]);
                }
                int64_t at = bi * sc + i * ldc + j;
                double pre = alpha * s + (beta != 0.0f ? beta * C0[at] : 0.0) +
                             (ep != TF_EPILOGUE_NONE ? bias[j] : 0.0);
                double want = ep == TF_EPILOGUE_BIAS_GELU ? gelu_ref(pre, TF_GELU_ERF) : pre;
                double scale = fabs(want) + 0.3 * sqrt((double)k + 1);
                ck_assert_msg(fabs(C[at] - want) / scale <= tol,
                              "bf16 gemm ta=%d tb=%d m=%d n=%d k=%d batch=%d ep=%d [%d,%d,%d]: "
                              "%.9g vs %.9g",
                              ta, tb, m, n, k, batch, ep, bi, i, j, C[at], want);
                if (ep == TF_EPILOGUE_BIAS_GELU)
                    ck_assert_msg(fabs(aux[at] - pre) / (fabs(pre) + 0.3 * sqrt((double)k + 1)) <= tol,
                                  "aux [%d,%d]: %.9g vs %.9g", i, j, aux[at], pre);
                if (j == n - 1)
                    for (int64_t p = 1; p <= pad; p++) ck_assert(C[at + p] == C0[at + p]);
            }
    free(A), free(B), free(C), free(C0), free(aux), free(bias);
}

START_TEST(test_supports_and_name)
{
    const char *name = vt->device_name(be);
    ck_assert_msg(strstr(name, have_bf16 ? ", bf16 GEMMs: oneDNN " : ", no bf16 GEMMs: ") != NULL,
                  "device name '%s'", name);
    ck_assert(!vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_BF16)); /* activations stay f32 */
    ck_assert(!vt->supports(be, TF_MATMUL_F16, TF_DTYPE_F32));
    if (!have_bf16) fprintf(stderr, "test_backend_cpu_bf16: %s: only the refusal is tested\n", name);
}
END_TEST

START_TEST(test_bf16_shapes)
{
    if (!have_bf16) return;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_bf16_gemm(be, ta, tb, 7, 5, 3, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0);
            check_bf16_gemm(be, ta, tb, 130, 70, 90, 1, 0.5f, 0.0f, TF_EPILOGUE_NONE, 3);
            check_bf16_gemm(be, ta, tb, 33, 17, 129, 3, -2.0f, 0.25f, TF_EPILOGUE_NONE, 2);
            check_bf16_gemm(be1, ta, tb, 150, 96, 64, 2, 0.7f, 0.5f, TF_EPILOGUE_BIAS, 1);
            check_bf16_gemm(be, ta, tb, 150, 96, 64, 2, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, 1);
        }
    check_bf16_gemm(be, false, true, 1, 300, 200, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0);
    check_bf16_gemm(be, false, false, 512, 256, 1024, 1, 1.0f, 1.0f, TF_EPILOGUE_NONE, 0);
}
END_TEST

/* A and B are rounded to bf16, to nearest even, before the product; NaN
 * survives. 1 + 2^-8 is halfway between 1 and 1 + 2^-7: it goes to 1 (even);
 * 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: it goes up. */
START_TEST(test_bf16_rounding)
{
    if (!have_bf16) return;
    float a[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-10f, NAN};
    float one = 1.0f, c[4];
    tf_gemm_desc g = {.m = 4, .n = 1, .k = 1, .alpha = 1, .a = a, .lda = 1, .b = &one, .ldb = 1,
                      .c = c, .ldc = 1, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                      .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_BF16};
    ck_assert_int_eq(vt->gemm(be, NULL, &g, &err), TF_OK);
    ck_assert_float_eq(c[0], 1.0f);
    ck_assert_float_eq(c[1], 1.0f + 0x1p-6f);
    ck_assert_float_eq(c[2], 1.0f);
    ck_assert(isnan(c[3]));
    /* the same GEMM in fp32 keeps every input bit */
    g.mode = TF_MATMUL_FP32;
    ck_assert_int_eq(vt->gemm(be, NULL, &g, &err), TF_OK);
    ck_assert_float_eq(c[2], 1.0f + 0x1p-10f);
}
END_TEST

START_TEST(test_bf16_refused)
{
    float a[4] = {0}, c[4];
    tf_gemm_desc g = {.m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = a, .ldb = 2,
                      .c = c, .ldc = 2, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                      .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_BF16};
    /* a backend without bf16 GEMMs, as this CPU or build would open it */
    struct cpu_bf16 *saved = be->bf16;
    char why[sizeof be->bf16_why];
    memcpy(why, be->bf16_why, sizeof why);
    be->bf16 = NULL;
    snprintf(be->bf16_why, sizeof be->bf16_why, "no bf16 GEMMs: this CPU has no AVX512_BF16 (test)");
    tf_error_clear(&err);
    ck_assert_int_eq(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN);
    ck_assert_msg(strstr(err.msg, "backend-cpu: gemm: matmul mode bf16: no bf16 GEMMs: this CPU has "
                                  "no AVX512_BF16") != NULL,
                  "%s", err.msg);
    ck_assert(!vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_F32));
    be->bf16 = saved;
    memcpy(be->bf16_why, why, sizeof why);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_cpu_bf16");
    TCase *tc = tcase_create("bf16");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_supports_and_name);
    tcase_add_test(tc, test_bf16_shapes);
    tcase_add_test(tc, test_bf16_rounding);
    tcase_add_test(tc, test_bf16_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
