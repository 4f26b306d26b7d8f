/* trainer_internal.h — what the trainer's files share (trainer.c,
 * trainer_eval.c, trainer_checkpoint.c, trainer_run_output.c). */
#ifndef TFCORE_TRAINER_INTERNAL_H
#define TFCORE_TRAINER_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "clock.h"
#include "lr_schedule.h"
#include "mkdirs.h"
#include "sampler.h"
#include "trainer.h"


/* Open every plugin, create the model, open the dataset, and allocate the
 * batch and optimizer buffers (nothing is written to output_dir). On error
 * the caller still calls tf_trainer_teardown. */
tf_status tf_trainer_setup(tf_trainer *t, const tf_plan *plan, const tf_worker *w, tf_error *err);
void tf_trainer_teardown(tf_trainer *t);
/* Rank 0 prepares output_dir and opens the log; then the training loop. */
tf_status tf_trainer_run(tf_trainer *t, tf_error *err);

/* --- the trainer's collectives (trainer_comm.c); no-ops for a single worker - */
#define TF_COMM_SCRATCH_BYTES 64
/* Connect this worker's comm plugin (after setup: it needs the backend). */
tf_status tf_trainer_comm_init(tf_trainer *t, tf_error *err);
void tf_trainer_comm_finalize(tf_trainer *t);
/* This worker failed: make the others stop instead of waiting for it. */
void tf_trainer_comm_abort(tf_trainer *t, const char *why);
/* host[count] (host memory) reduced / broadcast across workers. */
tf_status tf_trainer_allreduce_host(tf_trainer *t, void *host, size_t count, tf_dtype dt, tf_reduce_op op,
                                    tf_error *err);
tf_status tf_trainer_broadcast_host(tf_trainer *t, void *host, size_t count, tf_dtype dt, int root, tf_error *err);
/* Every worker's parameters := rank 0's. */
tf_status tf_trainer_broadcast_params(tf_trainer *t, tf_error *err);
/* DataParallel: the gradients' sum onto rank 0. */
tf_status tf_trainer_reduce_to_root(tf_trainer *t, tf_error *err);

/* One optimizer step: gradient_accumulation_steps micro-batches (forward and
 * backward) from this epoch's position step_in_epoch, then unscale, clip and
 * AdamW. *step_loss is Trainer's loss of the step. */
tf_status tf_trainer_step(tf_trainer *t, tf_sampler *s, const tf_lr_schedule *lrs, int64_t step_in_epoch,
                          double *step_loss, double *lr, double *norm, bool *skipped, tf_error *err);

/* After the step's gradients are complete (and reduced): unscale, agree on
 * overflow, clip, AdamW (or Adafactor) over t->segs, zero_grad. */
tf_status tf_trainer_optimizer_step(tf_trainer *t, const tf_lr_schedule *lrs, double *lr_used, double *norm,
                                    bool *skipped, tf_error *err);

/* optim "adafactor" (trainer_adafactor.c): the tensor list and zeroed state
 * (setup), one step at lr with the 1-based step count, and freeing them. */
tf_status tf_trainer_adafactor_setup(tf_trainer *t, tf_error *err);
tf_status tf_trainer_adafactor_step(tf_trainer *t, double lr, int64_t step, tf_error *err);
void tf_trainer_adafactor_free(tf_trainer *t);

/* The run's backend memory by category (trainer_memory.c): the model's
 * weights, gradients and activations (its memory slot, ABI 1.3), the
 * optimizer's state, and temporaries = the backend's peak minus those four
 * (batch buffers, op workspaces, comm buffers; only with mem_info). False
 * when the model cannot tell (no memory slot). */
typedef struct tf_memory_breakdown {
    size_t weights, gradients, optimizer_states, activations, temporaries;
    bool have_temporaries;
} tf_memory_breakdown;
bool tf_trainer_memory(tf_trainer *t, tf_memory_breakdown *out);
/* The same as results.json's tfcore.memory_bytes object (bytes), or NULL. */
json_t *tf_trainer_memory_json(tf_trainer *t);

/* Wait until t->host may be refilled: from pinned memory the last upload is
 * asynchronous and may still be reading it (in a training step it has long
 * finished, so this returns at once). Call before every fill_batch. */
tf_status tf_trainer_host_batch_free(tf_trainer *t, tf_error *err);

/* Copy t->host (filled by the dataset) into t->dev (queued on the backend's
 * stream; from pinned memory the host does not wait for it). */
