/* cross_entropy.cu — backend-cuda fused softmax cross-entropy, as torch's
 * F.cross_entropy(logits, labels, ignore_index=..., reduction="mean") and as
 * backend-cpu computes it:
 *   nll[r]  = log(sum_j exp(x[r, j] - max_r)) - (x[r, label] - max_r)
 *   loss    = sum of nll over counted rows / count   (0 when count == 0)
 *   dlogits[r, j] = grad_scale / count * (softmax(x[r])[j] - [j == label]),
 *                   0 on ignored rows.
 * With label smoothing ε > 0 (transformers' LabelSmoother) a row's loss is
 *   (1-ε)·nll[r] + ε/classes · (classes·log_sum - sum_j (x[r, j] - max_r))
 * and its gradient w·(softmax - (1-ε)·[j == label] - ε/classes).
 * The row's sum of exponentials and its log are taken in double; the
 * gradient is computed in float from the float log-sum, as backend-cpu does.
 *
 * Three kernels, deterministic without atomics:
 *   1. one block counts the counted rows          -> workspace count
 *   2. one block per row: max, sum of exp, nll    -> workspace nll [rows] f64,
 *      and the gradient row (which needs the count from kernel 1)
 *   3. one block sums nll in a fixed order        -> *loss
 * dlogits may alias logits: a row's reads (max, sum, x[label]) all happen
 * before the barriers that precede its writes.
 *
 * A label outside [0, classes) that is not ignore_index is an input error
 * backend-cpu reports before computing; here the labels are in device
 * memory and the op must not sync, so such a row makes its nll NaN (hence
 * *loss NaN) and its gradient row NaN, which the trainer's finite checks see. */
#include <float.h>
#include <math.h>

#include "fused_kernels.h"

#define CE_REDUCE_THREADS 1024 /* the count and final-sum kernels: one block */
#define CE_ROW_MAX_THREADS 512

/* Workspace layout: nll [rows] f64, then the count (int64). */
extern "C" size_t tfc_cross_entropy_workspace_bytes(int rows, int classes)
{
    (void)classes;
    size_t n = rows > 0 ? (size_t)rows : 0;
    size_t b = n * sizeof(double) + sizeof(long long);
    return (b + 255) / 256 * 256;
}

/* 1. *count = number of rows whose label is not ignore_index. */
__global__ void __launch_bounds__(CE_REDUCE_THREADS)
    ce_count(const int32_t *__restrict__ labels, int rows, int ignore_index,
             long long *__restrict__ count)
{
    __shared__ long long red[32];
    long long c = 0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) c += labels[r] != ignore_index;
    c = tfcb_block_sum(c, red);
    if (threadIdx.x == 0) *count = c;
}

/* 2. Row blockIdx.x: nll[row] (0 if ignored, NaN if the label is invalid)
 * and, when dx != NULL, its gradient row. x, dx: [rows, ld]. */
template <typename T>
__global__ void __launch_bounds__(CE_ROW_MAX_THREADS)
    ce_rows(const T *x, int64_t ld, int classes, const int32_t *__restrict__ labels,
            int ignore_index, float eps, const long long *__restrict__ count, float grad_scale,
            T *dx, double *__restrict__ nll)
{
    __shared__ double redd[32];
    __shared__ float redf[32];
    const int r = blockIdx.x;
    const int64_t base = (int64_t)r * ld;
    const int label = labels[r];
    if (label == ignore_index) { /* uniform over the block */
        if (dx)
            for (int j = threadIdx.x; j < classes; j += blockDim.x)
                dx[base + j] = tfcb_from_f32<T>(0.0f);
        if (threadIdx.x == 0) nll[r] = 0.0;
        return;
    }
    const bool valid = label >= 0 && label < classes;
    /* read before any barrier, so before the row may be overwritten */
    const float x_label = valid ? tfcb_to_f32<T>(x[base + label]) : NAN;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < classes; j += blockDim.x) mx = fmaxf(mx, tfcb_to_f32<T>(x[base + j]));
    mx = tfcb_block_max(mx, redf);
    double sum = 0.0;
    for (int j = threadIdx.x; j < classes; j += blockDim.x)
        sum += (double)expf(tfcb_to_f32<T>(x[base + j]) - mx);
    const double log_sum = log(tfcb_block_sum(sum, redd));
    double row_loss = log_sum - ((double)x_label - (double)mx);
    if (eps > 0.0f) { /* eps is uniform over the grid: every thread reaches the barrier */
        double xs = 0.0;
        for (int j = threadIdx.x; j < classes; j += blockDim.x) xs += (double)tfcb_to_f32<T>(x[base + j]);
        xs = tfcb_block_sum(xs, redd);
        double smooth = (double)classes * log_sum - (xs - (double)classes * (double)mx);
        row_loss = (1.0 - (double)eps) * row_loss + (double)eps * smooth / (double)classes;
    }
    if (threadIdx.x == 0) nll[r] = valid ? row_loss : (double)NAN;
    if (!dx) return;
    const long long n = *count; /* >= 1: this row counts */
    const float w = (float)((double)grad_scale / (double)n);
    const float ls = (float)log_sum;
    for (int j = threadIdx.x; j < classes; j += blockDim.x) {
        float p = expf((tfcb_to_f32<T>(x[base + j]) - mx) - ls);
        float g = !valid ? NAN
                  : eps > 0.0f ? p * w - eps / (float)classes * w - (j == label ? (1.0f - eps) * w : 0.0f)
                               : (j == label ? p - 1.0f : p) * w;
        dx[base + j] = tfcb_from_f32<T>(g);
    }
}

