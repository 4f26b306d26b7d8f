/* bert_forward.c — the activation buffers and the forward pass
 * (transformers' BertForSequenceClassification / BertForQuestionAnswering).
 *
 * N = rows x seq tokens, H hidden, I intermediate, B rows, S seq. Every buffer
 * is sized for max_rows x max_seq at create and used packed for the batch at
 * hand ([N, H] with N = B*S, row-major). Nothing is allocated here. */
#include <math.h>
#include <string.h>

#include "bert.h"

/* ---- the arena ------------------------------------------------------------ */

typedef struct arena {
    char *base; /* NULL while sizing */
    size_t at;
} arena;

static void *take(arena *a, size_t bytes)
{
    a->at = (a->at + 255) / 256 * 256; /* every buffer 256-byte aligned */
    void *p = a->base ? a->base + a->at : NULL;
    a->at += bytes;
    return p;
}

size_t bert_acts_plan(tf_model *m, char *base)
{
    const bert_config *c = &m->cfg;
    const size_t B = (size_t)m->max_rows, N = B * (size_t)m->max_seq;
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    const size_t es = m->esize;
    const bool hid_drop = c->hidden_dropout > 0;
    bert_acts *x = &m->acts;
    arena a = {base, 0};

    x->emb_sum = take(&a, N * H * es);
    x->emb_mean = take(&a, N * sizeof(float));
    x->emb_rstd = take(&a, N * sizeof(float));
    x->emb_out = take(&a, N * H * es);
    x->emb_keep = hid_drop ? take(&a, N * H) : NULL;
    for (int l = 0; l < c->num_layers; l++) {
        bert_layer_acts *y = &x->layer[l];
        if (m->grad_ckpt && l > 0) {
            /* gradient checkpointing: every layer computes in layer 0's
             * buffers and keeps only its output (the next layer's input);
             * backward recomputes the layer before its gradients */
            *y = x->layer[0];
            y->out = take(&a, N * H * es);
            continue;
        }
        y->qkv = take(&a, N * 3 * H * es);
        y->attn_save = take(&a, m->attn_save_bytes);
        y->ctx = take(&a, N * H * es);
        y->keep1 = hid_drop ? take(&a, N * H) : NULL;
        y->ln1_in = take(&a, N * H * es);
        y->mean1 = take(&a, N * sizeof(float));
        y->rstd1 = take(&a, N * sizeof(float));
        y->ln1_out = take(&a, N * H * es);
        y->inter_pre = take(&a, N * I * es);
        y->inter_act = take(&a, N * I * es);
        y->keep2 = hid_drop ? take(&a, N * H) : NULL;
        y->ln2_in = take(&a, N * H * es);
        y->mean2 = take(&a, N * sizeof(float));
        y->rstd2 = take(&a, N * sizeof(float));
        y->out = take(&a, N * H * es);
    }
    if (c->task == TF_TASK_CLASSIFICATION) {
        const size_t L = (size_t)c->num_labels;
        x->pool_pre = take(&a, B * H * es);
        x->pooled = take(&a, B * H * es);
        x->pooled_drop = take(&a, B * H * es);
        x->cls_keep = bert_classifier_dropout(c) > 0 ? take(&a, B * H) : NULL;
        x->logits = take(&a, B * L * es);
        x->dlogits = take(&a, B * L * es);
        x->d_pool = take(&a, B * H * es);
        x->d_pool2 = take(&a, B * H * es);
    } else {
        x->logits = take(&a, N * 2 * es);
        x->dlogits = take(&a, N * 2 * es);
        x->qa_se = take(&a, 2 * N * es);
        x->qa_dse = take(&a, 2 * N * es);
        x->eye2 = take(&a, 4 * es);
        x->qa_pos = take(&a, 2 * B * sizeof(int32_t));
    }
    x->loss = take(&a, 2 * sizeof(float));
    x->pos_ids = take(&a, (size_t)m->max_seq * sizeof(int32_t));
    x->ones = take(&a, N * sizeof(int32_t));
    x->zeros = take(&a, N * sizeof(int32_t));
    x->cu = take(&a, (B + 1) * sizeof(int32_t));
    x->packed_ids = take(&a, N * sizeof(int32_t));
    x->packed_types = take(&a, N * sizeof(int32_t));
    x->packed_pos = take(&a, N * sizeof(int32_t));
    x->cls = c->task == TF_TASK_CLASSIFICATION ? take(&a, B * H * es) : NULL;
    x->tmp = take(&a, N * H * es);
    x->dA = take(&a, N * H * es);
    x->dB = take(&a, N * H * es);
    x->dC = take(&a, N * H * es);
    x->d_inter = take(&a, N * I * es);
    x->d_qkv = take(&a, N * 3 * H * es);
    return (a.at + 255) / 256 * 256;
}

