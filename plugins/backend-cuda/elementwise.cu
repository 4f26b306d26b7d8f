// elementwise.cu — backend-cuda elementwise kernels: GELU (erf and tanh
// forms) and tanh, forward and backward; dropout (Philox masks identical to
// backend-cpu's); add, scale, cast; and the GEMM's GELU / k = 0 epilogues.
//
// The math is plugins/backend-cpu/cpu_math.h operation for operation. nvcc
// would contract a*b + c into one fused multiply-add (one rounding, where
// backend-cpu — C17, contraction off — rounds twice), so every product and
// sum here goes through the _rn intrinsics, which are never contracted:
// f32 results carry backend-cpu's bits, and f16/bf16 results are those bits
// rounded once more. Division and sqrt are IEEE (nvcc's defaults, no
// --use_fast_math).
//
// Aliasing: y may alias x, dx may alias dy (each element is read before
// it is written, by the same thread).
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend_cuda.h"

namespace {

__device__ __forceinline__ float fm(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fa(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fs(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float fd(float a, float b) { return __fdiv_rn(a, b); }

// e^x: cpu_expf.
__device__ __forceinline__ float d_expf(float x)
{
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    float t = fm(x, 1.44269504088896341f);
    float n = fs(fa(t, 12582912.0f), 12582912.0f);
    float r = fs(x, fm(n, 0.693359375f));
    r = fa(r, fm(n, 2.12194440e-4f));
    float p = 1.0f / 5040.0f;
    p = fa(fm(p, r), 1.0f / 720.0f);
    p = fa(fm(p, r), 1.0f / 120.0f);
    p = fa(fm(p, r), 1.0f / 24.0f);
    p = fa(fm(p, r), 1.0f / 6.0f);
    p = fa(fm(p, r), 0.5f);
    p = fa(fm(p, r), 1.0f);
    p = fa(fm(p, r), 1.0f);
    int32_t ni = (int32_t)(n == n ? n : 0.0f);
    int32_t n1 = ni >> 1, n2 = ni - n1;
    float s1 = __int_as_float((int32_t)((uint32_t)(n1 + 127) << 23));
    float s2 = __int_as_float((int32_t)((uint32_t)(n2 + 127) << 23));
    return fm(fm(p, s1), s2);
}

// e^(-x*x/2) with x*x carried in two floats: cpu_exp_neg_half_sq.
__device__ __forceinline__ float d_exp_neg_half_sq(float x)
{
    float ax = x < 0.0f ? -x : x;
    ax = ax > 15.0f ? 15.0f : ax;
    float c = fm(ax, 4097.0f);
    float xh = fs(c, fs(c, ax));
    float xl = fs(ax, xh);
    float hi = fm(ax, ax);
    float lo = fa(fa(fs(fm(xh, xh), hi), fm(fm(2.0f, xh), xl)), fm(xl, xl));
    return fm(d_expf(fm(-0.5f, hi)), fs(1.0f, fm(0.5f, lo)));
}

// tanh: cpu_tanhf.
__device__ __forceinline__ float d_tanhf(float x)
{
    float ax = x < 0.0f ? -x : x;
    float u = fm(x, x);
    float p = -5.697522352e-03f;
    p = fa(fm(p, u), 2.063030701e-02f);
    p = fs(fm(p, u), 5.373586514e-02f);
    p = fa(fm(p, u), 1.333136559e-01f);
    p = fs(fm(p, u), 3.333327535e-01f);
    p = fa(fm(p, u), 1.0f);
    float small = fm(x, p);
    float e = d_expf(fm(2.0f, ax > 44.0f ? 44.0f : ax));
    float big = fs(1.0f, fd(2.0f, fa(e, 1.0f)));
    big = x < 0.0f ? -big : big;
    return ax < 0.625f ? small : (x != x ? x : big);
}

// Phi(x) given e = e^(-x^2/2): cpu_normal_cdf_e.
__device__ __forceinline__ float d_normal_cdf_e(float x, float e)
{
    float z = fm(x, 0.70710678118654752f);
    float u = fm(z, z);
    float a = 4.728139993e-03f;
    a = fs(fm(a, u), 2.676265949e-02f);
    a = fa(fm(a, u), 1.128291895e-01f);
    a = fs(fm(a, u), 3.761261450e-01f);
    a = fa(fm(a, u), 1.128379166e+00f);
    float central = fa(0.5f, fm(0.5f, fm(z, a)));
    float ax = x < 0.0f ? -x : x;
    float xc = ax > 14.849242f ? 14.849242f : ax;
    xc = xc < 0.70710678f ? 0.70710678f : xc;
    float t = fd(1.0f, fa(1.0f, fm(0.5f, fm(xc, 0.70710678118654752f))));
    float b = -9.532275518e-03f;
    b = fs(fm(b, t), 3.077193641e-02f);
    b = fa(fm(b, t), 2.636250024e-01f);
    b = fs(fm(b, t), 5.095543211e-01f);
    b = fa(fm(b, t), 3.315787067e-01f);
    b = fs(fm(b, t), 7.146127975e-02f);
    b = fa(fm(b, t), 2.233570681e-01f);
    b = fa(fm(b, t), 2.374520204e-01f);
    b = fa(fm(b, t), 2.832798372e-01f);
    b = fa(fm(b, t), 2.820088930e-01f);
    b = fa(fm(b, t), 2.717443305e-06f);
    float half_erfc = fm(0.5f, fm(e, b));
    half_erfc = ax > 14.849242f ? 0.0f : half_erfc;
    float tail = x < 0.0f ? half_erfc : fs(1.0f, half_erfc);
    return ax < 0.70710678f ? central : (x != x ? x : tail);
}

__device__ __forceinline__ float d_gelu_erf(float x)
{
    return fm(x, d_normal_cdf_e(x, d_exp_neg_half_sq(x)));
}

__device__ __forceinline__ float d_gelu_erf_grad(float x)
{
    float e = d_exp_neg_half_sq(x);
    return fa(d_normal_cdf_e(x, e), fm(x, fm(0.398942280401432678f, e)));
}

#define GELU_TANH_BETA 0.797884560802865356f /* sqrt(2/pi) */
#define GELU_TANH_KAPPA 0.044715f

__device__ __forceinline__ float d_gelu_tanh(float x)
{
    float u = fm(GELU_TANH_BETA, fa(x, fm(GELU_TANH_KAPPA, fm(fm(x, x), x))));
    float au = u < 0.0f ? -u : u;
    float e = d_expf(fm(-2.0f, au));
    float s = fd(u < 0.0f ? e : 1.0f, fa(1.0f, e));
    return fm(x, s);
}

__device__ __forceinline__ float d_gelu_tanh_grad(float x)
{
    float x2 = fm(x, x);
    float u = fm(GELU_TANH_BETA, fa(x, fm(GELU_TANH_KAPPA, fm(x2, x))));
    float au = u < 0.0f ? -u : u;
    float e = d_expf(fm(-2.0f, au));
    float r = fd(1.0f, fa(1.0f, e));
    float s = fm(u < 0.0f ? e : 1.0f, r);
    float du = fm(GELU_TANH_BETA, fa(1.0f, fm(fm(3.0f, GELU_TANH_KAPPA), x2)));
    return fa(s, fm(x, fm(fm(2.0f, fm(fm(e, r), r)), du)));
}

template <int KIND>
__device__ __forceinline__ float d_gelu(float x)
{
    return KIND == TF_GELU_TANH ? d_gelu_tanh(x) : d_gelu_erf(x);
}

template <int KIND>
__device__ __forceinline__ float d_gelu_grad(float x)
{
    return KIND == TF_GELU_TANH ? d_gelu_tanh_grad(x) : d_gelu_erf_grad(x);
}

#define GRID_STRIDE(i, n)                                                                  \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (size_t)gridDim.x * blockDim.x)

// --- GELU / tanh ------------------------------------------------------------------

template <int DT, int KIND>
__global__ void gelu_fwd_kernel(const void *x, void *y, size_t n)
{
    GRID_STRIDE(i, n) tfc_store<DT>(y, i, d_gelu<KIND>(tfc_load<DT>(x, i)));
}

template <int DT, int KIND>
__global__ void gelu_bwd_kernel(const void *dy, const void *x, void *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float g = d_gelu_grad<KIND>(tfc_load<DT>(x, i));
        tfc_store<DT>(dx, i, fm(tfc_load<DT>(dy, i), g));
    }
}

template <int DT>
__global__ void tanh_fwd_kernel(const void *x, void *y, size_t n)
{
    GRID_STRIDE(i, n) tfc_store<DT>(y, i, d_tanhf(tfc_load<DT>(x, i)));
}

template <int DT>
__global__ void tanh_bwd_kernel(const void *dy, const void *y, void *dx, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float yi = tfc_load<DT>(y, i);
        tfc_store<DT>(dx, i, fm(tfc_load<DT>(dy, i), fs(1.0f, fm(yi, yi))));
    }
}

template <int DT>
cudaError_t gelu_fwd_launch(cudaStream_t s, const void *x, void *y, size_t n, tf_gelu_kind kind)
{
    if (kind == TF_GELU_TANH)
        TFCB_LAUNCH((gelu_fwd_kernel<DT, TF_GELU_TANH>), tfc_blocks(n, 1), TFC_THREADS, 0, s)
            (x, y, n);
    else
        TFCB_LAUNCH((gelu_fwd_kernel<DT, TF_GELU_ERF>), tfc_blocks(n, 1), TFC_THREADS, 0, s)
            (x, y, n);
    return cudaGetLastError();
}

template <int DT>
cudaError_t gelu_bwd_launch(cudaStream_t s, const void *dy, const void *x, void *dx, size_t n,
                            tf_gelu_kind kind)
{
    if (kind == TF_GELU_TANH)
        TFCB_LAUNCH((gelu_bwd_kernel<DT, TF_GELU_TANH>), tfc_blocks(n, 1), TFC_THREADS, 0, s)
            (dy, x, dx, n);
    else
        TFCB_LAUNCH((gelu_bwd_kernel<DT, TF_GELU_ERF>), tfc_blocks(n, 1), TFC_THREADS, 0, s)
            (dy, x, dx, n);
    return cudaGetLastError();
}

template <int DT>
cudaError_t tanh_fwd_launch(cudaStream_t s, const void *x, void *y, size_t n)
{
    TFCB_LAUNCH(tanh_fwd_kernel<DT>, tfc_blocks(n, 1), TFC_THREADS, 0, s)(x, y, n);
    return cudaGetLastError();
}

template <int DT>
cudaError_t tanh_bwd_launch(cudaStream_t s, const void *dy, const void *y, void *dx, size_t n)
{
    TFCB_LAUNCH(tanh_bwd_kernel<DT>, tfc_blocks(n, 1), TFC_THREADS, 0, s)(dy, y, dx, n);
    return cudaGetLastError();
}

// --- matrices with a leading dimension (GEMM epilogues) -----------------------------
// blockIdx.x: a tile of TFC_THREADS columns; blockIdx.y strides over the
// batch * rows matrix rows.

#define MATRIX_ROW_BLOCKS 4096u

static dim3 matrix_grid(int batch, int rows, int cols)
{
    unsigned gx = (unsigned)((cols + TFC_THREADS - 1) / TFC_THREADS);
    long long all_rows = (long long)batch * rows;
    unsigned gy = all_rows < (long long)MATRIX_ROW_BLOCKS ? (unsigned)all_rows : MATRIX_ROW_BLOCKS;
    return dim3(gx, gy < 1 ? 1 : gy, 1);
}

// Element (b, r, c) of matrices sharing ld and stride.
__device__ __forceinline__ size_t matrix_at(long long row, int rows, int c, int64_t ld,
                                            int64_t stride)
{
    long long b = row / rows, r = row - b * rows;
    return (size_t)(b * stride + r * ld + c);
}

template <int DT, int KIND>
__global__ void gelu_matrix_kernel(const void *pre, void *y, int batch, int rows, int cols,
                                   int64_t ld, int64_t stride)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    long long all = (long long)batch * rows;
    for (long long row = blockIdx.y; row < all; row += gridDim.y) {
        size_t i = matrix_at(row, rows, c, ld, stride);
        tfc_store<DT>(y, i, d_gelu<KIND>(tfc_load<DT>(pre, i)));
    }
}

template <int DT>
cudaError_t gelu_matrix_launch(cudaStream_t s, const void *pre, void *y, int batch, int rows,
                               int cols, int64_t ld, int64_t stride, tf_gelu_kind kind)
{
    dim3 grid = matrix_grid(batch, rows, cols);
    if (kind == TF_GELU_TANH)
        TFCB_LAUNCH((gelu_matrix_kernel<DT, TF_GELU_TANH>), grid, TFC_THREADS, 0, s)
            (pre, y, batch, rows, cols, ld, stride);
    else
        TFCB_LAUNCH((gelu_matrix_kernel<DT, TF_GELU_ERF>), grid, TFC_THREADS, 0, s)
            (pre, y, batch, rows, cols, ld, stride);
    return cudaGetLastError();
}

// k = 0: what backend-cpu's GEMM does without products. beta = 0 never reads C.
template <int DT>
__global__ void gemm_no_k_kernel(void *c, void *aux, const float *bias, int with_gelu, int kind,
                                 float beta, int batch, int rows, int cols, int64_t ld,
                                 int64_t stride)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    long long all = (long long)batch * rows;
    for (long long row = blockIdx.y; row < all; row += gridDim.y) {
        size_t i = matrix_at(row, rows, col, ld, stride);
        float v = beta == 0.0f ? 0.0f : fm(beta, tfc_load<DT>(c, i));
        if (bias) v = beta == 0.0f ? bias[col] : fa(v, bias[col]);
        if (with_gelu) {
            tfc_store<DT>(aux, i, v);
            float pre = tfc_load<DT>(aux, i); /* gelu of the stored (rounded) value */
            v = kind == TF_GELU_TANH ? d_gelu_tanh(pre) : d_gelu_erf(pre);
        }
        tfc_store<DT>(c, i, v);
    }
}

