/* bert_ops.c — thin wrappers over the backend vtable: GEMM descriptors filled
 * the same way everywhere, and memory calls that report failures as errors. */
#include <string.h>

#include "bert.h"
#include "tfcore/plugin.h"

tf_status bert_gemm(tf_model *m, const bert_mm *g, tf_gemm_epilogue ep, const float *bias,
                    void *aux, tf_error *err)
{
    tf_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.trans_a = g->ta;
    d.trans_b = g->tb;
    d.m = g->m;
    d.n = g->n;
    d.k = g->k;
    d.alpha = 1.0f;
    d.beta = g->beta;
    d.a = g->a;
    d.lda = g->lda;
    d.b = g->b;
    d.ldb = g->ldb;
    d.c = g->c;
    d.ldc = g->ldc;
    d.batch = 1;
    d.ab_dtype = m->dt;
    d.c_dtype = g->c_f32 ? TF_DTYPE_F32 : m->dt;
    d.mode = m->mode;
    d.epilogue = ep;
    d.bias = bias;
    d.aux = aux;
    d.gelu = m->cfg.act;
    return m->bk->gemm(m->be, NULL, &d, err);
}

tf_status bert_gemm_exact(tf_model *m, const bert_mm *g, tf_error *err)
{
    /* A product with the identity is exact in fp32 arithmetic, and in f16/bf16
     * inputs with fp32 accumulation; TF32, or bf16 GEMMs over f32 activations
     * (backend-cpu), would round the f32 inputs. */
    tf_matmul_mode saved = m->mode;
    if (m->mode == TF_MATMUL_TF32 || (m->dt == TF_DTYPE_F32 && m->mode != TF_MATMUL_FP32))
        m->mode = TF_MATMUL_FP32;
    tf_status st = bert_gemm(m, g, TF_EPILOGUE_NONE, NULL, NULL, err);
    m->mode = saved;
    return st;
}

tf_status bert_copy(tf_model *m, void *dst, const void *src, size_t bytes, tf_memcpy_kind kind,
                    tf_error *err)
{
    if (m->bk->memcpy(m->be, dst, src, bytes, kind, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: backend memcpy of %zu bytes failed",
                            bytes);
    return TF_OK;
}

tf_status bert_zero(tf_model *m, void *dst, size_t bytes, tf_error *err)
{
    if (m->bk->memset(m->be, dst, 0, bytes, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: backend memset of %zu bytes failed",
                            bytes);
    return TF_OK;
}

tf_status bert_sync(tf_model *m, tf_error *err) { return m->bk->stream_sync(m->be, NULL, err); }

/* Dropout masks are a pure function of (seed, offset, global row, element)
 * in the backend (tfcore/backend.h "Dropout masks"). Each site (embeddings 0;
 * layer l: attention probabilities 1+3l, attention output 2+3l, feed-forward
 * output 3+3l; classifier 1+3L) gets its own seed.
 * - After set_rows (the trainer's way, ABI 1.3): offset = epoch << 32 and row
 *   b of the batch is global row first + b * stride, its position in the
 *   epoch's sample order, so a sample draws the same masks whichever worker,
 *   batch or micro-batch it is in (one worker with batch B*N equals N
 *   workers with B, dropout on).
 * - Otherwise (set_step, or a backend without the 1.3 slots): offset =
 *   forward count << 32 and rows are the batch's own (0, 1, ...), so every
 *   mask of a run is distinct and a run with the same seed repeats exactly. */
uint64_t bert_dropout_seed(const tf_model *m, int site)
{
    return bert_mix64(m->dropout_seed ^ bert_mix64((uint64_t)site + 1));
}

void bert_dropout_begin(tf_model *m)
{
    const tf_backend_vtable *bk = m->bk;
    m->drop_by_row = m->rows_set && TF_HAS(bk, dropout_fwd_ex) && bk->dropout_fwd_ex &&
                     TF_HAS(bk, attention_fwd_ex) && bk->attention_fwd_ex &&
                     TF_HAS(bk, attention_bwd_ex) && bk->attention_bwd_ex;
    if (m->drop_by_row) {
        m->drop_offset = m->rows_epoch << 32;
        m->drop_first = m->rows_first;
        m->drop_stride = m->rows_stride;
    } else {
        m->drop_offset = m->step << 32;
        m->drop_first = 0;
        m->drop_stride = 1;
    }
}

tf_status bert_dropout(tf_model *m, int site, const void *x, void *y, uint8_t *keep, int rows,
                       size_t row_elems, float p, tf_error *err)
{
    if (!m->drop_by_row) /* the whole tensor as one stream, as ABI 1.0 */
        return m->bk->dropout_fwd(m->be, NULL, x, y, keep, (size_t)rows * row_elems, p,
                                  bert_dropout_seed(m, site), m->drop_offset, m->dt, err);
    tf_dropout_desc d = {.size = sizeof d,
                         .x = x,
                         .y = y,
                         .keep = keep,
                         .rows = (size_t)rows,
                         .row_elems = row_elems,
                         .p = p,
                         .dt = m->dt,
                         .seed = bert_dropout_seed(m, site),
                         .offset = m->drop_offset,
                         .row_first = m->drop_first,
                         .row_stride = m->drop_stride};
    return m->bk->dropout_fwd_ex(m->be, NULL, &d, err);
}

tf_status bert_attention_fwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                             const int32_t *mask, void *out, void *save, bool train,
                             tf_error *err)
{
    if (!m->drop_by_row) return m->bk->attention_fwd(m->be, NULL, d, qkv, mask, out, save, train, err);
    return m->bk->attention_fwd_ex(m->be, NULL, d, m->drop_first, m->drop_stride, qkv, mask, out,
                                   save, train, err);
}

tf_status bert_attention_bwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                             const int32_t *mask, const void *out, const void *save,
                             const void *dout, void *dqkv, tf_error *err)
{
    if (!m->drop_by_row)
        return m->bk->attention_bwd(m->be, NULL, d, qkv, mask, out, save, dout, dqkv, err);
    return m->bk->attention_bwd_ex(m->be, NULL, d, m->drop_first, m->drop_stride, qkv, mask, out,
                                   save, dout, dqkv, err);
}

tf_status bert_cross_entropy(tf_model *m, const void *logits, int rows, int classes,
                             const int32_t *labels, int ignore_index, float eps, float *loss,
                             void *dlogits, float grad_scale, tf_error *err)
{
    if (TF_HAS(m->bk, cross_entropy_ex)) {
        tf_cross_entropy_desc d = {.size = sizeof d,
                                   .logits = logits,
                                   .ld_logits = classes,
                                   .dt = m->dt,
                                   .rows = rows,
                                   .classes = classes,
                                   .labels = labels,
                                   .ignore_index = ignore_index,
                                   .label_smoothing = eps,
                                   .loss = loss,
                                   .dlogits = dlogits,
                                   .grad_scale = grad_scale};
        return m->bk->cross_entropy_ex(m->be, NULL, &d, err);
    }
    if (eps != 0.0f)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: label smoothing needs a backend with cross_entropy_ex "
                            "(plugin ABI 1.2)");
    return m->bk->cross_entropy(m->be, NULL, logits, classes, m->dt, rows, classes, labels,
                                ignore_index, loss, dlogits, grad_scale, err);
}
