/* bert.h — private to the model-bert plugin: the resolved configuration, the
 * flat parameter layout, the activation buffers and the model object.
 *
 * Flat parameter layout (elements of the one f32 buffer; the same offsets
 * index the gradient buffer and, in the trainer, the AdamW moments):
 *
 *     [ head ][ pooler ][ layer L-1 ][ layer L-2 ] ... [ layer 0 ][ embeddings ]
 *
 * that is, in the order backward finishes them. grads_ready is called once per
 * block with exactly these ranges, so the part of the gradient buffer that is
 * final is always a prefix [0, x): a comm plugin can bucket by merging ranges
 * as they arrive. The head is classifier.* (classification) or qa_outputs.*
 * (question answering); the pooler exists only for classification, as in
 * transformers' BertForQuestionAnswering (add_pooling_layer=False).
 *
 * Inside a layer the tensors are stored as
 *     query.weight key.weight value.weight   -> one [3H, H] matrix (fused QKV GEMM)
 *     query.bias key.bias value.bias         -> one [3H] vector
 *     attention.output.dense.{weight,bias}, attention.output.LayerNorm.{weight,bias},
 *     intermediate.dense.{weight,bias}, output.dense.{weight,bias},
 *     output.LayerNorm.{weight,bias}
 * Every tensor starts on a multiple of BERT_ALIGN elements, except that
 * key/value follow query without a gap so the fused views hold (they are
 * aligned too when the hidden size is a multiple of 32, as in every BERT
 * size); the padding elements are zero in params and grads and belong to no
 * view.
 * params() lists the views in Hugging Face's named_parameters() order. */
#ifndef TFCORE_MODEL_BERT_H
#define TFCORE_MODEL_BERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/tfcore.h"

/* Elements: each tensor starts on a multiple of 32 elements, so 128 bytes in
 * the f32 copies (params, grads, AdamW moments) and 64 bytes in the f16/bf16
 * compute copy, which reuses these offsets at 2 bytes an element.
 * cuBLASLt's fast kernels want 16-byte aligned operands (vector loads, TMA on
 * Hopper); 64 bytes more keeps each tensor's vector loads and cache lines its
 * own. tests/test_model_bert.c (layout_alignment) checks every copy. */
#define BERT_ALIGN 32
#define BERT_MAX_LAYERS 256
#define BERT_MAX_DIM 65536        /* hidden, intermediate and friends */
#define BERT_MAX_VOCAB 16777216
#define BERT_MAX_LABELS 65536
#define BERT_PATH_MAX 4096

/* ---- configuration (bert_config.c) ---------------------------------------- */

typedef struct bert_config {
    /* transformers' BertConfig fields */
    int vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
    int max_position_embeddings, type_vocab_size;
    int pad_token_id;              /* -1 when null: no padding row */
    tf_gelu_kind act;              /* hidden_act "gelu" (erf) or "gelu_new" (tanh) */
    double layer_norm_eps;
    double hidden_dropout, attention_dropout;
    double classifier_dropout;     /* < 0 when null: hidden_dropout is used */
    double initializer_range;
    /* the head */
    tf_task task;
    int num_labels;                /* classification; 2 for question answering */
    /* where the weights come from: exactly one of the two is set */
    char pretrained[BERT_PATH_MAX]; /* folder with config.json, model.safetensors (a hub
                                     * name's snapshot folder once resolved) */
    char hub_name[128];             /* the hub name model.pretrained gave, "" for a folder */
    char preset[32];
    bool unpad;                     /* model.unpad: pack right-padded classification batches */
} bert_config;

/* Read and validate every key of the "model" section (and, for pretrained, the
 * folder's config.json, which is parsed and freed again). Allocates no model
 * memory. When labels is not NULL it receives id2label names from config.json
 * (num_labels malloc'ed strings, or NULL when config.json has none or they do
 * not match num_labels); the caller frees them with bert_labels_free. */
tf_status bert_config_resolve(tf_section *sec, bert_config *cfg, char ***labels,
                              tf_error *err);
void bert_labels_free(char **labels, int n);
/* The classifier dropout actually used (classifier_dropout, or hidden's when null). */
double bert_classifier_dropout(const bert_config *cfg);
const char *bert_act_name(tf_gelu_kind act);
/* transformers' class name for the task ("BertForSequenceClassification", ...). */
const char *bert_architecture(tf_task task);

