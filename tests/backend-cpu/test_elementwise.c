/* tests/backend-cpu/test_elementwise.c — backend-cpu: the elementwise ops and reductions: the
 * vectorized math, GELU and tanh, add, scale, cast, sum_rows, sum_squares, finite_check
 * (tests/backend-cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- activations ------------------------------------------------------------------- */

/* The vectorizable math against double libm over dense grids. */
static double ulps(float got, double want)
{
    float w = (float)want;
    double u = (double)nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs((double)got - want) / u;
}

START_TEST(test_math_accuracy)
{
    double worst_exp = 0, worst_tanh = 0, worst_cdf = 0, worst_pdf = 0;
    for (double v = -87.0; v <= 88.5; v += 1.7e-4) {
        float x = (float)v;
        worst_exp = fmax(worst_exp, ulps(cpu_expf(x), exp((double)x)));
    }
    for (double v = -12.0; v <= 12.0; v += 3e-5) {
        float x = (float)v;
        worst_tanh = fmax(worst_tanh, ulps(cpu_tanhf(x), tanh((double)x)));
        worst_cdf = fmax(worst_cdf, ulps(cpu_normal_cdf(x), 0.5 * erfc(-(double)x / sqrt(2.0))));
        worst_pdf = fmax(worst_pdf, ulps(cpu_normal_pdf(x), exp(-(double)x * x / 2) / sqrt(2 * M_PI)));
    }
    ck_assert_msg(worst_exp <= 2, "exp: %g ulp", worst_exp);
    ck_assert_msg(worst_tanh <= 2, "tanh: %g ulp", worst_tanh);
    ck_assert_msg(worst_cdf <= 8, "Phi: %g ulp", worst_cdf);
    ck_assert_msg(worst_pdf <= 5, "phi: %g ulp", worst_pdf);
    /* special values */
    ck_assert(isnan(cpu_expf(NAN)) && isinf(cpu_expf(INFINITY)) && cpu_expf(-INFINITY) == 0.0f);
    ck_assert(cpu_expf(88.8f) == INFINITY && cpu_expf(-105.0f) == 0.0f);
    ck_assert(cpu_expf(-100.0f) > 0.0f); /* subnormal results are kept */
    ck_assert(fabs(cpu_expf(-100.0f) - exp(-100.0)) <= 0x1p-149); /* one subnormal ulp */
    ck_assert(isnan(cpu_tanhf(NAN)) && cpu_tanhf(INFINITY) == 1.0f && cpu_tanhf(-INFINITY) == -1.0f);
    ck_assert(isnan(cpu_normal_cdf(NAN)) && cpu_normal_cdf(INFINITY) == 1.0f &&
              cpu_normal_cdf(-INFINITY) == 0.0f);
    ck_assert(cpu_tanhf(-0.0f) == 0.0f && signbit(cpu_tanhf(-0.0f)));
}
END_TEST

/* dgelu/dx in double */
static double gelu_grad_ref(double x, tf_gelu_kind k)
{
    if (k == TF_GELU_ERF) return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
    double b = sqrt(2.0 / M_PI), u = b * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * b * (1 + 3 * 0.044715 * x * x);
}

