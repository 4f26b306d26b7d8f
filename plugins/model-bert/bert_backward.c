/* bert_backward.c — the backward pass of the last forward.
 *
 * Gradients are accumulated (+=) into the flat f32 gradient buffer; weight
 * gradients come straight out of GEMMs with beta = 1 and f32 C, bias
 * gradients from sum_rows, LayerNorm and embedding gradients from the
 * backend's accumulating ops. Each finished block of the flat layout (head
 * and pooler, layer L-1, ..., layer 0, embeddings) is announced through
 * grads_ready as soon as its last gradient op has been issued (stream order:
 * a consumer on another stream waits on the backend's default stream). */
#include <string.h>

#include "bert.h"

/* dW[out, in] += dyᵀ[out, N] · x[N, in] (f32, straight into the gradient buffer) */
static tf_status grad_weight(tf_model *m, const void *dy, int64_t ldy, const void *x, int64_t ldx,
                             int rows, int out, int in, size_t w_off, tf_error *err)
{
    bert_mm g = {.ta = true, .m = out, .n = in, .k = rows, .a = dy, .lda = ldy, .b = x,
                 .ldb = ldx, .c = bert_g(m, w_off), .ldc = in, .beta = 1.0f, .c_f32 = true};
    return bert_gemm(m, &g, TF_EPILOGUE_NONE, NULL, NULL, err);
}

/* dx[N, in] = dy[N, out] · W[out, in] (+ dx when accumulate) */
static tf_status grad_input(tf_model *m, const void *dy, int rows, int out, int in, size_t w_off,
                            void *dx, int64_t ldx, bool accumulate, tf_error *err)
{
    bert_mm g = {.m = rows, .n = in, .k = out, .a = dy, .lda = out, .b = bert_w(m, w_off),
                 .ldb = in, .c = dx, .ldc = ldx, .beta = accumulate ? 1.0f : 0.0f};
    return bert_gemm(m, &g, TF_EPILOGUE_NONE, NULL, NULL, err);
}

static tf_status grad_bias(tf_model *m, const void *dy, int rows, int cols, size_t b_off,
                           tf_error *err)
{
    return m->bk->sum_rows(m->be, NULL, dy, m->dt, rows, cols, bert_g(m, b_off), true, err);
}

static void announce(tf_grads_ready_fn ready, void *user, size_t begin, size_t end)
{
    if (ready && end > begin) ready(user, begin, end - begin);
}

/* Classification head and pooler; leaves d h[N, H] in dA. */
static tf_status bwd_classifier(tf_model *m, float loss_scale, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int B = m->rows, S = m->seq, N = m->tokens, H = c->hidden_size, L = c->num_labels;
    const tf_backend_vtable *bk = m->bk;
    /* the pooler's input rows: token 0 of each row (packed: forward gathered them) */
    const void *h = m->packed         ? x->cls
                    : c->num_layers ? x->layer[c->num_layers - 1].out
                                    : x->emb_out;
    const int64_t ldh = m->packed ? H : (int64_t)S * H;

    /* dlogits[B, L] = loss_scale * d mean CE / d logits */
    BERT_TRY(bert_cross_entropy(m, x->logits, B, L, m->batch_labels, -100, m->label_smoothing,
                                x->loss, x->dlogits, loss_scale, err));
    const void *pd = m->drop_cls ? x->pooled_drop : x->pooled;
    BERT_TRY(grad_weight(m, x->dlogits, L, pd, H, B, L, H, lay->head_w, err));
    BERT_TRY(grad_bias(m, x->dlogits, B, L, lay->head_b, err));
    /* d pooled[B, H] (through dropout and tanh, in d_pool) */
    BERT_TRY(grad_input(m, x->dlogits, B, L, H, lay->head_w, x->d_pool, H, false, err));
    void *dp = x->d_pool;
    if (m->drop_cls) {
        BERT_TRY(bk->dropout_bwd(m->be, NULL, x->d_pool, x->cls_keep, x->d_pool2, (size_t)B * H,
                                 (float)bert_classifier_dropout(c), m->dt, err));
        dp = x->d_pool2;
    }
    BERT_TRY(bk->tanh_bwd(m->be, NULL, dp, x->pooled, dp, (size_t)B * H, m->dt, err));
    /* pooler: input rows h[:, 0] */
    BERT_TRY(grad_weight(m, dp, H, h, ldh, B, H, H, lay->pool_w, err));
    BERT_TRY(grad_bias(m, dp, B, H, lay->pool_b, err));
    /* d h: only the first token of each row gets a gradient */
    if (m->packed) { /* cls is read: d cls[B, H] goes there, then to its tokens */
        BERT_TRY(grad_input(m, dp, B, H, H, lay->pool_w, x->cls, H, false, err));
        return bert_cls_scatter(m, x->cls, x->dA, err);
    }
    BERT_TRY(bert_zero(m, x->dA, (size_t)N * H * m->esize, err));
    BERT_TRY(grad_input(m, dp, B, H, H, lay->pool_w, x->dA, (int64_t)S * H, false, err));
    return TF_OK;
}

