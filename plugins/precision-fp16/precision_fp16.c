/* precision_fp16.c — the "fp16" precision plugin: f16 activations, GEMMs on
 * f16 inputs with fp32 accumulation, fp32 master weights, gradients and
 * optimizer state, and dynamic loss scaling with the rules and key names of
 * torch.cuda.amp.GradScaler (loss_scaler.h):
 *
 *   precision = { plugin = "fp16"; init_scale = 65536.0; growth_factor = 2.0;
 *                 backoff_factor = 0.5; growth_interval = 2000; };
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "loss_scaler.h"
#include "tfcore/config_keys.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"
#include "tfcore/precision.h"

struct tf_precision {
    loss_scaler scaler;
};

typedef struct fp16_settings {
    double init_scale, growth_factor, backoff_factor;
    long long growth_interval;
} fp16_settings;

/* The precision section's keys, GradScaler's names (README.md's key section
 * is generated from it). GradScaler's own checks are growth_factor > 1 and
 * backoff_factor < 1; the other bounds keep the scale a positive normal
 * float and the interval a count. */
static const tf_cfg_key keys[] = {
    {"init_scale", TF_CFG_KEY_FLOAT, .float_def = 65536.0, .float_min = FLT_MIN, .float_max = FLT_MAX,
     .why = "the scale is a positive normal float", .doc = "the loss scale at the first step (2^16)"},
    {"growth_factor", TF_CFG_KEY_FLOAT, .float_def = 2.0, .float_min = 1.0, .min_open = true, .float_max = FLT_MAX,
     .why = "a scale that grows by it must grow",
     .doc = "the scale is multiplied by it after `growth_interval` clean steps in a row"},
    {"backoff_factor", TF_CFG_KEY_FLOAT, .float_def = 0.5, .float_min = 0.0, .min_open = true, .float_max = 1.0,
     .max_open = true, .why = "an overflow must shrink the scale and keep it positive",
     .doc = "the scale is multiplied by it on every overflowing step"},
    {"growth_interval", TF_CFG_KEY_INT, .int_def = 2000, .int_min = 1, .int_max = INT32_MAX,
     .doc = "clean steps in a row before the scale grows"},
    {0},
};
TF_PLUGIN_KEYS(keys);

static tf_status read_settings(tf_section *sec, fp16_settings *s, tf_error *err)
{
    tf_status st;
    if ((st = tf_cfg_key_float(sec, keys, "init_scale", &s->init_scale, err))) return st;
    if ((st = tf_cfg_key_float(sec, keys, "growth_factor", &s->growth_factor, err))) return st;
    if ((st = tf_cfg_key_float(sec, keys, "backoff_factor", &s->backoff_factor, err))) return st;
    if ((st = tf_cfg_key_int(sec, keys, "growth_interval", &s->growth_interval, err))) return st;
    return TF_OK;
}

static tf_status fp16_check_config(tf_section *section, tf_error *err)
{
    fp16_settings s;
    return read_settings(section, &s, err);
}

static tf_status fp16_create(tf_section *section, tf_precision **out, tf_error *err)
{
    fp16_settings s;
    tf_status st = read_settings(section, &s, err);
    if (st) return st;
    tf_precision *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "precision fp16: out of memory");
    loss_scaler_init(&p->scaler, s.init_scale, s.growth_factor, s.backoff_factor, s.growth_interval);
    *out = p;
    return TF_OK;
}

static void fp16_destroy(tf_precision *p) { free(p); }
static tf_dtype fp16_compute_dtype(tf_precision *p) { return TF_DTYPE_F16; }
static tf_matmul_mode fp16_matmul_mode(tf_precision *p) { return TF_MATMUL_F16; }
static float fp16_loss_scale(tf_precision *p) { return p->scaler.scale; }

/* A backend op failed: keep its message (if it wrote one) behind ours. */
static tf_status op_failed(tf_error *err, tf_status st, const char *what)
{
    if (err && err->msg[0]) {
        tf_error_prefix(err, "precision fp16: %s", what);
        err->code = st;
        return st;
    }
    return tf_error_set(err, st, "precision fp16: %s failed", what);
}

