/* tests/backend-cpu/test_layernorm.c — backend-cpu: residual + layernorm, forward and backward
 * (tests/backend-cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- layernorm ------------------------------------------------------------------ */

/* y = LN(x + res) in double; returns sum(y * w) (for finite differences). */
static double ln_ref(const double *x, const double *res, const double *gamma,
                     const double *beta, int rows, int cols, double eps, double *y,
                     const double *w)
{
    double obj = 0.0;
    for (int r = 0; r < rows; r++) {
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < cols; j++) mean += x[r * cols + j] + (res ? res[r * cols + j] : 0);
        mean /= cols;
        for (int j = 0; j < cols; j++) {
            double d = x[r * cols + j] + (res ? res[r * cols + j] : 0) - mean;
            var += d * d;
        }
        var /= cols;
        for (int j = 0; j < cols; j++) {
            double in = x[r * cols + j] + (res ? res[r * cols + j] : 0);
            double v = (in - mean) / sqrt(var + eps) * gamma[j] + beta[j];
            if (y) y[r * cols + j] = v;
            if (w) obj += v * w[r * cols + j];
        }
    }
    return obj;
}

START_TEST(test_layernorm_fwd)
{
    int rows = 70, cols = 384;
    size_t n = (size_t)rows * cols;
    float *x = falloc(n), *res = falloc(n), *in = falloc(n), *y = falloc(n), *y1 = falloc(n);
    float *g = falloc(cols), *bt = falloc(cols), *mean = falloc(rows), *rstd = falloc(rows);
    double *xd = dalloc(n), *rd = dalloc(n), *gd = dalloc(cols), *bd = dalloc(cols), *want = dalloc(n);
    tf_test_fill(x, n, -3, 5);
    tf_test_fill(res, n, -1, 1);
    tf_test_fill(g, cols, 0.5f, 1.5f);
    tf_test_fill(bt, cols, -0.5f, 0.5f);
    to_double(x, xd, n), to_double(res, rd, n), to_double(g, gd, cols), to_double(bt, bd, cols);
    ln_ref(xd, rd, gd, bd, rows, cols, 1e-12, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, res, in, y, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    ASSERT_ALL(n, in[i] == x[i] + res[i]);
    for (int r = 0; r < rows; r++) {
        double m = 0.0;
        for (int j = 0; j < cols; j++) m += (double)in[r * cols + j];
        m /= cols;
        ck_assert(fabs(mean[r] - m) <= 1e-6 * fmax(1.0, fabs(m)));
    }
    /* 1 thread: same bits */
    ck_assert_int_eq(vt->layernorm_fwd(be1, NULL, x, res, in, y1, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* no residual, in_out NULL; then y aliasing x */
    ln_ref(xd, NULL, gd, bd, rows, cols, 1e-5, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, rows, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, x, g, bt, mean, rstd, rows, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(x, want, n, 5e-6);
    ASSERT_ALL(n, in[i] == (float)xd[i]); /* in_out got x */
    /* a large mean and a small spread: no cancellation (stats in double) */
    for (size_t i = 0; i < n; i++) x[i] = 1000.0f + tf_test_frand(-0.01f, 0.01f);
    to_double(x, xd, n);
    ln_ref(xd, NULL, gd, bd, rows, cols, 1e-12, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    /* rows = 1, a constant row: var = 0, y = beta exactly (eps keeps rstd finite) */
    for (int j = 0; j < cols; j++) x[j] = 2.5f;
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL((size_t)cols, y[i] == bt[i]);
    ck_assert(fabsf(rstd[0] - 1.0f / sqrtf(1e-5f)) < 1e-3f * rstd[0]);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                       0, cols, 1e-5f, TF_DTYPE_F32, &err), TF_OK);
    /* errors */
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, res, NULL, y, g, bt, mean, rstd, 1, cols, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "in_out is NULL but residual");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 0, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "cols must be >= 1, got 0");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, NULL, bt, mean, rstd, 1, 4, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "gamma is NULL");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, NULL, 1, 4, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "rstd is NULL");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 4, -1.0f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "eps must be finite and >= 0");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 4, 1e-5f,
                                 TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "x dtype F16");
    free(x), free(res), free(in), free(y), free(y1), free(g), free(bt), free(mean), free(rstd);
    free(xd), free(rd), free(gd), free(bd), free(want);
}
END_TEST

