/* trainer_checkpoint.c — checkpoint-N/ folders and resuming from one.
 *
 * A checkpoint holds what transformers needs to load the model
 * (config.json, model.safetensors, vocab.txt: the model plugin's save) and
 * what tfcore needs to continue exactly: optimizer.safetensors (the AdamW
 * moments, flat, as the model's parameter buffer, format
 * "tfcore-adamw-flat-v1"; or optim "adafactor"'s state, flat as
 * trainer_adafactor.c lays it out, "tfcore-adafactor-flat-v1") and trainer_state.json
 * (steps, loss so far, loss-scaler state, Trainer's best_metric and
 * best_model_checkpoint). It is written into checkpoint-N.tmp and renamed
 * into place; an existing checkpoint-N is renamed aside first and removed
 * only once the new one is in place (tf_file_replace_dir), and rotation
 * removes with tf_file_remove_tree (renamed aside first, links never
 * followed), so no crash or failure leaves a half-written or half-deleted
 * folder under a checkpoint's name. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfcore/file.h"
#include "tfcore/log.h"
#include "tfcore/safetensors.h"
#include "stop_signal.h"
#include "trainer_pipeline.h"
#include "trainer_strategy.h"
#include "trainer_internal.h"
#include "trainer_state.h"

#define STATE_FILE "trainer_state.json"
#define OPTIM_FILE "optimizer.safetensors"

/* The flat f32 backend buffer src[n] to host memory. */
static tf_status download(tf_trainer *t, const float *src, float *dst, size_t n, tf_error *err)
{
    tf_status st = t->bvt->memcpy(t->be, dst, src, n * sizeof(float), TF_COPY_DEVICE_TO_HOST, NULL);
    if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
    return st;
}

static tf_status write_adafactor(tf_trainer *t, const char *dir, tf_error *err)
{
    size_t n = t->af_state_n;
    float *s = malloc((n ? n : 1) * sizeof *s);
    tf_status st = s ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "out of memory saving the optimizer");
    if (!st) st = download(t, t->af_state, s, n, err);
    if (!st) {
        int64_t shape[1] = {(int64_t)n};
        tf_st_tensor ts[1] = {{.name = "adafactor_state", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = s}};
        tf_st_kv meta[1] = {{"format", "tfcore-adafactor-flat-v1"}};
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, OPTIM_FILE);
        st = tf_safetensors_write(path, ts, 1, meta, 1, err);
    }
    free(s);
    return st;
}

/* The AdamW moments whole on the host (rank 0; m, v: [n] each). Under ZeRO
 * each rank holds its shard only, in a pipeline each stage its parameters'
 * range: every rank takes part in gathering them through a temporary
 * backend buffer of n elements, one moment at a time. */
static tf_status gather_moments(tf_trainer *t, float *m, float *v, tf_error *err)
{
    size_t n = t->buf.n;
    float *src[2] = {t->exp_avg, t->exp_avg_sq}, *dst[2] = {m, v};
    if (!t->strategy->sharded) {
        tf_status st = TF_OK;
        for (int i = 0; !st && i < 2; i++) st = download(t, src[i], dst[i], n, err);
        return st;
    }
    float *whole = NULL;
    tf_status st = t->bvt->alloc(t->be, n * sizeof(float), TF_MEM_DEVICE, (void **)&whole, err);
    for (int i = 0; !st && i < 2; i++) {
        st = t->bvt->memcpy(t->be, whole + t->opt_lo, src[i], t->opt_n * sizeof(float), TF_COPY_DEVICE_TO_DEVICE,
                            NULL);
        if (st) st = tf_error_set(err, st, "copying the optimizer's shard to gather it failed");
        if (!st) st = t->pipe ? tf_pipeline_gather_buf(t, whole, err) : tf_zero_gather(t, whole, err);
        if (!st && t->rank == 0) st = download(t, whole, dst[i], n, err);
    }
    if (whole) t->bvt->free(t->be, whole, TF_MEM_DEVICE);
    return st;
}

