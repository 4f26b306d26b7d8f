/* tests/backend-cpu/test_attention.c — backend-cpu: attention: forward, row blocks, backward
 * against finite differences, dropout, the errors, row-indexed dropout (tests/backend-
 * cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- attention -------------------------------------------------------------------- */

/* HF BertSelfAttention in double, dropout 0; returns sum(out * w). */
static double attn_ref(const double *qkv, const int32_t *mask, int B, int S, int nh, int hd,
                       double scale, double *out, const double *w)
{
    int H = nh * hd;
    double obj = 0.0;
    double *sc = dalloc((size_t)S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++) {
                const double *q = qkv + ((size_t)b * S + i) * 3 * H + h * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < S; j++) {
                    const double *k = qkv + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    double s = 0.0;
                    for (int t = 0; t < hd; t++) s += q[t] * k[t];
                    s = s * scale;
                    if (mask) s += (1.0 - mask[b * S + j]) * -(double)FLT_MAX;
                    sc[j] = s;
                    mx = fmax(mx, s);
                }
                for (int j = 0; j < S; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int t = 0; t < hd; t++) {
                    double o = 0.0;
                    for (int j = 0; j < S; j++)
                        o += sc[j] / sum * qkv[((size_t)b * S + j) * 3 * H + 2 * H + h * hd + t];
                    size_t oi = ((size_t)b * S + i) * H + h * hd + t;
                    if (out) out[oi] = o;
                    if (w) obj += o * w[oi];
                }
            }
    free(sc);
    return obj;
}

/* Attention backward in double from the probabilities the forward saved
 * (and its keep mask, when dropout was on): the chain rule as autograd runs
 * it, so it also covers fully masked rows, whose scores are constant in
 * floating point (finite differences see 0 there; autograd does not).
 * dd [B, S, 3H] is overwritten. */
static void attn_bwd_ref(const double *qd, const float *P, const uint8_t *keep, float dscale,
                         const float *dout, int B, int S, int nh, int hd, double scale,
                         double *dd)
{
    int H = nh * hd;
    memset(dd, 0, sizeof(double) * (size_t)B * S * 3 * H);
    double *dp = dalloc((size_t)S), *pd = dalloc((size_t)S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++) {
                size_t row = (((size_t)b * nh + h) * S + i) * S;
                const float *go = dout + ((size_t)b * S + i) * H + h * hd;
                const double *q = qd + ((size_t)b * S + i) * 3 * H + h * hd;
                double dot = 0.0;
                for (int j = 0; j < S; j++) {
                    double m = keep ? (keep[row + j] ? dscale : 0.0) : 1.0;
                    const double *v = qd + ((size_t)b * S + j) * 3 * H + 2 * H + h * hd;
                    double s = 0.0;
                    for (int t = 0; t < hd; t++) s += go[t] * v[t];
                    dp[j] = s * m;
                    pd[j] = P[row + j] * m;
                    dot += dp[j] * P[row + j];
                }
                for (int j = 0; j < S; j++) {
                    double ds = P[row + j] * (dp[j] - dot) * scale;
                    double *dq = dd + ((size_t)b * S + i) * 3 * H + h * hd;
                    double *dk = dd + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    double *dv = dk + H;
                    const double *k = qd + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    for (int t = 0; t < hd; t++) {
                        dq[t] += ds * k[t];
                        dk[t] += ds * q[t];
                        dv[t] += pd[j] * go[t];
                    }
                }
            }
    free(dp), free(pd);
}