/* ---- forward --------------------------------------------------------------- */

static tf_status fwd_embeddings(tf_model *m, const tf_batch *b, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int N = m->tokens, H = c->hidden_size;
    const tf_backend_vtable *bk = m->bk;
    const int32_t *ids = m->packed ? x->packed_ids : b->input_ids;
    const int32_t *types = m->packed                ? x->packed_types
                           : b->token_type_ids ? b->token_type_ids
                                               : x->zeros;

    /* word + token_type, then + position: transformers' order of the sums */
    BERT_TRY(bk->embedding_fwd(m->be, NULL, ids, N, bert_p(m, lay->word), c->vocab_size, H,
                               x->emb_sum, false, m->dt, err));
    BERT_TRY(bk->embedding_fwd(m->be, NULL, types, N, bert_p(m, lay->type), c->type_vocab_size, H,
                               x->emb_sum, true, m->dt, err));
    BERT_TRY(bert_positions_fwd(m, x->emb_sum, err));
    BERT_TRY(bk->layernorm_fwd(m->be, NULL, x->emb_sum, NULL, NULL, x->emb_out,
                               bert_p(m, lay->emb_ln_g), bert_p(m, lay->emb_ln_b), x->emb_mean,
                               x->emb_rstd, N, H, (float)c->layer_norm_eps, m->dt, err));
    if (m->drop_hidden)
        BERT_TRY(bert_dropout_tokens(m, 0, x->emb_out, x->emb_out, x->emb_keep,
                                     (float)c->hidden_dropout, err));
    return TF_OK;
}

tf_status bert_fwd_layer(tf_model *m, int l, const void *in, const int32_t *mask, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layer_offsets *o = &m->lay.layer[l];
    bert_layer_acts *y = &m->acts.layer[l];
    void *tmp = m->acts.tmp;
    const int N = m->tokens, H = c->hidden_size, I = c->intermediate_size;
    const tf_backend_vtable *bk = m->bk;
    const float eps = (float)c->layer_norm_eps;

    /* qkv[N, 3H] = in[N, H] · Wqkvᵀ + bqkv */
    bert_mm g = {.tb = true, .m = N, .n = 3 * H, .k = H, .a = in, .lda = H,
                 .b = bert_w(m, o->qkv_w), .ldb = H, .c = y->qkv, .ldc = 3 * H};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, o->qkv_b), NULL, err));
    tf_attention_desc ad = m->attn;
    ad.dropout = m->drop_attn ? (float)c->attention_dropout : 0.0f;
    ad.seed = bert_dropout_seed(m, 1 + 3 * l);
    ad.offset = m->drop_offset;
    /* eval keeps no probabilities: without a save buffer the backend softmaxes
     * each block in its cache-sized scratch instead of writing [B, heads, S, S]
     * floats per layer that nothing reads */
    BERT_TRY(bert_attention_layer_fwd(m, &ad, y->qkv, mask, y->ctx, m->train ? y->attn_save : NULL,
                                      err));
    /* tmp[N, H] = dropout(ctx · Woᵀ + bo); ln1 = LayerNorm(tmp + in) */
    g = (bert_mm){.tb = true, .m = N, .n = H, .k = H, .a = y->ctx, .lda = H,
                  .b = bert_w(m, o->ao_w), .ldb = H, .c = tmp, .ldc = H};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, o->ao_b), NULL, err));
    if (m->drop_hidden)
        BERT_TRY(bert_dropout_tokens(m, 2 + 3 * l, tmp, tmp, y->keep1, (float)c->hidden_dropout,
                                     err));
    BERT_TRY(bk->layernorm_fwd(m->be, NULL, tmp, in, y->ln1_in, y->ln1_out, bert_p(m, o->ln1_g),
                               bert_p(m, o->ln1_b), y->mean1, y->rstd1, N, H, eps, m->dt, err));
    /* inter_act[N, I] = gelu(ln1 · Wiᵀ + bi), pre-activation kept in inter_pre
     * for backward; eval keeps it nowhere (every layer writes it to d_inter,
     * the backward's buffer, so an evaluation touches one [N, I] not L) */
    g = (bert_mm){.tb = true, .m = N, .n = I, .k = H, .a = y->ln1_out, .lda = H,
                  .b = bert_w(m, o->in_w), .ldb = H, .c = y->inter_act, .ldc = I};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS_GELU, bert_p(m, o->in_b),
                       m->train ? y->inter_pre : m->acts.d_inter, err));
    /* tmp[N, H] = dropout(inter_act · Wo2ᵀ + bo2); out = LayerNorm(tmp + ln1) */
    g = (bert_mm){.tb = true, .m = N, .n = H, .k = I, .a = y->inter_act, .lda = I,
                  .b = bert_w(m, o->out_w), .ldb = I, .c = tmp, .ldc = H};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, o->out_b), NULL, err));
    if (m->drop_hidden)
        BERT_TRY(bert_dropout_tokens(m, 3 + 3 * l, tmp, tmp, y->keep2, (float)c->hidden_dropout,
                                     err));
    BERT_TRY(bk->layernorm_fwd(m->be, NULL, tmp, y->ln1_out, y->ln2_in, y->out,
                               bert_p(m, o->ln2_g), bert_p(m, o->ln2_b), y->mean2, y->rstd2, N, H,
                               eps, m->dt, err));
    return TF_OK;
}

