/* training_args.c — the training section as Hugging Face TrainingArguments
 * (transformers 4.46.3: training_args.py, and Trainer._inner_training_loop in
 * trainer.py for the step counts). See training_args.h.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/log.h"
#include "training_args.h"

static const char *const strategy_names[] = {"no", "steps", "epoch", NULL};
static const char *const scheduler_names[] = {"linear", "constant", "constant_with_warmup",
                                              "cosine", NULL};
/* SchedulerType values of 4.46 that tfcore does not implement */
static const char *const schedulers_not_implemented[] = {
    "cosine_with_restarts", "polynomial", "inverse_sqrt", "reduce_lr_on_plateau",
    "cosine_with_min_lr", "warmup_stable_decay", NULL};
static const char *const optim_names[] = {"adamw_torch", "adamw_hf", "adafactor", NULL};
/* OptimizerNames values of 4.46 that tfcore does not implement */
static const char *const optims_not_implemented[] = {
    "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adamw_apex_fused",
    "adamw_anyprecision", "adamw_torch_4bit", "ademamix", "sgd", "adagrad",
    "adamw_bnb_8bit", "adamw_8bit", "ademamix_8bit", "lion_8bit", "lion_32bit",
    "paged_adamw_32bit", "paged_adamw_8bit", "paged_ademamix_32bit", "paged_ademamix_8bit",
    "paged_lion_32bit", "paged_lion_8bit", "rmsprop", "rmsprop_bnb", "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit", "galore_adafactor",
    "galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo",
    "adalomo", "grokadamw", "schedule_free_adamw", "schedule_free_sgd", NULL};
static const char *const report_names[] = {"none", "all", NULL};
/* report_to integrations of 4.46 (integration_utils.py); tfcore has none */
static const char *const integrations[] = {
    "azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte", "mlflow",
    "neptune", "tensorboard", "wandb", NULL};

const char *tf_interval_strategy_name(tf_interval_strategy s)
{
    return s >= TF_STRATEGY_NO && s <= TF_STRATEGY_EPOCH ? strategy_names[s] : "?";
}
const char *tf_lr_scheduler_name(tf_lr_scheduler s)
{
    return s >= TF_LR_LINEAR && s <= TF_LR_COSINE ? scheduler_names[s] : "?";
}
const char *tf_optim_name(tf_optim o)
{
    return o >= TF_OPTIM_ADAMW_TORCH && o <= TF_OPTIM_ADAFACTOR ? optim_names[o] : "?";
}

void tf_training_args_free(tf_training_args *a)
{
    if (!a) return;
    free(a->output_dir);
    free(a->resume_from_checkpoint);
    free(a->metric_for_best_model);
    free(a->report_to);
    memset(a, 0, sizeof *a);
}

static bool in_list(const char *v, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(v, *list) == 0) return true;
    return false;
}

/* A float that must also be finite (1e999 reads as inf). */
static tf_status read_float(tf_section *t, const char *key, double def, double min, double max,
                            double *out, tf_error *err)
{
    tf_status st = tf_cfg_float(t, key, def, min, max, out, err);
    if (st == TF_OK && !isfinite(*out))
        return tf_error_set(err, TF_ERR_CONFIG, "%s: training.%s must be a finite number, got %s",
                            tf_cfg_where(t, key), key, *out < 0 ? "-inf" : "inf");
    return st;
}

/* A choice whose Hugging Face names include some tfcore does not implement. */
static tf_status read_named(tf_section *t, const char *key, const char *def,
                            const char *const *names, const char *const *not_implemented,
                            int *index, tf_error *err)
{
    const char *v;
    tf_status st = tf_cfg_string(t, key, def, &v, err);
    if (st != TF_OK) return st;
    if (v && in_list(v, not_implemented)) {
        char list[256] = "";
        for (size_t i = 0; names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     names[i]);
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.%s '%s' is not implemented in tfcore (choose one of %s)",
                            tf_cfg_where(t, key), key, v, list);
    }
    st = tf_cfg_choice(t, key, def, names, &v, err);
    if (st != TF_OK) return st;
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], v) == 0) *index = i;
    return TF_OK;
}

static tf_status read_strategy(tf_section *t, const char *key, const char *def,
                               tf_interval_strategy *out, tf_error *err)
{
    int i = 0;
    tf_status st = read_named(t, key, def, strategy_names, (const char *const[]){NULL}, &i, err);
    *out = (tf_interval_strategy)i;
    return st;
}