/* ---- parameter layout (bert_params.c) ------------------------------------- */

typedef struct bert_layer_offsets { /* element offsets into the flat buffer */
    size_t qkv_w;   /* [3H, H] query, key, value weights stacked */
    size_t qkv_b;   /* [3H] */
    size_t ao_w;    /* [H, H] attention.output.dense.weight */
    size_t ao_b;    /* [H] */
    size_t ln1_g, ln1_b; /* [H] attention.output.LayerNorm */
    size_t in_w;    /* [I, H] intermediate.dense.weight */
    size_t in_b;    /* [I] */
    size_t out_w;   /* [H, I] output.dense.weight */
    size_t out_b;   /* [H] */
    size_t ln2_g, ln2_b; /* [H] output.LayerNorm */
    size_t begin, end;   /* the block handed to grads_ready, padding included */
} bert_layer_offsets;

typedef struct bert_layout {
    size_t n;             /* elements in the flat buffer */
    size_t head_w;        /* [labels, H] classifier.weight or [2, H] qa_outputs.weight */
    size_t head_b;        /* [labels] or [2] */
    size_t pool_w;        /* [H, H] pooler (classification only) */
    size_t pool_b;        /* [H] */
    size_t head_end;      /* head and pooler are [0, head_end) */
    size_t word, pos, type; /* [V, H], [P, H], [T, H] embeddings */
    size_t emb_ln_g, emb_ln_b; /* [H] */
    size_t emb_begin;     /* embeddings are [emb_begin, n) */
    int num_layers;
    bert_layer_offsets *layer; /* [num_layers] */
    tf_param_info *params;     /* [nparams] in Hugging Face order */
    size_t nparams;
    char *names;               /* storage of the params' names */
} bert_layout;

/* Which part of the model a parameter belongs to. */
typedef enum bert_part { BERT_PART_ENCODER = 0, BERT_PART_POOLER = 1, BERT_PART_HEAD = 2 } bert_part;

tf_status bert_layout_build(const bert_config *cfg, bert_layout *lay, tf_error *err);
void bert_layout_free(bert_layout *lay);
/* The part a parameter name (with or without "bert.") belongs to. */
bert_part bert_param_part(const char *name);
/* The view called `name` (Hugging Face name with or without "bert."), or NULL. */
const tf_param_info *bert_param_find(const bert_layout *lay, const char *name);
/* Initialise one view of host[lay->n] as transformers' _init_weights does:
 * Linear/Embedding weights ~ normal(0, initializer_range), biases 0,
 * LayerNorm weight 1 and bias 0, the word-embedding row pad_token_id zero.
 * Deterministic: the values are a function of (seed, name, index) only. */
void bert_init_param(const bert_config *cfg, const tf_param_info *p, uint64_t seed, float *host);

/* ---- random numbers (bert_rng.c) ------------------------------------------ */

uint64_t bert_mix64(uint64_t x);        /* splitmix64's finaliser */
uint64_t bert_hash_name(uint64_t seed, const char *name);
/* The i-th standard normal of the stream `key` (counter-based Box-Muller). */
double bert_normal(uint64_t key, uint64_t i);

/* ---- the model object ----------------------------------------------------- */

typedef struct bert_layer_acts {
    void *qkv;          /* [N, 3H] fused projection, attention's input */
    void *attn_save;    /* attention_save_bytes: what attention_bwd needs */
    void *ctx;          /* [N, H] attention output */
    uint8_t *keep1;     /* [N*H] dropout mask after attention.output.dense */
    void *ln1_in;       /* [N, H] x + dropout(dense(ctx)) */
    float *mean1, *rstd1; /* [N] */
    void *ln1_out;      /* [N, H] attention block output */
    void *inter_pre;    /* [N, I] intermediate pre-activation */
    void *inter_act;    /* [N, I] GELU(inter_pre) */
    uint8_t *keep2;     /* [N*H] dropout mask after output.dense */
    void *ln2_in;       /* [N, H] ln1_out + dropout(dense(inter_act)) */
    float *mean2, *rstd2; /* [N] */
    void *out;          /* [N, H] the layer's output (next layer's input) */
} bert_layer_acts;

