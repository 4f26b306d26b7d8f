/* trainer_strategy.h — how data-parallel workers combine one optimizer step: one
 * object per parallel strategy, called by the step (trainer.c) at a few
 * fixed points:
 *
 *   for each micro-batch k:   backward_hook  (the model's grads-ready callback
 *                                             for that backward, or none)
 *   after the micro-batches:  reduce_gradients
 *   in the optimizer step:    agree_overflow (found_inf the same on every rank)
 *                             grad_norm_sq   (the squared norm of the whole gradient)
 *   after the optimizer:      after_optimizer (parameters the same everywhere)
 *
 * and the range [opt_lo, opt_lo + opt_n) of the flat parameter buffer whose
 * update this rank computes (its optimizer state covers exactly that range).
 *
 *   none          one worker: nothing to combine; it steps everything.
 *   ddp           bucketed all-reduce (average) overlapping the last backward
 *                 (grad_buckets.h); every rank steps everything.
 *   dataparallel  torch DataParallel: each micro-batch scattered over the
 *                 replicas, the gradients' sum reduced to rank 0, which alone
 *                 steps and then broadcasts the parameters.
 *   zero1, zero2  ZeRO stage 1 / 2 (trainer_zero.c): each rank owns a shard
 *                 of the flat buffer and keeps the optimizer state for it only;
 *                 stage 1 all-reduces the gradients as ddp, stage 2 reduces
 *                 each bucket to the owners of its parts during every
 *                 backward and frees the parts it does not own; both
 *                 all-gather the updated parameters.
 *   pipeline      stages x replicas (trainer_pipeline.c runs the step and
 *                 reduces each stage's gradients over its replicas); each
 *                 stage's optimizer range (and state) is its own parameters;
 *                 the overflow check and the gradient norm summed over stages. */
#ifndef TFCORE_TRAINER_STRATEGY_H
#define TFCORE_TRAINER_STRATEGY_H

#include <stdbool.h>
#include <stdio.h>

#include "tfcore/error.h"
#include "tfcore/model.h"

struct tf_trainer;

typedef struct tf_strategy {
    const char *name;
    /* true: the sampler draws one global stream and each micro-batch is
     * scattered over the replicas (tf_sampler_set_batch) */
    bool scatter;
    /* true: the optimizer state covers only [opt_lo, opt_lo + opt_n) (ZeRO's
     * shard, a pipeline stage's parameters) */
    bool sharded;
    /* After the comm plugin is up (trace: TFCORE_TRACE_COMM's file or NULL;
     * the strategy owns it). */
    tf_status (*init)(struct tf_trainer *t, FILE *trace, tf_error *err);
    void (*free)(struct tf_trainer *t);
    /* Before micro-batch backward (last: the step's last one): the callback
     * the model calls as ranges of gradients become final, or NULL. */
    tf_grads_ready_fn (*backward_hook)(struct tf_trainer *t, bool last, void **user);
    /* After the step's micro-batches: the gradients of [opt_lo, opt_lo+opt_n)
     * reduced (averaged over ranks) on this rank. */
    tf_status (*reduce_gradients)(struct tf_trainer *t, tf_error *err);
    /* This rank's overflow check of its range, made the job's. */
    tf_status (*agree_overflow)(struct tf_trainer *t, bool *found_inf, tf_error *err);
    /* *sq (this rank's sum of squares over its range) made the whole gradient's. */
    tf_status (*grad_norm_sq)(struct tf_trainer *t, double *sq, tf_error *err);
    /* After the optimizer updated (or, skipped, did not update) the range. */
    tf_status (*after_optimizer)(struct tf_trainer *t, bool skipped, tf_error *err);
    /* Zero the gradients after the optimizer; NULL: the model's zero_grad
     * (ZeRO-2 zeroes its shard only: the rest is zero already). */
    tf_status (*zero_grads)(struct tf_trainer *t, tf_error *err);
} tf_strategy;

extern const tf_strategy tf_strategy_none, tf_strategy_ddp, tf_strategy_dataparallel, tf_strategy_zero1,
    tf_strategy_zero2, tf_strategy_pipeline;

/* The strategy for this worker (the comm plugin and comm.zero_stage), and
 * this rank's optimizer range, set on t before the optimizer state is
 * allocated (a pipeline stage's range is set by tf_pipeline_own_state after
 * it: it needs the split, which can fail). */
void tf_strategy_pick(struct tf_trainer *t);

/* ZeRO's shard of rank r among world ranks over n elements: the first
 * world * (n / world) elements in equal blocks of n / world, rank r owning
 * block r; the last rank also owns the n % world elements past them. */
void tf_zero_shard(size_t n, int world, int rank, size_t *lo, size_t *count);

/* ZeRO: buf[n] (backend memory, n = the model's parameters) whole on every
 * rank, from each rank's shard of it (all-gather, then the tail broadcast
 * from the last rank). Collective. */
tf_status tf_zero_gather(struct tf_trainer *t, float *buf, tf_error *err);

/* ZeRO-2 on a backend of host memory: the most bytes of the gradient buffer
 * seen resident at once during backward (the rank's shard and the buckets in
 * flight; measured with mincore). False elsewhere, or before a backward. */
bool tf_zero2_gradient_bytes(const struct tf_trainer *t, size_t *bytes);

/* --dry-run with comm.zero_stage > 0: create the model once to count its
 * parameters and print, as comment lines, each rank's shard of them and the
 * optimizer state it keeps (tf_zero_shard). */
struct tf_plan;
tf_status tf_zero_print_shards(const struct tf_plan *plan, FILE *out, tf_error *err);

#endif
