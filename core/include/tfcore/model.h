/* tfcore/model.h — the model vtable (kind TF_KIND_MODEL).
 *
 * A model owns its parameters, gradients and optimizer moments, each one flat
 * f32 buffer in backend memory with named views (tf_param_info), and its
 * activations. It computes only through the backend vtable it is given.
 *
 * ABI 1.2 (read_loss, tf_model_create_args.defer_loss and
 * .label_smoothing_factor appended); ABI 1.3 (set_rows, memory,
 * .gradient_checkpointing appended); ABI 1.4 (stage_params, stage_forward,
 * stage_backward appended: pipeline stages); ABI 1.5 (keep_stage_grads
 * appended: a stage's gradients only). New slots are appended at the
 * end and read through TF_HAS().
 */
#ifndef TFCORE_MODEL_H
#define TFCORE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/backend.h"
#include "tfcore/batch.h"
#include "tfcore/config.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_model tf_model;

typedef struct tf_model_create_args {
    uint32_t size;                      /* sizeof(tf_model_create_args) */
    tf_section *section;                /* the config's "model" section */
    const tf_backend_vtable *backend;   /* what to compute with */
    tf_backend *be;
    tf_dtype compute_dtype;             /* activations: f32, f16 or bf16 (precision plugin) */
    tf_matmul_mode matmul_mode;
    uint64_t seed;                      /* initialisation and dropout */
    int max_rows, max_seq;              /* activations to reserve at create (0, 0: none yet;
                                           see the reserve slot) */
    /* --- appended in ABI 1.2 (read only when size covers it) --------------- */
    /* true: forward does not wait for the loss. It queues the loss's copy to
     * the host and leaves tf_model_output.loss NaN; read_loss returns it. So
     * a caller can queue backward before the host waits for anything, and the
     * device never idles between forward and backward. Only asked of models
     * that have read_loss. */
    bool defer_loss;
    /* training.label_smoothing_factor ε: the loss the forward computes
     * against labels is transformers' LabelSmoother's (tfcore/backend.h,
     * tf_cross_entropy_desc), in training and evaluation alike, as the
     * Trainer's compute_loss. A model that cannot apply ε > 0 (its task,
     * or a backend without cross_entropy_ex) refuses it at create with
     * TF_ERR_CONFIG. */
    float label_smoothing_factor;
    /* --- appended in ABI 1.3 (read only when size covers it) --------------- */
    /* training.gradient_checkpointing: keep only what each repeated block
     * (an encoder layer) takes as input through forward and recompute the
     * block in backward, its dropout masks included, so the gradients are
     * those of the run without it; activation memory drops to one block's
     * worth plus the inputs. */
    bool gradient_checkpointing;
} tf_model_create_args;

/* ABI 1.3: the bytes a model holds in backend memory, by what they are for
 * (the memory slot). The caller sets size = sizeof; the model fills the
 * fields the size covers. */
typedef struct tf_model_memory {
    uint32_t size;      /* sizeof(tf_model_memory) */
    size_t weights;     /* parameters: the f32 master copy and any compute-dtype copy */
    size_t gradients;   /* the f32 gradient buffer */
    size_t activations; /* what forward keeps for backward, and backward's own buffers,
                           for the reserved rows x seq */
} tf_model_memory;

/* What the rest of the run needs to know about a created model. */
typedef struct tf_model_info {
    tf_task task;
    int num_labels;              /* classification */
    int vocab_size;
    int max_position_embeddings; /* the longest sequence it takes */
    int hidden_size, num_layers, num_heads, intermediate_size;
    const char *vocab_file;      /* the checkpoint folder when it holds a tokenizer (tokenizer.json or
                                    vocab.txt; tf_tokenizer_load picks the file and reads its
                                    tokenizer_config.json), or NULL */
    bool do_lower_case;          /* what that tokenizer does (true without one) */
    const char *source;          /* "pretrained DIR" or "preset NAME (random init)" */
} tf_model_info;

