/* test_training_args.c — the training section as Hugging Face
 * TrainingArguments (transformers 4.46.3): defaults, checks, and the step
 * counts Trainer derives (core/runtime/training_args.h).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config.h"
#include "training_args.h"

static tf_error err;

#define OK(call)                                                               \
    do {                                                                       \
        tf_status st_ = (call);                                                \
        ck_assert_msg(st_ == TF_OK, "%s failed: %s", #call, err.msg);         \
    } while (0)

#define FAILS(call, expected)                                                  \
    do {                                                                       \
        tf_status st_ = (call);                                                \
        ck_assert_msg(st_ == TF_ERR_CONFIG, "%s: status %d (%s)", #call, st_, err.msg); \
        ck_assert_str_eq(err.msg, expected);                                   \
    } while (0)

/* Read the training section of `text` (a config named conf/t.cfg). */
static tf_status read_text(const char *text, tf_training_args *a)
{
    tf_config *c;
    OK(tf_config_load_string(&c, text, "conf/t.cfg", NULL, &err));
    tf_status st = tf_training_args_read(tf_config_section(c, "training"), tf_config_path(c), a, &err);
    tf_config_free(c);
    return st;
}

/* The message for `text`, which must fail. */
static const char *fails(const char *text)
{
    tf_training_args a;
    tf_status st = read_text(text, &a);
    ck_assert_msg(st == TF_ERR_CONFIG, "expected a config error for: %s", text);
    ck_assert_ptr_null(a.output_dir); /* freed on error */
    return err.msg;
}

START_TEST(defaults_are_transformers_4_46)
{
    tf_training_args a;
    OK(read_text("model = { };\n", &a));
    ck_assert_str_eq(a.output_dir, "runs/t");
    ck_assert(!a.overwrite_output_dir);
    ck_assert(a.do_train);
    ck_assert(!a.do_eval);
    ck_assert_ptr_null(a.resume_from_checkpoint);
    ck_assert_int_eq(a.per_device_train_batch_size, 8);
    ck_assert_int_eq(a.per_device_eval_batch_size, 8);
    ck_assert_int_eq(a.gradient_accumulation_steps, 1);
    ck_assert_int_eq(a.eval_accumulation_steps, 0);
    ck_assert_double_eq(a.num_train_epochs, 3.0);
    ck_assert_int_eq(a.max_steps, -1);
    ck_assert_int_eq(a.optim, TF_OPTIM_ADAMW_TORCH);
    ck_assert(!a.gradient_checkpointing);
    ck_assert_double_eq(a.learning_rate, 5e-5);
    ck_assert_double_eq(a.weight_decay, 0.0);
    ck_assert_double_eq(a.adam_beta1, 0.9);
    ck_assert_double_eq(a.adam_beta2, 0.999);
    ck_assert_double_eq(a.adam_epsilon, 1e-8);
    ck_assert_double_eq(a.max_grad_norm, 1.0);
    ck_assert_double_eq(a.label_smoothing_factor, 0.0);
    ck_assert_int_eq(a.lr_scheduler_type, TF_LR_LINEAR);
    ck_assert_double_eq(a.warmup_ratio, 0.0);
    ck_assert_int_eq(a.warmup_steps, 0);
    ck_assert_int_eq(a.logging_strategy, TF_STRATEGY_STEPS);
    ck_assert_double_eq(a.logging_steps, 500);
    ck_assert(!a.logging_first_step);
    ck_assert_int_eq(a.eval_strategy, TF_STRATEGY_NO);
    ck_assert_double_eq(a.eval_steps, 0);
    ck_assert_int_eq(a.save_strategy, TF_STRATEGY_STEPS);
    ck_assert_double_eq(a.save_steps, 500);
    ck_assert_int_eq(a.save_total_limit, 0);
    ck_assert(!a.load_best_model_at_end);
    ck_assert_ptr_null(a.metric_for_best_model);
    ck_assert_int_eq(a.greater_is_better, TF_UNSET);
    ck_assert(!a.fp16);
    ck_assert(!a.bf16);
    ck_assert_int_eq(a.tf32, TF_UNSET);
    ck_assert_int_eq(a.seed, 42);
    ck_assert_int_eq(a.dataloader_num_workers, 0);
    ck_assert(!a.disable_tqdm);
    ck_assert(!a.group_by_length);
    ck_assert_str_eq(a.report_to, "none");
    ck_assert_str_eq(tf_interval_strategy_name(a.save_strategy), "steps");
    ck_assert_str_eq(tf_lr_scheduler_name(a.lr_scheduler_type), "linear");
    ck_assert_str_eq(tf_optim_name(a.optim), "adamw_torch");
    tf_training_args_free(&a);
    tf_training_args_free(&a); /* zeroed: safe twice */

    /* no config file: runs/tfcore */
    tf_config *c;
    OK(tf_config_new(&c, &err));
    OK(tf_training_args_read(tf_config_section(c, "training"), NULL, &a, &err));
    ck_assert_str_eq(a.output_dir, "runs/tfcore");
    tf_training_args_free(&a);
    OK(tf_training_args_read(tf_config_section(c, "training"), "-", &a, &err));
    ck_assert_str_eq(a.output_dir, "runs/tfcore");
    tf_training_args_free(&a);
    tf_config_free(c);
}
END_TEST

