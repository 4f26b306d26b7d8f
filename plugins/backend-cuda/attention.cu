/* attention.cu — backend-cuda multi-head self-attention over a fused QKV
 * buffer, flash-style: the S x S score matrix never exists in memory. The
 * math is Hugging Face's eager BertSelfAttention, as backend-cpu computes it:
 *   s[i, j] = (q_i . k_j) * scale + (1 - mask[j]) * (-FLT_MAX)   (finfo.min, not -inf)
 *   p[i, :] = softmax(s[i, :])      (a fully masked row is uniform over the S keys)
 *   out_i   = sum_j dropout(p)[i, j] v_j,  dropout(p) = p * keep / (1 - dropout)
 *
 * Layouts (H = heads * head_dim, D = head_dim, S = seq):
 *   qkv, dqkv  [B, S, 3, heads, D]   q at column 0, k at H, v at 2H; row stride 3H
 *   out, dout  [B, S, heads, D]      row stride H
 *   mask       [B, S] int32 (NULL = attend everywhere)
 *   save       [B, heads, S, 2] f32: per query row, m = max_j s[i, j] and
 *              l = sum_j exp(s[i, j] - m), so that p[i, j] = exp(s[i, j] - m) / l.
 *              (m and l rather than one logsumexp: for a fully masked row
 *              m = -FLT_MAX and m + log(l) rounds back to -FLT_MAX, losing the
 *              1/S of the uniform row.)
 *   workspace  [B, heads, S] f32: D_i = sum_d dout[i, d] * out[i, d] (backward)
 *
 * Forward, per block of query rows: loop over tiles of keys with an online
 * softmax (running max m, running sum l, output rescaled by exp(m_old - m_new)
 * when the max grows), out = acc / l at the end. Keys past the sequence are
 * -inf (probability 0 for every row); keys past the last unmasked key of a
 * sequence (right padding) are skipped, as backend-cpu skips them: their
 * probability e^(-FLT_MAX - m) is exactly 0 in float unless every key is
 * masked, and then there is no last unmasked key and all S keys are kept.
 *
 * Dropout: the keep bit of element (b, h, i, j) is element
 * (h * 2^16 + i) * 2^16 + j of the Philox4x32-10 stream (seed, offset + g),
 * g = row_first + b * row_stride the sequence's global row, exactly as
 * tfcore/backend.h "Dropout masks" and plugins/backend-cpu/cpu_random.h
 * define it, so the CPU and the GPU drop the same elements; the backward
 * recomputes the bits.
 *
 * Backward (P = softmax probabilities, Pd = P * keep * rs with rs = 1/(1-p)
 * where kept and 0 where dropped, dO = dout):
 *   dV_j  = sum_i Pd[i, j] dO_i
 *   dPd   = dO_i . v_j                         (gradient of the dropped probabilities)
 *   dP    = dPd * keep * rs                    (through the dropout)
 *   dS    = P * (dP - sum_j' P[i, j'] dP[i, j'])   (softmax Jacobian)
 *   and sum_j' P dP = sum_j' Pd[i, j'] (dO_i . v_j') = dO_i . out_i = D_i,
 *   so dS = P * (dP - D_i) needs no pass over the whole row.
 *   dQ_i  = scale * sum_j dS[i, j] k_j,   dK_j = scale * sum_i dS[i, j] q_i
 * Three kernels, no atomics: D_i per row; dK and dV per block of keys (a loop
 * over all query tiles, recomputing P from q, k, m and l); dQ per block of
 * queries (a loop over the live key tiles, recomputing P and dS). Each output
 * element is summed by one thread in a fixed order, so the bits never vary.
 * Keys past the last unmasked key get dK = dV = 0 (no probability reaches
 * them), as in backend-cpu.
 *
 * Varlen (ABI 1.4, tf_attention_varlen_desc): the same kernels with
 * sequence b's rows at cu[b] of the packed qkv/out/dout/dqkv and its own
 * length as S (att_len, att_row0), no mask; save and the backward's
 * workspace keep the padded [B, heads, seq] layout (rows past a sequence's
 * length unused), and blocks whose query or key tile starts past the length
 * return at once. A sequence computes exactly what it computes right-padded
 * with its mask: the same tiles from key 0, keys past the end at probability
 * 0 either way.
 *
 * Two implementations:
 *   - tensor cores (f16/bf16, D a multiple of 8 and <= 64, 16-byte aligned
 *     buffers): mma.sync m16n8k16 with f32 accumulation; D is zero-padded to
 *     32 or 64; 4 warps, each owning 16 rows of the block's 64. P and dS are
 *     rounded to f16/bf16 for their products (as flash-attention does).
 *   - SIMT (f32 in every matmul mode, and the f16/bf16 head_dims the first
 *     does not take, up to 128): fp32 FMAs, 8 warps; one lane per key (or per
 *     query in the dK/dV kernel) for the dot products, one lane per head
 *     dimension for the sums over keys. */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "fused_kernels.h"

/* ------------------------------------------------------------------------ */
/* shared pieces                                                             */
/* ------------------------------------------------------------------------ */

/* Everything a kernel needs besides its pointers (passed by value). */
struct att_args {
    int batch, seq, heads, head_dim;
    int64_t H, ld3;       /* heads * head_dim, 3 * H: row strides of out and qkv */
    float scale;
    bool drop;            /* apply dropout (training forward / backward with p > 0) */
    bool drop4;           /* seq % 4 == 0: every row of the stream starts a Philox counter */
    uint32_t drop_thr;    /* keep when (word >> 8) >= drop_thr */
    float drop_scale;     /* 1 / (1 - p), rounded to float */
    uint64_t seed, offset;
    uint64_t row_first, row_stride; /* sequence b's mask: global row first + b * stride */
    const int32_t *cu;    /* [batch + 1] packed sequences' first rows (varlen), or NULL */
};

/* Sequence b's length and first row of qkv/out: [seq] at b * seq when
 * padded; packed (varlen), cu[b+1] - cu[b] clamped to [0, seq] (the kernels
 * cannot report a bad cu_seqlens; clamping keeps every access in bounds of
 * what the caller's cu_seqlens describes) at cu[b]. */
__device__ __forceinline__ int att_len(const att_args &a, int b)
{
    if (!a.cu) return a.seq;
    int n = a.cu[b + 1] - a.cu[b];
    return n < 0 ? 0 : n > a.seq ? a.seq : n;
}

__device__ __forceinline__ int64_t att_row0(const att_args &a, int b)
{
    return a.cu ? (int64_t)a.cu[b] : (int64_t)b * a.seq;
}

/* Philox4x32-10 of counter (ctr, offset) under key seed: cpu_random.h. */
__device__ __forceinline__ uint4 att_philox(uint64_t ctr, uint64_t seed, uint64_t offset)
{
    uint32_t x0 = (uint32_t)ctr, x1 = (uint32_t)(ctr >> 32);
    uint32_t x2 = (uint32_t)offset, x3 = (uint32_t)(offset >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, x0), lo0 = 0xD2511F53u * x0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, x2), lo1 = 0xCD9E8D57u * x2;
        uint32_t y0 = hi1 ^ x1 ^ k0, y2 = hi0 ^ x3 ^ k1;
        x1 = lo1;
        x3 = lo0;
        x0 = y0;
        x2 = y2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(x0, x1, x2, x3);
}

__device__ __forceinline__ uint32_t att_word(uint4 r, uint32_t w)
{
    return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
}

/* The stream offset of (b, h) pair bh: offset + the sequence's global row. */
__device__ __forceinline__ uint64_t att_row_offset(const att_args &a, int bh)
{
    return a.offset + a.row_first + (uint64_t)(bh / a.heads) * a.row_stride;
}

/* Keep bit of element idx of pair bh's stream. */
__device__ __forceinline__ bool att_keep1(const att_args &a, int bh, uint64_t idx)
{
    uint4 r = att_philox(idx >> 2, a.seed, att_row_offset(a, bh));
    return (att_word(r, (uint32_t)(idx & 3)) >> 8) >= a.drop_thr;
}

/* Keep bits of elements idx and idx + 1 (one Philox call unless they fall
 * in two counters). */
