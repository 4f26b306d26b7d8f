/* attention.c — backend-cpu multi-head self-attention over a fused QKV
 * buffer, forward and backward, with the math of Hugging Face's eager
 * BertSelfAttention:
 *   scores = (q kᵀ) * scale + (1 - mask) * (-FLT_MAX)     (finfo.min, not -inf)
 *   probs  = softmax(scores)        (max subtracted; a fully masked row is uniform)
 *   out    = dropout(probs) v       computed as (dropout(e) v) / sum(e), e = exp(scores - max):
 *                                   the division applied to head_dim columns, not to S keys
 *
 * Work is split over (batch, head) pairs, one pair per task, handed out
 * dynamically (a preempted thread does not hold the others up); within a pair,
 * query rows go in blocks that fit the thread's scratch (all S rows at once
 * for S <= 512), through single-threaded OpenBLAS sgemm calls.
 *
 * Keys after a sequence's last unmasked key (right padding) are skipped: their
 * probabilities are exactly 0 (e^(-FLT_MAX - max) underflows), so leaving them
 * out drops only zero terms from the sums (and the work); their saved probabilities
 * are stored as 0 and their dk, dv rows as 0. A fully masked sequence keeps
 * all keys (its softmax is uniform over them). The backward must get the
 * forward's mask (or NULL, which costs the full work and gives the same
 * result).
 *
 * Layouts (H = heads * head_dim, S = seq):
 *   qkv, dqkv  [B, S, 3, heads, head_dim]   row stride 3H
 *   out, dout  [B, S, heads, head_dim]      row stride H
 *   mask       [B, S] int32 (NULL = attend everywhere)
 *   save       probs [B, heads, S, S] f32, then keep [B, heads, S, S] u8
 * The varlen slots (ABI 1.4) run the same code per (sequence, head) with
 * S = the sequence's own length, its rows from cu_seqlens[b] of the packed
 * qkv/out, no mask, and its probabilities and keep bits packed [len, len]
 * one block after the other: (b, h) at heads * sum_{b' < b} len_b'² + h * len_b²
 * of the probs and of the keep region (each where the padded layout has it,
 * seq = the longest length allowed). Packed blocks keep the memory a batch
 * touches contiguous: the next batch reuses its pages instead of faulting in
 * the parts of [S, S] blocks a longer sequence reaches.
 * The dropout mask of element (b, h, i, j) is that of global row
 * g = row_first + b * row_stride, element (h * 2^16 + i) * 2^16 + j
 * (tfcore/backend.h "Dropout masks"; the 1.0 slots use row_first 0, stride 1). */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "cpu.h"
#include "cpu_math.h"
#include "cpu_random.h"

/* The mask's element index within a row packs (head, query, key) in 16-bit
 * fields (tfcore/backend.h "Dropout masks"). */
#define CPU_ATTN_DROPOUT_MAX_SEQ 65536
/* The most query rows in one forward block (rows_per_block). */
#define CPU_ATTN_MAX_BLOCK_ROWS 512

static bool probs_count(const tf_attention_desc *d, size_t *out)
{
    size_t n = (size_t)d->batch;
    return !__builtin_mul_overflow(n, (size_t)d->heads, &n) &&
           !__builtin_mul_overflow(n, (size_t)d->seq, &n) &&
           !__builtin_mul_overflow(n, (size_t)d->seq, &n) && (*out = n, true);
}