START_TEST(values_from_the_config)
{
    tf_training_args a;
    OK(read_text("training = {\n"
                 "  output_dir = \"out/run1\"; overwrite_output_dir = true; do_train = true;\n"
                 "  per_device_train_batch_size = 32; per_device_eval_batch_size = 64;\n"
                 "  gradient_accumulation_steps = 4; eval_accumulation_steps = 2;\n"
                 "  num_train_epochs = 2; max_steps = 1000; optim = \"adamw_hf\";\n"
                 "  learning_rate = 2e-5; weight_decay = 0.01; adam_beta1 = 0.8;\n"
                 "  adam_beta2 = 0.98; adam_epsilon = 1e-6; max_grad_norm = 0;\n"
                 "  label_smoothing_factor = 0.1; lr_scheduler_type = \"cosine\";\n"
                 "  warmup_ratio = 0.06; logging_strategy = \"epoch\"; logging_steps = 50;\n"
                 "  logging_first_step = true; eval_strategy = \"epoch\";\n"
                 "  save_strategy = \"epoch\"; save_total_limit = 2; seed = 4294967295L;\n"
                 "  bf16 = true; tf32 = false; dataloader_num_workers = 2; disable_tqdm = true; group_by_length = true;\n"
                 "  load_best_model_at_end = true; metric_for_best_model = \"accuracy\";\n"
                 "  report_to = [\"none\"]; resume_from_checkpoint = \"out/run1/checkpoint-500\";\n"
                 "  gradient_checkpointing = true;\n"
                 "};\n",
                 &a));
    ck_assert_str_eq(a.output_dir, "out/run1");
    ck_assert(a.overwrite_output_dir && a.do_train && a.do_eval);
    ck_assert_int_eq(a.per_device_train_batch_size, 32);
    ck_assert_int_eq(a.per_device_eval_batch_size, 64);
    ck_assert_int_eq(a.gradient_accumulation_steps, 4);
    ck_assert_int_eq(a.eval_accumulation_steps, 2);
    ck_assert_double_eq(a.num_train_epochs, 2.0);
    ck_assert_int_eq(a.max_steps, 1000);
    ck_assert_int_eq(a.optim, TF_OPTIM_ADAMW_HF);
    ck_assert(a.gradient_checkpointing);
    ck_assert_double_eq(a.learning_rate, 2e-5);
    ck_assert_double_eq(a.weight_decay, 0.01);
    ck_assert_double_eq(a.adam_beta1, 0.8);
    ck_assert_double_eq(a.adam_beta2, 0.98);
    ck_assert_double_eq(a.adam_epsilon, 1e-6);
    ck_assert_double_eq(a.max_grad_norm, 0);
    ck_assert_double_eq(a.label_smoothing_factor, 0.1);
    ck_assert_int_eq(a.lr_scheduler_type, TF_LR_COSINE);
    ck_assert_double_eq(a.warmup_ratio, 0.06);
    ck_assert_int_eq(a.logging_strategy, TF_STRATEGY_EPOCH);
    ck_assert(a.logging_first_step);
    ck_assert_int_eq(a.eval_strategy, TF_STRATEGY_EPOCH);
    ck_assert_int_eq(a.save_strategy, TF_STRATEGY_EPOCH);
    ck_assert_int_eq(a.save_total_limit, 2);
    ck_assert_int_eq(a.seed, 4294967295LL);
    ck_assert(a.bf16 && !a.fp16);
    ck_assert_int_eq(a.tf32, TF_FALSE);
    ck_assert_int_eq(a.dataloader_num_workers, 2);
    ck_assert(a.disable_tqdm && a.load_best_model_at_end && a.group_by_length);
    ck_assert_str_eq(a.metric_for_best_model, "accuracy");
    ck_assert_int_eq(a.greater_is_better, TF_TRUE); /* "accuracy" does not end in "loss" */
    ck_assert_str_eq(a.report_to, "none");
    ck_assert_str_eq(a.resume_from_checkpoint, "out/run1/checkpoint-500");
    tf_training_args_free(&a);

    OK(read_text("training = { lr_scheduler_type = \"constant_with_warmup\"; tf32 = true;\n"
                 "  greater_is_better = false; metric_for_best_model = \"f1\"; report_to = \"all\";\n"
                 "  output_dir = \"~/runs/x\"; };\n",
                 &a));
    ck_assert_int_eq(a.lr_scheduler_type, TF_LR_CONSTANT_WITH_WARMUP);
    ck_assert_int_eq(a.tf32, TF_TRUE);
    ck_assert_int_eq(a.greater_is_better, TF_FALSE);
    ck_assert_str_eq(a.report_to, "all");
    char want[4096];
    snprintf(want, sizeof want, "%s/runs/x", getenv("HOME") ? getenv("HOME") : "~");
    if (getenv("HOME")) ck_assert_str_eq(a.output_dir, want);
    tf_training_args_free(&a);
}
END_TEST

