/* stack.c — open and close a backend + precision + model stack (stack.h). */
#include <string.h>

#include "stack.h"

static const char *matmul_mode_name(tf_matmul_mode m)
{
    switch (m) {
    case TF_MATMUL_FP32: return "fp32";
    case TF_MATMUL_TF32: return "tf32";
    case TF_MATMUL_F16: return "f16";
    case TF_MATMUL_BF16: return "bf16";
    }
    return "unknown";
}

tf_status tf_stack_open(tf_stack *s, const tf_plan *plan, const tf_stack_options *o, tf_error *err)
{
    memset(s, 0, sizeof *s);
    const tf_loaded_plugin *bp = plan->plugin[TF_KIND_BACKEND], *pp = plan->plugin[TF_KIND_PRECISION];
    tf_config *cfg = plan->cfg;
    uint64_t seed = (uint64_t)plan->training.seed;
    s->backend.vt = bp->desc->vtable;
    s->precision.vt = pp->desc->vtable;

    tf_backend_open_args bo = {sizeof bo, o->device, o->threads, seed, tf_config_section(cfg, "backend"),
                               o->local_world};
    tf_status st = s->backend.vt->open(&bo, &s->backend.h, err);
    if (st) return st;
    if ((st = s->precision.vt->create(tf_config_section(cfg, "precision"), &s->precision.h, err))) return st;
    s->compute_dtype = s->precision.vt->compute_dtype(s->precision.h);
    s->matmul_mode = s->precision.vt->matmul_mode(s->precision.h);
    /* A backend that keeps activations in f32 but has the precision's GEMMs
     * (backend-cpu's bf16) runs it that way: f32 between ops, GEMM inputs
     * rounded to the precision's dtype (docs/ARCHITECTURE.md, "What stays fp32"). */
    if (s->compute_dtype != TF_DTYPE_F32 &&
        !s->backend.vt->supports(s->backend.h, s->matmul_mode, s->compute_dtype) &&
        s->backend.vt->supports(s->backend.h, s->matmul_mode, TF_DTYPE_F32))
        s->compute_dtype = TF_DTYPE_F32;
    if (!s->backend.vt->supports(s->backend.h, s->matmul_mode, s->compute_dtype)) {
        const char *dev = s->backend.vt->device_name ? s->backend.vt->device_name(s->backend.h) : NULL;
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "the %s backend cannot compute in precision '%s' (%s activations, %s GEMMs)%s%s",
                            bp->desc->name, pp->desc->name, tf_dtype_name(s->compute_dtype),
                            matmul_mode_name(s->matmul_mode), dev ? " on " : "", dev ? dev : "");
    }
    if (!o->with_model) return TF_OK;

    const tf_model_vtable *mvt = plan->plugin[TF_KIND_MODEL]->desc->vtable;
    /* a model that can read its loss later leaves it on the device in forward,
     * so a step queues backward before the host waits for the loss */
    s->defer_loss = o->defer_loss && TF_HAS(mvt, read_loss);
    tf_model_create_args mc = {sizeof mc, tf_config_section(cfg, "model"), s->backend.vt, s->backend.h,
                               s->compute_dtype, s->matmul_mode, seed, 0, 0, s->defer_loss,
                               o->label_smoothing_factor, o->gradient_checkpointing};
    if ((st = mvt->create(&mc, &s->model.h, err))) return st;
    s->model.vt = mvt;
    s->model.info = mvt->info(s->model.h);
    return TF_OK;
}

void tf_stack_close(tf_stack *s)
{
    if (s->model.h) s->model.vt->destroy(s->model.h);
    if (s->precision.h) s->precision.vt->destroy(s->precision.h);
    if (s->backend.h) s->backend.vt->close(s->backend.h);
    memset(s, 0, sizeof *s);
}

tf_status tf_stack_check_precision(const tf_plan *plan, tf_error *err)
{
    tf_stack s;
    tf_stack_options o = {.device = 0, .threads = 1, .with_model = false};
    tf_status st = tf_stack_open(&s, plan, &o, err);
    tf_stack_close(&s);
    return st;
}