__device__ __forceinline__ void att_keep2(const att_args &a, int bh, uint64_t idx, bool &k0,
                                          bool &k1)
{
    uint32_t w = (uint32_t)(idx & 3);
    const uint64_t off = att_row_offset(a, bh);
    uint4 r = att_philox(idx >> 2, a.seed, off);
    k0 = (att_word(r, w) >> 8) >= a.drop_thr;
    if (w < 3) {
        k1 = (att_word(r, w + 1) >> 8) >= a.drop_thr;
    } else {
        uint4 r2 = att_philox((idx >> 2) + 1, a.seed, off);
        k1 = (r2.x >> 8) >= a.drop_thr;
    }
}

/* Index of element (bh, i, j) in its sequence's stream: (h * 2^16 + i) * 2^16 + j. */
__device__ __forceinline__ uint64_t att_elem(const att_args &a, int bh, int i, int j)
{
    return ((((uint64_t)(bh % a.heads)) << 16) + (uint64_t)i) * 65536u + (uint64_t)(int64_t)j;
}

/* The tensor-core kernels' threads hold elements in pairs (rows g and g+8,
 * columns 2t and 2t+1 of an 8-column tile), and one Philox call gives the
 * bits of 4 consecutive keys. When seq % 4 == 0 (and the tile's first key is
 * a multiple of 4), each counter's 4 keys sit in 2 or 4 lanes, so each lane
 * computes one counter and the lanes swap the bits the others need: 1 call
 * per lane where 2 (forward, dQ) or 4 (dK/dV) would be needed alone. The
 * bits are the same either way. Both must be called by the whole warp. */

/* The 4 keep bits of counter idx >> 2 (bit w = word w), idx % 4 == 0. */
__device__ __forceinline__ uint32_t att_keep_bits4(const att_args &a, int bh, uint64_t idx)
{
    uint4 r = att_philox(idx >> 2, a.seed, att_row_offset(a, bh));
    return (uint32_t)((r.x >> 8) >= a.drop_thr) | (uint32_t)((r.y >> 8) >= a.drop_thr) << 1 |
           (uint32_t)((r.z >> 8) >= a.drop_thr) << 2 | (uint32_t)((r.w >> 8) >= a.drop_thr) << 3;
}

/* Rows are queries (row_g and row_g + 8), columns keys j0 and j0 + 1 with
 * j0 = (multiple of 4) + 2t. Returns bit 2x + y = keep of (row_g + 8x, j0 + y).
 * Lanes t and t^1 share both counters: the even one computes row_g's, the
 * odd one row_g + 8's, and each sends the other the pair it needs. */
__device__ __forceinline__ uint32_t att_keep_rows4(const att_args &a, int bh, int row_g, int j0)
{
    const uint32_t odd = threadIdx.x & 1; /* t & 1: j0 % 4 == 2 * odd */
    uint32_t b = att_keep_bits4(a, bh, att_elem(a, bh, row_g + 8 * (int)odd, j0 - 2 * (int)odd));
    uint32_t mine = (b >> (2 * odd)) & 3u;            /* (my row, j0 + y) */
    uint32_t other = __shfl_xor_sync(0xffffffffu, (b >> (2 * (odd ^ 1))) & 3u, 1);
    return odd ? (other | mine << 2) : (mine | other << 2);
}

/* Rows are keys (key_g and key_g + 8, key_g = multiple of 4 + g % 4),
 * columns queries c0 and c0 + 1. Returns bit 2x + y = keep of
 * (query c0 + y, key key_g + 8x). The 4 lanes with the same t and g / 4
 * (r = g % 4 = 0..3) share the 4 counters (x, y): lane r computes counter
 * r = 2x + y, and in round q sends lane r ^ q the bit it needs (word r ^ q). */
__device__ __forceinline__ uint32_t att_keep_cols4(const att_args &a, int bh, int c0, int key_g)
{
    const uint32_t r = (threadIdx.x >> 2) & 3u;
    const int x = (int)(r >> 1), y = (int)(r & 1);
    uint32_t b = att_keep_bits4(a, bh, att_elem(a, bh, c0 + y, key_g - (int)r + 8 * x));
    uint32_t bits = ((b >> r) & 1u) << r;
#pragma unroll
    for (uint32_t q = 1; q < 4; q++) {
        uint32_t got = __shfl_xor_sync(0xffffffffu, (b >> (r ^ q)) & 1u, (int)(q << 2));
        bits |= got << (r ^ q);
    }
    return bits;
}

/* Bit 2x + y = keep of (query row_g + 8x, key j0 + y): shared counters when
 * seq % 4 == 0, else one call per pair (two when the pair straddles
 * counters). */
__device__ __forceinline__ uint32_t att_keep_pairs(const att_args &a, int bh, int row_g, int j0)
{
    if (a.drop4) return att_keep_rows4(a, bh, row_g, j0);
    uint32_t bits = 0;
#pragma unroll
    for (int x = 0; x < 2; x++) {
        bool k0, k1;
        att_keep2(a, bh, att_elem(a, bh, row_g + 8 * x, j0), k0, k1);
        bits |= (uint32_t)k0 << (2 * x) | (uint32_t)k1 << (2 * x + 1);
    }
    return bits;
}

/* Bit 2x + y = keep of (query c0 + y, key key_g + 8x). */
__device__ __forceinline__ uint32_t att_keep_keys(const att_args &a, int bh, int c0, int key_g)
{
    if (a.drop4) return att_keep_cols4(a, bh, c0, key_g);
    uint32_t bits = 0;
#pragma unroll
    for (int e = 0; e < 4; e++)
        bits |= (uint32_t)att_keep1(a, bh, att_elem(a, bh, c0 + (e & 1), key_g + 8 * (e >> 1))) << e;
    return bits;
}

/* The additive mask term of key j < S of sequence b, as backend-cpu adds it. */
__device__ __forceinline__ float att_key_bias(const int32_t *mask, const att_args &a, int b, int j)
{
    return mask ? (1.0f - (float)mask[(int64_t)b * a.seq + j]) * -FLT_MAX : 0.0f;
}

/* Keys [0, L) can have nonzero probability: L = 1 + the last unmasked key of
 * sequence b, or S when there is no mask or every key is masked. Every thread
 * of the block must call it; all get the same L. scratch: 32 ints. */
__device__ int att_live_keys(const int32_t *mask, const att_args &a, int b, int *scratch)
{
    if (!mask) return att_len(a, b);
    const int32_t *row = mask + (int64_t)b * a.seq; /* [S] */
    int last = -1;
    for (int j = threadIdx.x; j < a.seq; j += blockDim.x)
        if (row[j] != 0) last = j; /* j grows: the thread's last is its largest */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = last;
    __syncthreads();
    int nw = blockDim.x >> 5;
    last = -1;
    for (int k = 0; k < nw; k++) last = max(last, scratch[k]);
    return last < 0 ? a.seq : last + 1;
}

/* D[bh, i] = sum_d dout[b, i, h, d] * out[b, i, h, d], one warp per (b, i, h). */
template <typename T>
__global__ void __launch_bounds__(256)
    att_bwd_dot(const T *__restrict__ out, const T *__restrict__ dout, float *__restrict__ Dws,
                att_args a)
{
    const int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5); /* (b * S + i) * heads + h */
    const int lane = threadIdx.x & 31;
    if (row >= (int64_t)a.batch * a.seq * a.heads) return; /* uniform over the warp */
    const int h = (int)(row % a.heads);
    const int64_t bi = row / a.heads; /* b * S + i */
    const int b = (int)(bi / a.seq);
    const int64_t i = bi % a.seq;
    if (i >= att_len(a, b)) return; /* past a packed sequence's end: no such row */
    const int64_t at = ((att_row0(a, b) + i) * a.heads + h) * a.head_dim;
    const T *o = out + at, *g = dout + at; /* [D] */
    double s = 0.0;
    for (int d = lane; d < a.head_dim; d += 32)
        s += (double)tfcb_to_f32<T>(o[d]) * (double)tfcb_to_f32<T>(g[d]);
    s = tfcb_warp_sum(s);
    if (lane == 0) Dws[((int64_t)b * a.heads + h) * a.seq + i] = (float)s;
}

/* ------------------------------------------------------------------------ */
/* SIMT kernels (fp32 FMAs): 8 warps                                         */
/* ------------------------------------------------------------------------ */

