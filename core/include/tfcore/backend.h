/* tfcore/backend.h — the compute backend vtable (kind TF_KIND_BACKEND).
 *
 * A model plugin computes only through these slots; it never calls BLAS or
 * CUDA itself. Every pointer argument named as a buffer lives in the
 * backend's memory (host memory for backend-cpu, device memory for
 * backend-cuda) unless it is marked "host". Every op is enqueued on a stream
 * (NULL = the backend's default stream) and may return before it finished;
 * results are visible after stream_sync or an event. Ops never allocate in
 * the training loop: scratch space comes from buffers the caller passes, or
 * was sized up front (attention_save_bytes).
 *
 * Layout conventions: row-major; a matrix [rows, cols] with a leading
 * dimension ld >= cols (the distance between rows, in elements). Activations
 * are in the compute dtype the precision plugin chose (f32, f16, bf16);
 * parameters' master copies, gradients, optimizer moments and every
 * reduction (layernorm statistics, losses, norms) are f32.
 *
 * ABI 1.0: every slot is required except those marked optional. New slots
 * are appended at the end and read through TF_HAS(); ABI 1.1 added
 * host_memory, native_stream, device_count; ABI 1.2 cross_entropy_ex and
 * adamw_ex (descriptor structs whose first field is their size); ABI 1.3
 * dropout_fwd_ex, attention_fwd_ex and attention_bwd_ex (dropout masks by
 * global row, below), adafactor; ABI 1.4 attention_varlen_fwd and
 * attention_varlen_bwd (attention over sequences packed without padding);
 * ABI 1.5 dropout_varlen_fwd (dropout over the same packed sequences).
 *
 * Dropout masks (every backend draws the same bits, so the op suites compare
 * backends with dropout on). A mask is a pure function of
 * (seed, offset, global row g, element j within the row):
 *   key      = { seed & 0xffffffff, seed >> 32 }
 *   c        = j / 4,  o = offset + g   (64-bit, wrapping)
 *   counter  = { c & 0xffffffff, c >> 32, o & 0xffffffff, o >> 32 }
 *   w        = word (j % 4) of Philox4x32-10(counter, key)  (Salmon et al., SC'11)
 *   keep     = (w >> 8) >= ceil(p * 2^24)       i.e. u = (w >> 8) / 2^24 >= p
 * Row b of an op's tensor is global row g = row_first + b * row_stride (the
 * ex slots take both; the 1.0 slots use row_first 0, row_stride 1). The
 * element index j within a row:
 *   dropout_fwd_ex: j in [0, row_elems), the row's elements in memory order;
 *   dropout_fwd (1.0): the whole tensor is one row (g = 0, j = element index);
 *   attention: probability (h, query i, key k) of sequence b is
 *     j = (h * 2^16 + i) * 2^16 + k   (seq <= 65536), so a row's mask does not
 *     depend on the padded length of the batch it is in.
 * A model gives each sample a global row index (its position in the epoch's
 * sample order, tfcore/model.h set_rows) and a per-epoch offset, so a sample
 * draws the same mask whichever worker, batch or micro-batch it lands in.
 */
#ifndef TFCORE_BACKEND_H
#define TFCORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_backend tf_backend; /* one opened device */
typedef struct tf_stream tf_stream;   /* an ordered queue of work */
typedef struct tf_event tf_event;     /* a point in a stream */

/* How GEMMs compute; chosen by the precision plugin. */
typedef enum tf_matmul_mode {
    TF_MATMUL_FP32 = 0, /* strict IEEE fp32 multiply-accumulate */
    TF_MATMUL_TF32 = 1, /* fp32 storage, tf32 tensor-core multiply, fp32 accumulate */
    TF_MATMUL_F16 = 2,  /* f16 inputs, fp32 accumulate */
    TF_MATMUL_BF16 = 3  /* bf16 inputs, fp32 accumulate */
} tf_matmul_mode;