START_TEST(eval_strategy_and_its_old_name)
{
    tf_training_args a;
    /* eval_strategy != no turns do_eval on; eval_steps None -> logging_steps */
    OK(read_text("training = { eval_strategy = \"steps\"; logging_steps = 50; };", &a));
    ck_assert_int_eq(a.eval_strategy, TF_STRATEGY_STEPS);
    ck_assert(a.do_eval);
    ck_assert_double_eq(a.eval_steps, 50);
    tf_training_args_free(&a);
    OK(read_text("training = { eval_strategy = \"steps\"; eval_steps = 0.25; };", &a));
    ck_assert_double_eq(a.eval_steps, 0.25);
    tf_training_args_free(&a);
    /* the deprecated name still works (with a warning), alone or agreeing */
    OK(read_text("training = { evaluation_strategy = \"epoch\"; };", &a));
    ck_assert_int_eq(a.eval_strategy, TF_STRATEGY_EPOCH);
    tf_training_args_free(&a);
    OK(read_text("training = { evaluation_strategy = \"epoch\"; eval_strategy = \"epoch\"; };", &a));
    ck_assert_int_eq(a.eval_strategy, TF_STRATEGY_EPOCH);
    tf_training_args_free(&a);
    ck_assert_str_eq(fails("training = {\n evaluation_strategy = \"epoch\";\n"
                           " eval_strategy = \"steps\";\n};"),
                     "conf/t.cfg:2: training.evaluation_strategy 'epoch' contradicts "
                     "training.eval_strategy 'steps' (conf/t.cfg:3); set only eval_strategy");
    ck_assert_str_eq(fails("training = {\n evaluation_strategy = \"epochs\";\n};"),
                     "conf/t.cfg:2: training.evaluation_strategy must be one of no, steps, epoch; "
                     "got 'epochs' (did you mean 'epoch'?)");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"epochs\";\n};"),
                     "conf/t.cfg:2: training.eval_strategy must be one of no, steps, epoch; got "
                     "'epochs' (did you mean 'epoch'?)");
}
END_TEST

