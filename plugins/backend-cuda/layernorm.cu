/* layernorm.cu — backend-cuda LayerNorm over the last dimension with the
 * residual add fused in front, as torch.nn.LayerNorm (biased variance):
 *   in = x + residual (rounded to the activation dtype, as torch adds the
 *        residual in that dtype before the norm); y = (in - mean) * rstd * gamma + beta
 *
 * Statistics as backend-cpu computes them: the row is summed in double, the
 * squared deviations from the double mean are summed in double, and the mean
 * is subtracted as two floats (hi + lo), so rows whose |mean| is far above
 * their spread keep their precision. The saved `mean` is hi.
 *
 * Forward: one block per row. When every buffer is 16-byte aligned and cols
 * is a multiple of the 16-byte vector, a thread caches up to LN_ITEMS vectors
 * of its row in registers (x + residual is read once); otherwise (or for rows
 * too long for the cache) a generic kernel reads element by element and
 * re-reads the row (from L1/L2) for each pass.
 *
 * Backward, given g = dy * gamma and xhat = ((in - hi) - lo) * rstd:
 *   dx     = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))
 *   dgamma += sum_rows dy * xhat,  dbeta += sum_rows dy
 * (d/d in of y = xhat*gamma + beta: dxhat = g; xhat = (in - mu) * rstd with
 *  d mu/d in_j = 1/n, d rstd/d in_j = -rstd^3 (in_j - mu)/n, so
 *  dx_j = rstd * (g_j - mean(g) - xhat_j * mean(g * xhat)).)
 * Four kernels, deterministic without atomics:
 *   1. row means (hi, lo) in double  -> workspace means [rows, 2] f32
 *   2. per group of LN_GROUP rows and per column, sum dy*xhat and dy in
 *      double, rows in order          -> workspace partials [2, groups, cols] f64
 *   3. per column, sum the groups' partials in order and add to dgamma/dbeta
 *   4. dx, one block per row (after 2: dx may alias dy or in).
 * The saved rstd is used as is; the mean is recomputed in double, as the
 * saved f32 mean lacks its low part. */
#include <float.h>
#include <math.h>

#include "fused_kernels.h"

#define LN_ITEMS 4      /* 16-byte vectors a thread caches in the vector kernels */
#define LN_MAX_THREADS 1024
#define LN_DX_MAX_THREADS 512 /* the dx kernel caches dy and in: more registers per thread */
#define LN_GENERIC_THREADS 256
#define LN_PARAM_THREADS 256 /* columns per block of the dgamma/dbeta kernels */

/* Threads for a row of `chunks` vectors: about 2 vectors per thread, a
 * multiple of 32, within [32, max_threads]. */
static int ln_threads(int chunks, int max_threads)
{
    int t = (chunks + 1) / 2;
    t = (t + 31) / 32 * 32;
    return t < 32 ? 32 : t > max_threads ? max_threads : t;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ------------------------------------------------------------------------ */
/* forward                                                                   */
/* ------------------------------------------------------------------------ */

/* Vector kernel: VEC = 16 / sizeof(T) elements per chunk, cols % VEC == 0,
 * every pointer 16-byte aligned, chunks <= LN_ITEMS * blockDim.x. */
template <typename T, int VEC>
__global__ void __launch_bounds__(LN_MAX_THREADS)
    ln_fwd_vec(const T *x, const T *res, T *in_out, T *y,
               const float *__restrict__ gamma, const float *__restrict__ beta,
               float *__restrict__ mean_out, float *__restrict__ rstd_out, int cols, float eps)
{
    typedef tfcb_pack<T, VEC> P;
    __shared__ double red[32];
    const int64_t base = (int64_t)blockIdx.x * cols; /* row start, elements */
    const int chunks = cols / VEC;
    /* `in` of this thread's chunks, rounded to T (so the statistics are
     * those of the in_out the backward will read) */
    P cache[LN_ITEMS];
    double sum = 0.0;
#pragma unroll
    for (int it = 0; it < LN_ITEMS; it++) {
        int c = threadIdx.x + it * blockDim.x;
        if (c < chunks) {
            P v = reinterpret_cast<const P *>(x + base)[c];
            if (res) {
                P r = reinterpret_cast<const P *>(res + base)[c];
#pragma unroll
                for (int e = 0; e < VEC; e++)
                    v.v[e] = tfcb_from_f32<T>(tfcb_to_f32<T>(v.v[e]) + tfcb_to_f32<T>(r.v[e]));
            }
            /* each chunk is read before it is written, by the same thread:
             * in_out may alias x or residual */
            if (in_out && (res || in_out != x)) reinterpret_cast<P *>(in_out + base)[c] = v;
#pragma unroll
            for (int e = 0; e < VEC; e++) sum += (double)tfcb_to_f32<T>(v.v[e]);
            cache[it] = v;
        }
    }
    const double mean = tfcb_block_sum(sum, red) / cols;
    double sq = 0.0;
#pragma unroll
    for (int it = 0; it < LN_ITEMS; it++) {
        int c = threadIdx.x + it * blockDim.x;
        if (c < chunks) {
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                double d = (double)tfcb_to_f32<T>(cache[it].v[e]) - mean;
                sq += d * d;
            }
        }
    }
    const double var = tfcb_block_sum(sq, red) / cols;
    const float rstd = (float)(1.0 / sqrt(var + (double)eps));
    const float m_hi = (float)mean, m_lo = (float)(mean - (double)m_hi);
    /* every read of the row happened before the reductions' barriers: y may alias x */
#pragma unroll
    for (int it = 0; it < LN_ITEMS; it++) {
        int c = threadIdx.x + it * blockDim.x;
        if (c < chunks) {
            P o;
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                int j = c * VEC + e;
                float xh = ((tfcb_to_f32<T>(cache[it].v[e]) - m_hi) - m_lo) * rstd;
                o.v[e] = tfcb_from_f32<T>(xh * gamma[j] + beta[j]);
            }
            reinterpret_cast<P *>(y + base)[c] = o;
        }
    }
    if (threadIdx.x == 0) {
        mean_out[blockIdx.x] = m_hi;
        rstd_out[blockIdx.x] = rstd;
    }
}

