/* bert_plugin.c — the model-bert plugin: descriptor, vtable, create/destroy.
 *
 * Memory (all through the backend, allocated once in create):
 *   params [n] f32, grads [n] f32 — the flat layout of bert.h;
 *   wcompute [n] in the compute dtype when it is not f32 (GEMM operands,
 *     refreshed from params at each forward);
 *   one arena with every activation for max_rows x max_seq (bert_forward.c).
 * The AdamW moments are not allocated here: tf_model_buffers (ABI 1.0) has no
 * field for them, and they are optimizer state that only the ranks running the
 * optimizer need (dp-master keeps them on the root alone). The trainer
 * allocates m and v as two [n] f32 buffers with the same offsets, and builds
 * its AdamW segments from params()' offsets and no_decay flags. */
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "bert.h"
#include "tfcore/plugin.h"
#include "tfcore/tokenizer.h"

static tf_status bert_check_config(tf_section *section, tf_error *err)
{
    bert_config cfg;
    return bert_config_resolve(section, &cfg, NULL, err);
}

static void bert_destroy(tf_model *m)
{
    if (!m) return;
    if (m->be && m->bk) {
        if (m->arena) m->bk->free(m->be, m->arena, TF_MEM_DEVICE);
        if (m->wcompute && m->wcompute != (void *)m->params)
            m->bk->free(m->be, m->wcompute, TF_MEM_DEVICE);
        if (m->grads) m->bk->free(m->be, m->grads, TF_MEM_DEVICE);
        if (m->params) m->bk->free(m->be, m->params, TF_MEM_DEVICE);
    }
    free(m->acts.layer);
    free(m->host_pos);
    free(m->host_cu);
    free(m->host_mask);
    if (m->loss_ready) m->bk->event_destroy(m->be, m->loss_ready);
    if (m->host_loss) m->bk->free(m->be, m->host_loss, TF_MEM_HOST_PINNED);
    bert_labels_free(m->labels, m->cfg.num_labels);
    bert_layout_free(&m->lay);
    free(m);
}

/* The pretrained folder's tokenizer, as libtfcore's tf_tokenizer_load
 * chooses it (tokenizer.json, else vocab.txt, with tokenizer_config.json):
 * the folder becomes info->vocab_file, so the dataset, predict and `tfcore
 * tokenize --vocab DIR` all load the same one; loading it here reports a
 * malformed tokenizer_config.json (file and key) when the model is created,
 * and gives the do_lower_case in effect. No tokenizer file: no vocab. */
static tf_status folder_tokenizer(tf_model *m, tf_error *err)
{
    const char *dir = m->cfg.pretrained;
    static const char *const files[] = {"tokenizer.json", "vocab.txt"};
    bool any = false;
    for (int i = 0; i < 2 && !any; i++) {
        char path[BERT_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        /* anything there is the tokenizer: its reader refuses a FIFO or a folder by name */
        struct stat sb;
        any = stat(path, &sb) == 0;
    }
    if (!any) return TF_OK;
    tf_tokenizer *tok = NULL;
    tf_status st = tf_tokenizer_load(dir, NULL, &tok, err);
    if (st) return st;
    tf_tokenizer_options o;
    tf_tokenizer_options_init(&o);
    tf_tokenizer_get_options(tok, &o);
    tf_tokenizer_free(tok);
    snprintf(m->vocab_file, sizeof m->vocab_file, "%s", dir);
    m->info.vocab_file = m->vocab_file;
    m->info.do_lower_case = o.do_lower_case != 0;
    return TF_OK;
}

static tf_status fill_info(tf_model *m, tf_error *err)
{
    const bert_config *c = &m->cfg;
    tf_model_info *i = &m->info;
    i->task = c->task;
    i->num_labels = c->num_labels;
    i->vocab_size = c->vocab_size;
    i->max_position_embeddings = c->max_position_embeddings;
    i->hidden_size = c->hidden_size;
    i->num_layers = c->num_layers;
    i->num_heads = c->num_heads;
    i->intermediate_size = c->intermediate_size;
    i->vocab_file = NULL;
    i->do_lower_case = true;
    i->source = m->source;
    if (!c->pretrained[0]) {
        snprintf(m->source, sizeof m->source, "preset %s (random init)", c->preset);
        return TF_OK;
    }
    snprintf(m->source, sizeof m->source, "pretrained %s", c->hub_name[0] ? c->hub_name : c->pretrained);
    return folder_tokenizer(m, err);
}

/* The parameters on the host: loaded, or initialised as transformers does. */
static tf_status host_params(tf_model *m, float **out, tf_error *err)
{
    float *host = calloc(m->lay.n, sizeof *host); /* padding stays 0 */
    if (!host)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory (%zu parameters)",
                            m->lay.n);
    tf_status st = TF_OK;
    if (m->cfg.pretrained[0]) {
        st = bert_load_pretrained(&m->cfg, &m->lay, m->seed, host, err);
    } else {
        for (size_t i = 0; i < m->lay.nparams; i++)
            bert_init_param(&m->cfg, &m->lay.params[i], m->seed, host);
    }
    if (st != TF_OK) {
        free(host);
        return st;
    }
    *out = host;
    return TF_OK;
}

