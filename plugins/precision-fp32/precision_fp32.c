/* precision_fp32.c — the "fp32" precision plugin: f32 activations, strict
 * IEEE fp32 GEMMs (no TF32), no loss scaling. The reference every other mode
 * is compared with. It has no config keys of its own. */
#include <stdlib.h>

#include "tfcore/plugin.h"
#include "tfcore/precision.h"

struct tf_precision {
    tf_scaler_state state; /* scale stays 1; counts kept so checkpoints look alike */
};

static tf_status fp32_check_config(tf_section *section, tf_error *err)
{
    (void)section; /* `plugin` is read by the core; fp32 has nothing else */
    return TF_OK;
}

static tf_status fp32_create(tf_section *section, tf_precision **out, tf_error *err)
{
    tf_status st = fp32_check_config(section, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "precision fp32: out of memory");
    p->state.scale = 1.0;
    *out = p;
    return TF_OK;
}

static void fp32_destroy(tf_precision *p) { free(p); }
static tf_dtype fp32_compute_dtype(tf_precision *p) { return TF_DTYPE_F32; }
static tf_matmul_mode fp32_matmul_mode(tf_precision *p) { return TF_MATMUL_FP32; }
static float fp32_loss_scale(tf_precision *p) { return 1.0f; }

/* Without loss scaling there is nothing to unscale, and, as in PyTorch's
 * fp32 training, non-finite gradients are not looked for here: the trainer
 * stops on a non-finite loss. */
static tf_status fp32_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt,
                                        tf_backend *be, float *grads, size_t n, int32_t *dev_flag,
                                        bool *found_inf, tf_error *err)
{
    *found_inf = false;
    return TF_OK;
}

static bool fp32_update(tf_precision *p, bool found_inf)
{
    if (found_inf) {
        p->state.skipped_steps++;
        p->state.good_steps = 0;
        return true;
    }
    p->state.good_steps++;
    return false;
}

static void fp32_get_state(tf_precision *p, tf_scaler_state *out) { *out = p->state; }
static void fp32_set_state(tf_precision *p, const tf_scaler_state *in)
{
    p->state = *in;
    p->state.scale = 1.0;
}

static const tf_precision_vtable fp32_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = fp32_check_config,
    .create = fp32_create,
    .destroy = fp32_destroy,
    .compute_dtype = fp32_compute_dtype,
    .matmul_mode = fp32_matmul_mode,
    .loss_scale = fp32_loss_scale,
    .unscale_and_check = fp32_unscale_and_check,
    .update = fp32_update,
    .get_state = fp32_get_state,
    .set_state = fp32_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, "fp32", "1.0.0",
                 "strict fp32: f32 activations and IEEE fp32 GEMMs, no loss scaling", NULL,
                 &fp32_vtable)
