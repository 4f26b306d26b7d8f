/* embedding_ops.c — the glue of embedding_fwd / embedding_bwd
 * (embedding.cu): argument checks, the id check record, the sort workspace,
 * then the launcher. */
#include "backend_cuda.h"

static tf_status check_embedding(tf_error *err, const char *op, const int32_t *ids, int rows,
                                 int vocab, int dim, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, "out", dt)) || (st = cuda_need_min(err, op, "rows", rows, 0)) ||
        (st = cuda_need_min(err, op, "vocab", vocab, 1)) ||
        (st = cuda_need_min(err, op, "dim", dim, 1)))
        return st;
    if (rows > 0 && (st = cuda_need(err, op, "ids", ids))) return st;
    return TF_OK;
}

static tfc_id_check id_check(tf_backend *be)
{
    tfc_id_check c = {be->bad_id, be->bad_id_claim, __atomic_load_n(&be->bad_id_gen, __ATOMIC_ACQUIRE)};
    return c;
}

/* Ids live in device memory: they are checked by the kernels, and a bad one
 * is reported (TF_ERR_DATA, naming the id and its row) by the next
 * stream_sync or event_sync of this backend, which is where the host first
 * could know. Rows with good ids are still written. */
tf_status cuda_embedding_fwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                                    const float *table, int vocab, int dim, void *out,
                                    bool accumulate, tf_dtype dt, tf_error *err)
{
    const char *op = "embedding_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_embedding(err, op, ids, rows, vocab, dim, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "table", table)) || (rc = cuda_need(err, op, "out", out)))
        return rc;
    return cuda_launched(err, op,
                    tfc_embedding_fwd(st->s, ids, rows, table, vocab, dim, out, accumulate, dt,
                                      id_check(be)),
                    "rows %d, vocab %d, dim %d, %s", rows, vocab, dim, tf_dtype_name(dt));
}

tf_status cuda_embedding_bwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                                    const void *dout, tf_dtype dt, float *dtable, int vocab,
                                    int dim, tf_error *err)
{
    const char *op = "embedding_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_embedding(err, op, ids, rows, vocab, dim, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dout", dout)) || (rc = cuda_need(err, op, "dtable", dtable)))
        return rc;
    size_t bytes = tfc_embedding_bwd_workspace_bytes(rows, dim, vocab);
    if (bytes == 0)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "cannot size the sort workspace for %d rows",
                         rows);
    if ((rc = cuda_workspace(be, st, bytes, op, &ws, err))) return rc;
    return cuda_launched(err, op,
                    tfc_embedding_bwd(st->s, ids, rows, dout, dt, dtable, vocab, dim, ws, bytes,
                                      id_check(be)),
                    "rows %d, vocab %d, dim %d, %s", rows, vocab, dim, tf_dtype_name(dt));
}