static tf_status alloc_dev(tf_model *m, size_t bytes, void **out, tf_error *err)
{
    return m->bk->alloc(m->be, bytes, TF_MEM_DEVICE, out, err);
}

/* Constant buffers of the arena: position ids, all-ones mask, zero token
 * types, the 2x2 identity. */
static tf_status init_constants(tf_model *m, tf_error *err)
{
    bert_acts *x = &m->acts;
    const size_t N = (size_t)m->max_rows * (size_t)m->max_seq;
    int32_t *host = malloc(N * sizeof *host);
    if (!host) return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory");
    tf_status st;
    for (int i = 0; i < m->max_seq; i++) host[i] = i;
    if ((st = bert_copy(m, x->pos_ids, host, (size_t)m->max_seq * sizeof *host,
                        TF_COPY_HOST_TO_DEVICE, err)))
        goto out;
    if ((st = bert_sync(m, err))) goto out; /* host is reused below */
    for (size_t i = 0; i < N; i++) host[i] = 1;
    if ((st = bert_copy(m, x->ones, host, N * sizeof *host, TF_COPY_HOST_TO_DEVICE, err)) ||
        (st = bert_zero(m, x->zeros, N * sizeof(int32_t), err)) ||
        (st = bert_zero(m, x->loss, 2 * sizeof(float), err)))
        goto out;
    if (x->eye2) {
        const float eye[4] = {1, 0, 0, 1};
        unsigned char bytes[16];
        for (int i = 0; i < 4; i++) {
            if (m->dt == TF_DTYPE_F32) {
                memcpy(bytes + 4 * i, &eye[i], 4);
            } else {
                unsigned short h = m->dt == TF_DTYPE_F16 ? tf_f32_to_f16(eye[i])
                                                          : tf_f32_to_bf16(eye[i]);
                memcpy(bytes + 2 * i, &h, 2);
            }
        }
        if ((st = bert_copy(m, x->eye2, bytes, 4 * m->esize, TF_COPY_HOST_TO_DEVICE, err)))
            goto out;
    }
    st = bert_sync(m, err);
out:
    free(host);
    return st;
}

static tf_status check_args(const tf_model_create_args *a, tf_error *err)
{
    /* ABI 1.0's fields at least; the 1.2 fields (defer_loss,
     * label_smoothing_factor) are read only when present */
    if (!a || a->size < offsetof(tf_model_create_args, defer_loss))
        return tf_error_set(err, TF_ERR_PLUGIN, "model-bert: create args too small (%u bytes, want %zu)",
                            a ? a->size : 0, offsetof(tf_model_create_args, defer_loss));
    if (!a->section || !a->backend || !a->be)
        return tf_error_set(err, TF_ERR_PLUGIN, "model-bert: create needs a config section and a backend");
    if (a->compute_dtype != TF_DTYPE_F32 && a->compute_dtype != TF_DTYPE_F16 &&
        a->compute_dtype != TF_DTYPE_BF16)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: compute dtype %s is not one of F32, F16, BF16",
                            tf_dtype_name(a->compute_dtype) ? tf_dtype_name(a->compute_dtype) : "?");
    if (a->max_rows < 0 || a->max_seq < 0 || (a->max_rows == 0) != (a->max_seq == 0))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: max_rows (%d) and max_seq (%d) must both be positive, "
                            "or both 0 (reserve later)",
                            a->max_rows, a->max_seq);
    return TF_OK;
}

/* training.label_smoothing_factor, as the Trainer applies it: its
 * compute_loss runs LabelSmoother only when the inputs carry "labels", i.e.
 * for classification; a question-answering model gets start_positions and
 * end_positions and its loss is never smoothed (transformers 4.46
 * trainer.py, compute_loss). So ε > 0 on a QA model would change nothing in
 * the Trainer and is refused here rather than silently ignored. */
