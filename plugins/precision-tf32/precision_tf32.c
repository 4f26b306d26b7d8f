/* precision_tf32.c — the "tf32" precision plugin: f32 activations and
 * storage, GEMMs on TF32 tensor cores (10-bit mantissa inputs, fp32
 * accumulate: torch.backends.cuda.matmul.allow_tf32 = True), no loss
 * scaling. It has no config keys of its own; gradients are treated exactly
 * as precision-fp32 treats them. */
#include <stdlib.h>

#include "tfcore/plugin.h"
#include "tfcore/precision.h"

struct tf_precision {
    tf_scaler_state state; /* scale stays 1; counts kept so checkpoints look alike */
};

static tf_status tf32_check_config(tf_section *section, tf_error *err)
{
    (void)section; /* `plugin` is read by the core; tf32 has nothing else */
    return TF_OK;
}

static tf_status tf32_create(tf_section *section, tf_precision **out, tf_error *err)
{
    tf_status st = tf32_check_config(section, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "precision tf32: out of memory");
    p->state.scale = 1.0;
    *out = p;
    return TF_OK;
}

static void tf32_destroy(tf_precision *p) { free(p); }
static tf_dtype tf32_compute_dtype(tf_precision *p) { return TF_DTYPE_F32; }
static tf_matmul_mode tf32_matmul_mode(tf_precision *p) { return TF_MATMUL_TF32; }
static float tf32_loss_scale(tf_precision *p) { return 1.0f; }

/* Without loss scaling there is nothing to unscale, and, as in PyTorch
 * without a GradScaler and as precision-fp32 does, non-finite gradients are
 * not looked for here: the trainer stops on a non-finite loss. */
static tf_status tf32_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt,
                                        tf_backend *be, float *grads, size_t n, int32_t *dev_flag,
                                        bool *found_inf, tf_error *err)
{
    *found_inf = false;
    return TF_OK;
}

static bool tf32_update(tf_precision *p, bool found_inf)
{
    if (found_inf) {
        p->state.skipped_steps++;
        p->state.good_steps = 0;
        return true;
    }
    p->state.good_steps++;
    return false;
}

static void tf32_get_state(tf_precision *p, tf_scaler_state *out) { *out = p->state; }
static void tf32_set_state(tf_precision *p, const tf_scaler_state *in)
{
    p->state = *in;
    p->state.scale = 1.0;
}

static const tf_precision_vtable tf32_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = tf32_check_config,
    .create = tf32_create,
    .destroy = tf32_destroy,
    .compute_dtype = tf32_compute_dtype,
    .matmul_mode = tf32_matmul_mode,
    .loss_scale = tf32_loss_scale,
    .unscale_and_check = tf32_unscale_and_check,
    .update = tf32_update,
    .get_state = tf32_get_state,
    .set_state = tf32_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, "tf32", "1.0.0",
                 "tf32: f32 activations, TF32 tensor-core GEMMs (fp32 accumulate), no loss scaling", NULL,
                 &tf32_vtable)
