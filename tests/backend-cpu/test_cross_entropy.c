/* tests/backend-cpu/test_cross_entropy.c — backend-cpu: softmax cross-entropy, plain and with
 * label smoothing (tests/backend-cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- cross-entropy ------------------------------------------------------------------------ */

static double ce_ref(const double *x, int64_t ld, int rows, int classes, const int32_t *labels,
                     int ignore, double *grad, double gscale)
{
    double sum = 0.0;
    int count = 0;
    for (int r = 0; r < rows; r++) count += labels[r] != ignore;
    for (int r = 0; r < rows; r++) {
        const double *xr = x + r * ld;
        if (labels[r] == ignore) {
            if (grad)
                for (int j = 0; j < classes; j++) grad[r * ld + j] = 0.0;
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int j = 0; j < classes; j++) mx = fmax(mx, xr[j]);
        for (int j = 0; j < classes; j++) s += exp(xr[j] - mx);
        double lse = mx + log(s);
        sum += lse - xr[labels[r]];
        if (grad)
            for (int j = 0; j < classes; j++)
                grad[r * ld + j] = gscale * (exp(xr[j] - lse) - (j == labels[r])) / count;
    }
    return count ? sum / count : 0.0;
}

START_TEST(test_cross_entropy)
{
    int rows = 67, classes = 130;
    int64_t ld = 133;
    size_t n = (size_t)rows * ld;
    float *x = falloc(n), *dx = falloc(n), *dx1 = falloc(n), loss = -1, loss1 = -2;
    double *xd = dalloc(n), *want = dalloc(n), *fd = dalloc(n);
    int32_t *lab = malloc(sizeof(int32_t) * rows);
    tf_test_fill(x, n, -6, 6);
    to_double(x, xd, n);
    for (int r = 0; r < rows; r++) lab[r] = r % 5 == 3 ? -100 : (int32_t)(tf_test_urand() * classes);
    for (size_t i = 0; i < n; i++) dx[i] = 5.0f; /* the padding must stay untouched */
    double wl = ce_ref(xd, ld, rows, classes, lab, -100, want, 2.0);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss, dx, 2.0f, &err), TF_OK);
    ck_assert_msg(fabs(loss - wl) <= 1e-6 * wl, "loss %g vs %g", loss, wl);
    ASSERT_ALL(n, (int64_t)i % ld < classes ? fabs(dx[i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-9
                                            : dx[i] == 5.0f);
    /* the gradient is d(loss)/d(logits): central differences in double */
    double h = 1e-6;
    for (int r = 0; r < rows; r += 9)
        for (int j = 0; j < classes; j += 13) {
            double keep = xd[r * ld + j];
            xd[r * ld + j] = keep + h;
            double fp = ce_ref(xd, ld, rows, classes, lab, -100, NULL, 1);
            xd[r * ld + j] = keep - h;
            double fm = ce_ref(xd, ld, rows, classes, lab, -100, NULL, 1);
            xd[r * ld + j] = keep;
            ck_assert(fabs(2.0 * (fp - fm) / (2 * h) - dx[r * ld + j]) < 1e-7);
        }
    /* 1 thread: same bits; dlogits NULL: loss only; dlogits aliasing logits */
    ck_assert_int_eq(vt->cross_entropy(be1, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, dx1, 2.0f, &err), TF_OK);
    ck_assert(loss == loss1);
    for (int r = 0; r < rows; r++) ck_assert_int_eq(memcmp(dx + r * ld, dx1 + r * ld, classes * 4), 0);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, NULL, 1.0f, &err), TF_OK);
    ck_assert(loss == loss1);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, x, 2.0f, &err), TF_OK);
    for (int r = 0; r < rows; r++) ck_assert_int_eq(memcmp(dx + r * ld, x + r * ld, classes * 4), 0);
    /* every row ignored: loss 0, gradient 0 */
    for (int r = 0; r < rows; r++) lab[r] = 7;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, 7,
                                       &loss, dx, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f);
    ASSERT_ALL(n, (int64_t)i % ld >= classes || dx[i] == 0.0f);
    /* rows = 1, classes = 1: loss 0, gradient 0 */
    float one = 3.0f, g1 = 9;
    int32_t l0 = 0;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, &one, 1, TF_DTYPE_F32, 1, 1, &l0, -100, &loss,
                                       &g1, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f && g1 == 0.0f);
    /* large logits do not overflow (max subtracted) */
    float big[3] = {1000.0f, 999.0f, -1000.0f};
    int32_t l1 = 1;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, big, 3, TF_DTYPE_F32, 1, 3, &l1, -100, &loss,
                                       NULL, 1.0f, &err), TF_OK);
    ck_assert(fabs(loss - (1.0 + log1p(exp(-1.0)))) < 1e-6);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, NULL, 3, TF_DTYPE_F32, 0, 3, NULL, -100, &loss,
                                       NULL, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f);
    /* errors */
    for (int r = 0; r < rows; r++) lab[r] = 1;
    lab[40] = classes;
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_DATA,
               "label 130 at row 40 is outside [0, 130) and is not ignore_index -100");
    lab[40] = -1;
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_DATA, "label -1 at row 40");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, 3, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "ld_logits 3 is less than classes 130");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, NULL,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "loss is NULL");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, NULL, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "labels is NULL");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, 0, lab, -100, &loss, dx,
                                 1.0f, &err), TF_ERR_RUNTIME, "classes must be >= 1");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F16, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_PLUGIN, "logits dtype F16");
    free(x), free(dx), free(dx1), free(xd), free(want), free(fd), free(lab);
}
END_TEST