static tf_status label_smoothing(const tf_model_create_args *a, const bert_config *c, float *out,
                                 tf_error *err)
{
    *out = 0.0f;
    if (a->size < offsetof(tf_model_create_args, label_smoothing_factor) +
                      sizeof a->label_smoothing_factor)
        return TF_OK; /* a core older than ABI 1.2: no smoothing asked for */
    float eps = a->label_smoothing_factor;
    if (!(eps >= 0.0f && eps <= 1.0f))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: label_smoothing_factor must be in [0, 1], got %g", (double)eps);
    if (eps == 0.0f) return TF_OK;
    if (c->task == TF_TASK_QUESTION_ANSWERING)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: training.label_smoothing_factor = %g does not apply to question "
                            "answering (the Trainer smooths only inputs with 'labels'; start/end positions "
                            "are never smoothed); set it to 0",
                            (double)eps);
    if (!TF_HAS(a->backend, cross_entropy_ex))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: training.label_smoothing_factor = %g needs a backend with "
                            "cross_entropy_ex (plugin ABI 1.2); this backend has only the unsmoothed loss",
                            (double)eps);
    *out = eps;
    return TF_OK;
}

/* Activation memory (one arena) for batches up to rows x seq: the attention
 * save space, the per-layer views, the constants. Frees a smaller arena
 * first; a reservation that already covers rows x seq costs nothing. */
static tf_status bert_reserve(tf_model *m, int rows, int seq, tf_error *err)
{
    const bert_config *c = &m->cfg;
    if (rows < 1 || seq < 1)
        return tf_error_set(err, TF_ERR_CONFIG, "model-bert: cannot reserve %d rows x %d tokens", rows, seq);
    if (m->arena && rows <= m->max_rows && seq <= m->max_seq) return TF_OK;
    if (seq > c->max_position_embeddings)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: sequences of %d tokens, but the model has %d positions "
                            "(max_position_embeddings)",
                            seq, c->max_position_embeddings);
    const size_t tokens = (size_t)rows * (size_t)seq;
    const size_t widest = (size_t)(c->intermediate_size > 3 * c->hidden_size ? c->intermediate_size
                                                                                : 3 * c->hidden_size);
    if (tokens > INT_MAX / widest)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "model-bert: %d rows x %d tokens is too large a batch for this model", rows, seq);
    if (m->arena) { /* grow: drop the old arena */
        m->bk->free(m->be, m->arena, TF_MEM_DEVICE);
        m->arena = NULL;
    }
    if (rows > m->max_rows || !m->host_pos) {
        free(m->host_pos);
        free(m->host_cu);
        m->host_pos = malloc(2 * (size_t)rows * sizeof *m->host_pos);
        m->host_cu = malloc(((size_t)rows + 1) * sizeof *m->host_cu);
    }
    free(m->host_mask);
    m->host_mask = malloc(tokens * sizeof *m->host_mask);
    if (!m->acts.layer) m->acts.layer = calloc((size_t)c->num_layers, sizeof *m->acts.layer);
    if (!m->acts.layer || !m->host_pos || !m->host_cu || !m->host_mask) return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory");
    m->max_rows = rows;
    m->max_seq = seq;

    /* Attention over [B, S, 3, heads, head_dim]; save space for the largest batch. */
    m->attn.heads = c->num_heads;
    m->attn.head_dim = c->hidden_size / c->num_heads;
    m->attn.scale = (float)(1.0 / sqrt((double)m->attn.head_dim));
    m->attn.dtype = m->dt;
    m->attn.mode = m->mode;
    m->attn.batch = m->max_rows;
    m->attn.seq = m->max_seq;
    m->attn.dropout = (float)c->attention_dropout;
    m->attn_save_bytes = m->bk->attention_save_bytes(m->be, &m->attn);

    m->arena_bytes = bert_acts_plan(m, NULL);
    tf_status st = alloc_dev(m, m->arena_bytes, &m->arena, err);
    if (st) {
        m->max_rows = m->max_seq = 0;
        tf_error_prefix(err, "model-bert: activations for %d x %d tokens", rows, seq);
        return st;
    }
    bert_acts_plan(m, m->arena);
    return init_constants(m, err);
}

static tf_status bert_reserve_slot(tf_model *m, int max_rows, int max_seq, tf_error *err)
{
    return bert_reserve(m, max_rows, max_seq, err);
}

/* Backend bytes by category; the fields out->size covers. */
static void bert_memory(tf_model *m, tf_model_memory *out)
{
    const size_t f32 = m->lay.n * sizeof(float);
    size_t w = f32 + (m->wcompute != (void *)m->params ? m->lay.n * m->esize : 0);
    if (out->size >= offsetof(tf_model_memory, weights) + sizeof out->weights) out->weights = w;
    if (out->size >= offsetof(tf_model_memory, gradients) + sizeof out->gradients)
        out->gradients = m->grad_n * sizeof(float);
    if (out->size >= offsetof(tf_model_memory, activations) + sizeof out->activations)
        out->activations = m->arena ? m->arena_bytes : 0;
}

