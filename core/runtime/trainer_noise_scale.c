/* trainer_noise_scale.c — the gradient noise scale measured while training
 * (trainer_noise_scale.h), and results.json's statistical efficiency and
 * goodput. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer_noise_scale.h"
#include "trainer.h"
#include "trainer_internal.h"

tf_status tf_noise_setup(tf_trainer *t, tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    memset(p, 0, sizeof *p);
    tf_noise_scale_init(&p->est, t->plan->statistics.smoothing);
    p->m0 = (double)t->plan->statistics.reference_batch_size;
    p->m = (double)t->steps.total_train_batch_size;
    const tf_training_args *a = t->args;
    int stages = t->plan->pipeline.stages;
    if (t->data_world > 1 && t->zero2 && a->gradient_accumulation_steps >= 2) {
        p->mode = TF_NOISE_NONE;
        p->why_none = "ZeRO-2 with gradient accumulation reduces every micro-batch's gradient into its owner's "
                      "shard as backward makes it, so no rank ever holds its whole step gradient before the "
                      "reduction: the gradient noise scale cannot be estimated (gradient_accumulation_steps = 1 "
                      "or zero_stage 1 give one)";
        return TF_OK;
    } else if (t->data_world > 1) {
        p->mode = TF_NOISE_RANKS;
    } else if (stages > 1 ? t->plan->pipeline.micro_batches >= 2 : a->gradient_accumulation_steps >= 2) {
        p->mode = TF_NOISE_FIRST_MICRO;
    } else {
        p->mode = TF_NOISE_NONE;
        p->why_none = stages > 1 ? "one pipeline replica with one micro-batch: a step's gradient has a single batch "
                                   "size, so the gradient noise scale cannot be estimated (pipeline.micro_batches >= 2 "
                                   "or more replicas give a second one)"
                                 : "one worker without gradient accumulation: a step's gradient has a single batch "
                                   "size, so the gradient noise scale cannot be estimated "
                                   "(gradient_accumulation_steps >= 2 or more workers give a second one)";
        return TF_OK;
    }
    tf_status st = t->bvt->alloc(t->be, TF_NOISE_SLOTS * sizeof(float), TF_MEM_DEVICE, (void **)&p->dev_sq, err);
    if (st) return st;
    if ((st = t->bvt->stream_create(t->be, &p->stream, err))) return st;
    if ((st = t->bvt->event_create(t->be, &p->taken_ev, err))) return st;
    /* DDP and ZeRO-1 reduce in buckets during the last backward: each
     * bucket's piece is taken just before its all-reduce starts */
    if (p->mode == TF_NOISE_RANKS && t->buckets.inflight) {
        t->buckets.before_start = tf_noise_bucket_piece;
        t->buckets.before_start_user = t;
    }
    return TF_OK;
}

void tf_noise_free(tf_trainer *t)
{
    if (t->noise.dev_sq && t->be) t->bvt->free(t->be, t->noise.dev_sq, TF_MEM_DEVICE);
    t->noise.dev_sq = NULL;
    if (t->noise.taken_ev && t->be) t->bvt->event_destroy(t->be, t->noise.taken_ev);
    if (t->noise.stream && t->be) t->bvt->stream_destroy(t->be, t->noise.stream);
    t->noise.taken_ev = NULL;
    t->noise.stream = NULL;
}

void tf_noise_step_begin(tf_trainer *t)
{
    tf_noise_probe *p = &t->noise;
    p->nslots = 0;
    p->raw = 0;
    p->taken = false;
    p->bucketed = p->foreign_hook = p->armed = false;
    p->factor = 0;
    p->b_small = p->b_part = 0;
    p->counted = false;
    p->bad = false;
    p->step_small_b = 0;
    p->st = TF_OK;
}

/* the queued pieces into p->raw */
static tf_status read_back(tf_trainer *t, tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    if (!p->nslots) return TF_OK;
    float host[TF_NOISE_SLOTS];
    /* on the probe's own stream, after the last piece: by the time this runs
     * the compute stream may wait on DDP's buckets (the comm stream) */
    tf_status st = t->bvt->stream_wait_event(t->be, p->stream, p->taken_ev);
    if (!st)
        st = t->bvt->memcpy(t->be, host, p->dev_sq, p->nslots * sizeof(float), TF_COPY_DEVICE_TO_HOST, p->stream);
    if (st) return tf_error_set(err, st, "reading the gradient noise scale's squared norms back from the backend failed");
    if ((st = t->bvt->stream_sync(t->be, p->stream, err))) return st;
    for (size_t i = 0; i < p->nslots; i++) p->raw += host[i];
    p->nslots = 0;
    return TF_OK;
}

tf_status tf_noise_take(tf_trainer *t, const float *grads, size_t n, tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    if (p->mode == TF_NOISE_NONE || n == 0) return TF_OK;
    tf_status st;
    if (p->nslots == TF_NOISE_SLOTS && (st = read_back(t, err))) return st;
    /* queued on the compute stream after the backward that wrote grads, so
     * before any reduction started later reads or overwrites them */
    if ((st = t->bvt->sum_squares(t->be, NULL, grads, n, p->dev_sq + p->nslots, err))) return st;
    if ((st = t->bvt->event_record(t->be, p->taken_ev, NULL)))
        return tf_error_set(err, st, "recording the gradient noise scale's event on the compute stream failed");
    p->nslots++;
    p->taken = true;
    return TF_OK;
}