size_t cpu_attention_save_bytes(tf_backend *be, const tf_attention_desc *d)
{
    (void)be;
    size_t n, bytes;
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return 0;
    if (!probs_count(d, &n) || __builtin_mul_overflow(n, sizeof(float) + 1, &bytes) ||
        bytes > SIZE_MAX - CPU_ALIGN)
        return SIZE_MAX; /* alloc then fails with a message saying how much */
    /* the keep mask is always part of it, so one size serves train and eval */
    return (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
}

/* What libtfcore's checks (tf_check_attention_fwd/bwd) leave to this
 * backend: fp32 or bf16 mode, a row of scores fits the scratch, and the
 * probabilities it saves are countable. */
static tf_status check_desc(tf_error *err, const char *op, const tf_attention_desc *d)
{
    /* bf16: the products inside attention stay fp32 on this backend */
    if (d->mode != TF_MATMUL_FP32 && d->mode != TF_MATMUL_BF16)
        return cpu_fail(err, TF_ERR_PLUGIN, op,
                        "matmul mode %d is not supported (backend-cpu computes fp32 or bf16)",
                        (int)d->mode);
    if (d->dropout > 0.0f && d->seq > CPU_ATTN_DROPOUT_MAX_SEQ)
        return cpu_fail(err, TF_ERR_RUNTIME, op,
                        "seq %d with dropout: the dropout masks index at most %d positions",
                        d->seq, CPU_ATTN_DROPOUT_MAX_SEQ);
    if ((size_t)d->seq > CPU_SCRATCH_FLOATS)
        return cpu_fail(err, TF_ERR_RUNTIME, op,
                        "seq %d is longer than backend-cpu's attention supports (%zu)", d->seq,
                        CPU_SCRATCH_FLOATS);
    size_t n;
    if (!probs_count(d, &n))
        return cpu_fail(err, TF_ERR_RUNTIME, op, "batch * heads * seq * seq overflows");
    return TF_OK;
}

/* scores row += mask bias; then e^(x - max) in place. Returns 1 / the sum
 * of the e's: the probabilities are the e's times it, a scaling the caller
 * applies to the [rows, head_dim] output of (e v) instead of to the
 * [rows, keys] e's, one pass fewer over the scores when they are not saved.
 *
 * The max and the sum run in SM_LANES independent lanes, folded pairwise at
 * the end, and the row's last n % SM_LANES elements go through a local
 * vector filled up with -inf (e = 0): a scalar remainder loop and the
 * compiler's serial fold of a `reduction` clause each cost about as much as
 * a short row's vectors. The order of the additions depends on n only (the
 * GEMMs around it may round with the matrix's size: docs/ARCHITECTURE.md,
 * "the core names OpenBLAS's kernels"). */
#define SM_LANES 16
CPU_CLONES
static float softmax_exp_row(float *x, int n, const int32_t *mask)
{
    if (mask) {
#pragma omp simd
        for (int j = 0; j < n; j++) x[j] = x[j] + (1.0f - (float)mask[j]) * -FLT_MAX;
    }
    int nf = n / SM_LANES * SM_LANES, nt = n - nf; /* full vectors; the tail's length */
    float tail[SM_LANES], acc[SM_LANES];
    for (int l = 0; l < SM_LANES; l++) tail[l] = l < nt ? x[nf + l] : -INFINITY;
    for (int l = 0; l < SM_LANES; l++) acc[l] = tail[l];
    for (int j = 0; j < nf; j += SM_LANES)
#pragma omp simd
        for (int l = 0; l < SM_LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (int w = SM_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    float mx = acc[0];
#pragma omp simd
    for (int l = 0; l < SM_LANES; l++) {
        tail[l] = cpu_expf(tail[l] - mx);
        acc[l] = tail[l];
    }
    for (int j = 0; j < nf; j += SM_LANES)
#pragma omp simd
        for (int l = 0; l < SM_LANES; l++) {
            float e = cpu_expf(x[j + l] - mx);
            x[j + l] = e;
            acc[l] += e;
        }
    for (int l = 0; l < nt; l++) x[nf + l] = tail[l];
    for (int w = SM_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return 1.0f / acc[0];
}

CPU_CLONES
static void scale_rows(float *x, int rows, int cols, int64_t ld, const float *by)
{
    for (int i = 0; i < rows; i++) {
        float *row = x + i * ld, f = by[i];
#pragma omp simd
        for (int j = 0; j < cols; j++) row[j] *= f;
    }
}

CPU_CLONES
static void dropout_apply(const float *p, const uint8_t *keep, float *out, size_t n, float scale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = p[i] * (keep[i] ? scale : 0.0f);
}

/* ds = d(loss)/d(scores) from dpd = d(loss)/d(dropped probs), in place:
 * dp = dpd * keep * scale; ds = p * (dp - sum(dp * p)). */
CPU_CLONES
static void softmax_bwd_row(float *ds, const float *p, const uint8_t *keep, float scale, int n)
{
    if (keep) {
#pragma omp simd
        for (int j = 0; j < n; j++) ds[j] = ds[j] * (keep[j] ? scale : 0.0f);
    }
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++) dot += (double)ds[j] * (double)p[j];
    float fd = (float)dot;
#pragma omp simd
    for (int j = 0; j < n; j++) ds[j] = p[j] * (ds[j] - fd);
}

/* Keys [0, L) can have nonzero probability: L = 1 + the last unmasked key,
 * or all S when there is no mask or every key is masked. */
static int live_keys(const int32_t *mask_row, int S)
{
    if (!mask_row) return S;
    for (int j = S - 1; j >= 0; j--)
        if (mask_row[j] != 0) return j + 1;
    return S;
}

static void zero_cols(float *a, int rows, int64_t ld, int c0, int c1)
{
    for (int i = 0; i < rows; i++)
        for (int j = c0; j < c1; j++) a[i * ld + j] = 0.0f;
}

typedef struct attn_ctx {
    const tf_attention_desc *d;
    const float *qkv;
    const int32_t *mask;
    float *probs;       /* [B, heads, S, S] or NULL (eval without save) */
    uint8_t *keep;      /* [B, heads, S, S] or NULL (no dropout) */
    float drop_scale;   /* 1 / (1 - p), rounded to float as torch does */
    int rows_per_block; /* query rows per scratch block */
    uint64_t row_first, row_stride; /* sequence b's mask is global row first + b * stride */
    const int32_t *cu;  /* [B + 1] packed sequences' first rows (varlen), or NULL (padded) */
} attn_ctx;

/* Sequence b as one head's work sees it: its first row in qkv/out, its
 * length (the row stride of its probability block) and its mask row. */
typedef struct attn_seq {
    size_t row0;
    int S;
    const int32_t *mrow;
    size_t save0; /* its head 0 block in probs and keep; head h's is save0 + h * S * S */
} attn_seq;

static attn_seq seq_of(const attn_ctx *c, int b)
{
    if (c->cu) {
        size_t before = 0; /* the earlier sequences' blocks, O(batch) per task */
        for (int j = 0; j < b; j++) {
            size_t len = (size_t)(c->cu[j + 1] - c->cu[j]);
            before += len * len;
        }
        return (attn_seq){(size_t)c->cu[b], c->cu[b + 1] - c->cu[b], NULL, before * (size_t)c->d->heads};
    }
    int S = c->d->seq;
    return (attn_seq){(size_t)b * S, S, c->mask ? c->mask + (size_t)b * S : NULL,
                      (size_t)b * (size_t)c->d->heads * (size_t)S * (size_t)S};
}

static void attention_fwd_head(const attn_ctx *c, int bh, float *out, float *scratch)
{
    const tf_attention_desc *d = c->d;
    int hd = d->head_dim, H = d->heads * hd, b = bh / d->heads, h = bh % d->heads;
    attn_seq sq = seq_of(c, b);
    int S = sq.S;
    int64_t ld3 = 3 * (int64_t)H;
    const float *q = c->qkv + sq.row0 * ld3 + (size_t)h * hd;      /* [S, hd], ld 3H */
    const float *k = q + H, *v = q + 2 * H;                        /* [S, hd], ld 3H */
    float *o = out + sq.row0 * H + (size_t)h * hd;                  /* [S, hd], ld H */
    const int32_t *mrow = sq.mrow;                                  /* [S] or NULL */
    size_t at = sq.save0 + (size_t)h * S * S;                       /* its save block */
    float *ph = c->probs ? c->probs + at : NULL;                    /* [S, S] */
    uint8_t *kh = c->keep ? c->keep + at : NULL;                    /* [S, S] */
    int L = live_keys(mrow, S);
    float inv[CPU_ATTN_MAX_BLOCK_ROWS]; /* per row of the block: 1 / sum of its e's */
    for (int r0 = 0; r0 < S; r0 += c->rows_per_block) {
        int rb = S - r0 < c->rows_per_block ? S - r0 : c->rows_per_block;
        float *pb = ph ? ph + (size_t)r0 * S : scratch; /* [rb, S] */
        float *ob = o + (size_t)r0 * H;                  /* [rb, hd], ld H */
        cpu_sgemm(false, true, rb, L, hd, d->scale, q + r0 * ld3, ld3, k, ld3, 0.0f, pb, S);
        for (int i = 0; i < rb; i++) inv[i] = softmax_exp_row(pb + (size_t)i * S, L, mrow);
        if (ph) zero_cols(pb, rb, S, L, S); /* saved: the keys after L have probability 0 */
        const float *pv = pb;
        if (kh) { /* training with dropout: probs are saved, the scratch is free */
            uint8_t *kb = kh + (size_t)r0 * S;
            uint64_t row = d->offset + c->row_first + (uint64_t)b * c->row_stride;
            for (int i = 0; i < rb; i++)
                cpu_dropout_mask(d->seed, row, (((uint64_t)h << 16) + (uint64_t)(r0 + i)) << 16,
                                 (size_t)S, d->dropout, kb + (size_t)i * S);
            dropout_apply(pb, kb, scratch, (size_t)rb * S, c->drop_scale);
            pv = scratch;
        }
        /* out = (dropout(e) v) / sum(e): the same bits whether or not the
         * probabilities are saved */
        cpu_sgemm(false, false, rb, hd, L, 1.0f, pv, S, v, ld3, 0.0f, ob, H);
        scale_rows(ob, rb, hd, H, inv);
        if (ph) scale_rows(pb, rb, L, S, inv); /* the saved probabilities, for the backward */
    }
}

/* min(seq, CPU_SCRATCH_FLOATS / seq) <= sqrt(CPU_SCRATCH_FLOATS) */
_Static_assert(CPU_ATTN_MAX_BLOCK_ROWS * CPU_ATTN_MAX_BLOCK_ROWS >= CPU_SCRATCH_FLOATS,
               "a row block can have more rows than inv[] holds");
static int rows_per_block(int seq)
{
    size_t r = CPU_SCRATCH_FLOATS / (size_t)seq;
    return r >= (size_t)seq ? seq : (int)r;
}

static attn_ctx make_ctx(const tf_attention_desc *d, const void *qkv, const int32_t *mask,
                         const void *save, bool keep, uint64_t row_first, uint64_t row_stride,
                         const int32_t *cu)
{
    size_t n = 0;
    probs_count(d, &n); /* checked not to overflow by check_desc */
    return (attn_ctx){
        .d = d,
        .qkv = qkv,
        .mask = mask,
        .probs = (float *)save,
        .keep = save && keep && d->dropout > 0.0f ? (uint8_t *)((const float *)save + n) : NULL,
        .drop_scale = 1.0f / (1.0f - d->dropout),
        .rows_per_block = rows_per_block(d->seq),
        .row_first = row_first,
        .row_stride = row_stride,
        .cu = cu,
    };
}

static void run_fwd(tf_backend *be, const attn_ctx *c, void *out)
{
    int tasks = c->d->batch * c->d->heads;
    pthread_mutex_lock(&be->scratch_lock);
    CPU_PARALLEL_IF(be, be->threads > 1 && tasks > 1)
    {
        float *scratch = be->scratch + (size_t)cpu_thread_id() * CPU_SCRATCH_FLOATS;
        CPU_FOR_DYNAMIC
        for (int bh = 0; bh < tasks; bh++) attention_fwd_head(c, bh, out, scratch);
    }
    pthread_mutex_unlock(&be->scratch_lock);
}

tf_status cpu_attention_fwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               uint64_t row_first, uint64_t row_stride, const void *qkv,
                               const int32_t *mask, void *out, void *save, bool train,
                               tf_error *err)
{
    (void)s;
    const char *op = "attention_fwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_attention_fwd(&cpu_checker, err, op, d, qkv, out, save, train)) ||
        (st = check_desc(err, op, d)))
        return st;
    attn_ctx c = make_ctx(d, qkv, mask, save, train, row_first, row_stride, NULL);
    run_fwd(be, &c, out);
    return TF_OK;
}

tf_status cpu_attention_fwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                            const void *qkv, const int32_t *mask, void *out, void *save,
                            bool train, tf_error *err)
{
    return cpu_attention_fwd_ex(be, s, d, 0, 1, qkv, mask, out, save, train, err);
}