/* HF: "--logging_steps must be an integer if bigger than 1" */
static tf_status whole_if_above_one(tf_section *t, const char *key, double v, tf_error *err)
{
    if (v > 1 && v != floor(v))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.%s must be a whole number when above 1 (below 1 it is a "
                            "fraction of the total steps), got %g",
                            tf_cfg_where(t, key), key, v);
    return TF_OK;
}

static tf_status set_string(char **dst, const char *src, tf_error *err)
{
    *dst = src ? strdup(src) : NULL;
    if (src && !*dst) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    return TF_OK;
}

/* "runs/<stem of config_path>", "~/x" expanded as transformers does. */
static tf_status default_output_dir(const char *config_path, char *buf, size_t n)
{
    const char *base = "tfcore";
    size_t len = strlen(base);
    if (config_path && *config_path && strcmp(config_path, "-") != 0) {
        const char *slash = strrchr(config_path, '/');
        const char *b = slash ? slash + 1 : config_path;
        const char *dot = strrchr(b, '.');
        size_t blen = dot && dot != b ? (size_t)(dot - b) : strlen(b);
        if (blen > 0) {
            base = b;
            len = blen;
        }
    }
    snprintf(buf, n, "runs/%.*s", (int)len, base);
    return TF_OK;
}

static tf_status read_all(tf_section *t, const char *config_path, tf_training_args *a,
                          tf_error *err)
{
    tf_status st;
#define TRY(call)                      \
    do {                               \
        if ((st = (call)) != TF_OK) return st; \
    } while (0)
    const long long inf = LLONG_MAX;
    const char *s;
    char def_dir[512];
    default_output_dir(config_path, def_dir, sizeof def_dir);

    TRY(tf_cfg_string(t, "output_dir", def_dir, &s, err));
    if (!*s)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: training.output_dir must not be empty",
                            tf_cfg_where(t, "output_dir"));
    const char *home = getenv("HOME");
    if (s[0] == '~' && (s[1] == '/' || !s[1]) && home) { /* os.path.expanduser */
        size_t n = strlen(home) + strlen(s);
        if (!(a->output_dir = malloc(n))) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        snprintf(a->output_dir, n, "%s%s", home, s + 1);
    } else {
        TRY(set_string(&a->output_dir, s, err));
    }
    TRY(tf_cfg_bool(t, "overwrite_output_dir", false, &a->overwrite_output_dir, err));
    TRY(tf_cfg_bool(t, "do_train", true, &a->do_train, err));
    TRY(tf_cfg_bool(t, "do_eval", false, &a->do_eval, err));

    /* eval_strategy, or its deprecated name evaluation_strategy */
    const char *old_name = NULL;
    if (tf_cfg_has(t, "evaluation_strategy")) {
        tf_interval_strategy old;
        TRY(read_strategy(t, "evaluation_strategy", NULL, &old, err));
        old_name = tf_interval_strategy_name(old);
    }
    if (old_name && tf_cfg_has(t, "eval_strategy")) {
        TRY(read_strategy(t, "eval_strategy", "no", &a->eval_strategy, err));
        if (strcmp(tf_interval_strategy_name(a->eval_strategy), old_name) != 0)
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: training.evaluation_strategy '%s' contradicts "
                                "training.eval_strategy '%s' (%s); set only eval_strategy",
                                tf_cfg_where(t, "evaluation_strategy"), old_name,
                                tf_interval_strategy_name(a->eval_strategy),
                                tf_cfg_where(t, "eval_strategy"));
    } else {
        TRY(read_strategy(t, "eval_strategy", old_name ? old_name : "no", &a->eval_strategy, err));
    }
    if (old_name)
        tf_warn("%s: training.evaluation_strategy is deprecated in transformers; use "
                "eval_strategy",
                tf_cfg_where(t, "evaluation_strategy"));

    TRY(tf_cfg_int(t, "per_device_train_batch_size", 8, 1, inf,
                   &a->per_device_train_batch_size, err));
    TRY(tf_cfg_int(t, "per_device_eval_batch_size", 8, 1, inf, &a->per_device_eval_batch_size,
                   err));
    TRY(tf_cfg_int(t, "gradient_accumulation_steps", 1, 1, inf,
                   &a->gradient_accumulation_steps, err));
    a->eval_accumulation_steps = 0;
    if (tf_cfg_has(t, "eval_accumulation_steps"))
        TRY(tf_cfg_int(t, "eval_accumulation_steps", 0, 1, inf, &a->eval_accumulation_steps,
                       err));

    /* the optimizer takes lr as a float (tf_adamw_hyper): beyond FLT_MAX it is inf at step 1 */
    TRY(read_float(t, "learning_rate", 5e-5, 0, FLT_MAX, &a->learning_rate, err));
    TRY(read_float(t, "weight_decay", 0.0, 0, INFINITY, &a->weight_decay, err));
    TRY(tf_cfg_float(t, "adam_beta1", 0.9, 0, 1, &a->adam_beta1, err));
    TRY(tf_cfg_float(t, "adam_beta2", 0.999, 0, 1, &a->adam_beta2, err));
    /* torch.optim.AdamW: 0 <= beta < 1 */
    if (a->adam_beta1 >= 1)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: training.adam_beta1 must be in [0, 1), got 1",
                            tf_cfg_where(t, "adam_beta1"));
    if (a->adam_beta2 >= 1)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: training.adam_beta2 must be in [0, 1), got 1",
                            tf_cfg_where(t, "adam_beta2"));
    TRY(read_float(t, "adam_epsilon", 1e-8, 0, INFINITY, &a->adam_epsilon, err));
    TRY(read_float(t, "max_grad_norm", 1.0, -INFINITY, INFINITY, &a->max_grad_norm, err));
    TRY(read_float(t, "num_train_epochs", 3.0, 0, INFINITY, &a->num_train_epochs, err));
    TRY(tf_cfg_int(t, "max_steps", -1, -1, inf, &a->max_steps, err));

    int idx = 0;
    TRY(read_named(t, "lr_scheduler_type", "linear", scheduler_names, schedulers_not_implemented,
                   &idx, err));
    a->lr_scheduler_type = (tf_lr_scheduler)idx;
    TRY(tf_cfg_float(t, "warmup_ratio", 0.0, 0, 1, &a->warmup_ratio, err));
    TRY(tf_cfg_int(t, "warmup_steps", 0, 0, inf, &a->warmup_steps, err));
    if (a->warmup_ratio > 0 && a->warmup_steps > 0)
        tf_warn("%s: training.warmup_steps and warmup_ratio are both set; warmup_steps wins "
                "(as in transformers)",
                tf_cfg_where(t, "warmup_steps"));

    TRY(read_strategy(t, "logging_strategy", "steps", &a->logging_strategy, err));
    TRY(tf_cfg_bool(t, "logging_first_step", false, &a->logging_first_step, err));
    TRY(read_float(t, "logging_steps", 500, 0, INFINITY, &a->logging_steps, err));
    TRY(read_strategy(t, "save_strategy", "steps", &a->save_strategy, err));
    TRY(read_float(t, "save_steps", 500, 0, INFINITY, &a->save_steps, err));
    a->save_total_limit = 0;
    if (tf_cfg_has(t, "save_total_limit"))
        TRY(tf_cfg_int(t, "save_total_limit", 0, 1, inf, &a->save_total_limit, err));
    TRY(tf_cfg_int(t, "seed", 42, 0, 4294967295LL, &a->seed, err)); /* numpy's seed range */

    TRY(tf_cfg_bool(t, "bf16", false, &a->bf16, err));
    TRY(tf_cfg_bool(t, "fp16", false, &a->fp16, err));
    a->tf32 = TF_UNSET;
    if (tf_cfg_has(t, "tf32")) {
        bool b;
        TRY(tf_cfg_bool(t, "tf32", false, &b, err));
        a->tf32 = b ? TF_TRUE : TF_FALSE;
    }
    TRY(tf_cfg_int(t, "dataloader_num_workers", 0, 0, inf, &a->dataloader_num_workers, err));
    TRY(tf_cfg_bool(t, "disable_tqdm", false, &a->disable_tqdm, err));
    TRY(tf_cfg_bool(t, "group_by_length", false, &a->group_by_length, err));
    a->eval_steps = 0;
    if (tf_cfg_has(t, "eval_steps"))
        TRY(read_float(t, "eval_steps", 0, 0, INFINITY, &a->eval_steps, err));
    TRY(tf_cfg_bool(t, "load_best_model_at_end", false, &a->load_best_model_at_end, err));
    TRY(tf_cfg_string(t, "metric_for_best_model", NULL, &s, err));
    TRY(set_string(&a->metric_for_best_model, s, err));
    a->greater_is_better = TF_UNSET;
    if (tf_cfg_has(t, "greater_is_better")) {
        bool b;
        TRY(tf_cfg_bool(t, "greater_is_better", false, &b, err));
        a->greater_is_better = b ? TF_TRUE : TF_FALSE;
    }
    TRY(tf_cfg_float(t, "label_smoothing_factor", 0.0, 0, 1, &a->label_smoothing_factor, err));
    TRY(tf_cfg_bool(t, "gradient_checkpointing", false, &a->gradient_checkpointing, err));
    TRY(read_named(t, "optim", "adamw_torch", optim_names, optims_not_implemented, &idx, err));
    a->optim = (tf_optim)idx;

    /* report_to: a name or a list of names, as in transformers */
    const char **reports;
    size_t n_reports;
    TRY(tf_cfg_string_list(t, "report_to", &reports, &n_reports, err));
    const char *report = "none";
    for (size_t i = 0; i < n_reports; i++) {
        const char *r = reports[i];
        if (in_list(r, report_names)) {
            if (strcmp(r, "all") == 0) report = "all";
            continue;
        }
        const char *near = tf_closest(r, report_names, 2);
        if (in_list(r, integrations))
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "%s: training.report_to '%s' is not supported by tfcore (it writes "
                              "log.jsonl and results.json to output_dir); use \"none\"",
                              tf_cfg_where(t, "report_to"), r);
        else if (near)
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "%s: training.report_to must be one of none, all; got '%s' (did you "
                              "mean '%s'?)",
                              tf_cfg_where(t, "report_to"), r, near);
        else
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "%s: training.report_to must be one of none, all; got '%s'",
                              tf_cfg_where(t, "report_to"), r);
        free(reports);
        return st;
    }
    free(reports);
    TRY(set_string(&a->report_to, report, err));

    TRY(tf_cfg_string(t, "resume_from_checkpoint", NULL, &s, err));
    if (s && !*s)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.resume_from_checkpoint must not be empty (leave it out "
                            "to start fresh)",
                            tf_cfg_where(t, "resume_from_checkpoint"));
    TRY(set_string(&a->resume_from_checkpoint, s, err));
