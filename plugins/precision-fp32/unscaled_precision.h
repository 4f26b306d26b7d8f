/* unscaled_precision.h — the body of a precision plugin without loss
 * scaling, shared by fp32, tf32 and bf16: they differ only in the activation
 * dtype and the GEMM mode. A plugin's one source file defines
 *   UNSCALED_NAME         "tf32"
 *   UNSCALED_DTYPE        TF_DTYPE_F32
 *   UNSCALED_MATMUL       TF_MATMUL_TF32
 *   UNSCALED_DESCRIPTION  one line for `tfcore plugins`
 * and includes this header once. None of them has config keys of its own.
 *
 * Without loss scaling there is nothing to unscale, and, as in PyTorch
 * without a GradScaler, non-finite gradients are not looked for here: the
 * trainer stops on a non-finite loss. */
#ifndef TFCORE_UNSCALED_PRECISION_H
#define TFCORE_UNSCALED_PRECISION_H

#include <stdlib.h>

#include "tfcore/plugin.h"
#include "tfcore/precision.h"

struct tf_precision {
    tf_scaler_state state; /* scale stays 1; counts kept so checkpoints look alike */
};

static tf_status unscaled_check_config(tf_section *section, tf_error *err)
{
    (void)section; /* `plugin` is read by the core; there is nothing else */
    return TF_OK;
}

static tf_status unscaled_create(tf_section *section, tf_precision **out, tf_error *err)
{
    tf_status st = unscaled_check_config(section, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "precision %s: out of memory", UNSCALED_NAME);
    p->state.scale = 1.0;
    *out = p;
    return TF_OK;
}

static void unscaled_destroy(tf_precision *p) { free(p); }
static tf_dtype unscaled_compute_dtype(tf_precision *p) { return UNSCALED_DTYPE; }
static tf_matmul_mode unscaled_matmul_mode(tf_precision *p) { return UNSCALED_MATMUL; }
static float unscaled_loss_scale(tf_precision *p) { return 1.0f; }

static tf_status unscaled_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt, tf_backend *be,
                                            float *grads, size_t n, int32_t *dev_flag, bool *found_inf,
                                            tf_error *err)
{
    *found_inf = false;
    return TF_OK;
}

static bool unscaled_update(tf_precision *p, bool found_inf)
{
    if (found_inf) {
        p->state.skipped_steps++;
        p->state.good_steps = 0;
        return true;
    }
    p->state.good_steps++;
    return false;
}

static void unscaled_get_state(tf_precision *p, tf_scaler_state *out) { *out = p->state; }
static void unscaled_set_state(tf_precision *p, const tf_scaler_state *in)
{
    p->state = *in;
    p->state.scale = 1.0;
}

static const tf_precision_vtable unscaled_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = unscaled_check_config,
    .create = unscaled_create,
    .destroy = unscaled_destroy,
    .compute_dtype = unscaled_compute_dtype,
    .matmul_mode = unscaled_matmul_mode,
    .loss_scale = unscaled_loss_scale,
    .unscale_and_check = unscaled_unscale_and_check,
    .update = unscaled_update,
    .get_state = unscaled_get_state,
    .set_state = unscaled_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, UNSCALED_NAME, "1.0.0", UNSCALED_DESCRIPTION, NULL, &unscaled_vtable)

#endif