START_TEST(test_layernorm_bwd)
{
    int rows = 37, cols = 96;
    size_t n = (size_t)rows * cols;
    double eps = 1e-5;
    float *x = falloc(n), *in = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
    float *g = falloc(cols), *bt = falloc(cols), *mean = falloc(rows), *rstd = falloc(rows);
    float *dg = falloc(cols), *db = falloc(cols), *dg1 = falloc(cols), *db1 = falloc(cols);
    double *xd = dalloc(n), *gd = dalloc(cols), *bd = dalloc(cols), *w = dalloc(n);
    double *dx_fd = dalloc(n), *dg_fd = dalloc(cols), *db_fd = dalloc(cols);
    tf_test_fill(x, n, -2, 3);
    tf_test_fill(g, cols, 0.5f, 1.5f);
    tf_test_fill(bt, cols, -0.5f, 0.5f);
    tf_test_fill(dy, n, -1, 1);
    to_double(x, xd, n), to_double(g, gd, cols), to_double(bt, bd, cols), to_double(dy, w, n);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, y, g, bt, mean, rstd, rows, cols,
                                       (float)eps, TF_DTYPE_F32, &err), TF_OK);
    /* central differences of sum(LN(x) * dy) in double */
    double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = xd[i];
        xd[i] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep;
        dx_fd[i] = (fp - fm) / (2 * h);
    }
    for (int j = 0; j < cols; j++) {
        double keep = gd[j];
        gd[j] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        gd[j] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        gd[j] = keep;
        dg_fd[j] = (fp - fm) / (2 * h) + 0.5; /* + what dgamma held before */
        for (int r = 0; r < rows; r++) db_fd[j] += w[r * cols + j];
        db_fd[j] += 0.25;
        dg[j] = dg1[j] = 0.5f;
        db[j] = db1[j] = 0.25f;
    }
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows,
                                       cols, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(dx, dx_fd, n, 2e-5);
    ASSERT_CLOSE(dg, dg_fd, (size_t)cols, 2e-5);
    ASSERT_CLOSE(db, db_fd, (size_t)cols, 1e-6);
    /* 1 thread: the same bits */
    float *dx1 = falloc(n);
    ck_assert_int_eq(vt->layernorm_bwd(be1, NULL, dy, in, g, mean, rstd, dx1, false, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dx, dx1, n * sizeof *dx), 0);
    ck_assert_int_eq(memcmp(dg, dg1, cols * sizeof *dg), 0);
    ck_assert_int_eq(memcmp(db, db1, cols * sizeof *db), 0);
    /* dx_accumulate adds; dx aliasing dy gives the same */
    for (size_t i = 0; i < n; i++) dx1[i] = 1.0f;
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx1, true, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, fabsf(dx1[i] - (1.0f + dx[i])) <= 1e-6f);
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dy, false, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dy, dx, n * sizeof *dx), 0);
    /* rows whose mean is 1e5 times their spread: the backward stays accurate */
    for (size_t i = 0; i < n; i++) x[i] = 1000.0f + tf_test_frand(-0.01f, 0.01f);
    to_double(x, xd, n);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, y, g, bt, mean, rstd, rows, cols,
                                       (float)eps, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i += 7) {
        double keep = xd[i];
        xd[i] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep;
        dx_fd[i / 7] = (fp - fm) / (2 * h);
    }
    for (int j = 0; j < cols; j++) dg[j] = db[j] = 0.0f;
    for (size_t i = 0; i < n; i++) dy[i] = (float)w[i]; /* dy was overwritten above */
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows,
                                       cols, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i += 7) dx1[i / 7] = dx[i];
    ASSERT_CLOSE(dx1, dx_fd, (n + 6) / 7, 1e-4);
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, NULL, db, rows,
                                 cols, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "dgamma is NULL");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, NULL, g, mean, rstd, dx, false, dg, db, rows,
                                 cols, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "in is NULL");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, -1, cols,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "rows must be >= 0");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows, cols,
                                 TF_DTYPE_BF16, &err), TF_ERR_PLUGIN, "BF16");
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL,
                                       NULL, 0, cols, TF_DTYPE_F32, &err), TF_OK);
    free(x), free(in), free(y), free(dy), free(dx), free(dx1), free(g), free(bt), free(mean);
    free(rstd), free(dg), free(db), free(dg1), free(db1), free(xd), free(gd), free(bd), free(w);
    free(dx_fd), free(dg_fd), free(db_fd);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"layernorm_fwd", test_layernorm_fwd},
        {"layernorm_bwd", test_layernorm_bwd},
    };
    return backend_cpu_main("backend_cpu_layernorm", cases, TF_TEST_COUNT(cases));
}
