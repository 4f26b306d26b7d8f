/* adafactor_ops.c — the glue of Adafactor (adafactor.cu): libtfcore's
 * checks, backend-cpu's scalars, then the tensors' steps queued in order. */
#include <math.h>

#include "backend_cuda.h"

tf_status cuda_adafactor(tf_backend *be, tf_stream *s, float *params, const float *grads, float *state,
                         const tf_adafactor_desc *d, tf_error *err)
{
    const char *op = "adafactor";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_adafactor(&cuda_checker, err, op, params, grads, state, d)))
        return rc;
    if (d->ntensors == 0) return TF_OK;
    double beta2t = 1.0 - pow((double)d->step, (double)d->decay_rate);
    tfc_adafactor_scalars k = {
        .beta2t = (float)beta2t,
        .one_minus_beta2t = (float)(1.0 - beta2t),
        .eps = d->eps,
        .grad_scale = d->grad_scale,
        .clip = d->clip_threshold,
        .lr = (float)d->lr,
        .lr_d = d->lr,
    };
    for (size_t i = 0; i < d->ntensors; i++) {
        const tf_adafactor_tensor *t = &d->tensors[i];
        rc = cuda_launched(err, op, tfc_adafactor_tensor(st->s, params, grads, state, t, &k, d->workspace),
                           "tensor %zu [%lld, %lld, %lld]", i, (long long)t->batch, (long long)t->rows,
                           (long long)t->cols);
        if (rc) return rc;
    }
    return TF_OK;
}