template <int DT>
cudaError_t gemm_no_k_launch(cudaStream_t s, void *c, void *aux, const float *bias,
                             bool with_gelu, tf_gelu_kind kind, float beta, int batch, int rows,
                             int cols, int64_t ld, int64_t stride)
{
    TFCB_LAUNCH(gemm_no_k_kernel<DT>, matrix_grid(batch, rows, cols), TFC_THREADS, 0, s)
        (c, aux, bias, with_gelu ? 1 : 0, (int)kind, beta, batch, rows, cols, ld, stride);
    return cudaGetLastError();
}

// --- dropout ---------------------------------------------------------------------------
// One thread per Philox counter of a row: elements 4c .. 4c+3 of row b (fewer
// at the row's end). Row b draws the stream offset + row_first + b * row_stride
// (tfcore/backend.h "Dropout masks"); the 1.0 slot is one row of n.

template <int DT>
__global__ void dropout_fwd_kernel(const void *x, void *y, uint8_t *keep, size_t rows,
                                   size_t row_elems, uint32_t thr, float scale, uint32_t k0,
                                   uint32_t k1, uint64_t offset, uint64_t row_first,
                                   uint64_t row_stride)
{
    size_t per_row = (row_elems + 3) / 4, counters = rows * per_row;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < counters;
         t += (size_t)gridDim.x * blockDim.x) {
        size_t b = t / per_row, c = t - b * per_row;
        uint64_t o = offset + row_first + (uint64_t)b * row_stride;
        uint32_t w[4] = {(uint32_t)c, (uint32_t)((uint64_t)c >> 32), (uint32_t)o,
                         (uint32_t)(o >> 32)};
        tfc_philox4x32_10(w, k0, k1);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            size_t e = 4 * c + (size_t)j;
            if (e >= row_elems) break;
            size_t i = b * row_elems + e;
            uint8_t kp = (uint8_t)((w[j] >> 8) >= thr);
            keep[i] = kp;
            tfc_store<DT>(y, i, fm(tfc_load<DT>(x, i), kp ? scale : 0.0f));
        }
    }
}

