/* tests/backend-cpu/test_optimizer.c — backend-cpu: AdamW and Adafactor (tests/backend-
 * cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- AdamW ---------------------------------------------------------------------------- */

START_TEST(test_adamw)
{
    size_t n = 70001;
    float *p = falloc(n), *g = falloc(n), *m = falloc(n), *v = falloc(n);
    double *pd = dalloc(n), *md = dalloc(n), *vd = dalloc(n);
    tf_test_fill(p, n, -1, 1);
    to_double(p, pd, n);
    /* out of order, with a gap (elements 60000..60009 belong to nobody) */
    tf_adamw_segment segs[3] = {{60010, n - 60010, 0.0f}, {0, 50000, 0.01f}, {50000, 10000, 0.1f}};
    tf_adamw_hyper hy = {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0.5f};
    for (int step = 1; step <= 10; step++) {
        tf_test_fill(g, n, -2, 2);
        hy.step = step;
        ck_assert_int_eq(vt->adamw(be, NULL, p, g, m, v, segs, 3, &hy, &err), TF_OK);
        double b1 = hy.beta1, b2 = hy.beta2, lr = hy.lr;
        for (int s = 0; s < 3; s++)
            for (size_t i = segs[s].offset; i < segs[s].offset + segs[s].count; i++) {
                double gi = (double)g[i] * hy.grad_scale;
                pd[i] *= 1.0 - lr * segs[s].weight_decay;
                md[i] = b1 * md[i] + (1 - b1) * gi;
                vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
                double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
                pd[i] -= lr * mh / (sqrt(vh) + hy.eps);
            }
    }
    /* parameters move by ~1e-2 from values ~1: compare to 1e-6 relative */
    ASSERT_CLOSE(p, pd, n, 1e-6);
    ASSERT_CLOSE(m, md, n, 1e-5);
    ASSERT_CLOSE(v, vd, n, 1e-5);
    ASSERT_ALL(10, m[60000 + i] == 0.0f && p[60000 + i] == (float)pd[60000 + i]);
    /* same on 1 thread, bit for bit */
    float *p1 = falloc(n), *m1 = falloc(n), *v1 = falloc(n), *p2 = falloc(n), *m2 = falloc(n), *v2 = falloc(n);
    memcpy(p1, p, n * 4), memcpy(m1, m, n * 4), memcpy(v1, v, n * 4);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    hy.step = 11;
    ck_assert_int_eq(vt->adamw(be, NULL, p1, g, m1, v1, segs, 3, &hy, &err), TF_OK);
    ck_assert_int_eq(vt->adamw(be1, NULL, p2, g, m2, v2, segs, 3, &hy, &err), TF_OK);
    ck_assert_int_eq(memcmp(p1, p2, n * 4), 0);
    ck_assert_int_eq(memcmp(v1, v2, n * 4), 0);
    ck_assert_int_eq(vt->adamw(be, NULL, p1, g, m1, v1, segs, 0, &hy, &err), TF_OK);
    /* errors */
    tf_adamw_segment overlap[2] = {{10, 10, 0}, {0, 11, 0}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, overlap, 2, &hy, &err), TF_ERR_RUNTIME,
               "segments 0 [10, 20) and 1 [0, 11) overlap");
    tf_adamw_segment wrap[1] = {{SIZE_MAX - 1, 5, 0}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, wrap, 1, &hy, &err), TF_ERR_RUNTIME, "overflows");
    tf_adamw_segment nanwd[1] = {{0, 5, NAN}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, nanwd, 1, &hy, &err), TF_ERR_RUNTIME,
               "segment 0: weight_decay is nan");
    tf_adamw_hyper bad = hy;
    bad.step = 0;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME,
               "step is 1-based, got 0");
    bad = hy, bad.beta2 = 1.0f;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "betas");
    bad = hy, bad.lr = -1;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "lr must be");
    bad = hy, bad.eps = NAN;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "eps must be");
    bad = hy, bad.grad_scale = INFINITY;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "grad_scale");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, NULL, &err), TF_ERR_RUNTIME, "hyper is NULL");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, NULL, 3, &hy, &err), TF_ERR_RUNTIME,
               "segments is NULL");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, NULL, v, segs, 3, &hy, &err), TF_ERR_RUNTIME, "m is NULL");
    free(p), free(g), free(m), free(v), free(pd), free(md), free(vd);
    free(p1), free(m1), free(v1), free(p2), free(m2), free(v2);
}
END_TEST

/* --- Adafactor (transformers' arithmetic; tests/ref compares with transformers itself) --- */

/* One tensor's step in double, as tf_adafactor_desc states it. */
static void adafactor_ref(double *p, const float *g, double *st, const tf_adafactor_tensor *t, double lr, double eps,
                          double gs, int step)
{
    size_t B = (size_t)t->batch, R = (size_t)t->rows, C = (size_t)t->cols, n = B * R * C;
    double b2 = 1.0 - pow(step, -0.8), ss = 0;
    double *u = malloc(n * sizeof *u);
    for (size_t b = 0; b < B; b++) {
        double *row = st + b * R, *col = st + B * R + b * C, rmean = 0;
        const float *gb = g + b * R * C;
        if (t->factored) {
            for (size_t r = 0; r < R; r++) {
                double s = 0;
                for (size_t c = 0; c < C; c++) s += gb[r * C + c] * gs * gb[r * C + c] * gs + eps;
                row[r] = row[r] * b2 + (1 - b2) * s / (double)C;
            }
            for (size_t c = 0; c < C; c++) {
                double s = 0;
                for (size_t r = 0; r < R; r++) s += gb[r * C + c] * gs * gb[r * C + c] * gs + eps;
                col[c] = col[c] * b2 + (1 - b2) * s / (double)R;
            }
            for (size_t r = 0; r < R; r++) rmean += row[r] / (double)R;
        }
        for (size_t i = 0; i < R * C; i++) {
            double gi = gb[i] * gs, *v = st + b * R * C;
            if (t->factored) {
                u[b * R * C + i] = gi / sqrt(row[i / C] / rmean) / sqrt(col[i % C]);
            } else {
                v[i] = v[i] * b2 + (1 - b2) * (gi * gi + eps);
                u[b * R * C + i] = gi / sqrt(v[i]);
            }
            ss += u[b * R * C + i] * u[b * R * C + i];
        }
    }
    double div = fmax(sqrt(ss / (double)n), 1.0);
    for (size_t i = 0; i < n; i++) p[i] = p[i] * (1 - t->weight_decay * lr) - lr * u[i] / div;
    free(u);
}