typedef struct bert_acts {
    /* embeddings */
    void *emb_sum;      /* [N, H] word + token_type + position */
    float *emb_mean, *emb_rstd; /* [N] */
    void *emb_out;      /* [N, H] LayerNorm output, dropout applied in place */
    uint8_t *emb_keep;  /* [N*H] */
    bert_layer_acts *layer; /* [L] */
    /* classification head */
    void *pool_pre;     /* [B, H] pooler dense output */
    void *pooled;       /* [B, H] tanh(pool_pre) */
    void *pooled_drop;  /* [B, H] dropout(pooled) */
    uint8_t *cls_keep;  /* [B*H] */
    /* logits and their gradient */
    void *logits;       /* [B, labels] or [N, 2] (QA: start, end interleaved) */
    void *dlogits;      /* same shape */
    void *qa_se;        /* [2, N] QA logits transposed: start row block, end row block */
    void *qa_dse;       /* [2, N] */
    void *eye2;         /* [2, 2] identity in the compute dtype (exact transposes) */
    float *loss;        /* [2] per-term mean losses (QA: start, end) */
    int32_t *qa_pos;    /* [2, B] clamped start and end positions */
    int32_t *pos_ids;   /* [max_seq] 0, 1, ..., max_seq-1 */
    int32_t *ones;      /* [max_rows*max_seq] 1: attention mask when the batch has none */
    int32_t *zeros;     /* [max_rows*max_seq] 0: token types when the batch has none */
    /* unpadded execution (bert_unpad.c): the real tokens packed, T of them */
    int32_t *cu;        /* [max_rows+1] cu_seqlens: row b is tokens [cu[b], cu[b+1]) */
    int32_t *packed_ids;   /* [max_rows*max_seq] input_ids of the real tokens */
    int32_t *packed_types; /* [max_rows*max_seq] token_type_ids of the real tokens */
    int32_t *packed_pos;   /* [max_rows*max_seq] position ids of the real tokens (0..len-1 per row) */
    void *cls;          /* [B, H] each row's first token of the encoder output (pooler input) */
    /* scratch shared by all layers */
    void *tmp;          /* [N, H] a dense output before its residual LayerNorm */
    void *dA, *dB, *dC; /* [N, H] backward */
    void *d_inter;      /* [N, I] */
    void *d_qkv;        /* [N, 3H] */
    void *d_pool;       /* [B, H] */
    void *d_pool2;      /* [B, H] (dropout backward) */
} bert_acts;

struct tf_model {
    bert_config cfg;
    char **labels;                /* [num_labels] id2label names, or NULL (LABEL_i) */
    const tf_backend_vtable *bk;
    tf_backend *be;
    tf_dtype dt;                  /* activations */
    size_t esize;                 /* bytes per activation element */
    tf_matmul_mode mode;
    uint64_t seed;
    uint64_t dropout_seed;
    float label_smoothing;        /* ε of the classification loss (0: plain cross-entropy) */
    bool grad_ckpt;               /* gradient checkpointing: the layers share one set of
                                     activations and backward recomputes each (bert_forward.c) */
    int max_rows, max_seq;
    bert_layout lay;
    float *params;                /* [n] backend memory */
    float *grads;                 /* [grad_n] backend memory: the gradients of flat elements
                                     [grad_lo, grad_lo + grad_n) (all n, unless a pipeline
                                     stage kept only its own: keep_stage_grads, ABI 1.5) */
    size_t grad_lo, grad_n;
    int grad_first, grad_end;     /* the stage whose gradients are kept (0, L: every layer) */
    void *wcompute;               /* [n] params cast to the compute dtype (== params for f32) */
    void *arena;                  /* every activation buffer, one allocation */
    size_t arena_bytes;
    size_t attn_save_bytes;       /* per layer */
    bert_acts acts;
    tf_attention_desc attn;       /* of the last forward */
    /* state of the last forward */
    bool have_forward, have_loss;
    /* the layers [stage_first, stage_end) the last forward ran (all of them
     * but for a pipeline stage, ABI 1.4) and layer stage_first's input when
     * the stage does not start with the embeddings (the caller's buffer) */
    int stage_first, stage_end;
    const void *stage_in;
    int rows, seq;
    int tokens;                   /* rows of every per-token op: rows*seq, or T when packed */
    bool packed;                  /* the last forward ran unpadded (bert_unpad.c) */
    int32_t *host_mask;           /* [max_rows*max_seq] host staging of the attention mask */
    int32_t *host_cu;             /* [max_rows+1] host copy of acts.cu */
    const int32_t *batch_ids, *batch_types, *batch_mask, *batch_labels; /* backend memory */
    bool train;                   /* the last forward was a training one */
    bool drop_attn, drop_hidden, drop_cls; /* dropout applied */
    uint64_t step;                /* training forwards so far: the dropout stream */
    /* set_rows (ABI 1.3): the next training forward's rows are samples
     * rows_first + b * rows_stride of epoch rows_epoch; sticky until set_step */
    bool rows_set;
    uint64_t rows_epoch, rows_first, rows_stride;
    /* the last training forward's dropout streams (bert_ops.c) */
    bool drop_by_row;             /* masks by global row through the ABI 1.3 slots */
    uint64_t drop_offset, drop_first, drop_stride;
    int32_t *host_pos;            /* [2, max_rows] host staging for QA positions */
    /* the loss of the last forward (tf_model_create_args.defer_loss) */
    bool defer_loss;              /* forward queues the loss's copy; read_loss waits for it */
    float *host_loss;             /* [2] pinned host memory: the per-term losses (defer_loss) */
    tf_event *loss_ready;         /* recorded after host_loss's copy (defer_loss) */
    bool loss_pending;            /* host_loss's copy queued, not yet waited for */
    bool loss_known;              /* the last forward completed (backward does not clear it) */
    float last_loss;              /* the batch's mean loss, once read */
    tf_model_info info;
    char source[BERT_PATH_MAX + 64];
    char vocab_file[BERT_PATH_MAX + 16];
    bool has_vocab;
};