static void attention_bwd_head(const attn_ctx *c, int bh, const float *dout, float *dqkv,
                               float *scratch)
{
    const tf_attention_desc *d = c->d;
    int hd = d->head_dim, H = d->heads * hd, b = bh / d->heads, h = bh % d->heads;
    attn_seq sq = seq_of(c, b);
    int S = sq.S;
    int64_t ld3 = 3 * (int64_t)H;
    size_t head_off = sq.row0 * ld3 + (size_t)h * hd;
    const float *q = c->qkv + head_off, *k = q + H, *v = q + 2 * H; /* [S, hd], ld 3H */
    float *dq = dqkv + head_off, *dk = dq + H, *dv = dq + 2 * H;    /* [S, hd], ld 3H */
    const float *dO = dout + sq.row0 * H + (size_t)h * hd;           /* [S, hd], ld H */
    size_t at = sq.save0 + (size_t)h * S * S;                        /* its save block */
    const float *ph = c->probs + at;                                 /* [S, S] */
    const uint8_t *kh = c->keep ? c->keep + at : NULL;               /* [S, S] */
    int L = live_keys(sq.mrow, S);
    for (int r0 = 0; r0 < S; r0 += c->rows_per_block) {
        int rb = S - r0 < c->rows_per_block ? S - r0 : c->rows_per_block;
        float beta = r0 == 0 ? 0.0f : 1.0f; /* dk, dv: first block writes, the rest add */
        const float *pb = ph + (size_t)r0 * S;
        const uint8_t *kb = kh ? kh + (size_t)r0 * S : NULL;
        const float *dob = dO + (size_t)r0 * H;
        /* scratch: [rb, S]. dv += dropped_probs_blockᵀ dout_block */
        const float *pd = pb;
        if (kb) {
            dropout_apply(pb, kb, scratch, (size_t)rb * S, c->drop_scale);
            pd = scratch;
        }
        cpu_sgemm(true, false, L, hd, rb, 1.0f, pd, S, dob, H, beta, dv, ld3);
        /* d(dropped probs) = dout_block vᵀ, then d(scores) in place */
        cpu_sgemm(false, true, rb, L, hd, 1.0f, dob, H, v, ld3, 0.0f, scratch, S);
        for (int i = 0; i < rb; i++)
            softmax_bwd_row(scratch + (size_t)i * S, pb + (size_t)i * S,
                            kb ? kb + (size_t)i * S : NULL, c->drop_scale, L);
        /* dq_block = scale * dscores k;  dk += scale * dscoresᵀ q_block */
        cpu_sgemm(false, false, rb, hd, L, d->scale, scratch, S, k, ld3, 0.0f, dq + r0 * ld3,
                  ld3);
        cpu_sgemm(true, false, L, hd, rb, d->scale, scratch, S, q + r0 * ld3, ld3, beta, dk,
                  ld3);
    }
    /* skipped keys had probability 0: no gradient reaches them */
    zero_cols(dk + (size_t)L * ld3, S - L, ld3, 0, hd);
    zero_cols(dv + (size_t)L * ld3, S - L, ld3, 0, hd);
}