typedef enum tf_memcpy_kind {
    TF_COPY_HOST_TO_DEVICE = 0,
    TF_COPY_DEVICE_TO_HOST = 1,
    TF_COPY_DEVICE_TO_DEVICE = 2,
    TF_COPY_HOST_TO_HOST = 3
} tf_memcpy_kind;

typedef enum tf_mem_kind {
    TF_MEM_DEVICE = 0,     /* the backend's working memory */
    TF_MEM_HOST_PINNED = 1 /* host memory the device can copy from/to asynchronously */
} tf_mem_kind;

typedef struct tf_backend_open_args {
    uint32_t size;        /* sizeof(tf_backend_open_args) */
    int device;           /* device index (local rank), 0 on the CPU */
    int threads;          /* host threads to use; 0 = the backend's default */
    uint64_t seed;        /* base seed of the backend's random streams */
    tf_section *section;  /* the config's "backend" section (backend-specific keys) */
    /* --- appended in ABI 1.4: read only when size covers it ------------------ */
    /* Workers of this job on this machine, this one included, which share its
     * cores (threads of one process or processes); 0 or 1: this worker alone.
     * A host backend gives each a share of the cores unless threads > 0 or
     * its own config names a number. */
    int local_world_size;
} tf_backend_open_args;

typedef struct tf_backend_mem_info {
    size_t total;   /* bytes of device memory (0 if unknown) */
    size_t free;    /* bytes free now (0 if unknown) */
    size_t current; /* bytes this backend holds now */
    size_t peak;    /* most bytes this backend held at once */
} tf_backend_mem_info;

/* GELU flavours: exact erf form (hidden_act "gelu") or tanh form ("gelu_new"). */
typedef enum tf_gelu_kind { TF_GELU_ERF = 0, TF_GELU_TANH = 1 } tf_gelu_kind;

/* What a GEMM does to its result before storing it. */
typedef enum tf_gemm_epilogue {
    TF_EPILOGUE_NONE = 0,
    TF_EPILOGUE_BIAS = 1,      /* C = alpha*op(A)op(B) + beta*C + bias[n] */
    TF_EPILOGUE_BIAS_GELU = 2  /* pre = alpha*op(A)op(B) + bias[n]; aux = pre; C = gelu(pre)
                                  (beta must be 0) */
} tf_gemm_epilogue;

/* C[b] = alpha * op(A[b]) · op(B[b]) + beta * C[b]   for b in [0, batch)
 * op(A) is [m, k], op(B) is [k, n], C is [m, n]; all row-major.
 * trans_a: A is stored [k, m] (lda >= m); else [m, k] (lda >= k). Same for B.
 * A and B share `ab_dtype`; C is `c_dtype` (f32, or the compute dtype). */
typedef struct tf_gemm_desc {
    bool trans_a, trans_b;
    int m, n, k;
    float alpha, beta;
    const void *a; int64_t lda; int64_t stride_a; /* stride between batches, elements */
    const void *b; int64_t ldb; int64_t stride_b;
    void *c;       int64_t ldc; int64_t stride_c;
    int batch;                 /* >= 1 */
    tf_dtype ab_dtype, c_dtype;
    tf_matmul_mode mode;
    tf_gemm_epilogue epilogue;
    const float *bias;         /* [n] f32, for BIAS / BIAS_GELU */
    void *aux;                 /* [m, n] in c_dtype (ld = ldc), for BIAS_GELU */
    tf_gelu_kind gelu;
} tf_gemm_desc;

/* Multi-head attention over a fused QKV projection.
 * qkv: [B, S, 3, heads, head_dim] in the compute dtype, i.e. the output of
 *      one [B*S, 3H] GEMM: q at column 0, k at H, v at 2H (H = heads*head_dim).
 * mask: [B, S] int32, 1 = attend, 0 = padding (key side), as HF's attention_mask.
 * out: [B, S, heads, head_dim] = softmax(q kᵀ * scale + (1-mask)*min_float) · v
 *      with dropout of probability `dropout` on the probabilities (train only).
 * save: what backward needs, attention_save_bytes() large. */