/* bert_load.c: fill host[lay->n] from the checkpoint folder (missing head and
 * pooler initialised, with one warning line). */
tf_status bert_load_pretrained(const bert_config *cfg, const bert_layout *lay, uint64_t seed,
                               float *host, tf_error *err);

/* bert_forward.c / bert_backward.c */
tf_status bert_forward(tf_model *m, const tf_batch *b, bool train, tf_model_output *out,
                       tf_error *err);
tf_status bert_backward(tf_model *m, float loss_scale, tf_grads_ready_fn ready, void *user,
                        tf_error *err);
/* A pipeline stage (ABI 1.4): forward of layers [first, end)
 * from act_in (first > 0) or the embeddings, into act_out (end < L) or the
 * head; backward of the last forward from grad_out (end < L) or the loss,
 * writing the input's gradient to grad_in (first > 0). bert_forward and
 * bert_backward are the whole model: first 0, end L. */
tf_status bert_forward_stage(tf_model *m, int first, int end, const tf_batch *b, const void *act_in,
                             void *act_out, bool train, tf_model_output *out, tf_error *err);
tf_status bert_backward_stage(tf_model *m, const void *grad_out, void *grad_in, float loss_scale,
                              tf_grads_ready_fn ready, void *user, tf_error *err);
/* Encoder layer l's input: the stage's act_in for its first layer, else the
 * layer before's output (the embeddings' for layer 0). */
const void *bert_layer_input(const tf_model *m, int l);
/* The batch's mean loss from the per-term means loss[2] (QA: start and end). */
float bert_batch_loss(const tf_model *m, const float *loss);
/* The arena: with base NULL only the size is computed. */
size_t bert_acts_plan(tf_model *m, char *base);
/* Encoder layer l's forward from in[N, H] into its activations (backward
 * calls it again to recompute a layer under gradient checkpointing). */
tf_status bert_fwd_layer(tf_model *m, int l, const void *in, const int32_t *mask, tf_error *err);

/* bert_unpad.c: unpadded execution of a right-padded batch. bert_unpad_begin
 * decides (model.unpad, classification, an attention mask whose rows are
 * 1...1 0...0 with at least one token and some padding, a backend with the
 * ABI 1.4 varlen attention) and, when packing, fills cu and the packed ids
 * and types and sets m->packed and m->tokens; else m->tokens = rows*seq. */
tf_status bert_unpad_begin(tf_model *m, const tf_batch *b, tf_error *err);
/* Dropout of site `site` over the tokens of the batch ([tokens, H]), with
 * each real token's mask that of its padded position (drop_by_row). */
tf_status bert_dropout_tokens(tf_model *m, int site, const void *x, void *y, uint8_t *keep,
                              float p, tf_error *err);
