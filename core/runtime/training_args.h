/* training_args.h — the `training` section: Hugging Face TrainingArguments
 * names and defaults (transformers 4.46), read through the tf_cfg_* accessors
 * with the same checks TrainingArguments.__post_init__ makes, and the step
 * counts Trainer derives from them.
 *
 * Where tfcore differs from transformers 4.46 (each also noted at its field):
 *  - output_dir is required in 4.46; we default to "runs/<config file stem>".
 *  - do_train defaults to true: `tfcore train` trains; do_train = false with
 *    do_eval = true evaluates the loaded model only (as run_glue does).
 *  - disable_tqdm defaults to false and report_to to "none" (4.46: None,
 *    resolved from the log level / to every installed integration).
 *  - only the optimizers and schedulers tfcore implements are accepted; the
 *    other Hugging Face names are a clear "not implemented" error.
 */
#ifndef TFCORE_TRAINING_ARGS_H
#define TFCORE_TRAINING_ARGS_H

#include <stdbool.h>

#include "tfcore/config.h"
#include "tfcore/error.h"

/* IntervalStrategy: when to log, evaluate or save. */
typedef enum tf_interval_strategy {
    TF_STRATEGY_NO = 0,
    TF_STRATEGY_STEPS,
    TF_STRATEGY_EPOCH
} tf_interval_strategy;

/* SchedulerType, the ones tfcore implements. */
typedef enum tf_lr_scheduler {
    TF_LR_LINEAR = 0,
    TF_LR_CONSTANT,
    TF_LR_CONSTANT_WITH_WARMUP,
    TF_LR_COSINE
} tf_lr_scheduler;

/* OptimizerNames, the ones tfcore implements: adamw_torch is torch.optim.AdamW;
 * adamw_hf is transformers.optimization.AdamW, whose update differs (eps added
 * before the bias correction, weight decay applied after the update; the
 * backend's adamw_ex slot with TF_ADAMW_HF, tfcore/backend.h); adafactor is
 * transformers.optimization.Adafactor as the Trainer creates it
 * (scale_parameter = relative_step = False, lr from the schedule; the
 * backend's adafactor slot, tfcore/backend.h), which ignores adam_*. */
typedef enum tf_optim { TF_OPTIM_ADAMW_TORCH = 0, TF_OPTIM_ADAMW_HF, TF_OPTIM_ADAFACTOR } tf_optim;

/* Tri-state for HF's Optional[bool] fields. */
typedef enum tf_tristate { TF_UNSET = -1, TF_FALSE = 0, TF_TRUE = 1 } tf_tristate;

