/* tests/backend-cpu/test_gemm.c — backend-cpu: GEMM: shapes, transposes, strided batches,
 * leading dimensions, the epilogues, the errors (tests/backend-cpu/fixture.h says how every
 * family is tested). */
#include "fixture.h"

/* --- GEMM ------------------------------------------------------------------------ */

/* Naive double C = alpha op(A) op(B) + beta C (+ bias, gelu), one batch item. */
static void gemm_ref(const tf_gemm_desc *g, int bi, const double *c_in, double *pre,
                     double *c_out)
{
    const float *a = (const float *)g->a + (int64_t)bi * g->stride_a;
    const float *b = (const float *)g->b + (int64_t)bi * g->stride_b;
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double s = 0.0;
            for (int l = 0; l < g->k; l++) {
                double av = g->trans_a ? a[(int64_t)l * g->lda + i] : a[(int64_t)i * g->lda + l];
                double bv = g->trans_b ? b[(int64_t)j * g->ldb + l] : b[(int64_t)l * g->ldb + j];
                s += av * bv;
            }
            double v = g->alpha * s;
            if (g->beta != 0.0f) v += g->beta * c_in[i * g->n + j];
            if (g->epilogue != TF_EPILOGUE_NONE) v += g->bias[j];
            pre[i * g->n + j] = v;
            if (g->epilogue == TF_EPILOGUE_BIAS_GELU)
                v = g->gelu == TF_GELU_TANH ? gelu_tanh_ref(v) : gelu_erf_ref(v);
            c_out[i * g->n + j] = v;
        }
}

/* Runs one GEMM shape on `b` and checks every batch item (and the untouched
 * padding between rows) against gemm_ref. */
static void check_gemm(tf_backend *b, bool ta, bool tb, int m, int n, int k, int batch,
                       float alpha, float beta, tf_gemm_epilogue ep, tf_gelu_kind gk,
                       int pad, int64_t stride_b_override)
{
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    if (lda < 1) lda = 1; /* k = 0 */
    if (ldb < 1) ldb = 1;
    int64_t sa = (int64_t)(ta ? k : m) * lda + 5, sb = (int64_t)(tb ? n : k) * ldb + 3,
            sc = (int64_t)m * ldc + 7;
    if (stride_b_override >= 0) sb = stride_b_override;
    size_t na = (size_t)(sa * batch), nb = (size_t)(sb * (batch - 1) + (tb ? n : k) * ldb + 1),
           nc = (size_t)(sc * batch);
    float *A = falloc(na), *B = falloc(nb), *C = falloc(nc), *C0 = falloc(nc), *aux = falloc(nc);
    float *bias = falloc((size_t)n);
    tf_test_fill(A, na, -1, 1);
    tf_test_fill(B, nb, -1, 1);
    tf_test_fill(C, nc, -1, 1);
    tf_test_fill(bias, (size_t)n, -1, 1);
    memcpy(C0, C, nc * sizeof *C);
    for (size_t i = 0; i < nc; i++) aux[i] = 777.0f;
    tf_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                      .beta = beta, .a = A, .lda = lda, .stride_a = sa, .b = B, .ldb = ldb,
                      .stride_b = sb, .c = C, .ldc = ldc, .stride_c = sc, .batch = batch,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32,
                      .mode = TF_MATMUL_FP32, .epilogue = ep, .bias = bias, .aux = aux,
                      .gelu = gk};
    ck_assert_int_eq(vt->gemm(b, NULL, &g, &err), TF_OK);
    double *cin = dalloc((size_t)m * n), *pre = dalloc((size_t)m * n), *want = dalloc((size_t)m * n);
    float *got = falloc((size_t)m * n), *got_aux = falloc((size_t)m * n);
    for (int bi = 0; bi < batch; bi++) {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                cin[i * n + j] = C0[bi * sc + i * ldc + j];
                got[i * n + j] = C[bi * sc + i * ldc + j];
                got_aux[i * n + j] = aux[bi * sc + i * ldc + j];
            }
        gemm_ref(&g, bi, cin, pre, want);
        /* fp32 sums of k products: error grows like sqrt(k) ulps of the terms */
        double tol = 2e-6 * sqrt((double)(k + 1)) * 4;
        double e = 0.0;
        for (int i = 0; i < m * n; i++)
            e = fmax(e, fabs(got[i] - want[i]) / (fabs(want[i]) + sqrt((double)k + 1) * 0.3));
        ck_assert_msg(e <= tol, "gemm ta=%d tb=%d m=%d n=%d k=%d batch=%d ep=%d: err %.3g", ta,
                      tb, m, n, k, batch, ep, e);
        if (ep == TF_EPILOGUE_BIAS_GELU) {
            double ea = 0.0;
            for (int i = 0; i < m * n; i++)
                ea = fmax(ea, fabs(got_aux[i] - pre[i]) / (fabs(pre[i]) + sqrt((double)k + 1) * 0.3));
            ck_assert_msg(ea <= tol, "aux err %.3g", ea);
        }
        /* the padding of each row and the gap after the item are untouched */
        int64_t padw = ldc - n, at = bi * sc;
        ASSERT_ALL((size_t)(m * padw), C[at + (int64_t)i / padw * ldc + n + (int64_t)i % padw] ==
                                           C0[at + (int64_t)i / padw * ldc + n + (int64_t)i % padw]);
        ASSERT_ALL((size_t)(sc - m * ldc), C[at + m * ldc + (int64_t)i] == C0[at + m * ldc + (int64_t)i]);
    }
    free(A), free(B), free(C), free(C0), free(aux), free(bias), free(cin), free(pre), free(want);
    free(got), free(got_aux);
}