#undef TRY
    return TF_OK;
}

/* TrainingArguments.__post_init__'s checks and derived defaults. */
static tf_status post_init(tf_section *t, tf_training_args *a, tf_error *err)
{
    tf_status st;
    if (!a->do_train && !a->do_eval && a->eval_strategy == TF_STRATEGY_NO)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.do_train = false and do_eval = false leave nothing to run; set "
                            "do_eval = true to evaluate the model as loaded (model.pretrained)",
                            tf_cfg_where(t, "do_train"));
    if (!a->do_train && a->resume_from_checkpoint)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.resume_from_checkpoint continues training, but do_train = false; to "
                            "evaluate a saved model set model.pretrained = DIR",
                            tf_cfg_where(t, "do_train"));
    if (a->eval_strategy != TF_STRATEGY_NO) a->do_eval = true;
    if (a->eval_strategy == TF_STRATEGY_STEPS && a->eval_steps == 0) {
        if (a->logging_steps > 0)
            a->eval_steps = a->logging_steps;
        else
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: training.eval_strategy 'steps' needs training.eval_steps or "
                                "training.logging_steps above 0",
                                tf_cfg_where(t, "eval_strategy"));
    }
    if (a->logging_strategy == TF_STRATEGY_STEPS && a->logging_steps == 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.logging_strategy 'steps' needs training.logging_steps "
                            "above 0",
                            tf_cfg_where(t, "logging_steps"));
    if (a->save_strategy == TF_STRATEGY_STEPS && a->save_steps == 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.save_strategy 'steps' needs training.save_steps above 0",
                            tf_cfg_where(t, "save_steps"));
    if (a->logging_strategy == TF_STRATEGY_STEPS &&
        (st = whole_if_above_one(t, "logging_steps", a->logging_steps, err)) != TF_OK)
        return st;
    if (a->eval_strategy == TF_STRATEGY_STEPS &&
        (st = whole_if_above_one(t, tf_cfg_has(t, "eval_steps") ? "eval_steps" : "logging_steps",
                                 a->eval_steps, err)) != TF_OK)
        return st;
    if (a->save_strategy == TF_STRATEGY_STEPS &&
        (st = whole_if_above_one(t, "save_steps", a->save_steps, err)) != TF_OK)
        return st;

    if (a->load_best_model_at_end) {
        const char *where = tf_cfg_where(t, "load_best_model_at_end");
        if (a->eval_strategy != a->save_strategy)
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: training.load_best_model_at_end needs eval_strategy and "
                                "save_strategy to match, got eval_strategy '%s' and save_strategy "
                                "'%s'",
                                where, tf_interval_strategy_name(a->eval_strategy),
                                tf_interval_strategy_name(a->save_strategy));
        if (a->eval_strategy == TF_STRATEGY_STEPS && fmod(a->save_steps, a->eval_steps) != 0) {
            /* the same three cases as transformers 4.46 */
            if ((a->eval_steps < 1) != (a->save_steps < 1))
                return tf_error_set(err, TF_ERR_CONFIG,
                                    "%s: training.load_best_model_at_end needs save_steps to be a "
                                    "multiple of eval_steps, which mixing a fraction and a step "
                                    "count cannot guarantee (save_steps %g, eval_steps %g)",
                                    where, a->save_steps, a->eval_steps);
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: training.load_best_model_at_end needs save_steps to be a round "
                                "multiple of eval_steps, got save_steps %g and eval_steps %g",
                                where, a->save_steps, a->eval_steps);
        }
    }
    if (a->fp16 && a->bf16)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: training.fp16 and training.bf16 are both true; at most one can be",
                            tf_cfg_where(t, "fp16"));
    if (a->load_best_model_at_end && !a->metric_for_best_model &&
        (st = set_string(&a->metric_for_best_model, "loss", err)) != TF_OK)
        return st;
    if (a->greater_is_better == TF_UNSET && a->metric_for_best_model) {
        const char *m = a->metric_for_best_model;
        size_t n = strlen(m);
        bool is_loss = n >= 4 && strcmp(m + n - 4, "loss") == 0;
        a->greater_is_better = is_loss ? TF_FALSE : TF_TRUE;
    }
    return TF_OK;
}

