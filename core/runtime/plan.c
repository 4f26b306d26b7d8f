/* plan.c — resolve a config into checked plugins (see plan.h). */
#include <string.h>

#include "plan.h"
#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/dataset.h"
#include "tfcore/model.h"
#include "tfcore/precision.h"

const char *const tf_kind_section[TF_KIND_MAX + 1] = {
    [TF_KIND_BACKEND] = "backend", [TF_KIND_MODEL] = "model", [TF_KIND_DATASET] = "data",
    [TF_KIND_COMM] = "comm",       [TF_KIND_PRECISION] = "precision",
};

/* Every vtable starts with { uint32_t size; check_config; ... }. */
typedef struct vtable_head {
    uint32_t size;
    tf_status (*check_config)(tf_section *section, tf_error *err);
} vtable_head;

/* The precision plugin the Trainer-style booleans ask for, or NULL
 * (tf_training_args_read already refused fp16 and bf16 together). */
static const char *precision_from_flags(const tf_training_args *t)
{
    return t->fp16 ? "fp16" : t->bf16 ? "bf16" : t->tf32 == TF_TRUE ? "tf32" : NULL;
}

static tf_status pick_plugin(tf_plan *plan, uint32_t kind, const char *fallback, tf_error *err)
{
    const char *secname = tf_kind_section[kind];
    tf_section *sec = tf_config_section(plan->cfg, secname);
    const char *name = NULL;
    tf_status st;
    if (fallback)
        st = tf_cfg_string(sec, "plugin", fallback, &name, err);
    else
        st = tf_cfg_require_string(sec, "plugin", &name, err);
    if (st) return st;
    const tf_loaded_plugin *p;
    st = tf_registry_require(plan->reg, kind, name, tf_cfg_where(sec, "plugin"), &p, err);
    if (st) return st;
    const vtable_head *vt = p->desc->vtable;
    st = vt->check_config(sec, err);
    if (st) {
        if (!err || err->code == TF_OK) tf_error_set(err, st, "%s plugin '%s' rejected its config", secname, name);
        return st;
    }
    plan->plugin[kind] = p;
    return TF_OK;
}

/* Training keys that need a slot added after ABI 1.0: refused here (so by
 * --dry-run too) when the chosen backend or model lacks it, never ignored. */
/* comm.zero_stage > 0: a DDP-style comm plugin with the sharded collectives
 * (ABI 1.4), and AdamW (its moments shard by element; Adafactor's factored
 * state lives per matrix row and column, which a flat shard would cut). */
static tf_status check_zero(const tf_plan *plan, tf_error *err)
{
    const tf_loaded_plugin *cp = plan->plugin[TF_KIND_COMM];
    if (!cp || plan->comm.zero_stage == 0) return TF_OK;
    tf_section *cs = tf_config_section(plan->cfg, "comm");
    const tf_comm_vtable *cvt = cp->desc->vtable;
    if (plan->pipeline.stages > 1)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm.zero_stage = %d with a pipeline (pipeline.stages = %d) is not supported: the "
                            "stages' step reduces each stage's gradients itself; use zero_stage = 0",
                            tf_cfg_where(cs, "zero_stage"), plan->comm.zero_stage, plan->pipeline.stages);
    if (cvt->optimizer_on_root_only())
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm.zero_stage = %d needs a DDP-style comm plugin (mpi, nccl); '%s' runs the "
                            "optimizer on rank 0 only (DataParallel), so there is no optimizer state to shard",
                            tf_cfg_where(cs, "zero_stage"), plan->comm.zero_stage, cp->desc->name);
    /* the parameters are all-gathered after each step; the gradients reach
     * their owners by reduce_start (ABI 1.5) or all-reduce, never reduce_scatter */
    if (!TF_HAS(cvt, all_gather) || !cvt->all_gather)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm.zero_stage = %d needs a comm plugin with all_gather "
                            "(plugin ABI 1.4); '%s' (ABI %u.%u) does not have it",
                            tf_cfg_where(cs, "zero_stage"), plan->comm.zero_stage, cp->desc->name,
                            cp->desc->abi_major, cp->desc->abi_minor);
    if (plan->training.optim == TF_OPTIM_ADAFACTOR)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm.zero_stage = %d shards AdamW's moments; training.optim = \"adafactor\" keeps "
                            "factored per-matrix state that a flat shard would cut: use zero_stage = 0 with it",
                            tf_cfg_where(cs, "zero_stage"), plan->comm.zero_stage);
    return TF_OK;
}