/* Generic kernel: any alignment, any cols. Pass 1 writes in_out (when there
 * is one) and sums; passes 2 and 3 re-read `in` (in_out, or x). Each element
 * is read and written by the same thread, reads first: y may alias x, in_out
 * may alias x or residual. */
template <typename T>
__global__ void __launch_bounds__(LN_GENERIC_THREADS)
    ln_fwd_generic(const T *x, const T *res, T *in_out, T *y, const float *__restrict__ gamma,
                   const float *__restrict__ beta, float *__restrict__ mean_out,
                   float *__restrict__ rstd_out, int cols, float eps)
{
    __shared__ double red[32];
    const int64_t base = (int64_t)blockIdx.x * cols;
    const bool write_in = in_out && (res || in_out != x);
    const T *in = (write_in ? (const T *)in_out : x) + base; /* [cols] */
    double sum = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = tfcb_to_f32<T>(x[base + j]);
        if (res) v = tfcb_round<T>(v + tfcb_to_f32<T>(res[base + j]));
        if (write_in) in_out[base + j] = tfcb_from_f32<T>(v);
        sum += (double)v;
    }
    /* the barriers inside tfcb_block_sum also make in_out's writes visible */
    const double mean = tfcb_block_sum(sum, red) / cols;
    double sq = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        double d = (double)tfcb_to_f32<T>(in[j]) - mean;
        sq += d * d;
    }
    const double var = tfcb_block_sum(sq, red) / cols;
    const float rstd = (float)(1.0 / sqrt(var + (double)eps));
    const float m_hi = (float)mean, m_lo = (float)(mean - (double)m_hi);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = ((tfcb_to_f32<T>(in[j]) - m_hi) - m_lo) * rstd;
        y[base + j] = tfcb_from_f32<T>(xh * gamma[j] + beta[j]);
    }
    if (threadIdx.x == 0) {
        mean_out[blockIdx.x] = m_hi;
        rstd_out[blockIdx.x] = rstd;
    }
}

