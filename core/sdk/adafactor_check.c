/* adafactor_check.c — the sizes and argument checks every backend's
 * adafactor slot uses (tfcore/backend.h), written once. */
#include <math.h>
#include <stdint.h>

#include "tfcore/backend.h"

size_t tf_adafactor_state_count(const tf_adafactor_tensor *t)
{
    size_t b = (size_t)t->batch, r = (size_t)t->rows, c = (size_t)t->cols;
    return t->factored ? b * (r + c) : b * r * c;
}

size_t tf_adafactor_workspace_bytes(const tf_adafactor_tensor *tensors, size_t n)
{
    size_t cols = 1024;
    for (size_t i = 0; i < n; i++)
        if (tensors[i].factored && (size_t)tensors[i].cols > cols) cols = (size_t)tensors[i].cols;
    return (cols + 2) * sizeof(double);
}

/* a*b*c without overflow (each >= 1), or 0 */
static size_t product3(int64_t a, int64_t b, int64_t c)
{
    size_t x = (size_t)a, y = (size_t)b, z = (size_t)c;
    if (y > SIZE_MAX / x) return 0;
    if (z > SIZE_MAX / (x * y)) return 0;
    return x * y * z;
}

static bool overlap(size_t a, size_t na, size_t b, size_t nb)
{
    return na && nb && a < b + nb && b < a + na;
}

tf_status tf_adafactor_check(const tf_adafactor_desc *d, tf_error *err)
{
    if (!(isfinite(d->lr) && d->lr >= 0.0))
        return tf_error_set(err, TF_ERR_RUNTIME, "lr must be finite and >= 0, got %g", d->lr);
    if (!(isfinite(d->eps) && d->eps >= 0.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "eps must be finite and >= 0, got %g", (double)d->eps);
    if (!(isfinite(d->clip_threshold) && d->clip_threshold > 0.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "clip_threshold must be finite and > 0, got %g",
                            (double)d->clip_threshold);
    if (!(isfinite(d->decay_rate) && d->decay_rate < 0.0f))
        return tf_error_set(err, TF_ERR_RUNTIME, "decay_rate must be finite and < 0, got %g",
                            (double)d->decay_rate);
    if (!isfinite(d->grad_scale))
        return tf_error_set(err, TF_ERR_RUNTIME, "grad_scale must be finite, got %g", (double)d->grad_scale);
    if (d->step < 1) return tf_error_set(err, TF_ERR_RUNTIME, "step is 1-based, got %lld", (long long)d->step);
    if (d->ntensors && !d->tensors) return tf_error_set(err, TF_ERR_RUNTIME, "%zu tensors but no list", d->ntensors);
    for (size_t i = 0; i < d->ntensors; i++) {
        const tf_adafactor_tensor *t = &d->tensors[i];
        if (t->batch < 1 || t->rows < 1 || t->cols < 1)
            return tf_error_set(err, TF_ERR_RUNTIME, "tensor %zu: shape [%lld, %lld, %lld] has an empty dimension", i,
                                (long long)t->batch, (long long)t->rows, (long long)t->cols);
        size_t n = product3(t->batch, t->rows, t->cols);
        if (!n || n > SIZE_MAX - t->offset)
            return tf_error_set(err, TF_ERR_RUNTIME, "tensor %zu: offset %zu + its elements overflow", i, t->offset);
        size_t ns = n; /* the factored state is smaller than the tensor: no overflow */
        if (t->factored) ns = tf_adafactor_state_count(t);
        if (ns > SIZE_MAX - t->state_offset)
            return tf_error_set(err, TF_ERR_RUNTIME, "tensor %zu: state offset %zu + its state overflow", i,
                                t->state_offset);
        if (!isfinite(t->weight_decay))
            return tf_error_set(err, TF_ERR_RUNTIME, "tensor %zu: weight_decay is %g", i, (double)t->weight_decay);
    }
    /* an element or a state entry updated twice would be a silent error
     * (n is the number of parameter tensors: a few hundred) */
    for (size_t i = 0; i < d->ntensors; i++)
        for (size_t j = i + 1; j < d->ntensors; j++) {
            const tf_adafactor_tensor *a = &d->tensors[i], *b = &d->tensors[j];
            size_t na = product3(a->batch, a->rows, a->cols), nb = product3(b->batch, b->rows, b->cols);
            if (overlap(a->offset, na, b->offset, nb))
                return tf_error_set(err, TF_ERR_RUNTIME, "tensors %zu and %zu overlap in params", i, j);
            if (overlap(a->state_offset, tf_adafactor_state_count(a), b->state_offset, tf_adafactor_state_count(b)))
                return tf_error_set(err, TF_ERR_RUNTIME, "tensors %zu and %zu overlap in state", i, j);
        }
    size_t need = tf_adafactor_workspace_bytes(d->tensors, d->ntensors);
    if (d->ntensors && (!d->workspace || d->workspace_bytes < need))
        return tf_error_set(err, TF_ERR_RUNTIME, "workspace of %zu bytes, these tensors need %zu",
                            d->workspace ? d->workspace_bytes : 0, need);
    return TF_OK;
}
