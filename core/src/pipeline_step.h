/* pipeline_step.h — running a pipeline stage in the trainer (pipeline.h says
 * what a pipeline is; pipeline_step.c does it). The trainer reaches these
 * through t->pipe (NULL without a pipeline section). */
#ifndef TFCORE_PIPELINE_STEP_H
#define TFCORE_PIPELINE_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "lr_schedule.h"
#include "pipeline.h"
#include "sampler.h"
#include "tfcore/error.h"

struct tf_trainer;
typedef struct tf_pipeline tf_pipeline;

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

/* Every rank gets every stage's parameters and AdamW moments (broadcast from
 * each stage's owner), so evaluation and saves see the whole model. */
tf_status tf_pipeline_gather(struct tf_trainer *t, tf_error *err);

/* host[n] f64 summed over the stages (gradient norm, overflow flag). */
tf_status tf_pipeline_sum(struct tf_trainer *t, double *host, size_t n, tf_error *err);

/* What the run measured, for results.json: the time this worker was busy
 * computing (forward, backward, recomputation) and the time its steps took,
 * so utilisation = busy / steps and the measured bubble = 1 - utilisation. */
typedef struct tf_pipeline_stats {
    int stage, stages, micro_batches, first_layer, end_layer;
    const char *schedule;
    double busy_s, step_s, expected_bubble;
} tf_pipeline_stats;
void tf_pipeline_stats_get(const struct tf_trainer *t, tf_pipeline_stats *out);

#endif