/* cross_entropy_ex: ε = 0 is the cross_entropy slot bit for bit; ε > 0 is
 * transformers' LabelSmoother (checked here against its formula in double;
 * tests/ref/backend_cpu_vs_torch.py compares with LabelSmoother itself);
 * dlogits may alias logits; short descriptors and ε outside [0, 1] refused. */
START_TEST(test_cross_entropy_smoothed)
{
    int rows = 23, classes = 17;
    size_t n = (size_t)rows * classes;
    float *x = falloc(n), *dx = falloc(n), *dx0 = falloc(n), *xa = falloc(n), loss = -1, loss0 = -2;
    int32_t *lab = malloc(sizeof(int32_t) * rows);
    tf_test_fill(x, n, -6, 6);
    for (int r = 0; r < rows; r++) lab[r] = r % 4 == 1 ? -100 : (int32_t)(tf_test_urand() * classes);
    tf_cross_entropy_desc d = {sizeof d, x, classes, TF_DTYPE_F32, rows, classes, lab, -100, 0.0f,
                               &loss, dx, 0.5f};
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, classes, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss0, dx0, 0.5f, &err), TF_OK);
    ck_assert(loss == loss0);
    ck_assert(memcmp(dx, dx0, n * sizeof *dx) == 0);
    const double eps = 0.2;
    d.label_smoothing = (float)eps;
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    double sum = 0;
    int count = 0;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * classes;
        double mx = -INFINITY, se = 0, sx = 0;
        for (int j = 0; j < classes; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int j = 0; j < classes; j++) se += exp(xr[j] - mx), sx += xr[j] - mx;
        double lse = log(se);
        if (lab[r] == -100) {
            for (int j = 0; j < classes; j++) ck_assert(dx[(size_t)r * classes + j] == 0.0f);
            continue;
        }
        count++;
        sum += (1 - eps) * (lse - (xr[lab[r]] - mx)) + eps * (classes * lse - sx) / classes;
    }
    for (int r = 0; r < rows; r++) {
        if (lab[r] == -100) continue;
        const float *xr = x + (size_t)r * classes;
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < classes; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int j = 0; j < classes; j++) se += exp(xr[j] - mx);
        for (int j = 0; j < classes; j++) {
            double want = 0.5 / count * (exp(xr[j] - mx) / se - (1 - eps) * (j == lab[r]) - eps / classes);
            ck_assert_msg(fabs(dx[(size_t)r * classes + j] - want) <= 1e-6 * fabs(want) + 1e-8,
                          "dlogits[%d, %d] %g vs %g", r, j, dx[(size_t)r * classes + j], want);
        }
    }
    double want_loss = sum / count;
    ck_assert_msg(fabs(loss - want_loss) <= 1e-6 * want_loss, "loss %g vs %g", loss, want_loss);
    /* aliased: the same loss and gradient */
    memcpy(xa, x, n * sizeof *x);
    d.logits = xa;
    d.dlogits = xa;
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    ck_assert(memcmp(xa, dx, n * sizeof *dx) == 0);
    d.logits = x;
    d.dlogits = dx;
    d.label_smoothing = 1.5f;
    ASSERT_ERR(vt->cross_entropy_ex(be, NULL, &d, &err), TF_ERR_RUNTIME, "label_smoothing must be in [0, 1]");
    d.label_smoothing = 0.1f;
    d.size = 8;
    ASSERT_ERR(vt->cross_entropy_ex(be, NULL, &d, &err), TF_ERR_RUNTIME, "descriptor size 8");
    free(x), free(dx), free(dx0), free(xa), free(lab);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"cross_entropy", test_cross_entropy},
        {"cross_entropy_smoothed", test_cross_entropy_smoothed},
    };
    return backend_cpu_main("backend_cpu_cross_entropy", cases, TF_TEST_COUNT(cases));
}