#define ATT_SIMT_THREADS 256
/* Rows (queries, or keys in dK/dV) per warp: fewer for wide heads, so the
 * tiles fit the 48 KiB of static shared memory. */
#define ATT_SIMT_RPW(DP) ((DP) <= 64 ? 4 : (DP) <= 96 ? 2 : 1)

/* Forward: block (bh = blockIdx.x, query tile blockIdx.y) of 8 * RPW rows;
 * warp w owns rows w*RPW .. w*RPW+RPW-1; per key tile of 32, lane = key for
 * the scores, lane = head dimension (lane + 32 e) for the output. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_SIMT_THREADS)
    att_fwd_simt(const T *__restrict__ qkv, const int32_t *__restrict__ mask, T *__restrict__ out,
                 float *__restrict__ save, att_args a)
{
    constexpr int RPW = ATT_SIMT_RPW(DP), BR = 8 * RPW, BC = 32, NE = DP / 32;
    __shared__ float Qs[BR][DP];     /* query rows, f32 */
    __shared__ float Ks[BC][DP + 1]; /* key rows; +1: lane j reads row j without conflicts */
    __shared__ float Vs[BC][DP];
    __shared__ float bias_s[BC];
    __shared__ int scratch[32];
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int q0 = blockIdx.y * BR, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (q0 >= S) return; /* a query tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D; /* q of row i: head + i*ld3 */
    const int L = att_live_keys(mask, a, b, scratch);
    for (int x = threadIdx.x; x < BR * DP; x += blockDim.x) {
        int r = x / DP, d = x % DP, i = q0 + r;
        Qs[r][d] = i < S && d < D ? tfcb_to_f32<T>(head[(int64_t)i * a.ld3 + d]) : 0.0f;
    }
    float m[RPW], l[RPW], acc[RPW][NE];
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        m[k] = -INFINITY;
        l[k] = 0.0f;
#pragma unroll
        for (int e = 0; e < NE; e++) acc[k][e] = 0.0f;
    }
    const int ntiles = (L + BC - 1) / BC;
    for (int kt = 0; kt < ntiles; kt++) {
        const int k0 = kt * BC;
        __syncthreads(); /* the previous tile is no longer read */
        for (int x = threadIdx.x; x < BC * DP; x += blockDim.x) {
            int j = x / DP, d = x % DP, key = k0 + j;
            bool ok = key < S && d < D;
            const T *kp = head + (int64_t)key * a.ld3 + a.H + d;
            Ks[j][d] = ok ? tfcb_to_f32<T>(kp[0]) : 0.0f;
            Vs[j][d] = ok ? tfcb_to_f32<T>(kp[a.H]) : 0.0f;
        }
        if (threadIdx.x < BC) {
            int key = k0 + threadIdx.x;
            bias_s[threadIdx.x] = key < S ? att_key_bias(mask, a, b, key) : -INFINITY;
        }
        __syncthreads();
        const int key = k0 + lane;
        const float kb = bias_s[lane];
#pragma unroll
        for (int k = 0; k < RPW; k++) {
            const int r = w * RPW + k, i = q0 + r;
            float s = 0.0f;
#pragma unroll 16
            for (int d = 0; d < DP; d++) s = fmaf(Qs[r][d], Ks[lane][d], s);
            s = s * a.scale + kb; /* -inf for keys past S */
            /* the tile holds at least one key < S, so mn is finite */
            const float mn = fmaxf(m[k], tfcb_warp_max(s));
            const float corr = expf(m[k] - mn);
            const float p = expf(s - mn);
            l[k] = l[k] * corr + tfcb_warp_sum(p);
            m[k] = mn;
            float pd = p;
            if (a.drop) pd = att_keep1(a, bh, att_elem(a, bh, i, key)) ? p * a.drop_scale : p * 0.0f;
            float o[NE];
#pragma unroll
            for (int e = 0; e < NE; e++) o[e] = 0.0f;
#pragma unroll 8
            for (int j = 0; j < BC; j++) {
                float pj = __shfl_sync(0xffffffffu, pd, j);
#pragma unroll
                for (int e = 0; e < NE; e++) o[e] = fmaf(pj, Vs[j][lane + 32 * e], o[e]);
            }
#pragma unroll
            for (int e = 0; e < NE; e++) acc[k][e] = acc[k][e] * corr + o[e];
        }
    }
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        const int i = q0 + w * RPW + k;
        if (i >= S) continue;
        T *orow = out + (row0 + i) * a.H + (int64_t)h * D; /* [D] */
#pragma unroll
        for (int e = 0; e < NE; e++) {
            int d = lane + 32 * e;
            if (d < D) orow[d] = tfcb_from_f32<T>(acc[k][e] / l[k]);
        }
        if (save && lane == 0) {
            save[2 * ((int64_t)bh * a.seq + i)] = m[k];
            save[2 * ((int64_t)bh * a.seq + i) + 1] = l[k];
        }
    }
}

/* dK, dV: block (bh, key tile blockIdx.y) of 8 * KPW keys, warp w owning keys
 * w*KPW ..; loop over all query tiles of 32 with lane = query for the dot
 * products and lane = head dimension for the sums over queries. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_SIMT_THREADS)
    att_bwd_dkdv_simt(const T *__restrict__ qkv, const int32_t *__restrict__ mask,
                      const T *__restrict__ dout, const float *__restrict__ save,
                      const float *__restrict__ Dws, T *__restrict__ dqkv, att_args a)
{
    constexpr int KPW = ATT_SIMT_RPW(DP), BK = 8 * KPW, BQ = 32, NE = DP / 32;
    __shared__ float Ks[BK][DP];      /* read as broadcasts */
    __shared__ float Vs[BK][DP];
    __shared__ float Qs[BQ][DP + 1];  /* lane i reads row i */
    __shared__ float dOs[BQ][DP + 1];
    __shared__ float m_s[BQ], ri_s[BQ], D_s[BQ];
    __shared__ int scratch[32];
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int k0 = blockIdx.y * BK, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (k0 >= S) return; /* a key tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D;
    const T *dohead = dout + row0 * a.H + (int64_t)h * D; /* row i: + i*H */
    T *dhead = dqkv + row0 * a.ld3 + (int64_t)h * D;
    const int L = att_live_keys(mask, a, b, scratch);
    if (k0 >= L) { /* no probability reaches these keys */
        for (int x = threadIdx.x; x < BK * D; x += blockDim.x) {
            int key = k0 + x / D, d = x % D;
            if (key < S) {
                dhead[(int64_t)key * a.ld3 + a.H + d] = tfcb_from_f32<T>(0.0f);
                dhead[(int64_t)key * a.ld3 + 2 * a.H + d] = tfcb_from_f32<T>(0.0f);
            }
        }
        return;
    }
    for (int x = threadIdx.x; x < BK * DP; x += blockDim.x) {
        int j = x / DP, d = x % DP, key = k0 + j;
        bool ok = key < S && d < D;
        const T *kp = head + (int64_t)key * a.ld3 + a.H + d;
        Ks[j][d] = ok ? tfcb_to_f32<T>(kp[0]) : 0.0f;
        Vs[j][d] = ok ? tfcb_to_f32<T>(kp[a.H]) : 0.0f;
    }
    float kbias[KPW], dk[KPW][NE], dv[KPW][NE];