START_TEST(range_errors)
{
    ck_assert_str_eq(fails("training = {\n learning_rate = -1;\n};"),
                     "conf/t.cfg:2: training.learning_rate must be in [0, 3.4028234663852886e+38], got -1");
    /* the optimizer takes lr as a float: beyond FLT_MAX is a config error, not inf at step 1 */
    ck_assert_str_eq(fails("training = {\n learning_rate = 1e308;\n};"),
                     "conf/t.cfg:2: training.learning_rate must be in [0, 3.4028234663852886e+38], got 1e+308");
    ck_assert_str_eq(fails("training = {\n per_device_train_batch_size = 0;\n};"),
                     "conf/t.cfg:2: training.per_device_train_batch_size must be in [1, inf], got 0");
    ck_assert_str_eq(fails("training = {\n per_device_eval_batch_size = -8;\n};"),
                     "conf/t.cfg:2: training.per_device_eval_batch_size must be in [1, inf], got -8");
    ck_assert_str_eq(fails("training = {\n gradient_accumulation_steps = 0;\n};"),
                     "conf/t.cfg:2: training.gradient_accumulation_steps must be in [1, inf], got 0");
    ck_assert_str_eq(fails("training = {\n eval_accumulation_steps = 0;\n};"),
                     "conf/t.cfg:2: training.eval_accumulation_steps must be in [1, inf], got 0");
    ck_assert_str_eq(fails("training = {\n warmup_ratio = 1.5;\n};"),
                     "conf/t.cfg:2: training.warmup_ratio must be in [0, 1], got 1.5");
    ck_assert_str_eq(fails("training = {\n warmup_steps = -1;\n};"),
                     "conf/t.cfg:2: training.warmup_steps must be in [0, inf], got -1");
    ck_assert_str_eq(fails("training = {\n save_total_limit = 0;\n};"),
                     "conf/t.cfg:2: training.save_total_limit must be in [1, inf], got 0");
    ck_assert_str_eq(fails("training = {\n adam_beta1 = 1;\n};"),
                     "conf/t.cfg:2: training.adam_beta1 must be in [0, 1), got 1");
    ck_assert_str_eq(fails("training = {\n adam_beta2 = 1.0;\n};"),
                     "conf/t.cfg:2: training.adam_beta2 must be in [0, 1), got 1");
    ck_assert_str_eq(fails("training = {\n adam_beta2 = 1.5;\n};"),
                     "conf/t.cfg:2: training.adam_beta2 must be in [0, 1], got 1.5");
    ck_assert_str_eq(fails("training = {\n adam_epsilon = -1e-8;\n};"),
                     "conf/t.cfg:2: training.adam_epsilon must be in [0, inf], got -1e-08");
    ck_assert_str_eq(fails("training = {\n weight_decay = -0.1;\n};"),
                     "conf/t.cfg:2: training.weight_decay must be in [0, inf], got -0.1");
    ck_assert_str_eq(fails("training = {\n seed = -1;\n};"),
                     "conf/t.cfg:2: training.seed must be in [0, 4294967295], got -1");
    ck_assert_str_eq(fails("training = {\n max_steps = -2;\n};"),
                     "conf/t.cfg:2: training.max_steps must be in [-1, inf], got -2");
    ck_assert_str_eq(fails("training = {\n num_train_epochs = 1e999;\n};"),
                     "conf/t.cfg:2: training.num_train_epochs must be a finite number, got inf");
    ck_assert_str_eq(fails("training = {\n num_train_epochs = -1.0;\n};"),
                     "conf/t.cfg:2: training.num_train_epochs must be in [0, inf], got -1");
    ck_assert_str_eq(fails("training = {\n label_smoothing_factor = 2;\n};"),
                     "conf/t.cfg:2: training.label_smoothing_factor must be in [0, 1], got 2");
    /* do_train = false evaluates only: it needs do_eval, and has nothing to resume */
    ck_assert_str_eq(fails("training = {\n do_train = false;\n};"),
                     "conf/t.cfg:2: training.do_train = false and do_eval = false leave nothing to run; set "
                     "do_eval = true to evaluate the model as loaded (model.pretrained)");
    ck_assert_str_eq(fails("training = {\n do_train = false; do_eval = true;\n resume_from_checkpoint = \"last\";\n};"),
                     "conf/t.cfg:2: training.resume_from_checkpoint continues training, but do_train = false; to "
                     "evaluate a saved model set model.pretrained = DIR");
    ck_assert_str_eq(fails("training = {\n dataloader_num_workers = -1;\n};"),
                     "conf/t.cfg:2: training.dataloader_num_workers must be in [0, inf], got -1");
    ck_assert_str_eq(fails("training = {\n logging_steps = -5;\n};"),
                     "conf/t.cfg:2: training.logging_steps must be in [0, inf], got -5");
    ck_assert_str_eq(fails("training = {\n num_train_epochs = \"two\";\n};"),
                     "conf/t.cfg:2: training.num_train_epochs must be a number, got string \"two\"");
    ck_assert_str_eq(fails("training = {\n seed = 1.5;\n};"),
                     "conf/t.cfg:2: training.seed must be an integer, got float 1.5");
    ck_assert_str_eq(fails("training = {\n fp16 = \"yes\";\n};"),
                     "conf/t.cfg:2: training.fp16 must be true or false, got string \"yes\"");
    ck_assert_str_eq(fails("training = {\n tf32 = 1;\n};"),
                     "conf/t.cfg:2: training.tf32 must be true or false, got int 1");
    ck_assert_str_eq(fails("training = {\n greater_is_better = 0;\n};"),
                     "conf/t.cfg:2: training.greater_is_better must be true or false, got int 0");
    ck_assert_str_eq(fails("training = {\n output_dir = \"\";\n};"),
                     "conf/t.cfg:2: training.output_dir must not be empty");
    ck_assert_str_eq(fails("training = {\n resume_from_checkpoint = \"\";\n};"),
                     "conf/t.cfg:2: training.resume_from_checkpoint must not be empty (leave it "
                     "out to start fresh)");
}
END_TEST