/* A named view into the flat parameter buffer (Hugging Face name and shape). */
typedef struct tf_param_info {
    const char *name;    /* e.g. "bert.encoder.layer.0.attention.self.query.weight" */
    int ndim;
    int64_t shape[4];
    size_t offset;       /* elements from the start of the flat buffer */
    size_t numel;
    bool no_decay;       /* biases and LayerNorm weights: AdamW applies no weight decay */
} tf_param_info;

/* Pointers into the model's flat f32 buffers (backend memory); each n elements. */
typedef struct tf_model_buffers {
    float *params;  /* [n] master parameters */
    float *grads;   /* [n] gradients, zeroed by zero_grad, accumulated by backward */
    size_t n;
} tf_model_buffers;

/* Called by backward as soon as grads[offset, offset+count) is final for this
 * step (a layer's worth, in the order backward produces them), so a comm
 * plugin can start reducing that bucket while backward goes on. */
typedef void (*tf_grads_ready_fn)(void *user, size_t offset, size_t count);

typedef struct tf_model_output {
    float loss;            /* host copy of the mean loss of the batch (valid after forward;
                              NaN with defer_loss: see read_loss) */
    const void *logits;    /* backend memory: [rows, num_labels] classification,
                              [rows, seq, 2] QA (start, end) */
    tf_dtype logits_dtype;
    int rows, cols;        /* logits viewed as [rows, cols] */
} tf_model_output;

