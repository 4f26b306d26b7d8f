/* elementwise_ops.c — the glue of GELU, tanh, dropout, add, scale and cast
 * (elementwise.cu): argument checks (backend-cpu's rules), the stream, then
 * the launcher. */
#include <math.h>

#include "backend_cuda.h"

static tf_status check_unary(tf_error *err, const char *op, const void *a, const char *an,
                             const void *b, const char *bn, const void *c, const char *cn,
                             size_t n, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, an, dt))) return st;
    if (n == 0) return TF_OK;
    if ((st = cuda_need(err, op, an, a)) || (st = cuda_need(err, op, bn, b))) return st;
    if (cn && (st = cuda_need(err, op, cn, c))) return st;
    return TF_OK;
}

static tf_status check_gelu_kind(tf_error *err, const char *op, tf_gelu_kind kind)
{
    if (kind == TF_GELU_ERF || kind == TF_GELU_TANH) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "unknown gelu kind %d", (int)kind);
}

tf_status cuda_gelu_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                               tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    const char *op = "gelu_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, x, "x", y, "y", NULL, NULL, n, dt)) ||
        (rc = check_gelu_kind(err, op, kind)))
        return rc;
    if (n == 0) return TF_OK;
    return cuda_launched(err, op, tfc_gelu_fwd(st->s, x, y, n, kind, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

tf_status cuda_gelu_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *x,
                               void *dx, size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    const char *op = "gelu_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, dy, "dy", x, "x", dx, "dx", n, dt)) ||
        (rc = check_gelu_kind(err, op, kind)))
        return rc;
    if (n == 0) return TF_OK;
    return cuda_launched(err, op, tfc_gelu_bwd(st->s, dy, x, dx, n, kind, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

tf_status cuda_tanh_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                               tf_dtype dt, tf_error *err)
{
    const char *op = "tanh_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, x, "x", y, "y", NULL, NULL, n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return cuda_launched(err, op, tfc_tanh_fwd(st->s, x, y, n, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

tf_status cuda_tanh_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *y,
                               void *dx, size_t n, tf_dtype dt, tf_error *err)
{
    const char *op = "tanh_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, dy, "dy", y, "y", dx, "dx", n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return cuda_launched(err, op, tfc_tanh_bwd(st->s, dy, y, dx, n, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

static tf_status check_p(tf_error *err, const char *op, float p)
{
    if (p >= 0.0f && p <= 1.0f) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "p must be in [0, 1], got %g", (double)p);
}

tf_status cuda_dropout_fwd(tf_backend *be, tf_stream *s, const void *x, void *y,
                                  uint8_t *keep, size_t n, float p, uint64_t seed,
                                  uint64_t offset, tf_dtype dt, tf_error *err)
{
    const char *op = "dropout_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "x", dt)) ||
        (rc = check_p(err, op, p)))
        return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x)) || (rc = cuda_need(err, op, "y", y)) ||
        (rc = cuda_need(err, op, "keep", keep)))
        return rc;
    /* backend-cpu's threshold and scale, computed the same way */
    float t = ceilf(p * 16777216.0f);
    uint32_t thr = t <= 0.0f ? 0u : t >= 16777216.0f ? 16777216u : (uint32_t)t;
    float scale = 1.0f / (1.0f - p); /* inf for p = 1, where nothing is kept */
    return cuda_launched(err, op,
                         tfc_dropout_fwd(st->s, x, y, keep, 1, n, thr, scale, seed, offset, 0, 1, dt),
                         "[%zu] %s, p %g", n, tf_dtype_name(dt), (double)p);
}

/* ABI 1.3: rows [rows, row_elems], row b drawn as global row first + b * stride. */
tf_status cuda_dropout_fwd_ex(tf_backend *be, tf_stream *s, const tf_dropout_desc *d, tf_error *err)
{
    const char *op = "dropout_fwd_ex";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = tf_check_dropout_desc(&cuda_checker, err, op, d)))
        return rc;
    if (d->rows == 0 || d->row_elems == 0) return TF_OK; /* rows * row_elems: checked, no overflow */
    float t = ceilf(d->p * 16777216.0f);
    uint32_t thr = t <= 0.0f ? 0u : t >= 16777216.0f ? 16777216u : (uint32_t)t;
    float scale = 1.0f / (1.0f - d->p);
    return cuda_launched(err, op,
                         tfc_dropout_fwd(st->s, d->x, d->y, d->keep, d->rows, d->row_elems, thr, scale,
                                         d->seed, d->offset, d->row_first, d->row_stride, d->dt),
                         "[%zu, %zu] %s, p %g", d->rows, d->row_elems, tf_dtype_name(d->dt), (double)d->p);
}

tf_status cuda_dropout_bwd(tf_backend *be, tf_stream *s, const void *dy,
                                  const uint8_t *keep, void *dx, size_t n, float p, tf_dtype dt,
                                  tf_error *err)
{
    const char *op = "dropout_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "dy", dt)) ||
        (rc = check_p(err, op, p)))
        return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dy", dy)) || (rc = cuda_need(err, op, "keep", keep)) ||
        (rc = cuda_need(err, op, "dx", dx)))
        return rc;
    float scale = 1.0f / (1.0f - p);
    return cuda_launched(err, op, tfc_dropout_bwd(st->s, dy, keep, dx, n, scale, dt), "[%zu] %s, p %g",
                    n, tf_dtype_name(dt), (double)p);
}

tf_status cuda_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y,
                          size_t n, tf_dtype dt, tf_error *err)
{
    const char *op = "add";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, a, "a", b, "b", y, "y", n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return cuda_launched(err, op, tfc_add(st->s, a, b, y, n, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

tf_status cuda_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha,
                            tf_dtype dt, tf_error *err)
{
    const char *op = "scale";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "x", dt))) return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x))) return rc;
    return cuda_launched(err, op, tfc_scale(st->s, x, n, alpha, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

static bool castable(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16 || dt == TF_DTYPE_F64;
}

tf_status cuda_cast(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt,
                           void *dst, tf_dtype dst_dt, size_t n, tf_error *err)
{
    const char *op = "cast";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err))) return rc;
    if (!castable(src_dt) || !castable(dst_dt)) {
        const char *a = tf_dtype_name(src_dt), *b = tf_dtype_name(dst_dt);
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "cast from %s to %s is not supported (F32, F16, BF16, F64 only)",
                         a ? a : "?", b ? b : "?");
    }
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "src", src)) || (rc = cuda_need(err, op, "dst", dst))) return rc;
    if (src_dt == dst_dt) {
        if (src == dst) return TF_OK;
        return cuda_launched(err, op,
                        cudaMemcpyAsync(dst, src, n * tf_dtype_size(src_dt),
                                        cudaMemcpyDeviceToDevice, st->s),
                        "[%zu] %s copy", n, tf_dtype_name(src_dt));
    }
    return cuda_launched(err, op, tfc_cast(st->s, src, src_dt, dst, dst_dt, n), "[%zu] %s -> %s", n,
                    tf_dtype_name(src_dt), tf_dtype_name(dst_dt));
}