/* Rank 0 writes m, v (whole, host) as the flat AdamW state. */
static tf_status write_optimizer(tf_trainer *t, const char *dir, const float *m, const float *v, tf_error *err)
{
    if (t->args->optim == TF_OPTIM_ADAFACTOR) return write_adafactor(t, dir, err);
    int64_t shape[1] = {(int64_t)t->buf.n};
    tf_st_tensor ts[2] = {
        {.name = "exp_avg", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = m},
        {.name = "exp_avg_sq", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = v},
    };
    tf_st_kv meta[1] = {{"format", "tfcore-adamw-flat-v1"}};
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, OPTIM_FILE);
    return tf_safetensors_write(path, ts, 2, meta, 1, err);
}

static tf_status write_state(tf_trainer *t, const char *dir, double epoch, tf_error *err)
{
    tf_scaler_state sc;
    t->pvt->get_state(t->prec, &sc);
    json_t *o = json_pack("{s:I, s:f, s:I, s:I, s:f, s:I, s:I, s:{s:f, s:I, s:I}}", "global_step",
                          (json_int_t)t->global_step, "epoch", epoch, "micro_step", (json_int_t)t->micro_step,
                          "max_steps", (json_int_t)t->steps.max_steps, "total_loss", t->total_loss, "skipped_steps",
                          (json_int_t)t->skipped_steps, "num_parameters", (json_int_t)t->buf.n, "scaler", "scale",
                          sc.scale, "good_steps", (json_int_t)sc.good_steps, "skipped_steps",
                          (json_int_t)sc.skipped_steps);
    if (o) /* the global sample order this run follows (check_data_order) */
        json_object_set_new(
            o, "data_order",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "train_rows", (json_int_t)t->train_rows,
                      "epoch_samples", (json_int_t)t->epoch_samples, "total_train_batch_size",
                      (json_int_t)t->steps.total_train_batch_size, "steps_per_epoch",
                      (json_int_t)t->steps.steps_per_epoch, "world_size", (json_int_t)t->data_world,
                      "per_device_train_batch_size", (json_int_t)t->args->per_device_train_batch_size,
                      "gradient_accumulation_steps", (json_int_t)t->args->gradient_accumulation_steps));
    if (o) { /* Trainer's names; null until a best is known */
        json_object_set_new(o, "best_metric", t->have_best ? json_real(t->best_metric) : json_null());
        json_object_set_new(o, "best_model_checkpoint",
                            t->have_best ? json_string(t->best_checkpoint) : json_null());
    }
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (!text) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory writing the trainer state");
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, STATE_FILE);
    tf_status st = tf_file_write_text_atomic(path, text, err);
    free(text);
    return st;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The steps of the checkpoint-N folders in dir, ascending; caller frees. */
static size_t list_checkpoints(const char *dir, long long **steps)
{
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "checkpoint-", 11) != 0) continue;
        if (e->d_name[11] < '0' || e->d_name[11] > '9') continue; /* no sign, no space */
        errno = 0;
        long long s = strtoll(e->d_name + 11, &end, 10);
        if (*end || errno == ERANGE) continue; /* checkpoint-N.tmp, a step no run reaches */
        if (n == cap) {
            long long *g = realloc(*steps, (cap = cap ? 2 * cap : 8) * sizeof *g);
            if (!g) break;
            *steps = g;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    if (n) qsort(*steps, n, sizeof **steps, cmp_ll);
    return n;
}

/* Trainer._save_checkpoint: with metric_for_best_model set, the evaluation
 * taken at this step decides whether dir becomes the best checkpoint. */