typedef struct tf_training_args {
    /* where and what */
    char *output_dir;           /* default "runs/<config stem>" (4.46: required) */
    bool overwrite_output_dir;  /* false: a run into an output_dir holding a previous run is
                                   refused unless this or resume_from_checkpoint is set
                                   (tf_output_dir_check; transformers' example scripts' rule) */
    bool do_train;              /* true (4.46: false); false: evaluate the model as loaded, no training */
    bool do_eval;               /* false, forced true when eval_strategy != no (as 4.46) */
    char *resume_from_checkpoint; /* NULL: start fresh */

    /* batches and steps */
    long long per_device_train_batch_size; /* 8 */
    long long per_device_eval_batch_size;  /* 8 */
    long long gradient_accumulation_steps; /* 1 */
    long long eval_accumulation_steps;     /* 0 = None: gather all eval outputs at once */
    double num_train_epochs;               /* 3.0 */
    long long max_steps;                   /* -1: use num_train_epochs; > 0 overrides it */

    /* optimizer (AdamW) */
    tf_optim optim;          /* "adamw_torch" */
    double learning_rate;    /* 5e-5 */
    double weight_decay;     /* 0.0 */
    double adam_beta1;       /* 0.9 */
    double adam_beta2;       /* 0.999 */
    double adam_epsilon;     /* 1e-8 */
    double max_grad_norm;    /* 1.0; <= 0 turns clipping off (as Trainer) */
    double label_smoothing_factor; /* 0.0 */
    bool gradient_checkpointing;   /* false: the model keeps each encoder layer's input only and
                                      recomputes the layer in backward (tf_model_create_args) */

    /* learning-rate schedule */
    tf_lr_scheduler lr_scheduler_type; /* "linear" */
    double warmup_ratio;               /* 0.0: fraction of the total steps */
    long long warmup_steps;            /* 0; > 0 overrides warmup_ratio */

    /* logging, evaluation, checkpoints. *_steps < 1 is a fraction of the
     * total steps (as 4.46); see tf_training_plan for the resolved counts. */
    tf_interval_strategy logging_strategy; /* "steps" */
    double logging_steps;                  /* 500 */
    bool logging_first_step;               /* false */
    tf_interval_strategy eval_strategy;    /* "no"; also read as evaluation_strategy */
    double eval_steps;                     /* None -> logging_steps (when eval_strategy steps) */
    tf_interval_strategy save_strategy;    /* "steps" */
    double save_steps;                     /* 500 */
    long long save_total_limit;            /* 0 = None: keep every checkpoint */
    bool load_best_model_at_end;           /* false; the best checkpoint becomes the final model
                                              (trainer_checkpoint.c, as Trainer) */
    char *metric_for_best_model; /* NULL; "loss" when load_best_model_at_end */
    tf_tristate greater_is_better; /* unset; from metric_for_best_model when that is set */

    /* precision flags (Trainer's fp16 / bf16 / tf32). They choose the
     * precision plugin when the config has no precision section; the caller
     * checks them against precision.plugin when it has one. */
    bool fp16;           /* false */
    bool bf16;           /* false */
    tf_tristate tf32;    /* unset (4.46: None) */

    /* misc */
    long long seed;                   /* 42 */
    long long dataloader_num_workers; /* 0 */
    bool disable_tqdm;                /* false (4.46: None -> from the log level) */
    bool group_by_length;             /* false; true: LengthGroupedSampler's order, by the
                                         dataset's row lengths (sampler.h) */
    char *report_to;                  /* "none" ("all" = every integration: none in tfcore) */
} tf_training_args;

/* Read the training section (may be a section with no settings). config_path
 * names the run for the default output_dir ("runs/<stem>"); NULL or "-"
 * gives "runs/tfcore". On error *out is left freed (safe to free again). */
tf_status tf_training_args_read(tf_section *training, const char *config_path,
                                tf_training_args *out, tf_error *err);
/* Free the strings *args owns and zero it. */
void tf_training_args_free(tf_training_args *args);

const char *tf_interval_strategy_name(tf_interval_strategy s); /* "no", "steps", "epoch" */
const char *tf_lr_scheduler_name(tf_lr_scheduler s);           /* "linear", ... */
const char *tf_optim_name(tf_optim o);                         /* "adamw_torch", ... */

/* What Trainer._inner_training_loop (4.46) derives from the arguments and
 * the size of the training set. */
typedef struct tf_training_plan {
    long long total_train_batch_size; /* per_device * gradient_accumulation * world_size */
    long long batches_per_epoch;  /* per rank: len(train_dataloader) = ceil(rows / (per_device * world)) */
    long long steps_per_epoch;    /* optimizer steps: max(batches_per_epoch // grad_accum, 1) */
    long long max_steps;          /* total optimizer steps */
    long long num_train_epochs;   /* epochs the loop runs */
    long long warmup_steps;       /* warmup_steps if > 0, else ceil(max_steps * warmup_ratio) */
    long long logging_steps;      /* resolved: a fraction f < 1 becomes ceil(max_steps * f) */
    long long eval_steps;         /* same; 0 when eval_steps is None */
    long long save_steps;         /* same */
} tf_training_plan;

/* train_rows: examples in the training split (>= 1); world_size: ranks (>= 1). */
/* Micro-batches each rank runs per epoch: len(train_dataloader) =
 * ceil(ceil(rows / per_device) / world) (accelerate's even_batches), which
 * equals ceil(rows / (per_device * world)). The plan and the sampler both
 * count with it. */
long long tf_batches_per_epoch(long long rows, long long per_device, long long world);

tf_status tf_training_plan_compute(const tf_training_args *args, long long train_rows,
                                   long long world_size, tf_training_plan *out, tf_error *err);

#endif