#pragma unroll
    for (int k = 0; k < KPW; k++) {
        int key = k0 + w * KPW + k;
        kbias[k] = key < S ? att_key_bias(mask, a, b, key) : -INFINITY;
#pragma unroll
        for (int e = 0; e < NE; e++) dk[k][e] = dv[k][e] = 0.0f;
    }
    const int nqt = (S + BQ - 1) / BQ;
    for (int qt = 0; qt < nqt; qt++) {
        const int q0 = qt * BQ;
        __syncthreads();
        for (int x = threadIdx.x; x < BQ * DP; x += blockDim.x) {
            int r = x / DP, d = x % DP, i = q0 + r;
            bool ok = i < S && d < D;
            Qs[r][d] = ok ? tfcb_to_f32<T>(head[(int64_t)i * a.ld3 + d]) : 0.0f;
            dOs[r][d] = ok ? tfcb_to_f32<T>(dohead[(int64_t)i * a.H + d]) : 0.0f;
        }
        if (threadIdx.x < BQ) {
            int i = q0 + threadIdx.x;
            /* rows past S: P = exp(.) * 0 = 0, so they add nothing */
            m_s[threadIdx.x] = i < S ? save[2 * ((int64_t)bh * a.seq + i)] : 0.0f;
            ri_s[threadIdx.x] = i < S ? 1.0f / save[2 * ((int64_t)bh * a.seq + i) + 1] : 0.0f;
            D_s[threadIdx.x] = i < S ? Dws[(int64_t)bh * a.seq + i] : 0.0f;
        }
        __syncthreads();
        const int i = q0 + lane;
        const float mi = m_s[lane], rii = ri_s[lane], Di = D_s[lane];
#pragma unroll
        for (int k = 0; k < KPW; k++) {
            const int kk = w * KPW + k, key = k0 + kk;
            if (key >= S) continue; /* uniform over the warp */
            float s = 0.0f, dp = 0.0f;
#pragma unroll 16
            for (int d = 0; d < DP; d++) {
                s = fmaf(Ks[kk][d], Qs[lane][d], s);
                dp = fmaf(Vs[kk][d], dOs[lane][d], dp);
            }
            s = s * a.scale + kbias[k];
            const float P = expf(s - mi) * rii;
            float kp = 1.0f;
            if (a.drop) kp = att_keep1(a, bh, att_elem(a, bh, i, key)) ? a.drop_scale : 0.0f;
            const float pd = P * kp;
            const float ds = P * (dp * kp - Di);
#pragma unroll 8
            for (int j = 0; j < BQ; j++) {
                float pj = __shfl_sync(0xffffffffu, pd, j);
                float sj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
                for (int e = 0; e < NE; e++) {
                    dv[k][e] = fmaf(pj, dOs[j][lane + 32 * e], dv[k][e]);
                    dk[k][e] = fmaf(sj, Qs[j][lane + 32 * e], dk[k][e]);
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < KPW; k++) {
        const int key = k0 + w * KPW + k;
        if (key >= S) continue;
        T *krow = dhead + (int64_t)key * a.ld3 + a.H; /* dK row; dV row at + H */
#pragma unroll
        for (int e = 0; e < NE; e++) {
            int d = lane + 32 * e;
            if (d < D) {
                krow[d] = tfcb_from_f32<T>(dk[k][e] * a.scale);
                krow[a.H + d] = tfcb_from_f32<T>(dv[k][e]);
            }
        }
    }
}

/* dQ: block (bh, query tile blockIdx.y) of 8 * RPW queries; loop over the
 * live key tiles of 32 with lane = key for the dot products and lane = head
 * dimension for the sum over keys. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_SIMT_THREADS)
    att_bwd_dq_simt(const T *__restrict__ qkv, const int32_t *__restrict__ mask,
                    const T *__restrict__ dout, const float *__restrict__ save,
                    const float *__restrict__ Dws, T *__restrict__ dqkv, att_args a)
{
    constexpr int RPW = ATT_SIMT_RPW(DP), BR = 8 * RPW, BC = 32, NE = DP / 32;
    __shared__ float Qs[BR][DP];      /* broadcasts */
    __shared__ float dOs[BR][DP];
    __shared__ float Ks[BC][DP + 1];  /* lane j reads row j; and row j across lanes */
    __shared__ float Vs[BC][DP + 1];
    __shared__ float bias_s[BC];
    __shared__ int scratch[32];
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int q0 = blockIdx.y * BR, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (q0 >= S) return; /* a query tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D;
    const T *dohead = dout + row0 * a.H + (int64_t)h * D;
    T *dhead = dqkv + row0 * a.ld3 + (int64_t)h * D;
    const int L = att_live_keys(mask, a, b, scratch);
    for (int x = threadIdx.x; x < BR * DP; x += blockDim.x) {
        int r = x / DP, d = x % DP, i = q0 + r;
        bool ok = i < S && d < D;
        Qs[r][d] = ok ? tfcb_to_f32<T>(head[(int64_t)i * a.ld3 + d]) : 0.0f;
        dOs[r][d] = ok ? tfcb_to_f32<T>(dohead[(int64_t)i * a.H + d]) : 0.0f;
    }
    float mr[RPW], rir[RPW], Dr[RPW], acc[RPW][NE];
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        int i = q0 + w * RPW + k;
        mr[k] = i < S ? save[2 * ((int64_t)bh * a.seq + i)] : 0.0f;
        rir[k] = i < S ? 1.0f / save[2 * ((int64_t)bh * a.seq + i) + 1] : 0.0f;
        Dr[k] = i < S ? Dws[(int64_t)bh * a.seq + i] : 0.0f;
#pragma unroll
        for (int e = 0; e < NE; e++) acc[k][e] = 0.0f;
    }
    const int ntiles = (L + BC - 1) / BC;
    for (int kt = 0; kt < ntiles; kt++) {
        const int k0 = kt * BC;
        __syncthreads();
        for (int x = threadIdx.x; x < BC * DP; x += blockDim.x) {
            int j = x / DP, d = x % DP, key = k0 + j;
            bool ok = key < S && d < D;
            const T *kp = head + (int64_t)key * a.ld3 + a.H + d;
            Ks[j][d] = ok ? tfcb_to_f32<T>(kp[0]) : 0.0f;
            Vs[j][d] = ok ? tfcb_to_f32<T>(kp[a.H]) : 0.0f;
        }
        if (threadIdx.x < BC) {
            int key = k0 + threadIdx.x;
            bias_s[threadIdx.x] = key < S ? att_key_bias(mask, a, b, key) : -INFINITY;
        }
        __syncthreads();
        const int key = k0 + lane;
        const float kb = bias_s[lane];
#pragma unroll
        for (int k = 0; k < RPW; k++) {
            const int r = w * RPW + k, i = q0 + r;
            if (i >= S) continue; /* uniform over the warp */
            float s = 0.0f, dp = 0.0f;
#pragma unroll 16
            for (int d = 0; d < DP; d++) {
                s = fmaf(Qs[r][d], Ks[lane][d], s);
                dp = fmaf(dOs[r][d], Vs[lane][d], dp);
            }
            s = s * a.scale + kb;
            const float P = expf(s - mr[k]) * rir[k]; /* 0 for keys past S */
            float kp = 1.0f;
            if (a.drop) kp = att_keep1(a, bh, att_elem(a, bh, i, key)) ? a.drop_scale : 0.0f;
            const float ds = P * (dp * kp - Dr[k]);
#pragma unroll 8
            for (int j = 0; j < BC; j++) {
                float sj = __shfl_sync(0xffffffffu, ds, j);
#pragma unroll
                for (int e = 0; e < NE; e++) acc[k][e] = fmaf(sj, Ks[j][lane + 32 * e], acc[k][e]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < RPW; k++) {
        const int i = q0 + w * RPW + k;
        if (i >= S) continue;
        T *qrow = dhead + (int64_t)i * a.ld3; /* dQ row */
#pragma unroll
        for (int e = 0; e < NE; e++) {
            int d = lane + 32 * e;
            if (d < D) qrow[d] = tfcb_from_f32<T>(acc[k][e] * a.scale);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* tensor-core kernels (f16 / bf16, mma.sync m16n8k16, f32 accumulate)      */
/* ------------------------------------------------------------------------ */
/* Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
 * g = lane / 4, t = lane % 4; each .b32 register holds two consecutive
 * elements along k (A, B) or n (C), the lower index in the low half:
 *   A 16x16 (row major): a0 (row g, k 2t..2t+1), a1 (row g+8, k 2t..),
 *                        a2 (row g, k 2t+8..),   a3 (row g+8, k 2t+8..)
 *   B 16x8 (k x n):      b0 (k 2t..2t+1, n g),   b1 (k 2t+8..2t+9, n g)
 *   C 16x8 f32:          c0, c1 (row g, n 2t, 2t+1), c2, c3 (row g+8, n 2t, 2t+1)
 * So a C tile pair (n 0..7 and 8..15) is, register for register, the A
 * fragment of the next product once packed to 16 bits (P, dS). B is read
 * from shared memory stored n-major ([n][k], k contiguous): for Kᵀ that is
 * K itself; for V, dO, Q and K as right-hand factors of sums over rows, a
 * transposed copy ([d][row]) is kept. Shared rows are padded by 8 elements
 * (16 bytes): the 8 groups' 32-bit loads then fall in distinct banks. */

#define ATT_MMA_THREADS 128 /* 4 warps of 16 rows */

/* D += A B on the tensor cores. TFCB_HOST_MMA is never defined in nvcc
 * builds: it lets a host-side emulation of these kernels (run to check the
 * fragment bookkeeping on a machine without a GPU) supply the product. */

template <typename T> __device__ __forceinline__ void att_mma(float c[4], const uint32_t a[4], const uint32_t b[2]);

template <> __device__ __forceinline__ void att_mma<__half>(float c[4], const uint32_t a[4], const uint32_t b[2])
{
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(TFCB_HOST_MMA)
    TFCB_HOST_MMA(__half, c, a, b);
#endif
}

template <> __device__ __forceinline__ void att_mma<__nv_bfloat16>(float c[4], const uint32_t a[4], const uint32_t b[2])
{
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(TFCB_HOST_MMA)
    TFCB_HOST_MMA(__nv_bfloat16, c, a, b);
#endif
}

/* Two floats packed as two T, lo in the low 16 bits. */
template <typename T> __device__ __forceinline__ uint32_t att_pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t att_pack2<__half>(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ __forceinline__ uint32_t att_pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

template <typename T> __device__ __forceinline__ uint32_t att_lds32(const T *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

/* A fragment of rows row0..row0+15, k k0..k0+15 of a row-major [rows][rs] tile. */
template <typename T>
__device__ __forceinline__ void att_ld_a(const T *s, int rs, int row0, int k0, uint32_t f[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const T *p = s + (row0 + g) * rs + k0 + 2 * t;
    f[0] = att_lds32(p);
    f[1] = att_lds32(p + 8 * rs);
    f[2] = att_lds32(p + 8);
    f[3] = att_lds32(p + 8 * rs + 8);
}

/* B fragment of n n0..n0+7, k k0..k0+15 of an n-major [n][rs] tile. */
template <typename T>
__device__ __forceinline__ void att_ld_b(const T *s, int rs, int n0, int k0, uint32_t f[2])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const T *p = s + (n0 + g) * rs + k0 + 2 * t;
    f[0] = att_lds32(p);
    f[1] = att_lds32(p + 8);
}

/* A fragment k-chunk kc (columns 16kc..16kc+15) from C tiles 2kc, 2kc+1. */
template <typename T>
__device__ __forceinline__ void att_c_to_a(const float c0[4], const float c1[4], uint32_t f[4])
{
    f[0] = att_pack2<T>(c0[0], c0[1]);
    f[1] = att_pack2<T>(c0[2], c0[3]);
    f[2] = att_pack2<T>(c1[0], c1[1]);
    f[3] = att_pack2<T>(c1[2], c1[3]);
}

/* Copy rows row0..row0+nrows-1 (columns 0..DP-1, zero past S or D) of a
 * global [S][ld] matrix into a row-major shared tile [nrows][rs] and/or a
 * transposed one [DP][rst], 16 bytes at a time (D % 8 == 0, rows 16-byte
 * aligned: checked by the host). */
template <typename T, int DP>
__device__ __forceinline__ void att_load_tile(const T *g, int64_t ld, int row0, int nrows, int S,
                                              int D, T *s, int rs, T *st, int rst)
{
    constexpr int CPR = DP / 8; /* 16-byte chunks per row */
    for (int c = threadIdx.x; c < nrows * CPR; c += blockDim.x) {
        int r = c / CPR, d0 = (c % CPR) * 8, i = row0 + r;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (i < S && d0 < D) v = *reinterpret_cast<const uint4 *>(g + (int64_t)i * ld + d0);
        if (s) *reinterpret_cast<uint4 *>(s + r * rs + d0) = v;
        if (st) {
            const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
            for (int k = 0; k < 8; k++) st[(d0 + k) * rst + r] = e[k];
        }
    }
}

/* Forward: block (bh, query tile blockIdx.y) of 64 rows; key tiles of 64. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_MMA_THREADS)
    att_fwd_mma(const T *__restrict__ qkv, const int32_t *__restrict__ mask, T *__restrict__ out,
                float *__restrict__ save, att_args a)
{
    constexpr int BR = 64, BC = 64, KC = DP / 16, NT = BC / 8, ND = DP / 8;
    constexpr int RS = DP + 8, RST = BC + 8;
    __shared__ uint4 smem[((BR * RS + BC * RS + DP * RST) * sizeof(T) + 15) / 16]; /* 16-byte aligned */
    __shared__ float bias_s[BC];
    __shared__ int scratch[32];
    T *Qs = reinterpret_cast<T *>(smem); /* [BR][RS] */
    T *Ks = Qs + BR * RS;                /* [BC][RS] */
    T *Vt = Ks + BC * RS;                /* [DP][RST]: V transposed */
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int q0 = blockIdx.y * BR, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (q0 >= S) return; /* a query tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D; /* q rows, ld 3H */
    const int L = att_live_keys(mask, a, b, scratch);
    att_load_tile<T, DP>(head, a.ld3, q0, BR, S, D, Qs, RS, (T *)nullptr, 0);
    __syncthreads();
    uint32_t qf[KC][4];
#pragma unroll
    for (int kc = 0; kc < KC; kc++) att_ld_a(Qs, RS, w * 16, kc * 16, qf[kc]);
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f}; /* rows g, g+8 */
    const int row_g = q0 + w * 16 + g;                                 /* query of c0, c1 */
    const int ntiles = (L + BC - 1) / BC;
    for (int kt = 0; kt < ntiles; kt++) {
        const int k0 = kt * BC;
        __syncthreads();
        att_load_tile<T, DP>(head + a.H, a.ld3, k0, BC, S, D, Ks, RS, (T *)nullptr, 0);
        att_load_tile<T, DP>(head + 2 * a.H, a.ld3, k0, BC, S, D, (T *)nullptr, 0, Vt, RST);
        if (threadIdx.x < BC) {
            int key = k0 + threadIdx.x;
            bias_s[threadIdx.x] = key < S ? att_key_bias(mask, a, b, key) : -INFINITY;
        }
        __syncthreads();
        float sc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t bf[2];
                att_ld_b(Ks, RS, nt * 8, kc * 16, bf);
                att_mma<T>(sc[nt], qf[kc], bf);
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nt][e] = sc[nt][e] * a.scale + bias_s[nt * 8 + 2 * t + (e & 1)];
                mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
            }
        }
        float corr[2], mn[2];
#pragma unroll
        for (int x = 0; x < 2; x++) {
            mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 1));
            mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 2));
            mn[x] = fmaxf(mrow[x], mx[x]); /* finite: the tile has a key < S */
            corr[x] = expf(mrow[x] - mn[x]);
            mrow[x] = mn[x];
        }
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = expf(sc[nt][e] - mn[e >> 1]);
                ls[e >> 1] += p;
                sc[nt][e] = p;
            }
        }
