/* trainer_pipeline.h — running a pipeline stage in the trainer (pipeline.h says
 * what a pipeline is; trainer_pipeline.c does it). The trainer reaches these
 * through t->pipe (NULL without a pipeline section). */
#ifndef TFCORE_TRAINER_PIPELINE_H
#define TFCORE_TRAINER_PIPELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lr_schedule.h"
#include "pipeline.h"
#include "sampler.h"
#include "tfcore/error.h"

struct tf_trainer;
typedef struct tf_pipeline tf_pipeline;

/* In setup, before the optimizer state is allocated: this rank's stage's
 * range of the model's flat parameter buffer (the split tf_pipeline_setup
 * makes) becomes the trainer's optimizer range (t->opt_lo, t->opt_n), so the
 * stage allocates, steps and checkpoints the AdamW moments of its own
 * parameters only; with a model that has keep_stage_grads (ABI 1.5) it keeps
 * only their gradients too (t->opt_grads; t->buf.grads becomes NULL). */
tf_status tf_pipeline_own_state(struct tf_trainer *t, tf_error *err);

/* After the comm plugin is up (tf_trainer_comm_init): this rank's stage, the
 * split of the model's layers (pipeline.layers, or balanced by parameter
 * count), the boundary buffers, and the optimizer restricted to the stage's
 * parameter range. Sets t->pipe, t->data_rank and t->data_world. */
tf_status tf_pipeline_setup(struct tf_trainer *t, tf_error *err);
void tf_pipeline_free(struct tf_trainer *t);

/* One optimizer step as a stage: the step's rows (per_device_train_batch_size
 * x gradient_accumulation_steps of this replica's shard) split into
 * micro_batches, run in the schedule's order with the neighbours; the loss
 * of each micro-batch weighted by its share of the step's rows (so the step
 * is the mean over its rows, as one worker's batch); then the trainer's
 * optimizer step on this stage's parameters (gradient norm and overflow
 * agreed across the stages). Arguments as tf_trainer_step's. */
tf_status tf_pipeline_step(struct tf_trainer *t, tf_sampler *s, const tf_lr_schedule *lrs, int64_t step_in_epoch,
                           double *step_loss, double *lr, double *norm, bool *skipped, tf_error *err);

/* buf[n] (backend memory, n = the model's parameters) whole on every rank,
 * each stage's range broadcast from its owner (stage k of replica 0, rank k).
 * Collective. The checkpoint gathers the moments with it (from a buffer each
 * rank filled at its own range). */
tf_status tf_pipeline_gather_buf(struct tf_trainer *t, float *buf, tf_error *err);
/* Every rank gets every stage's parameters (tf_pipeline_gather_buf on the
 * model's parameter buffer), so evaluation and saves see the whole model. */
tf_status tf_pipeline_gather(struct tf_trainer *t, tf_error *err);

/* host[n] f64 summed over the stages of one replica (gradient norm,
 * overflow flag: every replica holds the same gradients after the
 * per-stage all-reduce), the result on every rank. */
tf_status tf_pipeline_sum(struct tf_trainer *t, double *host, size_t n, tf_error *err);

/* At the end of training (every rank): the gather above, and every worker's
 * measurements collected for results.json. */
tf_status tf_pipeline_finish(struct tf_trainer *t, tf_error *err);

/* results.json's tfcore.pipeline: stages, replicas, micro_batches,
 * schedule, stage_layers ([first, end) per stage), expected_bubble
 * ((S-1)/(M+S-1)), and per worker (by rank) utilisation = compute time
 * (forward, backward, recomputation) / step time and bubble = the share of
 * its schedule's time spent waiting on a neighbour, with measured_bubble
 * their ratio over all workers; memory_bytes, per worker (by rank), the
 * model's weights, gradients, optimizer_states and activations in bytes
 * (tfcore.memory_bytes' categories: a stage's optimizer_states are its own
 * range's). */
json_t *tf_pipeline_json(const struct tf_trainer *t);

#endif