/* The output of the encoder: [N, H]. */
static void *encoder_out(const tf_model *m)
{
    return m->cfg.num_layers ? m->acts.layer[m->cfg.num_layers - 1].out : m->acts.emb_out;
}

static tf_status fwd_classifier(tf_model *m, const tf_batch *b, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int B = b->rows, H = c->hidden_size, L = c->num_labels;
    const tf_backend_vtable *bk = m->bk;

    /* pooled[B, H] = tanh(h[:, 0] · Wpᵀ + bp): token 0 of each sequence */
    const void *cls;
    int64_t ld;
    BERT_TRY(bert_cls_rows(m, encoder_out(m), &cls, &ld, err));
    bert_mm g = {.tb = true, .m = B, .n = H, .k = H, .a = cls, .lda = ld,
                 .b = bert_w(m, lay->pool_w), .ldb = H, .c = x->pool_pre, .ldc = H};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, lay->pool_b), NULL, err));
    BERT_TRY(bk->tanh_fwd(m->be, NULL, x->pool_pre, x->pooled, (size_t)B * H, m->dt, err));
    const void *pd = x->pooled;
    if (m->drop_cls) {
        BERT_TRY(bert_dropout(m, 1 + 3 * c->num_layers, x->pooled, x->pooled_drop, x->cls_keep, B,
                              (size_t)H, (float)bert_classifier_dropout(c), err));
        pd = x->pooled_drop;
    }
    /* logits[B, L] = pd · Wcᵀ + bc */
    g = (bert_mm){.tb = true, .m = B, .n = L, .k = H, .a = pd, .lda = H,
                  .b = bert_w(m, lay->head_w), .ldb = H, .c = x->logits, .ldc = L};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, lay->head_b), NULL, err));
    if (b->labels) /* CrossEntropyLoss(): mean over rows, ignore_index -100 */
        BERT_TRY(bert_cross_entropy(m, x->logits, B, L, b->labels, -100, m->label_smoothing,
                                    x->loss, NULL, 1.0f, err));
    return TF_OK;
}

