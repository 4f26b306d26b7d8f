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
     * inputs with fp32 accumulation; TF32 would round the f32 inputs. */
    tf_matmul_mode saved = m->mode;
    if (m->mode == TF_MATMUL_TF32) m->mode = TF_MATMUL_FP32;
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

/* Dropout masks are a pure function of (seed, offset, element) in the
 * backend. Each site (embeddings 0; layer l: attention probabilities 1+3l,
 * attention output 2+3l, feed-forward output 3+3l; classifier 1+3L) gets its
 * own seed, and the offset advances by 2^32 per training forward, so every
 * mask of a run is distinct and a run with the same seed repeats exactly. */
uint64_t bert_dropout_seed(const tf_model *m, int site)
{
    return bert_mix64(m->dropout_seed ^ bert_mix64((uint64_t)site + 1));
}

uint64_t bert_dropout_offset(const tf_model *m) { return m->step << 32; }

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
