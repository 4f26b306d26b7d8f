/* tests/backend-cpu/test_dropout.c — backend-cpu: dropout: Philox known answers, the mask and
 * its statistics, row-indexed dropout (tests/backend-cpu/fixture.h says how every family is
 * tested). */
#include "fixture.h"

/* --- dropout ------------------------------------------------------------------------ */

START_TEST(test_philox_known_answers)
{
    /* the Random123 known-answer vectors for philox4x32-10 */
    uint32_t c[4] = {0, 0, 0, 0}, k[2] = {0, 0};
    cpu_philox4x32_10(c, k);
    ck_assert(c[0] == 0x6627e8d5u && c[1] == 0xe169c58du && c[2] == 0xbc57ac4cu && c[3] == 0x9b00dbd8u);
    uint32_t c2[4] = {~0u, ~0u, ~0u, ~0u}, k2[2] = {~0u, ~0u};
    cpu_philox4x32_10(c2, k2);
    ck_assert(c2[0] == 0x408f276du && c2[1] == 0x41c83b0eu && c2[2] == 0xa20bc7c6u && c2[3] == 0x6d5451fdu);
    uint32_t c3[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
             k3[2] = {0xa4093822u, 0x299f31d0u};
    cpu_philox4x32_10(c3, k3);
    ck_assert(c3[0] == 0xd16cfe09u && c3[1] == 0x94fdccebu && c3[2] == 0x5001e420u && c3[3] == 0x24126ea1u);
    /* the mask recipe: element i is word i%4 of counter (i/4, offset), key seed */
    uint64_t seed = 0x0123456789abcdefull, offset = 0xfedcba9876543210ull;
    uint8_t keep[11];
    cpu_dropout_mask(seed, offset, 5, 11, 0.5f, keep);
    for (int j = 0; j < 11; j++) {
        uint64_t i = 5 + (uint64_t)j;
        uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)((i / 4) >> 32), (uint32_t)offset,
                           (uint32_t)(offset >> 32)};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        cpu_philox4x32_10(ctr, key);
        ck_assert_int_eq(keep[j], (ctr[i % 4] >> 8) >= (1u << 23));
    }
}
END_TEST

START_TEST(test_dropout)
{
    size_t n = 1000003;
    float *x = falloc(n), *y = falloc(n), *y1 = falloc(n), *dx = falloc(n);
    uint8_t *keep = malloc(n), *keep1 = malloc(n), *part = malloc(n);
    tf_test_fill(x, n, -1, 1);
    float p = 0.1f;
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->dropout_fwd(be1, NULL, x, y1, keep1, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(keep, keep1, n), 0); /* any thread count, the same mask */
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* a pure function of the index: computed in odd pieces, the same */
    for (size_t at = 0; at < n;) {
        size_t len = 1 + (size_t)(tf_test_urand() * 5000);
        if (len > n - at) len = n - at;
        cpu_dropout_mask(7, 99, at, len, p, part + at);
        at += len;
    }
    ck_assert_int_eq(memcmp(keep, part, n), 0);
    size_t kept = 0;
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) kept += keep[i];
    ASSERT_ALL(n, keep[i] <= 1 && y[i] == (keep[i] ? x[i] * scale : 0.0f));
    ck_assert_msg(fabs((double)kept / n - 0.9) < 0.002, "keep rate %g", (double)kept / n);
    /* another offset or seed: another mask */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, n, p, 7, 100, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, n, p, 8, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    /* backward: dx = dy * keep / (1-p), dx may alias dy */
    ck_assert_int_eq(vt->dropout_bwd(be, NULL, x, keep, dx, n, p, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dx, y, n * sizeof *dx), 0);
    memcpy(y1, x, n * sizeof *x);
    ck_assert_int_eq(vt->dropout_bwd(be, NULL, y1, keep, y1, n, p, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y1, y, n * sizeof *y), 0);
    /* y aliasing x */
    memcpy(y1, x, n * sizeof *x);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, y1, y1, keep1, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y1, y, n * sizeof *y), 0);
    /* p = 0 keeps everything unchanged; p = 1 drops everything */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, 0.0f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, keep[i] == 1 && y[i] == x[i]);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, 1.0f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, keep[i] == 0 && y[i] == 0.0f);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, NULL, NULL, NULL, 0, 0.5f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, -0.1f, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1], got -0.1");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, NAN, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1]");
    ASSERT_ERR(vt->dropout_bwd(be, NULL, x, keep, dx, n, 1.5f, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1], got 1.5");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, NULL, n, 0.1f, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "keep is NULL");
    ASSERT_ERR(vt->dropout_bwd(be, NULL, x, NULL, dx, n, 0.1f, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "keep is NULL");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, 0.1f, 7, 99, TF_DTYPE_F16, &err),
               TF_ERR_PLUGIN, "F16");
    free(x), free(y), free(y1), free(dx), free(keep), free(keep1), free(part);
}
END_TEST

