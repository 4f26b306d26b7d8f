/* fused_kernels.h — backend-cuda's fused kernels: residual + layernorm,
 * flash-style multi-head attention, softmax cross-entropy.
 *
 * These are the entry points the vtable glue (fused_ops.c) calls (C linkage). Each
 * enqueues its kernels on stream `s`, checks every launch, and returns the
 * first CUDA error (cudaErrorInvalidValue for a shape or argument it does not
 * accept); the glue turns that into a tf_error naming the op and the shape.
 * Nothing here allocates: scratch space is the `workspace` the caller passes,
 * at least *_workspace_bytes() large (device memory, 256-byte aligned), or the
 * attention `save` buffer, tfc_attention_save_bytes() large.
 *
 * Semantics are those of core/include/tfcore/backend.h, op by op as
 * plugins/backend-cpu computes them (see each .cu file's header comment for
 * what differs in rounding). Every op gives the same bits for the same inputs:
 * no float atomics; every reduction runs in an order fixed by the shapes.
 *
 * Activation dtypes: TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16; statistics,
 * gamma/beta, their gradients and losses are f32.
 *
 * The part after the C declarations (C++ only) holds the device helpers the
 * three .cu files share; C code sees only the declarations. */
#ifndef TF_BACKEND_CUDA_FUSED_KERNELS_H
#define TF_BACKEND_CUDA_FUSED_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "tfcore/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- layernorm (layernorm.cu) ---------------------------------------------
 * in = x + residual (residual may be NULL; then in = x), rounded to dt;
 * y = (in - mean) * rstd * gamma + beta.
 * x, residual, in_out, y: [rows, cols] dt; gamma, beta: [cols] f32;
 * mean, rstd: [rows] f32 (biased variance); in_out receives `in` (required
 * when residual is set, may be NULL otherwise). y may alias x; in_out may
 * alias x or residual. rows >= 0, cols >= 1. */
cudaError_t tfc_layernorm_fwd(cudaStream_t s, const void *x, const void *residual, void *in_out,
                              void *y, const float *gamma, const float *beta, float *mean,
                              float *rstd, int rows, int cols, float eps, tf_dtype dt);
/* Bytes of workspace tfc_layernorm_bwd needs (0 for rows == 0). */
size_t tfc_layernorm_bwd_workspace_bytes(int rows, int cols);
/* dx (+)= d loss / d in; dgamma, dbeta [cols] f32 are always accumulated
 * into. dy, in, dx: [rows, cols] dt; dx may alias dy or in. */
cudaError_t tfc_layernorm_bwd(cudaStream_t s, const void *dy, const void *in, const float *gamma,
                              const float *mean, const float *rstd, void *dx, bool dx_accumulate,
                              float *dgamma, float *dbeta, int rows, int cols, tf_dtype dt,
                              void *workspace);

/* --- attention (attention.cu) ---------------------------------------------
 * qkv [B, S, 3, heads, head_dim] dt, mask [B, S] int32 (NULL = attend
 * everywhere), out [B, S, heads, head_dim] dt. save holds, per (b, head,
 * query row), the row's softmax max and sum (2 f32). out is read by the
 * backward (D = rowsum(dout * out)), so it must still hold the forward's
 * result. dqkv [B, S, 3, heads, head_dim] is overwritten. */
size_t tfc_attention_save_bytes(const tf_attention_desc *d);
/* Sequence b's dropout mask is global row row_first + b * row_stride
 * (tfcore/backend.h "Dropout masks"; seq <= TFC_ATT_DROPOUT_MAX_SEQ with
 * dropout); the backward recomputes the bits and must get the same rows. */
#define TFC_ATT_DROPOUT_MAX_SEQ 65536
/* cu: NULL (the padded layout), or [B + 1] device int32 cu_seqlens: the
 * sequences packed (tf_attention_varlen_desc; mask NULL, d->seq the longest
 * length allowed, lengths clamped to [0, seq]). */
cudaError_t tfc_attention_fwd(cudaStream_t s, const tf_attention_desc *d, uint64_t row_first,
                              uint64_t row_stride, const int32_t *cu, const void *qkv,
                              const int32_t *mask, void *out, void *save, bool train);
