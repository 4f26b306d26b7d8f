/* fused_ops.c — the glue of the fused kernels declared in fused_kernels.h:
 * residual + layernorm (layernorm.cu), flash-style attention (attention.cu)
 * and softmax cross-entropy (cross_entropy.cu): argument checks
 * (backend-cpu's rules), the stream, the workspace, then the launcher. */
#include <math.h>

#include "backend_cuda.h"
#include "fused_kernels.h"

/* --- layernorm ---------------------------------------------------------------- */

static tf_status check_ln_shape(tf_error *err, const char *op, int rows, int cols, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, "x", dt)) || (st = cuda_need_min(err, op, "rows", rows, 0)) ||
        (st = cuda_need_min(err, op, "cols", cols, 1)))
        return st;
    return TF_OK;
}

tf_status cuda_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x,
                                    const void *residual, void *in_out, void *y,
                                    const float *gamma, const float *beta, float *mean,
                                    float *rstd, int rows, int cols, float eps, tf_dtype dt,
                                    tf_error *err)
{
    const char *op = "layernorm_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_ln_shape(err, op, rows, cols, dt)))
        return rc;
    if (!(isfinite(eps) && eps >= 0.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "eps must be finite and >= 0, got %g",
                         (double)eps);
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x)) || (rc = cuda_need(err, op, "y", y)) ||
        (rc = cuda_need(err, op, "gamma", gamma)) || (rc = cuda_need(err, op, "beta", beta)) ||
        (rc = cuda_need(err, op, "mean", mean)) || (rc = cuda_need(err, op, "rstd", rstd)))
        return rc;
    if (residual && !in_out)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "in_out is NULL but residual is set (backward needs x + residual)");
    return cuda_launched(err, op,
                    tfc_layernorm_fwd(st->s, x, residual, in_out, y, gamma, beta, mean, rstd, rows,
                                      cols, eps, dt),
                    "[%d, %d] %s%s", rows, cols, tf_dtype_name(dt),
                    residual ? " with residual" : "");
}

tf_status cuda_layernorm_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                                    const float *gamma, const float *mean, const float *rstd,
                                    void *dx, bool dx_accumulate, float *dgamma, float *dbeta,
                                    int rows, int cols, tf_dtype dt, tf_error *err)
{
    const char *op = "layernorm_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_ln_shape(err, op, rows, cols, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dy", dy)) || (rc = cuda_need(err, op, "in", in)) ||
        (rc = cuda_need(err, op, "gamma", gamma)) || (rc = cuda_need(err, op, "mean", mean)) ||
        (rc = cuda_need(err, op, "rstd", rstd)) || (rc = cuda_need(err, op, "dx", dx)) ||
        (rc = cuda_need(err, op, "dgamma", dgamma)) || (rc = cuda_need(err, op, "dbeta", dbeta)))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_layernorm_bwd_workspace_bytes(rows, cols), op, &ws, err)))
        return rc;
    return cuda_launched(err, op,
                    tfc_layernorm_bwd(st->s, dy, in, gamma, mean, rstd, dx, dx_accumulate, dgamma,
                                      dbeta, rows, cols, dt, ws),
                    "[%d, %d] %s", rows, cols, tf_dtype_name(dt));
}

/* --- attention ---------------------------------------------------------------- */

static tf_status check_attention(tf_error *err, const char *op, const tf_attention_desc *d)
{
    tf_status st;
    if ((st = cuda_need(err, op, "desc", d)) ||
        (st = cuda_need_min(err, op, "batch", d->batch, 1)) ||
        (st = cuda_need_min(err, op, "seq", d->seq, 1)) ||
        (st = cuda_need_min(err, op, "heads", d->heads, 1)) ||
        (st = cuda_need_min(err, op, "head_dim", d->head_dim, 1)) ||
        (st = cuda_need_act(err, op, "qkv", d->dtype)))
        return st;
    if ((unsigned)d->mode > TF_MATMUL_BF16)
        return cuda_fail(err, TF_ERR_PLUGIN, op, "unknown matmul mode %d", (int)d->mode);
    if (!isfinite(d->scale))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "scale must be finite, got %g", (double)d->scale);
    if (!(d->dropout >= 0.0f && d->dropout < 1.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "dropout must be in [0, 1), got %g",
                         (double)d->dropout);
    if (d->dropout > 0.0f && d->seq > TFC_ATT_DROPOUT_MAX_SEQ)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "seq %d with dropout: the dropout masks index at most %d positions", d->seq,
                         TFC_ATT_DROPOUT_MAX_SEQ);
    if ((long long)d->heads * d->head_dim > INT32_MAX / 3)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "heads * head_dim = %lld is too large",
                         (long long)d->heads * d->head_dim);
    if ((long long)d->batch * d->seq > INT32_MAX)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "batch * seq = %lld is too large",
                         (long long)d->batch * d->seq);
    if (!tfc_attention_supported(d->dtype, d->head_dim))
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "head_dim %d with %s activations is not supported by backend-cuda's "
                         "attention kernels",
                         d->head_dim, tf_dtype_name(d->dtype));
    return TF_OK;
}

size_t cuda_attention_save_bytes(tf_backend *be, const tf_attention_desc *d)
{
    (void)be;
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return 0;
    return tfc_attention_save_bytes(d);
}