/* ABI 1.3: dropout by global row. Row b of a call is global row
 * row_first + b * row_stride, so a batch split into calls (strided rows, as
 * DDP ranks take them, or contiguous ones, as DataParallel's chunks) draws
 * the masks of the whole batch. */
START_TEST(test_dropout_rows)
{
    size_t rows = 6, R = 1001, n = rows * R; /* R % 4 != 0: counters straddle rows */
    float *x = falloc(n), *y = falloc(n), *y1 = falloc(n);
    uint8_t *keep = malloc(n), *keep1 = malloc(n), *want = malloc(R);
    tf_test_fill(x, n, -1, 1);
    float p = 0.3f;
    tf_dropout_desc d = {.size = sizeof d, .x = x, .y = y, .keep = keep, .rows = rows, .row_elems = R,
                         .p = p, .dt = TF_DTYPE_F32, .seed = 5, .offset = 3ull << 32, .row_first = 10,
                         .row_stride = 1};
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d, &err), TF_OK);
    for (size_t b = 0; b < rows; b++) { /* the contract's formula, row by row */
        cpu_dropout_mask(5, (3ull << 32) + 10 + b, 0, R, p, want);
        ck_assert_int_eq(memcmp(keep + b * R, want, R), 0);
        for (size_t j = 0; j < R; j++)
            ck_assert(y[b * R + j] == x[b * R + j] * (want[j] ? 1.0f / (1.0f - p) : 0.0f));
    }
    /* one thread draws the same */
    tf_dropout_desc d1 = d;
    d1.y = y1, d1.keep = keep1;
    ck_assert_int_eq(vt->dropout_fwd_ex(be1, NULL, &d1, &err), TF_OK);
    ck_assert_int_eq(memcmp(keep, keep1, n), 0);
    /* rank r of 2 takes rows r, r+2, r+4 (first 10 + r, stride 2) */
    for (int r = 0; r < 2; r++) {
        float xs[3 * 1001], ys[3 * 1001];
        uint8_t ks[3 * 1001];
        for (size_t k = 0; k < 3; k++) memcpy(xs + k * R, x + (2 * k + r) * R, R * sizeof *x);
        tf_dropout_desc dr = {.size = sizeof dr, .x = xs, .y = ys, .keep = ks, .rows = 3, .row_elems = R,
                              .p = p, .dt = TF_DTYPE_F32, .seed = 5, .offset = 3ull << 32,
                              .row_first = 10 + (uint64_t)r, .row_stride = 2};
        ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &dr, &err), TF_OK);
        for (size_t k = 0; k < 3; k++) {
            ck_assert_int_eq(memcmp(ks + k * R, keep + (2 * k + r) * R, R), 0);
            ck_assert_int_eq(memcmp(ys + k * R, y + (2 * k + r) * R, R * sizeof *y), 0);
        }
    }
    /* the 1.0 slot is one row, global row 0 */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, R, p, 5, 3ull << 32, TF_DTYPE_F32, &err), TF_OK);
    cpu_dropout_mask(5, 3ull << 32, 0, R, p, want);
    ck_assert_int_eq(memcmp(keep1, want, R), 0);
    /* another epoch (offset), another mask; in place */
    d1.offset = 4ull << 32;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    memcpy(y1, x, n * sizeof *x);
    d1 = d, d1.x = y1, d1.y = y1, d1.keep = keep1;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* a descriptor older than the backend's, and bad arguments */
    d1 = d, d1.size = 8;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_PLUGIN, "older than this backend");
    d1 = d, d1.p = 1.5f;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_RUNTIME, "p must be in [0, 1]");
    d1 = d, d1.keep = NULL;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_RUNTIME, "keep");
    d1 = d, d1.rows = 0;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    free(x), free(y), free(y1), free(keep), free(keep1), free(want);
}
END_TEST

/* ABI 1.5: packed sequences in one call draw what one dropout_fwd_ex row per
 * sequence draws (the padded layout's bits for the real tokens), on any
 * thread count, with empty sequences and lengths that straddle the threads'
 * pieces and Philox counters. */