START_TEST(test_gelu_tanh_ops)
{
    size_t n = 200001;
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
    double *want = dalloc(n);
    for (size_t i = 0; i < n; i++) x[i] = -10.0f + 20.0f * (float)i / (float)(n - 1);
    tf_test_fill(dy, n, -1, 1);
    for (int k = 0; k < 2; k++) {
        tf_gelu_kind kind = (tf_gelu_kind)k;
        ck_assert_int_eq(vt->gelu_fwd(be, NULL, x, y, n, kind, TF_DTYPE_F32, &err), TF_OK);
        for (size_t i = 0; i < n; i++) want[i] = kind == TF_GELU_ERF ? gelu_erf_ref(x[i]) : gelu_tanh_ref(x[i]);
        /* relative to the value, even in the left tail (down to 1e-20 for erf) */
        double e = 0.0;
        for (size_t i = 0; i < n; i++)
            if (fabs(want[i]) > 1e-20) e = fmax(e, fabs(y[i] - want[i]) / fabs(want[i]));
        ck_assert_msg(e < (kind == TF_GELU_ERF ? 2e-6 : 2e-5), "gelu %d: %g", k, e);
        ck_assert_int_eq(vt->gelu_bwd(be, NULL, dy, x, dx, n, kind, TF_DTYPE_F32, &err), TF_OK);
        for (size_t i = 0; i < n; i++) want[i] = dy[i] * gelu_grad_ref(x[i], kind);
        /* gelu' crosses 0 near x = -0.75: compare against |dy| there */
        e = 0.0;
        for (size_t i = 0; i < n; i++)
            e = fmax(e, fabs(dx[i] - want[i]) / fmax(fabs(want[i]), 1e-2 * fabs(dy[i])));
        ck_assert_msg(e < 1e-5, "gelu_bwd %d: %g", k, e);
        /* finite differences of the double reference at a few points */
        for (double v = -4.0; v <= 4.0; v += 0.37) {
            double hh = 1e-6;
            double f1 = kind == TF_GELU_ERF ? gelu_erf_ref(v + hh) - gelu_erf_ref(v - hh)
                                            : gelu_tanh_ref(v + hh) - gelu_tanh_ref(v - hh);
            ck_assert(fabs(f1 / (2 * hh) - gelu_grad_ref(v, kind)) < 1e-8);
        }
        /* dx aliasing dy */
        float *dy2 = falloc(n);
        memcpy(dy2, dy, n * sizeof *dy);
        ck_assert_int_eq(vt->gelu_bwd(be, NULL, dy2, x, dy2, n, kind, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(memcmp(dy2, dx, n * sizeof *dx), 0);
        free(dy2);
    }
    /* tanh */
    ck_assert_int_eq(vt->tanh_fwd(be, NULL, x, y, n, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i++) want[i] = tanh((double)x[i]);
    ASSERT_CLOSE(y, want, n, 3e-7);
    ck_assert_int_eq(vt->tanh_bwd(be, NULL, dy, y, dx, n, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i++) want[i] = dy[i] * (1.0 - (double)y[i] * y[i]);
    ASSERT_CLOSE(dx, want, n, 5e-6); /* 1 - y*y in float, as torch: cancels near |y| = 1 */
    float *dy3 = falloc(n); /* dx aliasing dy */
    memcpy(dy3, dy, n * sizeof *dy);
    ck_assert_int_eq(vt->tanh_bwd(be, NULL, dy3, y, dy3, n, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dy3, dx, n * sizeof *dx), 0);
    free(dy3);
    for (double v = -3.0; v <= 3.0; v += 0.41) /* 1 - tanh^2 is tanh' */
        ck_assert(fabs((tanh(v + 1e-6) - tanh(v - 1e-6)) / 2e-6 - (1 - tanh(v) * tanh(v))) < 1e-8);
    ck_assert_int_eq(vt->tanh_fwd(be, NULL, x, x, n, TF_DTYPE_F32, &err), TF_OK); /* in place */
    ck_assert_int_eq(memcmp(x, y, n * sizeof *x), 0);
    /* tiny n stays on the calling thread; n = 0 is fine */
    ck_assert_int_eq(vt->gelu_fwd(be, NULL, x, y, 3, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->gelu_fwd(be, NULL, NULL, NULL, 0, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->gelu_fwd(be, NULL, x, y, n, (tf_gelu_kind)2, TF_DTYPE_F32, &err), TF_ERR_RUNTIME,
               "unknown gelu kind 2");
    ASSERT_ERR(vt->gelu_bwd(be, NULL, dy, x, dx, n, (tf_gelu_kind)-1, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "unknown gelu kind -1");
    ASSERT_ERR(vt->gelu_fwd(be, NULL, x, y, n, TF_GELU_ERF, TF_DTYPE_BF16, &err), TF_ERR_PLUGIN,
               "gelu_fwd: x dtype BF16");
    ASSERT_ERR(vt->gelu_bwd(be, NULL, dy, NULL, dx, n, TF_GELU_ERF, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "x is NULL");
    ASSERT_ERR(vt->tanh_fwd(be, NULL, x, NULL, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "y is NULL");
    ASSERT_ERR(vt->tanh_bwd(be, NULL, dy, y, NULL, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME,
               "dx is NULL");
    ASSERT_ERR(vt->tanh_bwd(be, NULL, dy, y, dx, n, TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "F16");
    free(x), free(y), free(dy), free(dx), free(want);
}
END_TEST

/* --- add, scale, cast ------------------------------------------------------------------ */

START_TEST(test_add_scale_cast)
{
    size_t n = 100003;
    float *a = falloc(n), *b = falloc(n), *y = falloc(n), *c = falloc(n);
    tf_test_fill(a, n, -1, 1);
    tf_test_fill(b, n, -1, 1);
    ck_assert_int_eq(vt->add(be, NULL, a, b, y, n, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, y[i] == a[i] + b[i]);
    memcpy(c, a, n * sizeof *a);
    ck_assert_int_eq(vt->add(be, NULL, c, b, c, n, TF_DTYPE_F32, &err), TF_OK); /* y = a */
    ck_assert_int_eq(memcmp(c, y, n * sizeof *c), 0);
    memcpy(c, b, n * sizeof *b);
    ck_assert_int_eq(vt->add(be, NULL, a, c, c, n, TF_DTYPE_F32, &err), TF_OK); /* y = b */
    ck_assert_int_eq(memcmp(c, y, n * sizeof *c), 0);
    ck_assert_int_eq(vt->scale(be, NULL, y, n, -0.5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, y[i] == c[i] * -0.5f);
    /* casts: f32 -> f16/bf16 -> f32 equals libtfcore's rounding; f64 both ways */
    uint16_t *h = malloc(n * 2);
    double *d = dalloc(n);
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_F16, n, &err), TF_OK);
    ASSERT_ALL(n, (h[i]) == (tf_f32_to_f16(a[i])));
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_F16, c, TF_DTYPE_F32, n, &err), TF_OK);
    ASSERT_ALL(n, c[i] == tf_f16_to_f32(h[i]));
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_BF16, n, &err), TF_OK);
    ASSERT_ALL(n, (h[i]) == (tf_f32_to_bf16(a[i])));
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_BF16, c, TF_DTYPE_F32, n, &err), TF_OK);
    ASSERT_ALL(n, c[i] == tf_bf16_to_f32(h[i]));
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, d, TF_DTYPE_F64, n, &err), TF_OK);
    ck_assert_int_eq(vt->cast(be, NULL, d, TF_DTYPE_F64, c, TF_DTYPE_F32, n, &err), TF_OK);
    ck_assert_int_eq(memcmp(a, c, n * sizeof *a), 0);
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, c, TF_DTYPE_F32, n, &err), TF_OK);
    ck_assert_int_eq(memcmp(a, c, n * sizeof *a), 0);
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_BF16, h, TF_DTYPE_BF16, n, &err), TF_OK);
    ASSERT_ERR(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_I32, n, &err), TF_ERR_PLUGIN,
               "cast from F32 to I32 is not supported");
    ASSERT_ERR(vt->cast(be, NULL, a, (tf_dtype)77, h, TF_DTYPE_F32, n, &err), TF_ERR_PLUGIN,
               "cast from ? to F32");
    ASSERT_ERR(vt->cast(be, NULL, NULL, TF_DTYPE_F32, h, TF_DTYPE_F16, n, &err), TF_ERR_RUNTIME,
               "src is NULL");
    ASSERT_ERR(vt->add(be, NULL, a, NULL, y, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "b is NULL");
    ASSERT_ERR(vt->add(be, NULL, a, b, y, n, TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "a dtype F16");
    ASSERT_ERR(vt->scale(be, NULL, NULL, n, 2, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "x is NULL");
    ASSERT_ERR(vt->scale(be, NULL, y, n, 2, TF_DTYPE_BF16, &err), TF_ERR_PLUGIN, "BF16");
    ck_assert_int_eq(vt->scale(be, NULL, NULL, 0, 2, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->add(be, NULL, NULL, NULL, NULL, 0, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->cast(be, NULL, NULL, TF_DTYPE_F32, NULL, TF_DTYPE_F16, 0, &err), TF_OK);
    free(a), free(b), free(y), free(c), free(h), free(d);
}
END_TEST

/* --- sum_rows, sum_squares, finite_check ------------------------------------------ */

START_TEST(test_sum_rows)
{
    int rows = 333, cols = 150;
    float *dy = falloc((size_t)rows * cols), *db = falloc(cols), *db1 = falloc(cols);
    double *want = dalloc(cols);
    tf_test_fill(dy, (size_t)rows * cols, -1, 1);
    for (int j = 0; j < cols; j++) {
        db[j] = 0.5f;
        for (int r = 0; r < rows; r++) want[j] += dy[r * cols + j];
    }
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, rows, cols, db, false, &err), TF_OK);
    ASSERT_CLOSE(db, want, (size_t)cols, 1e-6);
    ck_assert_int_eq(vt->sum_rows(be1, NULL, dy, TF_DTYPE_F32, rows, cols, db1, false, &err), TF_OK);
    ck_assert_int_eq(memcmp(db, db1, cols * sizeof *db), 0); /* same bits on 1 and 2 threads */
    for (int j = 0; j < cols; j++) {
        want[j] += 0.25;
        db[j] = 0.25f;
    }
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, rows, cols, db, true, &err), TF_OK);
    ASSERT_CLOSE(db, want, (size_t)cols, 1e-6);
    /* rows = 1, rows = 0 */
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, 1, 3, db, false, &err), TF_OK);
    ck_assert(db[2] == dy[2]);
    ck_assert_int_eq(vt->sum_rows(be, NULL, NULL, TF_DTYPE_F32, 0, 3, db, false, &err), TF_OK);
    ck_assert(db[2] == 0.0f);
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_BF16, 1, 3, db, false, &err), TF_ERR_PLUGIN,
               "sum_rows: dy dtype BF16");
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, -1, 3, db, false, &err), TF_ERR_RUNTIME,
               "rows must be >= 0");
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, 1, 3, NULL, false, &err), TF_ERR_RUNTIME,
               "dbias is NULL");
    ASSERT_ERR(vt->sum_rows(be, NULL, NULL, TF_DTYPE_F32, 1, 3, db, false, &err), TF_ERR_RUNTIME,
               "dy is NULL");
    free(dy), free(db), free(db1), free(want);
}
END_TEST

