/* bert_params.c — the flat parameter layout (see bert.h for the picture), the
 * named views in Hugging Face order, and transformers' initialisation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"

#define NAME_STRIDE 96 /* longest: "bert.encoder.layer.255.attention.output.LayerNorm.weight" */

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Place a tensor of `numel` elements at the next offset (aligned unless it
 * must follow the previous tensor without a gap). */
static size_t place(size_t *next, size_t numel, bool aligned)
{
    if (aligned) *next = align_up(*next, BERT_ALIGN);
    size_t off = *next;
    *next += numel;
    return off;
}

typedef struct view_builder {
    bert_layout *lay;
    size_t count;
} view_builder;

static void add_view(view_builder *vb, const char *name, size_t offset, int ndim, int64_t d0,
                     int64_t d1)
{
    tf_param_info *p = &vb->lay->params[vb->count];
    char *dst = vb->lay->names + vb->count * NAME_STRIDE;
    snprintf(dst, NAME_STRIDE, "%s", name);
    p->name = dst;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim > 1 ? d1 : 0;
    p->shape[2] = p->shape[3] = 0;
    p->offset = offset;
    p->numel = (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1);
    /* Trainer's rule: no weight decay on biases and LayerNorm parameters */
    p->no_decay = strstr(name, "LayerNorm.") != NULL ||
                  (strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".bias") == 0);
    vb->count++;
}

tf_status bert_layout_build(const bert_config *cfg, bert_layout *lay, tf_error *err)
{
    memset(lay, 0, sizeof *lay);
    const size_t H = (size_t)cfg->hidden_size, I = (size_t)cfg->intermediate_size;
    const int L = cfg->num_layers;
    const bool cls = cfg->task == TF_TASK_CLASSIFICATION;
    const size_t labels = cls ? (size_t)cfg->num_labels : 2;

    lay->num_layers = L;
    lay->layer = calloc((size_t)L, sizeof *lay->layer);
    lay->nparams = 5 + 16 * (size_t)L + (cls ? 2 : 0) + 2;
    lay->params = calloc(lay->nparams, sizeof *lay->params);
    lay->names = calloc(lay->nparams, NAME_STRIDE);
    if (!lay->layer || !lay->params || !lay->names) {
        bert_layout_free(lay);
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory (parameter views)");
    }

    /* Memory order: the order backward finishes the gradients. */
    size_t next = 0;
    lay->head_w = place(&next, labels * H, true);
    lay->head_b = place(&next, labels, true);
    if (cls) {
        lay->pool_w = place(&next, H * H, true);
        lay->pool_b = place(&next, H, true);
    }
    next = align_up(next, BERT_ALIGN);
    lay->head_end = next;
    for (int l = L - 1; l >= 0; l--) {
        bert_layer_offsets *o = &lay->layer[l];
        o->begin = next;
        o->qkv_w = place(&next, 3 * H * H, true);
        o->qkv_b = place(&next, 3 * H, true);
        o->ao_w = place(&next, H * H, true);
        o->ao_b = place(&next, H, true);
        o->ln1_g = place(&next, H, true);
        o->ln1_b = place(&next, H, true);
        o->in_w = place(&next, I * H, true);
        o->in_b = place(&next, I, true);
        o->out_w = place(&next, H * I, true);
        o->out_b = place(&next, H, true);
        o->ln2_g = place(&next, H, true);
        o->ln2_b = place(&next, H, true);
        next = align_up(next, BERT_ALIGN);
        o->end = next;
    }
    lay->emb_begin = next;
    lay->word = place(&next, (size_t)cfg->vocab_size * H, true);
    lay->pos = place(&next, (size_t)cfg->max_position_embeddings * H, true);
    lay->type = place(&next, (size_t)cfg->type_vocab_size * H, true);
    lay->emb_ln_g = place(&next, H, true);
    lay->emb_ln_b = place(&next, H, true);
    lay->n = align_up(next, BERT_ALIGN);

    /* The views, in transformers' named_parameters() order. */
    view_builder vb = {lay, 0};
    const int64_t h = (int64_t)H, i = (int64_t)I;
    add_view(&vb, "bert.embeddings.word_embeddings.weight", lay->word, 2, cfg->vocab_size, h);
    add_view(&vb, "bert.embeddings.position_embeddings.weight", lay->pos, 2,
             cfg->max_position_embeddings, h);
    add_view(&vb, "bert.embeddings.token_type_embeddings.weight", lay->type, 2,
             cfg->type_vocab_size, h);
    add_view(&vb, "bert.embeddings.LayerNorm.weight", lay->emb_ln_g, 1, h, 0);
    add_view(&vb, "bert.embeddings.LayerNorm.bias", lay->emb_ln_b, 1, h, 0);
    for (int l = 0; l < L; l++) {
        const bert_layer_offsets *o = &lay->layer[l];
        char name[NAME_STRIDE];
#define LAYER_VIEW(suffix, off, nd, d0, d1)                                                      \
    do {                                                                                         \
        snprintf(name, sizeof name, "bert.encoder.layer.%d.%s", l, suffix);                      \
        add_view(&vb, name, off, nd, d0, d1);                                                    \
    } while (0)
        LAYER_VIEW("attention.self.query.weight", o->qkv_w, 2, h, h);
        LAYER_VIEW("attention.self.query.bias", o->qkv_b, 1, h, 0);
        LAYER_VIEW("attention.self.key.weight", o->qkv_w + H * H, 2, h, h);
        LAYER_VIEW("attention.self.key.bias", o->qkv_b + H, 1, h, 0);
        LAYER_VIEW("attention.self.value.weight", o->qkv_w + 2 * H * H, 2, h, h);
        LAYER_VIEW("attention.self.value.bias", o->qkv_b + 2 * H, 1, h, 0);
        LAYER_VIEW("attention.output.dense.weight", o->ao_w, 2, h, h);
        LAYER_VIEW("attention.output.dense.bias", o->ao_b, 1, h, 0);
        LAYER_VIEW("attention.output.LayerNorm.weight", o->ln1_g, 1, h, 0);
        LAYER_VIEW("attention.output.LayerNorm.bias", o->ln1_b, 1, h, 0);
        LAYER_VIEW("intermediate.dense.weight", o->in_w, 2, i, h);
        LAYER_VIEW("intermediate.dense.bias", o->in_b, 1, i, 0);
        LAYER_VIEW("output.dense.weight", o->out_w, 2, h, i);
        LAYER_VIEW("output.dense.bias", o->out_b, 1, h, 0);
        LAYER_VIEW("output.LayerNorm.weight", o->ln2_g, 1, h, 0);
        LAYER_VIEW("output.LayerNorm.bias", o->ln2_b, 1, h, 0);
#undef LAYER_VIEW
    }
    if (cls) {
        add_view(&vb, "bert.pooler.dense.weight", lay->pool_w, 2, h, h);
        add_view(&vb, "bert.pooler.dense.bias", lay->pool_b, 1, h, 0);
        add_view(&vb, "classifier.weight", lay->head_w, 2, (int64_t)labels, h);
        add_view(&vb, "classifier.bias", lay->head_b, 1, (int64_t)labels, 0);
    } else {
        add_view(&vb, "qa_outputs.weight", lay->head_w, 2, 2, h);
        add_view(&vb, "qa_outputs.bias", lay->head_b, 1, 2, 0);
    }
    lay->nparams = vb.count;
    return TF_OK;
}