START_TEST(optimizers_and_schedulers)
{
    ck_assert_str_eq(fails("training = {\n optim = \"sgd\";\n};"),
                     "conf/t.cfg:2: training.optim 'sgd' is not implemented in tfcore (choose one "
                     "of adamw_torch, adamw_hf, adafactor)");
    ck_assert_str_eq(fails("training = {\n optim = \"adamw_torch_fused\";\n};"),
                     "conf/t.cfg:2: training.optim 'adamw_torch_fused' is not implemented in "
                     "tfcore (choose one of adamw_torch, adamw_hf, adafactor)");
    ck_assert_str_eq(fails("training = {\n optim = \"adamw_trch\";\n};"),
                     "conf/t.cfg:2: training.optim must be one of adamw_torch, adamw_hf, adafactor; got "
                     "'adamw_trch' (did you mean 'adamw_torch'?)");
    tf_training_args a;
    OK(read_text("training = {\n optim = \"adafactor\";\n};", &a));
    ck_assert_int_eq(a.optim, TF_OPTIM_ADAFACTOR);
    ck_assert_str_eq(tf_optim_name(a.optim), "adafactor");
    tf_training_args_free(&a);
    ck_assert_str_eq(fails("training = {\n optim = \"adam\";\n};"),
                     "conf/t.cfg:2: training.optim must be one of adamw_torch, adamw_hf, adafactor; got 'adam'");
    ck_assert_str_eq(fails("training = {\n lr_scheduler_type = \"polynomial\";\n};"),
                     "conf/t.cfg:2: training.lr_scheduler_type 'polynomial' is not implemented in "
                     "tfcore (choose one of linear, constant, constant_with_warmup, cosine)");
    ck_assert_str_eq(fails("training = {\n lr_scheduler_type = \"cosin\";\n};"),
                     "conf/t.cfg:2: training.lr_scheduler_type must be one of linear, constant, "
                     "constant_with_warmup, cosine; got 'cosin' (did you mean 'cosine'?)");
    ck_assert_str_eq(fails("training = {\n lr_scheduler_type = 1;\n};"),
                     "conf/t.cfg:2: training.lr_scheduler_type must be a string, got int 1");
    OK(read_text("training = { lr_scheduler_type = \"constant\"; };", &a));
    ck_assert_int_eq(a.lr_scheduler_type, TF_LR_CONSTANT);
    ck_assert_str_eq(tf_lr_scheduler_name(a.lr_scheduler_type), "constant");
    tf_training_args_free(&a);
}
END_TEST

START_TEST(report_to)
{
    ck_assert_str_eq(fails("training = {\n report_to = \"wandb\";\n};"),
                     "conf/t.cfg:2: training.report_to 'wandb' is not supported by tfcore (it "
                     "writes log.jsonl and results.json to output_dir); use \"none\"");
    ck_assert_str_eq(fails("training = {\n report_to = [\"none\", \"tensorboard\"];\n};"),
                     "conf/t.cfg:2: training.report_to 'tensorboard' is not supported by tfcore "
                     "(it writes log.jsonl and results.json to output_dir); use \"none\"");
    ck_assert_str_eq(fails("training = {\n report_to = \"nnoe\";\n};"),
                     "conf/t.cfg:2: training.report_to must be one of none, all; got 'nnoe' (did "
                     "you mean 'none'?)");
    ck_assert_str_eq(fails("training = {\n report_to = \"somewhere\";\n};"),
                     "conf/t.cfg:2: training.report_to must be one of none, all; got 'somewhere'");
    ck_assert_str_eq(fails("training = {\n report_to = 3;\n};"),
                     "conf/t.cfg:2: training.report_to must be a string or a list of strings, got "
                     "int 3");
}
END_TEST