START_TEST(test_gemm_shapes)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(be, ta, tb, 7, 5, 3, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
            check_gemm(be, ta, tb, 130, 70, 90, 1, 0.5f, 0.0f, TF_EPILOGUE_NONE, 0, 3, -1);
            check_gemm(be, ta, tb, 40, 300, 64, 1, 1.0f, 1.0f, TF_EPILOGUE_NONE, 0, 1, -1);
            check_gemm(be, ta, tb, 33, 17, 129, 3, -2.0f, 0.25f, TF_EPILOGUE_NONE, 0, 2, -1);
            check_gemm(be1, ta, tb, 130, 70, 90, 2, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
        }
    /* rows = 1, cols = 1 */
    check_gemm(be, false, true, 1, 300, 200, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, false, false, 300, 1, 200, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    /* batch > threads, batch with B shared (stride 0) */
    check_gemm(be, false, false, 64, 64, 64, 5, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, true, false, 64, 48, 80, 4, 1.0f, 0.5f, TF_EPILOGUE_NONE, 0, 1, 0);
    /* k = 0: C = beta C */
    check_gemm(be, false, false, 9, 8, 0, 2, 1.0f, 0.5f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, false, false, 9, 8, 0, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0, 0, -1);
}
END_TEST

START_TEST(test_gemm_epilogues)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(be, ta, tb, 150, 96, 64, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0, 2, -1);
            check_gemm(be, ta, tb, 150, 96, 64, 1, 0.7f, 0.5f, TF_EPILOGUE_BIAS, 0, 0, -1);
            check_gemm(be, ta, tb, 150, 96, 64, 2, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, TF_GELU_ERF,
                       1, -1);
            check_gemm(be, ta, tb, 20, 250, 64, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU,
                       TF_GELU_TANH, 0, -1);
            check_gemm(be1, ta, tb, 9, 7, 5, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, TF_GELU_TANH,
                       0, -1);
        }
    /* m = 0 / n = 0: nothing to do, nothing read */
    tf_gemm_desc g = {.m = 0, .n = 4, .k = 3, .alpha = 1, .lda = 3, .ldb = 4, .ldc = 4, .batch = 1,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32};
    ck_assert_int_eq(vt->gemm(be, NULL, &g, &err), TF_OK);
}
END_TEST

START_TEST(test_gemm_errors)
{
    float a[16] = {0}, b[16] = {0}, c[16] = {0}, bias[4] = {0};
    tf_gemm_desc ok = {.m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2,
                       .c = c, .ldc = 2, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                       .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_FP32};
    ck_assert_int_eq(vt->gemm(be, NULL, &ok, &err), TF_OK);
    tf_gemm_desc g;
    ASSERT_ERR(vt->gemm(be, NULL, NULL, &err), TF_ERR_RUNTIME, "gemm: desc is NULL");
    g = ok, g.m = -1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "m must be >= 0, got -1");
    g = ok, g.batch = 0;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "batch must be >= 1");
    g = ok, g.lda = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "lda is 1, must be in [2,");
    g = ok, g.n = 3, g.ldc = 3;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "ldb is 2, must be in [3,");
    g = ok, g.ldb = 3, g.ldc = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "ldc is 1");
    g = ok, g.ab_dtype = TF_DTYPE_F16;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "ab dtype F16 is not supported");
    g = ok, g.c_dtype = TF_DTYPE_BF16;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "c dtype BF16");
    g = ok, g.c_dtype = (tf_dtype)99;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "dtype 99 is not a tf_dtype");
    g = ok, g.mode = TF_MATMUL_TF32;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "matmul mode 1 is not supported");
    g = ok, g.batch = 2, g.stride_a = -4;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "batch strides must be >= 0");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "bias (BIAS epilogue) is NULL");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "aux (BIAS_GELU epilogue) is NULL");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias, g.aux = b, g.beta = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "needs beta = 0");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias, g.aux = b, g.gelu = (tf_gelu_kind)3;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "unknown gelu kind 3");
    g = ok, g.epilogue = (tf_gemm_epilogue)7;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "unknown epilogue 7");
    g = ok, g.a = NULL;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "gemm: a is NULL");
    g = ok, g.c = NULL;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "gemm: c is NULL");
    ASSERT_ERR(vt->gemm(NULL, NULL, &ok, &err), TF_ERR_RUNTIME, "backend is NULL");
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"gemm_shapes", test_gemm_shapes},
        {"gemm_epilogues", test_gemm_epilogues},
        {"gemm_errors", test_gemm_errors},
    };
    return backend_cpu_main("backend_cpu_gemm", cases, TF_TEST_COUNT(cases));
}