/* As torch's _amp_foreach_non_finite_check_and_unscale_: the flag says
 * whether any gradient (as backward left it) is inf or NaN, and every
 * gradient is multiplied by 1/scale (skipped when that is exactly 1). The
 * flag lives in backend memory: zero it, check, copy it back, wait. */
static tf_status fp16_unscale_and_check(tf_precision *p, const tf_backend_vtable *bvt,
                                        tf_backend *be, float *grads, size_t n, int32_t *dev_flag,
                                        bool *found_inf, tf_error *err)
{
    tf_status st;
    int32_t flag = 0;
    char what[96];
    *found_inf = false;
    tf_error_clear(err); /* so a message found below is the failing op's own */
    if ((st = bvt->memset(be, dev_flag, 0, sizeof *dev_flag, NULL)))
        return op_failed(err, st, "clearing the overflow flag in backend memory");
    if ((st = bvt->finite_check(be, NULL, grads, n, TF_DTYPE_F32, dev_flag, err))) {
        snprintf(what, sizeof what, "checking %zu gradients for inf/NaN", n);
        return op_failed(err, st, what);
    }
    float inv = loss_scaler_inverse(&p->scaler);
    if (inv != 1.0f && (st = bvt->scale(be, NULL, grads, n, inv, TF_DTYPE_F32, err))) {
        snprintf(what, sizeof what, "unscaling %zu gradients by 1/%g", n, (double)p->scaler.scale);
        return op_failed(err, st, what);
    }
    if ((st = bvt->memcpy(be, &flag, dev_flag, sizeof flag, TF_COPY_DEVICE_TO_HOST, NULL)))
        return op_failed(err, st, "copying the overflow flag to the host");
    if ((st = bvt->stream_sync(be, NULL, err))) return op_failed(err, st, "waiting for the gradient check");
    *found_inf = flag != 0;
    return TF_OK;
}

static bool fp16_update(tf_precision *p, bool found_inf)
{
    float before = p->scaler.scale;
    bool clamped;
    bool skip = loss_scaler_step(&p->scaler, found_inf, &clamped);
    if (clamped)
        tf_warn("precision fp16: the loss scale would fall below %g (the smallest normal float) "
                "from %g; it stays at %g. Gradients that overflow at so small a scale mean the "
                "model has most likely diverged",
                (double)FLT_MIN, (double)before, (double)p->scaler.scale);
    return skip;
}

static void fp16_get_state(tf_precision *p, tf_scaler_state *out)
{
    out->scale = p->scaler.scale;
    out->good_steps = p->scaler.tracker;
    out->skipped_steps = p->scaler.skipped;
}

static void fp16_set_state(tf_precision *p, const tf_scaler_state *in)
{
    if (!loss_scaler_restore(&p->scaler, in->scale, in->good_steps, in->skipped_steps))
        tf_warn("precision fp16: the checkpoint's loss scale %g is not a positive number; "
                "continuing at %g",
                in->scale, (double)p->scaler.scale);
}

static const tf_precision_vtable fp16_vtable = {
    .size = TF_VTABLE_SIZE(tf_precision_vtable),
    .check_config = fp16_check_config,
    .create = fp16_create,
    .destroy = fp16_destroy,
    .compute_dtype = fp16_compute_dtype,
    .matmul_mode = fp16_matmul_mode,
    .loss_scale = fp16_loss_scale,
    .unscale_and_check = fp16_unscale_and_check,
    .update = fp16_update,
    .get_state = fp16_get_state,
    .set_state = fp16_set_state,
};

TF_PLUGIN_DEFINE(TF_KIND_PRECISION, "fp16", "1.0.0",
                 "mixed fp16: f16 activations and GEMMs (fp32 accumulate), fp32 master weights, "
                 "dynamic loss scaling as torch GradScaler",
                 NULL, &fp16_vtable)
