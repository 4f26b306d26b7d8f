/* bert_unpad.c — unpadded execution: a right-padded classification batch runs
 * on its real tokens only.
 *
 * Row b of a batch [B, S] with attention mask 1...1 0...0 (len_b ones) is
 * packed as tokens [cu[b], cu[b+1]) of a [T, H] activation (T = sum len_b);
 * embeddings, every GEMM, LayerNorm, GELU and dropout see T rows, attention
 * runs over each row's own tokens (the backend's ABI 1.4 varlen slots), and
 * the pooler reads token cu[b] (the row's [CLS]).
 *
 * Why the results do not change: in the padded layout a padding key gets the
 * score s + (-FLT_MAX), whose probability underflows to exactly 0 for every
 * query of a row with at least one real token, so no real token ever reads a
 * padding token; the classifier reads only [CLS]; the gradient reaching a
 * padding token is therefore exactly 0, and so is its contribution to every
 * weight gradient. What remains is the order of the sums over tokens
 * (GEMM blocking over T rows instead of B*S), within float rounding.
 *
 * Dropout: with the trainer's set_rows (drop_by_row) every mask is keyed by
 * (global row, element within the row). A real token at position s of row
 * b has elements [s*H, (s+1)*H) of its row in both layouts, so drawing each
 * packed row as one dropout row of len_b*H elements gives it the padded
 * layout's bits (one dropout_varlen_fwd call, ABI 1.5, or one dropout_fwd_ex
 * call per row on an older backend); attention's indices (head, query, key)
 * do not depend on the padded length. Unpadded == padded with dropout on, bit for bit in the masks.
 * Without set_rows (set_step: the 1.0 whole-tensor stream, or a backend
 * without the 1.3 slots) the padded layout's element index counts padding
 * too, so the packed tensor draws other (equally distributed) masks.
 *
 * Question answering is not packed: its loss is a softmax over all S
 * positions of a row, padding included (transformers' BertForQuestionAnswering
 * does not mask them), so the padding tokens' logits are part of the result. */
#include <string.h>

#include "bert.h"
#include "tfcore/plugin.h"

static bool backend_has_varlen(const tf_backend_vtable *bk)
{
    return TF_HAS(bk, attention_varlen_fwd) && TF_HAS(bk, attention_varlen_bwd);
}

tf_status bert_unpad_begin(tf_model *m, const tf_batch *b, tf_error *err)
{
    const int B = b->rows, S = b->seq;
    m->packed = false;
    m->tokens = B * S;
    if (!m->cfg.unpad || m->cfg.task != TF_TASK_CLASSIFICATION || !b->attention_mask ||
        !backend_has_varlen(m->bk))
        return TF_OK;
    int32_t *hm = m->host_mask, *cu = m->host_cu;
    BERT_TRY(bert_copy(m, hm, b->attention_mask, (size_t)B * S * sizeof *hm,
                       TF_COPY_DEVICE_TO_HOST, err));
    BERT_TRY(bert_sync(m, err));
    cu[0] = 0;
    for (int r = 0; r < B; r++) {
        const int32_t *row = hm + (size_t)r * S;
        int len = 0;
        while (len < S && row[len] != 0) len++;
        for (int j = len; j < S; j++)
            if (row[j] != 0) return TF_OK; /* not right-padded: the padded layout */
        if (len == 0) return TF_OK;        /* a row of padding only: uniform softmax, padded */
        cu[r + 1] = cu[r] + len;
    }
    if (cu[B] == B * S) return TF_OK; /* no padding: the layouts are the same */
    bert_acts *x = &m->acts;
    BERT_TRY(bert_copy(m, x->cu, cu, (size_t)(B + 1) * sizeof *cu, TF_COPY_HOST_TO_DEVICE, err));
    for (int r = 0; r < B; r++) /* the mask is read: its staging holds the packed positions */
        for (int j = cu[r]; j < cu[r + 1]; j++) hm[j] = j - cu[r];
    BERT_TRY(bert_copy(m, x->packed_pos, hm, (size_t)cu[B] * sizeof *hm, TF_COPY_HOST_TO_DEVICE, err));
    const int32_t *types = b->token_type_ids ? b->token_type_ids : x->zeros;
    for (int r = 0; r < B; r++) {
        size_t n = (size_t)(cu[r + 1] - cu[r]) * sizeof(int32_t);
        BERT_TRY(bert_copy(m, x->packed_ids + cu[r], b->input_ids + (size_t)r * S, n,
                           TF_COPY_DEVICE_TO_DEVICE, err));
        BERT_TRY(bert_copy(m, x->packed_types + cu[r], types + (size_t)r * S, n,
                           TF_COPY_DEVICE_TO_DEVICE, err));
    }
    m->packed = true;
    m->tokens = cu[B];
    return TF_OK;
}

