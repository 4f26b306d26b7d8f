/* trainer.h — the training loop, written once and rank-local, as the Hugging
 * Face Trainer runs it: epochs of optimizer steps, each the sum of
 * gradient_accumulation_steps micro-batches; loss scaled by the precision
 * plugin; gradients reduced by the comm plugin (when there is one), unscaled,
 * clipped to max_grad_norm, then AdamW with the learning-rate schedule;
 * evaluation, logging and checkpoints when due; results.json and log.jsonl in
 * output_dir. */
#ifndef TFCORE_TRAINER_H
#define TFCORE_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include "grad_buckets.h"
#include "plan.h"
#include "stack.h"
#include "trainer_noise_scale.h"
#include "worker.h"
#include "tfcore/backend.h"
#include "tfcore/dataset.h"
#include "tfcore/model.h"
#include "tfcore/precision.h"

/* Where the time of a run went, in seconds. */
typedef enum tf_phase {
    TF_PHASE_DATA = 0,      /* sampling, filling and copying batches */
    TF_PHASE_FORWARD = 1,
    TF_PHASE_BACKWARD = 2,
    TF_PHASE_COMM = 3,      /* communication in flight (overlapped with backward or not);
                               the blocked part is tf_trainer.comm_exposed */
    TF_PHASE_OPTIMIZER = 4, /* unscale, clip, AdamW, zero_grad */
    TF_PHASE_EVAL = 5,
    TF_PHASE_SAVE = 6,
    TF_PHASE_COUNT = 7
} tf_phase;

extern const char *const tf_phase_name[TF_PHASE_COUNT];

/* Everything one worker holds while it trains. */
typedef struct tf_trainer {
    const tf_plan *plan;
    const tf_training_args *args;
    tf_worker w;              /* who this worker is in the job */
    int rank, world;          /* w.rank, w.world */
    /* the data-parallel view: which shard of the samples this worker reads,
     * of how many (rank, world; a pipeline's stages share their replica's) */
    int data_rank, data_world;
    struct tf_pipeline *pipe; /* this worker's pipeline stage (trainer_pipeline.h), or NULL */

    tf_stack stack;           /* backend, precision and model (opened and closed as one) */
    /* shorthand for the stack's parts, as the step uses them (set by setup) */
    const tf_backend_vtable *bvt;
    tf_backend *be;
    const tf_precision_vtable *pvt;
    tf_precision *prec;
    const tf_model_vtable *mvt;
    tf_model *model;
    const tf_model_info *info;
    const tf_dataset_vtable *dvt;
    tf_dataset *ds;

    tf_batch host;            /* host batch buffers, [rows_cap, seq_cap] each */
    tf_batch dev;             /* the same in backend memory */
    void *dev_block;          /* one allocation behind every dev array */
    bool host_pinned;         /* host's block is the backend's pinned host memory (a device
                                 backend): uploads are asynchronous */
    tf_event *upload_done;    /* recorded after the last upload (host_pinned) */
    bool upload_pending;      /* that upload may still be reading the host block */
    bool defer_loss;          /* the model queues the loss; read_loss after backward is queued */
    int rows_cap, seq_cap;

    tf_model_buffers buf;     /* params [n], grads [n] (the model's) */
    float *exp_avg;           /* [n] AdamW first moment (backend memory; NULL for adafactor) */
    float *exp_avg_sq;        /* [n] AdamW second moment */
    /* optim "adafactor" (trainer_adafactor.c): its state instead of the moments */
    tf_adafactor_tensor *af_tensors; /* [af_ntensors] the parameters as [batch, rows, cols] */
    size_t af_ntensors;
    float *af_state;          /* [af_state_n] f32 backend memory, zeroed at setup */
    size_t af_state_n;
    void *af_workspace;       /* backend memory, af_workspace_bytes */
    size_t af_workspace_bytes;
    float *dev_scalars;       /* [2] f32: loss / squared norm scratch */
    int32_t *dev_flag;        /* [1] finite-check flag */
    tf_adamw_segment *segs;   /* weight-decay segments over the flat buffer */
    size_t nsegs;

    /* --- talking to the other workers (all NULL/0 for a single worker) --- */
    const tf_comm_vtable *cvt;
    tf_comm *comm;
    const struct tf_strategy *strategy; /* how the workers combine a step (trainer_strategy.h) */
    size_t opt_lo, opt_n;     /* the range of the flat buffers this rank's optimizer updates:
                                 [0, n) (none, ddp, dataparallel's rank 0), a shard (ZeRO),
                                 a pipeline stage's parameters, or empty (dataparallel's
                                 other ranks) */
    float *opt_grads;         /* [opt_n] that range's gradients: buf.grads + opt_lo, or a
                                 pipeline stage's own gradient buffer (model keep_stage_grads;
                                 buf.grads is then NULL) */
    tf_grad_buckets buckets;  /* DDP's and ZeRO's overlapped bucketed reductions */
    struct tf_zero2 *zero2;   /* ZeRO-2's gradient residency (trainer_zero.c), or NULL */
    void *comm_scratch;       /* [TF_COMM_SCRATCH_BYTES] backend memory for small collectives */
    double comm_exposed;      /* seconds spent blocked on communication (part of phase[COMM]) */
    tf_comm_rank_log *rec;    /* this rank's slot of the flight recorder (comm_recorder.h) */
    tf_comm_recorder *rec_own; /* a private recorder when no launcher gave one (else NULL) */
    tf_comm_heartbeat *heartbeat; /* beats into rec while this worker process runs */
    struct tf_comm_peers *peers; /* the heartbeat across machines (comm_peers.h), or NULL */

    int64_t global_step;      /* optimizer steps done */
    int64_t micro_step;       /* micro-batches done (the dropout stream position) */
    double phase[TF_PHASE_COUNT];
    double total_loss;        /* sum over steps of the step's mean loss (Trainer's tr_loss) */
    int64_t skipped_steps;
    bool stop_agreed;         /* after the last step: every rank stops (a stop signal) */
    tf_training_plan steps;   /* the step counts Trainer derives */
    tf_noise_probe noise;     /* the gradient noise scale's measurements (trainer_noise_scale.h) */
    /* the epoch's global sample order: rows of the training split, and the
     * positions an epoch holds (rows padded to the sampler's world size);
     * a checkpoint records them with the global batch, so a resume on
     * another world size or strategy continues the same order */
    size_t train_rows, epoch_samples;
    tf_metrics last_eval;     /* the latest evaluation's metrics (eval_loss first, except QA) */
    int64_t last_eval_step;   /* the global_step last_eval was taken at (-1: none yet) */
    /* Trainer's state.best_metric / state.best_model_checkpoint: tracked at
     * each save that follows an evaluation when metric_for_best_model is set */
    bool have_best;
    double best_metric;
    char *best_checkpoint;    /* "output_dir/checkpoint-N" (strdup'ed) */

    FILE *log;                /* output_dir/log.jsonl (log.jsonl.new while a previous run's log is kept) */
    char *log_path;
    char *output_dir;
} tf_trainer;

#endif