/* 3. *loss = (sum over rows of nll, in a fixed order) / count, 0 if count == 0. */
__global__ void __launch_bounds__(CE_REDUCE_THREADS)
    ce_final(const double *__restrict__ nll, int rows, const long long *__restrict__ count,
             float *__restrict__ loss)
{
    __shared__ double red[32];
    double s = 0.0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) s += nll[r];
    s = tfcb_block_sum(s, red);
    if (threadIdx.x == 0) {
        long long n = *count;
        *loss = n > 0 ? (float)(s / (double)n) : 0.0f;
    }
}

template <typename T>
static cudaError_t ce_launch(cudaStream_t s, const void *logits, int64_t ld, int rows,
                             int classes, const int32_t *labels, int ignore_index, float eps,
                             float *loss, void *dlogits, float grad_scale, void *workspace)
{
    double *nll = (double *)workspace;                                     /* [rows] */
    long long *count = (long long *)((char *)workspace + (size_t)rows * sizeof(double)); /* [1] */
    TFCB_LAUNCH(ce_count, 1, CE_REDUCE_THREADS, 0, s)(labels, rows, ignore_index, count);
    TFCB_CHECK_LAUNCH();
    if (rows > 0) {
        int threads = (classes + 31) / 32 * 32;
        threads = threads > CE_ROW_MAX_THREADS ? CE_ROW_MAX_THREADS : threads;
        TFCB_LAUNCH(ce_rows<T>, rows, threads, 0, s)
        ((const T *)logits, ld, classes, labels, ignore_index, eps, count, grad_scale,
         (T *)dlogits, nll);
        TFCB_CHECK_LAUNCH();
    }
    TFCB_LAUNCH(ce_final, 1, CE_REDUCE_THREADS, 0, s)(nll, rows, count, loss);
    TFCB_CHECK_LAUNCH();
    return cudaSuccess;
}

extern "C" cudaError_t tfc_cross_entropy(cudaStream_t s, const void *logits, int64_t ld_logits,
                                         tf_dtype dt, int rows, int classes,
                                         const int32_t *labels, int ignore_index,
                                         float label_smoothing, float *loss, void *dlogits,
                                         float grad_scale, void *workspace)
{
    const float eps = label_smoothing;
    if (!(eps >= 0.0f && eps <= 1.0f) || rows < 0 || classes < 1 || ld_logits < classes || !loss || !workspace ||
        ((uintptr_t)workspace & 7u) != 0 || (rows > 0 && (!logits || !labels)))
        return cudaErrorInvalidValue;
    switch (dt) {
    case TF_DTYPE_F32:
        return ce_launch<float>(s, logits, ld_logits, rows, classes, labels, ignore_index, eps,
                                loss, dlogits, grad_scale, workspace);
    case TF_DTYPE_F16:
        return ce_launch<__half>(s, logits, ld_logits, rows, classes, labels, ignore_index, eps,
                                 loss, dlogits, grad_scale, workspace);
    case TF_DTYPE_BF16:
        return ce_launch<__nv_bfloat16>(s, logits, ld_logits, rows, classes, labels,
                                        ignore_index, eps, loss, dlogits, grad_scale, workspace);
    default:
        return cudaErrorInvalidValue;
    }
}
