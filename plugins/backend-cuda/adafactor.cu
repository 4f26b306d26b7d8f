// adafactor.cu — backend-cuda Adafactor (the adafactor slot,
// tf_adafactor_desc in tfcore/backend.h), one tensor at a time, with
// backend-cpu's adafactor.c arithmetic: each float op through an _rn
// intrinsic (no FMA contraction), the scalars rounded on the host as
// backend-cpu rounds them, and every mean or norm summed in double and
// rounded once. The sums are cut into pieces fixed by the shape alone and
// combined in a fixed order (no atomics), so a step gives the same bits on
// every run; their order differs from backend-cpu's sequential sums, so the
// two backends agree to an ulp of those sums, not bit for bit.
//
// Per tensor (and per batch index b of a [batch, rows, cols] tensor):
//   factored: rows_kernel (a block per row: row means of g² + eps into the
//             row moments), cols_kernel (a thread per column: column means),
//             rowmean_kernel (the mean of the row moments, into ws[0])
//   else:     plain_kernel (v = v·beta2t + (1-beta2t)·(g² + eps))
//   sumsq_kernel + sumsq_finish_kernel: Σ upd² into ws[1] (partials at ws[2..])
//   apply_kernel: p += -(wd·lr)·p; p -= (upd / div)·lr,
//                 div = max((sqrt(ss) / sqrt(n)) / clip, 1)
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend_cuda.h"

namespace {

#define AF_THREADS 256

__device__ __forceinline__ float sq_eps(float g, const tfc_adafactor_scalars &k)
{
    float gi = __fmul_rn(g, k.grad_scale);
    return __fadd_rn(__fmul_rn(gi, gi), k.eps);
}

__device__ __forceinline__ float moment(float old, double mean, const tfc_adafactor_scalars &k)
{
    return __fadd_rn(__fmul_rn(old, k.beta2t), __fmul_rn(k.one_minus_beta2t, __double2float_rn(mean)));
}

// The update of one element before clipping (backend-cpu's update_factored / update_plain).
__device__ __forceinline__ float update_factored(float row, float rmean, float col, float gi)
{
    float rf = __fdiv_rn(1.0f, __fsqrt_rn(__fdiv_rn(row, rmean)));
    return __fmul_rn(__fmul_rn(rf, __fdiv_rn(1.0f, __fsqrt_rn(col))), gi);
}
__device__ __forceinline__ float update_plain(float v, float gi) { return __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(v)), gi); }

// Sum of a double per thread over the block, in a fixed tree order; thread 0 gets it.
__device__ double block_sum(double x)
{
    __shared__ double sh[AF_THREADS];
    sh[threadIdx.x] = x;
    __syncthreads();
    for (int w = AF_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

__global__ void rows_kernel(const float *g, float *row, int64_t cols, tfc_adafactor_scalars k)
{
    const float *gr = g + (size_t)blockIdx.x * (size_t)cols;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += AF_THREADS) s += (double)sq_eps(gr[c], k);
    s = block_sum(s);
    if (threadIdx.x == 0) row[blockIdx.x] = moment(row[blockIdx.x], s / (double)cols, k);
}

__global__ void cols_kernel(const float *g, float *col, int64_t rows, int64_t cols, tfc_adafactor_scalars k)
{
    int64_t c = (int64_t)blockIdx.x * AF_THREADS + threadIdx.x;
    if (c >= cols) return;
    double s = 0.0;
    for (int64_t r = 0; r < rows; r++) s += (double)sq_eps(g[(size_t)r * (size_t)cols + (size_t)c], k);
    col[c] = moment(col[c], s / (double)rows, k);
}

__global__ void rowmean_kernel(const float *row, int64_t rows, double *ws)
{
    double s = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += AF_THREADS) s += (double)row[r];
    s = block_sum(s);
    if (threadIdx.x == 0) ws[0] = (double)__double2float_rn(s / (double)rows);
}

__global__ void plain_kernel(const float *g, float *v, size_t n, tfc_adafactor_scalars k)
{
    size_t i = (size_t)blockIdx.x * AF_THREADS + threadIdx.x;
    if (i >= n) return;
    v[i] = __fadd_rn(__fmul_rn(v[i], k.beta2t), __fmul_rn(k.one_minus_beta2t, sq_eps(g[i], k)));
}