#pragma unroll
        for (int x = 0; x < 2; x++) lrow[x] = lrow[x] * corr[x] + ls[x];
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            o[nd][0] *= corr[0];
            o[nd][1] *= corr[0];
            o[nd][2] *= corr[1];
            o[nd][3] *= corr[1];
        }
        if (a.drop) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t kb = att_keep_pairs(a, bh, row_g, k0 + nt * 8 + 2 * t);
#pragma unroll
                for (int e = 0; e < 4; e++) sc[nt][e] *= (kb >> e) & 1u ? a.drop_scale : 0.0f;
            }
        }
#pragma unroll
        for (int kc = 0; kc < BC / 16; kc++) {
            uint32_t pf[4];
            att_c_to_a<T>(sc[2 * kc], sc[2 * kc + 1], pf);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t bf[2];
                att_ld_b(Vt, RST, nd * 8, kc * 16, bf);
                att_mma<T>(o[nd], pf, bf);
            }
        }
    }
    /* each of the 4 threads of a group summed its own columns; the sum is
     * symmetric, so all four get the same bits */
#pragma unroll
    for (int x = 0; x < 2; x++) {
        lrow[x] += __shfl_xor_sync(0xffffffffu, lrow[x], 1);
        lrow[x] += __shfl_xor_sync(0xffffffffu, lrow[x], 2);
    }
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int i = row_g + 8 * x;
        if (i >= S) continue;
        T *orow = out + (row0 + i) * a.H + (int64_t)h * D; /* [D] */
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            int d = nd * 8 + 2 * t; /* D % 8 == 0: d < D implies d + 1 < D */
            if (d < D)
                *reinterpret_cast<uint32_t *>(orow + d) =
                    att_pack2<T>(o[nd][2 * x] / lrow[x], o[nd][2 * x + 1] / lrow[x]);
        }
        if (save && t == 0) {
            save[2 * ((int64_t)bh * a.seq + i)] = mrow[x];
            save[2 * ((int64_t)bh * a.seq + i) + 1] = lrow[x];
        }
    }
}