/* The dropout stream: forward k of a run draws the masks of step k. */
static void bert_set_step(tf_model *m, uint64_t step)
{
    m->step = step;
    m->rows_set = false;
}

/* The dropout streams by sample position (bert_ops.c). */
static void bert_set_rows(tf_model *m, uint64_t epoch, uint64_t first, uint64_t stride)
{
    m->rows_set = true;
    m->rows_epoch = epoch;
    m->rows_first = first;
    m->rows_stride = stride;
}

static tf_status bert_create(const tf_model_create_args *a, tf_model **out, tf_error *err)
{
    *out = NULL;
    BERT_TRY(check_args(a, err));
    tf_model *m = calloc(1, sizeof *m);
    if (!m) return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory");
    tf_status st;
    float *host = NULL;
    if ((st = bert_config_resolve(a->section, &m->cfg, &m->labels, err))) goto fail;
    const bert_config *c = &m->cfg;
    m->bk = a->backend;
    m->be = a->be;
    m->dt = a->compute_dtype;
    m->esize = tf_dtype_size(m->dt);
    m->mode = a->matmul_mode;
    m->seed = a->seed;
    m->dropout_seed = bert_mix64(a->seed ^ 0x64726F706F7574ull); /* "dropout" */
    if ((st = label_smoothing(a, c, &m->label_smoothing, err))) goto fail;
    m->grad_ckpt = a->size >= offsetof(tf_model_create_args, gradient_checkpointing) +
                                  sizeof a->gradient_checkpointing &&
                   a->gradient_checkpointing;

    if (!m->bk->supports(m->be, m->mode, m->dt)) {
        st = tf_error_set(err, TF_ERR_PLUGIN,
                          "model-bert: the backend (%s) cannot compute with matmul mode %d and "
                          "%s activations",
                          m->bk->device_name ? m->bk->device_name(m->be) : "?", (int)m->mode,
                          tf_dtype_name(m->dt));
        goto fail;
    }
    if ((st = bert_layout_build(c, &m->lay, err))) goto fail;
    if ((st = host_params(m, &host, err))) goto fail;

    const size_t pbytes = m->lay.n * sizeof(float);
    if ((st = alloc_dev(m, pbytes, (void **)&m->params, err)) ||
        (st = alloc_dev(m, pbytes, (void **)&m->grads, err)))
        goto fail;
    m->grad_lo = 0;
    m->grad_n = m->lay.n;
    m->grad_first = 0;
    m->grad_end = c->num_layers;
    m->defer_loss = a->size >= offsetof(tf_model_create_args, defer_loss) + sizeof a->defer_loss &&
                    a->defer_loss;
    if (m->defer_loss) {
        /* the loss's landing place (pinned, so its copy is asynchronous) and
         * the event read_loss waits on */
        if ((st = m->bk->alloc(m->be, 2 * sizeof(float), TF_MEM_HOST_PINNED,
                               (void **)&m->host_loss, err)))
            goto fail;
        if ((st = m->bk->event_create(m->be, &m->loss_ready, err))) goto fail;
    }
    if (m->dt == TF_DTYPE_F32) m->wcompute = m->params;
    else if ((st = alloc_dev(m, m->lay.n * m->esize, &m->wcompute, err))) goto fail;
    if ((st = bert_copy(m, m->params, host, pbytes, TF_COPY_HOST_TO_DEVICE, err)) ||
        (st = bert_zero(m, m->grads, pbytes, err)) || (st = bert_sync(m, err)))
        goto fail;
    free(host);
    host = NULL;

    if (a->max_rows > 0 && (st = bert_reserve(m, a->max_rows, a->max_seq, err))) goto fail;
    if ((st = fill_info(m, err))) goto fail;
    *out = m;
    return TF_OK;
fail:
    free(host);
    bert_destroy(m);
    return st;
}

static const tf_model_info *bert_info(tf_model *m) { return &m->info; }

static void bert_params(tf_model *m, const tf_param_info **list, size_t *n)
{
    *list = m->lay.params;
    *n = m->lay.nparams;
}

static void bert_buffers(tf_model *m, tf_model_buffers *out)
{
    out->params = m->params;
    out->grads = m->grad_n == m->lay.n ? m->grads : NULL; /* a stage's range only: keep_stage_grads */
    out->n = m->lay.n;
}

