/* fused_ops.c — the glue of the fused kernels declared in fused_kernels.h:
 * residual + layernorm (layernorm.cu), flash-style attention (attention.cu)
 * and softmax cross-entropy (cross_entropy.cu): libtfcore's argument checks
 * (tfcore/backend_check.h) and this backend's own, the stream, the
 * workspace, then the launcher. */
#include <math.h>

#include "backend_cuda.h"
#include "fused_kernels.h"

/* --- layernorm ---------------------------------------------------------------- */

tf_status cuda_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x,
                                    const void *residual, void *in_out, void *y,
                                    const float *gamma, const float *beta, float *mean,
                                    float *rstd, int rows, int cols, float eps, tf_dtype dt,
                                    tf_error *err)
{
    const char *op = "layernorm_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_layernorm_fwd(&cuda_checker, err, op, x, residual, in_out, y, gamma, beta, mean,
                                     rstd, rows, cols, eps, dt)))
        return rc;
    if (rows == 0) return TF_OK;
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
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_layernorm_bwd(&cuda_checker, err, op, dy, in, gamma, mean, rstd, dx, dgamma, dbeta,
                                     rows, cols, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_workspace(be, st, tfc_layernorm_bwd_workspace_bytes(rows, cols), op, &ws, err)))
        return rc;
    return cuda_launched(err, op,
                    tfc_layernorm_bwd(st->s, dy, in, gamma, mean, rstd, dx, dx_accumulate, dgamma,
                                      dbeta, rows, cols, dt, ws),
                    "[%d, %d] %s", rows, cols, tf_dtype_name(dt));
}

/* --- attention ---------------------------------------------------------------- */

/* What libtfcore's checks (tf_check_attention_fwd/bwd) leave to this
 * backend: token rows index in int, and the kernels' head_dim per dtype. */
static tf_status check_attention(tf_error *err, const char *op, const tf_attention_desc *d)
{
    if (d->dropout > 0.0f && d->seq > TFC_ATT_DROPOUT_MAX_SEQ)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "seq %d with dropout: the dropout masks index at most %d positions", d->seq,
                         TFC_ATT_DROPOUT_MAX_SEQ);
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
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_attention_fwd(&cuda_checker, err, op, d, qkv, out, save, train)) ||
        (rc = check_attention(err, op, d)))
        return rc;
    return cuda_launched(err, op,
                         tfc_attention_fwd(st->s, d, row_first, row_stride, NULL, qkv, mask, out, save,
                                           train),
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
    /* out: D = rowsum(dO * O) in the backward kernel reads it */
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_attention_bwd(&cuda_checker, err, op, d, qkv, save, dout, dqkv)) ||
        (rc = cuda_need(err, op, "out", out)) || (rc = check_attention(err, op, d)))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_attention_bwd_workspace_bytes(d), op, &ws, err)))
        return rc;
    return cuda_launched(err, op,
                         tfc_attention_bwd(st->s, d, row_first, row_stride, NULL, qkv, mask, out, save,
                                           dout, dqkv, ws),
                         "batch %d, seq %d, heads %d, head_dim %d, %s", d->batch, d->seq, d->heads,
                         d->head_dim, tf_dtype_name(d->dtype));
}

tf_status cuda_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                             const void *qkv, const int32_t *mask, const void *out,
                             const void *save, const void *dout, void *dqkv, tf_error *err)
{
    return cuda_attention_bwd_ex(be, s, d, 0, 1, qkv, mask, out, save, dout, dqkv, err);
}

/* --- attention over packed sequences (ABI 1.4) ---------------------------------- */

/* The descriptor's size and cu_seqlens set; lengths are the kernels' to
 * clamp (reading them here would sync the stream). */
static tf_status check_varlen(tf_error *err, const char *op, const tf_attention_varlen_desc *vd)
{
    if (!vd) return cuda_fail(err, TF_ERR_RUNTIME, op, "the descriptor is NULL");
    if (vd->size < sizeof *vd)
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "descriptor size %u, expected at least %zu (core built against an older "
                         "ABI?)",
                         vd->size, sizeof *vd);
    return cuda_need(err, op, "cu_seqlens", vd->cu_seqlens);
}

tf_status cuda_attention_varlen_fwd(tf_backend *be, tf_stream *s,
                                    const tf_attention_varlen_desc *vd, const void *qkv,
                                    void *out, void *save, bool train, tf_error *err)
{
    const char *op = "attention_varlen_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_varlen(err, op, vd)) ||
        (rc = tf_check_attention_fwd(&cuda_checker, err, op, &vd->attn, qkv, out, save, train)) ||
        (rc = check_attention(err, op, &vd->attn)))
        return rc;
    const tf_attention_desc *d = &vd->attn;
    return cuda_launched(err, op,
                         tfc_attention_fwd(st->s, d, vd->row_first, vd->row_stride, vd->cu_seqlens,
                                           qkv, NULL, out, save, train),
                         "batch %d, seq %d, heads %d, head_dim %d, %s%s", d->batch, d->seq, d->heads,
                         d->head_dim, tf_dtype_name(d->dtype), train ? ", train" : "");
}

tf_status cuda_attention_varlen_bwd(tf_backend *be, tf_stream *s,
                                    const tf_attention_varlen_desc *vd, const void *qkv,
                                    const void *out, const void *save, const void *dout,
                                    void *dqkv, tf_error *err)
{
    const char *op = "attention_varlen_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_varlen(err, op, vd)) ||
        (rc = tf_check_attention_bwd(&cuda_checker, err, op, &vd->attn, qkv, save, dout, dqkv)) ||
        (rc = cuda_need(err, op, "out", out)) || (rc = check_attention(err, op, &vd->attn)))
        return rc;
    const tf_attention_desc *d = &vd->attn;
    if ((rc = cuda_workspace(be, st, tfc_attention_bwd_workspace_bytes(d), op, &ws, err)))
        return rc;
    return cuda_launched(err, op,
                         tfc_attention_bwd(st->s, d, vd->row_first, vd->row_stride, vd->cu_seqlens,
                                           qkv, NULL, out, save, dout, dqkv, ws),
                         "batch %d, seq %d, heads %d, head_dim %d, %s", d->batch, d->seq, d->heads,
                         d->head_dim, tf_dtype_name(d->dtype));
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
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_cross_entropy(&cuda_checker, err, op, logits, ld_logits, dt, rows, classes, labels,
                                     loss)))
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
    if ((rc = tf_check_cross_entropy_desc(&cuda_checker, err, op, d))) return rc;
    return cross_entropy(be, s, op, d->logits, d->ld_logits, d->dt, d->rows, d->classes,
                         d->labels, d->ignore_index, d->label_smoothing, d->loss, d->dlogits,
                         d->grad_scale, err);
}
