// reduce.cu — backend-cuda reductions: the bias gradient (column sums),
// the sum of squares for gradient clipping, and the inf/NaN check.
//
// Determinism: every sum is cut into pieces fixed by the problem size alone
// (never by the GPU's SM count or timing), each piece is summed in a fixed
// order in double, and the pieces are combined in a fixed order by a second
// kernel. No floating-point atomics: the same input gives the same bits on
// every run and every GPU model.
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend_cuda.h"

namespace {

// --- sum_rows: dbias[cols] (+)= sum over rows of dy[rows, cols] ------------------------
// Pass 1: grid (column tiles of 32, row parts). Thread (tx, ty) sums rows
// ty, ty + 8, ... of its part for column tx, in double; the 8 lanes of a
// column are added in lane order. Pass 2: per column, the parts in order.

#define SR_COLS 32
#define SR_LANES 8
#define SR_MAX_PARTS 64
#define SR_ROWS_PER_PART 256

int sum_rows_parts(int rows)
{
    int p = (rows + SR_ROWS_PER_PART - 1) / SR_ROWS_PER_PART;
    return p < 1 ? 1 : p > SR_MAX_PARTS ? SR_MAX_PARTS : p;
}

template <int DT>
__global__ void sum_rows_parts_kernel(const void *dy, int rows, int cols, int parts,
                                      double *partial)
{
    __shared__ double lane_sum[SR_LANES][SR_COLS + 1];
    int col = blockIdx.x * SR_COLS + threadIdx.x;
    int part = blockIdx.y;
    int per = (rows + parts - 1) / parts;
    long long r0 = (long long)part * per;
    long long r1 = r0 + per < rows ? r0 + per : rows;
    double acc = 0.0;
    if (col < cols)
        for (long long r = r0 + threadIdx.y; r < r1; r += SR_LANES)
            acc += (double)tfc_load<DT>(dy, (size_t)r * (size_t)cols + (size_t)col);
    lane_sum[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        double s = 0.0;
        for (int l = 0; l < SR_LANES; l++) s += lane_sum[l][threadIdx.x];
        partial[(size_t)part * (size_t)cols + (size_t)col] = s;
    }
}

__global__ void sum_rows_finish_kernel(const double *partial, int parts, int cols, float *dbias,
                                       int accumulate)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    double s = 0.0;
    for (int p = 0; p < parts; p++) s += partial[(size_t)p * (size_t)cols + (size_t)col];
    dbias[col] = accumulate ? (float)((double)dbias[col] + s) : (float)s;
}

template <int DT>
cudaError_t sum_rows_launch(cudaStream_t s, const void *dy, int rows, int cols, float *dbias,
                            bool accumulate, void *workspace)
{
    int parts = sum_rows_parts(rows);
    double *partial = (double *)workspace;
    dim3 grid((unsigned)((cols + SR_COLS - 1) / SR_COLS), (unsigned)parts);
    TFCB_LAUNCH(sum_rows_parts_kernel<DT>, grid, dim3(SR_COLS, SR_LANES), 0, s)
        (dy, rows, cols, parts, partial);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    TFCB_LAUNCH(sum_rows_finish_kernel, (unsigned)((cols + TFC_THREADS - 1) / TFC_THREADS),
                TFC_THREADS, 0, s)(partial, parts, cols, dbias, accumulate ? 1 : 0);
    return cudaGetLastError();
}

// --- sum_squares ----------------------------------------------------------------------------
// sq_pieces(n) blocks, each summing one contiguous piece (strided by thread, a
// fixed tree across the block); then one block adds the pieces by a fixed tree.
// The piece count depends on n only (the same bits on every run): one piece per
// SQ_PER_PIECE elements, at most SQ_PIECES, so a gradient bucket of a few
// thousand elements (the noise scale's per-bucket norms) launches a few blocks,
// not 1024 mostly idle ones.

#define SQ_PIECES 1024
#define SQ_THREADS 256
#define SQ_PER_PIECE 8192