static tf_status bert_zero_grad(tf_model *m, tf_error *err)
{
    return bert_zero(m, m->grads, m->grad_n * sizeof(float), err);
}

static tf_status bert_forward_slot(tf_model *m, const tf_batch *b, bool train,
                                   tf_model_output *out, tf_error *err)
{
    return bert_forward(m, b, train, out, err);
}

static tf_status bert_read_loss(tf_model *m, float *loss, tf_error *err)
{
    if (!m->loss_known)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: read_loss before a forward");
    if (m->loss_pending) {
        BERT_TRY(m->bk->event_sync(m->be, m->loss_ready, err));
        m->loss_pending = false;
        m->last_loss = bert_batch_loss(m, m->host_loss);
    }
    *loss = m->last_loss;
    return TF_OK;
}

/* The flat layout puts the head first, then layers L-1 .. 0, then the
 * embeddings (bert.h), so the stage of layers [first, end) owns one run:
 * from the head (end == L) or layer end-1's start, to the end of layer
 * first's block or of the buffer (first == 0). Out-of-range layers give an
 * empty range. */
static void bert_stage_params(tf_model *m, int first, int end, size_t *offset, size_t *count)
{
    const bert_layout *lay = &m->lay;
    const int L = m->cfg.num_layers;
    if (first < 0 || end > L || first >= end) {
        *offset = *count = 0;
        return;
    }
    size_t begin = end == L ? 0 : lay->layer[end - 1].begin;
    size_t stop = first == 0 ? lay->n : lay->layer[first].end;
    *offset = begin;
    *count = stop - begin;
}

static tf_status bert_stage_backward_slot(tf_model *m, const void *grad_out, void *grad_in,
                                          float loss_scale, tf_error *err)
{
    if (m->grad_n != m->lay.n && m->have_forward &&
        (m->stage_first != m->grad_first || m->stage_end != m->grad_end))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: stage_backward of layers [%d, %d), but the model keeps the "
                            "gradients of stage [%d, %d) only (keep_stage_grads)",
                            m->stage_first, m->stage_end, m->grad_first, m->grad_end);
    return bert_backward_stage(m, grad_out, grad_in, loss_scale, NULL, NULL, err);
}

/* The stage's range of the gradients in a buffer of its own; the whole
 * buffer is freed (bert_g indexes from grad_lo). */
static tf_status bert_keep_stage_grads(tf_model *m, int first, int end, float **grads, tf_error *err)
{
    const int L = m->cfg.num_layers;
    if (first < 0 || end > L || first >= end)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: keep_stage_grads of layers [%d, %d) of %d", first,
                            end, L);
    if (m->grad_n != m->lay.n)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "model-bert: keep_stage_grads called twice (the gradients of [%d, %d) are kept)",
                            m->grad_first, m->grad_end);
    size_t off, n;
    bert_stage_params(m, first, end, &off, &n);
    float *g = NULL;
    BERT_TRY(alloc_dev(m, n * sizeof(float), (void **)&g, err));
    tf_status st = bert_zero(m, g, n * sizeof(float), err);
    if (!st) st = bert_sync(m, err); /* nothing queued reads the old buffer any more */
    if (st) {
        m->bk->free(m->be, g, TF_MEM_DEVICE);
        return st;
    }
    m->bk->free(m->be, m->grads, TF_MEM_DEVICE);
    m->grads = g;
    m->grad_lo = off;
    m->grad_n = n;
    m->grad_first = first;
    m->grad_end = end;
    *grads = g;
    return TF_OK;
}

static const tf_model_vtable bert_vtable = {
    .size = TF_VTABLE_SIZE(tf_model_vtable),
    .check_config = bert_check_config,
    .create = bert_create,
    .destroy = bert_destroy,
    .info = bert_info,
    .params = bert_params,
    .buffers = bert_buffers,
    .zero_grad = bert_zero_grad,
    .forward = bert_forward_slot,
    .backward = bert_backward,
    .save = bert_save,
    .reserve = bert_reserve_slot,
    .set_step = bert_set_step,
    .read_loss = bert_read_loss,
    .set_rows = bert_set_rows,
    .memory = bert_memory,
    .stage_params = bert_stage_params,
    .stage_forward = bert_forward_stage,
    .stage_backward = bert_stage_backward_slot,
    .keep_stage_grads = bert_keep_stage_grads,
};

TF_PLUGIN_DEFINE(TF_KIND_MODEL, "bert", "1.0.0",
                 "BERT encoder with sequence-classification and question-answering heads "
                 "(Hugging Face checkpoints)",
                 NULL, &bert_vtable)