START_TEST(test_attention_fwd)
{
    int B = 3, S = 37, nh = 4, hd = 16, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no), *out2 = falloc(no);
    double *qd = dalloc(nq), *want = dalloc(no);
    int32_t *mask = calloc((size_t)B * S, sizeof *mask);
    tf_test_fill(qkv, nq, -2, 2);
    to_double(qkv, qd, nq);
    for (int j = 0; j < S; j++) {
        mask[0 * S + j] = 1;               /* no padding */
        mask[1 * S + j] = j < 20;          /* padded */
        mask[2 * S + j] = 0;               /* fully masked: uniform, as HF */
    }
    tf_attention_desc d = {B, S, nh, hd, 1.0f / sqrtf((float)hd), 0.0f, 1, 2,
                           TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    attn_ref(qd, mask, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out, save, true, &err), TF_OK);
    ASSERT_CLOSE(out, want, no, 2e-5);
    /* the fully masked batch item: every row is the mean of v */
    for (int t = 0; t < H; t++) {
        double m = 0.0;
        for (int j = 0; j < S; j++) m += qd[((size_t)2 * S + j) * 3 * H + 2 * H + t];
        ck_assert(fabs(out[((size_t)2 * S + 5) * H + t] - m / S) < 1e-5);
    }
    /* saved probabilities: rows sum to 1, padded keys exactly 0 */
    const float *P = save;
    for (int h = 0; h < nh; h++)
        for (int qi = 0; qi < S; qi++) {
            const float *row = P + (((size_t)1 * nh + h) * S + qi) * S;
            double sum = 0.0;
            for (int j = 0; j < S; j++) sum += row[j];
            ck_assert(fabs(sum - 1.0) < 1e-5);
            ASSERT_ALL((size_t)(S - 20), row[20 + i] == 0.0f);
        }
    /* eval without save, on 1 thread: same bits */
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, mask, out1, NULL, false, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out1, no * sizeof *out), 0);
    /* no mask = all ones */
    for (int j = 0; j < B * S; j++) mask[j] = 1;
    attn_ref(qd, NULL, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, save, false, &err), TF_OK);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out2, save, false, &err), TF_OK);
    ASSERT_CLOSE(out, want, no, 2e-5);
    ck_assert_int_eq(memcmp(out, out2, no * sizeof *out), 0);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(out1), free(out2), free(qd), free(want), free(mask);
}
END_TEST

/* Long sequences go through the scratch in row blocks (S > 512 here). */
START_TEST(test_attention_row_blocks)
{
    int B = 1, S = 600, nh = 2, hd = 4, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *out2 = falloc(no), *dout = falloc(no);
    float *dq = falloc(nq), *dq2 = falloc(nq);
    double *qd = dalloc(nq), *want = dalloc(no);
    tf_test_fill(qkv, nq, -1, 1);
    tf_test_fill(dout, no, -1, 1);
    to_double(qkv, qd, nq);
    tf_attention_desc d = {B, S, nh, hd, 0.5f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    attn_ref(qd, NULL, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, NULL, false, &err), TF_OK);
    /* sums of 600 terms: 5.8e-5 seen with other inputs (CK_FORK=no runs
     * this test on the random stream the tests before it left) */
    ASSERT_CLOSE(out, want, no, 1e-4);
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out2, save, true, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out2, no * sizeof *out), 0);
    /* backward in blocks of 436 rows = backward in one block (the block size
     * only changes how dk, dv are summed: same values to rounding) */
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out2, save, dout, dq, &err), TF_OK);
    double *dd = dalloc(nq);
    attn_bwd_ref(qd, save, NULL, 1.0f, dout, B, S, nh, hd, d.scale, dd);
    ASSERT_CLOSE(dq, dd, nq, 1e-4); /* 5.2e-5 seen, as the forward above */
    ck_assert_int_eq(vt->attention_bwd(be1, NULL, &d, qkv, NULL, out2, save, dout, dq2, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq2, nq * sizeof *dq), 0);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(out2), free(dout), free(dq), free(dq2), free(qd), free(want), free(dd);
}
END_TEST

