/* tests/backend-cpu/test_threads.c — backend-cpu: the same bits on 1 and 3 threads
 * (tests/backend-cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- the same bits on 1 and 3 threads ----------------------------------------- */

START_TEST(test_thread_counts)
{
    tf_backend *b3 = open_threads(3), *bs[2] = {be1, b3};
    int T = 515, H = 300, V = 97; /* every op above its parallel threshold */
    size_t n = (size_t)T * H;
    float *x = falloc(n), *r = falloc(n), *g = falloc(H), *bt = falloc(H), *dy = falloc(n);
    tf_test_fill(x, n, -2, 2), tf_test_fill(r, n, -1, 1), tf_test_fill(g, H, 0.5f, 1.5f), tf_test_fill(bt, H, -1, 1);
    tf_test_fill(dy, n, -1, 1);
    int32_t *ids = malloc(sizeof(int32_t) * T), *lab = malloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(tf_test_urand() * V), lab[i] = i % 7 ? (int32_t)(tf_test_urand() * H) : -1;
    float *out[2][12];
    uint8_t *keep[2];
    float loss[2], ss[2];
    tf_attention_desc d = {5, 103, 4, 50, 0.2f, 0.1f, 3, 4, TF_DTYPE_F32, TF_MATMUL_FP32};
    size_t nq = (size_t)5 * 103 * 600, no = (size_t)5 * 103 * 200;
    for (int k = 0; k < 2; k++) {
        tf_backend *b = bs[k];
        for (int j = 0; j < 12; j++) out[k][j] = falloc(nq);
        keep[k] = malloc(n);
        float *mean = out[k][9], *rstd = out[k][9] + T;
        ck_assert_int_eq(vt->layernorm_fwd(b, NULL, x, r, out[k][0], out[k][1], g, bt, mean, rstd,
                                           T, H, 1e-12f, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->layernorm_bwd(b, NULL, dy, out[k][0], g, mean, rstd, out[k][2], false,
                                           out[k][3], out[k][3] + H, T, H, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->sum_rows(b, NULL, dy, TF_DTYPE_F32, T, H, out[k][4], false, &err), TF_OK);
        ck_assert_int_eq(vt->embedding_bwd(b, NULL, ids, T, dy, TF_DTYPE_F32, out[k][5], V, H, &err), TF_OK);
        ck_assert_int_eq(vt->dropout_fwd(b, NULL, x, out[k][6], keep[k], n, 0.3f, 9, 9, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->cross_entropy(b, NULL, x, H, TF_DTYPE_F32, T, H, lab, -1, &loss[k],
                                           out[k][7], 1.0f, &err), TF_OK);
        ck_assert_int_eq(vt->sum_squares(b, NULL, x, n, &ss[k], &err), TF_OK);
        ck_assert_int_eq(vt->gelu_bwd(b, NULL, dy, x, out[k][8], n, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
        void *sv = alloc_save(b, &d);
        float *qkv = out[k][10], *dq = out[k][11];
        for (size_t i = 0; i < nq; i++) qkv[i] = (float)((i * 2654435761u) % 1000) * 2e-3f - 1.0f;
        ck_assert_int_eq(vt->attention_fwd(b, NULL, &d, qkv, NULL, out[k][6] + n, sv, true, &err), TF_OK);
        ck_assert_int_eq(vt->attention_bwd(b, NULL, &d, qkv, NULL, out[k][6] + n, sv, qkv, dq, &err), TF_OK);
        vt->free(b, sv, TF_MEM_DEVICE);
    }
    ck_assert_int_eq(memcmp(out[0][0], out[1][0], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][1], out[1][1], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][2], out[1][2], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][3], out[1][3], 2 * (size_t)H * 4), 0);
    ck_assert_int_eq(memcmp(out[0][9], out[1][9], 2 * (size_t)T * 4), 0);
    ck_assert_int_eq(memcmp(out[0][4], out[1][4], (size_t)H * 4), 0);
    ck_assert_int_eq(memcmp(out[0][5], out[1][5], (size_t)V * H * 4), 0);
    ck_assert_int_eq(memcmp(keep[0], keep[1], n), 0);
    ck_assert_int_eq(memcmp(out[0][6], out[1][6], (n + no) * 4), 0);
    ck_assert_int_eq(memcmp(out[0][7], out[1][7], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][8], out[1][8], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][11], out[1][11], nq * 4), 0);
    ck_assert(loss[0] == loss[1] && ss[0] == ss[1]);
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 12; j++) free(out[k][j]);
        free(keep[k]);
    }
    vt->close(b3);
    free(x), free(r), free(g), free(bt), free(dy), free(ids), free(lab);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"thread_counts", test_thread_counts},
    };
    return backend_cpu_main("backend_cpu_threads", cases, TF_TEST_COUNT(cases));
}
