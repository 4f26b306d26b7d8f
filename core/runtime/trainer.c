/* trainer.c — setting a worker up and the optimizer-step loop (trainer.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lr_schedule.h"
#include "trainer_pipeline.h"
#include "trainer_preflight.h"
#include "sampler.h"
#include "trainer_strategy.h"
#include "stop_signal.h"
#include "trainer.h"
#include "trainer_internal.h"
#include "tfcore/file.h"
#include "tfcore/log.h"

const char *const tf_phase_name[TF_PHASE_COUNT] = {"data", "forward", "backward", "comm",
                                                   "optimizer", "eval", "save"};

/* --- setup ------------------------------------------------------------------ */

/* Coalesce the parameters' decay flags into segments over the flat buffer. */
static tf_status make_segments(tf_trainer *t, tf_error *err)
{
    const tf_param_info *p;
    size_t n;
    t->mvt->params(t->model, &p, &n);
    t->segs = calloc(n ? n : 1, sizeof *t->segs);
    if (!t->segs) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    /* sort-free: params may come in any order; build per-element runs by offset */
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort by offset: n is a few hundred */
        for (size_t j = i; j > 0 && p[order[j - 1]].offset > p[order[j]].offset; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    float wd = (float)t->args->weight_decay;
    t->nsegs = 0;
    for (size_t k = 0; k < n; k++) {
        const tf_param_info *q = &p[order[k]];
        float d = q->no_decay ? 0.0f : wd;
        tf_adamw_segment *last = t->nsegs ? &t->segs[t->nsegs - 1] : NULL;
        if (last && last->weight_decay == d && last->offset + last->count == q->offset)
            last->count += q->numel;
        else
            t->segs[t->nsegs++] = (tf_adamw_segment){q->offset, q->numel, d};
    }
    free(order);
    /* the segments of this rank's optimizer range, relative to its start */
    size_t lo = t->opt_lo, hi = t->opt_lo + t->opt_n, k = 0;
    for (size_t i = 0; i < t->nsegs; i++) {
        size_t a = t->segs[i].offset > lo ? t->segs[i].offset : lo;
        size_t b = t->segs[i].offset + t->segs[i].count < hi ? t->segs[i].offset + t->segs[i].count : hi;
        if (a < b) t->segs[k++] = (tf_adamw_segment){a - lo, b - a, t->segs[i].weight_decay};
    }
    t->nsegs = k;
    return TF_OK;
}

/* Host and backend batch buffers for rows_cap x seq_cap. For a device
 * backend (host_memory absent or false) the host block is its pinned host
 * memory, so uploads are asynchronous copies (from pageable memory CUDA
 * stages them and the host waits); a host-memory backend gets plain memory. */
static tf_status alloc_batches(tf_trainer *t, tf_error *err)
{
    size_t rs = (size_t)t->rows_cap * (size_t)t->seq_cap, r = (size_t)t->rows_cap;
    /* layout of both blocks: ids, types, mask [rs] i32; labels, start, end [r] i32; feature [r] i64 */
    size_t bytes = (3 * rs + 3 * r) * sizeof(int32_t) + r * sizeof(int64_t);
    tf_status st;
    void *hv = NULL;
    t->host_pinned = !(TF_HAS(t->bvt, host_memory) && t->bvt->host_memory(t->be));
    if (t->host_pinned) {
        if ((st = t->bvt->alloc(t->be, bytes, TF_MEM_HOST_PINNED, &hv, err))) return st;
        memset(hv, 0, bytes);
        if ((st = t->bvt->event_create(t->be, &t->upload_done, err))) {
            t->bvt->free(t->be, hv, TF_MEM_HOST_PINNED);
            return st;
        }
    } else if (!(hv = calloc(1, bytes))) {
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for a %d x %d batch", t->rows_cap, t->seq_cap);
    }
    char *h = hv;
    /* from here on teardown frees the host block (t->host.feature_index is its start) */
    t->host.feature_index = (int64_t *)h;
    if ((st = t->bvt->alloc(t->be, bytes, TF_MEM_DEVICE, &t->dev_block, err))) return st;
    char *d = t->dev_block;
    tf_batch *bs[2] = {&t->host, &t->dev};
    char *base[2] = {h, d};
    for (int i = 0; i < 2; i++) {
        char *q = base[i];
        tf_batch *b = bs[i];
        b->capacity_rows = t->rows_cap;
        b->capacity_seq = t->seq_cap;
        b->feature_index = (int64_t *)q;
        q += r * sizeof(int64_t);
        b->input_ids = (int32_t *)q;
        q += rs * sizeof(int32_t);
        b->token_type_ids = (int32_t *)q;
        q += rs * sizeof(int32_t);
        b->attention_mask = (int32_t *)q;
        q += rs * sizeof(int32_t);
        b->labels = (int32_t *)q;
        q += r * sizeof(int32_t);
        b->start_positions = (int32_t *)q;
        q += r * sizeof(int32_t);
        b->end_positions = (int32_t *)q;
    }
    if (t->info->task == TF_TASK_CLASSIFICATION) {
        t->host.start_positions = t->host.end_positions = NULL;
        t->dev.start_positions = t->dev.end_positions = NULL;
    } else {
        t->host.labels = t->dev.labels = NULL;
    }
    return TF_OK;
}

tf_status tf_trainer_host_batch_free(tf_trainer *t, tf_error *err)
{
    if (!t->upload_pending) return TF_OK;
    tf_status st = t->bvt->event_sync(t->be, t->upload_done, err);
    if (st) return st;
    t->upload_pending = false;
    return TF_OK;
}

/* Copy the filled host batch to the backend, packed for its actual seq. */
tf_status tf_trainer_upload(tf_trainer *t, tf_error *err)
{
    tf_batch *h = &t->host, *d = &t->dev;
    d->rows = h->rows;
    d->seq = h->seq;
    size_t rs = (size_t)h->rows * (size_t)h->seq * sizeof(int32_t), r = (size_t)h->rows;
    struct { void *dst; const void *src; size_t n; } c[] = {
        {d->input_ids, h->input_ids, rs},
        {d->token_type_ids, h->token_type_ids, rs},
        {d->attention_mask, h->attention_mask, rs},
        {d->labels, h->labels, r * sizeof(int32_t)},
        {d->start_positions, h->start_positions, r * sizeof(int32_t)},
        {d->end_positions, h->end_positions, r * sizeof(int32_t)},
        {d->feature_index, h->feature_index, r * sizeof(int64_t)},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        if (!c[i].dst || !c[i].n) continue;
        tf_status st = t->bvt->memcpy(t->be, c[i].dst, c[i].src, c[i].n, TF_COPY_HOST_TO_DEVICE, NULL);
        if (st) return tf_error_set(err, st, "copying a batch to the %s backend failed", t->plan->plugin[TF_KIND_BACKEND]->desc->name);
    }
    if (t->host_pinned) {
        tf_status st = t->bvt->event_record(t->be, t->upload_done, NULL);
        if (st) return tf_error_set(err, st, "recording the end of a batch upload on the %s backend failed",
                                    t->plan->plugin[TF_KIND_BACKEND]->desc->name);
        t->upload_pending = true;
    }
    return TF_OK;
}

tf_status tf_trainer_setup(tf_trainer *t, const tf_plan *plan, const tf_worker *w, tf_error *err)
{
    memset(t, 0, sizeof *t);
    t->plan = plan;
    t->args = &plan->training;
    t->w = *w;
    t->rank = w->rank;
    t->world = w->world;
    t->data_rank = w->rank;
    t->data_world = w->world;
    t->last_eval_step = -1;
    if (!(t->output_dir = strdup(t->args->output_dir))) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    const tf_training_args *a = t->args;
    tf_config *cfg = plan->cfg;
    tf_status st;

    t->dvt = plan->plugin[TF_KIND_DATASET]->desc->vtable;
    tf_stack_options so = {.device = w->local_rank, .local_world = w->local_world, .with_model = true,
                           .defer_loss = true, .label_smoothing_factor = (float)a->label_smoothing_factor,
                           .gradient_checkpointing = a->gradient_checkpointing};
    st = tf_stack_open(&t->stack, plan, &so, err);
    /* the step's shorthand for the stack's parts */
    t->bvt = t->stack.backend.vt;
    t->be = t->stack.backend.h;
    t->pvt = t->stack.precision.vt;
    t->prec = t->stack.precision.h;
    t->mvt = t->stack.model.vt;
    t->model = t->stack.model.h;
    t->info = t->stack.model.info;
    t->defer_loss = t->stack.defer_loss;
    if (st) return st;
    tf_info("model: %s, %d layers, hidden %d, %s", t->info->source, t->info->num_layers,
            t->info->hidden_size, t->info->task == TF_TASK_CLASSIFICATION ? "classification" : "question-answering");

    tf_dataset_open_args dop = {sizeof dop, tf_config_section(cfg, "data"), t->info->task, t->info->num_labels,
                                t->info->vocab_file, t->info->do_lower_case, t->info->max_position_embeddings,
                                t->info->vocab_size, (uint64_t)a->seed, a->output_dir, 0};
    if ((st = t->dvt->open(&dop, &t->ds, err))) return st;

    int seq = t->dvt->seq_len(t->ds, TF_SPLIT_TRAIN), eseq = t->dvt->seq_len(t->ds, TF_SPLIT_EVAL);
    t->seq_cap = seq > eseq ? seq : eseq;
    t->rows_cap = (int)(a->per_device_train_batch_size > a->per_device_eval_batch_size
                            ? a->per_device_train_batch_size
                            : a->per_device_eval_batch_size);
    if ((st = t->mvt->reserve(t->model, t->rows_cap, t->seq_cap, err))) return st;
    if ((st = alloc_batches(t, err))) return st;

    t->mvt->buffers(t->model, &t->buf);
    tf_strategy_pick(t);
    t->opt_grads = t->buf.grads + t->opt_lo;
    /* a pipeline stage: its own parameters' range, and only their gradients where the model can */
    if (t->strategy == &tf_strategy_pipeline && (st = tf_pipeline_own_state(t, err))) return st;
    /* the moments cover what this rank steps: a ZeRO shard, a pipeline stage, else every parameter */
    size_t mb = (t->strategy->sharded ? t->opt_n : t->buf.n) * sizeof(float);
    if (a->optim == TF_OPTIM_ADAFACTOR) {
        if ((st = tf_trainer_adafactor_setup(t, err))) return st;
    } else {
        if ((st = t->bvt->alloc(t->be, mb, TF_MEM_DEVICE, (void **)&t->exp_avg, err))) return st;
        if ((st = t->bvt->alloc(t->be, mb, TF_MEM_DEVICE, (void **)&t->exp_avg_sq, err))) return st;
        if ((st = t->bvt->memset(t->be, t->exp_avg, 0, mb, NULL))) return tf_error_set(err, st, "memset failed");
        if ((st = t->bvt->memset(t->be, t->exp_avg_sq, 0, mb, NULL))) return tf_error_set(err, st, "memset failed");
    }
    if ((st = t->bvt->alloc(t->be, 4 * sizeof(float), TF_MEM_DEVICE, (void **)&t->dev_scalars, err))) return st;
    if ((st = t->bvt->alloc(t->be, sizeof(int32_t), TF_MEM_DEVICE, (void **)&t->dev_flag, err))) return st;
    if ((st = make_segments(t, err))) return st;
    if ((st = t->mvt->zero_grad(t->model, err))) return st;
    return TF_OK;
}

void tf_trainer_teardown(tf_trainer *t)
{
    tf_pipeline_free(t);
    tf_noise_free(t);
    tf_trainer_comm_finalize(t);
    if (t->log) fclose(t->log);
    if (t->be) {
        if (t->exp_avg) t->bvt->free(t->be, t->exp_avg, TF_MEM_DEVICE);
        if (t->exp_avg_sq) t->bvt->free(t->be, t->exp_avg_sq, TF_MEM_DEVICE);
        tf_trainer_adafactor_free(t);
        if (t->dev_scalars) t->bvt->free(t->be, t->dev_scalars, TF_MEM_DEVICE);
        if (t->dev_flag) t->bvt->free(t->be, t->dev_flag, TF_MEM_DEVICE);
        if (t->dev_block) t->bvt->free(t->be, t->dev_block, TF_MEM_DEVICE);
        if (t->upload_done) {
            tf_error ignore;
            if (t->upload_pending) (void)t->bvt->event_sync(t->be, t->upload_done, &ignore);
            t->bvt->event_destroy(t->be, t->upload_done);
        }
        if (t->host_pinned && t->host.feature_index)
            t->bvt->free(t->be, t->host.feature_index, TF_MEM_HOST_PINNED); /* the start of the host block */
    }
    if (!t->host_pinned) free(t->host.feature_index); /* the start of the host block */
    if (t->ds) t->dvt->close(t->ds);
    tf_stack_close(&t->stack);
    free(t->segs);
    free(t->best_checkpoint);
    free(t->log_path);
    free(t->output_dir);
}

/* --- one optimizer step ------------------------------------------------------ */

/* A micro-batch's loss as the step counts it. With loss scaling (fp16) an
 * overflow is the scaler's business: its gradients come out non-finite and
 * the step is skipped, as GradScaler does. Without, a non-finite loss means
 * the run diverged. */
static tf_status take_loss(tf_trainer *t, float got, double *loss, tf_error *err)
{
    bool scaling = t->pvt->loss_scale(t->prec) != 1.0f;
    if (!isfinite(got) && !scaling)
        return tf_error_set(err, TF_ERR_RUNTIME, "step %lld: the training loss is %s; stopping",
                            (long long)t->global_step + 1, isnan(got) ? "nan" : "inf");
    *loss = isfinite(got) ? got : 0.0; /* an overflowed micro-batch adds nothing to the logged loss */
    return TF_OK;
}

/* Where a micro-batch's rows sit in the epoch's global sample order: row b
 * is position first + b * stride of epoch `epoch` (model set_rows). */
typedef struct micro_rows {
    uint64_t epoch, first, stride;
} micro_rows;

/* Forward + backward on rows idx[n] of the training split; *loss gets the
 * batch's mean loss. backward_scale multiplies the loss gradient; last: the
 * step's last micro-batch (the strategy may hook its backward). */
static tf_status micro_batch(tf_trainer *t, const size_t *idx, size_t n, const micro_rows *rows, double *loss,
                             float backward_scale, bool last, tf_error *err)
{
    double t0 = tf_now();
    tf_status st = tf_trainer_host_batch_free(t, err);
    if (!st) st = t->dvt->fill_batch(t->ds, TF_SPLIT_TRAIN, idx, n, &t->host, err);
    if (!st) st = tf_trainer_upload(t, err);
    if (st) return st;
    double t1 = tf_now();
    t->phase[TF_PHASE_DATA] += t1 - t0;
    /* dropout masks by the rows' global positions when the model can (the same
     * masks for any world size or split), else by this run's micro-step */
    if (TF_HAS(t->mvt, set_rows) && t->mvt->set_rows)
        t->mvt->set_rows(t->model, rows->epoch, rows->first, rows->stride);
    else
        t->mvt->set_step(t->model, (uint64_t)t->micro_step);
    tf_model_output out;
    tf_stop_test_phase(t->rank, t->global_step + 1, "forward");
    if ((st = t->mvt->forward(t->model, &t->dev, true, &out, err))) return st;
    double t2 = tf_now();
    t->phase[TF_PHASE_FORWARD] += t2 - t1;
    if (!t->defer_loss && (st = take_loss(t, out.loss, loss, err))) return st;
    void *user;
    tf_grads_ready_fn ready = t->strategy->backward_hook(t, last, &user);
    if (last) tf_noise_hook(t, ready);
    tf_comm_rec_phase(t->rec, TF_WHERE_BACKWARD);
    tf_comm_test_stall(t->rank, t->global_step + 1);
    tf_stop_test_phase(t->rank, t->global_step + 1, "backward");
    if ((st = t->mvt->backward(t->model, backward_scale, ready, user, err))) return st;
    if (t->defer_loss) { /* backward is queued: waiting for forward's loss leaves the device busy */
        float got;
        if ((st = t->mvt->read_loss(t->model, &got, err)) || (st = take_loss(t, got, loss, err))) return st;
    }
    t->phase[TF_PHASE_BACKWARD] += tf_now() - t2;
    return TF_OK;
}

/* Gradient norm of the (unscaled, reduced) gradients, the strategy making
 * this rank's range the whole's; clip to max_norm as
 * torch.nn.utils.clip_grad_norm_ (coef = max_norm / (norm + 1e-6), at most 1). */
static tf_status clip_gradients(tf_trainer *t, float *grads, double *norm_out, tf_error *err)
{
    tf_status st = t->bvt->sum_squares(t->be, NULL, grads, t->opt_n, t->dev_scalars, err);
    float sq = 0;
    if (!st) st = t->bvt->memcpy(t->be, &sq, t->dev_scalars, sizeof sq, TF_COPY_DEVICE_TO_HOST, NULL);
    if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
    double sqd = sq;
    if (!st) st = t->strategy->grad_norm_sq(t, &sqd, err);
    if (st) return st;
    tf_noise_step_end(t, sqd); /* the reduced gradient: the noise scale's big batch */
    double norm = sqrt(sqd);
    *norm_out = norm;
    double max_norm = t->args->max_grad_norm;
    if (max_norm > 0 && isfinite(norm)) {
        double coef = max_norm / (norm + 1e-6);
        if (coef < 1.0) return t->bvt->scale(t->be, NULL, grads, t->opt_n, (float)coef, TF_DTYPE_F32, err);
    }
    return TF_OK;
}

/* Unscale, agree on overflow, clip and update this rank's range
 * [opt_lo, opt_lo + opt_n) of the parameters (trainer_strategy.h). */
tf_status tf_trainer_optimizer_step(tf_trainer *t, const tf_lr_schedule *lrs, double *lr_used, double *norm,
                                    bool *skipped, tf_error *err)
{
    double t0 = tf_now();
    bool found_inf = false;
    tf_status st;
    bool steps_here = t->opt_n > 0; /* DataParallel: only rank 0 holds the summed gradients */
    float *params = t->buf.params + t->opt_lo, *grads = t->opt_grads;
    if (steps_here &&
        (st = t->pvt->unscale_and_check(t->prec, t->bvt, t->be, grads, t->opt_n, t->dev_flag, &found_inf, err)))
        return st;
    if ((st = t->strategy->agree_overflow(t, &found_inf, err))) return st;
    float scale_before = t->pvt->loss_scale(t->prec);
    *skipped = t->pvt->update(t->prec, found_inf);
    *norm = NAN;
    /* the scheduler counts the optimizer steps that ran: Trainer does not
     * step it when GradScaler skipped the optimizer step */
    *lr_used = tf_lr_at(lrs, t->global_step - t->skipped_steps);
    if (!*skipped) {
        if (steps_here) {
            if ((st = clip_gradients(t, grads, norm, err))) return st;
            tf_adamw_hyper h = {(float)*lr_used, (float)t->args->adam_beta1, (float)t->args->adam_beta2,
                                (float)t->args->adam_epsilon, t->global_step + 1 - t->skipped_steps, 1.0f};
            if (t->args->optim == TF_OPTIM_ADAFACTOR) { /* plan checked the adafactor slot */
                st = tf_trainer_adafactor_step(t, *lr_used, h.step, err);
            } else if (t->args->optim == TF_OPTIM_ADAMW_HF) { /* transformers' AdamW (plan checked adamw_ex) */
                tf_adamw_desc d = {sizeof d, h, TF_ADAMW_HF};
                st = t->bvt->adamw_ex(t->be, NULL, params, grads, t->exp_avg, t->exp_avg_sq, t->segs, t->nsegs,
                                      &d, err);
            } else {
                st = t->bvt->adamw(t->be, NULL, params, grads, t->exp_avg, t->exp_avg_sq, t->segs, t->nsegs, &h,
                                   err);
            }
            if (st) return st;
        }
    } else {
        t->skipped_steps++;
        if (t->rank == 0)
            tf_warn("step %lld: gradients overflowed at loss scale %g; step skipped, scale now %g",
                    (long long)t->global_step + 1, (double)scale_before, (double)t->pvt->loss_scale(t->prec));
    }
    st = t->strategy->zero_grads ? t->strategy->zero_grads(t, err) : t->mvt->zero_grad(t->model, err);
    t->phase[TF_PHASE_OPTIMIZER] += tf_now() - t0;
    if (!st) st = t->strategy->after_optimizer(t, *skipped, err);
    return st;
}

/* This rank's small gradient for the noise scale (trainer_noise_scale.h),
 * before the reduction: `got` of `accum` micro-batches had rows, inv_rows
 * the sum of their 1 / rows. Each was accumulated with weight loss_scale /
 * accum / replicas, so the buffer is loss_scale / replicas times a mean of
 * effective batch accum^2 / inv_rows (accum x rows when they are equal). */
static tf_status noise_small(tf_trainer *t, int64_t accum, int64_t got, size_t first_rows, double inv_rows,
                             size_t replicas, bool same_replicas, tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    if (p->mode == TF_NOISE_NONE) return TF_OK;
    double ls = t->pvt->loss_scale(t->prec);
    bool full = got == accum && same_replicas;
    double b_step = full ? (double)accum * (double)accum / inv_rows : 0;
    if (p->mode == TF_NOISE_FIRST_MICRO) { /* taken after the first backward: its weight was 1 / accum */
        double f = (double)accum / ls;
        tf_noise_describe(t, f * f, (double)first_rows, b_step, true, !full);
        return TF_OK;
    }
    double f = (double)replicas / ls;
    tf_noise_describe(t, f * f, b_step, b_step, true, !full || p->foreign_hook);
    /* DDP and ZeRO-1 took each bucket as it started; the others reduce after this */
    return p->bucketed || !full ? TF_OK : tf_noise_take(t, t->buf.grads, t->buf.n, err);
}

/* --- the run ----------------------------------------------------------------- */

tf_status tf_trainer_step(tf_trainer *t, tf_sampler *s, const tf_lr_schedule *lrs, int64_t step_in_epoch,
                          double *step_loss, double *lr, double *norm, bool *skipped, tf_error *err)
{
    if (t->pipe) return tf_pipeline_step(t, s, lrs, step_in_epoch, step_loss, lr, norm, skipped, err);
    const tf_training_args *a = t->args;
    int64_t accum = a->gradient_accumulation_steps;
    int64_t batches_per_epoch = tf_sampler_batches_per_epoch(s);
    double loss_sum = 0; /* this rank's share of the step's loss, summed over ranks below */
    size_t idx[4096];
    if (s->batch_rows > sizeof idx / sizeof idx[0])
        return tf_error_set(err, TF_ERR_CONFIG, "batch of %zu rows is too large", s->batch_rows);
    tf_status st;
    /* what the noise scale needs to know of the step's micro-batches */
    int64_t noise_got = 0;
    size_t noise_first = 0, noise_replicas = 0;
    double noise_inv = 0;
    bool noise_same = true;
    tf_noise_step_begin(t);
    for (int64_t k = 0; k < accum; k++) {
        int64_t b = step_in_epoch * accum + k;
        if (b >= batches_per_epoch) break; /* the epoch's last, short accumulation */
        bool last = k + 1 == accum || b + 1 == batches_per_epoch;
        tf_micro_batch mb = tf_sampler_micro_batch(s, b);
        /* Trainer divides the loss by gradient_accumulation_steps; DataParallel
         * averages the replicas' losses (so their gradients' sum is scaled by
         * 1/replicas), DDP averages the gradients in the all-reduce. */
        float bscale = t->pvt->loss_scale(t->prec) / (float)accum / (float)mb.replicas;
        if (mb.n > 0) {
            double loss = 0;
            tf_sampler_rows(s, mb.first, mb.n, idx);
            micro_rows rows = {(uint64_t)s->epoch, tf_sampler_position(s, mb.first), (uint64_t)s->world};
            tf_comm_rec_where(t->rec, TF_WHERE_FORWARD, t->global_step + 1, (int)k + 1);
            if ((st = micro_batch(t, idx, mb.n, &rows, &loss, bscale, last, err))) return st;
            loss_sum += loss / (double)(s->scatter_world > 1 ? mb.replicas : (size_t)t->world);
            /* one worker: the buffer holds the first micro-batch's gradient alone */
            if (k == 0 && t->noise.mode == TF_NOISE_FIRST_MICRO && accum >= 2 &&
                (st = tf_noise_take(t, t->buf.grads, t->buf.n, err)))
                return st;
            if (k == 0) noise_first = mb.n, noise_replicas = mb.replicas;
            noise_same = noise_same && mb.replicas == noise_replicas;
            noise_got++;
            noise_inv += 1.0 / (double)mb.n;
        }
        t->micro_step++;
    }
    tf_stop_test_step(t->rank, t->global_step + 1);
    tf_comm_rec_where(t->rec, TF_WHERE_COMM, t->global_step + 1, 0);
    tf_stop_test_phase(t->rank, t->global_step + 1, "allreduce");
    if ((st = noise_small(t, accum, noise_got, noise_first, noise_inv, noise_replicas, noise_same, err))) return st;
    if ((st = t->strategy->reduce_gradients(t, err))) return st;
    /* the stop request and the noise scale's parts ride on the loss's
     * all-reduce, so every rank stops after the same step at no extra
     * collective: {loss, signal, noise...} */
    double sum[2 + TF_NOISE_NVALS] = {loss_sum, (double)tf_stop_requested()};
    if ((st = tf_noise_pack(t, sum + 2, err))) return st;
    if (t->comm && (st = tf_trainer_allreduce_host(t, sum, 2 + TF_NOISE_NVALS, TF_DTYPE_F64, TF_REDUCE_SUM, err)))
        return st;
    tf_noise_unpack(t, sum + 2);
    loss_sum = sum[0];
    t->stop_agreed = sum[1] > 0;
    tf_comm_rec_phase(t->rec, TF_WHERE_OPTIMIZER);
    tf_stop_test_phase(t->rank, t->global_step + 1, "optimizer");
    if ((st = tf_trainer_optimizer_step(t, lrs, lr, norm, skipped, err))) return st;
    t->global_step++;
    *step_loss = loss_sum / (double)accum; /* Trainer: the sum of loss/accum over micro-batches */
    return TF_OK;
}

static bool due(tf_interval_strategy strategy, long long every, int64_t step, bool epoch_end)
{
    if (strategy == TF_STRATEGY_EPOCH) return epoch_end;
    if (strategy == TF_STRATEGY_STEPS) return every > 0 && step % every == 0;
    return false;
}

/* Every rank agreed to stop after this step (a stop signal, stop_signal.h):
 * save a checkpoint (unless the schedule just did) and say how to resume. */
static tf_status stop_after_step(tf_trainer *t, double epoch_f, bool saved, tf_error *err)
{
    tf_status st = saved ? TF_OK : tf_trainer_save_checkpoint(t, epoch_f, err);
    if (st) return st;
    /* no rank leaves before rank 0 has saved: mpirun ends a job's other ranks
     * when one exits with a non-zero status */
    double done = 1;
    if ((st = tf_trainer_allreduce_host(t, &done, 1, TF_DTYPE_F64, TF_REDUCE_SUM, err))) return st;
    int sig = tf_stop_requested();
    if (t->rank == 0)
        tf_info("stopped by %s after step %lld; checkpoint saved to %s/checkpoint-%lld; resume with "
                "training.resume_from_checkpoint = \"last\"",
                sig ? tf_stop_signal_name(sig) : "a stop signal on another rank", (long long)t->global_step,
                t->output_dir, (long long)t->global_step);
    tf_stop_mark_stopped();
    return TF_OK;
}

static tf_status run_loop(tf_trainer *t, tf_error *err)
{
    const tf_training_args *a = t->args;
    tf_status st;
    tf_sampler s;
    size_t rows = t->dvt->num_rows(t->ds, TF_SPLIT_TRAIN);
    /* DataParallel samples one global stream and scatters each micro-batch */
    bool scatter = t->strategy->scatter;
    if ((st = tf_sampler_init(&s, rows, scatter ? 0 : t->data_rank, scatter ? 1 : t->data_world, (uint64_t)a->seed, 1, err)))
        return st;
    tf_sampler_set_batch(&s, (size_t)a->per_device_train_batch_size, scatter ? t->world : 1, scatter ? t->rank : 0);
    /* dropout masks index a sample by its position in the epoch in 32 bits (model set_rows) */
    if (s.padded > UINT32_MAX) {
        st = tf_error_set(err, TF_ERR_DATA, "the training split has %zu rows; at most %lu are supported", rows,
                          (unsigned long)UINT32_MAX);
        goto out;
    }
    if (a->group_by_length) {
        /* megabatches of the global batch: LengthGroupedSampler's
         * train_batch_size * gradient_accumulation_steps, times the world */
        int32_t *lengths;
        size_t global = (size_t)a->per_device_train_batch_size * (size_t)t->data_world *
                        (size_t)a->gradient_accumulation_steps;
        st = tf_sampler_row_lengths(t->dvt, t->ds, TF_SPLIT_TRAIN, rows, &lengths, err);
        if (!st) st = tf_sampler_group_by_length(&s, lengths, global, err);
        free(lengths);
        if (st) goto out;
    }
    tf_training_plan sp;
    if ((st = tf_training_plan_compute(a, (long long)rows, t->data_world, &sp, err))) goto out;
    t->steps = sp;
    if ((st = tf_noise_setup(t, err))) goto out;
    t->train_rows = rows;
    t->epoch_samples = s.padded;
    /* the ranks agree on what they run before their first collective of it */
    if ((st = tf_preflight_check(t, rows, err))) goto out;
    tf_lr_schedule lrs = {a->lr_scheduler_type, a->learning_rate, sp.warmup_steps, sp.max_steps};

    if ((st = tf_trainer_resume(t, err))) goto out;
    if (t->rank == 0 && a->resume_from_checkpoint && *a->resume_from_checkpoint && (st = tf_log_resume_trim(t, err)))
        goto out;
    /* every worker starts from rank 0's parameters, as DDP's constructor does */
    if ((st = tf_trainer_broadcast_params(t, err))) goto out;
    tf_info("training: %zu rows, %lld epochs x %lld steps = %lld optimizer steps, global batch %lld",
            rows, (long long)sp.num_train_epochs, (long long)sp.steps_per_epoch, (long long)sp.max_steps,
            (long long)sp.total_train_batch_size);

    tf_progress prog;
    tf_progress_start(&prog, sp.max_steps, t->global_step, t->rank == 0);
    double run_start = tf_now();
    double log_loss = 0;
    int64_t log_steps = 0;
    for (int64_t epoch = t->global_step / sp.steps_per_epoch; t->global_step < sp.max_steps; epoch++) {
        tf_sampler_set_epoch(&s, epoch);
        int64_t step_in_epoch = t->global_step - epoch * sp.steps_per_epoch;
        for (; step_in_epoch < sp.steps_per_epoch && t->global_step < sp.max_steps; step_in_epoch++) {
            double lr, norm, step_loss;
            bool skipped;
            if ((st = tf_trainer_step(t, &s, &lrs, step_in_epoch, &step_loss, &lr, &norm, &skipped, err))) goto out;
            t->total_loss += step_loss;
            log_loss += step_loss;
            log_steps++;
            double epoch_f = (double)epoch + (double)(step_in_epoch + 1) / (double)sp.steps_per_epoch;
            bool epoch_end = step_in_epoch + 1 == sp.steps_per_epoch;
            tf_progress_update(&prog, t->global_step, step_loss, tf_now() - run_start,
                               (double)(t->global_step - prog.first) * (double)sp.total_train_batch_size);
            if (due(a->logging_strategy, sp.logging_steps, t->global_step, epoch_end) ||
                (a->logging_first_step && t->global_step == 1)) {
                if ((st = tf_log_step(t, &prog, log_loss / (double)log_steps, norm,
                                      tf_lr_at(&lrs, t->global_step - t->skipped_steps), epoch_f, err)))
                    goto out;
                log_loss = 0;
                log_steps = 0;
            }
            if (due(a->eval_strategy, sp.eval_steps, t->global_step, epoch_end)) {
                tf_progress_pause(&prog);
                tf_comm_rec_where(t->rec, TF_WHERE_EVAL, t->global_step, 0);
                tf_stop_test_phase(t->rank, t->global_step, "eval");
                if ((st = tf_trainer_evaluate(t, epoch_f, NULL, err))) goto out;
            }
            bool saved = due(a->save_strategy, sp.save_steps, t->global_step, epoch_end);
            if (saved) {
                tf_progress_pause(&prog);
                tf_comm_rec_where(t->rec, TF_WHERE_SAVE, t->global_step, 0);
                if ((st = tf_trainer_save_checkpoint(t, epoch_f, err))) goto out;
            }
            if (t->stop_agreed && t->global_step < sp.max_steps) {
                tf_progress_pause(&prog);
                st = stop_after_step(t, epoch_f, saved, err);
                goto out;
            }
        }
    }
    tf_progress_end(&prog);
    double runtime = tf_now() - run_start;
    double epochs_done = (double)t->global_step / (double)sp.steps_per_epoch;
    /* Trainer's speed metrics: samples = len(dataset) * epochs, or steps * global batch under max_steps */
    double samples = a->max_steps > 0 ? (double)sp.max_steps * (double)sp.total_train_batch_size
                                      : (double)rows * (double)sp.num_train_epochs;
    if (a->load_best_model_at_end) {
        bool loaded = false;
        if ((st = tf_trainer_load_best(t, &loaded, err))) goto out;
        /* results.json's eval_* describe the final model, as run_glue's evaluate() after train() */
        if (loaded && a->eval_strategy != TF_STRATEGY_NO &&
            (st = tf_trainer_evaluate(t, epochs_done, NULL, err)))
            goto out;
    }
    /* the stages' parameters onto every rank before rank 0 saves the model */
    if (t->pipe && (st = tf_pipeline_finish(t, err))) goto out;
    tf_metrics final_eval = {0};
    bool have_eval = false;
    if (a->eval_strategy != TF_STRATEGY_NO && t->last_eval.n > 0) {
        final_eval = t->last_eval;
        have_eval = true;
    }
    if (t->rank == 0) {
        /* the model and results.json go in as one set (trainer_output_dir.c) */
        double t0 = tf_now();
        char set_dir[4200];
        if ((st = tf_output_dir_final_begin(t, set_dir, sizeof set_dir, err))) goto out;
        st = t->mvt->save(t->model, set_dir, err);
        t->phase[TF_PHASE_SAVE] += tf_now() - t0;
        if (!st)
            st = tf_write_results(t, set_dir, runtime, samples, (double)sp.max_steps,
                                  t->global_step ? t->total_loss / (double)t->global_step : 0, epochs_done,
                                  have_eval ? &final_eval : NULL, err);
        if (st) { /* an incomplete set never goes in */
            tf_error ignore;
            tf_file_remove_tree(set_dir, &ignore);
            goto out;
        }
        if ((st = tf_output_dir_final_commit(t, set_dir, err))) goto out;
        tf_info("wrote the final model and %s/results.json", t->output_dir);
    }
out:
    tf_sampler_free(&s);
    return st;
}

/* do_train = false (with do_eval, which training_args.c made sure of): what
 * the Trainer scripts do then (run_glue: trainer.evaluate() on the model as
 * loaded): evaluate, no optimizer step, no checkpoint, no saved model;
 * results.json and log.jsonl get the eval metrics. */
static tf_status evaluate_only(tf_trainer *t, tf_error *err)
{
    tf_metrics m = {0};
    tf_status st = tf_trainer_broadcast_params(t, err); /* one model for every worker */
    if (!st) st = tf_trainer_evaluate(t, NAN, &m, err);
    if (!st && t->rank == 0) st = tf_write_eval_results(t, &m, err);
    return st;
}

tf_status tf_trainer_run(tf_trainer *t, tf_error *err)
{
    tf_status st = TF_OK;
    /* evaluation alone (tfcore eval) with nothing to evaluate: said before output_dir is touched */
    if (!t->args->do_train && t->dvt->num_rows(t->ds, TF_SPLIT_EVAL) == 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: data '%s' has no eval split (0 eval rows), so there is nothing to evaluate; "
                            "give the data section an eval split",
                            tf_cfg_where(tf_config_section(t->plan->cfg, "data"), "plugin"),
                            t->plan->plugin[TF_KIND_DATASET]->desc->name);
    if (t->rank == 0) st = tf_output_dir_prepare(t, err);
    if (!st && t->rank == 0) st = tf_open_log(t, err);
    if (!st) st = t->args->do_train ? run_loop(t, err) : evaluate_only(t, err);
    return st;
}