START_TEST(cross_checks)
{
    ck_assert_str_eq(fails("training = {\n logging_steps = 0;\n};"),
                     "conf/t.cfg:2: training.logging_strategy 'steps' needs training.logging_steps "
                     "above 0");
    ck_assert_str_eq(fails("training = {\n save_steps = 0;\n};"),
                     "conf/t.cfg:2: training.save_strategy 'steps' needs training.save_steps above 0");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n logging_strategy = \"no\";\n"
                           " logging_steps = 0;\n};"),
                     "conf/t.cfg:2: training.eval_strategy 'steps' needs training.eval_steps or "
                     "training.logging_steps above 0");
    ck_assert_str_eq(fails("training = {\n logging_steps = 2.5;\n};"),
                     "conf/t.cfg:2: training.logging_steps must be a whole number when above 1 "
                     "(below 1 it is a fraction of the total steps), got 2.5");
    ck_assert_str_eq(fails("training = {\n save_steps = 100.5;\n};"),
                     "conf/t.cfg:2: training.save_steps must be a whole number when above 1 "
                     "(below 1 it is a fraction of the total steps), got 100.5");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n eval_steps = 10.5;\n};"),
                     "conf/t.cfg:3: training.eval_steps must be a whole number when above 1 "
                     "(below 1 it is a fraction of the total steps), got 10.5");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n logging_steps = 10.5;\n"
                           " logging_strategy = \"no\";\n};"),
                     "conf/t.cfg:3: training.logging_steps must be a whole number when above 1 "
                     "(below 1 it is a fraction of the total steps), got 10.5");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n save_strategy = \"epoch\";\n"
                           " load_best_model_at_end = true;\n};"),
                     "conf/t.cfg:4: training.load_best_model_at_end needs eval_strategy and "
                     "save_strategy to match, got eval_strategy 'steps' and save_strategy 'epoch'");
    ck_assert_str_eq(fails("training = {\n load_best_model_at_end = true;\n};"),
                     "conf/t.cfg:2: training.load_best_model_at_end needs eval_strategy and "
                     "save_strategy to match, got eval_strategy 'no' and save_strategy 'steps'");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n eval_steps = 300;\n"
                           " load_best_model_at_end = true;\n};"),
                     "conf/t.cfg:4: training.load_best_model_at_end needs save_steps to be a round "
                     "multiple of eval_steps, got save_steps 500 and eval_steps 300");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n eval_steps = 0.1;\n"
                           " load_best_model_at_end = true;\n};"),
                     "conf/t.cfg:4: training.load_best_model_at_end needs save_steps to be a "
                     "multiple of eval_steps, which mixing a fraction and a step count cannot "
                     "guarantee (save_steps 500, eval_steps 0.1)");
    ck_assert_str_eq(fails("training = {\n eval_strategy = \"steps\";\n eval_steps = 0.3;\n"
                           " save_steps = 0.5;\n load_best_model_at_end = true;\n};"),
                     "conf/t.cfg:5: training.load_best_model_at_end needs save_steps to be a round "
                     "multiple of eval_steps, got save_steps 0.5 and eval_steps 0.3");
    ck_assert_str_eq(fails("training = {\n bf16 = true;\n fp16 = true;\n};"),
                     "conf/t.cfg:3: training.fp16 and training.bf16 are both true; at most one can be");

    tf_training_args a;
    /* matching strategies and multiples: fine; the metric defaults to loss */
    OK(read_text("training = { eval_strategy = \"steps\"; eval_steps = 100;\n"
                 "  load_best_model_at_end = true; };",
                 &a));
    ck_assert_str_eq(a.metric_for_best_model, "loss");
    ck_assert_int_eq(a.greater_is_better, TF_FALSE);
    tf_training_args_free(&a);
    OK(read_text("training = { eval_strategy = \"steps\"; eval_steps = 0.1; save_steps = 0.2;\n"
                 "  load_best_model_at_end = true; metric_for_best_model = \"eval_loss\"; };",
                 &a));
    ck_assert_int_eq(a.greater_is_better, TF_FALSE);
    tf_training_args_free(&a);
    /* a strategy that is not "steps" does not check its steps */
    OK(read_text("training = { logging_strategy = \"epoch\"; logging_steps = 0;\n"
                 "  save_strategy = \"no\"; save_steps = 2.5; };",
                 &a));
    tf_training_args_free(&a);
}
END_TEST