START_TEST(test_attention_bwd_fd)
{
    int B = 2, S = 6, nh = 2, hd = 3, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *dout = falloc(no), *dqkv = falloc(nq);
    double *qd = dalloc(nq), *w = dalloc(no), *fd = dalloc(nq);
    int32_t mask[12] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}; /* item 1 fully masked */
    tf_test_fill(qkv, nq, -1.5f, 1.5f);
    tf_test_fill(dout, no, -1, 1);
    to_double(qkv, qd, nq);
    to_double(dout, w, no);
    tf_attention_desc d = {B, S, nh, hd, 0.577f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out, save, true, &err), TF_OK);
    for (size_t i = 0; i < nq; i++) dqkv[i] = NAN; /* overwritten, not accumulated */
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, mask, out, save, dout, dqkv, &err), TF_OK);
    /* the padded keys' work was skipped; without the mask the backward does
     * it all, and gets the same bits (their probabilities are exactly 0) */
    float *dq_full = falloc(nq);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq_full, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq_full, dqkv, nq * sizeof *dqkv), 0);
    /* dk, dv rows of item 0's padded keys (4, 5): 0 */
    ASSERT_ALL((size_t)2 * 2 * H, dqkv[(4 + i / (2 * H)) * 3 * H + H + i % (2 * H)] == 0.0f);
    free(dq_full);
    double *an = dalloc(nq);
    attn_bwd_ref(qd, save, NULL, 1.0f, dout, B, S, nh, hd, d.scale, an);
    ASSERT_CLOSE(dqkv, an, nq, 1e-5);
    /* the reference against central differences, on item 0 (item 1 is fully
     * masked: constant in floating point, see attn_bwd_ref) */
    double h = 1e-6, worst = 0.0;
    size_t n0 = nq / B;
    for (size_t i = 0; i < n0; i++) {
        double keep = qd[i];
        qd[i] = keep + h;
        double fp = attn_ref(qd, mask, B, S, nh, hd, d.scale, NULL, w);
        qd[i] = keep - h;
        double fm = attn_ref(qd, mask, B, S, nh, hd, d.scale, NULL, w);
        qd[i] = keep;
        fd[i] = (fp - fm) / (2 * h);
        worst = fmax(worst, fabs(fd[i] - an[i]));
    }
    /* the reference works from the saved f32 probabilities: ~1e-7 relative */
    ck_assert_msg(worst < 1e-6 * fmax(1.0, tf_test_max_abs(an, n0)), "fd vs analytic: %g", worst);
    ASSERT_CLOSE(dqkv, fd, n0, 1e-5);
    /* fully masked rows: probabilities uniform, gradients still flow to q, k, v */
    double g1 = 0.0;
    for (size_t i = n0; i < nq; i++) g1 += fabs(dqkv[i]);
    ck_assert(g1 > 0.0);
    free(an);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(dout), free(dqkv), free(qd), free(w), free(fd);
}
END_TEST

START_TEST(test_attention_dropout)
{
    int B = 2, S = 64, nh = 3, hd = 8, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H, np = (size_t)B * nh * S * S;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no), *dout = falloc(no);
    float *dq = falloc(nq), *dq1 = falloc(nq);
    tf_test_fill(qkv, nq, -1, 1);
    tf_test_fill(dout, no, -1, 1);
    tf_attention_desc d = {B, S, nh, hd, 0.35f, 0.25f, 42, 7, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d), *save1 = alloc_save(be1, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, save, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out1, no * sizeof *out), 0);
    ck_assert_int_eq(memcmp(save, save1, np * 5), 0);
    const float *P = save;
    const uint8_t *keep = (const uint8_t *)(P + np);
    /* the mask of (b, h, i, j) is element (h * 2^16 + i) * 2^16 + j of stream
     * (seed, offset + b): global row b, tfcore/backend.h "Dropout masks" */
    uint8_t *want_keep = malloc(np);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++)
                cpu_dropout_mask(42, 7 + (uint64_t)b, (((uint64_t)h << 16) + (uint64_t)i) << 16, (size_t)S,
                                 0.25f, want_keep + (((size_t)b * nh + h) * S + i) * S);
    ck_assert_int_eq(memcmp(keep, want_keep, np), 0);
    size_t kept = 0;
    for (size_t i = 0; i < np; i++) kept += keep[i];
    double rate = (double)kept / np; /* 24576 draws: sigma 0.0028 */
    ck_assert_msg(fabs(rate - 0.75) < 0.015, "keep rate %g", rate);
    /* out = (P * keep / 0.75) v, from the saved probabilities */
    float sc = 1.0f / 0.75f;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i += 7)
                for (int t = 0; t < hd; t++) {
                    double o = 0.0;
                    size_t row = (((size_t)b * nh + h) * S + i) * S;
                    for (int j = 0; j < S; j++)
                        o += (double)(P[row + j] * (keep[row + j] ? sc : 0.0f)) *
                             qkv[((size_t)b * S + j) * 3 * H + 2 * H + h * hd + t];
                    ck_assert(fabs(out[((size_t)b * S + i) * H + h * hd + t] - o) < 1e-5);
                }
    /* another offset, another mask; eval ignores dropout */
    tf_attention_desc d2 = d;
    d2.offset = 8;
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d2, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, (const uint8_t *)((float *)save1 + np), np), 0);
    /* backward with dropout: 1 and 2 threads agree bit for bit, and match an
     * analytic double backward through the saved mask (spot checked on dv) */
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be1, NULL, &d, qkv, NULL, out1, save1, dout, dq1, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq1, nq * sizeof *dq), 0);
    double *qd = dalloc(nq), *dd = dalloc(nq);
    to_double(qkv, qd, nq);
    attn_bwd_ref(qd, P, keep, sc, dout, B, S, nh, hd, d.scale, dd);
    ASSERT_CLOSE(dq, dd, nq, 2e-5);
    free(qd), free(dd);
    vt->free(be, save, TF_MEM_DEVICE);
    vt->free(be1, save1, TF_MEM_DEVICE);
    free(qkv), free(out), free(out1), free(dout), free(dq), free(dq1), free(want_keep);
}
END_TEST