static tf_status track_best(tf_trainer *t, const char *dir, tf_error *err)
{
    const char *want = t->args->metric_for_best_model;
    if (!want || t->last_eval_step != t->global_step) return TF_OK;
    char name[TF_METRIC_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s%s", strncmp(want, "eval_", 5) == 0 ? "" : "eval_", want);
    const tf_metrics *m = &t->last_eval;
    int k = 0;
    while (k < m->n && strcmp(m->name[k], name) != 0) k++;
    if (k == m->n) {
        char have[512] = "";
        size_t len = 0;
        for (int i = 0; i < m->n && len < sizeof have - 64; i++)
            len += (size_t)snprintf(have + len, sizeof have - len, "%s%s", i ? ", " : "", m->name[i]);
        return tf_error_set(err, TF_ERR_CONFIG,
                            "training.metric_for_best_model '%s': the evaluation has no '%s' (it has %s)", want, name,
                            have);
    }
    double v = m->value[k];
    bool greater = t->args->greater_is_better == TF_TRUE;
    if (!t->have_best || (greater ? v > t->best_metric : v < t->best_metric)) {
        char *copy = strdup(dir);
        if (!copy) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        free(t->best_checkpoint);
        t->best_checkpoint = copy;
        t->best_metric = v;
        t->have_best = true;
    }
    return TF_OK;
}

/* Remove output_dir/checkpoint-<step>: a link is removed as a link, and says so. */
static tf_status remove_checkpoint(tf_trainer *t, long long step, tf_error *err)
{
    char old[4096];
    snprintf(old, sizeof old, "%s/checkpoint-%lld", t->output_dir, step);
    struct stat sb;
    if (lstat(old, &sb) == 0 && S_ISLNK(sb.st_mode))
        tf_warn("%s is a symbolic link: removing the link only, never what it points to", old);
    tf_info("deleting older checkpoint %s (save_total_limit)", old);
    return tf_file_remove_tree(old, err);
}

/* The position of the best checkpoint in steps[n], or -1. */
static long best_index(const tf_trainer *t, const long long *steps, size_t n)
{
    if (!t->have_best) return -1;
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/checkpoint-%lld", t->output_dir, steps[i]);
        if (strcmp(p, t->best_checkpoint) == 0) return (long)i;
    }
    return -1;
}

/* Trainer._rotate_checkpoints over _sorted_checkpoints: oldest first, but the
 * best checkpoint is moved next to the newest so it is deleted last; with
 * save_total_limit = 1 and a best that is not the newest, two are kept. */
static tf_status rotate(tf_trainer *t, tf_error *err)
{
    long long limit = t->args->save_total_limit;
    if (limit <= 0) return TF_OK;
    long long *steps;
    size_t n = list_checkpoints(t->output_dir, &steps);
    long b = best_index(t, steps, n);
    for (long i = b; b >= 0 && i + 2 < (long)n; i++) {
        long long x = steps[i];
        steps[i] = steps[i + 1];
        steps[i + 1] = x;
    }
    if (b >= 0 && limit == 1 && b != (long)n - 1) limit = 2;
    tf_status st = TF_OK;
    for (size_t i = 0; !st && n > (size_t)limit && i < n - (size_t)limit; i++) st = remove_checkpoint(t, steps[i], err);
    free(steps);
    return st;
}

static tf_status save_rank0(tf_trainer *t, double epoch, const float *m, const float *v, tf_error *err);

tf_status tf_trainer_save_checkpoint(tf_trainer *t, double epoch, tf_error *err)
{
    /* a pipeline's stages each update their own parameters: gathered onto
     * every rank, so rank 0 saves the whole model in the usual layout (the
     * moments below, as ZeRO's shards) */
    if (t->pipe) {
        tf_status st = tf_pipeline_gather(t, err);
        if (st) return st;
    }
    if (t->rank != 0 && !t->strategy->sharded) return TF_OK;
    double t0 = tf_now();
    float *m = NULL, *v = NULL;
    tf_status st = TF_OK;
    if (t->args->optim != TF_OPTIM_ADAFACTOR) {
        /* rank 0's host copy; under ZeRO every rank helps gather it */
        size_t hn = t->rank == 0 ? t->buf.n : 1;
        m = malloc(hn * sizeof *m);
        v = malloc(hn * sizeof *v);
        st = m && v ? gather_moments(t, m, v, err) : tf_error_set(err, TF_ERR_RUNTIME, "out of memory saving the optimizer");
    }
    if (!st && t->rank == 0) st = save_rank0(t, epoch, m, v, err);
    free(m);
    free(v);
    if (!st) t->phase[TF_PHASE_SAVE] += tf_now() - t0;
    return st;
}

