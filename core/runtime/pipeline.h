/* pipeline.h — pipeline parallelism (#19): the model's encoder layers cut
 * into S contiguous stages, each stage a worker; a step's rows split into M
 * micro-batches that flow forward through the stages (the boundary hidden
 * states sent to the next stage, ABI 1.4 comm send / recv) and back (their
 * gradients), in the GPipe or the 1F1B order. Each stage accumulates its own
 * parameters' gradients over the micro-batches and steps them; the stages'
 * parameters are gathered (broadcast from their owners) before an
 * evaluation or a save, so checkpoints are the normal Hugging Face layout.
 *
 * Ranks: rank = replica * S + stage (a replica's stages are neighbours);
 * comm.world_size = S x D runs D replicas, each reading its shard of the
 * samples, their stages' gradients averaged per stage (DDP's all-reduce,
 * within the group of one stage's ranks) before each step. */
#ifndef TFCORE_PIPELINE_H
#define TFCORE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tfcore/config.h"
#include "tfcore/error.h"
#include "tfcore/model.h"

#define TF_PIPELINE_MAX_STAGES 64
#define TF_PIPELINE_MAX_MICRO 1024

typedef enum tf_pipeline_schedule_kind { TF_PIPE_GPIPE = 0, TF_PIPE_1F1B = 1 } tf_pipeline_schedule_kind;

/* The config's `pipeline` section (pipeline_config.c). stages == 1: no
 * pipeline (no section). */
typedef struct tf_pipeline_settings {
    int stages;                      /* pipeline.stages, 2..TF_PIPELINE_MAX_STAGES */
    int micro_batches;               /* pipeline.micro_batches, 1..TF_PIPELINE_MAX_MICRO (default stages) */
    tf_pipeline_schedule_kind schedule; /* pipeline.schedule, "1f1b" (default) or "gpipe" */
    int layers[TF_PIPELINE_MAX_STAGES]; /* pipeline.layers: encoder layers per stage; all 0: balanced */
} tf_pipeline_settings;

/* Read and check the section against the comm settings (world_size a
 * multiple of stages: the replicas) and the training arguments (micro_batches >=
 * gradient_accumulation_steps, so a micro-batch fits the batch buffers).
 * Without the section: stages = 1. */
struct tf_training_args;
tf_status tf_pipeline_settings_read(tf_config *cfg, bool have_comm, int world_size,
                                    const struct tf_training_args *a, tf_pipeline_settings *out, tf_error *err);

/* What a pipeline needs of the chosen plugins (ABI 1.4 slots), refused
 * with one line when missing (--dry-run too): a comm plugin with send and
 * recv where every rank runs the optimizer, a model with the stage slots,
 * an AdamW optimizer (each stage steps its range of the moments). */
struct tf_plan;
tf_status tf_pipeline_check_plugins(const struct tf_plan *plan, tf_error *err);

/* --- schedules (pipeline_schedule.c): pure functions ---------------------- */

typedef enum tf_pipe_op_kind { TF_PIPE_FORWARD = 0, TF_PIPE_BACKWARD = 1 } tf_pipe_op_kind;
typedef struct tf_pipe_op {
    tf_pipe_op_kind kind;
    int micro; /* 0..M-1 */
} tf_pipe_op;

/* Stage `stage` of S's 2*M operations in the order it runs them:
 * GPipe: F0..F(M-1), then B(M-1)..B0 (every micro-batch's activations live
 * at once). 1F1B (PipeDream-flush): min(S-1-stage, M) forwards to fill the
 * pipeline, then one forward and one backward in turn, then the remaining
 * backwards (at most S-stage micro-batches in flight). */
void tf_pipeline_schedule(tf_pipeline_schedule_kind kind, int stage, int stages, int micro, tf_pipe_op *ops);
/* The bubble fraction a schedule of S stages and M micro-batches has with
 * equal stages: (S-1) / (M+S-1), for GPipe and 1F1B alike. */
double tf_pipeline_bubble(int stages, int micro);
/* Run the S schedules against each other in simulated time (a forward
 * takes t_fwd, a backward t_bwd on every stage; messages are free): the
 * step's makespan, the resulting bubble 1 - M*(t_fwd+t_bwd)/makespan, and
 * the most micro-batches any stage holds activations for at once. Fails if
 * the schedules deadlock (a check of the schedule functions). */
typedef struct tf_pipeline_sim {
    double makespan, bubble;
    int peak_in_flight;
} tf_pipeline_sim;
tf_status tf_pipeline_simulate(tf_pipeline_schedule_kind kind, int stages, int micro, double t_fwd, double t_bwd,
                               tf_pipeline_sim *out, tf_error *err);
const char *tf_pipeline_schedule_name(tf_pipeline_schedule_kind kind);

/* --- the partition (pipeline_partition.c): pure ------------------------- */

/* Cut layers 0..L-1 (cost[l] each: the parameters stage [l, l+1) owns,
 * embeddings in layer 0's, the head in layer L-1's) into S contiguous
 * non-empty stages minimising the largest stage's cost; first[0..S] gets the
 * boundaries (stage k runs layers [first[k], first[k+1])). */
tf_status tf_pipeline_partition(const size_t *cost, int layers, int stages, int *first, tf_error *err);

/* --- the split of a model (pipeline_plan.c) ------------------------------- */

/* first[0..S]: stage k runs layers [first[k], first[k+1]) of model m
 * (pipeline.layers, else balanced); one line when the model has fewer layers
 * than stages or the layers do not add up (ps: the pipeline section). */
tf_status tf_pipeline_split(const tf_pipeline_settings *set, tf_section *ps, const tf_model_vtable *mvt, tf_model *m,
                            int *first, tf_error *err);
/* --dry-run: create the model, print the partition and the expected bubble
 * as comments (nothing without a pipeline). */
tf_status tf_pipeline_print_plan(const struct tf_plan *plan, FILE *out, tf_error *err);

#endif