START_TEST(test_sum_squares)
{
    size_t n = 1000003;
    float *x = falloc(n), out = -1, out1 = -1;
    tf_test_fill(x, n, -2, 2);
    double want = 0.0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, n, &out, &err), TF_OK);
    ck_assert_msg(fabs(out - want) <= 1e-7 * want, "%g vs %g", out, want);
    ck_assert_int_eq(vt->sum_squares(be1, NULL, x, n, &out1, &err), TF_OK);
    ck_assert(out == out1);
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, 3, &out, &err), TF_OK);
    ck_assert(fabs(out - (x[0] * x[0] + x[1] * x[1] + x[2] * x[2])) < 1e-6);
    ck_assert_int_eq(vt->sum_squares(be, NULL, NULL, 0, &out, &err), TF_OK);
    ck_assert(out == 0.0f);
    x[5] = NAN;
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, n, &out, &err), TF_OK);
    ck_assert(isnan(out));
    ASSERT_ERR(vt->sum_squares(be, NULL, x, n, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->sum_squares(be, NULL, NULL, 3, &out, &err), TF_ERR_RUNTIME, "x is NULL");
    free(x);
}
END_TEST

START_TEST(test_finite_check)
{
    size_t n = 100000;
    float *x = falloc(n);
    tf_test_fill(x, n, -1e30f, 1e30f);
    int32_t found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    x[n - 1] = INFINITY;
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    x[n - 1] = 0;
    x[77777] = -NAN;
    found = 0;
    ck_assert_int_eq(vt->finite_check(be1, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    x[77777] = FLT_MAX;
    found = 1; /* |= : a flag already set stays set */
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    uint16_t h[4] = {tf_f32_to_f16(1.0f), tf_f32_to_f16(65504.0f), 0, 0};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, h, 4, TF_DTYPE_F16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    h[3] = tf_f32_to_f16(1e6f); /* overflows to inf */
    ck_assert_int_eq(vt->finite_check(be, NULL, h, 4, TF_DTYPE_F16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    uint16_t bf[3] = {tf_f32_to_bf16(3e38f), tf_f32_to_bf16(-1.0f), 0};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, bf, 3, TF_DTYPE_BF16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    bf[2] = tf_f32_to_bf16(NAN);
    ck_assert_int_eq(vt->finite_check(be, NULL, bf, 3, TF_DTYPE_BF16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    double d[2] = {DBL_MAX, -HUGE_VAL};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, d, 1, TF_DTYPE_F64, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_int_eq(vt->finite_check(be, NULL, d, 2, TF_DTYPE_F64, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(vt->finite_check(be, NULL, NULL, 0, TF_DTYPE_F32, &found, &err), TF_OK);
    ASSERT_ERR(vt->finite_check(be, NULL, x, n, TF_DTYPE_I32, &found, &err), TF_ERR_PLUGIN,
               "x dtype I32 is not supported");
    ASSERT_ERR(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, NULL, &err), TF_ERR_RUNTIME,
               "found is NULL");
    ASSERT_ERR(vt->finite_check(be, NULL, NULL, n, TF_DTYPE_F32, &found, &err), TF_ERR_RUNTIME,
               "x is NULL");
    free(x);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"sum_rows", test_sum_rows},
        {"sum_squares", test_sum_squares},
        {"finite_check", test_finite_check},
        {"math", test_math_accuracy},
        {"gelu_tanh", test_gelu_tanh_ops},
        {"add_scale_cast", test_add_scale_cast},
    };
    return backend_cpu_main("backend_cpu_elementwise", cases, TF_TEST_COUNT(cases));
}
