/* pipeline_config.c — the `pipeline` section (pipeline.h):
 *     pipeline = { stages = 2; micro_batches = 4; schedule = "1f1b"; layers = [7, 5]; };
 * read and checked against the comm section and the training arguments
 * before anything runs (--dry-run too). What needs the model (its number of
 * layers, the split) is checked when the stages start (trainer_pipeline.c). */
#include <stdlib.h>

#include "pipeline.h"
#include "plan.h"
#include "training_args.h"
#include "tfcore/comm.h"
#include "tfcore/model.h"
#include "tfcore/plugin.h"

tf_status tf_pipeline_settings_read(tf_config *cfg, bool have_comm, int world_size, const tf_training_args *a,
                                    tf_pipeline_settings *out, tf_error *err)
{
    *out = (tf_pipeline_settings){.stages = 1, .micro_batches = 1, .schedule = TF_PIPE_1F1B};
    if (!tf_config_has_section(cfg, "pipeline")) return TF_OK;
    tf_section *ps = tf_config_section(cfg, "pipeline");
    long long stages, micro;
    tf_status st = tf_cfg_require_int(ps, "stages", 2, TF_PIPELINE_MAX_STAGES, &stages, err);
    if (!st) st = tf_cfg_int(ps, "micro_batches", stages, 1, TF_PIPELINE_MAX_MICRO, &micro, err);
    static const char *const kinds[] = {"1f1b", "gpipe", NULL};
    const char *kind = NULL;
    if (!st) st = tf_cfg_choice(ps, "schedule", "1f1b", kinds, &kind, err);
    long long *layers = NULL;
    size_t nlayers = 0;
    if (!st) st = tf_cfg_int_list(ps, "layers", &layers, &nlayers, err);
    if (st) return st;
    out->stages = (int)stages;
    out->micro_batches = (int)micro;
    out->schedule = kind[0] == 'g' ? TF_PIPE_GPIPE : TF_PIPE_1F1B;
    if (nlayers && nlayers != (size_t)stages)
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: pipeline.layers has %zu entries; it gives each of the %lld stages "
                          "its number of encoder layers",
                          tf_cfg_where(ps, "layers"), nlayers, stages);
    for (size_t i = 0; !st && i < nlayers; i++) {
        if (layers[i] < 1 || layers[i] > 100000)
            st = tf_error_set(err, TF_ERR_CONFIG, "%s: pipeline.layers[%zu] = %lld; every stage runs at least one "
                              "encoder layer",
                              tf_cfg_where(ps, "layers"), i, layers[i]);
        else
            out->layers[i] = (int)layers[i];
    }
    free(layers);
    if (st) return st;
    if (!have_comm || world_size % out->stages != 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: pipeline.stages = %d needs a comm section whose world_size is a multiple of %d "
                            "(stages x replicas, one worker a stage), got %s%d",
                            tf_cfg_where(ps, "stages"), out->stages, out->stages,
                            have_comm ? "world_size = " : "no comm section: ", have_comm ? world_size : 1);
    /* a micro-batch holds per_device_train_batch_size x accumulation / M
     * rows; the batch buffers hold per_device_train_batch_size */
    if (out->micro_batches < a->gradient_accumulation_steps)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: pipeline.micro_batches = %d is below training.gradient_accumulation_steps = %lld; a "
                            "step's %lld rows are split into the micro-batches, each at most "
                            "per_device_train_batch_size (%lld) rows",
                            tf_cfg_where(ps, "micro_batches"), out->micro_batches, a->gradient_accumulation_steps,
                            a->per_device_train_batch_size * a->gradient_accumulation_steps,
                            a->per_device_train_batch_size);
    return TF_OK;
}

tf_status tf_pipeline_check_plugins(const tf_plan *plan, tf_error *err)
{
    if (plan->pipeline.stages <= 1) return TF_OK;
    tf_section *ps = tf_config_section(plan->cfg, "pipeline");
    const tf_loaded_plugin *cp = plan->plugin[TF_KIND_COMM], *mp = plan->plugin[TF_KIND_MODEL];
    const tf_comm_vtable *cvt = cp->desc->vtable;
    const tf_model_vtable *mvt = mp->desc->vtable;
    if (!TF_HAS(cvt, send) || !TF_HAS(cvt, recv))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: a pipeline needs a comm plugin with point-to-point send and recv (plugin ABI 1.4); "
                            "comm '%s' (ABI %u.%u) has none",
                            tf_cfg_where(ps, "stages"), cp->desc->name, cp->desc->abi_major, cp->desc->abi_minor);
    if (cvt->optimizer_on_root_only())
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: a pipeline's stages each step their own parameters; comm '%s' runs the optimizer "
                            "on the root only (DataParallel): use comm mpi or nccl",
                            tf_cfg_where(ps, "stages"), cp->desc->name);
    if (!TF_HAS(mvt, stage_params) || !TF_HAS(mvt, stage_forward) || !TF_HAS(mvt, stage_backward))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: a pipeline needs a model plugin that runs stages (stage_forward, plugin ABI 1.4); "
                            "model '%s' (ABI %u.%u) does not",
                            tf_cfg_where(ps, "stages"), mp->desc->name, mp->desc->abi_major, mp->desc->abi_minor);
    if (plan->training.optim == TF_OPTIM_ADAFACTOR)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: a pipeline steps each stage's range of AdamW's moments; training.optim = "
                            "\"adafactor\" is not supported with it",
                            tf_cfg_where(tf_config_section(plan->cfg, "training"), "optim"));
    return TF_OK;
}