START_TEST(test_dropout_varlen)
{
    const size_t E = 13; /* elements per token: odd, so counters straddle tokens */
    const int32_t cu[] = {0, 7, 7, 100, 101, 163, 400};
    const size_t rows = 6, T = 400, n = T * E;
    float *x = falloc(n), *y = falloc(n), *y1 = falloc(n), *want_y = falloc(n);
    uint8_t *keep = malloc(n), *keep1 = malloc(n), *want = malloc(n);
    tf_test_fill(x, n, -1, 1);
    float p = 0.25f;
    tf_dropout_varlen_desc vd = {.size = sizeof vd,
                                 .drop = {.size = sizeof vd.drop, .x = x, .y = y, .keep = keep, .rows = rows,
                                          .row_elems = E, .p = p, .dt = TF_DTYPE_F32, .seed = 11,
                                          .offset = 2ull << 32, .row_first = 40, .row_stride = 3},
                                 .cu_seqlens = cu};
    ck_assert_int_eq(vt->dropout_varlen_fwd(be, NULL, &vd, &err), TF_OK);
    for (size_t b = 0; b < rows; b++) { /* sequence b alone: one dropout_fwd_ex row */
        size_t at = (size_t)cu[b] * E, len = (size_t)(cu[b + 1] - cu[b]) * E;
        tf_dropout_desc d = {.size = sizeof d, .x = x + at, .y = want_y + at, .keep = want + at, .rows = 1,
                             .row_elems = len, .p = p, .dt = TF_DTYPE_F32, .seed = 11, .offset = 2ull << 32,
                             .row_first = 40 + 3 * b, .row_stride = 1};
        ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d, &err), TF_OK);
    }
    ck_assert_int_eq(memcmp(keep, want, n), 0);
    ck_assert_int_eq(memcmp(y, want_y, n * sizeof *y), 0);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += keep[i];
    ck_assert_msg(fabs((double)kept / n - 0.75) < 0.03, "keep rate %g", (double)kept / n);
    /* one thread, in place */
    memcpy(y1, x, n * sizeof *x);
    tf_dropout_varlen_desc v1 = vd;
    v1.drop.x = y1, v1.drop.y = y1, v1.drop.keep = keep1;
    ck_assert_int_eq(vt->dropout_varlen_fwd(be1, NULL, &v1, &err), TF_OK);
    ck_assert_int_eq(memcmp(keep, keep1, n), 0);
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* the padded layout: sequence 3 (one token) right-padded to 9 tokens, as a
     * dropout_fwd_ex row of 9 * E elements, draws the same bits for its token */
    float xp[9 * 13], yp[9 * 13];
    uint8_t kp[9 * 13];
    memset(xp, 0, sizeof xp);
    memcpy(xp, x + 100 * E, E * sizeof *x);
    tf_dropout_desc dp = {.size = sizeof dp, .x = xp, .y = yp, .keep = kp, .rows = 1, .row_elems = 9 * E,
                          .p = p, .dt = TF_DTYPE_F32, .seed = 11, .offset = 2ull << 32, .row_first = 40 + 3 * 3,
                          .row_stride = 1};
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &dp, &err), TF_OK);
    ck_assert_int_eq(memcmp(kp, keep + 100 * E, E), 0);
    /* bad descriptors */
    v1 = vd, v1.size = 8;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_PLUGIN, "older than this backend");
    v1 = vd, v1.drop.size = 8;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_PLUGIN, "older than this backend");
    v1 = vd, v1.cu_seqlens = NULL;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_RUNTIME, "cu_seqlens");
    const int32_t bad0[] = {1, 7, 7, 100, 101, 163, 400}, down[] = {0, 7, 6, 100, 101, 163, 400};
    v1 = vd, v1.cu_seqlens = bad0;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_RUNTIME, "cu_seqlens[0] is 1");
    v1 = vd, v1.cu_seqlens = down;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_RUNTIME, "decreases at sequence 1");
    v1 = vd, v1.drop.p = -0.5f;
    ASSERT_ERR(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_ERR_RUNTIME, "p must be in [0, 1]");
    v1 = vd, v1.drop.rows = 0; /* no sequences: nothing to do */
    ck_assert_int_eq(vt->dropout_varlen_fwd(be, NULL, &v1, &err), TF_OK);
    free(x), free(y), free(y1), free(want_y), free(keep), free(keep1), free(want);
}
END_TEST

/* ABI 1.3: attention's mask by global row, and independent of the padded
 * length: a sequence alone at global row 7 draws what it draws as row 1 of a
 * batch starting at row 6, and the same keys at seq 40 as at seq 64. */

int main(void)
{
    const tf_test_case cases[] = {
        {"philox", test_philox_known_answers},
        {"dropout", test_dropout},
        {"dropout_rows", test_dropout_rows},
        {"dropout_varlen", test_dropout_varlen},
    };
    return backend_cpu_main("backend_cpu_dropout", cases, TF_TEST_COUNT(cases));
}