/* Sequence b's dropout mask is global row row_first + b * row_stride
 * (tfcore/backend.h "Dropout masks"); the 1.0 slots use (0, 1). */
tf_status cuda_attention_fwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                uint64_t row_first, uint64_t row_stride, const void *qkv,
                                const int32_t *mask, void *out, void *save, bool train,
                                tf_error *err)
{
    const char *op = "attention_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_attention(err, op, d)) ||
        (rc = cuda_need(err, op, "qkv", qkv)) || (rc = cuda_need(err, op, "out", out)))
        return rc;
    if (train && !save)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "save is NULL in training (backward needs attention_save_bytes of it)");
    return cuda_launched(err, op,
                         tfc_attention_fwd(st->s, d, row_first, row_stride, qkv, mask, out, save, train),
                         "batch %d, seq %d, heads %d, head_dim %d, %s%s", d->batch, d->seq, d->heads,
                         d->head_dim, tf_dtype_name(d->dtype), train ? ", train" : "");
}

tf_status cuda_attention_fwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                             const void *qkv, const int32_t *mask, void *out, void *save,
                             bool train, tf_error *err)
{
    return cuda_attention_fwd_ex(be, s, d, 0, 1, qkv, mask, out, save, train, err);
}

/* The backward recomputes the forward's keep bits: it must get its rows. */
tf_status cuda_attention_bwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                uint64_t row_first, uint64_t row_stride, const void *qkv,
                                const int32_t *mask, const void *out, const void *save,
                                const void *dout, void *dqkv, tf_error *err)
{
    const char *op = "attention_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_attention(err, op, d)) ||
        (rc = cuda_need(err, op, "qkv", qkv)) || (rc = cuda_need(err, op, "out", out)) ||
        (rc = cuda_need(err, op, "save", save)) || (rc = cuda_need(err, op, "dout", dout)) ||
        (rc = cuda_need(err, op, "dqkv", dqkv)))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_attention_bwd_workspace_bytes(d), op, &ws, err)))
        return rc;
    return cuda_launched(err, op,
                         tfc_attention_bwd(st->s, d, row_first, row_stride, qkv, mask, out, save, dout,
                                           dqkv, ws),
                         "batch %d, seq %d, heads %d, head_dim %d, %s", d->batch, d->seq, d->heads,
                         d->head_dim, tf_dtype_name(d->dtype));
}

tf_status cuda_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                             const void *qkv, const int32_t *mask, const void *out,
                             const void *save, const void *dout, void *dqkv, tf_error *err)
{
    return cuda_attention_bwd_ex(be, s, d, 0, 1, qkv, mask, out, save, dout, dqkv, err);
}

/* --- cross-entropy ------------------------------------------------------------ */

static tf_status cross_entropy(tf_backend *be, tf_stream *s, const char *op, const void *logits,
                               int64_t ld_logits, tf_dtype dt, int rows, int classes,
                               const int32_t *labels, int ignore_index, float label_smoothing,
                               float *loss, void *dlogits, float grad_scale, tf_error *err)
{
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "logits", dt)) ||
        (rc = cuda_need_min(err, op, "rows", rows, 0)) ||
        (rc = cuda_need_min(err, op, "classes", classes, 1)) ||
        (rc = cuda_need(err, op, "loss", loss)))
        return rc;
    if (ld_logits < classes)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "ld_logits %lld is less than classes %d",
                         (long long)ld_logits, classes);
    if (rows > 0 && ((rc = cuda_need(err, op, "logits", logits)) ||
                     (rc = cuda_need(err, op, "labels", labels))))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_cross_entropy_workspace_bytes(rows, classes), op, &ws,
                             err)))
        return rc;
    return cuda_launched(err, op,
                    tfc_cross_entropy(st->s, logits, ld_logits, dt, rows, classes, labels,
                                      ignore_index, label_smoothing, loss, dlogits, grad_scale, ws),
                    "[%d, %d] %s", rows, classes, tf_dtype_name(dt));
}

tf_status cuda_cross_entropy(tf_backend *be, tf_stream *s, const void *logits, int64_t ld_logits,
                             tf_dtype dt, int rows, int classes, const int32_t *labels,
                             int ignore_index, float *loss, void *dlogits, float grad_scale,
                             tf_error *err)
{
    return cross_entropy(be, s, "cross_entropy", logits, ld_logits, dt, rows, classes, labels,
                         ignore_index, 0.0f, loss, dlogits, grad_scale, err);
}

tf_status cuda_cross_entropy_ex(tf_backend *be, tf_stream *s, const tf_cross_entropy_desc *d,
                                tf_error *err)
{
    const char *op = "cross_entropy_ex";
    tf_status rc;
    if ((rc = cuda_need(err, op, "descriptor", d))) return rc;
    if (d->size < sizeof *d)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.2 needs %zu",
                         (unsigned)d->size, sizeof *d);
    if (!(d->label_smoothing >= 0.0f && d->label_smoothing <= 1.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "label_smoothing must be in [0, 1], got %g",
                         (double)d->label_smoothing);
    return cross_entropy(be, s, op, d->logits, d->ld_logits, d->dt, d->rows, d->classes,
                         d->labels, d->ignore_index, d->label_smoothing, d->loss, d->dlogits,
                         d->grad_scale, err);
}
