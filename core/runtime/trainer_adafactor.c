/* trainer_adafactor.c — the trainer's Adafactor (training.optim =
 * "adafactor"): the parameter tensors as the backend's adafactor slot sees
 * them, their state, and one step (tfcore/backend.h, tf_adafactor_desc).
 *
 * As the Trainer creates it: Adafactor(groups, lr=learning_rate,
 * scale_parameter=False, relative_step=False) with Adafactor's defaults
 * eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None; the
 * groups give weight_decay to every parameter but biases and LayerNorm
 * weights (no_decay), and the LR schedule sets lr each step. eps[1] is read
 * only with scale_parameter, so it never matters here.
 *
 * State layout (optimizer.safetensors "adafactor_state", flat f32): the
 * tensors in the model's parameter order, each factored tensor's row means
 * then its column means, an unfactored one's second moment. */
#include <stdlib.h>

#include "trainer_internal.h"

#define ADAFACTOR_EPS 1e-30f
#define ADAFACTOR_CLIP 1.0f
#define ADAFACTOR_DECAY (-0.8f)

tf_status tf_trainer_adafactor_setup(tf_trainer *t, tf_error *err)
{
    const tf_param_info *p;
    size_t n;
    t->mvt->params(t->model, &p, &n);
    t->af_tensors = calloc(n ? n : 1, sizeof *t->af_tensors);
    if (!t->af_tensors) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    t->af_ntensors = n;
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        const tf_param_info *q = &p[i];
        tf_adafactor_tensor *a = &t->af_tensors[i];
        /* torch: factored when ndim >= 2, row = shape[:-1], col = shape[:-2] + shape[-1:] */
        a->offset = q->offset;
        a->factored = q->ndim >= 2;
        a->batch = 1;
        if (a->factored) {
            for (int d = 0; d < q->ndim - 2; d++) a->batch *= q->shape[d];
            a->rows = q->shape[q->ndim - 2];
            a->cols = q->shape[q->ndim - 1];
        } else {
            a->rows = 1;
            a->cols = (int64_t)q->numel;
        }
        if ((size_t)(a->batch * a->rows * a->cols) != q->numel || q->numel == 0)
            return tf_error_set(err, TF_ERR_RUNTIME, "parameter %s: shape does not hold its %zu elements", q->name,
                                q->numel);
        a->weight_decay = q->no_decay ? 0.0f : (float)t->args->weight_decay;
        a->state_offset = ns;
        ns += tf_adafactor_state_count(a);
    }
    t->af_state_n = ns;
    t->af_workspace_bytes = tf_adafactor_workspace_bytes(t->af_tensors, n);
    tf_status st = t->bvt->alloc(t->be, ns * sizeof(float), TF_MEM_DEVICE, (void **)&t->af_state, err);
    if (!st) st = t->bvt->alloc(t->be, t->af_workspace_bytes, TF_MEM_DEVICE, &t->af_workspace, err);
    if (!st && (st = t->bvt->memset(t->be, t->af_state, 0, ns * sizeof(float), NULL)))
        tf_error_set(err, st, "memset failed");
    return st;
}

void tf_trainer_adafactor_free(tf_trainer *t)
{
    if (t->af_state) t->bvt->free(t->be, t->af_state, TF_MEM_DEVICE);
    if (t->af_workspace) t->bvt->free(t->be, t->af_workspace, TF_MEM_DEVICE);
    free(t->af_tensors);
    t->af_state = NULL;
    t->af_workspace = NULL;
    t->af_tensors = NULL;
}

tf_status tf_trainer_adafactor_step(tf_trainer *t, double lr, int64_t step, tf_error *err)
{
    tf_adafactor_desc d = {
        .size = sizeof d,
        .lr = lr,
        .eps = ADAFACTOR_EPS,
        .clip_threshold = ADAFACTOR_CLIP,
        .decay_rate = ADAFACTOR_DECAY,
        .grad_scale = 1.0f,
        .step = step,
        .tensors = t->af_tensors,
        .ntensors = t->af_ntensors,
        .workspace = t->af_workspace,
        .workspace_bytes = t->af_workspace_bytes,
    };
    return t->bvt->adafactor(t->be, NULL, t->buf.params, t->buf.grads, t->af_state, &d, err);
}