/* dK, dV: block (bh, key tile blockIdx.y) of 64 keys, warp w owning keys
 * 16w..16w+15 (K and V fragments stay in registers); query tiles of 32.
 * Per query tile, with the key as the row: Sᵀ = K Qᵀ, dPdᵀ = V dOᵀ, then
 * Pdᵀ and dSᵀ elementwise, dV += Pdᵀ dO, dK += dSᵀ Q. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_MMA_THREADS)
    att_bwd_dkdv_mma(const T *__restrict__ qkv, const int32_t *__restrict__ mask,
                     const T *__restrict__ dout, const float *__restrict__ save,
                     const float *__restrict__ Dws, T *__restrict__ dqkv, att_args a)
{
    constexpr int BK = 64, BQ = 32, KC = DP / 16, NT = BQ / 8, ND = DP / 8;
    constexpr int RS = DP + 8, RST = BQ + 8;
    constexpr int STAGE = 2 * BK * RS;                  /* K, V tiles (prologue) */
    constexpr int LOOP = 2 * BQ * RS + 2 * DP * RST;    /* Q, dO, Qᵀ, dOᵀ (loop) */
    __shared__ uint4 smem[((STAGE > LOOP ? STAGE : LOOP) * sizeof(T) + 15) / 16];
    __shared__ float m_s[BQ], ri_s[BQ], D_s[BQ];
    __shared__ int scratch[32];
    T *Ks = reinterpret_cast<T *>(smem), *Vs = Ks + BK * RS;   /* [BK][RS] each */
    T *Qs = reinterpret_cast<T *>(smem), *dOs = Qs + BQ * RS;  /* [BQ][RS] each */
    T *Qt = dOs + BQ * RS, *dOt = Qt + DP * RST;               /* [DP][RST] each */
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int k0 = blockIdx.y * BK, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (k0 >= S) return; /* a key tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D;
    const T *dohead = dout + row0 * a.H + (int64_t)h * D;
    T *dhead = dqkv + row0 * a.ld3 + (int64_t)h * D;
    const int L = att_live_keys(mask, a, b, scratch);
    if (k0 >= L) { /* no probability reaches these keys */
        for (int x = threadIdx.x; x < BK * D; x += blockDim.x) {
            int key = k0 + x / D, d = x % D;
            if (key < S) {
                dhead[(int64_t)key * a.ld3 + a.H + d] = tfcb_from_f32<T>(0.0f);
                dhead[(int64_t)key * a.ld3 + 2 * a.H + d] = tfcb_from_f32<T>(0.0f);
            }
        }
        return;
    }
    att_load_tile<T, DP>(head + a.H, a.ld3, k0, BK, S, D, Ks, RS, (T *)nullptr, 0);
    att_load_tile<T, DP>(head + 2 * a.H, a.ld3, k0, BK, S, D, Vs, RS, (T *)nullptr, 0);
    __syncthreads();
    uint32_t kf[KC][4], vf[KC][4];
#pragma unroll
    for (int kc = 0; kc < KC; kc++) {
        att_ld_a(Ks, RS, w * 16, kc * 16, kf[kc]);
        att_ld_a(Vs, RS, w * 16, kc * 16, vf[kc]);
    }
    const int key_g = k0 + w * 16 + g; /* key of rows c0, c1; key_g + 8 for c2, c3 */
    float kbias[2];
#pragma unroll
    for (int x = 0; x < 2; x++)
        kbias[x] = key_g + 8 * x < S ? att_key_bias(mask, a, b, key_g + 8 * x) : -INFINITY;
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[nd][e] = dv[nd][e] = 0.0f;
    const int nqt = (S + BQ - 1) / BQ;
    for (int qt = 0; qt < nqt; qt++) {
        const int q0 = qt * BQ;
        __syncthreads(); /* K/V staging or the previous tile is no longer read */
        att_load_tile<T, DP>(head, a.ld3, q0, BQ, S, D, Qs, RS, Qt, RST);
        att_load_tile<T, DP>(dohead, a.H, q0, BQ, S, D, dOs, RS, dOt, RST);
        if (threadIdx.x < BQ) {
            int i = q0 + threadIdx.x;
            m_s[threadIdx.x] = i < S ? save[2 * ((int64_t)bh * a.seq + i)] : 0.0f;
            ri_s[threadIdx.x] = i < S ? 1.0f / save[2 * ((int64_t)bh * a.seq + i) + 1] : 0.0f;
            D_s[threadIdx.x] = i < S ? Dws[(int64_t)bh * a.seq + i] : 0.0f;
        }
        __syncthreads();
        float st[NT][4], dpt[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[nt][e] = dpt[nt][e] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t bf[2];
                att_ld_b(Qs, RS, nt * 8, kc * 16, bf);
                att_mma<T>(st[nt], kf[kc], bf);
                att_ld_b(dOs, RS, nt * 8, kc * 16, bf);
                att_mma<T>(dpt[nt], vf[kc], bf);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            /* bit 2x + y: keep of (query q0 + nt*8 + 2t + y, key key_g + 8x) */
            const uint32_t kb = a.drop ? att_keep_keys(a, bh, q0 + nt * 8 + 2 * t, key_g) : 0u;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int x = e >> 1, c = nt * 8 + 2 * t + (e & 1); /* key row g+8x, query c */
                const float s = st[nt][e] * a.scale + kbias[x];
                const float P = expf(s - m_s[c]) * ri_s[c];
                float kp = 1.0f;
                if (a.drop) kp = (kb >> e) & 1u ? a.drop_scale : 0.0f;
                st[nt][e] = P * kp;                      /* Pdᵀ */
                dpt[nt][e] = P * (dpt[nt][e] * kp - D_s[c]); /* dSᵀ */
            }
        }
#pragma unroll
        for (int kc = 0; kc < BQ / 16; kc++) {
            uint32_t pf[4], sf[4];
            att_c_to_a<T>(st[2 * kc], st[2 * kc + 1], pf);
            att_c_to_a<T>(dpt[2 * kc], dpt[2 * kc + 1], sf);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t bf[2];
                att_ld_b(dOt, RST, nd * 8, kc * 16, bf);
                att_mma<T>(dv[nd], pf, bf);
                att_ld_b(Qt, RST, nd * 8, kc * 16, bf);
                att_mma<T>(dk[nd], sf, bf);
            }
        }
    }
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int key = key_g + 8 * x;
        if (key >= S) continue;
        T *krow = dhead + (int64_t)key * a.ld3 + a.H; /* dK row; dV row at + H */
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            int d = nd * 8 + 2 * t;
            if (d < D) {
                *reinterpret_cast<uint32_t *>(krow + d) =
                    att_pack2<T>(dk[nd][2 * x] * a.scale, dk[nd][2 * x + 1] * a.scale);
                *reinterpret_cast<uint32_t *>(krow + a.H + d) =
                    att_pack2<T>(dv[nd][2 * x], dv[nd][2 * x + 1]);
            }
        }
    }
}

/* dQ: block (bh, query tile blockIdx.y) of 64 queries, warp w owning rows
 * 16w..16w+15 (Q and dO fragments stay in registers); live key tiles of 32:
 * S = Q Kᵀ, dPd = dO Vᵀ, dS elementwise, dQ += dS K. */
