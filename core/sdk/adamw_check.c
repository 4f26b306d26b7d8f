/* adamw_check.c — the argument checks every backend's adamw slot makes
 * (tfcore/backend.h), written once. */
#include <math.h>
#include <stdint.h>

#include "tfcore/backend.h"

tf_status tf_adamw_check_hyper(const tf_adamw_hyper *h, tf_error *err)
{
    if (!(isfinite(h->lr) && h->lr >= 0.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "lr must be finite and >= 0, got %g", (double)h->lr);
    if (!(h->beta1 >= 0.0f && h->beta1 < 1.0f) || !(h->beta2 >= 0.0f && h->beta2 < 1.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "betas must be in [0, 1), got (%g, %g)", (double)h->beta1,
                            (double)h->beta2);
    if (!(isfinite(h->eps) && h->eps >= 0.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "eps must be finite and >= 0, got %g", (double)h->eps);
    if (h->step < 1) return tf_error_set(err, TF_ERR_RUNTIME, "step is 1-based, got %lld", (long long)h->step);
    if (!isfinite(h->grad_scale))
        return tf_error_set(err, TF_ERR_RUNTIME, "grad_scale must be finite, got %g", (double)h->grad_scale);
    return TF_OK;
}

tf_status tf_adamw_check_segments(const tf_adamw_segment *segs, size_t nsegs, tf_error *err)
{
    bool sorted = true;
    for (size_t i = 0; i < nsegs; i++) {
        if (segs[i].count > SIZE_MAX - segs[i].offset)
            return tf_error_set(err, TF_ERR_RUNTIME, "segment %zu: offset %zu + count %zu overflows", i,
                                segs[i].offset, segs[i].count);
        if (!isfinite(segs[i].weight_decay))
            return tf_error_set(err, TF_ERR_RUNTIME, "segment %zu: weight_decay is %g", i,
                                (double)segs[i].weight_decay);
        if (i > 0 && segs[i].offset < segs[i - 1].offset + segs[i - 1].count) sorted = false;
    }
    if (sorted) return TF_OK;
    /* out of order: check every pair (n is the number of parameter groups) */
    for (size_t i = 0; i < nsegs; i++)
        for (size_t j = i + 1; j < nsegs; j++) {
            const tf_adamw_segment *a = &segs[i], *b = &segs[j];
            if (a->count && b->count && a->offset < b->offset + b->count && b->offset < a->offset + a->count)
                return tf_error_set(err, TF_ERR_RUNTIME, "segments %zu [%zu, %zu) and %zu [%zu, %zu) overlap", i,
                                    a->offset, a->offset + a->count, j, b->offset, b->offset + b->count);
        }
    return TF_OK;
}