typedef struct tf_attention_desc {
    int batch, seq, heads, head_dim;
    float scale;          /* 1/sqrt(head_dim) for BERT */
    float dropout;        /* 0 in eval */
    uint64_t seed, offset; /* dropout random stream ("Dropout masks" above): the
                              1.0 slots draw row b of the batch as global row b */
    tf_dtype dtype;
    tf_matmul_mode mode;
} tf_attention_desc;

/* One segment of a flat parameter buffer for AdamW: elements
 * [offset, offset+count) share a weight decay. */
typedef struct tf_adamw_segment {
    size_t offset, count;
    float weight_decay;
} tf_adamw_segment;

typedef struct tf_adamw_hyper {
    float lr, beta1, beta2, eps;
    int64_t step;         /* 1-based step for bias correction */
    float grad_scale;     /* grads are multiplied by this before use (1 normally) */
} tf_adamw_hyper;

/* libtfcore's checks of an adamw call's arguments, for every backend's adamw
 * slot: hyperparameters in range (lr, eps >= 0 and finite, betas in [0, 1),
 * step >= 1, grad_scale finite), and segments that neither overflow nor
 * overlap, with finite weight decays. The message has no prefix: the backend
 * puts its own ("backend-cpu: adamw") in front. */
tf_status tf_adamw_check_hyper(const tf_adamw_hyper *h, tf_error *err);
tf_status tf_adamw_check_segments(const tf_adamw_segment *segs, size_t nsegs, tf_error *err);

/* --- ABI 1.2: descriptors of the cross_entropy_ex and adamw_ex slots ----------
 * Each starts with its own size (set it to sizeof); a backend refuses a
 * descriptor shorter than the layout it was built with, and fields are only
 * ever appended. */

/* Softmax cross-entropy with label smoothing, as transformers' LabelSmoother
 * (trainer_pt_utils.py, 4.46) over rows whose label != ignore_index:
 *   lp[r, j] = log_softmax(logits[r, :])[j]
 *   loss     = (1 - ε) · mean_r(-lp[r, label[r]]) + ε · mean_r(mean_j(-lp[r, j]))
 * with the means over counted rows (*loss = 0 when none count); ε = 0 is the
 * cross_entropy slot exactly. dlogits (may be NULL, may alias logits; same
 * layout and dtype as logits), 0 on ignored rows:
 *   dlogits[r, j] = grad_scale / count · (softmax(logits[r])[j] - (1-ε)·[j == label] - ε/classes)
 * A label outside [0, classes) that is not ignore_index is TF_ERR_DATA
 * (backend-cpu) or a NaN loss and gradient row (backend-cuda, which must
 * not sync), as for cross_entropy. */
typedef struct tf_cross_entropy_desc {
    uint32_t size;          /* sizeof(tf_cross_entropy_desc) */
    const void *logits;     /* [rows, classes], ld = ld_logits >= classes, dtype dt */
    int64_t ld_logits;
    tf_dtype dt;            /* f32, or the compute dtype the backend supports */
    int rows, classes;      /* rows >= 0, classes >= 1 */
    const int32_t *labels;  /* [rows] int32, backend memory */
    int ignore_index;
    float label_smoothing;  /* ε in [0, 1] */
    float *loss;            /* [1] f32, backend memory */
    void *dlogits;          /* NULL: loss only */
    float grad_scale;
} tf_cross_entropy_desc;

/* Which AdamW update adamw_ex applies. */
typedef enum tf_adamw_rule {
    /* torch.optim.AdamW (the adamw slot's arithmetic): p *= 1 - lr·wd first,
     * then p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps) */
    TF_ADAMW_TORCH = 0,
    /* transformers.optimization.AdamW (optim "adamw_hf"): eps added before
     * the bias correction, weight decay applied after the update:
     *   p -= (lr·sqrt(bc2)/bc1) · m / (sqrt(v) + eps);  then p -= lr·wd · p */
    TF_ADAMW_HF = 1
} tf_adamw_rule;