template <int DT>
__global__ void dropout_bwd_kernel(const void *dy, const uint8_t *keep, void *dx, size_t n,
                                   float scale)
{
    GRID_STRIDE(i, n) tfc_store<DT>(dx, i, fm(tfc_load<DT>(dy, i), keep[i] ? scale : 0.0f));
}

template <int DT>
cudaError_t dropout_fwd_launch(cudaStream_t s, const void *x, void *y, uint8_t *keep, size_t rows,
                               size_t row_elems, uint32_t thr, float scale, uint64_t seed,
                               uint64_t offset, uint64_t row_first, uint64_t row_stride)
{
    size_t per_row = (row_elems + 3) / 4;
    TFCB_LAUNCH(dropout_fwd_kernel<DT>, tfc_blocks(rows * per_row, 1), TFC_THREADS, 0, s)(
        x, y, keep, rows, row_elems, thr, scale, (uint32_t)seed, (uint32_t)(seed >> 32), offset,
        row_first, row_stride);
    return cudaGetLastError();
}

template <int DT>
cudaError_t dropout_bwd_launch(cudaStream_t s, const void *dy, const uint8_t *keep, void *dx,
                               size_t n, float scale)
{
    TFCB_LAUNCH(dropout_bwd_kernel<DT>, tfc_blocks(n, 1), TFC_THREADS, 0, s)
        (dy, keep, dx, n, scale);
    return cudaGetLastError();
}

