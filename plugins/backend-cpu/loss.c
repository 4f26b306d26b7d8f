/* loss.c — backend-cpu softmax cross-entropy, as torch's
 * F.cross_entropy(logits, labels, ignore_index=..., reduction="mean"):
 *   nll[r] = logsumexp(logits[r, :]) - logits[r, label[r]]
 *   loss   = sum of nll over counted rows / number of counted rows
 * (0 when no row counts, where torch gives NaN: the header asks for 0).
 *   dlogits[r, j] = grad_scale * (softmax(logits[r])[j] - [j == label]) / count
 * and 0 on ignored rows. Labels are checked before anything is written: a
 * label outside [0, classes) that is not ignore_index is TF_ERR_DATA naming
 * it and its row.
 *
 * cpu_cross_entropy_ex adds label smoothing ε, as transformers' LabelSmoother
 * (tfcore/backend.h, tf_cross_entropy_desc):
 *   loss[r] = (1-ε)·nll[r] + ε/classes · sum_j(-log softmax(logits[r])[j])
 *   dlogits[r, j] = w · (softmax[j] - (1-ε)·[j == label] - ε/classes)
 * ε = 0 takes exactly the unsmoothed path.
 *
 * The loss is summed in double over pieces fixed by the row count alone, so
 * it has the same bits whatever the thread count. dlogits may alias logits
 * (each row's statistics are taken before the row is overwritten). */
#include <math.h>

#include "cpu.h"
#include "cpu_math.h"

/* The loss sum is cut into this many pieces, whatever the team size. */
#define CE_PIECES 256

CPU_CLONES
static float row_max(const float *x, int n)
{
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

CPU_CLONES
static double row_sum_exp(const float *x, int n, float mx)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; j++) s += (double)cpu_expf(x[j] - mx);
    return s;
}

CPU_CLONES
static void row_grad(const float *x, int n, float mx, float log_sum, float w, float *dx)
{
#pragma omp simd
    for (int j = 0; j < n; j++) dx[j] = cpu_expf((x[j] - mx) - log_sum) * w;
}

CPU_CLONES
static double row_sum(const float *x, int n)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; j++) s += (double)x[j];
    return s;
}

/* The loss of one row (eps = 0: its nll); writes its gradient row when
 * dx != NULL. As torch's log_softmax, the row maximum comes off first:
 * (x - max) is exact, and log p = (x - max) - log(sum) keeps its precision
 * even when |x| is large. */
static double ce_row(const float *x, int classes, int label, float eps, float w, float *dx)
{
    float mx = row_max(x, classes);
    double log_sum = log(row_sum_exp(x, classes, mx));
    double nll = log_sum - ((double)x[label] - (double)mx);
    /* sum_j -log p_j = classes·log_sum - sum_j (x_j - max) */
    double smooth = eps > 0.0f ? (double)classes * log_sum -
                                     (row_sum(x, classes) - (double)classes * (double)mx)
                               : 0.0;
    if (dx) {
        float ls = (float)log_sum;
        float p_label = cpu_expf((x[label] - mx) - ls);
        row_grad(x, classes, mx, ls, w, dx);
        if (eps > 0.0f) {
            float u = eps / (float)classes * w; /* the uniform target's share */
            for (int j = 0; j < classes; j++) dx[j] -= u;
            dx[label] -= (1.0f - eps) * w;
        } else {
            dx[label] = (p_label - 1.0f) * w;
        }
    }
    if (eps > 0.0f) return (1.0 - (double)eps) * nll + (double)eps * smooth / (double)classes;
    return nll;
}

static tf_status cross_entropy(tf_backend *be, const char *op, const void *logits,
                               int64_t ld_logits, tf_dtype dt, int rows, int classes,
                               const int32_t *labels, int ignore_index, float eps, float *loss,
                               void *dlogits, float grad_scale, tf_error *err)
{
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_cross_entropy(&cpu_checker, err, op, logits, ld_logits, dt, rows, classes, labels,
                                     loss)))
        return st;
    /* the labels are host memory here: each is checked as it is read */
    long long count = 0;
    for (int r = 0; r < rows; r++) {
        int lab = labels[r];
        if (lab == ignore_index) continue;
        if (lab < 0 || lab >= classes)
            return cpu_fail(err, TF_ERR_DATA, op,
                            "label %d at row %d is outside [0, %d) and is not ignore_index %d",
                            lab, r, classes, ignore_index);
        count++;
    }
    const float *x = logits;
    float *dx = dlogits;
    size_t ld = (size_t)ld_logits;
    float w = count > 0 ? (float)((double)grad_scale / (double)count) : 0.0f;
    double part[CE_PIECES];
    CPU_PARALLEL_IF(be, cpu_par(be, (size_t)rows * (size_t)classes))
    {
        CPU_FOR_STATIC
        for (int p = 0; p < CE_PIECES; p++) {
            size_t lo, hi;
            cpu_split((size_t)rows, CE_PIECES, p, 1, &lo, &hi);
            double sum = 0.0;
            for (size_t r = lo; r < hi; r++) {
                const float *xr = x + r * ld;
                float *dr = dx ? dx + r * ld : NULL;
                if (labels[r] == ignore_index) {
                    if (dr)
                        for (int j = 0; j < classes; j++) dr[j] = 0.0f;
                    continue;
                }
                sum += ce_row(xr, classes, labels[r], eps, w, dr);
            }
            part[p] = sum;
        }
    }
    double total = 0.0;
    for (int p = 0; p < CE_PIECES; p++) total += part[p];
    *loss = count > 0 ? (float)(total / (double)count) : 0.0f;
    return TF_OK;
}

tf_status cpu_cross_entropy(tf_backend *be, tf_stream *s, const void *logits, int64_t ld_logits,
                            tf_dtype dt, int rows, int classes, const int32_t *labels,
                            int ignore_index, float *loss, void *dlogits, float grad_scale,
                            tf_error *err)
{
    (void)s;
    return cross_entropy(be, "cross_entropy", logits, ld_logits, dt, rows, classes, labels,
                         ignore_index, 0.0f, loss, dlogits, grad_scale, err);
}

tf_status cpu_cross_entropy_ex(tf_backend *be, tf_stream *s, const tf_cross_entropy_desc *d,
                               tf_error *err)
{
    (void)s;
    const char *op = "cross_entropy_ex";
    tf_status st;
    if ((st = tf_check_cross_entropy_desc(&cpu_checker, err, op, d))) return st;
    return cross_entropy(be, op, d->logits, d->ld_logits, d->dt, d->rows, d->classes, d->labels,
                         d->ignore_index, d->label_smoothing, d->loss, d->dlogits,
                         d->grad_scale, err);
}
