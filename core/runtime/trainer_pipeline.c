/* trainer_pipeline.c — a pipeline stage's part of training (trainer_pipeline.h).
 *
 * Buffers, each [rows, seq, hidden] of the compute dtype for the largest
 * micro-batch (the boundary activation, tfcore/model.h stage_forward):
 *   in[j]    the activation micro-batch j arrived with (stages after the
 *            first), kept until its backward;
 *   out[j]   what micro-batch j's forward sent on (stages before the last),
 *            untouched until the send completes at the end of the step;
 *   redo     where a recomputed forward writes its output (never sent);
 *   gin[j]   the gradient sent back for micro-batch j (stages after the first);
 *   gout     the gradient received for the micro-batch in backward.
 * The model holds one micro-batch's activations: a backward whose forward
 * was not the stage's last recomputes it from in[j] (GPipe's
 * re-materialisation; with dropout masks by row it is the same forward).
 * Sends are started and completed at the end of the step, receives waited
 * at once: a stage blocks only on what its next operation needs, so the
 * schedules cannot deadlock (tf_pipeline_simulate checks them).
 *
 * Memory: the trainer's optimizer range (t->opt_lo, t->opt_n) is the stage's
 * own parameter range (tf_pipeline_own_state), so the AdamW moments hold
 * that range only, and so do the gradients where the model keeps a stage's
 * only (its keep_stage_grads, ABI 1.5; t->opt_grads). The model's flat
 * parameter buffer stays whole: evaluation runs the whole model on every
 * rank (tf_pipeline_gather before it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_pipeline.h"
#include "stop_signal.h"
#include "trainer.h"
#include "trainer_internal.h"
#include "tfcore/log.h"

#define ALL_ROWS 8

struct tf_pipeline {
    tf_pipeline_settings set;
    int stage, stages, M;
    int replica, replicas; /* this rank's copy of the pipeline, of how many */
    int rank0;             /* the rank of this replica's first stage (replica * stages) */
    float *reduce_buf;     /* [own_n of this stage] a replica's gradients (replica 0 of D > 1) */
    int first[TF_PIPELINE_MAX_STAGES + 1]; /* stage k runs layers [first[k], first[k+1]) */
    size_t own_off[TF_PIPELINE_MAX_STAGES], own_n[TF_PIPELINE_MAX_STAGES]; /* each stage's parameter range */
    size_t act_elems;     /* rows x seq x hidden of the largest micro-batch (the buffers' size) */
    size_t act_bytes;
    tf_dtype act_dt;
    void **in, **out, **gin; /* [M] each, NULL where the stage has none */
    void *redo, *gout;
    tf_comm_request **sends; /* [2M] started this step */
    uint64_t *send_seq;      /* [2M] their flight-recorder events */
    size_t nsends;
    tf_pipe_op *ops;      /* [2M] this stage's schedule */
    /* what this worker measured (trainer_pipeline.h, tf_pipeline_json) */
    double busy_s;        /* forward, backward, recomputation */
    double sched_s;       /* the schedule's part of the steps: micro-batches and their messages */
    double wait_s;        /* of which waiting on a neighbour (receives, sends completing) */
    double waited;        /* every wait in send / recv so far (the schedule's and the all-reduce's) */
    double step_s;        /* whole steps: the schedule, all-reduces, optimizer */
    double *all;          /* [ALL_ROWS x world] every worker's busy, sched, wait, step, then its
                             memory by category: weights, gradients, optimizer_states,
                             activations (tf_pipeline_finish) */
    bool have_memory;     /* the model reports its memory (the last four rows are filled) */
};

static const char *comm_name(const tf_trainer *t) { return t->plan->plugin[TF_KIND_COMM]->desc->name; }

/* --- point-to-point, recorded in the flight recorder ---------------------- */

static tf_status p2p_wait(tf_trainer *t, tf_comm_request *req, uint64_t seq, tf_error *err)
{
    tf_comm_rec_block(t->rec, seq);
    tf_status st = t->cvt->wait(t->comm, req, err);
    if (!st) {
        tf_comm_rec_exit(t->rec, seq);
        tf_comm_rec_block(t->rec, 0);
    }
    return st;
}

static tf_status send_start(tf_trainer *t, const void *buf, size_t count, tf_dtype dt, int peer, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    tf_comm_request *req = NULL;
    uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_SEND, count * tf_dtype_size(dt), 0, 0);
    tf_status st = t->cvt->send(t->comm, buf, count, dt, peer, &req, err);
    if (st) return st;
    p->send_seq[p->nsends] = seq;
    p->sends[p->nsends++] = req;
    return TF_OK;
}