START_TEST(test_attention_errors)
{
    float buf[64] = {0};
    tf_attention_desc ok = {1, 2, 1, 2, 1.0f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    tf_attention_desc d;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &ok), 64); /* 4 probs * 5 bytes, rounded */
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &ok, buf, NULL, buf + 12, buf + 40, true, &err), TF_OK);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &ok, buf, NULL, buf + 12, NULL, true, &err),
               TF_ERR_RUNTIME, "save is NULL in training");
    ASSERT_ERR(vt->attention_fwd(be, NULL, NULL, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "desc is NULL");
    d = ok, d.seq = 0;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &d), 0);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "seq must be >= 1, got 0");
    d = ok, d.dropout = 1.0f;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "dropout must be in [0, 1), got 1");
    d = ok, d.scale = INFINITY;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "scale must be finite");
    d = ok, d.mode = TF_MATMUL_TF32;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_PLUGIN, "matmul mode 1 is not supported");
    d = ok, d.dtype = TF_DTYPE_F16;
    ASSERT_ERR(vt->attention_bwd(be, NULL, &d, buf, NULL, buf, buf, buf, buf, &err),
               TF_ERR_PLUGIN, "qkv dtype F16");
    d = ok, d.seq = 300000;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "seq 300000 is longer than");
    d = ok, d.heads = 1 << 20, d.head_dim = 1 << 20;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "is too large");
    d = ok, d.batch = 1 << 30, d.heads = 1 << 12, d.seq = 1 << 17;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &d), SIZE_MAX);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "overflows");
    ASSERT_ERR(vt->attention_bwd(be, NULL, &ok, buf, NULL, buf, NULL, buf, buf, &err),
               TF_ERR_RUNTIME, "save is NULL");
    ASSERT_ERR(vt->attention_bwd(be, NULL, &ok, buf, NULL, buf, buf, NULL, buf, &err),
               TF_ERR_RUNTIME, "dout is NULL");
    ASSERT_ERR(vt->attention_fwd(be, NULL, &ok, NULL, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "qkv is NULL");
}
END_TEST