tf_status bert_dropout_tokens(tf_model *m, int site, const void *x, void *y, uint8_t *keep,
                              float p, tf_error *err)
{
    const size_t H = (size_t)m->cfg.hidden_size;
    if (!m->packed) return bert_dropout(m, site, x, y, keep, m->rows, (size_t)m->seq * H, p, err);
    if (!m->drop_by_row) /* one stream over the packed tensor (see the top) */
        return bert_dropout(m, site, x, y, keep, 1, (size_t)m->tokens * H, p, err);
    if (TF_HAS(m->bk, dropout_varlen_fwd)) { /* one call: each row drawn as one dropout row */
        tf_dropout_varlen_desc d = {.size = sizeof d,
                                    .drop = {.size = sizeof d.drop,
                                             .x = x,
                                             .y = y,
                                             .keep = keep,
                                             .rows = (size_t)m->rows,
                                             .row_elems = H,
                                             .p = p,
                                             .dt = m->dt,
                                             .seed = bert_dropout_seed(m, site),
                                             .offset = m->drop_offset,
                                             .row_first = m->drop_first,
                                             .row_stride = m->drop_stride},
                                    .cu_seqlens = m->acts.cu};
        return m->bk->dropout_varlen_fwd(m->be, NULL, &d, err);
    }
    const int32_t *cu = m->host_cu; /* a backend before ABI 1.5: one call per row */
    for (int r = 0; r < m->rows; r++) {
        const size_t at = (size_t)cu[r] * H;
        tf_dropout_desc d = {.size = sizeof d,
                             .x = bert_at(m, (void *)x, at),
                             .y = bert_at(m, y, at),
                             .keep = keep + at,
                             .rows = 1,
                             .row_elems = (size_t)(cu[r + 1] - cu[r]) * H,
                             .p = p,
                             .dt = m->dt,
                             .seed = bert_dropout_seed(m, site),
                             .offset = m->drop_offset,
                             .row_first = m->drop_first + (uint64_t)r * m->drop_stride,
                             .row_stride = 1};
        BERT_TRY(m->bk->dropout_fwd_ex(m->be, NULL, &d, err));
    }
    return TF_OK;
}

tf_status bert_positions_fwd(tf_model *m, void *emb_sum, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const int H = c->hidden_size;
    if (m->packed) /* every row's 0..len-1, packed (bert_unpad_begin) */
        return m->bk->embedding_fwd(m->be, NULL, m->acts.packed_pos, m->tokens, bert_p(m, m->lay.pos),
                                    c->max_position_embeddings, H, emb_sum, true, m->dt, err);
    for (int r = 0; r < m->rows; r++) /* position_ids = 0..seq-1 in every row */
        BERT_TRY(m->bk->embedding_fwd(m->be, NULL, m->acts.pos_ids, m->seq, bert_p(m, m->lay.pos),
                                      c->max_position_embeddings, H,
                                      bert_at(m, emb_sum, (size_t)r * m->seq * H), true, m->dt, err));
    return TF_OK;
}

tf_status bert_positions_bwd(tf_model *m, const void *dx, tf_error *err)
{
    const bert_config *c = &m->cfg;
    const int H = c->hidden_size;
    if (m->packed) /* the tokens in row order: each position's sum in the per-row order */
        return m->bk->embedding_bwd(m->be, NULL, m->acts.packed_pos, m->tokens, dx, m->dt,
                                    bert_g(m, m->lay.pos), c->max_position_embeddings, H, err);
    for (int r = 0; r < m->rows; r++)
        BERT_TRY(m->bk->embedding_bwd(m->be, NULL, m->acts.pos_ids, m->seq,
                                      bert_at(m, (void *)dx, (size_t)r * m->seq * H), m->dt,
                                      bert_g(m, m->lay.pos), c->max_position_embeddings, H, err));
    return TF_OK;
}

static tf_attention_varlen_desc varlen_desc(const tf_model *m, const tf_attention_desc *d)
{
    return (tf_attention_varlen_desc){.size = sizeof(tf_attention_varlen_desc),
                                      .attn = *d,
                                      .cu_seqlens = m->acts.cu,
                                      .row_first = m->drop_first,
                                      .row_stride = m->drop_stride};
}

tf_status bert_attention_layer_fwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                                   const int32_t *mask, void *out, void *save, tf_error *err)
{
    if (!m->packed) return bert_attention_fwd(m, d, qkv, mask, out, save, m->train, err);
    tf_attention_varlen_desc vd = varlen_desc(m, d);
    return m->bk->attention_varlen_fwd(m->be, NULL, &vd, qkv, out, save, m->train, err);
}

tf_status bert_attention_layer_bwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                                   const int32_t *mask, const void *out, const void *save,
                                   const void *dout, void *dqkv, tf_error *err)
{
    if (!m->packed) return bert_attention_bwd(m, d, qkv, mask, out, save, dout, dqkv, err);
    tf_attention_varlen_desc vd = varlen_desc(m, d);
    return m->bk->attention_varlen_bwd(m->be, NULL, &vd, qkv, out, save, dout, dqkv, err);
}

tf_status bert_cls_rows(tf_model *m, const void *h, const void **rows, int64_t *ld, tf_error *err)
{
    const size_t H = (size_t)m->cfg.hidden_size;
    if (!m->packed) { /* token 0 of each row: a strided view */
        *rows = h;
        *ld = (int64_t)m->seq * (int64_t)H;
        return TF_OK;
    }
    for (int r = 0; r < m->rows; r++)
        BERT_TRY(bert_copy(m, bert_at(m, m->acts.cls, (size_t)r * H),
                           bert_at(m, (void *)h, (size_t)m->host_cu[r] * H), H * m->esize,
                           TF_COPY_DEVICE_TO_DEVICE, err));
    *rows = m->acts.cls;
    *ld = (int64_t)H;
    return TF_OK;
}

tf_status bert_cls_scatter(tf_model *m, const void *d_cls, void *dh, tf_error *err)
{
    const size_t H = (size_t)m->cfg.hidden_size;
    BERT_TRY(bert_zero(m, dh, (size_t)m->tokens * H * m->esize, err));
    for (int r = 0; r < m->rows; r++)
        BERT_TRY(bert_copy(m, bert_at(m, dh, (size_t)m->host_cu[r] * H),
                           bert_at(m, (void *)d_cls, (size_t)r * H), H * m->esize,
                           TF_COPY_DEVICE_TO_DEVICE, err));
    return TF_OK;
}