template <typename T>
static cudaError_t ln_fwd_launch(cudaStream_t s, const void *x, const void *residual,
                                 void *in_out, void *y, const float *gamma, const float *beta,
                                 float *mean, float *rstd, int rows, int cols, float eps)
{
    const int VEC = 16 / (int)sizeof(T);
    const T *xt = (const T *)x, *rt = (const T *)residual;
    T *io = (T *)in_out, *yt = (T *)y;
    bool vec_ok = cols % VEC == 0 && aligned16(x) && aligned16(y) &&
                  (!residual || aligned16(residual)) &&
                  (!in_out || aligned16(in_out));
    int chunks = cols / VEC;
    int threads = ln_threads(chunks, LN_MAX_THREADS);
    if (vec_ok && chunks <= LN_ITEMS * threads) {
        TFCB_LAUNCH((ln_fwd_vec<T, 16 / sizeof(T)>), rows, threads, 0, s)
        (xt, rt, io, yt, gamma, beta, mean, rstd, cols, eps);
    } else {
        TFCB_LAUNCH(ln_fwd_generic<T>, rows, LN_GENERIC_THREADS, 0, s)
        (xt, rt, io, yt, gamma, beta, mean, rstd, cols, eps);
    }
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

extern "C" cudaError_t tfc_layernorm_fwd(cudaStream_t s, const void *x, const void *residual,
                                         void *in_out, void *y, const float *gamma,
                                         const float *beta, float *mean, float *rstd, int rows,
                                         int cols, float eps, tf_dtype dt)
{
    if (rows < 0 || cols < 1 || !(eps >= 0.0f) || isinf(eps)) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    if (!x || !y || !gamma || !beta || !mean || !rstd || (residual && !in_out))
        return cudaErrorInvalidValue;
    switch (dt) {
    case TF_DTYPE_F32:
        return ln_fwd_launch<float>(s, x, residual, in_out, y, gamma, beta, mean, rstd, rows,
                                    cols, eps);
    case TF_DTYPE_F16:
        return ln_fwd_launch<__half>(s, x, residual, in_out, y, gamma, beta, mean, rstd, rows,
                                     cols, eps);
    case TF_DTYPE_BF16:
        return ln_fwd_launch<__nv_bfloat16>(s, x, residual, in_out, y, gamma, beta, mean, rstd,
                                            rows, cols, eps);
    default:
        return cudaErrorInvalidValue;
    }
}

/* ------------------------------------------------------------------------ */
/* backward                                                                  */
/* ------------------------------------------------------------------------ */

/* Rows per group of the dgamma/dbeta partial sums: fixed by `rows` alone (at
 * most 256 groups: 3 MiB of partials for 32768 x 768), so the summation order
 * never depends on the device. */
static int ln_group_rows(int rows)
{
    int g = (rows + 255) / 256;
    return g < 16 ? 16 : g;
}

static int ln_groups(int rows)
{
    int gr = ln_group_rows(rows);
    return (rows + gr - 1) / gr;
}

/* Workspace layout: partials [2, groups, cols] f64, then means [rows, 2] f32. */
static size_t ln_partials_bytes(int rows, int cols)
{
    return 2 * (size_t)ln_groups(rows) * (size_t)cols * sizeof(double);
}

extern "C" size_t tfc_layernorm_bwd_workspace_bytes(int rows, int cols)
{
    if (rows <= 0 || cols <= 0) return 0;
    size_t b = ln_partials_bytes(rows, cols) + 2 * (size_t)rows * sizeof(float);
    return (b + 255) / 256 * 256;
}

/* 1. means[row] = (hi, lo) of the row mean of `in`, summed in double. */
template <typename T>
__global__ void __launch_bounds__(LN_GENERIC_THREADS)
    ln_bwd_means(const T *__restrict__ in, float *__restrict__ means, int cols)
{
    __shared__ double red[32];
    const T *row = in + (int64_t)blockIdx.x * cols; /* [cols] */
    double sum = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += (double)tfcb_to_f32<T>(row[j]);
    double mean = tfcb_block_sum(sum, red) / cols;
    if (threadIdx.x == 0) {
        float hi = (float)mean;
        means[2 * (int64_t)blockIdx.x] = hi;
        means[2 * (int64_t)blockIdx.x + 1] = (float)(mean - (double)hi);
    }
}

/* 2. Block (column tile blockIdx.x, row group blockIdx.y): thread j sums its
 * column over the group's rows, in row order, in double.
 * part_g, part_b: [groups, cols] f64. */
template <typename T>
__global__ void __launch_bounds__(LN_PARAM_THREADS)
    ln_bwd_param_partials(const T *__restrict__ dy, const T *__restrict__ in,
                          const float *__restrict__ means, const float *__restrict__ rstd,
                          double *__restrict__ part_g, double *__restrict__ part_b, int rows,
                          int cols, int group_rows)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    const int r0 = blockIdx.y * group_rows;
    const int r1 = min(rows, r0 + group_rows);
    double g = 0.0, b = 0.0;
    for (int r = r0; r < r1; r++) {
        int64_t at = (int64_t)r * cols + j;
        float d = tfcb_to_f32<T>(dy[at]);
        float xh = ((tfcb_to_f32<T>(in[at]) - means[2 * (int64_t)r]) - means[2 * (int64_t)r + 1]) *
                   rstd[r];
        g += (double)d * (double)xh;
        b += (double)d;
    }
    part_g[(int64_t)blockIdx.y * cols + j] = g;
    part_b[(int64_t)blockIdx.y * cols + j] = b;
}

