/* layernorm.c — backend-cpu LayerNorm over the last dimension, with the
 * residual add fused in front, as torch.nn.LayerNorm: biased variance,
 * y = (in - mean) / sqrt(var + eps) * gamma + beta.
 *
 * Row statistics are summed in double (two passes: mean, then squared
 * deviations), and the mean is subtracted as two floats (hi + lo), so rows
 * whose |mean| is far above their spread keep their precision (where a float
 * mean alone would shift every xhat by up to half an ulp of the mean). The
 * backward recomputes each row's mean in double the same way rather than
 * trusting the f32 `mean` the forward saved. Forward and the backward's dx
 * are parallel over rows; dgamma/dbeta are parallel over columns, each column
 * summed over the rows in order: the same bits whatever the thread count.
 *
 * Aliasing: y may alias x; in_out may alias x or residual; dx may alias dy
 * or in. Everything is processed row by row, reading an element before
 * writing it. */
#include <math.h>

#include "cpu.h"

CPU_CLONES
static void layernorm_row(const float *x, const float *res, float *in_out, float *y,
                          const float *gamma, const float *beta, float *mean_out,
                          float *rstd_out, int cols, float eps)
{
    const float *in = x;
    if (res) { /* in_out != NULL is checked by the caller */
#pragma omp simd
        for (int j = 0; j < cols; j++) in_out[j] = x[j] + res[j];
        in = in_out;
    } else if (in_out && in_out != x) {
        for (int j = 0; j < cols; j++) in_out[j] = x[j];
    }
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += (double)in[j];
    double mean = sum / cols;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int j = 0; j < cols; j++) {
        double d = (double)in[j] - mean;
        sq += d * d;
    }
    double var = sq / cols;
    float rstd = (float)(1.0 / sqrt(var + (double)eps));
    float m_hi = (float)mean, m_lo = (float)(mean - (double)m_hi);
#pragma omp simd
    for (int j = 0; j < cols; j++) y[j] = ((in[j] - m_hi) - m_lo) * rstd * gamma[j] + beta[j];
    *mean_out = m_hi;
    *rstd_out = rstd;
}

tf_status cpu_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x, const void *residual,
                            void *in_out, void *y, const float *gamma, const float *beta,
                            float *mean, float *rstd, int rows, int cols, float eps,
                            tf_dtype dt, tf_error *err)
{
    (void)s;
    const char *op = "layernorm_fwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_layernorm_fwd(&cpu_checker, err, op, x, residual, in_out, y, gamma, beta, mean,
                                     rstd, rows, cols, eps, dt)))
        return st;
    if (rows == 0) return TF_OK;
    const float *xf = x, *rf = residual;
    float *inf_ = in_out, *yf = y;
    size_t c = (size_t)cols;
    CPU_PARALLEL_IF(be, cpu_par(be, (size_t)rows * c))
    {
        CPU_FOR_STATIC
        for (int r = 0; r < rows; r++)
            layernorm_row(xf + r * c, rf ? rf + r * c : NULL, inf_ ? inf_ + r * c : NULL,
                          yf + r * c, gamma, beta, mean + r, rstd + r, cols, eps);
    }
    return TF_OK;
}

/* A row's mean in double, as two floats hi + lo. */
CPU_CLONES
static void row_mean(const float *in, int cols, float *hi_lo)
{
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; j++) sum += (double)in[j];
    double mean = sum / cols;
    hi_lo[0] = (float)mean;
    hi_lo[1] = (float)(mean - (double)hi_lo[0]);
}

/* Columns per piece of the dgamma/dbeta pass (double accumulators on the stack). */
#define LN_CHUNK 64

/* dgamma[c0:c1] += sum_r dy * xhat, dbeta[c0:c1] += sum_r dy over `rows` rows;
 * means: [rows, 2] (hi, lo). */