static void run_bwd(tf_backend *be, const attn_ctx *c, const void *dout, void *dqkv)
{
    int tasks = c->d->batch * c->d->heads;
    pthread_mutex_lock(&be->scratch_lock);
    CPU_PARALLEL_IF(be, be->threads > 1 && tasks > 1)
    {
        float *scratch = be->scratch + (size_t)cpu_thread_id() * CPU_SCRATCH_FLOATS;
        CPU_FOR_DYNAMIC
        for (int bh = 0; bh < tasks; bh++) attention_bwd_head(c, bh, dout, dqkv, scratch);
    }
    pthread_mutex_unlock(&be->scratch_lock);
}

tf_status cpu_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                            const void *qkv, const int32_t *mask, const void *out,
                            const void *save, const void *dout, void *dqkv, tf_error *err)
{
    (void)s;
    (void)out;
    const char *op = "attention_bwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_attention_bwd(&cpu_checker, err, op, d, qkv, save, dout, dqkv)) ||
        (st = check_desc(err, op, d)))
        return st;
    attn_ctx c = make_ctx(d, qkv, mask, save, true, 0, 1, NULL);
    run_bwd(be, &c, dout, dqkv);
    return TF_OK;
}

/* backend-cpu saves the forward's keep mask, so the rows are not needed again. */
tf_status cpu_attention_bwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               uint64_t row_first, uint64_t row_stride, const void *qkv,
                               const int32_t *mask, const void *out, const void *save,
                               const void *dout, void *dqkv, tf_error *err)
{
    (void)row_first;
    (void)row_stride;
    return cpu_attention_bwd(be, s, d, qkv, mask, out, save, dout, dqkv, err);
}

