/* reduce_ops.c — the glue of sum_rows, sum_squares and finite_check
 * (reduce.cu): argument checks (backend-cpu's rules), the stream, the
 * workspace, then the launcher. */
#include "backend_cuda.h"

tf_status cuda_sum_rows(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                               int cols, float *dbias, bool accumulate, tf_error *err)
{
    const char *op = "sum_rows";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "dy", dt)) ||
        (rc = cuda_need_min(err, op, "rows", rows, 0)) ||
        (rc = cuda_need_min(err, op, "cols", cols, 0)))
        return rc;
    if (cols == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dbias", dbias))) return rc;
    if (rows > 0 && (rc = cuda_need(err, op, "dy", dy))) return rc;
    if ((rc = cuda_workspace(be, st, tfc_sum_rows_workspace_bytes(rows, cols), op, &ws, err)))
        return rc;
    return cuda_launched(err, op, tfc_sum_rows(st->s, dy, dt, rows, cols, dbias, accumulate, ws),
                    "[%d, %d]", rows, cols);
}

tf_status cuda_sum_squares(tf_backend *be, tf_stream *s, const float *x, size_t n,
                                  float *out, tf_error *err)
{
    const char *op = "sum_squares";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need(err, op, "out", out))) return rc;
    if (n > 0 && (rc = cuda_need(err, op, "x", x))) return rc;
    if ((rc = cuda_workspace(be, st, tfc_sum_squares_workspace_bytes(), op, &ws, err))) return rc;
    return cuda_launched(err, op, tfc_sum_squares(st->s, x, n, out, ws), "[%zu]", n);
}

tf_status cuda_finite_check(tf_backend *be, tf_stream *s, const void *x, size_t n,
                                   tf_dtype dt, int32_t *found, tf_error *err)
{
    const char *op = "finite_check";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need(err, op, "found", found)))
        return rc;
    if (dt != TF_DTYPE_F64 && (rc = cuda_need_act(err, op, "x", dt))) return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x))) return rc;
    return cuda_launched(err, op, tfc_finite_check(st->s, x, n, dt, found), "[%zu] %s", n,
                    tf_dtype_name(dt));
}