tf_status tf_training_args_read(tf_section *training, const char *config_path,
                                tf_training_args *out, tf_error *err)
{
    if (!out) return tf_error_set(err, TF_ERR_USAGE, "tf_training_args_read: no output");
    memset(out, 0, sizeof *out);
    if (!training)
        return tf_error_set(err, TF_ERR_USAGE, "tf_training_args_read: no training section");
    tf_status st = read_all(training, config_path, out, err);
    if (st == TF_OK) st = post_init(training, out, err);
    if (st != TF_OK) tf_training_args_free(out);
    return st;
}

/* A *_steps value: below 1 it is a fraction of max_steps (Trainer: ceil). */
static long long resolve_steps(double v, long long max_steps)
{
    return v < 1 ? (long long)ceil((double)max_steps * v) : (long long)v;
}

long long tf_batches_per_epoch(long long rows, long long per_device, long long world)
{
    long long per_step = per_device * world;
    return rows / per_step + (rows % per_step != 0);
}

tf_status tf_training_plan_compute(const tf_training_args *a, long long rows,
                                   long long world_size, tf_training_plan *p, tf_error *err)
{
    if (!a || !p) return tf_error_set(err, TF_ERR_USAGE, "tf_training_plan_compute: no arguments");
    memset(p, 0, sizeof *p);
    if (rows < 1)
        return tf_error_set(err, TF_ERR_DATA, "the training split has no examples (%lld rows)",
                            rows);
    if (world_size < 1)
        return tf_error_set(err, TF_ERR_USAGE, "world size must be at least 1, got %lld",
                            world_size);
    long long per_step, total;
    if (__builtin_mul_overflow(a->per_device_train_batch_size, world_size, &per_step) ||
        __builtin_mul_overflow(per_step, a->gradient_accumulation_steps, &total))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "training.per_device_train_batch_size %lld x gradient_accumulation_steps "
                            "%lld x world size %lld overflows",
                            a->per_device_train_batch_size, a->gradient_accumulation_steps,
                            world_size);
    p->total_train_batch_size = total;
    p->batches_per_epoch = tf_batches_per_epoch(rows, a->per_device_train_batch_size, world_size);
    p->steps_per_epoch = p->batches_per_epoch / a->gradient_accumulation_steps;
    if (p->steps_per_epoch < 1) p->steps_per_epoch = 1;
    if (a->max_steps > 0) {
        p->max_steps = a->max_steps;
        p->num_train_epochs =
            a->max_steps / p->steps_per_epoch + (a->max_steps % p->steps_per_epoch > 0);
    } else {
        double steps = ceil(a->num_train_epochs * (double)p->steps_per_epoch);
        if (!(steps < 0x1p62))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "training.num_train_epochs %g gives too many steps (%g)",
                                a->num_train_epochs, steps);
        p->max_steps = (long long)steps;
        p->num_train_epochs = (long long)ceil(a->num_train_epochs);
    }
    p->warmup_steps = a->warmup_steps > 0
                          ? a->warmup_steps
                          : (long long)ceil((double)p->max_steps * a->warmup_ratio);
    p->logging_steps = resolve_steps(a->logging_steps, p->max_steps);
    p->eval_steps = a->eval_steps > 0 ? resolve_steps(a->eval_steps, p->max_steps) : 0;
    p->save_steps = resolve_steps(a->save_steps, p->max_steps);
    return TF_OK;
}