START_TEST(unknown_training_keys_are_caught)
{
    tf_config *c;
    OK(tf_config_load_string(&c, "training = {\n  learning_rate = 1e-4;\n  learing_rate = 3e-5;\n};\n",
                             "conf/x.cfg", NULL, &err));
    OK(tf_config_override(c, "training.per_device_train_batch_size=16", &err));
    tf_training_args a;
    OK(tf_training_args_read(tf_config_section(c, "training"), tf_config_path(c), &a, &err));
    ck_assert_int_eq(a.per_device_train_batch_size, 16);
    ck_assert_str_eq(a.output_dir, "runs/x");
    FAILS(tf_config_check_unread(c, &err),
          "conf/x.cfg:3: unknown key 'training.learing_rate' (did you mean 'learning_rate'?)");
    tf_training_args_free(&a);
    tf_config_free(c);

    OK(tf_config_load_string(&c, "training = { };\n", "conf/x.cfg", NULL, &err));
    OK(tf_config_override(c, "training.warmup_ration=0.1", &err));
    OK(tf_training_args_read(tf_config_section(c, "training"), tf_config_path(c), &a, &err));
    FAILS(tf_config_check_unread(c, &err),
          "-o training.warmup_ration=0.1: unknown key 'training.warmup_ration' (did you mean "
          "'warmup_ratio'?)");
    tf_training_args_free(&a);
    tf_config_free(c);
}
END_TEST

START_TEST(dump_of_training_defaults_reads_back)
{
    tf_config *c;
    OK(tf_config_load_string(&c, "training = { evaluation_strategy = \"steps\"; };\n",
                             "conf/x.cfg", NULL, &err));
    tf_training_args a, b;
    OK(tf_training_args_read(tf_config_section(c, "training"), tf_config_path(c), &a, &err));
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    tf_config_dump(c, f);
    fclose(f);
    tf_config *back;
    OK(tf_config_load_string(&back, text, "conf/x.cfg", NULL, &err));
    OK(tf_training_args_read(tf_config_section(back, "training"), tf_config_path(back), &b, &err));
    OK(tf_config_check_unread(back, &err));
    ck_assert_str_eq(a.output_dir, b.output_dir);
    ck_assert_int_eq(a.eval_strategy, b.eval_strategy);
    ck_assert_double_eq(a.eval_steps, b.eval_steps);
    ck_assert_double_eq(a.learning_rate, b.learning_rate);
    ck_assert_double_eq(a.adam_epsilon, b.adam_epsilon);
    ck_assert_int_eq(a.seed, b.seed);
    ck_assert_int_eq(a.tf32, b.tf32);
    free(text);
    tf_training_args_free(&a);
    tf_training_args_free(&b);
    tf_config_free(back);
    tf_config_free(c);
}
END_TEST

/* Expected values: transformers 4.46.3, trainer.py lines 2158-2191
 * (len_dataloader, num_update_steps_per_epoch = max(len // grad_accum, 1),
 * max_steps, num_train_epochs), TrainingArguments.get_warmup_steps, and
 * lines 2236-2248 (a *_steps below 1 is ceil(max_steps * it)); the length of
 * each rank's dataloader is accelerate's even_batches count,
 * ceil(ceil(rows / per_device) / world). Computed in Python from those lines
 * with math.ceil on the same doubles. */
typedef struct plan_case {
    long long rows, per_device, world, grad_accum, max_steps, warmup_steps;
    double epochs, warmup_ratio, logging_steps, eval_steps, save_steps;
    tf_training_plan want;
} plan_case;