/* Wait for the sends of this step (their buffers may be written again). */
static tf_status sends_finish(tf_trainer *t, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    double t0 = tf_now();
    tf_status st = TF_OK;
    for (size_t i = 0; i < p->nsends && !st; i++) st = p2p_wait(t, p->sends[i], p->send_seq[i], err);
    p->nsends = 0;
    double d = tf_now() - t0;
    p->waited += d;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

static tf_status recv_now(tf_trainer *t, void *buf, size_t count, tf_dtype dt, int peer, tf_error *err)
{
    double t0 = tf_now();
    tf_comm_request *req = NULL;
    uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_RECV, count * tf_dtype_size(dt), 0, 0);
    tf_status st = t->cvt->recv(t->comm, buf, count, dt, peer, &req, err);
    if (!st) st = p2p_wait(t, req, seq, err);
    double d = tf_now() - t0;
    t->pipe->waited += d;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

/* --- setup ------------------------------------------------------------------ */

static tf_status alloc_act(tf_trainer *t, void **out, tf_error *err)
{
    return t->bvt->alloc(t->be, t->pipe->act_bytes, TF_MEM_DEVICE, out, err);
}

tf_status tf_pipeline_own_state(tf_trainer *t, tf_error *err)
{
    const tf_pipeline_settings *set = &t->plan->pipeline;
    int first[TF_PIPELINE_MAX_STAGES + 1], stage = t->rank % set->stages;
    tf_status st = tf_pipeline_split(set, tf_config_section(t->plan->cfg, "pipeline"), t->mvt, t->model, first, err);
    if (st) return st;
    t->mvt->stage_params(t->model, first[stage], first[stage + 1], &t->opt_lo, &t->opt_n);
    t->opt_grads = t->buf.grads + t->opt_lo;
    if (!TF_HAS(t->mvt, keep_stage_grads)) return TF_OK; /* a model before ABI 1.5: its gradients stay whole */
    if ((st = t->mvt->keep_stage_grads(t->model, first[stage], first[stage + 1], &t->opt_grads, err))) return st;
    t->mvt->buffers(t->model, &t->buf); /* grads is NULL now */
    return TF_OK;
}

tf_status tf_pipeline_setup(tf_trainer *t, tf_error *err)
{
    const tf_pipeline_settings *set = &t->plan->pipeline;
    t->data_rank = t->rank / set->stages;
    t->data_world = t->world / set->stages;
    tf_pipeline *p = calloc(1, sizeof *p);
    if (!p) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    t->pipe = p;
    p->set = *set;
    p->stages = set->stages;
    p->stage = t->rank % set->stages;
    p->replica = t->rank / set->stages;
    p->replicas = t->world / set->stages;
    p->rank0 = p->replica * set->stages;
    p->M = set->micro_batches;
    tf_status st = tf_pipeline_split(set, tf_config_section(t->plan->cfg, "pipeline"), t->mvt, t->model, p->first, err);
    if (st) return st;
    for (int k = 0; k < p->stages; k++)
        t->mvt->stage_params(t->model, p->first[k], p->first[k + 1], &p->own_off[k], &p->own_n[k]);
    const tf_training_args *a = t->args;
    size_t step_rows = (size_t)(a->per_device_train_batch_size * a->gradient_accumulation_steps);
    size_t mb_rows = (step_rows + (size_t)p->M - 1) / (size_t)p->M;
    p->act_dt = t->pvt->compute_dtype(t->prec);
    p->act_elems = mb_rows * (size_t)t->seq_cap * (size_t)t->info->hidden_size;
    p->act_bytes = p->act_elems * tf_dtype_size(p->act_dt);
    size_t M = (size_t)p->M;
    p->in = calloc(M, sizeof *p->in);
    p->out = calloc(M, sizeof *p->out);
    p->gin = calloc(M, sizeof *p->gin);
    p->sends = calloc(2 * M, sizeof *p->sends);
    p->send_seq = calloc(2 * M, sizeof *p->send_seq);
    p->ops = calloc(2 * M, sizeof *p->ops);
    if (!p->in || !p->out || !p->gin || !p->sends || !p->send_seq || !p->ops)
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    bool first_stage = p->stage == 0, last_stage = p->stage == p->stages - 1;
    for (size_t j = 0; j < M && !st; j++) {
        if (!first_stage && !(st = alloc_act(t, &p->in[j], err))) st = alloc_act(t, &p->gin[j], err);
        if (!st && !last_stage) st = alloc_act(t, &p->out[j], err);
    }
    if (!st && !last_stage && !(st = alloc_act(t, &p->redo, err))) st = alloc_act(t, &p->gout, err);
    if (!st && p->replicas > 1 && p->replica == 0)
        st = t->bvt->alloc(t->be, p->own_n[p->stage] * sizeof(float), TF_MEM_DEVICE, (void **)&p->reduce_buf, err);
    if (st) return st;
    tf_pipeline_schedule(set->schedule, p->stage, p->stages, p->M, p->ops);
    if (t->rank == 0) {
        tf_info("pipeline: %d stages x %d micro-batches of up to %zu rows, %s schedule; expected bubble %.3f; "
                "%d replica%s",
                p->stages, p->M, mb_rows, tf_pipeline_schedule_name(set->schedule),
                tf_pipeline_bubble(p->stages, p->M), p->replicas, p->replicas == 1 ? "" : "s");
        for (int k = 0; k < p->stages; k++)
            tf_info("pipeline: stage %d: layers %d..%d%s%s, %zu parameters; AdamW moments for them only: "
                    "%.2f MiB (whole model: %.2f MiB)",
                    k, p->first[k], p->first[k + 1] - 1, k == 0 ? " + embeddings" : "",
                    k == p->stages - 1 ? " + head" : "", p->own_n[k], 2.0 * (double)p->own_n[k] * 4 / 1048576.0,
                    2.0 * (double)t->buf.n * 4 / 1048576.0);
    }
    return TF_OK;
}

void tf_pipeline_free(tf_trainer *t)
{
    tf_pipeline *p = t->pipe;
    if (!p) return;
    for (int j = 0; j < p->M; j++) {
        if (p->in && p->in[j]) t->bvt->free(t->be, p->in[j], TF_MEM_DEVICE);
        if (p->out && p->out[j]) t->bvt->free(t->be, p->out[j], TF_MEM_DEVICE);
        if (p->gin && p->gin[j]) t->bvt->free(t->be, p->gin[j], TF_MEM_DEVICE);
    }
    if (p->redo) t->bvt->free(t->be, p->redo, TF_MEM_DEVICE);
    if (p->reduce_buf) t->bvt->free(t->be, p->reduce_buf, TF_MEM_DEVICE);
    if (p->gout) t->bvt->free(t->be, p->gout, TF_MEM_DEVICE);
    free(p->in);
    free(p->out);
    free(p->gin);
    free(p->sends);
    free(p->send_seq);
    free(p->ops);
    free(p->all);
    free(p);
    t->pipe = NULL;
}

/* --- the step ---------------------------------------------------------------- */

typedef struct micro {
    size_t first, n; /* this replica's positions [first, first + n) of the epoch */
} micro;

/* Fill and upload micro-batch mb, and position the dropout streams on its rows. */
static tf_status load_micro(tf_trainer *t, tf_sampler *s, const micro *mb, size_t *idx, tf_error *err)
{
    double t0 = tf_now();
    tf_sampler_rows(s, mb->first, mb->n, idx);
    tf_status st = tf_trainer_host_batch_free(t, err);
    if (!st) st = t->dvt->fill_batch(t->ds, TF_SPLIT_TRAIN, idx, mb->n, &t->host, err);
    if (!st) st = tf_trainer_upload(t, err);
    t->phase[TF_PHASE_DATA] += tf_now() - t0;
    return st;
}

static void position(tf_trainer *t, tf_sampler *s, const micro *mb)
{
    if (TF_HAS(t->mvt, set_rows))
        t->mvt->set_rows(t->model, (uint64_t)s->epoch, tf_sampler_position(s, mb->first), (uint64_t)s->world);
    else
        t->mvt->set_step(t->model, (uint64_t)t->micro_step);
}

/* D replicas: the mean of this stage's gradients over the replicas, on
 * every replica (DDP's average, within the stage's group of ranks
 * stage, S + stage, ...): replica 0 receives and adds the others' in
 * replica order, scales by 1/D and sends the result back. Point-to-point
 * only, so the comm plugin needs no groups. */
static tf_status stage_allreduce(tf_trainer *t, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    float *g = t->opt_grads; /* the stage's own range */
    size_t n = p->own_n[p->stage];
    tf_status st = TF_OK;
    if (p->replica > 0) {
        if (!(st = send_start(t, g, n, TF_DTYPE_F32, p->stage, err))) st = sends_finish(t, err);
        if (!st) st = recv_now(t, g, n, TF_DTYPE_F32, p->stage, err);
        return st;
    }
    for (int r = 1; r < p->replicas && !st; r++) {
        st = recv_now(t, p->reduce_buf, n, TF_DTYPE_F32, r * p->stages + p->stage, err);
        if (!st) st = t->bvt->add(t->be, NULL, g, p->reduce_buf, g, n, TF_DTYPE_F32, err);
    }
    if (!st) st = t->bvt->scale(t->be, NULL, g, n, 1.0f / (float)p->replicas, TF_DTYPE_F32, err);
    if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
    for (int r = 1; r < p->replicas && !st; r++) st = send_start(t, g, n, TF_DTYPE_F32, r * p->stages + p->stage, err);
    if (!st) st = sends_finish(t, err);
    return st;
}

tf_status tf_pipeline_step(tf_trainer *t, tf_sampler *s, const tf_lr_schedule *lrs, int64_t step_in_epoch,
                           double *step_loss, double *lr, double *norm, bool *skipped, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    const tf_training_args *a = t->args;
    double step_t0 = tf_now(), waited0 = p->waited;
    size_t step_rows = (size_t)(a->per_device_train_batch_size * a->gradient_accumulation_steps);
    size_t shard = tf_sampler_rank_rows(s);
    size_t first = (size_t)step_in_epoch * step_rows;
    size_t m = first < shard ? (shard - first < step_rows ? shard - first : step_rows) : 0;
    int M = p->M < (int)m ? p->M : (int)m; /* an epoch's last, short step may have fewer rows than micro-batches */
    if (M != p->M) tf_pipeline_schedule(p->set.schedule, p->stage, p->stages, M, p->ops);
    micro mbs[TF_PIPELINE_MAX_MICRO];
    for (int j = 0, at = 0; j < M; j++) { /* rows split as evenly as they go, the first ones a row longer */
        size_t n = m / (size_t)M + ((size_t)j < m % (size_t)M ? 1 : 0);
        mbs[j] = (micro){first + (size_t)at, n};
        at += (int)n;
    }
    size_t idx[4096];
    if (step_rows > sizeof idx / sizeof idx[0])
        return tf_error_set(err, TF_ERR_CONFIG, "a step of %zu rows is too large", step_rows);
    const int stage = p->stage;
    const bool first_stage = stage == 0, last_stage = stage == p->stages - 1;
    const int lo = p->first[stage], hi = p->first[stage + 1];
    const float loss_scale = t->pvt->loss_scale(t->prec);
    bool scaling = loss_scale != 1.0f;
    double loss_sum = 0;
    int resident = -1; /* the micro-batch whose activations the model holds */
    tf_status st = TF_OK;
    size_t noise_first = 0; /* rows of the stage's first backward (its gradient alone, trainer_noise_scale.h) */
    tf_noise_step_begin(t);
    for (int i = 0; i < 2 * M && !st; i++) {
        tf_pipe_op op = p->ops[i];
        const micro *mb = &mbs[op.micro];
        tf_comm_rec_where(t->rec, op.kind == TF_PIPE_FORWARD ? TF_WHERE_FORWARD : TF_WHERE_BACKWARD,
                          t->global_step + 1, op.micro + 1);
        if (op.kind == TF_PIPE_FORWARD || resident != op.micro) {
            bool redo = op.kind == TF_PIPE_BACKWARD;
            if ((st = load_micro(t, s, mb, idx, err))) break;
            /* the boundary tensor of this micro-batch: [n, seq, hidden], seq the batch's own */
            size_t elems = mb->n * (size_t)t->dev.seq * (size_t)t->info->hidden_size;
            if (!first_stage && !redo &&
                (st = recv_now(t, p->in[op.micro], elems, p->act_dt, p->rank0 + stage - 1, err)))
                break;
            double t0 = tf_now();
            position(t, s, mb);
            tf_model_output out;
            st = t->mvt->stage_forward(t->model, lo, hi, &t->dev, p->in[op.micro],
                                       last_stage ? NULL : redo ? p->redo : p->out[op.micro], true, &out, err);
            if (!st && last_stage && !redo) {
                float got = out.loss;
                if (t->defer_loss) st = t->mvt->read_loss(t->model, &got, err);
                if (!st && !isfinite(got) && !scaling)
                    st = tf_error_set(err, TF_ERR_RUNTIME, "step %lld: the training loss is %s; stopping",
                                      (long long)t->global_step + 1, isnan(got) ? "nan" : "inf");
                if (!st && isfinite(got)) loss_sum += (double)got * (double)mb->n / (double)m;
            }
            double d = tf_now() - t0;
            t->phase[TF_PHASE_FORWARD] += d;
            p->busy_s += d;
            if (st) break;
            resident = op.micro;
            if (!redo && !last_stage &&
                (st = send_start(t, p->out[op.micro], elems, p->act_dt, p->rank0 + stage + 1, err)))
                break;
            if (!redo) t->micro_step++;
            if (!redo) continue;
        }
        /* backward of micro-batch op.micro */
        tf_comm_rec_phase(t->rec, TF_WHERE_BACKWARD);
        size_t elems = mb->n * (size_t)t->dev.seq * (size_t)t->info->hidden_size; /* t->dev is this micro-batch */
        if (!last_stage && (st = recv_now(t, p->gout, elems, p->act_dt, p->rank0 + stage + 1, err))) break;
        double t0 = tf_now();
        /* its share of the step's rows: the step's loss is the mean over them */
        float scale = loss_scale * (float)((double)mb->n / (double)m);
        st = t->mvt->stage_backward(t->model, last_stage ? NULL : p->gout, first_stage ? NULL : p->gin[op.micro],
                                    scale, err);
        double d = tf_now() - t0;
        t->phase[TF_PHASE_BACKWARD] += d;
        p->busy_s += d;
        resident = -1;
        if (!st && !noise_first && t->noise.mode == TF_NOISE_FIRST_MICRO && M >= 2) {
            noise_first = mb->n;
            st = tf_noise_take(t, t->opt_grads, t->opt_n, err);
        }
        if (!st && !first_stage) st = send_start(t, p->gin[op.micro], elems, p->act_dt, p->rank0 + stage - 1, err);
    }
    if (!st) st = sends_finish(t, err);
    p->sched_s += tf_now() - step_t0;
    p->wait_s += p->waited - waited0;
    if (M != p->M) tf_pipeline_schedule(p->set.schedule, p->stage, p->stages, p->M, p->ops);
    if (!st) st = tf_noise_stage(t, t->opt_grads, t->opt_n, first_stage, m, noise_first, err);
    if (!st && p->replicas > 1) {
        tf_comm_rec_where(t->rec, TF_WHERE_COMM, t->global_step + 1, 0);
        st = stage_allreduce(t, err);
    }
    if (st) return st;
    tf_stop_test_step(t->rank, t->global_step + 1);
    tf_comm_rec_where(t->rec, TF_WHERE_COMM, t->global_step + 1, 0);
    /* the loss is the last stage's; the stop request and the noise scale's parts ride along, as in tf_trainer_step */
    double sum[2 + TF_NOISE_NVALS] = {last_stage ? loss_sum : 0, (double)tf_stop_requested()};
    if ((st = tf_noise_pack(t, sum + 2, err))) return st;
    if ((st = tf_trainer_allreduce_host(t, sum, 2 + TF_NOISE_NVALS, TF_DTYPE_F64, TF_REDUCE_SUM, err))) return st;
    tf_noise_unpack(t, sum + 2);
    t->stop_agreed = sum[1] > 0;
    tf_comm_rec_phase(t->rec, TF_WHERE_OPTIMIZER);
    if ((st = tf_trainer_optimizer_step(t, lrs, lr, norm, skipped, err))) return st;
    t->global_step++;
    *step_loss = sum[0] / (double)t->data_world;
    p->step_s += tf_now() - step_t0;
    return TF_OK;
}

tf_status tf_pipeline_sum(tf_trainer *t, double *host, size_t n, tf_error *err)
{
    /* the replicas hold the same (averaged) gradients: one replica's stages count */
    if (t->pipe->replica > 0)
        for (size_t i = 0; i < n; i++) host[i] = 0;
    return tf_trainer_allreduce_host(t, host, n, TF_DTYPE_F64, TF_REDUCE_SUM, err);
}

tf_status tf_pipeline_gather_buf(tf_trainer *t, float *buf, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    double t0 = tf_now();
    tf_status st = TF_OK;
    for (int k = 0; k < p->stages && !st; k++) {
        uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_BROADCAST, p->own_n[k] * sizeof(float), 0, 0);
        tf_comm_rec_block(t->rec, seq);
        /* stage k of replica 0 owns the range; every replica's copy of it is the same */
        st = t->cvt->broadcast(t->comm, buf + p->own_off[k], p->own_n[k], TF_DTYPE_F32, k, err);
        if (!st) {
            tf_comm_rec_exit(t->rec, seq);
            tf_comm_rec_block(t->rec, 0);
        }
    }
    if (st) tf_error_prefix(err, "comm %s: gathering the pipeline stages' ranges", comm_name(t));
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

tf_status tf_pipeline_gather(tf_trainer *t, tf_error *err) { return tf_pipeline_gather_buf(t, t->buf.params, err); }

tf_status tf_pipeline_finish(tf_trainer *t, tf_error *err)
{
    tf_pipeline *p = t->pipe;
    /* after the run's time was taken: the final gather and the report are not
     * the training's communication */
    double comm_before = t->phase[TF_PHASE_COMM], exposed_before = t->comm_exposed;
    tf_status st = tf_pipeline_gather(t, err);
    t->phase[TF_PHASE_COMM] = comm_before;
    t->comm_exposed = exposed_before;
    if (st) return st;
    size_t W = (size_t)t->world;
    free(p->all);
    if (!(p->all = calloc(ALL_ROWS * W, sizeof *p->all))) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    size_t r = (size_t)t->rank;
    p->all[r] = p->busy_s;
    p->all[W + r] = p->sched_s;
    p->all[2 * W + r] = p->wait_s;
    p->all[3 * W + r] = p->step_s;
    tf_memory_breakdown mb;
    p->have_memory = tf_trainer_memory(t, &mb); /* the same on every rank: one model plugin */
    if (p->have_memory) { /* bytes, exact in f64 below 2^53 */
        p->all[4 * W + r] = (double)mb.weights;
        p->all[5 * W + r] = (double)mb.gradients;
        p->all[6 * W + r] = (double)mb.optimizer_states;
        p->all[7 * W + r] = (double)mb.activations;
    }
    st = tf_trainer_allreduce_host(t, p->all, ALL_ROWS * W, TF_DTYPE_F64, TF_REDUCE_SUM, err);
    t->phase[TF_PHASE_COMM] = comm_before;
    t->comm_exposed = exposed_before;
    return st;
}

json_t *tf_pipeline_json(const tf_trainer *t)
{
    const tf_pipeline *p = t->pipe;
    json_t *x = json_object(), *layers = json_array(), *util = json_array(), *bubble = json_array();
    json_object_set_new(x, "stages", json_integer(p->stages));
    json_object_set_new(x, "replicas", json_integer(p->replicas));
    json_object_set_new(x, "micro_batches", json_integer(p->M));
    json_object_set_new(x, "schedule", json_string(tf_pipeline_schedule_name(p->set.schedule)));
    for (int k = 0; k < p->stages; k++)
        json_array_append_new(layers, json_pack("[i, i]", p->first[k], p->first[k + 1]));
    json_object_set_new(x, "stage_layers", layers);
    json_object_set_new(x, "expected_bubble", json_real(tf_pipeline_bubble(p->stages, p->M)));
    if (p->all) {
        size_t W = (size_t)t->world;
        double wait = 0, sched = 0;
        for (size_t r = 0; r < W; r++) {
            double busy = p->all[r], sch = p->all[W + r], wt = p->all[2 * W + r], step = p->all[3 * W + r];
            json_array_append_new(util, json_real(step > 0 ? busy / step : 0));
            json_array_append_new(bubble, json_real(sch > 0 ? wt / sch : 0));
            wait += wt;
            sched += sch;
        }
        json_object_set_new(x, "utilisation", util);
        json_object_set_new(x, "bubble", bubble);
        json_object_set_new(x, "measured_bubble", json_real(sched > 0 ? wait / sched : 0));
        if (p->have_memory) { /* each worker's tfcore.memory_bytes (rank 0's is the top-level one) */
            static const char *const cat[4] = {"weights", "gradients", "optimizer_states", "activations"};
            json_t *mem = json_array();
            for (size_t r = 0; r < W; r++) {
                json_t *o = json_object();
                for (size_t c = 0; c < 4; c++)
                    json_object_set_new(o, cat[c], json_integer((json_int_t)p->all[(4 + c) * W + r]));
                json_array_append_new(mem, o);
            }
            json_object_set_new(x, "memory_bytes", mem);
        }
    } else {
        json_decref(util);
        json_decref(bubble);
    }
    return x;
}