START_TEST(test_adafactor)
{
    /* a [3, 40, 50] factored tensor, a gap, a [300, 129] matrix (above the
     * threshold where the team splits rows and columns), an unfactored vector */
    tf_adafactor_tensor ts[3] = {{0, 3, 40, 50, true, 0, 0.01f},
                                 {6010, 1, 300, 129, true, 0, 0.0f},
                                 {44710, 1, 1, 999, false, 0, 0.1f}};
    size_t n = 44710 + 999, ns = 0;
    for (int i = 0; i < 3; i++) ts[i].state_offset = ns, ns += tf_adafactor_state_count(&ts[i]);
    ck_assert_uint_eq(ns, 3 * 90 + 429 + 999);
    size_t wsb = tf_adafactor_workspace_bytes(ts, 3);
    ck_assert_uint_eq(wsb, (1024 + 2) * sizeof(double));
    tf_adafactor_tensor wide = {0, 1, 2, 3000, true, 0, 0};
    ck_assert_uint_eq(tf_adafactor_workspace_bytes(&wide, 1), (3000 + 2) * sizeof(double));
    float *p = falloc(n), *g = falloc(n), *st = falloc(ns), *ws = falloc(wsb / 4);
    double *pd = dalloc(n), *sd = dalloc(ns);
    tf_test_fill(p, n, -1, 1);
    to_double(p, pd, n);
    tf_adafactor_desc d = {sizeof d, 3e-3, 1e-30f, 1.0f, -0.8f, 0.5f, 0, ts, 3, ws, wsb};
    for (int step = 1; step <= 10; step++) {
        tf_test_fill(g, n, -2, 2);
        for (size_t i = 6000; i < 6010; i++) g[i] = 1e9f; /* the gap belongs to nobody */
        d.step = step;
        ck_assert_int_eq(vt->adafactor(be, NULL, p, g, st, &d, &err), TF_OK);
        for (int i = 0; i < 3; i++)
            adafactor_ref(pd + ts[i].offset, g + ts[i].offset, sd + ts[i].state_offset, &ts[i], d.lr, 1e-30, 0.5,
                          step);
    }
    ASSERT_CLOSE(p, pd, n, 1e-6);
    ASSERT_CLOSE(st, sd, ns, 1e-5);
    ASSERT_ALL(10, p[6000 + i] == (float)pd[6000 + i]);
    /* one thread and three give the same bits (resume is exact whatever the team) */
    float *p1 = falloc(n), *s1 = falloc(ns);
    memcpy(p1, p, n * 4), memcpy(s1, st, ns * 4);
    d.step = 11;
    ck_assert_int_eq(vt->adafactor(be, NULL, p, g, st, &d, &err), TF_OK);
    ck_assert_int_eq(vt->adafactor(be1, NULL, p1, g, s1, &d, &err), TF_OK);
    ck_assert_int_eq(memcmp(p, p1, n * 4), 0);
    ck_assert_int_eq(memcmp(st, s1, ns * 4), 0);
    tf_backend *b3 = open_threads(3);
    d.step = 12;
    ck_assert_int_eq(vt->adafactor(b3, NULL, p, g, st, &d, &err), TF_OK);
    ck_assert_int_eq(vt->adafactor(be1, NULL, p1, g, s1, &d, &err), TF_OK);
    ck_assert_int_eq(memcmp(p, p1, n * 4), 0);
    ck_assert_int_eq(memcmp(st, s1, ns * 4), 0);
    vt->close(b3);
    /* errors */
    tf_adafactor_desc bad = d;
    bad.size = 8;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "descriptor size 8");
    bad = d, bad.step = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "step is 1-based, got 0");
    bad = d, bad.lr = NAN;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "lr must be");
    bad = d, bad.clip_threshold = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "clip_threshold must be");
    bad = d, bad.decay_rate = 0.8f;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "decay_rate must be");
    bad = d, bad.workspace_bytes = 8;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME,
               "workspace of 8 bytes, these tensors need 8208");
    tf_adafactor_tensor two[2] = {ts[0], ts[1]};
    two[1].offset = 5999;
    bad = d, bad.tensors = two, bad.ntensors = 2;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensors 0 and 1 overlap in params");
    two[1] = ts[1], two[1].state_offset = 100;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensors 0 and 1 overlap in state");
    two[1] = ts[1], two[1].rows = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensor 1: shape [1, 0, 129]");
    two[1] = ts[1], two[1].offset = SIZE_MAX - 10;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "overflow");
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, NULL, &d, &err), TF_ERR_RUNTIME, "state is NULL");
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, NULL, &err), TF_ERR_RUNTIME, "descriptor is NULL");
    free(p), free(g), free(st), free(ws), free(pd), free(sd), free(p1), free(s1);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"adamw", test_adamw},
        {"adafactor", test_adafactor},
    };
    return backend_cpu_main("backend_cpu_optimizer", cases, TF_TEST_COUNT(cases));
}