// Pieces of Σ upd² over [0, n): block b sums elements b, b + parts·AF_THREADS, ... by thread.
__global__ void sumsq_kernel(const float *g, const float *row, const float *col, const float *v, int64_t cols,
                             size_t n, const double *ws, double *partial, tfc_adafactor_scalars k)
{
    float rmean = row ? (float)ws[0] : 0.0f;
    double s = 0.0;
    size_t stride = (size_t)gridDim.x * AF_THREADS;
    for (size_t i = (size_t)blockIdx.x * AF_THREADS + threadIdx.x; i < n; i += stride) {
        float gi = __fmul_rn(g[i], k.grad_scale);
        float u = row ? update_factored(row[i / (size_t)cols], rmean, col[i % (size_t)cols], gi) : update_plain(v[i], gi);
        s += (double)u * (double)u;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumsq_finish_kernel(double *ws, int parts)
{
    double s = ws[1];
    for (int p = 0; p < parts; p++) s += ws[2 + p];
    ws[1] = s;
}

__global__ void apply_kernel(float *p, const float *g, const float *row, const float *col, const float *v,
                             int64_t cols, size_t n, const double *ws, double numel, float neg_lr_wd,
                             tfc_adafactor_scalars k)
{
    size_t i = (size_t)blockIdx.x * AF_THREADS + threadIdx.x;
    if (i >= n) return;
    float div = __fdiv_rn(__fdiv_rn(__double2float_rn(sqrt(ws[1])), __double2float_rn(sqrt(numel))), k.clip);
    if (div < 1.0f) div = 1.0f; // a NaN stays NaN, as torch's clamp keeps it
    float gi = __fmul_rn(g[i], k.grad_scale);
    float u = row ? update_factored(row[i / (size_t)cols], (float)ws[0], col[i % (size_t)cols], gi)
                  : update_plain(v[i], gi);
    u = __fmul_rn(__fdiv_rn(u, div), k.lr);
    float pi = p[i];
    if (neg_lr_wd != 0.0f) pi = __fadd_rn(pi, __fmul_rn(neg_lr_wd, pi));
    p[i] = __fsub_rn(pi, u);
}

unsigned blocks_for(size_t n) { return (unsigned)((n + AF_THREADS - 1) / AF_THREADS); }

// pieces of a sum over n elements: one per 64 K elements, at most TFC_ADAFACTOR_PARTS
int sumsq_parts(size_t n)
{
    size_t p = (n + 65535) / 65536;
    return p < 1 ? 1 : p > TFC_ADAFACTOR_PARTS ? TFC_ADAFACTOR_PARTS : (int)p;
}

#define AF_CHECK()                                   \
    do {                                             \
        cudaError_t e_ = cudaGetLastError();         \
        if (e_ != cudaSuccess) return e_;            \
    } while (0)

} // namespace

extern "C" cudaError_t tfc_adafactor_tensor(cudaStream_t s, float *params, const float *grads, float *state,
                                            const tf_adafactor_tensor *t, const tfc_adafactor_scalars *k,
                                            double *ws)
{
    size_t B = (size_t)t->batch, R = (size_t)t->rows, C = (size_t)t->cols, block = R * C;
    if (R > 0x7fffffffu || (C + AF_THREADS - 1) / AF_THREADS > 0x7fffffffu ||
        (block + AF_THREADS - 1) / AF_THREADS > 0x7fffffffu)
        return cudaErrorInvalidValue; /* gridDim.x limit */
    float *p = params + t->offset, *st = state + t->state_offset;
    const float *g = grads + t->offset;
    float *rows = t->factored ? st : NULL, *cols = t->factored ? st + B * R : NULL;
    int parts = sumsq_parts(block);
    cudaError_t e = cudaMemsetAsync(ws + 1, 0, sizeof(double), s);
    if (e != cudaSuccess) return e;
    // moments, and Σ upd² over the whole tensor (batch by batch, in order)
    for (size_t b = 0; b < B; b++) {
        const float *gb = g + b * block;
        float *row = rows ? rows + b * R : NULL, *col = cols ? cols + b * C : NULL, *v = rows ? NULL : st + b * block;
        if (row) {
            TFCB_LAUNCH(rows_kernel, (unsigned)R, AF_THREADS, 0, s)(gb, row, t->cols, *k);
            AF_CHECK();
            TFCB_LAUNCH(cols_kernel, blocks_for(C), AF_THREADS, 0, s)(gb, col, t->rows, t->cols, *k);
            AF_CHECK();
            TFCB_LAUNCH(rowmean_kernel, 1, AF_THREADS, 0, s)(row, t->rows, ws);
            AF_CHECK();
        } else {
            TFCB_LAUNCH(plain_kernel, blocks_for(block), AF_THREADS, 0, s)(gb, v, block, *k);
            AF_CHECK();
        }
        TFCB_LAUNCH(sumsq_kernel, (unsigned)parts, AF_THREADS, 0, s)(gb, row, col, v, t->cols, block, ws, ws + 2, *k);
        AF_CHECK();
        TFCB_LAUNCH(sumsq_finish_kernel, 1, 1, 0, s)(ws, parts);
        AF_CHECK();
    }
    // the clipped update
    float neg_lr_wd = t->weight_decay != 0.0f ? (float)(-((double)t->weight_decay * k->lr_d)) : 0.0f;
    for (size_t b = 0; b < B; b++) {
        const float *gb = g + b * block;
        float *row = rows ? rows + b * R : NULL, *col = cols ? cols + b * C : NULL, *v = rows ? NULL : st + b * block;
        if (row) {
            TFCB_LAUNCH(rowmean_kernel, 1, AF_THREADS, 0, s)(row, t->rows, ws);
            AF_CHECK();
        }
        TFCB_LAUNCH(apply_kernel, blocks_for(block), AF_THREADS, 0, s)
            (p + b * block, gb, row, col, v, t->cols, block, ws, (double)B * (double)block, neg_lr_wd, *k);
        AF_CHECK();
    }
    return cudaSuccess;
}