typedef struct tf_adamw_desc {
    uint32_t size;        /* sizeof(tf_adamw_desc) */
    tf_adamw_hyper hyper; /* checked as the adamw slot checks it */
    tf_adamw_rule rule;
} tf_adamw_desc;

/* --- ABI 1.3: dropout by global row ("Dropout masks" at the top) -------------
 * Inverted dropout over `rows` rows of `row_elems` elements (x, y, keep:
 * [rows, row_elems], contiguous): y = x * keep / (1-p), keep (u8 0/1) saved
 * for dropout_bwd. Row b's mask is that of global row row_first + b*row_stride.
 * y may alias x. */
typedef struct tf_dropout_desc {
    uint32_t size;          /* sizeof(tf_dropout_desc) */
    const void *x;          /* [rows, row_elems] dt */
    void *y;                /* [rows, row_elems] dt */
    uint8_t *keep;          /* [rows, row_elems] u8 */
    size_t rows, row_elems;
    float p;                /* drop probability in [0, 1] */
    tf_dtype dt;
    uint64_t seed, offset;
    uint64_t row_first, row_stride;
} tf_dropout_desc;
/* --- ABI 1.4: attention over variable-length sequences (unpadded) ------------
 * The tokens of attn.batch sequences packed without padding: sequence b is
 * rows [cu_seqlens[b], cu_seqlens[b+1]) of
 *   qkv, dqkv  [T, 3, heads, head_dim]   (T = cu_seqlens[batch]) row stride 3H
 *   out, dout  [T, heads, head_dim]      row stride H
 * and attends to all its own tokens and no other (no mask). Its rows are
 * what attention_fwd gives for that sequence right-padded to any length with
 * mask 1 on its first len_b = cu_seqlens[b+1] - cu_seqlens[b] positions:
 * keys past a right-padded sequence's end have probability exactly 0, so
 * packing changes no result, only the work. Dropout: sequence b's mask is
 * that of global row row_first + b * row_stride with attention's element
 * indices ("Dropout masks"), the same bits as the padded layout draws.
 * attn.seq bounds every length (1 <= len_b <= attn.seq; a backend refuses
 * or, where it cannot check without a sync (backend-cuda), clamps lengths to
 * [0, attn.seq]); save is attention_save_bytes(&attn) large, as for the
 * padded call with the same batch and seq. The backward must get the
 * forward's descriptor. */
typedef struct tf_attention_varlen_desc {
    uint32_t size;               /* sizeof(tf_attention_varlen_desc) */
    tf_attention_desc attn;      /* batch = sequences, seq = the longest length allowed */
    const int32_t *cu_seqlens;   /* [batch + 1] int32, backend memory: 0, then increasing */
    uint64_t row_first, row_stride; /* dropout rows (1.0 attention: 0, 1) */
} tf_attention_varlen_desc;

/* --- ABI 1.5: dropout over sequences packed without padding -----------------
 * drop.rows sequences packed as tokens: sequence b is tokens
 * [cu_seqlens[b], cu_seqlens[b+1]) of x, y, keep [T, drop.row_elems]
 * (T = cu_seqlens[drop.rows], drop.row_elems elements per token, contiguous),
 * and is drawn as one dropout_fwd_ex row: global row
 * drop.row_first + b * drop.row_stride, its elements indexed from 0 in memory
 * order (token t's element e is j = (t - cu_seqlens[b]) * row_elems + e).
 * A right-padded sequence's real tokens so draw the bits they draw in the
 * padded layout (one dropout_fwd_ex row of seq * row_elems elements). y may
 * alias x; dropout_bwd over T * row_elems elements is the backward. */
typedef struct tf_dropout_varlen_desc {
    uint32_t size;              /* sizeof(tf_dropout_varlen_desc) */
    tf_dropout_desc drop;       /* rows = sequences, row_elems = elements per token */
    const int32_t *cu_seqlens;  /* [drop.rows + 1] int32, backend memory: 0, then non-decreasing */
} tf_dropout_varlen_desc;

