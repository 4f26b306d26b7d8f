/* trainer_eval.c — evaluation over the whole eval split, as Trainer.evaluate:
 * eval_loss is the mean over examples of their batch's mean loss, then the
 * dataset's metrics from every row's logits. With training.group_by_length the
 * rows go in LengthGroupedSampler's order (by eval batch), as the Trainer's
 * eval dataloader takes them: with padding = "longest" the batches then carry
 * little padding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_pipeline.h"
#include "trainer_internal.h"
#include "tfcore/log.h"

void tf_metrics_add(tf_metrics *m, const char *name, double value)
{
    if (m->n >= TF_METRICS_MAX) return;
    snprintf(m->name[m->n], TF_METRIC_NAME_MAX, "%s", name);
    m->value[m->n++] = value;
}

/* One batch's logits [o->rows, o->cols] into host f32 out[rows of the split, width],
 * batch row r at split row idx[r]:
 * a batch padded to its own longest row has fewer QA columns than the split's
 * width; the columns past it get -100, the value Hugging Face pads QA logits
 * with (so no padded position can win a top-n search). staging: at least
 * o->rows * o->cols * 4 bytes. */
static tf_status logits_to_host(tf_trainer *t, const tf_model_output *o, const size_t *idx, float *out, int width,
                                void *staging, tf_error *err)
{
    size_t n = (size_t)o->rows * (size_t)o->cols;
    size_t es = tf_dtype_size(o->logits_dtype);
    if (o->cols > width) return tf_error_set(err, TF_ERR_RUNTIME, "model logits are %d wide, more than %d", o->cols, width);
    tf_status st = t->bvt->memcpy(t->be, staging, o->logits, n * es, TF_COPY_DEVICE_TO_HOST, NULL);
    if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
    if (st) return st;
    if (o->logits_dtype != TF_DTYPE_F32 && o->logits_dtype != TF_DTYPE_F16 && o->logits_dtype != TF_DTYPE_BF16)
        return tf_error_set(err, TF_ERR_RUNTIME, "model logits in unsupported dtype %s", tf_dtype_name(o->logits_dtype));
    for (int r = 0; r < o->rows; r++) {
        float *dst = out + idx[r] * (size_t)width;
        for (int c = 0; c < o->cols; c++) {
            size_t i = (size_t)r * (size_t)o->cols + (size_t)c;
            if (o->logits_dtype == TF_DTYPE_F32)
                dst[c] = ((const float *)staging)[i];
            else if (o->logits_dtype == TF_DTYPE_F16)
                dst[c] = tf_f16_to_f32(((const unsigned short *)staging)[i]);
            else
                dst[c] = tf_bf16_to_f32(((const unsigned short *)staging)[i]);
        }
        for (int c = o->cols; c < width; c++) dst[c] = -100.0f;
    }
    return TF_OK;
}