void tf_noise_hook(tf_trainer *t, tf_grads_ready_fn ready)
{
    /* DDP's and ZeRO-1's buckets reduce in the last backward only; ZeRO-2's
     * reduce in every backward, which is the whole step's gradient only
     * without accumulation (tf_noise_setup refuses the other case) */
    t->noise.bucketed = ready && t->buckets.before_start == tf_noise_bucket_piece &&
                        (ready == tf_grad_buckets_ready || t->zero2);
    t->noise.foreign_hook = ready && !t->noise.bucketed;
    t->noise.armed = true;
}

void tf_noise_bucket_piece(void *user, size_t offset, size_t count)
{
    tf_trainer *t = user;
    if (t->noise.st || !t->noise.armed) return;
    t->noise.st = tf_noise_take(t, t->buf.grads + offset, count, &t->noise.err);
}

void tf_noise_describe(tf_trainer *t, double factor, double b_small, double b_part, bool counted, bool bad)
{
    tf_noise_probe *p = &t->noise;
    p->factor = factor;
    p->b_small = b_small;
    p->b_part = b_part;
    p->counted = counted;
    p->bad = bad || !(b_small > 0) || !(b_part > 0);
}

tf_status tf_noise_stage(tf_trainer *t, const float *g, size_t n, bool first_stage, size_t m, size_t first_rows,
                         tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    double ls = t->pvt->loss_scale(t->prec);
    if (p->mode == TF_NOISE_RANKS) {
        tf_noise_describe(t, 1 / (ls * ls), (double)m, (double)m, first_stage, false);
        return tf_noise_take(t, g, n, err);
    }
    if (p->mode == TF_NOISE_FIRST_MICRO) { /* that micro-batch was weighted first_rows / m */
        double f = first_rows ? (double)m / ((double)first_rows * ls) : 0;
        tf_noise_describe(t, f * f, (double)first_rows, (double)m, first_stage, first_rows == 0);
    }
    return TF_OK;
}

tf_status tf_noise_pack(tf_trainer *t, double *v, tf_error *err)
{
    tf_noise_probe *p = &t->noise;
    for (int i = 0; i < TF_NOISE_NVALS; i++) v[i] = 0;
    if (p->mode == TF_NOISE_NONE) return TF_OK;
    if (p->st) return tf_error_set(err, p->st, "%s", p->err.msg);
    tf_status st = read_back(t, err);
    if (st) return st;
    bool bad = p->bad || !p->taken || !isfinite(p->raw);
    v[0] = bad ? 0 : p->raw * p->factor;
    v[1] = p->counted ? 1 : 0;
    v[2] = p->counted && !bad ? 1 / p->b_small : 0;
    v[3] = p->counted && !bad ? 1 / p->b_part : 0;
    v[4] = bad ? 1 : 0;
    return TF_OK;
}

void tf_noise_unpack(tf_trainer *t, const double *v)
{
    tf_noise_probe *p = &t->noise;
    p->step_small_b = 0;
    if (p->mode == TF_NOISE_NONE || v[4] > 0 || !(v[1] > 0) || !(v[2] > 0) || !(v[3] > 0)) return;
    /* the counted ranks' small gradients: mean squared norm, harmonic mean
     * batch; the big one their equal-weight average */
    p->step_small_sq = v[0] / v[1];
    p->step_small_b = v[1] / v[2];
    p->step_big_b = v[1] * v[1] / v[3];
}

void tf_noise_step_end(tf_trainer *t, double big_sq)
{
    tf_noise_probe *p = &t->noise;
    if (p->step_small_b > 0) tf_noise_scale_add(&p->est, p->step_small_sq, p->step_small_b, big_sq, p->step_big_b);
    p->step_small_b = 0;
}

json_t *tf_noise_json(const tf_trainer *t, double samples_per_second)
{
    const tf_noise_probe *p = &t->noise;
    json_t *x = json_object();
    double phi = tf_noise_scale_phi(&p->est);
    double eff = tf_statistical_efficiency(phi, p->m0, p->m);
    json_object_set_new(x, "noise_scale", isnan(phi) ? json_null() : json_real(phi));
    json_object_set_new(x, "statistical_efficiency", isnan(eff) ? json_null() : json_real(eff));
    json_object_set_new(x, "goodput", isnan(eff) ? json_null() : json_real(samples_per_second * eff));
    json_object_set_new(x, "batch_size", json_real(p->m));
    json_object_set_new(x, "reference_batch_size", json_real(p->m0));
    static const char *const how[] = {"none", "ranks before the reduction", "first micro-batch"};
    json_object_set_new(x, "estimated_from", json_string(how[p->mode]));
    json_object_set_new(x, "steps_estimated", json_integer(p->est.steps));
    if (p->est.steps) {
        json_object_set_new(x, "grad_sq", json_real(tf_noise_scale_g2(&p->est)));
        json_object_set_new(x, "trace_sigma", json_real(tf_noise_scale_trace(&p->est)));
        json_object_set_new(x, "small_batch", json_real(p->est.b_small));
        json_object_set_new(x, "big_batch", json_real(p->est.b_big));
    }
    json_object_set_new(x, "smoothing", json_real(p->est.beta));
    if (isnan(phi)) {
        char why[512];
        if (p->mode == TF_NOISE_NONE)
            snprintf(why, sizeof why, "%s", p->why_none);
        else if (!p->est.steps)
            snprintf(why, sizeof why, "no step gave an estimate (steps skipped by the loss scaler, or short "
                                      "accumulations only)");
        else
            snprintf(why, sizeof why, "the smoothed |G|^2 estimate is not positive after %lld steps: the gradient "
                                      "noise drowns the signal; more steps are needed",
                     (long long)p->est.steps);
        json_object_set_new(x, "reason", json_string(why));
    }
    return x;
}