/* --- ABI 1.3: the adafactor slot's descriptor ----------------------------------
 * Adafactor as transformers.optimization.Adafactor (4.46) runs it for the
 * Trainer's optim = "adafactor": scale_parameter = relative_step =
 * warmup_init = False, beta1 = None (no first moment), the learning rate
 * given (the schedule's). Per tensor, with g = grad · grad_scale:
 *   beta2t = 1 - step^decay_rate;   u = g² + eps
 *   factored (ndim >= 2; the tensor seen as [batch, rows, cols]):
 *     row[b, r] = row·beta2t + (1-beta2t) · mean_c u[b, r, c]
 *     col[b, c] = col·beta2t + (1-beta2t) · mean_r u[b, r, c]
 *     upd = rsqrt(row[b, r] / mean_r row[b, :]) · rsqrt(col[b, c]) · g
 *   else:  v = v·beta2t + (1-beta2t)·u;   upd = rsqrt(v) · g
 *   upd /= max(rms(upd) / clip_threshold, 1);   upd *= lr   (rms over the tensor)
 *   p += -(weight_decay · lr) · p   (when weight_decay != 0);   p -= upd
 * State (f32, backend memory) of a tensor at its state_offset: factored,
 * row[batch·rows] then col[batch·cols]; else v[batch·rows·cols]
 * (tf_adafactor_state_count). Zero it before step 1. */
typedef struct tf_adafactor_tensor {
    size_t offset;        /* first element in params and grads */
    int64_t batch, rows, cols; /* >= 1 each: the tensor is [batch, rows, cols], row-major */
    bool factored;        /* second moment as row and column means (ndim >= 2) */
    size_t state_offset;  /* first element of its state */
    float weight_decay;
} tf_adafactor_tensor;

typedef struct tf_adafactor_desc {
    uint32_t size;        /* sizeof(tf_adafactor_desc) */
    double lr;            /* >= 0, finite */
    float eps;            /* eps[0] of transformers' (1e-30, 1e-3): added to g² */
    float clip_threshold; /* > 0 (1.0) */
    float decay_rate;     /* < 0 (-0.8): beta2t = 1 - step^decay_rate */
    float grad_scale;     /* grads are multiplied by this before use (1 normally) */
    int64_t step;         /* 1-based */
    const tf_adafactor_tensor *tensors; /* host memory; tensors may not overlap */
    size_t ntensors;
    void *workspace;      /* backend memory, tf_adafactor_workspace_bytes() large */
    size_t workspace_bytes;
} tf_adafactor_desc;

/* Elements of state one tensor needs; the workspace bytes a call over
 * tensors[n] needs: 8 · (max(columns of the widest factored tensor, 1024) + 2)
 * (double column sums on the host; fixed-order partial sums on a device). */
size_t tf_adafactor_state_count(const tf_adafactor_tensor *t);
size_t tf_adafactor_workspace_bytes(const tf_adafactor_tensor *tensors, size_t n);
/* libtfcore's checks of an adafactor call's descriptor (ranges above, no
 * overflow or overlap of the tensors' params or state, workspace large
 * enough). No prefix: the backend puts its own in front. */
tf_status tf_adafactor_check(const tf_adafactor_desc *d, tf_error *err);