static unsigned sq_pieces(size_t n)
{
    size_t p = (n + SQ_PER_PIECE - 1) / SQ_PER_PIECE;
    return p < 1 ? 1u : p > SQ_PIECES ? (unsigned)SQ_PIECES : (unsigned)p;
}

// In-block sum of v over blockDim.x (a power of two) threads, fixed order.
template <int THREADS>
__device__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

__global__ void sum_squares_pieces_kernel(const float *x, size_t n, double *partial)
{
    __shared__ double sh[SQ_THREADS];
    size_t chunk = (n + gridDim.x - 1) / gridDim.x;
    size_t lo = (size_t)blockIdx.x * chunk;
    size_t hi = lo + chunk < n ? lo + chunk : n;
    double acc = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SQ_THREADS) {
        double v = (double)x[i];
        acc += v * v;
    }
    double total = block_sum<SQ_THREADS>(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void sum_squares_finish_kernel(const double *partial, unsigned pieces, float *out)
{
    __shared__ double sh[SQ_PIECES];
    double total = block_sum<SQ_PIECES>(threadIdx.x < pieces ? partial[threadIdx.x] : 0.0, sh);
    if (threadIdx.x == 0) *out = (float)total;
}

// --- finite_check -----------------------------------------------------------------------------

template <typename U, int BITS>
__global__ void finite_kernel(const U *x, size_t n, U exp_mask, int32_t *found)
{
    int bad = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        bad |= (x[i] & exp_mask) == exp_mask;
    // one atomic per block at most; OR is order-free, so the result is deterministic
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(found, 1);
}

} // namespace

extern "C" {

size_t tfc_sum_rows_workspace_bytes(int rows, int cols)
{
    if (rows < 0 || cols < 1) return 0;
    return (size_t)sum_rows_parts(rows) * (size_t)cols * sizeof(double);
}

cudaError_t tfc_sum_rows(cudaStream_t s, const void *dy, tf_dtype dt, int rows, int cols,
                         float *dbias, bool accumulate, void *workspace)
{
    if (cols < 1 || rows < 0) return cudaSuccess;
    TFC_DISPATCH_ACT(dt, sum_rows_launch, s, dy, rows, cols, dbias, accumulate, workspace)
}

size_t tfc_sum_squares_workspace_bytes(void) { return SQ_PIECES * sizeof(double); }

cudaError_t tfc_sum_squares(cudaStream_t s, const float *x, size_t n, float *out, void *workspace)
{
    double *partial = (double *)workspace;
    unsigned pieces = sq_pieces(n);
    TFCB_LAUNCH(sum_squares_pieces_kernel, pieces, SQ_THREADS, 0, s)(x, n, partial);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    TFCB_LAUNCH(sum_squares_finish_kernel, 1, SQ_PIECES, 0, s)(partial, pieces, out);
    return cudaGetLastError();
}

cudaError_t tfc_finite_check(cudaStream_t s, const void *x, size_t n, tf_dtype dt, int32_t *found)
{
    if (n == 0) return cudaSuccess;
    unsigned g = tfc_blocks(n, 4);
    switch (dt) {
    case TF_DTYPE_F32:
        TFCB_LAUNCH((finite_kernel<uint32_t, 32>), g, TFC_THREADS, 0, s)
            ((const uint32_t *)x, n, 0x7f800000u, found);
        break;
    case TF_DTYPE_F16:
        TFCB_LAUNCH((finite_kernel<uint16_t, 16>), g, TFC_THREADS, 0, s)
            ((const uint16_t *)x, n, (uint16_t)0x7c00u, found);
        break;
    case TF_DTYPE_BF16:
        TFCB_LAUNCH((finite_kernel<uint16_t, 16>), g, TFC_THREADS, 0, s)
            ((const uint16_t *)x, n, (uint16_t)0x7f80u, found);
        break;
    case TF_DTYPE_F64:
        TFCB_LAUNCH((finite_kernel<uint64_t, 64>), g, TFC_THREADS, 0, s)
            ((const uint64_t *)x, n, (uint64_t)0x7ff0000000000000ull, found);
        break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // extern "C"
