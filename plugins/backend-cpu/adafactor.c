/* adafactor.c — backend-cpu Adafactor over flat f32 buffers, with the
 * arithmetic of transformers.optimization.Adafactor (4.46) as the Trainer
 * creates it for optim "adafactor" (tfcore/backend.h, tf_adafactor_desc), in
 * its order. torch computes each op in float; the means and the update's
 * norm are sums that torch reduces in its own order, so here they are summed
 * in double and rounded once (within an ulp of torch's). Scalars that reach
 * a float tensor op as Python floats (beta2t, 1 - beta2t, lr, -wd·lr) are
 * computed in double and rounded to float once, as torch does.
 *
 * Tensors are stepped one after another; within one, threads take rows
 * (row means, pieces of the update's norm, the update) or columns (column
 * means), every sum runs in an order fixed by the shape alone, so a step
 * gives the same bits on any team (resume is exact). */
#include <math.h>

#include "cpu.h"

typedef struct adafactor_consts {
    float beta2t, one_minus_beta2t; /* 1 - step^decay_rate, and 1 minus that */
    float eps, grad_scale, clip, lr;
    double lr_d;                    /* lr as given */
    float neg_lr_wd;                /* -(wd · lr); 0 when wd = 0 */
} adafactor_consts;

/* mean of one [rows] block of row second moments (exp_avg_sq_row.mean(dim=-1)) */
static float row_mean(const float *row, int64_t rows)
{
    double s = 0.0;
    for (int64_t r = 0; r < rows; r++) s += row[r];
    return (float)(s / (double)rows);
}

/* The update of one element before clipping. */
static inline float update_factored(float rf, float col, float g) { return (rf * (1.0f / sqrtf(col))) * g; }
static inline float update_plain(float v, float g) { return (1.0f / sqrtf(v)) * g; }

/* Pass 1 (factored): row and column means of g² + eps into the moments.
 * Threads take rows for the row sums and columns for the column sums; each
 * sum runs in one thread in index order, so any team gives the same bits. */
static void moments_factored(tf_backend *be, const float *grad, float *row, float *col, double *colsum,
                             int64_t rows, int64_t cols, const adafactor_consts *k)
{
    CPU_PARALLEL_IF(be, cpu_par(be, (size_t)rows * (size_t)cols))
    {
        size_t lo, hi;
        cpu_split((size_t)rows, cpu_team_size(), cpu_thread_id(), 1, &lo, &hi);
        for (size_t r = lo; r < hi; r++) {
            const float *g = grad + r * (size_t)cols;
            double rs = 0.0;
            for (int64_t c = 0; c < cols; c++) {
                float gi = g[c] * k->grad_scale;
                rs += gi * gi + k->eps;
            }
            row[r] = row[r] * k->beta2t + k->one_minus_beta2t * (float)(rs / (double)cols);
        }
        cpu_split((size_t)cols, cpu_team_size(), cpu_thread_id(), 16, &lo, &hi);
        for (size_t c = lo; c < hi; c++) colsum[c] = 0.0;
        for (int64_t r = 0; r < rows && lo < hi; r++) {
            const float *g = grad + r * cols;
            for (size_t c = lo; c < hi; c++) {
                float gi = g[c] * k->grad_scale;
                colsum[c] += gi * gi + k->eps;
            }
        }
        for (size_t c = lo; c < hi; c++)
            col[c] = col[c] * k->beta2t + k->one_minus_beta2t * (float)(colsum[c] / (double)rows);
    }
}

/* Pass 1 (not factored) and the sum of squares of the update (pass 2). */
static double moments_plain(const float *g, float *v, size_t n, const adafactor_consts *k)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * k->grad_scale;
        float vi = v[i] * k->beta2t + k->one_minus_beta2t * (gi * gi + k->eps);
        v[i] = vi;
        float u = update_plain(vi, gi);
        ss += (double)u * (double)u;
    }
    return ss;
}

/* Pass 2 (factored): sum of squares of the update of one [rows, cols]
 * block, in at most TF_AF_PIECES pieces of rows fixed by the shape (each
 * summed in order by one thread into piece[]), then the pieces in order. */
#define TF_AF_PIECES 1024
static double sumsq_factored(tf_backend *be, const float *grad, const float *row, const float *col, int64_t rows,
                             int64_t cols, double *piece, const adafactor_consts *k)
{
    float rmean = row_mean(row, rows);
    size_t R = (size_t)rows, pieces = R < TF_AF_PIECES ? R : TF_AF_PIECES;
    CPU_PARALLEL_IF(be, cpu_par(be, R * (size_t)cols))
    {
        size_t lo, hi;
        cpu_split(pieces, cpu_team_size(), cpu_thread_id(), 1, &lo, &hi);
        for (size_t q = lo; q < hi; q++) {
            double ss = 0.0;
            for (size_t r = q * R / pieces; r < (q + 1) * R / pieces; r++) {
                const float *g = grad + r * (size_t)cols;
                float rf = 1.0f / sqrtf(row[r] / rmean);
                for (int64_t c = 0; c < cols; c++) {
                    float u = update_factored(rf, col[c], g[c] * k->grad_scale);
                    ss += (double)u * (double)u;
                }
            }
            piece[q] = ss;
        }
    }
    double ss = 0.0;
    for (size_t q = 0; q < pieces; q++) ss += piece[q];
    return ss;
}