/* The varlen descriptor (its size; cu_seqlens 0 first, every length in
 * [1, seq]) and what the padded slots check of its attention part. */
static tf_status check_varlen(tf_error *err, const char *op, const tf_attention_varlen_desc *vd)
{
    if (!vd) return cpu_fail(err, TF_ERR_RUNTIME, op, "the descriptor is NULL");
    if (vd->size < sizeof *vd)
        return cpu_fail(err, TF_ERR_PLUGIN, op,
                        "descriptor size %u, expected at least %zu (core built against an older ABI?)",
                        vd->size, sizeof *vd);
    tf_status st;
    if ((st = tf_check_attention_desc(&cpu_checker, err, op, &vd->attn)) ||
        (st = check_desc(err, op, &vd->attn)) ||
        (st = cpu_need(err, op, "cu_seqlens", vd->cu_seqlens)))
        return st;
    const int32_t *cu = vd->cu_seqlens;
    if (cu[0] != 0) return cpu_fail(err, TF_ERR_RUNTIME, op, "cu_seqlens[0] is %d, not 0", cu[0]);
    for (int b = 0; b < vd->attn.batch; b++) {
        long long len = (long long)cu[b + 1] - cu[b];
        if (len < 1 || len > vd->attn.seq)
            return cpu_fail(err, TF_ERR_RUNTIME, op,
                            "sequence %d has length %lld (cu_seqlens %d, %d); lengths are 1 to seq %d",
                            b, len, cu[b], cu[b + 1], vd->attn.seq);
    }
    return TF_OK;
}