/* Question-answering head; leaves d h[N, H] in dA. */
static tf_status bwd_qa(tf_model *m, float loss_scale, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int B = m->rows, S = m->seq, N = B * S, H = c->hidden_size;
    const tf_backend_vtable *bk = m->bk;
    const void *h = c->num_layers ? x->layer[c->num_layers - 1].out : x->emb_out;

    /* loss = (CE_start + CE_end) / 2 */
    BERT_TRY(bk->cross_entropy(m->be, NULL, x->qa_se, S, m->dt, B, S, x->qa_pos, S, x->loss,
                               x->qa_dse, 0.5f * loss_scale, err));
    BERT_TRY(bk->cross_entropy(m->be, NULL, bert_at(m, x->qa_se, (size_t)N), S, m->dt, B, S,
                               x->qa_pos + B, S, x->loss + 1, bert_at(m, x->qa_dse, (size_t)N),
                               0.5f * loss_scale, err));
    /* dlogits[N, 2] = dseᵀ (exact transpose through the identity) */
    bert_mm g = {.ta = true, .m = N, .n = 2, .k = 2, .a = x->qa_dse, .lda = N, .b = x->eye2,
                 .ldb = 2, .c = x->dlogits, .ldc = 2};
    BERT_TRY(bert_gemm_exact(m, &g, err));
    BERT_TRY(grad_weight(m, x->dlogits, 2, h, H, N, 2, H, lay->head_w, err));
    BERT_TRY(grad_bias(m, x->dlogits, N, 2, lay->head_b, err));
    BERT_TRY(grad_input(m, x->dlogits, N, 2, H, lay->head_w, x->dA, H, false, err));
    return TF_OK;
}