static tf_status fwd_qa(tf_model *m, const tf_batch *b, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const bert_layout *lay = &m->lay;
    bert_acts *x = &m->acts;
    const int B = b->rows, S = b->seq, N = B * S, H = c->hidden_size;
    const tf_backend_vtable *bk = m->bk;

    /* logits[N, 2] = h · Wqaᵀ + bqa: (start, end) per token */
    bert_mm g = {.tb = true, .m = N, .n = 2, .k = H, .a = encoder_out(m), .lda = H,
                 .b = bert_w(m, lay->head_w), .ldb = H, .c = x->logits, .ldc = 2};
    BERT_TRY(bert_gemm(m, &g, TF_EPILOGUE_BIAS, bert_p(m, lay->head_b), NULL, err));
    if (!b->start_positions && !b->end_positions) return TF_OK;
    if (!b->start_positions || !b->end_positions)
        return tf_error_set(err, TF_ERR_DATA,
                            "model-bert: the batch has %s_positions but no %s_positions",
                            b->start_positions ? "start" : "end",
                            b->start_positions ? "end" : "start");
    /* se[2, N] = I₂ · logitsᵀ: start logits [B, S] then end logits [B, S],
     * each a row per sequence as the cross-entropy wants them */
    g = (bert_mm){.tb = true, .m = 2, .n = N, .k = 2, .a = x->eye2, .lda = 2, .b = x->logits,
                  .ldb = 2, .c = x->qa_se, .ldc = N};
    BERT_TRY(bert_gemm_exact(m, &g, err));
    /* positions clamped to [0, S]; S itself is ignore_index (transformers) */
    int32_t *hp = m->host_pos;
    BERT_TRY(bert_copy(m, hp, b->start_positions, (size_t)B * sizeof *hp, TF_COPY_DEVICE_TO_HOST,
                       err));
    BERT_TRY(bert_copy(m, hp + B, b->end_positions, (size_t)B * sizeof *hp,
                       TF_COPY_DEVICE_TO_HOST, err));
    BERT_TRY(bert_sync(m, err));
    for (int i = 0; i < 2 * B; i++) hp[i] = hp[i] < 0 ? 0 : hp[i] > S ? S : hp[i];
    BERT_TRY(bert_copy(m, x->qa_pos, hp, 2 * (size_t)B * sizeof *hp, TF_COPY_HOST_TO_DEVICE, err));
    BERT_TRY(bk->cross_entropy(m->be, NULL, x->qa_se, S, m->dt, B, S, x->qa_pos, S, x->loss, NULL,
                               1.0f, err));
    BERT_TRY(bk->cross_entropy(m->be, NULL, bert_at(m, x->qa_se, (size_t)N), S, m->dt, B, S,
                               x->qa_pos + B, S, x->loss + 1, NULL, 1.0f, err));
    return TF_OK;
}

static tf_status check_batch(const tf_model *m, const tf_batch *b, tf_error *err)
{
    if (!b || !b->input_ids)
        return tf_error_set(err, TF_ERR_DATA, "model-bert: forward needs a batch with input_ids");
    if (b->rows < 1 || b->rows > m->max_rows)
        return tf_error_set(err, TF_ERR_DATA,
                            "model-bert: batch of %d rows; the model was created for 1 to %d",
                            b->rows, m->max_rows);
    if (b->seq < 1 || b->seq > m->max_seq)
        return tf_error_set(err, TF_ERR_DATA,
                            "model-bert: sequence length %d; the model was created for 1 to %d",
                            b->seq, m->max_seq);
    return TF_OK;
}

float bert_batch_loss(const tf_model *m, const float *loss)
{
    return m->cfg.task == TF_TASK_CLASSIFICATION ? loss[0] : (loss[0] + loss[1]) / 2;
}

const void *bert_layer_input(const tf_model *m, int l)
{
    if (l == m->stage_first && m->stage_in) return m->stage_in;
    return l ? m->acts.layer[l - 1].out : m->acts.emb_out;
}

tf_status bert_forward(tf_model *m, const tf_batch *b, bool train, tf_model_output *out,
                       tf_error *err)
{
    return bert_forward_stage(m, 0, m->cfg.num_layers, b, NULL, NULL, train, out, err);
}