/* Rank 0 writes checkpoint-N with the optimizer's moments m, v (host). */
static tf_status save_rank0(tf_trainer *t, double epoch, const float *m, const float *v, tf_error *err)
{
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", t->output_dir, (long long)t->global_step);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    tf_status st = tf_file_remove_tree(tmp, err);
    if (!st) st = tf_mkdirs(tmp, err);
    if (!st) st = t->mvt->save(t->model, tmp, err);
    if (!st) tf_stop_test_in_save(); /* a test's second signal, mid-save */
    if (!st) st = write_optimizer(t, tmp, m, v, err);
    if (!st) st = track_best(t, dir, err);
    if (!st) st = write_state(t, tmp, epoch, err);
    if (st) {
        tf_error ignore;
        tf_file_remove_tree(tmp, &ignore);
        tf_error_prefix(err, "saving %s", dir);
        return st;
    }
    /* a rerun into the same output_dir: the old checkpoint-N goes only once the new one is in */
    if ((st = tf_file_replace_dir(tmp, dir, err))) return st;
    tf_info("saved %s", dir);
    return rotate(t, err);
}

/* --- resume ------------------------------------------------------------------ */

static tf_status load_params(tf_trainer *t, const char *dir, tf_error *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tf_safetensors *st_file;
    tf_status st = tf_safetensors_open(path, &st_file, err);
    if (st) return st;
    const tf_param_info *p;
    size_t np;
    t->mvt->params(t->model, &p, &np);
    float *host = malloc(t->buf.n * sizeof *host);
    if (!host) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading %s", path);
    for (size_t i = 0; !st && i < np; i++)
        st = tf_safetensors_load_f32(st_file, p[i].name, p[i].ndim, p[i].shape, host + p[i].offset, err);
    if (!st)
        st = t->bvt->memcpy(t->be, t->buf.params, host, t->buf.n * sizeof *host, TF_COPY_HOST_TO_DEVICE, NULL);
    free(host);
    tf_safetensors_close(st_file);
    return st;
}

static tf_status load_optimizer(tf_trainer *t, const char *dir, tf_error *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, OPTIM_FILE);
    tf_safetensors *f;
    tf_status st = tf_safetensors_open(path, &f, err);
    if (st) return st;
    /* the state of another optimizer cannot continue this one's run */
    bool want_af = t->args->optim == TF_OPTIM_ADAFACTOR;
    const char *fmt = tf_safetensors_metadata_get(f, "format");
    bool is_af = fmt && strcmp(fmt, "tfcore-adafactor-flat-v1") == 0;
    if (want_af != is_af) {
        tf_safetensors_close(f);
        return tf_error_set(err, TF_ERR_DATA, "%s holds %s state, but training.optim is \"%s\"", path,
                            is_af ? "Adafactor" : "AdamW", tf_optim_name(t->args->optim));
    }
    if (want_af) {
        int64_t shape[1] = {(int64_t)t->af_state_n};
        float *host = malloc((t->af_state_n ? t->af_state_n : 1) * sizeof *host);
        if (!host) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading %s", path);
        if (!st) st = tf_safetensors_load_f32(f, "adafactor_state", 1, shape, host, err);
        if (!st)
            st = t->bvt->memcpy(t->be, t->af_state, host, t->af_state_n * sizeof *host, TF_COPY_HOST_TO_DEVICE, NULL);
        free(host);
        tf_safetensors_close(f);
        return st;
    }
    int64_t shape[1] = {(int64_t)t->buf.n};
    float *host = malloc(t->buf.n * sizeof *host);
    const char *names[2] = {"exp_avg", "exp_avg_sq"};
    float *dst[2] = {t->exp_avg, t->exp_avg_sq};
    /* the whole state, or this rank's range of it (a ZeRO shard, a pipeline stage; any world size) */
    size_t lo = t->strategy->sharded ? t->opt_lo : 0, n = t->strategy->sharded ? t->opt_n : t->buf.n;
    if (!host) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading %s", path);
    for (int i = 0; !st && i < 2; i++) {
        st = tf_safetensors_load_f32(f, names[i], 1, shape, host, err);
        if (!st) st = t->bvt->memcpy(t->be, dst[i], host + lo, n * sizeof *host, TF_COPY_HOST_TO_DEVICE, NULL);
    }
    free(host);
    tf_safetensors_close(f);
    return st;
}