tf_status tf_trainer_upload(tf_trainer *t, tf_error *err);

/* Evaluate on the whole eval split; fills t->last_eval (eval_loss (not for QA, as Trainer), the
 * dataset's metrics as eval_*, eval_runtime, eval_samples_per_second,
 * eval_steps_per_second, epoch), logs and prints it. out may be NULL. */
tf_status tf_trainer_evaluate(tf_trainer *t, double epoch, tf_metrics *out, tf_error *err);

/* output_dir/checkpoint-<global_step>/: the model (Hugging Face layout),
 * optimizer.safetensors (AdamW moments) and trainer_state.json, written to a
 * temporary folder and renamed into place; then save_total_limit applies. */
tf_status tf_trainer_save_checkpoint(tf_trainer *t, double epoch, tf_error *err);

/* If training.resume_from_checkpoint is set, load parameters, optimizer and
 * trainer state from it so the run continues exactly where it stopped. */
tf_status tf_trainer_resume(tf_trainer *t, tf_error *err);

/* Train the best checkpoint's parameters back in when load_best_model_at_end
 * asks (every rank takes part); then save_total_limit = 1 keeps only the best
 * checkpoint, as Trainer.train does at its end. *loaded: whether it did. */
tf_status tf_trainer_load_best(tf_trainer *t, bool *loaded, tf_error *err);

/* --- output_dir (trainer_output_dir.c) ------------------------------------ */

/* Trainer's overwrite_output_dir: an output_dir that already holds a
 * previous run (results.json, log.jsonl, model.safetensors or a
 * checkpoint-N) is refused unless overwrite_output_dir or
 * resume_from_checkpoint is set. Called by the launcher before any worker. */
tf_status tf_output_dir_check(const tf_training_args *a, tf_error *err);
/* Rank 0 at the start: create output_dir, tidy what an interrupted run left
 * (aside folders, checkpoint-N.tmp, a final set half moved in), and choose
 * t->log_path (log.jsonl.new while a previous run's log.jsonl is kept). */
tf_status tf_output_dir_prepare(tf_trainer *t, tf_error *err);
/* The final model and results.json are written into set_dir
 * (output_dir/.final-set.tmp-<pid>, created empty by _begin) and put in
 * place as one set by _commit (this run's log.jsonl.new joins the set). */
tf_status tf_output_dir_final_begin(tf_trainer *t, char *set_dir, size_t cap, tf_error *err);
tf_status tf_output_dir_final_commit(tf_trainer *t, const char *set_dir, tf_error *err);

/* --- output: log.jsonl, results.json, the progress line ------------------ */

typedef struct tf_progress {
    bool enabled, tty;
    int64_t total, first;   /* steps in the run, step it (re)started at */
    double last_print;      /* when the line was last drawn */
    bool drawn;             /* a live line is on the terminal */
} tf_progress;

void tf_progress_start(tf_progress *p, int64_t total, int64_t first, bool enabled);
void tf_progress_update(tf_progress *p, int64_t step, double loss, double elapsed, double samples);
/* Clear a live line before other output. */
void tf_progress_pause(tf_progress *p);
void tf_progress_end(tf_progress *p);

tf_status tf_open_log(tf_trainer *t, tf_error *err);
/* After a resume (rank 0): drop log.jsonl's lines past t->global_step and
 * reopen it for appending (trainer_run_log_resume.c). */
tf_status tf_log_resume_trim(tf_trainer *t, tf_error *err);
/* One logging step: log.jsonl line + Trainer-style line on stderr; fails
 * (naming log.jsonl) when the line cannot be written. */
tf_status tf_log_step(tf_trainer *t, tf_progress *p, double loss, double grad_norm, double lr, double epoch,
                      tf_error *err);
/* A metrics dict (evaluation) into log.jsonl and on stderr; fails as tf_log_step. */
tf_status tf_log_metrics(tf_trainer *t, const tf_metrics *m, int64_t step, tf_error *err);
/* do_train = false: output_dir/results.json with the evaluation's metrics (no train_* keys) */
tf_status tf_write_eval_results(tf_trainer *t, const tf_metrics *eval, tf_error *err);
/* results.json into folder dir. */
tf_status tf_write_results(tf_trainer *t, const char *dir, double runtime, double samples, double steps,
                           double train_loss, double epoch, const tf_metrics *eval, tf_error *err);

/* Peak resident memory of this process, in MiB. */
double tf_peak_rss_mb(void);

void tf_metrics_add(tf_metrics *m, const char *name, double value);

#endif