START_TEST(test_attention_rows)
{
    int B = 2, S = 64, nh = 2, hd = 8, H = nh * hd, S2 = 40;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H, np = (size_t)B * nh * S * S;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no);
    tf_test_fill(qkv, nq, -1, 1);
    tf_attention_desc d = {B, S, nh, hd, 0.35f, 0.25f, 42, 9ull << 32, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d, 6, 1, qkv, NULL, out, save, true, &err), TF_OK);
    const uint8_t *keep = (const uint8_t *)((const float *)save + np);
    tf_attention_desc d1 = d;
    d1.batch = 1;
    void *save1 = alloc_save(be, &d1);
    size_t np1 = (size_t)nh * S * S;
    /* sequence 1 alone (its qkv rows), as global row 7 */
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d1, 7, 5, qkv + (size_t)S * 3 * H, NULL, out1, save1, true,
                                          &err),
                     TF_OK);
    ck_assert_int_eq(memcmp((const uint8_t *)((const float *)save1 + np1), keep + np1, np1), 0);
    ck_assert_int_eq(memcmp(out1, out + (size_t)S * H, (size_t)S * H * sizeof *out), 0);
    /* the backward of either agrees with the saved masks (backend-cpu ignores the rows) */
    float *dout = falloc(no), *dq = falloc(nq), *dq1 = falloc(nq);
    tf_test_fill(dout, no, -1, 1);
    ck_assert_int_eq(vt->attention_bwd_ex(be, NULL, &d, 6, 1, qkv, NULL, out, save, dout, dq, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq1, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq1, nq * sizeof *dq), 0);
    /* seq 40: query i, key j < 40 keep what they kept at seq 64 */
    tf_attention_desc d2 = d1;
    d2.seq = S2;
    void *save2 = alloc_save(be, &d2);
    size_t np2 = (size_t)nh * S2 * S2;
    float *qkv2 = falloc((size_t)S2 * 3 * H);
    memcpy(qkv2, qkv, (size_t)S2 * 3 * H * sizeof *qkv2);
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d2, 6, 1, qkv2, NULL, out1, save2, true, &err), TF_OK);
    const uint8_t *keep2 = (const uint8_t *)((const float *)save2 + np2);
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < S2; i++)
            ck_assert_int_eq(memcmp(keep2 + ((size_t)h * S2 + i) * S2, keep + ((size_t)h * S + i) * S, (size_t)S2), 0);
    /* a row past what the mask indexes */
    tf_attention_desc d3 = d1;
    d3.seq = 65537;
    ASSERT_ERR(vt->attention_fwd_ex(be, NULL, &d3, 0, 1, qkv, NULL, out1, save1, true, &err), TF_ERR_RUNTIME,
               "the dropout masks index at most 65536 positions");
    free(qkv), free(out), free(out1), free(dout), free(dq), free(dq1), free(qkv2);
    vt->free(be, save, TF_MEM_DEVICE), vt->free(be, save1, TF_MEM_DEVICE), vt->free(be, save2, TF_MEM_DEVICE);
}
END_TEST

/* ABI 1.4 varlen: packed sequences give each sequence's rows of the padded
 * slots (right padding, the same global rows), forward and backward with
 * dropout, to rounding (below); their saved probabilities and keep bits
 * are packed block after block from the start of each region, so a batch
 * touches heads * sum len² of them and nothing past it. */
