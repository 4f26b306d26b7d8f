/* trainer_noise_scale.h — measuring the gradient noise scale while training,
 * from norms the step has anyway (noise_scale.h has the estimator; the
 * definitions and limits are in docs/PARALLEL.md, "Statistical efficiency
 * and goodput").
 *
 * A step's "small" gradients are
 *   ranks        (data-parallel world > 1) what each data-parallel worker
 *                holds before the reduction: its rows' mean gradient. DDP and
 *                ZeRO-1 reduce bucket by bucket during the last backward, so
 *                each bucket's squared norm is taken just before its
 *                all-reduce starts; DataParallel and ZeRO-2 take the whole
 *                buffer before their reduction; a pipeline stage takes its
 *                own range before the per-stage all-reduce, and the stages'
 *                parts are summed (as the gradient norm is);
 *   first micro  (one data-parallel worker, gradient accumulation or a
 *                pipeline's micro-batches >= 2) the buffer right after the
 *                step's first backward, which holds that micro-batch's
 *                gradient alone (scaled): no copy of the buffer is kept;
 * and the "big" one is the step's reduced gradient, whose squared norm is
 * the one clipping computes. The ranks' parts travel in the step's existing
 * all-reduce of its loss (TF_NOISE_NVALS more doubles); none: one worker
 * without accumulation has no second batch size, and results.json says so. */
#ifndef TFCORE_TRAINER_NOISE_SCALE_H
#define TFCORE_TRAINER_NOISE_SCALE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "noise_scale.h"
#include "tfcore/error.h"
#include "tfcore/model.h"

struct tf_trainer;

typedef enum tf_noise_mode {
    TF_NOISE_NONE = 0,
    TF_NOISE_RANKS,       /* the data-parallel workers' gradients before the reduction */
    TF_NOISE_FIRST_MICRO  /* the step's first micro-batch's gradient on one worker */
} tf_noise_mode;

#define TF_NOISE_SLOTS 64 /* pieces queued on the backend before a read-back */
#define TF_NOISE_NVALS 5  /* doubles a rank adds to the step's all-reduce */

typedef struct tf_noise_probe {
    tf_noise_mode mode;
    const char *why_none;  /* mode NONE: why there is no estimate */
    tf_noise_scale est;
    double m0, m;          /* statistics.reference_batch_size, the run's global batch */
    float *dev_sq;         /* [TF_NOISE_SLOTS] f32 backend memory: the pieces' squared norms */
    struct tf_stream *stream; /* reads dev_sq back: waits for the pieces only (event), never for
                                 the compute stream's later waits on the comm stream, which a
                                 stopped peer would make endless outside comm.timeout_s */
    struct tf_event *taken_ev; /* recorded on the compute stream after each piece */
    size_t nslots;         /* slots queued this step */
    double raw;            /* read-back pieces of this step (loss-scaled gradients) */
    bool taken;            /* a piece was queued this step */
    bool bucketed;         /* the last backward reduced in DDP's buckets (pieces taken there) */
    bool armed;            /* the step's last backward runs: bucket pieces are taken from now */
    bool foreign_hook;     /* it reduced through a hook the probe cannot see into: no estimate */
    /* this rank's part of the step (tf_noise_describe) */
    double factor;         /* raw squared norm -> |g_small|^2 */
    double b_small, b_part; /* its small batch's rows; the effective rows of its share of the big gradient */
    bool counted;          /* its small batch counts (a pipeline's first stage speaks for its replica) */
    bool bad;              /* it cannot give its part this step */
    /* the step as agreed (tf_noise_unpack): small_b 0 = no estimate this step */
    double step_small_sq, step_small_b, step_big_b;
    tf_status st;          /* the first error of a bucket callback (it cannot return one) */
    tf_error err;
} tf_noise_probe;

/* After the comm plugin and the strategy are up (run_loop): the mode, the
 * slots, and the buckets' hook for DDP and ZeRO-1. */
tf_status tf_noise_setup(struct tf_trainer *t, tf_error *err);
void tf_noise_free(struct tf_trainer *t);

/* Start of a step: nothing queued, nothing described. */
void tf_noise_step_begin(struct tf_trainer *t);
/* Queue the squared norm of grads[n] (backend memory, before any reduction
 * of them) as a piece of this rank's small gradient. */
tf_status tf_noise_take(struct tf_trainer *t, const float *grads, size_t n, tf_error *err);
/* The backward hook of the step's last micro-batch (NULL: none). */
void tf_noise_hook(struct tf_trainer *t, tf_grads_ready_fn ready);
/* tf_grad_buckets' before_start hook (user = the trainer): a bucket's piece. */
void tf_noise_bucket_piece(void *user, size_t offset, size_t count);
/* This rank's part of the step: raw pieces x factor = |g_small|^2 of b_small
 * rows; b_part the effective rows of what it adds to the big gradient (the
 * big one is the equal-weight average of the counted ranks' parts); bad:
 * no estimate this step (a short accumulation, a reduction the probe cannot
 * see into). */
void tf_noise_describe(struct tf_trainer *t, double factor, double b_small, double b_part, bool counted, bool bad);
/* A pipeline stage's part, its gradients g[n] not yet reduced over the
 * replicas: with replicas, the stage's piece (a replica's small gradient is
 * its stages' pieces summed); on one replica, the piece its first backward
 * (of first_rows rows) took. The step had m rows, each micro-batch weighted
 * by its share, so the stage holds loss_scale x the mean over m rows; the
 * first stage speaks for its replica. */
tf_status tf_noise_stage(struct tf_trainer *t, const float *g, size_t n, bool first_stage, size_t m,
                         size_t first_rows, tf_error *err);
/* Read the pieces back and write this rank's TF_NOISE_NVALS values; after
 * they are summed over the ranks, unpack them into the step's small batch. */
tf_status tf_noise_pack(struct tf_trainer *t, double *v, tf_error *err);
void tf_noise_unpack(struct tf_trainer *t, const double *v);
/* After clipping measured the reduced gradient: |g_big|^2 (unscaled) into the estimate. */
void tf_noise_step_end(struct tf_trainer *t, double big_sq);

/* results.json's tfcore.statistics: noise_scale, grad_sq, trace_sigma,
 * batch_size, reference_batch_size, statistical_efficiency, goodput
 * (samples_per_second x efficiency), how it was estimated; null values and
 * a reason where there is no estimate. */
json_t *tf_noise_json(const struct tf_trainer *t, double samples_per_second);

#endif