typedef struct tf_backend_vtable {
    uint32_t size; /* TF_VTABLE_SIZE(tf_backend_vtable) */
    /* Read and validate every key of the plugin's config section without
     * allocating anything (tfcore --dry-run, and before any work starts). */
    tf_status (*check_config)(tf_section *section, tf_error *err);

    /* --- device ------------------------------------------------------------- */
    tf_status (*open)(const tf_backend_open_args *args, tf_backend **out, tf_error *err);
    void (*close)(tf_backend *be);
    /* Whether this backend can compute in `mode` / store `dtype` activations. */
    bool (*supports)(tf_backend *be, tf_matmul_mode mode, tf_dtype act_dtype);
    void (*mem_info)(tf_backend *be, tf_backend_mem_info *info); /* optional (NULL: unknown) */
    /* A one-line device name ("2-core x86_64 (OpenBLAS 0.3.21, 2 threads)",
     * "NVIDIA H100 80GB HBM3"). Optional (NULL: the plugin's name is shown). */
    const char *(*device_name)(tf_backend *be);

    /* --- memory (an out-of-memory error says what, how much, how much is free) */
    tf_status (*alloc)(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out,
                       tf_error *err);
    void (*free)(tf_backend *be, void *ptr, tf_mem_kind kind);
    tf_status (*memcpy)(tf_backend *be, void *dst, const void *src, size_t bytes,
                        tf_memcpy_kind kind, tf_stream *s);
    tf_status (*memset)(tf_backend *be, void *dst, int value, size_t bytes, tf_stream *s);

    /* --- streams and events (comm overlaps its reductions with compute) ------ */
    tf_status (*stream_create)(tf_backend *be, tf_stream **out, tf_error *err);
    void (*stream_destroy)(tf_backend *be, tf_stream *s);
    tf_status (*stream_sync)(tf_backend *be, tf_stream *s, tf_error *err);
    tf_status (*event_create)(tf_backend *be, tf_event **out, tf_error *err);
    void (*event_destroy)(tf_backend *be, tf_event *e);
    tf_status (*event_record)(tf_backend *be, tf_event *e, tf_stream *s);
    tf_status (*stream_wait_event)(tf_backend *be, tf_stream *s, tf_event *e);
    tf_status (*event_sync)(tf_backend *be, tf_event *e, tf_error *err);

    /* --- dense algebra -------------------------------------------------------- */
    tf_status (*gemm)(tf_backend *be, tf_stream *s, const tf_gemm_desc *g, tf_error *err);
    /* dbias[cols] (f32) (+)= sum over rows of dy[rows, cols] (ld = cols). */
    tf_status (*sum_rows)(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                          int cols, float *dbias, bool accumulate, tf_error *err);

    /* --- layernorm, with an optional fused residual add ---------------------- */
    /* in = x + residual (residual may be NULL); y = (in - mean) * rstd * gamma + beta.
     * x, residual, y, in_out: [rows, cols] dtype; gamma, beta: [cols] f32;
     * in_out (may be NULL when residual is NULL): receives `in` for backward;
     * mean, rstd: [rows] f32, saved for backward. Biased variance, as torch. */
    tf_status (*layernorm_fwd)(tf_backend *be, tf_stream *s, const void *x,
                               const void *residual, void *in_out, void *y,
                               const float *gamma, const float *beta, float *mean,
                               float *rstd, int rows, int cols, float eps, tf_dtype dt,
                               tf_error *err);
    /* dx (+)= d in (accumulate when dx_accumulate); dgamma, dbeta (f32 [cols]) are
     * always accumulated into (the caller zeroes them once per step). */
    tf_status (*layernorm_bwd)(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                               const float *gamma, const float *mean, const float *rstd,
                               void *dx, bool dx_accumulate, float *dgamma, float *dbeta,
                               int rows, int cols, tf_dtype dt, tf_error *err);

    /* --- attention ----------------------------------------------------------- */
    size_t (*attention_save_bytes)(tf_backend *be, const tf_attention_desc *d);
    tf_status (*attention_fwd)(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               const void *qkv, const int32_t *mask, void *out, void *save,
                               bool train, tf_error *err);
    /* dqkv: [B, S, 3, heads, head_dim], overwritten. */
    tf_status (*attention_bwd)(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               const void *qkv, const int32_t *mask, const void *out,
                               const void *save, const void *dout, void *dqkv, tf_error *err);

    /* --- elementwise --------------------------------------------------------- */
    tf_status (*gelu_fwd)(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                          tf_gelu_kind kind, tf_dtype dt, tf_error *err);
    /* dx = dy * gelu'(x); x is the pre-activation. dx may alias dy. */
    tf_status (*gelu_bwd)(tf_backend *be, tf_stream *s, const void *dy, const void *x,
                          void *dx, size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err);
    tf_status (*tanh_fwd)(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                          tf_dtype dt, tf_error *err);
    /* dx = dy * (1 - y²); y is the output. dx may alias dy. */
    tf_status (*tanh_bwd)(tf_backend *be, tf_stream *s, const void *dy, const void *y,
                          void *dx, size_t n, tf_dtype dt, tf_error *err);
    /* Inverted dropout: y = x * keep / (1-p); keep[n] (u8, 0/1) saved for backward.
     * The mask is "Dropout masks" above with the n elements as one row (g = 0).
     * y may alias x. */
    tf_status (*dropout_fwd)(tf_backend *be, tf_stream *s, const void *x, void *y,
                             uint8_t *keep, size_t n, float p, uint64_t seed, uint64_t offset,
                             tf_dtype dt, tf_error *err);
    tf_status (*dropout_bwd)(tf_backend *be, tf_stream *s, const void *dy, const uint8_t *keep,
                             void *dx, size_t n, float p, tf_dtype dt, tf_error *err);
    /* y = a + b (y may alias a or b). */
    tf_status (*add)(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y,
                     size_t n, tf_dtype dt, tf_error *err);
    /* x *= alpha, in place (f32 or compute dtype). */
    tf_status (*scale)(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha,
                       tf_dtype dt, tf_error *err);
    /* dst = (dst_dtype) src */
    tf_status (*cast)(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt, void *dst,
                      tf_dtype dst_dt, size_t n, tf_error *err);

    /* --- embeddings ------------------------------------------------------------ */
    /* out[i, :] (+)= table[ids[i], :] for i < rows; table [vocab, dim] f32 (master),
     * out [rows, dim] in dt. An id outside [0, vocab) is TF_ERR_DATA naming it. */
    tf_status (*embedding_fwd)(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                               const float *table, int vocab, int dim, void *out,
                               bool accumulate, tf_dtype dt, tf_error *err);
    /* dtable[ids[i], :] += dout[i, :]; deterministic (same sums in the same order). */
    tf_status (*embedding_bwd)(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                               const void *dout, tf_dtype dt, float *dtable, int vocab, int dim,
                               tf_error *err);

    /* --- loss ----------------------------------------------------------------- */
    /* Softmax cross-entropy over logits[rows, classes] (ld = ld_logits) against
     * labels[rows] (int32); rows whose label == ignore_index do not count.
     * *loss (f32, backend memory) = mean over counted rows (0 when none).
     * dlogits (may be NULL): = grad_scale * d(mean loss)/d logits, same layout. */
    tf_status (*cross_entropy)(tf_backend *be, tf_stream *s, const void *logits,
                               int64_t ld_logits, tf_dtype dt, int rows, int classes,
                               const int32_t *labels, int ignore_index, float *loss,
                               void *dlogits, float grad_scale, tf_error *err);

    /* --- optimizer and gradient checks (f32 flat buffers) ---------------------- */
    tf_status (*adamw)(tf_backend *be, tf_stream *s, float *params, const float *grads,
                       float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                       const tf_adamw_hyper *h, tf_error *err);
    /* *out (f32, backend memory) = sum of x[i]² (computed in double where it can). */
    tf_status (*sum_squares)(tf_backend *be, tf_stream *s, const float *x, size_t n, float *out,
                             tf_error *err);
    /* *found (int32, backend memory) |= 1 if any of x[n] (dtype dt) is inf or NaN. */
    tf_status (*finite_check)(tf_backend *be, tf_stream *s, const void *x, size_t n, tf_dtype dt,
                              int32_t *found, tf_error *err);

    /* --- appended in ABI 1.1: optional, read through TF_HAS() ------------------ */
    /* true when TF_MEM_DEVICE buffers are ordinary host memory of this process
     * (backend-cpu), so a comm plugin may hand them to MPI or to other threads
     * as they are. Absent or false: device memory, staged or given to a
     * device-aware library. */
    bool (*host_memory)(tf_backend *be);
    /* The native queue behind s (NULL = the default stream): a cudaStream_t for
     * backend-cuda, NULL for a backend without native streams. For comm plugins
     * that enqueue their own work on the backend's device (NCCL). */
    void *(*native_stream)(tf_backend *be, tf_stream *s);
    /* How many devices open() can use on this machine, without opening one
     * (the core refuses a job that needs more before starting any worker).
     * -1: not limited by devices (a host backend; the same as an absent slot).
     * 0: none, with the reason in why[n]. */
    int (*device_count)(char *why, size_t n);

    /* --- appended in ABI 1.2: optional, read through TF_HAS() ------------------ */
    /* Cross-entropy with label smoothing (tf_cross_entropy_desc above). A
     * backend without it can only train with label_smoothing_factor = 0. */
    tf_status (*cross_entropy_ex)(tf_backend *be, tf_stream *s, const tf_cross_entropy_desc *d,
                                  tf_error *err);
    /* AdamW as the adamw slot (same buffers, segments and checks), with the
     * update rule d->rule. A backend without it runs only TF_ADAMW_TORCH. */
    tf_status (*adamw_ex)(tf_backend *be, tf_stream *s, float *params, const float *grads,
                          float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                          const tf_adamw_desc *d, tf_error *err);

    /* --- appended in ABI 1.3: optional, read through TF_HAS() ------------------ */
    /* Dropout by global row (tf_dropout_desc). */
    tf_status (*dropout_fwd_ex)(tf_backend *be, tf_stream *s, const tf_dropout_desc *d,
                                tf_error *err);
    /* attention_fwd / attention_bwd with sequence b's dropout mask that of
     * global row row_first + b * row_stride; the backward must get the
     * forward's rows (a backend may recompute the mask instead of saving it). */
    tf_status (*attention_fwd_ex)(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                  uint64_t row_first, uint64_t row_stride, const void *qkv,
                                  const int32_t *mask, void *out, void *save, bool train,
                                  tf_error *err);
    tf_status (*attention_bwd_ex)(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                  uint64_t row_first, uint64_t row_stride, const void *qkv,
                                  const int32_t *mask, const void *out, const void *save,
                                  const void *dout, void *dqkv, tf_error *err);
    /* One Adafactor step over params[] with grads[] and state[] (all f32,
     * backend memory), tensor by tensor as tf_adafactor_desc says. A backend
     * without it cannot run training.optim = "adafactor". */
    tf_status (*adafactor)(tf_backend *be, tf_stream *s, float *params, const float *grads,
                           float *state, const tf_adafactor_desc *d, tf_error *err);

    /* --- appended in ABI 1.4: optional, read through TF_HAS() ------------------ */
    /* Attention over packed variable-length sequences (tf_attention_varlen_desc).
     * A backend without them runs the padded layout (attention_fwd_ex). */
    tf_status (*attention_varlen_fwd)(tf_backend *be, tf_stream *s,
                                      const tf_attention_varlen_desc *d, const void *qkv,
                                      void *out, void *save, bool train, tf_error *err);
    tf_status (*attention_varlen_bwd)(tf_backend *be, tf_stream *s,
                                      const tf_attention_varlen_desc *d, const void *qkv,
                                      const void *out, const void *save, const void *dout,
                                      void *dqkv, tf_error *err);

    /* --- appended in ABI 1.5: optional, read through TF_HAS() ------------------ */
    /* Dropout over packed variable-length sequences (tf_dropout_varlen_desc):
     * one call where dropout_fwd_ex would take one per sequence. */
    tf_status (*dropout_varlen_fwd)(tf_backend *be, tf_stream *s, const tf_dropout_varlen_desc *d,
                                    tf_error *err);
} tf_backend_vtable;

#ifdef __cplusplus
}
#endif
#endif
