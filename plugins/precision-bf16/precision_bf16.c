/* precision_bf16.c — the "bf16" precision plugin: bf16 activations and
 * GEMM inputs with fp32 accumulation, fp32 master weights, gradients and
 * optimizer state (torch.autocast(dtype=torch.bfloat16)). bf16 has fp32's
 * exponent range, so there is no loss scaling, as in PyTorch; gradients are
 * treated exactly as precision-fp32 treats them. No config keys of its own. */
#include <stdlib.h>

#include "tfcore/plugin.h"
#include "tfcore/precision.h"

struct tf_precision {
    tf_scaler_state state; /* scale stays 1; counts kept so checkpoints look alike */
};

static tf_status bf16_check_config(tf_section *section, tf_error *err)
{
    (void)section; /* `plugin` is read by the core; bf16 has nothing else */
    return TF_OK;
}

static tf_status bf16_create(tf_section *section, tf_precision **out, tf_error *err)
{
    tf_status st = bf16_check_config(section, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "precision bf16: out of memory");
    p->state.scale = 1.0;
    *out = p;
    return TF_OK;
}

static void bf16_destroy(tf_precision *p) { free(p); }
static tf_dtype bf16_compute_dtype(tf_precision *p) { return TF_DTYPE_BF16; }
static tf_matmul_mode bf16_matmul_mode(tf_precision *p) { return TF_MATMUL_BF16; }
static float bf16_loss_scale(tf_precision *p) { return 1.0f; }

/* Without loss scaling there is nothing to unscale, and, as in PyTorch
 * without a GradScaler and as precision-fp32 does, non-finite gradients are
 * not looked for here: the trainer stops on a non-finite loss. */
static tf_status bf16_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt,
                                        tf_backend *be, float *grads, size_t n, int32_t *dev_flag,
                                        bool *found_inf, tf_error *err)
{
    *found_inf = false;
    return TF_OK;
}

static bool bf16_update(tf_precision *p, bool found_inf)
{
    if (found_inf) {
        p->state.skipped_steps++;
        p->state.good_steps = 0;
        return true;
    }
    p->state.good_steps++;
    return false;
}

static void bf16_get_state(tf_precision *p, tf_scaler_state *out) { *out = p->state; }
static void bf16_set_state(tf_precision *p, const tf_scaler_state *in)
{
    p->state = *in;
    p->state.scale = 1.0;
}

static const tf_precision_vtable bf16_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = bf16_check_config,
    .create = bf16_create,
    .destroy = bf16_destroy,
    .compute_dtype = bf16_compute_dtype,
    .matmul_mode = bf16_matmul_mode,
    .loss_scale = bf16_loss_scale,
    .unscale_and_check = bf16_unscale_and_check,
    .update = bf16_update,
    .get_state = bf16_get_state,
    .set_state = bf16_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, "bf16", "1.0.0",
                 "mixed bf16: bf16 activations and GEMMs (fp32 accumulate), fp32 master weights, no loss scaling", NULL,
                 &bf16_vtable)
