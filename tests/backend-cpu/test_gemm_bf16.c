/* tests/backend-cpu/test_gemm_bf16.c — backend-cpu: bf16 GEMMs (TF_MATMUL_BF16
 * over f32 activations, plugins/backend-cpu/gemm_bf16.c): supports() and the
 * device name agree; every shape, transpose, leading dimension, batch and
 * epilogue equals a double reference computed on the inputs rounded to bf16
 * (round to nearest even) within fp32-accumulation error, by both ways
 * through oneDNN (row slabs: full and last slabs, one thread and the team,
 * bias in the kernel or pre-filled, GELU; whole matrices: transposed A,
 * batches); the rounding is really applied (ties to even, NaN kept); and a
 * backend without bf16 GEMMs refuses the mode with the reason. Where this
 * CPU or build has no bf16 GEMMs, only the refusal is checked (and the test
 * says so). tests/backend-cpu/fixture.h says how every family is tested. */
#include "fixture.h"

static bool have_bf16(void) { return vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_F32); }
static double bf(float x) { return tf_bf16_to_f32(tf_f32_to_bf16(x)); }

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
    tf_test_fill(A, na, -1, 1);
    tf_test_fill(B, nb, -1, 1);
    tf_test_fill(C, nc, -1, 1);
    tf_test_fill(bias, (size_t)n, -1, 1);
    memcpy(C0, C, nc * sizeof *C);
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
                double want = ep == TF_EPILOGUE_BIAS_GELU ? gelu_erf_ref(pre) : pre;
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
    ck_assert_msg(strstr(name, have_bf16() ? ", bf16 GEMMs: oneDNN " : ", no bf16 GEMMs: ") != NULL,
                  "device name '%s'", name);
    ck_assert(!vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_BF16)); /* activations stay f32 */
    ck_assert(!vt->supports(be, TF_MATMUL_F16, TF_DTYPE_F32));
    if (!have_bf16()) fprintf(stderr, "test_gemm_bf16: %s: only the refusal is tested\n", name);
}
END_TEST

START_TEST(test_bf16_shapes)
{
    if (!have_bf16()) return;
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

/* The row-slab way (op(A) not transposed, batch 1; gemm_bf16.c): 128-row
 * slabs with a shorter last one (300 rows), slabs of exactly 128 (256 rows),
 * fewer rows than two slabs (100: one 64-row slab per thread and a 36-row
 * one), on the team (>= 4 MFLOP) and on one thread (be1, and the small
 * GEMMs); bias in oneDNN's kernel (alpha 1, beta 0), pre-filled (beta != 0
 * or alpha != 1), the sum post-op, output scaling and GELU. */
START_TEST(test_bf16_slabs)
{
    if (!have_bf16()) return;
    const int ms[] = {300, 256, 100, 17};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (int tb = 0; tb < 2; tb++) {
            int m = ms[i];
            check_bf16_gemm(be, false, tb, m, 160, 96, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 1);
            check_bf16_gemm(be, false, tb, m, 160, 96, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, 2);
            check_bf16_gemm(be, false, tb, m, 144, 128, 1, 0.5f, 0.25f, TF_EPILOGUE_NONE, 0);
            check_bf16_gemm(be, false, tb, m, 144, 128, 1, 1.0f, 0.5f, TF_EPILOGUE_BIAS, 3);
            check_bf16_gemm(be, false, tb, m, 144, 128, 1, -1.5f, 0.0f, TF_EPILOGUE_BIAS, 0);
            check_bf16_gemm(be1, false, tb, m, 160, 96, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, 1);
        }
    /* a BERT-sized intermediate layer: the buffers grow, then shrink back */
    check_bf16_gemm(be, false, true, 520, 1536, 384, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, 0);
    check_bf16_gemm(be, false, true, 40, 24, 16, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0);
}
END_TEST

/* A and B are rounded to bf16, to nearest even, before the product; NaN
 * survives. 1 + 2^-8 is halfway between 1 and 1 + 2^-7: it goes to 1 (even);
 * 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: it goes up. */
START_TEST(test_bf16_rounding)
{
    if (!have_bf16()) return;
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
    const tf_test_case cases[] = {
        {"bf16_supports_and_name", test_supports_and_name},
        {"bf16_shapes", test_bf16_shapes},
        {"bf16_slabs", test_bf16_slabs},
        {"bf16_rounding", test_bf16_rounding},
        {"bf16_refused", test_bf16_refused},
    };
    return backend_cpu_main("backend_cpu_gemm_bf16", cases, TF_TEST_COUNT(cases));
}