/* Pass 3: p += -(wd·lr)·p; p -= (upd / div) · lr, over elements [lo, hi)
 * of a [rows, cols] block (row/col NULL: not factored, v = state). */
CPU_CLONES
static void apply_span(float *p, const float *grad, const float *row, const float *col, const float *v,
                       float rmean, int64_t cols, size_t lo, size_t hi, float div, const adafactor_consts *kk)
{
    const adafactor_consts k = *kk;
    for (size_t i = lo; i < hi; i++) {
        float gi = grad[i] * k.grad_scale;
        float u;
        if (row) {
            size_t r = i / (size_t)cols, c = i % (size_t)cols;
            u = update_factored(1.0f / sqrtf(row[r] / rmean), col[c], gi);
        } else {
            u = update_plain(v[i], gi);
        }
        u = (u / div) * k.lr;
        float pi = p[i];
        if (k.neg_lr_wd != 0.0f) pi = pi + k.neg_lr_wd * pi;
        p[i] = pi - u;
    }
}

/* One tensor: its moments, the rms of its update, then the update. */
static void step_tensor(tf_backend *be, float *params, const float *grads, float *state, double *colsum,
                        const tf_adafactor_tensor *t, const adafactor_consts *k0)
{
    adafactor_consts k = *k0;
    size_t B = (size_t)t->batch, R = (size_t)t->rows, C = (size_t)t->cols, block = R * C, n = B * block;
    k.neg_lr_wd = t->weight_decay != 0.0f ? (float)(-((double)t->weight_decay * k0->lr_d)) : 0.0f;
    float *p = params + t->offset, *st = state + t->state_offset;
    const float *g = grads + t->offset;
    double ss = 0.0;
    if (t->factored) {
        float *row = st, *col = st + B * R;
        for (size_t b = 0; b < B; b++)
            moments_factored(be, g + b * block, row + b * R, col + b * C, colsum, t->rows, t->cols, &k);
        /* the workspace's column sums are done with: it holds the pieces now */
        for (size_t b = 0; b < B; b++)
            ss += sumsq_factored(be, g + b * block, row + b * R, col + b * C, t->rows, t->cols, colsum, &k);
    } else {
        ss = moments_plain(g, st, n, &k);
    }
    /* torch: update /= (norm(update) / numel**0.5 / clip_threshold).clamp(min=1) */
    float div = ((float)sqrt(ss) / (float)sqrt((double)n)) / k.clip;
    if (div < 1.0f) div = 1.0f; /* a NaN stays NaN, as clamp keeps it */
    for (size_t b = 0; b < B; b++) {
        const float *row = t->factored ? st + b * R : NULL, *col = t->factored ? st + B * R + b * C : NULL;
        const float *v = t->factored ? NULL : st + b * block;
        float rmean = row ? row_mean(row, t->rows) : 0.0f;
        float *pb = p + b * block;
        const float *gb = g + b * block;
        CPU_PARALLEL_IF(be, cpu_par(be, block))
        {
            size_t lo, hi;
            cpu_split(block, cpu_team_size(), cpu_thread_id(), 16, &lo, &hi);
            if (lo < hi) apply_span(pb, gb, row, col, v, rmean, t->cols, lo, hi, div, &k);
        }
    }
}

tf_status cpu_adafactor(tf_backend *be, tf_stream *s, float *params, const float *grads, float *state,
                        const tf_adafactor_desc *d, tf_error *err)
{
    (void)s;
    const char *op = "adafactor";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_adafactor(&cpu_checker, err, op, params, grads, state, d)))
        return st;
    if (d->ntensors == 0) return TF_OK;
    double beta2t = 1.0 - pow((double)d->step, (double)d->decay_rate);
    adafactor_consts k = {
        .beta2t = (float)beta2t,
        .one_minus_beta2t = (float)(1.0 - beta2t),
        .eps = d->eps,
        .grad_scale = d->grad_scale,
        .clip = d->clip_threshold,
        .lr = (float)d->lr,
        .lr_d = d->lr,
    };
    for (size_t i = 0; i < d->ntensors; i++)
        step_tensor(be, params, grads, state, d->workspace, &d->tensors[i], &k);
    return TF_OK;
}