tf_status tf_trainer_evaluate(tf_trainer *t, double epoch, tf_metrics *out, tf_error *err)
{
    double t0 = tf_now();
    size_t rows = t->dvt->num_rows(t->ds, TF_SPLIT_EVAL);
    if (rows == 0) return tf_error_set(err, TF_ERR_DATA, "evaluation asked for, but the dataset has no eval rows");
    /* a pipeline evaluates the whole model on every rank: its stages' parameters gathered first */
    if (t->pipe) {
        tf_status gst = tf_pipeline_gather(t, err);
        if (gst) return gst;
    }
    size_t B = (size_t)t->args->per_device_eval_batch_size;
    float *logits = NULL;
    void *staging = NULL;
    size_t *idx = malloc(B * sizeof *idx);
    tf_status st = idx ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    double loss_sum = 0;
    bool qa = t->info->task == TF_TASK_QUESTION_ANSWERING;
    /* every row at the split's full width: [rows, num_labels] or [rows, seq, 2] */
    int cols = qa ? 2 * t->dvt->seq_len(t->ds, TF_SPLIT_EVAL) : t->info->num_labels;
    size_t batches = 0;
    size_t *order = NULL; /* [rows] the split's rows in evaluation order; NULL: in order */
    if (!st && t->args->group_by_length) {
        tf_sampler es = {0};
        int32_t *lengths = NULL;
        st = tf_sampler_row_lengths(t->dvt, t->ds, TF_SPLIT_EVAL, rows, &lengths, err);
        if (!st) st = tf_sampler_init(&es, rows, 0, 1, (uint64_t)t->args->seed, 1, err);
        if (!st) st = tf_sampler_group_by_length(&es, lengths, B, err);
        if (!st) {
            tf_sampler_set_epoch(&es, 0);
            order = es.perm; /* taken over: [padded == rows] with world 1 */
            es.perm = NULL;
        }
        tf_sampler_free(&es);
        free(lengths);
    }
    if (!st) {
        logits = malloc(rows * (size_t)cols * sizeof *logits);
        staging = malloc((size_t)t->rows_cap * (size_t)cols * 4);
        if (!logits || !staging)
            st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory for %zu x %d eval logits", rows, cols);
    }
    /* Each worker evaluates its own contiguous block of rows, exactly once
     * (no padding); logits land at their rows' places in a zeroed [rows, cols]
     * array, and the sum over workers gathers them for rank 0's metrics. */
    size_t lo = rows * (size_t)t->rank / (size_t)t->world, hi = rows * ((size_t)t->rank + 1) / (size_t)t->world;
    if (!st && t->world > 1) memset(logits, 0, rows * (size_t)cols * sizeof *logits);
    for (size_t first = lo; !st && first < hi; first += B) {
        size_t n = hi - first < B ? hi - first : B;
        for (size_t i = 0; i < n; i++) idx[i] = order ? order[first + i] : first + i;
        if ((st = tf_trainer_host_batch_free(t, err))) break;
        if ((st = t->dvt->fill_batch(t->ds, TF_SPLIT_EVAL, idx, n, &t->host, err))) break;
        if ((st = tf_trainer_upload(t, err))) break;
        tf_model_output o;
        if ((st = t->mvt->forward(t->model, &t->dev, false, &o, err))) break;
        if ((st = logits_to_host(t, &o, idx, logits, cols, staging, err))) break;
        float loss = o.loss;
        if (t->defer_loss && (st = t->mvt->read_loss(t->model, &loss, err))) break;
        loss_sum += (double)loss * (double)n;
        batches++;
    }
    if (!st && t->world > 1) {
        /* the gather is evaluation time, not the training's communication */
        double comm_before = t->phase[TF_PHASE_COMM], exposed_before = t->comm_exposed;
        double sums[2] = {loss_sum, (double)batches};
        st = tf_trainer_allreduce_host(t, logits, rows * (size_t)cols, TF_DTYPE_F32, TF_REDUCE_SUM, err);
        if (!st) st = tf_trainer_allreduce_host(t, sums, 2, TF_DTYPE_F64, TF_REDUCE_SUM, err);
        loss_sum = sums[0];
        batches = (size_t)sums[1];
        t->phase[TF_PHASE_COMM] = comm_before;
        t->comm_exposed = exposed_before;
    }
    tf_metrics ds_metrics = {0};
    /* the metrics (and any predictions file the dataset writes) are rank 0's */
    if (!st && t->rank == 0) st = t->dvt->evaluate(t->ds, TF_SPLIT_EVAL, logits, rows, cols, &ds_metrics, err);
    free(idx);
    free(order);
    free(logits);
    free(staging);
    if (st) return st;
    double runtime = tf_now() - t0;
    tf_metrics m = {0};
    /* run_qa's eval features carry no labels, so Trainer reports no eval_loss for QA */
    if (!qa) tf_metrics_add(&m, "eval_loss", loss_sum / (double)rows);
    for (int i = 0; i < ds_metrics.n; i++) {
        char name[TF_METRIC_NAME_MAX + 8];
        snprintf(name, sizeof name, "eval_%s", ds_metrics.name[i]);
        tf_metrics_add(&m, name, ds_metrics.value[i]);
    }
    tf_metrics_add(&m, "eval_runtime", runtime);
    tf_metrics_add(&m, "eval_samples_per_second", (double)rows / runtime);
    tf_metrics_add(&m, "eval_steps_per_second", (double)batches / runtime);
    if (!isnan(epoch)) tf_metrics_add(&m, "epoch", epoch); /* NaN: no training (the Trainer has no epoch then) */
    t->last_eval = m;
    t->last_eval_step = t->global_step;
    if (out) *out = m;
    t->phase[TF_PHASE_EVAL] += runtime;
    return t->rank == 0 ? tf_log_metrics(t, &m, t->global_step, err) : TF_OK;
}