static const plan_case plan_cases[] = {
    /* rows per  world ga  max  wsteps epochs wratio log   eval  save */
    {1000, 8, 1, 1, -1, 0, 3.0, 0.1, 500, 0, 500, {8, 125, 125, 375, 3, 38, 500, 0, 500}},
    {1000, 8, 4, 2, -1, 0, 3.0, 0.0, 500, 0, 500, {64, 32, 16, 48, 3, 0, 500, 0, 500}},
    {1001, 16, 3, 3, -1, 0, 2.5, 0.06, 500, 0, 500, {144, 21, 7, 18, 3, 2, 500, 0, 500}},
    {1001, 16, 3, 3, 100, 0, 2.5, 0.06, 0.1, 0.25, 0.5, {144, 21, 7, 100, 15, 6, 10, 25, 50}},
    {5, 8, 1, 4, -1, 0, 3.0, 0.0, 500, 0, 500, {32, 1, 1, 3, 3, 0, 500, 0, 500}},
    {1000, 8, 1, 1, -1, 10, 3.0, 0.1, 500, 0, 500, {8, 125, 125, 375, 3, 10, 500, 0, 500}},
    /* 100 * 0.07 is 7.000000000000001 in doubles: ceil gives 8, in Python too */
    {1000, 10, 1, 1, 100, 0, 3.0, 0.07, 500, 0, 500, {10, 100, 100, 100, 1, 8, 500, 0, 500}},
    {100000, 32, 8, 1, -1, 0, 0.3, 0.07, 0.01, 0, 500, {256, 391, 391, 118, 1, 9, 2, 0, 500}},
};

START_TEST(training_plan_matches_trainer)
{
    const plan_case *pc = &plan_cases[_i];
    tf_training_args a;
    OK(read_text("training = { };", &a));
    a.per_device_train_batch_size = pc->per_device;
    a.gradient_accumulation_steps = pc->grad_accum;
    a.max_steps = pc->max_steps;
    a.warmup_steps = pc->warmup_steps;
    a.num_train_epochs = pc->epochs;
    a.warmup_ratio = pc->warmup_ratio;
    a.logging_steps = pc->logging_steps;
    a.eval_steps = pc->eval_steps;
    a.save_steps = pc->save_steps;
    tf_training_plan p;
    OK(tf_training_plan_compute(&a, pc->rows, pc->world, &p, &err));
    ck_assert_int_eq(p.total_train_batch_size, pc->want.total_train_batch_size);
    ck_assert_int_eq(p.batches_per_epoch, pc->want.batches_per_epoch);
    ck_assert_int_eq(p.steps_per_epoch, pc->want.steps_per_epoch);
    ck_assert_int_eq(p.max_steps, pc->want.max_steps);
    ck_assert_int_eq(p.num_train_epochs, pc->want.num_train_epochs);
    ck_assert_int_eq(p.warmup_steps, pc->want.warmup_steps);
    ck_assert_int_eq(p.logging_steps, pc->want.logging_steps);
    ck_assert_int_eq(p.eval_steps, pc->want.eval_steps);
    ck_assert_int_eq(p.save_steps, pc->want.save_steps);
    tf_training_args_free(&a);
}
END_TEST

START_TEST(training_plan_errors)
{
    tf_training_args a;
    tf_training_plan p;
    OK(read_text("training = { };", &a));
    ck_assert_int_eq(tf_training_plan_compute(&a, 0, 1, &p, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "the training split has no examples (0 rows)");
    ck_assert_int_eq(tf_training_plan_compute(&a, 10, 0, &p, &err), TF_ERR_USAGE);
    ck_assert_str_eq(err.msg, "world size must be at least 1, got 0");
    a.per_device_train_batch_size = 1LL << 40;
    FAILS(tf_training_plan_compute(&a, 10, 1LL << 30, &p, &err),
          "training.per_device_train_batch_size 1099511627776 x gradient_accumulation_steps 1 x "
          "world size 1073741824 overflows");
    a.per_device_train_batch_size = 1;
    a.num_train_epochs = 1e300;
    FAILS(tf_training_plan_compute(&a, 10, 1, &p, &err),
          "training.num_train_epochs 1e+300 gives too many steps (1e+301)");
    tf_training_args_free(&a);
}
END_TEST

static Suite *training_args_suite(void)
{
    Suite *s = suite_create("training_args");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, defaults_are_transformers_4_46);
    tcase_add_test(tc, values_from_the_config);
    tcase_add_test(tc, eval_strategy_and_its_old_name);
    tcase_add_test(tc, range_errors);
    tcase_add_test(tc, optimizers_and_schedulers);
    tcase_add_test(tc, report_to);
    tcase_add_test(tc, cross_checks);
    tcase_add_test(tc, unknown_training_keys_are_caught);
    tcase_add_test(tc, dump_of_training_defaults_reads_back);
    tcase_add_loop_test(tc, training_plan_matches_trainer, 0,
                        (int)(sizeof plan_cases / sizeof plan_cases[0]));
    tcase_add_test(tc, training_plan_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(training_args_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