tf_status cpu_attention_varlen_fwd(tf_backend *be, tf_stream *s,
                                   const tf_attention_varlen_desc *vd, const void *qkv, void *out,
                                   void *save, bool train, tf_error *err)
{
    (void)s;
    const char *op = "attention_varlen_fwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = check_varlen(err, op, vd)) ||
        (st = tf_check_attention_fwd(&cpu_checker, err, op, &vd->attn, qkv, out, save, train)))
        return st;
    attn_ctx c = make_ctx(&vd->attn, qkv, NULL, save, train, vd->row_first, vd->row_stride,
                          vd->cu_seqlens);
    run_fwd(be, &c, out);
    return TF_OK;
}

tf_status cpu_attention_varlen_bwd(tf_backend *be, tf_stream *s,
                                   const tf_attention_varlen_desc *vd, const void *qkv,
                                   const void *out, const void *save, const void *dout,
                                   void *dqkv, tf_error *err)
{
    (void)s;
    (void)out;
    const char *op = "attention_varlen_bwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = check_varlen(err, op, vd)) ||
        (st = tf_check_attention_bwd(&cpu_checker, err, op, &vd->attn, qkv, save, dout, dqkv)))
        return st;
    attn_ctx c = make_ctx(&vd->attn, qkv, NULL, save, true, 0, 1, vd->cu_seqlens);
    run_bwd(be, &c, dout, dqkv);
    return TF_OK;
}