size_t tfc_attention_bwd_workspace_bytes(const tf_attention_desc *d);
cudaError_t tfc_attention_bwd(cudaStream_t s, const tf_attention_desc *d, uint64_t row_first,
                              uint64_t row_stride, const int32_t *cu, const void *qkv,
                              const int32_t *mask, const void *out, const void *save,
                              const void *dout, void *dqkv, void *workspace);
/* Which (dtype, head_dim) these kernels handle: f32, f16, bf16 with
 * 1 <= head_dim <= 128, in every matmul mode (f32 is computed with fp32 FMAs
 * in both TF_MATMUL_FP32 and TF_MATMUL_TF32; f16/bf16 on tensor cores with
 * f32 accumulation when head_dim is a multiple of 8 and at most 64). */
bool tfc_attention_supported(tf_dtype dt, int head_dim);

/* --- cross-entropy (cross_entropy.cu) -------------------------------------
 * logits [rows, classes] dt (row stride ld_logits >= classes), labels [rows]
 * int32; rows whose label == ignore_index do not count; *loss (f32, device) =
 * mean nll over counted rows (0 when none); dlogits (NULL: skipped) = same
 * layout, grad_scale * d(mean)/d logits, 0 on ignored rows; may alias logits.
 * A label outside [0, classes) that is not ignore_index cannot be reported
 * without a device sync: it makes *loss and that row of dlogits NaN.
 * label_smoothing ε in [0, 1] (0: the plain loss above, same bits) makes the
 * loss transformers' LabelSmoother's (tfcore/backend.h, tf_cross_entropy_desc). */
cudaError_t tfc_cross_entropy(cudaStream_t s, const void *logits, int64_t ld_logits, tf_dtype dt,
                              int rows, int classes, const int32_t *labels, int ignore_index,
                              float label_smoothing, float *loss, void *dlogits,
                              float grad_scale, void *workspace);
size_t tfc_cross_entropy_workspace_bytes(int rows, int classes);

#ifdef __cplusplus
} /* extern "C" */

/* ========================================================================
 * Device helpers shared by layernorm.cu, attention.cu and cross_entropy.cu.
 * ======================================================================== */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* TFCB_LAUNCH: in backend_cuda.h, shared by every .cu file. */
#include "backend_cuda.h"

/* Return the launch error of the kernel just enqueued, if any. */
#define TFCB_CHECK_LAUNCH()                                                                   \
    do {                                                                                      \
        cudaError_t e_ = cudaGetLastError();                                                  \
        if (e_ != cudaSuccess) return e_;                                                     \
    } while (0)

/* Element conversions: every dtype is computed in f32. */
template <typename T> __device__ __forceinline__ float tfcb_to_f32(T v);
template <> __device__ __forceinline__ float tfcb_to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float tfcb_to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float tfcb_to_f32<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T tfcb_from_f32(float v);
template <> __device__ __forceinline__ float tfcb_from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half tfcb_from_f32<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 tfcb_from_f32<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}
/* v rounded to T and back. */
template <typename T> __device__ __forceinline__ float tfcb_round(float v)
{
    return tfcb_to_f32<T>(tfcb_from_f32<T>(v));
}

/* VEC consecutive elements moved as one access (16 bytes when VEC * sizeof(T)
 * is 16 and the address is 16-byte aligned). */
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) tfcb_pack {
    T v[VEC];
};

/* Sum / max over a warp; every lane gets the result. The shuffle tree is
 * fixed, so the result's bits do not depend on timing. */
template <typename V> __device__ __forceinline__ V tfcb_warp_sum(V v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float tfcb_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to
 * every thread: warps reduce, then warp 0 reduces the warps' sums in warp
 * order. `scratch` holds 32 V; it may be reused after the call returns. */
template <typename V> __device__ __forceinline__ V tfcb_block_sum(V v, V *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = tfcb_warp_sum(v);
    __syncthreads(); /* scratch may still be read by a previous call */
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    V t = lane < nwarps ? scratch[lane] : V(0);
    return tfcb_warp_sum(t);
}
__device__ __forceinline__ float tfcb_block_max(float v, float *scratch)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = tfcb_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nwarps ? scratch[lane] : -INFINITY;
    return tfcb_warp_max(t);
}

#endif /* __cplusplus */
#endif