// --- add, scale ----------------------------------------------------------------------------

template <int DT>
__global__ void add_kernel(const void *a, const void *b, void *y, size_t n)
{
    GRID_STRIDE(i, n) tfc_store<DT>(y, i, fa(tfc_load<DT>(a, i), tfc_load<DT>(b, i)));
}

template <int DT>
__global__ void scale_kernel(void *x, size_t n, float alpha)
{
    GRID_STRIDE(i, n) tfc_store<DT>(x, i, fm(tfc_load<DT>(x, i), alpha));
}

template <int DT>
cudaError_t add_launch(cudaStream_t s, const void *a, const void *b, void *y, size_t n)
{
    TFCB_LAUNCH(add_kernel<DT>, tfc_blocks(n, 1), TFC_THREADS, 0, s)(a, b, y, n);
    return cudaGetLastError();
}

template <int DT>
cudaError_t scale_launch(cudaStream_t s, void *x, size_t n, float alpha)
{
    TFCB_LAUNCH(scale_kernel<DT>, tfc_blocks(n, 1), TFC_THREADS, 0, s)(x, n, alpha);
    return cudaGetLastError();
}

// --- cast: through double, as backend-cpu (F64 reaches f16/bf16 through float) ---------

template <int DT>
__device__ __forceinline__ double load_any(const void *p, size_t i)
{
    if constexpr (DT == TF_DTYPE_F64)
        return ((const double *)p)[i];
    else
        return (double)tfc_load<DT>(p, i);
}