START_TEST(test_attention_varlen)
{
    enum { B = 3, S = 24, nh = 2, hd = 8, H = nh * hd };
    const int32_t cu[B + 1] = {0, 5, 29, 30}; /* lengths 5, 24 (full), 1 */
    const int T = cu[B];
    size_t np = (size_t)B * nh * S * S, pnq = (size_t)B * S * 3 * H, pno = (size_t)B * S * H;
    float *pq = falloc(pnq), *pout = falloc(pno), *pdout = falloc(pno), *pdq = falloc(pnq);
    float *q = falloc((size_t)T * 3 * H), *out = falloc((size_t)T * H), *dout = falloc((size_t)T * H),
          *dq = falloc((size_t)T * 3 * H);
    int32_t mask[B * S];
    tf_test_fill(pq, pnq, -1, 1);
    tf_test_fill(pdout, pno, -1, 1);
    for (int b = 0; b < B; b++) { /* sequence b: the first len_b rows of padded row b */
        int len = cu[b + 1] - cu[b];
        for (int j = 0; j < S; j++) mask[b * S + j] = j < len;
        /* no gradient reaches a padding query (as in the model) */
        memset(pdout + ((size_t)b * S + len) * H, 0, (size_t)(S - len) * H * sizeof *pdout);
        memcpy(q + (size_t)cu[b] * 3 * H, pq + (size_t)b * S * 3 * H, (size_t)len * 3 * H * sizeof *q);
        memcpy(dout + (size_t)cu[b] * H, pdout + (size_t)b * S * H, (size_t)len * H * sizeof *dout);
    }
    tf_attention_desc d = {B, S, nh, hd, 0.35f, 0.2f, 17, 4ull << 32, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *psave = alloc_save(be, &d), *save = alloc_save(be, &d);
    memset(save, 0xff, vt->attention_save_bytes(be, &d)); /* NaN floats, keep bytes 0xff */
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d, 8, 2, pq, mask, pout, psave, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd_ex(be, NULL, &d, 8, 2, pq, mask, pout, psave, pdout, pdq, &err), TF_OK);
    tf_attention_varlen_desc vd = {.size = sizeof vd, .attn = d, .cu_seqlens = cu, .row_first = 8, .row_stride = 2};
    ck_assert_int_eq(vt->attention_varlen_fwd(be, NULL, &vd, q, out, save, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_varlen_bwd(be, NULL, &vd, q, out, save, dout, dq, &err), TF_OK);
    /* the same sums to rounding: a padded sequence's products have more rows
     * (its padding queries), and OpenBLAS's kernels may add in an order that
     * depends on a matrix's size (its SkylakeX kernels give the same bits
     * here; its Haswell ones, every AVX2 CPU's, and Prescott's differ by
     * ~1e-7 normwise) */
    for (int b = 0; b < B; b++) {
        int len = cu[b + 1] - cu[b];
        double eo = tf_test_rel_err(out + (size_t)cu[b] * H, pout + (size_t)b * S * H, (size_t)len * H);
        double eq = tf_test_rel_err(dq + (size_t)cu[b] * 3 * H, pdq + (size_t)b * S * 3 * H,
                                    (size_t)len * 3 * H);
        ck_assert_msg(eo <= 1e-6 && eq <= 1e-6, "sequence %d: out %.3g, dq %.3g from the padded layout's", b,
                      eo, eq);
    }
    /* packed save: heads * sum len² probabilities and keep bits, the rest untouched */
    size_t used = 0;
    for (int b = 0; b < B; b++) used += (size_t)nh * (cu[b + 1] - cu[b]) * (cu[b + 1] - cu[b]);
    const float *probs = save;
    const uint8_t *keep = (const uint8_t *)(probs + np);
    for (size_t i = 0; i < np; i++) {
        ck_assert_msg((i < used) == !isnan(probs[i]), "probability %zu of %zu (%zu used)", i, np, used);
        ck_assert_msg((i < used) == (keep[i] <= 1), "keep bit %zu of %zu (%zu used)", i, np, used);
    }
    /* one thread: the same bits */
    float *out1 = falloc((size_t)T * H), *dq1 = falloc((size_t)T * 3 * H);
    void *save1 = alloc_save(be1, &d);
    ck_assert_int_eq(vt->attention_varlen_fwd(be1, NULL, &vd, q, out1, save1, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_varlen_bwd(be1, NULL, &vd, q, out1, save1, dout, dq1, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out1, (size_t)T * H * sizeof *out), 0);
    ck_assert_int_eq(memcmp(dq, dq1, (size_t)T * 3 * H * sizeof *dq), 0);
    free(pq), free(pout), free(pdout), free(pdq), free(q), free(out), free(dout), free(dq), free(out1), free(dq1);
    vt->free(be, psave, TF_MEM_DEVICE), vt->free(be, save, TF_MEM_DEVICE), vt->free(be1, save1, TF_MEM_DEVICE);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"attention_fwd", test_attention_fwd},
        {"attention_row_blocks", test_attention_row_blocks},
        {"attention_bwd", test_attention_bwd_fd},
        {"attention_dropout", test_attention_dropout},
        {"attention_errors", test_attention_errors},
        {"attention_rows", test_attention_rows},
        {"attention_varlen", test_attention_varlen},
    };
    return backend_cpu_main("backend_cpu_attention", cases, TF_TEST_COUNT(cases));
}