static tf_status check_abi_needs(const tf_plan *plan, tf_error *err)
{
    const tf_loaded_plugin *bp = plan->plugin[TF_KIND_BACKEND], *mp = plan->plugin[TF_KIND_MODEL];
    const tf_backend_vtable *bvt = bp->desc->vtable;
    tf_section *ts = tf_config_section(plan->cfg, "training");
    const tf_training_args *a = &plan->training;
    if (a->label_smoothing_factor > 0 && !TF_HAS(bvt, cross_entropy_ex))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.label_smoothing_factor = %g needs a backend with cross_entropy_ex "
                            "(plugin ABI 1.2); backend '%s' (ABI %u.%u) has only the unsmoothed loss",
                            tf_cfg_where(ts, "label_smoothing_factor"), a->label_smoothing_factor,
                            bp->desc->name, bp->desc->abi_major, bp->desc->abi_minor);
    if (a->label_smoothing_factor > 0 && mp->desc->abi_minor < 2)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.label_smoothing_factor = %g needs a model plugin built for ABI 1.2; "
                            "model '%s' is ABI %u.%u",
                            tf_cfg_where(ts, "label_smoothing_factor"), a->label_smoothing_factor,
                            mp->desc->name, mp->desc->abi_major, mp->desc->abi_minor);
    if (a->gradient_checkpointing && mp->desc->abi_minor < 3)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.gradient_checkpointing needs a model plugin built for ABI 1.3; "
                            "model '%s' is ABI %u.%u",
                            tf_cfg_where(ts, "gradient_checkpointing"), mp->desc->name, mp->desc->abi_major,
                            mp->desc->abi_minor);
    if (a->optim == TF_OPTIM_ADAMW_HF && !TF_HAS(bvt, adamw_ex))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.optim = \"adamw_hf\" needs a backend with adamw_ex (plugin ABI 1.2); "
                            "backend '%s' (ABI %u.%u) runs only \"adamw_torch\"",
                            tf_cfg_where(ts, "optim"), bp->desc->name, bp->desc->abi_major, bp->desc->abi_minor);
    if (a->optim == TF_OPTIM_ADAFACTOR && !TF_HAS(bvt, adafactor))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.optim = \"adafactor\" needs a backend with adafactor (plugin ABI 1.3); "
                            "backend '%s' (ABI %u.%u) does not have it",
                            tf_cfg_where(ts, "optim"), bp->desc->name, bp->desc->abi_major, bp->desc->abi_minor);
    tf_status zst = check_zero(plan, err);
    if (zst) return zst;
    /* predict resolves a plan without a data section (tf_plan_resolve_for) */
    const tf_loaded_plugin *dp = plan->plugin[TF_KIND_DATASET];
    if (a->group_by_length && dp && !TF_HAS((const tf_dataset_vtable *)dp->desc->vtable, row_length))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.group_by_length needs a dataset that reports its rows' lengths "
                            "(row_length, plugin ABI 1.3); dataset '%s' (ABI %u.%u) does not",
                            tf_cfg_where(ts, "group_by_length"), dp->desc->name, dp->desc->abi_major,
                            dp->desc->abi_minor);
    return TF_OK;
}

tf_status tf_plan_resolve(tf_plan *plan, const char *config_file, char *const *overrides,
                          size_t noverrides, const char *const *unsets, size_t nunsets, tf_error *err)
{
    return tf_plan_resolve_for(plan, config_file, overrides, noverrides, unsets, nunsets, false, err);
}

