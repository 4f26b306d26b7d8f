// optimizer.cu — backend-cuda AdamW: one fused kernel over every segment of
// the flat f32 buffers, one thread block per chunk of the work list (at most
// TFC_ADAMW_CHUNK elements of one segment; the list is built on the host by
// backend.c, once per set of segments).
//
// The arithmetic is torch.optim.AdamW's (torch 1.13 _single_tensor_adamw)
// as backend-cpu's optimizer.c writes it, in the same order:
//   g  = grad * grad_scale
//   p *= 1 - lr * wd
//   m  = m * beta1 + (1 - beta1) * g
//   v  = v * beta2 + ((1 - beta2) * g) * g
//   p  = p + (-(lr / (1 - beta1^step)) * m) / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// Each product and sum goes through an _rn intrinsic, so nvcc cannot fuse a
// multiply and an add into one FMA (backend-cpu, C17 without contraction,
// rounds them separately): the results carry backend-cpu's bits. The decay
// 1 - lr * wd is formed in double and rounded once, as backend-cpu does.
// k.hf selects transformers' AdamW (adamw_ex with TF_ADAMW_HF), as backend-cpu:
//   denom = sqrt(v) + eps;  p = p + neg_step * (m / denom);  p = p + (-(lr * wd)) * p
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend_cuda.h"

namespace {

#define ADAMW_THREADS 256

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v,
                             const tfc_adamw_chunk *chunks, const float *weight_decay,
                             tfc_adamw_scalars k)
{
    const tfc_adamw_chunk c = chunks[blockIdx.x];
    const float wd = weight_decay[c.segment];
    const float decay = __double2float_rn(__dsub_rn(1.0, __dmul_rn((double)k.lr, (double)wd)));
    const float neg_lr_wd = wd > 0.0f ? __double2float_rn(-__dmul_rn((double)k.lr, (double)wd)) : 0.0f;
    for (uint32_t i = threadIdx.x; i < c.count; i += ADAMW_THREADS) {
        size_t o = (size_t)c.offset + i;
        float gi = __fmul_rn(grads[o], k.grad_scale);
        if (k.hf) {
            float mh = __fadd_rn(__fmul_rn(m[o], k.beta1), __fmul_rn(k.one_minus_beta1, gi));
            float vh = __fadd_rn(__fmul_rn(v[o], k.beta2),
                                 __fmul_rn(__fmul_rn(k.one_minus_beta2, gi), gi));
            float ph = __fadd_rn(params[o], __fmul_rn(k.neg_step, __fdiv_rn(mh, __fadd_rn(__fsqrt_rn(vh), k.eps))));
            if (neg_lr_wd != 0.0f) ph = __fadd_rn(ph, __fmul_rn(neg_lr_wd, ph));
            params[o] = ph;
            m[o] = mh;
            v[o] = vh;
            continue;
        }
        float pi = __fmul_rn(params[o], decay);
        float mi = __fadd_rn(__fmul_rn(m[o], k.beta1), __fmul_rn(k.one_minus_beta1, gi));
        float vi = __fadd_rn(__fmul_rn(v[o], k.beta2),
                             __fmul_rn(__fmul_rn(k.one_minus_beta2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        params[o] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        m[o] = mi;
        v[o] = vi;
    }
}

} // namespace

extern "C" cudaError_t tfc_adamw(cudaStream_t s, float *params, const float *grads, float *m,
                                 float *v, const tfc_adamw_chunk *chunks, size_t nchunks,
                                 const float *weight_decay, const tfc_adamw_scalars *k)
{
    if (nchunks == 0) return cudaSuccess;
    if (nchunks > 0x7fffffffu) return cudaErrorInvalidValue; /* gridDim.x limit */
    TFCB_LAUNCH(adamw_kernel, (unsigned)nchunks, ADAMW_THREADS, 0, s)
        (params, grads, m, v, chunks, weight_decay, *k);
    return cudaGetLastError();
}