/* One encoder layer: d out arrives in dA, d in leaves in dA. */
static tf_status bwd_layer(tf_model *m, int l, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layer_offsets *o = &m->lay.layer[l];
    bert_layer_acts *y = &m->acts.layer[l];
    bert_acts *x = &m->acts;
    const int N = m->tokens, H = c->hidden_size, I = c->intermediate_size;
    const tf_backend_vtable *bk = m->bk;
    const size_t NH = (size_t)N * H;
    const float ph = (float)c->hidden_dropout;
    const void *in = bert_layer_input(m, l);
    void *dA = x->dA, *dB = x->dB, *dC = x->dC;

    /* out = LN2(ln1_out + dropout(inter_act · Wo2ᵀ + bo2)) */
    BERT_TRY(bk->layernorm_bwd(m->be, NULL, dA, y->ln2_in, bert_p(m, o->ln2_g), y->mean2,
                               y->rstd2, dB, false, bert_g(m, o->ln2_g), bert_g(m, o->ln2_b), N, H,
                               m->dt, err));
    const void *dffn = dB; /* d of the dense output, before dropout */
    if (m->drop_hidden) {
        BERT_TRY(bk->dropout_bwd(m->be, NULL, dB, y->keep2, dC, NH, ph, m->dt, err));
        dffn = dC;
    }
    BERT_TRY(grad_weight(m, dffn, H, y->inter_act, I, N, H, I, o->out_w, err));
    BERT_TRY(grad_bias(m, dffn, N, H, o->out_b, err));
    BERT_TRY(grad_input(m, dffn, N, H, I, o->out_w, x->d_inter, I, false, err));
    BERT_TRY(bk->gelu_bwd(m->be, NULL, x->d_inter, y->inter_pre, x->d_inter, (size_t)N * I,
                          c->act, m->dt, err));
    BERT_TRY(grad_weight(m, x->d_inter, I, y->ln1_out, H, N, I, H, o->in_w, err));
    BERT_TRY(grad_bias(m, x->d_inter, N, I, o->in_b, err));
    /* d ln1_out = residual (dB) + d_inter · Wi */
    BERT_TRY(grad_input(m, x->d_inter, N, I, H, o->in_w, dB, H, true, err));

    /* ln1_out = LN1(in + dropout(ctx · Woᵀ + bo)) */
    BERT_TRY(bk->layernorm_bwd(m->be, NULL, dB, y->ln1_in, bert_p(m, o->ln1_g), y->mean1,
                               y->rstd1, dA, false, bert_g(m, o->ln1_g), bert_g(m, o->ln1_b), N, H,
                               m->dt, err));
    const void *dproj = dA;
    if (m->drop_hidden) {
        BERT_TRY(bk->dropout_bwd(m->be, NULL, dA, y->keep1, dC, NH, ph, m->dt, err));
        dproj = dC;
    }
    BERT_TRY(grad_weight(m, dproj, H, y->ctx, H, N, H, H, o->ao_w, err));
    BERT_TRY(grad_bias(m, dproj, N, H, o->ao_b, err));
    BERT_TRY(grad_input(m, dproj, N, H, H, o->ao_w, dB, H, false, err)); /* d ctx */

    tf_attention_desc ad = m->attn;
    ad.dropout = m->drop_attn ? (float)c->attention_dropout : 0.0f;
    ad.seed = bert_dropout_seed(m, 1 + 3 * l);
    ad.offset = m->drop_offset;
    BERT_TRY(bert_attention_layer_bwd(m, &ad, y->qkv, m->batch_mask, y->ctx, y->attn_save, dB,
                                      x->d_qkv, err));
    BERT_TRY(grad_weight(m, x->d_qkv, 3 * H, in, H, N, 3 * H, H, o->qkv_w, err));
    BERT_TRY(grad_bias(m, x->d_qkv, N, 3 * H, o->qkv_b, err));
    /* d in = residual (dA, from LN1) + d_qkv · Wqkv */
    BERT_TRY(grad_input(m, x->d_qkv, N, 3 * H, H, o->qkv_w, dA, H, true, err));
    return TF_OK;
}

/* Embeddings: d emb_out arrives in dA. */
static tf_status bwd_embeddings(tf_model *m, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int N = m->tokens, H = c->hidden_size;
    const tf_backend_vtable *bk = m->bk;

    const void *dy = x->dA;
    if (m->drop_hidden) {
        BERT_TRY(bk->dropout_bwd(m->be, NULL, x->dA, x->emb_keep, x->dB, (size_t)N * H,
                                 (float)c->hidden_dropout, m->dt, err));
        dy = x->dB;
    }
    BERT_TRY(bk->layernorm_bwd(m->be, NULL, dy, x->emb_sum, bert_p(m, lay->emb_ln_g), x->emb_mean,
                               x->emb_rstd, x->dC, false, bert_g(m, lay->emb_ln_g),
                               bert_g(m, lay->emb_ln_b), N, H, m->dt, err));
    BERT_TRY(bk->embedding_bwd(m->be, NULL, m->batch_ids, N, x->dC, m->dt, bert_g(m, lay->word),
                               c->vocab_size, H, err));
    BERT_TRY(bk->embedding_bwd(m->be, NULL, m->batch_types, N, x->dC, m->dt, bert_g(m, lay->type),
                               c->type_vocab_size, H, err));
    BERT_TRY(bert_positions_bwd(m, x->dC, err));
    /* nn.Embedding(padding_idx=pad_token_id) never gives that row a gradient;
     * the row's gradient was zero before (zero_grad) so zero it stays */
    if (c->pad_token_id >= 0)
        BERT_TRY(bert_zero(m, bert_g(m, lay->word + (size_t)c->pad_token_id * H),
                           (size_t)H * sizeof(float), err));
    return TF_OK;
}

