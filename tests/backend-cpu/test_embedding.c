/* tests/backend-cpu/test_embedding.c — backend-cpu: embeddings, forward and backward
 * (tests/backend-cpu/fixture.h says how every family is tested). */
#include "fixture.h"

/* --- embeddings ------------------------------------------------------------------------ */

START_TEST(test_embedding)
{
    int vocab = 50, dim = 96, rows = 3000;
    float *table = falloc((size_t)vocab * dim), *out = falloc((size_t)rows * dim);
    float *dout = falloc((size_t)rows * dim), *dt = falloc((size_t)vocab * dim),
          *dt1 = falloc((size_t)vocab * dim), *want = falloc((size_t)vocab * dim);
    int32_t *ids = malloc(sizeof(int32_t) * rows);
    tf_test_fill(table, (size_t)vocab * dim, -1, 1);
    tf_test_fill(dout, (size_t)rows * dim, -1, 1);
    for (int i = 0; i < rows; i++) ids[i] = (int32_t)(tf_test_urand() * vocab);
    ids[0] = 0, ids[1] = vocab - 1;
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    for (int i = 0; i < rows; i++)
        ck_assert_int_eq(memcmp(out + (size_t)i * dim, table + (size_t)ids[i] * dim, dim * 4), 0);
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, true,
                                       TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL((size_t)rows * dim, out[i] == 2.0f * table[(size_t)ids[i / dim] * dim + i % dim]);
    /* backward: the serial float sum in row order, bit for bit, on 1 and 2 threads */
    for (size_t i = 0; i < (size_t)vocab * dim; i++) dt[i] = dt1[i] = want[i] = 0.125f;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < dim; j++) want[(size_t)ids[i] * dim + j] += dout[(size_t)i * dim + j];
    ck_assert_int_eq(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, vocab, dim,
                                       &err), TF_OK);
    ck_assert_int_eq(vt->embedding_bwd(be1, NULL, ids, rows, dout, TF_DTYPE_F32, dt1, vocab, dim,
                                       &err), TF_OK);
    ck_assert_int_eq(memcmp(dt, want, (size_t)vocab * dim * 4), 0);
    ck_assert_int_eq(memcmp(dt1, want, (size_t)vocab * dim * 4), 0);
    /* a bad id: TF_ERR_DATA naming it and its row, nothing written */
    float *before = falloc((size_t)rows * dim);
    memcpy(before, out, (size_t)rows * dim * 4);
    ids[1234] = vocab;
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, false,
                                 TF_DTYPE_F32, &err), TF_ERR_DATA, "id 50 at row 1234 is outside [0, 50)");
    ck_assert_int_eq(memcmp(before, out, (size_t)rows * dim * 4), 0);
    ids[1234] = -3;
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, vocab, dim, &err),
               TF_ERR_DATA, "embedding_bwd: id -3 at row 1234");
    ck_assert_int_eq(memcmp(dt1, dt, (size_t)vocab * dim * 4), 0);
    ids[1234] = 1;
    /* rows = 1; rows = 0 */
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids + 7, 1, table, vocab, dim, out, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, table + (size_t)ids[7] * dim, dim * 4), 0);
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, NULL, 0, NULL, vocab, dim, NULL, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, 0, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "dim must be >= 1");
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, NULL, vocab, dim, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "table is NULL");
    ASSERT_ERR(vt->embedding_fwd(be, NULL, NULL, rows, table, vocab, dim, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "ids is NULL");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_BF16, dt, vocab, dim, &err),
               TF_ERR_PLUGIN, "BF16");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, NULL, vocab, dim, &err),
               TF_ERR_RUNTIME, "dtable is NULL");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, 0, dim, &err),
               TF_ERR_RUNTIME, "vocab must be >= 1");
    free(table), free(out), free(dout), free(dt), free(dt1), free(want), free(ids), free(before);
}
END_TEST

int main(void)
{
    const tf_test_case cases[] = {
        {"embedding", test_embedding},
    };
    return backend_cpu_main("backend_cpu_embedding", cases, TF_TEST_COUNT(cases));
}