/* Position embeddings added to emb_sum (fwd), or their gradient from dx (bwd). */
tf_status bert_positions_fwd(tf_model *m, void *emb_sum, tf_error *err);
tf_status bert_positions_bwd(tf_model *m, const void *dx, tf_error *err);
/* Attention of layer l in the layout of the batch (packed: varlen slots). */
tf_status bert_attention_layer_fwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                                   const int32_t *mask, void *out, void *save, tf_error *err);
tf_status bert_attention_layer_bwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                                   const int32_t *mask, const void *out, const void *save,
                                   const void *dout, void *dqkv, tf_error *err);
/* The pooler's input rows: each row's first token of h (packed: gathered
 * into acts.cls), with their leading dimension. */
tf_status bert_cls_rows(tf_model *m, const void *h, const void **rows, int64_t *ld, tf_error *err);
/* dh[tokens, H] = 0 except each row's first token, which gets d_cls[B, H]
 * (packed layout only). */
tf_status bert_cls_scatter(tf_model *m, const void *d_cls, void *dh, tf_error *err);

/* bert_save.c */
tf_status bert_save(tf_model *m, const char *dir, tf_error *err);

/* bert_ops.c: thin wrappers over the backend's slots. */
typedef struct bert_mm { /* one GEMM: C = op(A) op(B) (+ beta C), see tf_gemm_desc */
    bool ta, tb;
    int m, n, k;
    const void *a; int64_t lda;
    const void *b; int64_t ldb;
    void *c; int64_t ldc;
    float beta;
    bool c_f32; /* C is f32 (a gradient); else the compute dtype */
} bert_mm;
tf_status bert_gemm(tf_model *m, const bert_mm *g, tf_gemm_epilogue ep, const float *bias,
                    void *aux, tf_error *err);
/* An exact GEMM (multiplying by the 0/1 identity): never TF32-rounded. */
tf_status bert_gemm_exact(tf_model *m, const bert_mm *g, tf_error *err);
tf_status bert_copy(tf_model *m, void *dst, const void *src, size_t bytes, tf_memcpy_kind kind,
                    tf_error *err);
tf_status bert_zero(tf_model *m, void *dst, size_t bytes, tf_error *err);
/* Mean cross-entropy of logits[rows, classes] (ld = classes) against labels,
 * smoothed by eps (tf_cross_entropy_desc): through the backend's
 * cross_entropy_ex when it has one, else its cross_entropy (eps must be 0,
 * which bert_create made sure of). */
tf_status bert_cross_entropy(tf_model *m, const void *logits, int rows, int classes,
                             const int32_t *labels, int ignore_index, float eps, float *loss,
                             void *dlogits, float grad_scale, tf_error *err);
tf_status bert_sync(tf_model *m, tf_error *err);
/* The dropout stream of one site for the current step (see bert_ops.c). */
uint64_t bert_dropout_seed(const tf_model *m, int site);
/* Fix the streams of a training forward about to run (bert_forward). */
void bert_dropout_begin(tf_model *m);
/* Inverted dropout of site `site` over rows [rows, row_elems] of the batch
 * (row b = sequence b), in place allowed (y == x). */
tf_status bert_dropout(tf_model *m, int site, const void *x, void *y, uint8_t *keep, int rows,
                       size_t row_elems, float p, tf_error *err);
/* attention_fwd / attention_bwd with the forward's dropout streams. */
tf_status bert_attention_fwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                             const int32_t *mask, void *out, void *save, bool train,
                             tf_error *err);
tf_status bert_attention_bwd(tf_model *m, const tf_attention_desc *d, const void *qkv,
                             const int32_t *mask, const void *out, const void *save,
                             const void *dout, void *dqkv, tf_error *err);
/* Pointers: weights in the compute dtype, f32 master views, f32 gradients. */
static inline const void *bert_w(const tf_model *m, size_t off)
{
    return (const char *)m->wcompute + off * m->esize;
}
static inline float *bert_p(const tf_model *m, size_t off) { return m->params + off; }
static inline float *bert_g(const tf_model *m, size_t off) { return m->grads + (off - m->grad_lo); }
static inline void *bert_at(const tf_model *m, void *base, size_t elems)
{
    return (char *)base + elems * m->esize;
}

#define BERT_TRY(expr)                                                                   \
    do {                                                                                 \
        tf_status st_ = (expr);                                                          \
        if (st_ != TF_OK) return st_;                                                    \
    } while (0)

#endif
