/* optimizer.c — backend-cpu AdamW over flat f32 buffers, with the arithmetic
 * of torch.optim.AdamW (torch 1.13, _single_tensor_adamw), in its order:
 *   g  = grad * grad_scale
 *   p *= 1 - lr * wd                          (decoupled weight decay)
 *   m  = m * beta1 + (1 - beta1) * g
 *   v  = v * beta2 + ((1 - beta2) * g) * g
 *   denom = sqrt(v) / sqrt(1 - beta2^step) + eps
 *   p  = p + (-(lr / (1 - beta1^step)) * m) / denom
 * The scalar factors are computed in double and rounded to float once, as
 * Python floats reaching a float tensor op are.
 *
 * cpu_adamw_ex with TF_ADAMW_HF has the arithmetic of transformers'
 * AdamW (transformers.optimization.AdamW, 4.46, optim "adamw_hf"), in its order:
 *   m  = m * beta1 + (1 - beta1) * g
 *   v  = v * beta2 + ((1 - beta2) * g) * g
 *   denom = sqrt(v) + eps                     (eps before the bias correction)
 *   p  = p + (-(lr * sqrt(1 - beta2^step) / (1 - beta1^step))) * (m / denom)
 *   p  = p + (-(lr * wd)) * p                 (weight decay after the update, wd > 0)
 *
 * Segments [offset, offset+count) must not overlap (an element updated twice
 * would be a silent error); they may come in any order. */
#include <math.h>

#include "cpu.h"

typedef struct adamw_consts {
    float decay;      /* 1 - lr * wd */
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float bc2_sqrt;   /* sqrt(1 - beta2^step) */
    float eps;
    float neg_step;   /* -lr / (1 - beta1^step); HF: -lr * sqrt(1 - beta2^step) / (1 - beta1^step) */
    float grad_scale;
    float neg_lr_wd;  /* HF: -lr * wd */
} adamw_consts;

CPU_CLONES
static void adamw_span(float *p, const float *g, float *m, float *v, size_t n,
                       const adamw_consts *c)
{
    const adamw_consts k = *c;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * k.grad_scale;
        float pi = p[i] * k.decay;
        float mi = m[i] * k.beta1 + k.one_minus_beta1 * gi;
        float vi = v[i] * k.beta2 + (k.one_minus_beta2 * gi) * gi;
        float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
        p[i] = pi + (k.neg_step * mi) / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

CPU_CLONES
static void adamw_span_hf(float *p, const float *g, float *m, float *v, size_t n,
                          const adamw_consts *c)
{
    const adamw_consts k = *c;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * k.grad_scale;
        float mi = m[i] * k.beta1 + k.one_minus_beta1 * gi;
        float vi = v[i] * k.beta2 + (k.one_minus_beta2 * gi) * gi;
        float denom = sqrtf(vi) + k.eps;
        float pi = p[i] + k.neg_step * (mi / denom);
        if (k.neg_lr_wd != 0.0f) pi = pi + k.neg_lr_wd * pi;
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

static tf_status adamw(tf_backend *be, const char *op, float *params, const float *grads, float *m,
                       float *v, const tf_adamw_segment *segs, size_t nsegs,
                       const tf_adamw_hyper *h, tf_adamw_rule rule, tf_error *err)
{
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) ||
        (st = tf_check_adamw(&cpu_checker, err, op, params, grads, m, v, segs, nsegs, h)))
        return st;
    if (nsegs == 0) return TF_OK;

    double lr = h->lr, b1 = h->beta1, b2 = h->beta2;
    double bc1 = 1.0 - pow(b1, (double)h->step);
    double bc2 = 1.0 - pow(b2, (double)h->step);
    size_t total = 0;
    for (size_t i = 0; i < nsegs; i++) total += segs[i].count;
    CPU_PARALLEL_IF(be, cpu_par(be, total))
    {
        for (size_t i = 0; i < nsegs; i++) {
            const tf_adamw_segment *sg = &segs[i];
            adamw_consts c = {
                .decay = (float)(1.0 - lr * (double)sg->weight_decay),
                .beta1 = h->beta1,
                .one_minus_beta1 = (float)(1.0 - b1),
                .beta2 = h->beta2,
                .one_minus_beta2 = (float)(1.0 - b2),
                .bc2_sqrt = (float)sqrt(bc2),
                .eps = h->eps,
                .neg_step = rule == TF_ADAMW_HF ? (float)(-(lr * sqrt(bc2) / bc1))
                                                : (float)(-(lr / bc1)),
                .grad_scale = h->grad_scale,
                .neg_lr_wd = sg->weight_decay > 0.0f ? (float)(-(lr * (double)sg->weight_decay))
                                                     : 0.0f,
            };
            size_t lo, hi;
            cpu_split(sg->count, cpu_team_size(), cpu_thread_id(), 16, &lo, &hi);
            size_t o = sg->offset + lo;
            if (lo < hi && rule == TF_ADAMW_HF)
                adamw_span_hf(params + o, grads + o, m + o, v + o, hi - lo, &c);
            else if (lo < hi)
                adamw_span(params + o, grads + o, m + o, v + o, hi - lo, &c);
        }
    }
    return TF_OK;
}

tf_status cpu_adamw(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                    float *v, const tf_adamw_segment *segs, size_t nsegs,
                    const tf_adamw_hyper *h, tf_error *err)
{
    (void)s;
    return adamw(be, "adamw", params, grads, m, v, segs, nsegs, h, TF_ADAMW_TORCH, err);
}

tf_status cpu_adamw_ex(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                       float *v, const tf_adamw_segment *segs, size_t nsegs,
                       const tf_adamw_desc *d, tf_error *err)
{
    (void)s;
    const char *op = "adamw_ex";
    tf_status st;
    if ((st = tf_check_adamw_desc(&cpu_checker, err, op, d))) return st;
    return adamw(be, op, params, grads, m, v, segs, nsegs, &d->hyper, d->rule, err);
}