/* 3. dgamma[j] += sum over groups (in order) of part_g[., j]; same for dbeta. */
__global__ void __launch_bounds__(LN_PARAM_THREADS)
    ln_bwd_param_final(const double *__restrict__ part_g, const double *__restrict__ part_b,
                       float *__restrict__ dgamma, float *__restrict__ dbeta, int groups, int cols)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    double g = 0.0, b = 0.0;
    for (int k = 0; k < groups; k++) {
        g += part_g[(int64_t)k * cols + j];
        b += part_b[(int64_t)k * cols + j];
    }
    dgamma[j] = (float)((double)dgamma[j] + g);
    dbeta[j] = (float)((double)dbeta[j] + b);
}

/* 4a. dx, vector kernel (same preconditions as ln_fwd_vec, for dy, in, dx
 * and gamma). dy and in chunks are cached; dx is written after the block
 * reductions, so it may alias dy or in. */
template <typename T, int VEC>
__global__ void __launch_bounds__(LN_DX_MAX_THREADS)
    ln_bwd_dx_vec(const T *dy, const T *in, const float *__restrict__ gamma,
                  const float *__restrict__ means, const float *__restrict__ rstd_in, T *dx,
                  bool accumulate, int cols)
{
    typedef tfcb_pack<T, VEC> P;
    __shared__ double red[32];
    const int64_t base = (int64_t)blockIdx.x * cols;
    const int chunks = cols / VEC;
    const float m_hi = means[2 * (int64_t)blockIdx.x], m_lo = means[2 * (int64_t)blockIdx.x + 1];
    const float rstd = rstd_in[blockIdx.x];
    P cdy[LN_ITEMS], cin[LN_ITEMS];
    double sg = 0.0, sgx = 0.0;
#pragma unroll
    for (int it = 0; it < LN_ITEMS; it++) {
        int c = threadIdx.x + it * blockDim.x;
        if (c < chunks) {
            cdy[it] = reinterpret_cast<const P *>(dy + base)[c];
            cin[it] = reinterpret_cast<const P *>(in + base)[c];
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                int j = c * VEC + e;
                float g = tfcb_to_f32<T>(cdy[it].v[e]) * gamma[j];
                float xh = ((tfcb_to_f32<T>(cin[it].v[e]) - m_hi) - m_lo) * rstd;
                sg += (double)g;
                sgx += (double)g * (double)xh;
            }
        }
    }
    const float a = (float)(tfcb_block_sum(sg, red) / cols);
    const float b = (float)(tfcb_block_sum(sgx, red) / cols);
#pragma unroll
    for (int it = 0; it < LN_ITEMS; it++) {
        int c = threadIdx.x + it * blockDim.x;
        if (c < chunks) {
            P o;
            if (accumulate) o = reinterpret_cast<const P *>(dx + base)[c];
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                int j = c * VEC + e;
                float xh = ((tfcb_to_f32<T>(cin[it].v[e]) - m_hi) - m_lo) * rstd;
                float v = rstd * ((tfcb_to_f32<T>(cdy[it].v[e]) * gamma[j] - a) - xh * b);
                if (accumulate) v += tfcb_to_f32<T>(o.v[e]);
                o.v[e] = tfcb_from_f32<T>(v);
            }
            reinterpret_cast<P *>(dx + base)[c] = o;
        }
    }
}

/* 4b. dx, generic kernel: any alignment, any cols; dy and in are re-read for
 * the second pass, and element j is read and then written by one thread, so
 * dx may alias dy or in. */
template <typename T>
__global__ void __launch_bounds__(LN_GENERIC_THREADS)
    ln_bwd_dx_generic(const T *dy, const T *in, const float *__restrict__ gamma,
                      const float *__restrict__ means, const float *__restrict__ rstd_in, T *dx,
                      bool accumulate, int cols)
{
    __shared__ double red[32];
    const int64_t base = (int64_t)blockIdx.x * cols;
    const float m_hi = means[2 * (int64_t)blockIdx.x], m_lo = means[2 * (int64_t)blockIdx.x + 1];
    const float rstd = rstd_in[blockIdx.x];
    double sg = 0.0, sgx = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float g = tfcb_to_f32<T>(dy[base + j]) * gamma[j];
        float xh = ((tfcb_to_f32<T>(in[base + j]) - m_hi) - m_lo) * rstd;
        sg += (double)g;
        sgx += (double)g * (double)xh;
    }
    const float a = (float)(tfcb_block_sum(sg, red) / cols);
    const float b = (float)(tfcb_block_sum(sgx, red) / cols);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = ((tfcb_to_f32<T>(in[base + j]) - m_hi) - m_lo) * rstd;
        float v = rstd * ((tfcb_to_f32<T>(dy[base + j]) * gamma[j] - a) - xh * b);
        if (accumulate) v += tfcb_to_f32<T>(dx[base + j]);
        dx[base + j] = tfcb_from_f32<T>(v);
    }
}