CPU_CLONES
static void layernorm_param_grads(const float *dy, const float *in, const float *means,
                                  const float *rstd, int rows, int cols, int c0, int c1,
                                  float *dgamma, float *dbeta)
{
    double g[LN_CHUNK], b[LN_CHUNK];
    int w = c1 - c0;
    for (int j = 0; j < w; j++) g[j] = b[j] = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * (size_t)cols + c0;
        const float *inr = in + (size_t)r * (size_t)cols + c0;
        float m_hi = means[2 * r], m_lo = means[2 * r + 1], rs = rstd[r];
#pragma omp simd
        for (int j = 0; j < w; j++) {
            float xhat = ((inr[j] - m_hi) - m_lo) * rs;
            g[j] += (double)dyr[j] * (double)xhat;
            b[j] += (double)dyr[j];
        }
    }
    for (int j = 0; j < w; j++) {
        dgamma[c0 + j] = (float)((double)dgamma[c0 + j] + g[j]);
        dbeta[c0 + j] = (float)((double)dbeta[c0 + j] + b[j]);
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. */
CPU_CLONES
static void layernorm_row_bwd(const float *dy, const float *in, const float *gamma,
                              const float *mean_hi_lo, float rstd, float *dx, bool accumulate,
                              int cols)
{
    float m_hi = mean_hi_lo[0], m_lo = mean_hi_lo[1];
    double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int j = 0; j < cols; j++) {
        float g = dy[j] * gamma[j];
        float xhat = ((in[j] - m_hi) - m_lo) * rstd;
        sg += (double)g;
        sgx += (double)g * (double)xhat;
    }
    float a = (float)(sg / cols), b = (float)(sgx / cols);
    if (accumulate) {
#pragma omp simd
        for (int j = 0; j < cols; j++) {
            float xhat = ((in[j] - m_hi) - m_lo) * rstd;
            dx[j] += rstd * ((dy[j] * gamma[j] - a) - xhat * b);
        }
    } else {
#pragma omp simd
        for (int j = 0; j < cols; j++) {
            float xhat = ((in[j] - m_hi) - m_lo) * rstd;
            dx[j] = rstd * ((dy[j] * gamma[j] - a) - xhat * b);
        }
    }
}

/* Rows per group of the backward: the group's (hi, lo) means live in the
 * first thread's scratch. A constant, so results do not depend on the team. */
#define LN_GROUP_ROWS ((int)(CPU_SCRATCH_FLOATS / 2))

tf_status cpu_layernorm_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                            const float *gamma, const float *mean, const float *rstd, void *dx,
                            bool dx_accumulate, float *dgamma, float *dbeta, int rows,
                            int cols, tf_dtype dt, tf_error *err)
{
    (void)s;
    const char *op = "layernorm_bwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_layernorm_bwd(&cpu_checker, err, op, dy, in, gamma, mean, rstd, dx, dgamma, dbeta,
                                     rows, cols, dt)))
        return st;
    if (rows == 0) return TF_OK;
    size_t c = (size_t)cols;
    int chunks = (cols + LN_CHUNK - 1) / LN_CHUNK;
    float *means = be->scratch; /* [LN_GROUP_ROWS, 2] */
    pthread_mutex_lock(&be->scratch_lock);
    for (int g0 = 0; g0 < rows; g0 += LN_GROUP_ROWS) {
        int gr = rows - g0 < LN_GROUP_ROWS ? rows - g0 : LN_GROUP_ROWS;
        const float *dyf = (const float *)dy + (size_t)g0 * c;
        const float *inf_ = (const float *)in + (size_t)g0 * c;
        float *dxf = (float *)dx + (size_t)g0 * c;
        const float *rs = rstd + g0;
        CPU_PARALLEL_IF(be, cpu_par(be, (size_t)gr * c))
        {
            CPU_FOR_STATIC
            for (int r = 0; r < gr; r++) row_mean(inf_ + r * c, cols, means + 2 * r);
            /* parameter gradients before dx: dx may overwrite dy */
            CPU_FOR_STATIC
            for (int k = 0; k < chunks; k++) {
                int c0 = k * LN_CHUNK, c1 = c0 + LN_CHUNK < cols ? c0 + LN_CHUNK : cols;
                layernorm_param_grads(dyf, inf_, means, rs, gr, cols, c0, c1, dgamma, dbeta);
            }
            CPU_FOR_STATIC
            for (int r = 0; r < gr; r++)
                layernorm_row_bwd(dyf + r * c, inf_ + r * c, gamma, means + 2 * r, rs[r],
                                  dxf + r * c, dx_accumulate, cols);
        }
    }
    pthread_mutex_unlock(&be->scratch_lock);
    return TF_OK;
}