template <typename T, int DP>
__global__ void __launch_bounds__(ATT_MMA_THREADS)
    att_bwd_dq_mma(const T *__restrict__ qkv, const int32_t *__restrict__ mask,
                   const T *__restrict__ dout, const float *__restrict__ save,
                   const float *__restrict__ Dws, T *__restrict__ dqkv, att_args a)
{
    constexpr int BR = 64, BC = 32, KC = DP / 16, NT = BC / 8, ND = DP / 8;
    constexpr int RS = DP + 8, RST = BC + 8;
    constexpr int STAGE = 2 * BR * RS;               /* Q, dO tiles (prologue) */
    constexpr int LOOP = 2 * BC * RS + DP * RST;     /* K, V, Kᵀ (loop) */
    __shared__ uint4 smem[((STAGE > LOOP ? STAGE : LOOP) * sizeof(T) + 15) / 16];
    __shared__ float bias_s[BC];
    __shared__ int scratch[32];
    T *Qs = reinterpret_cast<T *>(smem), *dOs = Qs + BR * RS; /* [BR][RS] each */
    T *Ks = reinterpret_cast<T *>(smem), *Vs = Ks + BC * RS;  /* [BC][RS] each */
    T *Kt = Vs + BC * RS;                                     /* [DP][RST] */
    const int bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads;
    const int q0 = blockIdx.y * BR, S = att_len(a, b), D = a.head_dim;
    const int64_t row0 = att_row0(a, b);
    if (q0 >= S) return; /* a query tile past a packed sequence's end */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const T *head = qkv + row0 * a.ld3 + (int64_t)h * D;
    const T *dohead = dout + row0 * a.H + (int64_t)h * D;
    T *dhead = dqkv + row0 * a.ld3 + (int64_t)h * D;
    const int L = att_live_keys(mask, a, b, scratch);
    att_load_tile<T, DP>(head, a.ld3, q0, BR, S, D, Qs, RS, (T *)nullptr, 0);
    att_load_tile<T, DP>(dohead, a.H, q0, BR, S, D, dOs, RS, (T *)nullptr, 0);
    __syncthreads();
    uint32_t qf[KC][4], df[KC][4];
#pragma unroll
    for (int kc = 0; kc < KC; kc++) {
        att_ld_a(Qs, RS, w * 16, kc * 16, qf[kc]);
        att_ld_a(dOs, RS, w * 16, kc * 16, df[kc]);
    }
    const int row_g = q0 + w * 16 + g; /* query of c0, c1; row_g + 8 for c2, c3 */
    float mr[2], rir[2], Dr[2];
#pragma unroll
    for (int x = 0; x < 2; x++) {
        int i = row_g + 8 * x;
        mr[x] = i < S ? save[2 * ((int64_t)bh * a.seq + i)] : 0.0f;
        rir[x] = i < S ? 1.0f / save[2 * ((int64_t)bh * a.seq + i) + 1] : 0.0f;
        Dr[x] = i < S ? Dws[(int64_t)bh * a.seq + i] : 0.0f;
    }
    float dq[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) dq[nd][0] = dq[nd][1] = dq[nd][2] = dq[nd][3] = 0.0f;
    const int ntiles = (L + BC - 1) / BC;
    for (int kt = 0; kt < ntiles; kt++) {
        const int k0 = kt * BC;
        __syncthreads(); /* Q/dO staging or the previous tile is no longer read */
        att_load_tile<T, DP>(head + a.H, a.ld3, k0, BC, S, D, Ks, RS, Kt, RST);
        att_load_tile<T, DP>(head + 2 * a.H, a.ld3, k0, BC, S, D, Vs, RS, (T *)nullptr, 0);
        if (threadIdx.x < BC) {
            int key = k0 + threadIdx.x;
            bias_s[threadIdx.x] = key < S ? att_key_bias(mask, a, b, key) : -INFINITY;
        }
        __syncthreads();
        float sc[NT][4], dp[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) sc[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t bf[2];
                att_ld_b(Ks, RS, nt * 8, kc * 16, bf);
                att_mma<T>(sc[nt], qf[kc], bf);
                att_ld_b(Vs, RS, nt * 8, kc * 16, bf);
                att_mma<T>(dp[nt], df[kc], bf);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const uint32_t kb = a.drop ? att_keep_pairs(a, bh, row_g, k0 + nt * 8 + 2 * t) : 0u;
#pragma unroll
            for (int x = 0; x < 2; x++) {
                const int c = nt * 8 + 2 * t; /* keys c, c+1 of the tile */
#pragma unroll
                for (int y = 0; y < 2; y++) {
                    const int e = 2 * x + y;
                    const float s = sc[nt][e] * a.scale + bias_s[c + y];
                    const float P = expf(s - mr[x]) * rir[x]; /* 0 for keys past S */
                    const float kp = a.drop ? ((kb >> e) & 1u ? a.drop_scale : 0.0f) : 1.0f;
                    sc[nt][e] = P * (dp[nt][e] * kp - Dr[x]); /* dS */
                }
            }
        }
#pragma unroll
        for (int kc = 0; kc < BC / 16; kc++) {
            uint32_t sf[4];
            att_c_to_a<T>(sc[2 * kc], sc[2 * kc + 1], sf);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t bf[2];
                att_ld_b(Kt, RST, nd * 8, kc * 16, bf);
                att_mma<T>(dq[nd], sf, bf);
            }
        }
    }
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int i = row_g + 8 * x;
        if (i >= S) continue;
        T *qrow = dhead + (int64_t)i * a.ld3; /* dQ row */
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            int d = nd * 8 + 2 * t;
            if (d < D)
                *reinterpret_cast<uint32_t *>(qrow + d) =
                    att_pack2<T>(dq[nd][2 * x] * a.scale, dq[nd][2 * x + 1] * a.scale);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* host side                                                                 */
/* ------------------------------------------------------------------------ */

/* The smallest query/key tile of any kernel: bounds gridDim.y. */
#define ATT_MIN_TILE 8

static bool att_count(const tf_attention_desc *d, size_t per, size_t *out)
{
    size_t n = (size_t)d->batch;
    return !__builtin_mul_overflow(n, (size_t)d->heads, &n) &&
           !__builtin_mul_overflow(n, (size_t)d->seq, &n) &&
           !__builtin_mul_overflow(n, per, &n) && (*out = n, true);
}

extern "C" bool tfc_attention_supported(tf_dtype dt, int head_dim)
{
    return (dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16) && head_dim >= 1 &&
           head_dim <= 128;
}

static bool att_desc_ok(const tf_attention_desc *d)
{
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return false;
    if (!tfc_attention_supported(d->dtype, d->head_dim)) return false;
    if (!isfinite(d->scale) || !(d->dropout >= 0.0f && d->dropout < 1.0f)) return false;
    if ((long long)d->heads * d->head_dim > INT_MAX / 3) return false;
    if ((long long)d->batch * d->heads > INT_MAX) return false;
    if ((d->seq + ATT_MIN_TILE - 1) / ATT_MIN_TILE > 65535) return false;
    if (d->dropout > 0.0f && d->seq > TFC_ATT_DROPOUT_MAX_SEQ) return false;
    size_t n;
    return att_count(d, 2 * sizeof(float), &n);
}

extern "C" size_t tfc_attention_save_bytes(const tf_attention_desc *d)
{
    size_t n;
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return 0;
    if (!att_count(d, 2 * sizeof(float), &n) || n > SIZE_MAX - 255) return SIZE_MAX;
    return (n + 255) / 256 * 256;
}

extern "C" size_t tfc_attention_bwd_workspace_bytes(const tf_attention_desc *d)
{
    size_t n;
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return 0;
    if (!att_count(d, sizeof(float), &n) || n > SIZE_MAX - 255) return SIZE_MAX;
    return (n + 255) / 256 * 256;
}

static att_args att_make_args(const tf_attention_desc *d, uint64_t row_first, uint64_t row_stride,
                              const int32_t *cu, bool drop)
{
    att_args a;
    a.cu = cu;
    a.batch = d->batch;
    a.seq = d->seq;
    a.heads = d->heads;
    a.head_dim = d->head_dim;
    a.H = (int64_t)d->heads * d->head_dim;
    a.ld3 = 3 * a.H;
    a.scale = d->scale;
    a.drop = drop;
    a.drop4 = d->seq % 4 == 0;
    /* as cpu_dropout_mask: (w >> 8) uniform on [0, 2^24), kept when >= ceil(p * 2^24) */
    float th = ceilf(d->dropout * 16777216.0f);
    a.drop_thr = th <= 0.0f ? 0u : th >= 16777216.0f ? 16777216u : (uint32_t)th;
    a.drop_scale = 1.0f / (1.0f - d->dropout);
    a.seed = d->seed;
    a.offset = d->offset;
    a.row_first = row_first;
    a.row_stride = row_stride;
    return a;
}