template <int DT>
__device__ __forceinline__ void store_any(void *p, size_t i, double v)
{
    if constexpr (DT == TF_DTYPE_F64)
        ((double *)p)[i] = v;
    else
        tfc_store<DT>(p, i, __double2float_rn(v));
}

template <int SRC, int DST>
__global__ void cast_kernel(const void *src, void *dst, size_t n)
{
    GRID_STRIDE(i, n) store_any<DST>(dst, i, load_any<SRC>(src, i));
}

template <int SRC>
cudaError_t cast_from(cudaStream_t s, const void *src, void *dst, tf_dtype dst_dt, size_t n)
{
    unsigned g = tfc_blocks(n, 1);
    switch (dst_dt) {
    case TF_DTYPE_F32:
        TFCB_LAUNCH((cast_kernel<SRC, TF_DTYPE_F32>), g, TFC_THREADS, 0, s)(src, dst, n);
        break;
    case TF_DTYPE_F16:
        TFCB_LAUNCH((cast_kernel<SRC, TF_DTYPE_F16>), g, TFC_THREADS, 0, s)(src, dst, n);
        break;
    case TF_DTYPE_BF16:
        TFCB_LAUNCH((cast_kernel<SRC, TF_DTYPE_BF16>), g, TFC_THREADS, 0, s)(src, dst, n);
        break;
    case TF_DTYPE_F64:
        TFCB_LAUNCH((cast_kernel<SRC, TF_DTYPE_F64>), g, TFC_THREADS, 0, s)(src, dst, n);
        break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t tfc_gelu_fwd(cudaStream_t s, const void *x, void *y, size_t n, tf_gelu_kind kind,
                         tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, gelu_fwd_launch, s, x, y, n, kind)
}

cudaError_t tfc_gelu_bwd(cudaStream_t s, const void *dy, const void *x, void *dx, size_t n,
                         tf_gelu_kind kind, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, gelu_bwd_launch, s, dy, x, dx, n, kind)
}