typedef struct tf_model_vtable {
    uint32_t size; /* TF_VTABLE_SIZE(tf_model_vtable) */
    /* Read and validate every key of the plugin's config section without
     * allocating anything (tfcore --dry-run, and before any work starts). */
    tf_status (*check_config)(tf_section *section, tf_error *err);
    tf_status (*create)(const tf_model_create_args *args, tf_model **out, tf_error *err);
    void (*destroy)(tf_model *m);
    const tf_model_info *(*info)(tf_model *m);
    /* The parameter views, in Hugging Face order. */
    void (*params)(tf_model *m, const tf_param_info **list, size_t *n);
    void (*buffers)(tf_model *m, tf_model_buffers *out);
    tf_status (*zero_grad)(tf_model *m, tf_error *err);
    /* Forward on a batch already in backend memory (same layout as tf_batch).
     * train: dropout on; labels present: the loss is computed too. */
    tf_status (*forward)(tf_model *m, const tf_batch *dev_batch, bool train,
                         tf_model_output *out, tf_error *err);
    /* Backward of the last forward; the loss gradient is multiplied by
     * loss_scale (precision plugins' loss scaling) and by grad_scale/... as the
     * trainer asks (e.g. 1/gradient_accumulation_steps). Gradients accumulate. */
    tf_status (*backward)(tf_model *m, float loss_scale, tf_grads_ready_fn ready, void *user,
                          tf_error *err);
    /* Write DIR/config.json and DIR/model.safetensors in Hugging Face layout. */
    tf_status (*save)(tf_model *m, const char *dir, tf_error *err);
    /* Make activation memory ready for batches up to max_rows x max_seq (the
     * trainer knows the dataset's sequence length only after the model
     * exists). Called before the first forward; again only to grow. */
    tf_status (*reserve)(tf_model *m, int max_rows, int max_seq, tf_error *err);
    /* Position of the dropout random stream: the next forward draws the masks
     * of micro-batch `step` of this run's seed, whatever ran before (so a
     * resumed run continues exactly). */
    void (*set_step)(tf_model *m, uint64_t step);
    /* --- appended in ABI 1.2: optional, read through TF_HAS() ------------------ */
    /* The mean loss of the last forward (0 when its batch had no labels).
     * With defer_loss this waits for the loss's copy to the host, i.e. for
     * that forward on the device, not for work queued after it (backward). */
    tf_status (*read_loss)(tf_model *m, float *loss, tf_error *err);
    /* --- appended in ABI 1.3: optional, read through TF_HAS() ------------------ */
    /* Where the next training forward's rows sit in the run's sample order:
     * row b of the batch is sample `first + b * stride` of epoch `epoch`'s
     * order (the position in the global permutation, the same whatever the
     * world size, strategy or micro-batch split). A model that has set_rows
     * draws each row's dropout mask from (seed, epoch, that position) only
     * (tfcore/backend.h "Dropout masks"), so one worker with batch B*N and N
     * workers with batch B draw the same masks; the trainer then calls
     * set_rows instead of set_step. Positions and epochs are below 2^32. */
    void (*set_rows)(tf_model *m, uint64_t epoch, uint64_t first, uint64_t stride);
    /* The model's backend memory by category (tf_model_memory), as it stands
     * (activations: after reserve). */
    void (*memory)(tf_model *m, tf_model_memory *out);
    /* --- appended in ABI 1.4: pipeline stages; optional, read through TF_HAS() --- */
    /* A stage runs the encoder layers [first, end) (0 <= first < end <=
     * num_layers): with the embeddings when first == 0, with the head (and the
     * loss) when end == num_layers. Between two stages passes the boundary
     * activation, the hidden states [rows, seq, hidden_size] in the compute
     * dtype (tf_model_create_args.compute_dtype), and backward its gradient
     * of the same shape. A model that has these slots runs one stage
     * exactly as the same layers of forward / backward (the same dropout
     * masks: set_rows / set_step apply), so stages chained give forward's
     * and backward's results.
     *
     * The flat range [*offset, *offset + *count) of the parameter (and
     * gradient) buffer that stage [first, end) owns; the ranges of a
     * partition of the layers are disjoint and cover the buffer. */
    void (*stage_params)(tf_model *m, int first, int end, size_t *offset, size_t *count);
    /* Forward of stage [first, end) on a batch in backend memory (every
     * stage reads its attention mask; the first its ids, the last its
     * labels). first > 0: the stage's input is act_in (backend memory,
     * read again by stage_backward: keep it unchanged until then); first ==
     * 0: act_in is unused. end == num_layers: out is forward's (loss,
     * logits; defer_loss and read_loss as forward); else the last layer's
     * output is copied to act_out (backend memory) and out gets loss 0 and
     * no logits. */
    tf_status (*stage_forward)(tf_model *m, int first, int end, const tf_batch *dev_batch,
                               const void *act_in, void *act_out, bool train, tf_model_output *out,
                               tf_error *err);
    /* Backward of the last stage_forward: from the loss (times loss_scale,
     * as backward) when the stage ends the model, else from grad_out, the
     * gradient of act_out. A stage with first > 0 writes the gradient of
     * act_in to grad_in (backend memory); the stage's parameter gradients
     * accumulate, as backward's. */
    tf_status (*stage_backward)(tf_model *m, const void *grad_out, void *grad_in, float loss_scale,
                                tf_error *err);
    /* --- appended in ABI 1.5: optional, read through TF_HAS() ------------------ */
    /* From now on this model trains only as stage [first, end) (a pipeline
     * worker): keep gradients for that stage's range [offset, offset + count)
     * (stage_params) only and free the rest. *grads gets the range's buffer
     * ([count] f32, backend memory: grads[i] is the gradient of flat element
     * offset + i; zero_grad zeroes it, stage_backward of that stage
     * accumulates into it). Afterwards buffers() gives grads = NULL, memory()
     * counts the range's gradients, backward and stage_backward of another
     * stage fail with one line; forward, stage_forward and the parameter
     * buffer (whole) are unchanged. Called once, before the first backward. */
    tf_status (*keep_stage_grads)(tf_model *m, int first, int end, float **grads, tf_error *err);
} tf_model_vtable;

#ifdef __cplusplus
}
#endif
#endif