void bert_layout_free(bert_layout *lay)
{
    free(lay->layer);
    free(lay->params);
    free(lay->names);
    memset(lay, 0, sizeof *lay);
}

static const char *strip_prefix(const char *name)
{
    return strncmp(name, "bert.", 5) == 0 ? name + 5 : name;
}

bert_part bert_param_part(const char *name)
{
    name = strip_prefix(name);
    if (strncmp(name, "pooler.", 7) == 0) return BERT_PART_POOLER;
    if (strncmp(name, "classifier.", 11) == 0 || strncmp(name, "qa_outputs.", 11) == 0)
        return BERT_PART_HEAD;
    return BERT_PART_ENCODER;
}

const tf_param_info *bert_param_find(const bert_layout *lay, const char *name)
{
    const char *want = strip_prefix(name);
    for (size_t i = 0; i < lay->nparams; i++)
        if (strcmp(strip_prefix(lay->params[i].name), want) == 0) return &lay->params[i];
    return NULL;
}

void bert_init_param(const bert_config *cfg, const tf_param_info *p, uint64_t seed, float *host)
{
    float *x = host + p->offset;
    const char *name = p->name;
    size_t len = strlen(name);
    bool is_bias = len > 5 && strcmp(name + len - 5, ".bias") == 0;
    if (strstr(name, "LayerNorm.")) { /* weight 1, bias 0 */
        float v = is_bias ? 0.0f : 1.0f;
        for (size_t i = 0; i < p->numel; i++) x[i] = v;
        return;
    }
    if (is_bias) {
        memset(x, 0, p->numel * sizeof *x);
        return;
    }
    /* Linear and Embedding weights: normal(0, initializer_range) */
    uint64_t key = bert_hash_name(seed, name);
    for (size_t i = 0; i < p->numel; i++)
        x[i] = (float)(cfg->initializer_range * bert_normal(key, i));
    if (strcmp(name, "bert.embeddings.word_embeddings.weight") == 0 && cfg->pad_token_id >= 0)
        memset(x + (size_t)cfg->pad_token_id * (size_t)cfg->hidden_size, 0,
               (size_t)cfg->hidden_size * sizeof *x);
}