tf_status tf_plan_resolve_for(tf_plan *plan, const char *config_file, char *const *overrides, size_t noverrides,
                              const char *const *unsets, size_t nunsets, bool data_optional, tf_error *err)
{
    memset(plan, 0, sizeof *plan);
    tf_status st = tf_config_load(&plan->cfg, config_file, err);
    for (size_t i = 0; !st && i < nunsets; i++) st = tf_config_unset(plan->cfg, unsets[i], err);
    for (size_t i = 0; !st && i < noverrides; i++) st = tf_config_override(plan->cfg, overrides[i], err);
    if (st) goto fail;

    /* Training arguments first: fp16/bf16/tf32 choose the default precision. */
    st = tf_training_args_read(tf_config_section(plan->cfg, "training"), config_file, &plan->training, err);
    if (st) goto fail;
    const char *flag_precision = precision_from_flags(&plan->training);
    tf_section *ss = tf_config_section(plan->cfg, "statistics");
    st = tf_cfg_int(ss, "reference_batch_size", plan->training.per_device_train_batch_size, 1, 1LL << 40,
                    &plan->statistics.reference_batch_size, err);
    if (!st) st = tf_cfg_float(ss, "smoothing", 0.9, 0.0, 0.9999, &plan->statistics.smoothing, err);
    if (st) goto fail;

    const char *search = NULL;
    st = tf_cfg_string(tf_config_section(plan->cfg, "plugins"), "path", NULL, &search, err);
    if (st) goto fail;
    if ((st = tf_registry_index_default(&plan->reg, search, err))) goto fail;

    /* The machine first (backend, then comm below): a GPU config on a machine
     * without one should hear that before anything about its model or data. */
    if ((st = pick_plugin(plan, TF_KIND_BACKEND, "cpu", err))) goto fail;
    if ((st = pick_plugin(plan, TF_KIND_PRECISION, flag_precision ? flag_precision : "fp32", err)))
        goto fail;
    if (flag_precision && strcmp(flag_precision, plan->plugin[TF_KIND_PRECISION]->desc->name) != 0) {
        st = tf_error_set(err, TF_ERR_CONFIG,
                          "%s: precision.plugin is '%s' but training.%s = true asks for '%s'; "
                          "remove one of them",
                          tf_cfg_where(tf_config_section(plan->cfg, "precision"), "plugin"),
                          plan->plugin[TF_KIND_PRECISION]->desc->name, flag_precision, flag_precision);
        goto fail;
    }
    plan->config_file = config_file;
    tf_section *cs = tf_config_has_section(plan->cfg, "comm") ? tf_config_section(plan->cfg, "comm") : NULL;
    if ((st = tf_comm_settings_read(cs, &plan->comm, err))) goto fail;
    if (cs && (st = pick_plugin(plan, TF_KIND_COMM, NULL, err))) goto fail;
    if ((st = tf_pipeline_settings_read(plan->cfg, plan->plugin[TF_KIND_COMM] != NULL, plan->comm.world_size,
                                        &plan->training, &plan->pipeline, err)))
        goto fail;
    if ((st = pick_plugin(plan, TF_KIND_MODEL, NULL, err))) goto fail;
    if ((!data_optional || tf_config_has_section(plan->cfg, "data")) &&
        (st = pick_plugin(plan, TF_KIND_DATASET, NULL, err)))
        goto fail;

    if ((st = tf_config_check_unread(plan->cfg, err))) goto fail;
    if ((st = check_abi_needs(plan, err))) goto fail;
    if ((st = tf_pipeline_check_plugins(plan, err))) goto fail;
    return TF_OK;
fail:
    tf_plan_free(plan);
    return st;
}

tf_status tf_comm_settings_read(tf_section *cs, tf_comm_settings *out, tf_error *err)
{
    *out = (tf_comm_settings){.world_size = 1, .bucket_mb = 25.0, .mpirun_args = "",
                              .mpirun_start_timeout = 60.0, .timeout_s = TF_COMM_TIMEOUT_DEFAULT};
    if (!cs) return TF_OK;
    long long ws;
    tf_status st;
    if ((st = tf_cfg_int(cs, "world_size", 1, 1, 4096, &ws, err))) return st;
    out->world_size = (int)ws;
    if ((st = tf_cfg_float(cs, "bucket_mb", 25.0, 0.001, 65536.0, &out->bucket_mb, err))) return st;
    if ((st = tf_cfg_string(cs, "mpirun_args", "", &out->mpirun_args, err))) return st;
    if ((st = tf_cfg_float(cs, "mpirun_start_timeout", 60.0, 1.0, 86400.0, &out->mpirun_start_timeout, err)))
        return st;
    long long zs;
    if ((st = tf_cfg_int(cs, "zero_stage", 0, 0, 2, &zs, err))) return st;
    out->zero_stage = (int)zs;
    /* one key for every comm plugin, passed to it in tf_comm_init_args.timeout_s */
    return tf_cfg_float(cs, "timeout_s", TF_COMM_TIMEOUT_DEFAULT, TF_COMM_TIMEOUT_MIN, TF_COMM_TIMEOUT_MAX,
                        &out->timeout_s, err);
}

void tf_plan_free(tf_plan *plan)
{
    tf_training_args_free(&plan->training);
    tf_registry_free(plan->reg);
    tf_config_free(plan->cfg);
    memset(plan, 0, sizeof *plan);
}

void tf_plan_print_plugins(const tf_plan *plan, FILE *out)
{
    fprintf(out, "# plugins resolved:\n");
    for (uint32_t k = TF_KIND_MIN; k <= TF_KIND_MAX; k++) {
        const tf_loaded_plugin *p = plan->plugin[k];
        if (p)
            fprintf(out, "#   %-9s %-10s %-8s %s\n", tf_kind_name(k), p->desc->name,
                    p->desc->version ? p->desc->version : "?", p->path);
        else if (k == TF_KIND_COMM)
            fprintf(out, "#   %-9s (none: one worker)\n", tf_kind_name(k));
    }
}