/* A checkpoint resumes on any world size or strategy (dropout masks follow a
 * sample's global position, tfcore/model.h set_rows), as long as the global
 * sample order continues: the same training rows, the same positions per
 * epoch (rows padded to the world size), the same global batch and steps per
 * epoch. Anything else cannot continue the interrupted run exactly, and is
 * refused in one line. Checkpoints without "data_order" (older tfcore) are
 * taken as they are. */
static tf_status check_data_order(const tf_trainer *t, const char *path, json_t *o, tf_error *err)
{
    json_t *d = json_object_get(o, "data_order");
    if (!d) return TF_OK;
    json_int_t rows, samples, global, spe, world, per_device, accum;
    json_error_t je;
    if (json_unpack_ex(d, &je, 0, "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "train_rows", &rows, "epoch_samples",
                       &samples, "total_train_batch_size", &global, "steps_per_epoch", &spe, "world_size", &world,
                       "per_device_train_batch_size", &per_device, "gradient_accumulation_steps", &accum) != 0)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: data_order must hold the integers train_rows, epoch_samples, "
                            "total_train_batch_size, steps_per_epoch, world_size, per_device_train_batch_size "
                            "and gradient_accumulation_steps (%s)",
                            path, je.text);
    const tf_training_args *a = t->args;
    if (rows != (json_int_t)t->train_rows)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: the checkpoint was trained on %lld training rows, this run has %zu: it can only "
                            "resume on the same training data",
                            path, (long long)rows, t->train_rows);
    if (global != (json_int_t)t->steps.total_train_batch_size)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: the checkpoint's global batch is %lld (world size %lld x "
                            "per_device_train_batch_size %lld x gradient_accumulation_steps %lld), this run's is "
                            "%lld (%d x %lld x %lld): resuming exactly needs the same global batch",
                            path, (long long)global, (long long)world, (long long)per_device, (long long)accum,
                            t->steps.total_train_batch_size, t->data_world, a->per_device_train_batch_size,
                            a->gradient_accumulation_steps);
    if (samples != (json_int_t)t->epoch_samples)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %lld training rows pad to %lld samples an epoch on the checkpoint's %lld "
                            "workers and to %zu on this run's sampler: resuming exactly needs a world size "
                            "that pads the rows alike (one dividing %lld, or a DataParallel run)",
                            path, (long long)rows, (long long)samples, (long long)world, t->epoch_samples,
                            (long long)rows);
    if (spe != (json_int_t)t->steps.steps_per_epoch)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: the checkpoint ran %lld optimizer steps an epoch, this run would run %lld "
                            "(gradient_accumulation_steps %lld there, %lld here, drop an epoch's last partial "
                            "accumulation differently): resuming exactly needs the same steps per epoch",
                            path, (long long)spe, t->steps.steps_per_epoch, (long long)accum,
                            a->gradient_accumulation_steps);
    if (t->rank == 0 &&
        (world != t->data_world || per_device != a->per_device_train_batch_size || accum != a->gradient_accumulation_steps))
        tf_info("resuming a checkpoint of %lld workers x %lld rows x %lld accumulation on %d x %lld x %lld: the same "
                "global batch of %lld, the sample order continues",
                (long long)world, (long long)per_device, (long long)accum, t->data_world,
                a->per_device_train_batch_size, a->gradient_accumulation_steps, (long long)global);
    return TF_OK;
}