tf_status bert_forward_stage(tf_model *m, int first, int end, const tf_batch *b, const void *act_in,
                             void *act_out, bool train, tf_model_output *out, tf_error *err)
{
    m->have_forward = false;
    m->loss_known = false;
    BERT_TRY(check_batch(m, b, err));
    const bert_config *c = &m->cfg;
    const int L = c->num_layers;
    if (first < 0 || end > L || (L > 0 && first >= end) || (first > 0 && !act_in) || (end < L && !act_out))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: stage of layers [%d, %d) with%s input and%s output buffer; the "
                            "model has %d layers (0 <= first < end <= %d, an input when first > 0, an "
                            "output when end < %d)",
                            first, end, act_in ? "" : " no", act_out ? "" : " no", L, L, L);
    m->stage_first = first;
    m->stage_end = end;
    m->stage_in = first > 0 ? act_in : NULL;
    m->rows = b->rows;
    m->seq = b->seq;
    m->train = train;
    m->drop_hidden = train && c->hidden_dropout > 0;
    m->drop_attn = train && c->attention_dropout > 0;
    m->drop_cls = train && c->task == TF_TASK_CLASSIFICATION && bert_classifier_dropout(c) > 0;
    if (train) {
        m->step++;
        bert_dropout_begin(m);
    }
    m->attn.batch = b->rows;
    m->attn.seq = b->seq;
    BERT_TRY(bert_unpad_begin(m, b, err));

    /* GEMM operands in the compute dtype; f32 uses the master copy itself */
    if (m->wcompute != (void *)m->params)
        BERT_TRY(m->bk->cast(m->be, NULL, m->params, TF_DTYPE_F32, m->wcompute, m->dt, m->lay.n,
                             err));
    tf_status st = first == 0 ? fwd_embeddings(m, b, err) : TF_OK;
    if (st != TF_OK) {
        tf_error_prefix(err, "model-bert: embeddings");
        return st;
    }
    const int32_t *mask = b->attention_mask ? b->attention_mask : m->acts.ones;
    m->batch_ids = m->packed ? m->acts.packed_ids : b->input_ids;
    m->batch_types = m->packed           ? m->acts.packed_types
                     : b->token_type_ids ? b->token_type_ids
                                         : m->acts.zeros;
    m->batch_mask = mask;
    m->batch_labels = b->labels;
    for (int l = first; l < end; l++) {
        if ((st = bert_fwd_layer(m, l, bert_layer_input(m, l), mask, err)) != TF_OK) {
            tf_error_prefix(err, "model-bert: layer %d", l);
            return st;
        }
    }
    if (end < L) { /* a stage before the last: its output is the next one's input */
        BERT_TRY(bert_copy(m, act_out, m->acts.layer[end - 1].out,
                           (size_t)b->rows * (size_t)b->seq * (size_t)c->hidden_size * m->esize,
                           TF_COPY_DEVICE_TO_DEVICE, err));
        m->have_loss = false;
        m->loss_pending = false;
        m->last_loss = 0;
        *out = (tf_model_output){.loss = 0, .logits = NULL, .logits_dtype = m->dt, .rows = b->rows, .cols = 0};
        m->have_forward = true;
        m->loss_known = true;
        return TF_OK;
    }
    st = c->task == TF_TASK_CLASSIFICATION ? fwd_classifier(m, b, err) : fwd_qa(m, b, err);
    if (st != TF_OK) {
        tf_error_prefix(err, "model-bert: %s head",
                        c->task == TF_TASK_CLASSIFICATION ? "classification" : "question-answering");
        return st;
    }

    m->have_loss = c->task == TF_TASK_CLASSIFICATION ? b->labels != NULL
                                                     : b->start_positions != NULL;
    float loss[2] = {0, 0};
    m->loss_pending = false;
    if (m->defer_loss && m->have_loss) {
        /* queued, not waited for: the caller queues backward first and then
         * asks read_loss, so the device goes on from forward to backward */
        BERT_TRY(bert_copy(m, m->host_loss, m->acts.loss, sizeof loss, TF_COPY_DEVICE_TO_HOST,
                           err));
        if (m->bk->event_record(m->be, m->loss_ready, NULL) != TF_OK)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "model-bert: recording the event after the loss's copy failed");
        m->loss_pending = true;
    } else if (m->have_loss) {
        BERT_TRY(bert_copy(m, loss, m->acts.loss, sizeof loss, TF_COPY_DEVICE_TO_HOST, err));
        BERT_TRY(bert_sync(m, err));
    }
    m->last_loss = bert_batch_loss(m, loss); /* 0 without labels; replaced once read if pending */
    out->loss = m->defer_loss ? NAN : m->last_loss;
    out->logits = m->acts.logits;
    out->logits_dtype = m->dt;
    out->rows = b->rows;
    out->cols = c->task == TF_TASK_CLASSIFICATION ? c->num_labels : 2 * b->seq;
    m->have_forward = true;
    m->loss_known = true;
    return TF_OK;
}
