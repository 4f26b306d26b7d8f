/* fixed_scale.c — an out-of-tree tfcore plugin, complete and minimal.
 *
 * A precision mode "fixed-scale": f32 activations and GEMMs, the loss
 * multiplied by a constant `precision.scale` (default 1024) before backward,
 * gradients divided by it again after the reduction, and a step skipped when
 * any gradient is inf/NaN. (Static loss scaling, as apex's O2 with a fixed
 * loss_scale did.) It shows every part a plugin has:
 *   - the vtable of its kind (tfcore/precision.h), each slot a plain function;
 *   - config keys read through libtfcore's typed accessors, so a typo in the
 *     user's config is reported with file:line and a suggestion;
 *   - an optional probe;
 *   - TF_PLUGIN_DEFINE, which exports the one symbol tfcore looks for.
 *
 * Build against an installed tfcore:
 *   cc -std=c17 -O2 -shared -fPIC -o tfcore-precision-fixed-scale.so fixed_scale.c \
 *      $(pkg-config --cflags --libs tfcore)
 * The file name must be tfcore-<kind>-<name>.so with the name given below. */
#include <stdio.h>
#include <stdlib.h>

#include <tfcore/tfcore.h>

struct tf_precision {
    float scale;             /* the constant loss scale */
    tf_scaler_state state;   /* saved in checkpoints by the trainer */
};

/* Read (and so declare) every key this plugin understands. */
static tf_status read_scale(tf_section *section, double *scale, tf_error *err)
{
    return tf_cfg_float(section, "scale", 1024.0, 1.0, 16777216.0, scale, err);
}

static tf_status fs_check_config(tf_section *section, tf_error *err)
{
    double scale;
    return read_scale(section, &scale, err);
}

static tf_status fs_create(tf_section *section, tf_precision **out, tf_error *err)
{
    double scale;
    tf_status st = read_scale(section, &scale, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "fixed-scale: out of memory");
    p->scale = (float)scale;
    p->state.scale = scale;
    *out = p;
    return TF_OK;
}

static void fs_destroy(tf_precision *p) { free(p); }
static tf_dtype fs_compute_dtype(tf_precision *p) { return TF_DTYPE_F32; }
static tf_matmul_mode fs_matmul_mode(tf_precision *p) { return TF_MATMUL_FP32; }
static float fs_loss_scale(tf_precision *p) { return p->scale; }

/* grads: [n] f32 in backend memory; dev_flag: one int32 in backend memory the
 * caller lends us for the finite check. */
static tf_status fs_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt,
                                      tf_backend *be, float *grads, size_t n, int32_t *dev_flag,
                                      bool *found_inf, tf_error *err)
{
    int32_t flag = 0;
    tf_status st = bvt->memset(be, dev_flag, 0, sizeof flag, NULL);
    if (!st) st = bvt->finite_check(be, NULL, grads, n, TF_DTYPE_F32, dev_flag, err);
    if (!st) st = bvt->memcpy(be, &flag, dev_flag, sizeof flag, TF_COPY_DEVICE_TO_HOST, NULL);
    if (!st) st = bvt->stream_sync(be, NULL, err);
    if (st) return st;
    *found_inf = flag != 0;
    if (*found_inf) return TF_OK; /* the step is skipped: no need to unscale */
    return bvt->scale(be, NULL, grads, n, 1.0f / p->scale, TF_DTYPE_F32, err);
}

static bool fs_update(tf_precision *p, bool found_inf)
{
    if (found_inf) {
        p->state.skipped_steps++;
        p->state.good_steps = 0;
        tf_warn("fixed-scale: inf/NaN gradients at loss scale %g, step skipped", (double)p->scale);
        return true;
    }
    p->state.good_steps++;
    return false;
}

static void fs_get_state(tf_precision *p, tf_scaler_state *out) { *out = p->state; }
static void fs_set_state(tf_precision *p, const tf_scaler_state *in)
{
    p->state = *in;
    p->state.scale = p->scale; /* the config's scale wins over a checkpoint's */
}

/* Optional: say whether this plugin can run on this machine. */
static int fs_probe(char *why, size_t n)
{
    (void)why;
    (void)n;
    return 1;
}

static const tf_precision_vtable fs_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = fs_check_config,
    .create = fs_create,
    .destroy = fs_destroy,
    .compute_dtype = fs_compute_dtype,
    .matmul_mode = fs_matmul_mode,
    .loss_scale = fs_loss_scale,
    .unscale_and_check = fs_unscale_and_check,
    .update = fs_update,
    .get_state = fs_get_state,
    .set_state = fs_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, "fixed-scale", "0.1.0",
                 "example: fp32 with a constant loss scale (precision.scale)", fs_probe, &fs_vtable)