template <typename T>
static cudaError_t ln_bwd_launch(cudaStream_t s, const void *dy, const void *in,
                                 const float *gamma, const float *rstd, void *dx,
                                 bool dx_accumulate, float *dgamma, float *dbeta, int rows,
                                 int cols, void *workspace)
{
    const int VEC = 16 / (int)sizeof(T);
    const T *dyt = (const T *)dy, *int_ = (const T *)in;
    T *dxt = (T *)dx;
    const int group_rows = ln_group_rows(rows), groups = ln_groups(rows);
    double *part_g = (double *)workspace;                          /* [groups, cols] */
    double *part_b = part_g + (size_t)groups * (size_t)cols;       /* [groups, cols] */
    float *means = (float *)((char *)workspace + ln_partials_bytes(rows, cols)); /* [rows, 2] */
    const int col_blocks = (cols + LN_PARAM_THREADS - 1) / LN_PARAM_THREADS;

    TFCB_LAUNCH(ln_bwd_means<T>, rows, LN_GENERIC_THREADS, 0, s)(int_, means, cols);
    TFCB_CHECK_LAUNCH();
    TFCB_LAUNCH(ln_bwd_param_partials<T>, dim3(col_blocks, groups), LN_PARAM_THREADS, 0, s)
    (dyt, int_, means, rstd, part_g, part_b, rows, cols, group_rows);
    TFCB_CHECK_LAUNCH();
    TFCB_LAUNCH(ln_bwd_param_final, col_blocks, LN_PARAM_THREADS, 0, s)
    (part_g, part_b, dgamma, dbeta, groups, cols);
    TFCB_CHECK_LAUNCH();

    bool vec_ok = cols % VEC == 0 && aligned16(dy) && aligned16(in) && aligned16(dx);
    int chunks = cols / VEC;
    int threads = ln_threads(chunks, LN_DX_MAX_THREADS);
    if (vec_ok && chunks <= LN_ITEMS * threads) {
        TFCB_LAUNCH((ln_bwd_dx_vec<T, 16 / sizeof(T)>), rows, threads, 0, s)
        (dyt, int_, gamma, means, rstd, dxt, dx_accumulate, cols);
    } else {
        TFCB_LAUNCH(ln_bwd_dx_generic<T>, rows, LN_GENERIC_THREADS, 0, s)
        (dyt, int_, gamma, means, rstd, dxt, dx_accumulate, cols);
    }
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

extern "C" cudaError_t tfc_layernorm_bwd(cudaStream_t s, const void *dy, const void *in,
                                         const float *gamma, const float *mean,
                                         const float *rstd, void *dx, bool dx_accumulate,
                                         float *dgamma, float *dbeta, int rows, int cols,
                                         tf_dtype dt, void *workspace)
{
    (void)mean; /* recomputed in double from `in` (see the header comment) */
    if (rows < 0 || cols < 1) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    if (!dy || !in || !gamma || !rstd || !dx || !dgamma || !dbeta || !workspace ||
        ((uintptr_t)workspace & 7u) != 0 || ln_groups(rows) > 65535)
        return cudaErrorInvalidValue;
    switch (dt) {
    case TF_DTYPE_F32:
        return ln_bwd_launch<float>(s, dy, in, gamma, rstd, dx, dx_accumulate, dgamma, dbeta,
                                    rows, cols, workspace);
    case TF_DTYPE_F16:
        return ln_bwd_launch<__half>(s, dy, in, gamma, rstd, dx, dx_accumulate, dgamma, dbeta,
                                     rows, cols, workspace);
    case TF_DTYPE_BF16:
        return ln_bwd_launch<__nv_bfloat16>(s, dy, in, gamma, rstd, dx, dx_accumulate, dgamma,
                                            dbeta, rows, cols, workspace);
    default:
        return cudaErrorInvalidValue;
    }
}