cudaError_t tfc_gelu_matrix(cudaStream_t s, const void *pre, void *y, int batch, int rows,
                            int cols, int64_t ld, int64_t stride, tf_gelu_kind kind, tf_dtype dt)
{
    if (batch < 1 || rows < 1 || cols < 1) return cudaSuccess;
    TFC_DISPATCH_ACT(dt, gelu_matrix_launch, s, pre, y, batch, rows, cols, ld, stride, kind)
}

cudaError_t tfc_gemm_no_k(cudaStream_t s, void *c, void *aux, const float *bias, bool with_gelu,
                          tf_gelu_kind kind, float beta, int batch, int rows, int cols, int64_t ld,
                          int64_t stride, tf_dtype dt)
{
    if (batch < 1 || rows < 1 || cols < 1) return cudaSuccess;
    TFC_DISPATCH_ACT(dt, gemm_no_k_launch, s, c, aux, bias, with_gelu, kind, beta, batch, rows,
                     cols, ld, stride)
}

cudaError_t tfc_tanh_fwd(cudaStream_t s, const void *x, void *y, size_t n, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, tanh_fwd_launch, s, x, y, n)
}

cudaError_t tfc_tanh_bwd(cudaStream_t s, const void *dy, const void *y, void *dx, size_t n,
                         tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, tanh_bwd_launch, s, dy, y, dx, n)
}

cudaError_t tfc_dropout_fwd(cudaStream_t s, const void *x, void *y, uint8_t *keep, size_t rows,
                            size_t row_elems, uint32_t thr, float scale, uint64_t seed,
                            uint64_t offset, uint64_t row_first, uint64_t row_stride, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, dropout_fwd_launch, s, x, y, keep, rows, row_elems, thr, scale, seed,
                     offset, row_first, row_stride)
}

cudaError_t tfc_dropout_bwd(cudaStream_t s, const void *dy, const uint8_t *keep, void *dx,
                            size_t n, float scale, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, dropout_bwd_launch, s, dy, keep, dx, n, scale)
}

cudaError_t tfc_add(cudaStream_t s, const void *a, const void *b, void *y, size_t n, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, add_launch, s, a, b, y, n)
}

cudaError_t tfc_scale(cudaStream_t s, void *x, size_t n, float alpha, tf_dtype dt)
{
    TFC_DISPATCH_ACT(dt, scale_launch, s, x, n, alpha)
}

cudaError_t tfc_cast(cudaStream_t s, const void *src, tf_dtype src_dt, void *dst, tf_dtype dst_dt,
                     size_t n)
{
    switch (src_dt) {
    case TF_DTYPE_F32: return cast_from<TF_DTYPE_F32>(s, src, dst, dst_dt, n);
    case TF_DTYPE_F16: return cast_from<TF_DTYPE_F16>(s, src, dst, dst_dt, n);
    case TF_DTYPE_BF16: return cast_from<TF_DTYPE_BF16>(s, src, dst, dst_dt, n);
    case TF_DTYPE_F64: return cast_from<TF_DTYPE_F64>(s, src, dst, dst_dt, n);
    default: return cudaErrorInvalidValue;
    }
}

// cudaSuccess when this build holds kernels the current device can run
// (machine code for its architecture, or PTX it can compile).
cudaError_t tfc_kernel_image_check(void)
{
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, (const void *)scale_kernel<TF_DTYPE_F32>);
}

} // extern "C"
