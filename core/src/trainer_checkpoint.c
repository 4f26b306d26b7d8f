/* trainer_checkpoint.c — checkpoint-N/ folders and resuming from one.
 *
 * A checkpoint holds what transformers needs to load the model
 * (config.json, model.safetensors, vocab.txt: the model plugin's save) and
 * what tfcore needs to continue exactly: optimizer.safetensors (the AdamW
 * moments, flat, as the model's parameter buffer) and trainer_state.json
 * (steps, loss so far, loss-scaler state). It is written into
 * checkpoint-N.tmp and renamed into place, so a crash never leaves a
 * half-written checkpoint-N. */
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
#include "trainer_internal.h"
#include "trainer_state.h"

#define STATE_FILE "trainer_state.json"
#define OPTIM_FILE "optimizer.safetensors"

/* rm -r of a checkpoint folder we made: regular files one level deep. */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[8400];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The flat f32 backend buffer src[n] to host memory. */
static tf_status download(tf_trainer *t, const float *src, float *dst, size_t n, tf_error *err)
{
    tf_status st = t->bvt->memcpy(t->be, dst, src, n * sizeof(float), TF_COPY_DEVICE_TO_HOST, NULL);
    if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
    return st;
}

static tf_status write_optimizer(tf_trainer *t, const char *dir, tf_error *err)
{
    size_t n = t->buf.n;
    float *m = malloc(n * sizeof *m), *v = malloc(n * sizeof *v);
    tf_status st = m && v ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "out of memory saving the optimizer");
    if (!st) st = download(t, t->exp_avg, m, n, err);
    if (!st) st = download(t, t->exp_avg_sq, v, n, err);
    if (!st) {
        int64_t shape[1] = {(int64_t)n};
        tf_st_tensor ts[2] = {
            {.name = "exp_avg", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = m},
            {.name = "exp_avg_sq", .dtype = TF_DTYPE_F32, .ndim = 1, .shape = shape, .data = v},
        };
        tf_st_kv meta[1] = {{"format", "tfcore-adamw-flat-v1"}};
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, OPTIM_FILE);
        st = tf_safetensors_write(path, ts, 2, meta, 1, err);
    }
    free(m);
    free(v);
    return st;
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

tf_status tf_trainer_save_checkpoint(tf_trainer *t, double epoch, tf_error *err)
{
    if (t->rank != 0) return TF_OK;
    double t0 = tf_now();
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%lld", t->output_dir, (long long)t->global_step);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    remove_tree(tmp);
    tf_status st = tf_mkdirs(tmp, err);
    if (!st) st = t->mvt->save(t->model, tmp, err);
    if (!st) st = write_optimizer(t, tmp, err);
    if (!st) st = write_state(t, tmp, epoch, err);
    if (st) {
        remove_tree(tmp);
        tf_error_prefix(err, "saving %s", dir);
        return st;
    }
    remove_tree(dir); /* a rerun into the same output_dir */
    if (rename(tmp, dir) != 0) {
        remove_tree(tmp);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    }
    tf_info("saved %s", dir);
    long long limit = t->args->save_total_limit;
    if (limit > 0) {
        long long *steps;
        size_t n = list_checkpoints(t->output_dir, &steps);
        for (size_t i = 0; n > (size_t)limit && i < n - (size_t)limit; i++) {
            char old[4096];
            snprintf(old, sizeof old, "%s/checkpoint-%lld", t->output_dir, steps[i]);
            remove_tree(old);
        }
        free(steps);
    }
    t->phase[TF_PHASE_SAVE] += tf_now() - t0;
    return TF_OK;
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
    int64_t shape[1] = {(int64_t)t->buf.n};
    float *host = malloc(t->buf.n * sizeof *host);
    const char *names[2] = {"exp_avg", "exp_avg_sq"};
    float *dst[2] = {t->exp_avg, t->exp_avg_sq};
    if (!host) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading %s", path);
    for (int i = 0; !st && i < 2; i++) {
        st = tf_safetensors_load_f32(f, names[i], 1, shape, host, err);
        if (!st) st = t->bvt->memcpy(t->be, dst[i], host, t->buf.n * sizeof *host, TF_COPY_HOST_TO_DEVICE, NULL);
    }
    free(host);
    tf_safetensors_close(f);
    return st;
}

static tf_status load_state(tf_trainer *t, const char *dir, tf_error *err)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, STATE_FILE);
    tf_trainer_state s;
    tf_status st = tf_trainer_state_read(path, &s, NULL, err);
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