static tf_status load_state(tf_trainer *t, const char *dir, tf_error *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, STATE_FILE);
    tf_trainer_state s;
    json_t *o = NULL;
    tf_status st = tf_trainer_state_read(path, &s, &o, err);
    if (st) return st;
    /* Trainer's best_metric / best_model_checkpoint (absent in older checkpoints) */
    json_t *bm = json_object_get(o, "best_metric"), *bc = json_object_get(o, "best_model_checkpoint");
    if (json_is_number(bm) && json_is_string(bc)) {
        char *copy = strdup(json_string_value(bc));
        if (!copy) {
            json_decref(o);
            return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        }
        free(t->best_checkpoint);
        t->best_checkpoint = copy;
        t->best_metric = json_number_value(bm);
        t->have_best = true;
    } else if ((bm && !json_is_null(bm) && !json_is_number(bm)) || (bc && !json_is_null(bc) && !json_is_string(bc))) {
        json_decref(o);
        return tf_error_set(err, TF_ERR_DATA, "%s: best_metric must be a number and best_model_checkpoint a string",
                            path);
    }
    st = check_data_order(t, path, o, err);
    json_decref(o);
    if (st) return st;
    if (s.num_parameters != (int64_t)t->buf.n)
        return tf_error_set(err, TF_ERR_DATA, "%s: the checkpoint has %lld parameters, this model %zu", path,
                            (long long)s.num_parameters, t->buf.n);
    t->global_step = s.global_step;
    t->micro_step = s.micro_step;
    t->total_loss = s.total_loss;
    t->skipped_steps = s.skipped_steps;
    t->pvt->set_state(t->prec, &s.scaler);
    return TF_OK;
}

tf_status tf_trainer_resume(tf_trainer *t, tf_error *err)
{
    const char *want = t->args->resume_from_checkpoint;
    if (!want || !*want) return TF_OK;
    char dir[4096];
    if (strcmp(want, "last") == 0 || strcmp(want, "true") == 0) {
        long long *steps;
        size_t n = list_checkpoints(t->output_dir, &steps);
        if (!n)
            return tf_error_set(err, TF_ERR_DATA, "resume_from_checkpoint = \"%s\" but %s has no checkpoint-N folder",
                                want, t->output_dir);
        snprintf(dir, sizeof dir, "%s/checkpoint-%lld", t->output_dir, steps[n - 1]);
        free(steps);
    } else {
        snprintf(dir, sizeof dir, "%s", want);
    }
    tf_status st = load_state(t, dir, err);
    if (!st) st = load_params(t, dir, err);
    if (!st) st = load_optimizer(t, dir, err);
    if (st) return st;
    if (t->global_step > t->steps.max_steps)
        return tf_error_set(err, TF_ERR_CONFIG, "%s is at step %lld, past this run's %lld steps", dir,
                            (long long)t->global_step, (long long)t->steps.max_steps);
    tf_info("resumed from %s at step %lld", dir, (long long)t->global_step);
    return TF_OK;
}

tf_status tf_trainer_load_best(tf_trainer *t, bool *loaded, tf_error *err)
{
    *loaded = false;
    int32_t flag = 0;
    tf_status st = TF_OK;
    if (t->rank == 0 && t->have_best) {
        char path[8400];
        snprintf(path, sizeof path, "%s/model.safetensors", t->best_checkpoint);
        if (access(path, F_OK) != 0) {
            /* as Trainer._load_best_model: a warning, and the last model stays */
            tf_warn("load_best_model_at_end: cannot find the best model at %s: %s; keeping the last model", path,
                    strerror(errno));
        } else if (!(st = load_params(t, t->best_checkpoint, err))) {
            tf_info("loaded the best model from %s (%s = %g)", t->best_checkpoint, t->args->metric_for_best_model,
                    t->best_metric);
            flag = 1;
        }
    }
    if (st) return st;
    if ((st = tf_trainer_broadcast_host(t, &flag, 1, TF_DTYPE_I32, 0, err))) return st;
    if (!flag) return TF_OK;
    if ((st = tf_trainer_broadcast_params(t, err))) return st;
    *loaded = true;
    /* Trainer.train's end: save_total_limit = 1 keeps the best checkpoint only */
    if (t->rank == 0 && t->args->save_total_limit == 1) {
        long long *steps;
        size_t n = list_checkpoints(t->output_dir, &steps);
        long b = best_index(t, steps, n);
        for (size_t i = 0; !st && b >= 0 && i < n; i++)
            if ((long)i != b) st = remove_checkpoint(t, steps[i], err);
        free(steps);
    }
    return st;
}