tf_status bert_backward(tf_model *m, float loss_scale, tf_grads_ready_fn ready, void *user,
                        tf_error *err)
{
    if (m->have_forward && (m->stage_first != 0 || m->stage_end != m->cfg.num_layers))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: backward after the forward of a stage (layers [%d, %d)); use "
                            "stage_backward",
                            m->stage_first, m->stage_end);
    if (m->grad_n != m->lay.n)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: backward of the whole model, but the model keeps the gradients of "
                            "stage [%d, %d) only (keep_stage_grads)",
                            m->grad_first, m->grad_end);
    return bert_backward_stage(m, NULL, NULL, loss_scale, ready, user, err);
}

tf_status bert_backward_stage(tf_model *m, const void *grad_out, void *grad_in, float loss_scale,
                              tf_grads_ready_fn ready, void *user, tf_error *err)
{
    if (!m->have_forward)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: backward without a forward");
    if (!m->train)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: backward needs a training forward (train = true)");
    const int L = m->cfg.num_layers, first = m->stage_first, end = m->stage_end;
    const size_t NH = (size_t)m->rows * (size_t)m->seq * (size_t)m->cfg.hidden_size;
    if ((end < L && !grad_out) || (first > 0 && !grad_in))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: backward of the stage of layers [%d, %d) needs %s",
                            first, end, end < L && !grad_out ? "the gradient of its output (grad_out)"
                                                              : "a buffer for its input's gradient (grad_in)");
    if (end == L && !m->have_loss)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: backward needs a forward on a batch with %s",
                            m->cfg.task == TF_TASK_CLASSIFICATION ? "labels"
                                                                  : "start/end positions");
    m->have_forward = false; /* the saved activations are consumed */
    const bert_layout *lay = &m->lay;
    const bool cls = m->cfg.task == TF_TASK_CLASSIFICATION;
    tf_status st;
    if (end == L) {
        st = cls ? bwd_classifier(m, loss_scale, err) : bwd_qa(m, loss_scale, err);
        if (st != TF_OK) {
            tf_error_prefix(err, "model-bert: backward %s head",
                            cls ? "classification" : "question-answering");
            return st;
        }
        announce(ready, user, 0, lay->head_end);
    } else {
        /* d of the stage's output, from the next stage, where the layers expect it */
        BERT_TRY(bert_copy(m, m->acts.dA, grad_out, NH * m->esize, TF_COPY_DEVICE_TO_DEVICE, err));
    }
    for (int l = end - 1; l >= first; l--) {
        /* gradient checkpointing: the layer's activations again, from its
         * input, with the same dropout streams (a pure function of the step
         * and the layer); the last layer's are still there from forward */
        if (m->grad_ckpt && l < end - 1) {
            if ((st = bert_fwd_layer(m, l, bert_layer_input(m, l), m->batch_mask, err)) != TF_OK) {
                tf_error_prefix(err, "model-bert: recomputing layer %d", l);
                return st;
            }
        }
        if ((st = bwd_layer(m, l, err)) != TF_OK) {
            tf_error_prefix(err, "model-bert: backward layer %d", l);
            return st;
        }
        announce(ready, user, lay->layer[l].begin, lay->layer[l].end);
    }
    if (first > 0) /* d of the stage's input, for the stage before */
        return bert_copy(m, grad_in, m->acts.dA, NH * m->esize, TF_COPY_DEVICE_TO_DEVICE, err);
    if ((st = bwd_embeddings(m, err)) != TF_OK) {
        tf_error_prefix(err, "model-bert: backward embeddings");
        return st;
    }
    announce(ready, user, lay->emb_begin, lay->n);
    return TF_OK;
}