static bool att_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Padded head dimension of the kernels: 32, 64, 96 or 128. */
static int att_dp(int head_dim) { return (head_dim + 31) / 32 * 32; }

static bool att_use_mma(tf_dtype dt, int head_dim)
{
    return (dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16) && head_dim % 8 == 0 && head_dim <= 64;
}

template <typename T, int DP>
static cudaError_t att_fwd_simt_launch(cudaStream_t s, const att_args &a, const T *qkv,
                                       const int32_t *mask, T *out, float *save)
{
    dim3 grid((unsigned)(a.batch * a.heads),
              (unsigned)((a.seq + 8 * ATT_SIMT_RPW(DP) - 1) / (8 * ATT_SIMT_RPW(DP))));
    TFCB_LAUNCH((att_fwd_simt<T, DP>), grid, ATT_SIMT_THREADS, 0, s)(qkv, mask, out, save, a);
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

template <typename T, int DP>
static cudaError_t att_fwd_mma_launch(cudaStream_t s, const att_args &a, const T *qkv,
                                      const int32_t *mask, T *out, float *save)
{
    dim3 grid((unsigned)(a.batch * a.heads), (unsigned)((a.seq + 63) / 64));
    TFCB_LAUNCH((att_fwd_mma<T, DP>), grid, ATT_MMA_THREADS, 0, s)(qkv, mask, out, save, a);
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

template <typename T>
static cudaError_t att_fwd_t(cudaStream_t s, const tf_attention_desc *d, const att_args &a,
                             const void *qkv, const int32_t *mask, void *out, float *save)
{
    const T *q = (const T *)qkv;
    T *o = (T *)out;
    if (att_use_mma(d->dtype, d->head_dim) && att_aligned16(qkv) && att_aligned16(out)) {
        if constexpr (sizeof(T) == 2) {
            if (d->head_dim <= 32) return att_fwd_mma_launch<T, 32>(s, a, q, mask, o, save);
            return att_fwd_mma_launch<T, 64>(s, a, q, mask, o, save);
        }
    }
    switch (att_dp(d->head_dim)) {
    case 32: return att_fwd_simt_launch<T, 32>(s, a, q, mask, o, save);
    case 64: return att_fwd_simt_launch<T, 64>(s, a, q, mask, o, save);
    case 96: return att_fwd_simt_launch<T, 96>(s, a, q, mask, o, save);
    default: return att_fwd_simt_launch<T, 128>(s, a, q, mask, o, save);
    }
}

extern "C" cudaError_t tfc_attention_fwd(cudaStream_t s, const tf_attention_desc *d,
                                         uint64_t row_first, uint64_t row_stride,
                                         const int32_t *cu, const void *qkv,
                                         const int32_t *mask, void *out, void *save, bool train)
{
    if (!att_desc_ok(d) || !qkv || !out || (train && !save)) return cudaErrorInvalidValue;
    att_args a = att_make_args(d, row_first, row_stride, cu, train && d->dropout > 0.0f);
    float *sv = (float *)save;
    switch (d->dtype) {
    case TF_DTYPE_F32: return att_fwd_t<float>(s, d, a, qkv, mask, out, sv);
    case TF_DTYPE_F16: return att_fwd_t<__half>(s, d, a, qkv, mask, out, sv);
    default: return att_fwd_t<__nv_bfloat16>(s, d, a, qkv, mask, out, sv);
    }
}

template <typename T, int DP>
static cudaError_t att_bwd_simt_launch(cudaStream_t s, const att_args &a, const T *qkv,
                                       const int32_t *mask, const T *dout, const float *save,
                                       const float *Dws, T *dqkv)
{
    constexpr int TILE = 8 * ATT_SIMT_RPW(DP);
    dim3 grid((unsigned)(a.batch * a.heads), (unsigned)((a.seq + TILE - 1) / TILE));
    TFCB_LAUNCH((att_bwd_dkdv_simt<T, DP>), grid, ATT_SIMT_THREADS, 0, s)
    (qkv, mask, dout, save, Dws, dqkv, a);
    TFCB_CHECK_LAUNCH();
    TFCB_LAUNCH((att_bwd_dq_simt<T, DP>), grid, ATT_SIMT_THREADS, 0, s)
    (qkv, mask, dout, save, Dws, dqkv, a);
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

template <typename T, int DP>
static cudaError_t att_bwd_mma_launch(cudaStream_t s, const att_args &a, const T *qkv,
                                      const int32_t *mask, const T *dout, const float *save,
                                      const float *Dws, T *dqkv)
{
    dim3 grid((unsigned)(a.batch * a.heads), (unsigned)((a.seq + 63) / 64));
    TFCB_LAUNCH((att_bwd_dkdv_mma<T, DP>), grid, ATT_MMA_THREADS, 0, s)
    (qkv, mask, dout, save, Dws, dqkv, a);
    TFCB_CHECK_LAUNCH();
    TFCB_LAUNCH((att_bwd_dq_mma<T, DP>), grid, ATT_MMA_THREADS, 0, s)
    (qkv, mask, dout, save, Dws, dqkv, a);
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

template <typename T>
static cudaError_t att_bwd_t(cudaStream_t s, const tf_attention_desc *d, const att_args &a,
                             const void *qkv, const int32_t *mask, const void *out,
                             const float *save, const void *dout, void *dqkv, float *Dws)
{
    const T *q = (const T *)qkv, *go = (const T *)dout;
    T *dq = (T *)dqkv;
    long long rows = (long long)a.batch * a.seq * a.heads;
    long long blocks = (rows + 7) / 8;
    if (blocks > INT_MAX) return cudaErrorInvalidValue;
    TFCB_LAUNCH(att_bwd_dot<T>, (unsigned)blocks, 256, 0, s)((const T *)out, go, Dws, a);
    TFCB_CHECK_LAUNCH();
    if (att_use_mma(d->dtype, d->head_dim) && att_aligned16(qkv) && att_aligned16(dout) &&
        att_aligned16(dqkv)) {
        if constexpr (sizeof(T) == 2) {
            if (d->head_dim <= 32) return att_bwd_mma_launch<T, 32>(s, a, q, mask, go, save, Dws, dq);
            return att_bwd_mma_launch<T, 64>(s, a, q, mask, go, save, Dws, dq);
        }
    }
    switch (att_dp(d->head_dim)) {
    case 32: return att_bwd_simt_launch<T, 32>(s, a, q, mask, go, save, Dws, dq);
    case 64: return att_bwd_simt_launch<T, 64>(s, a, q, mask, go, save, Dws, dq);
    case 96: return att_bwd_simt_launch<T, 96>(s, a, q, mask, go, save, Dws, dq);
    default: return att_bwd_simt_launch<T, 128>(s, a, q, mask, go, save, Dws, dq);
    }
}

extern "C" cudaError_t tfc_attention_bwd(cudaStream_t s, const tf_attention_desc *d,
                                         uint64_t row_first, uint64_t row_stride,
                                         const int32_t *cu, const void *qkv,
                                         const int32_t *mask, const void *out, const void *save,
                                         const void *dout, void *dqkv, void *workspace)
{
    if (!att_desc_ok(d) || !qkv || !out || !save || !dout || !dqkv || !workspace ||
        ((uintptr_t)workspace & 3u) != 0 || ((uintptr_t)save & 7u) != 0)
        return cudaErrorInvalidValue;
    att_args a = att_make_args(d, row_first, row_stride, cu, d->dropout > 0.0f);
    const float *sv = (const float *)save;
    float *Dws = (float *)workspace; /* [B, heads, S] */
    switch (d->dtype) {
    case TF_DTYPE_F32: return att_bwd_t<float>(s, d, a, qkv, mask, out, sv, dout, dqkv, Dws);
    case TF_DTYPE_F16: return att_bwd_t<__half>(s, d, a, qkv, mask, out, sv, dout, dqkv, Dws);
    default: return att_bwd_t<__nv_bfloat16>(s, d, a, qkv, mask, out, sv, dout, dqkv, Dws);
    }
}
