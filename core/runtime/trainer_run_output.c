/* trainer_run_output.c — what a run writes and shows: log.jsonl (a line per logging
 * step and per evaluation), results.json (Trainer's metric names plus where
 * the time went), Trainer-style dict lines, and a live progress line on a
 * terminal. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tfcore/file.h"
#include "tfcore/log.h"
#include "trainer_pipeline.h"
#include "trainer_internal.h"

double tf_peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

/* --- the progress line ------------------------------------------------------ */

void tf_progress_start(tf_progress *p, int64_t total, int64_t first, bool enabled)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->tty = enabled && isatty(STDERR_FILENO);
    p->total = total;
    p->first = first;
}

void tf_progress_update(tf_progress *p, int64_t step, double loss, double elapsed, double samples)
{
    if (!p->tty) return;
    if (elapsed - p->last_print < 0.2 && step < p->total) return;
    p->last_print = elapsed;
    double done = (double)(step - p->first);
    double per = done > 0 ? elapsed / done : 0;
    double eta = per * (double)(p->total - step);
    double sps = elapsed > 0 ? samples / elapsed : 0;
    double step_rate = elapsed > 0 ? done / elapsed : 0;
    fprintf(stderr, "\r\033[K%lld/%lld [%02d:%02d<%02d:%02d, %.2f it/s, %.1f samples/s] loss %.4f",
            (long long)step, (long long)p->total, (int)(elapsed / 60), (int)elapsed % 60, (int)(eta / 60),
            (int)eta % 60, step_rate, sps, loss);
    fflush(stderr);
    p->drawn = true;
}

void tf_progress_pause(tf_progress *p)
{
    if (p->drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        p->drawn = false;
    }
}

void tf_progress_end(tf_progress *p)
{
    if (p->drawn) fprintf(stderr, "\n");
    p->drawn = false;
}

/* --- log.jsonl and Trainer-style lines -------------------------------------- */

tf_status tf_open_log(tf_trainer *t, tf_error *err)
{
    const char *path = t->log_path; /* tf_output_dir_prepare chose it */
    /* a resumed run appends to its log; a fresh one starts it over */
    const char *mode = t->args->resume_from_checkpoint ? "a" : "w";
    t->log = fopen(path, mode);
    if (!t->log) return tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", path, strerror(errno));
    return TF_OK;
}

/* One line into log.jsonl; a failed write (a full disk) stops the run
 * rather than leaving a log with lines silently missing. */
static tf_status emit(tf_trainer *t, json_t *o, tf_error *err)
{
    if (!t->log) return TF_OK;
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!line) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory writing %s", t->log_path);
    int bad = fprintf(t->log, "%s\n", line) < 0;
    bad = fflush(t->log) != 0 || bad;
    free(line);
    if (bad) return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: %s", t->log_path, strerror(errno));
    return TF_OK;
}

/* Print a dict the way Python prints Trainer's logs: {'loss': 0.6931, ...} */
static void print_dict(json_t *o)
{
    const char *k;
    json_t *v;
    char line[2048];
    size_t len = 0;
    len += (size_t)snprintf(line + len, sizeof line - len, "{");
    int first = 1;
    json_object_foreach(o, k, v)
    {
        if (len >= sizeof line - 64) break;
        if (json_is_object(v)) continue;
        len += (size_t)snprintf(line + len, sizeof line - len, "%s'%s': ", first ? "" : ", ", k);
        if (json_is_integer(v))
            len += (size_t)snprintf(line + len, sizeof line - len, "%lld", (long long)json_integer_value(v));
        else
            len += (size_t)snprintf(line + len, sizeof line - len, "%.6g", json_real_value(v));
        first = 0;
    }
    snprintf(line + len, sizeof line - len, "}");
    fprintf(stderr, "%s\n", line);
}

static json_t *phase_json(const tf_trainer *t)
{
    json_t *ph = json_object();
    for (int i = 0; i < TF_PHASE_COUNT; i++) {
        json_object_set_new(ph, tf_phase_name[i], json_real(t->phase[i]));
        /* right after "comm": the part of it the workers spent blocked */
        if (i == TF_PHASE_COMM) json_object_set_new(ph, "comm_exposed", json_real(t->comm_exposed));
    }
    return ph;
}

tf_status tf_log_step(tf_trainer *t, tf_progress *p, double loss, double grad_norm, double lr, double epoch,
                      tf_error *err)
{
    if (t->rank != 0) return TF_OK;
    json_t *o = json_object();
    json_object_set_new(o, "loss", json_real(loss));
    json_object_set_new(o, "grad_norm", json_real(grad_norm));
    json_object_set_new(o, "learning_rate", json_real(lr));
    json_object_set_new(o, "epoch", json_real(epoch));
    json_object_set_new(o, "step", json_integer(t->global_step));
    json_object_set_new(o, "phase_seconds", phase_json(t));
    tf_progress_pause(p);
    print_dict(o);
    tf_status st = emit(t, o, err);
    json_decref(o);
    return st;
}

tf_status tf_log_metrics(tf_trainer *t, const tf_metrics *m, int64_t step, tf_error *err)
{
    json_t *o = json_object();
    for (int i = 0; i < m->n; i++) json_object_set_new(o, m->name[i], json_real(m->value[i]));
    json_object_set_new(o, "step", json_integer(step));
    print_dict(o);
    tf_status st = emit(t, o, err);
    json_decref(o);
    return st;
}

/* tfcore's additions to results.json: where the time went, and the run's shape */
static json_t *tfcore_section(tf_trainer *t)
{
    json_t *x = json_object();
    json_object_set_new(x, "phase_seconds", phase_json(t));
    json_object_set_new(x, "peak_rss_mb", json_real(tf_peak_rss_mb()));
    if (t->bvt->mem_info) {
        tf_backend_mem_info mi = {0};
        t->bvt->mem_info(t->be, &mi);
        json_object_set_new(x, "peak_backend_memory_mb", json_real((double)mi.peak / 1048576.0));
    }
    json_t *mem = tf_trainer_memory_json(t);
    if (mem) json_object_set_new(x, "memory_bytes", mem);
    json_object_set_new(x, "global_step", json_integer(t->global_step));
    json_object_set_new(x, "skipped_steps", json_integer(t->skipped_steps));
    json_object_set_new(x, "world_size", json_integer(t->world));
    if (t->pipe) json_object_set_new(x, "pipeline", tf_pipeline_json(t));
    if (t->plan->config_file) json_object_set_new(x, "config", json_string(t->plan->config_file));
    for (uint32_t k = TF_KIND_MIN; k <= TF_KIND_MAX; k++) {
        const tf_loaded_plugin *p = t->plan->plugin[k];
        json_object_set_new(x, tf_kind_name(k), json_string(p ? p->desc->name : "none"));
    }
    if (t->bvt->device_name) json_object_set_new(x, "device", json_string(t->bvt->device_name(t->be)));
    return x;
}

/* dir/results.json = text + newline, atomically; frees text */
static tf_status write_results_text(const char *dir, char *text, tf_error *err)
{
    if (!text) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory writing results");
    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", dir);
    size_t len = strlen(text);
    char *withnl = malloc(len + 2);
    tf_status st;
    if (!withnl) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory writing results");
    } else {
        memcpy(withnl, text, len);
        withnl[len] = '\n';
        withnl[len + 1] = '\0';
        st = tf_file_write_text_atomic(path, withnl, err);
    }
    free(withnl);
    free(text);
    return st;
}

tf_status tf_write_results(tf_trainer *t, const char *dir, double runtime, double samples, double steps,
                           double train_loss, double epoch, const tf_metrics *eval, tf_error *err)
{
    json_t *o = json_object();
    json_object_set_new(o, "train_runtime", json_real(runtime));
    json_object_set_new(o, "train_samples_per_second", json_real(runtime > 0 ? samples / runtime : 0));
    json_object_set_new(o, "train_steps_per_second", json_real(runtime > 0 ? steps / runtime : 0));
    json_object_set_new(o, "train_loss", json_real(train_loss));
    json_object_set_new(o, "epoch", json_real(epoch));
    for (int i = 0; eval && i < eval->n; i++)
        if (strcmp(eval->name[i], "epoch") != 0) json_object_set_new(o, eval->name[i], json_real(eval->value[i]));
    json_object_set_new(o, "tfcore", tfcore_section(t));
    /* statistical efficiency and goodput (trainer_noise_scale.h) */
    json_object_set_new(json_object_get(o, "tfcore"), "statistics",
                        tf_noise_json(t, runtime > 0 ? samples / runtime : 0));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    /* the Trainer's summary line */
    fprintf(stderr, "{'train_runtime': %.4f, 'train_samples_per_second': %.3f, 'train_steps_per_second': %.3f, "
                    "'train_loss': %.4f, 'epoch': %.1f}\n",
            runtime, runtime > 0 ? samples / runtime : 0, runtime > 0 ? steps / runtime : 0, train_loss, epoch);
    json_decref(o);
    return write_results_text(dir, text, err);
}

tf_status tf_write_eval_results(tf_trainer *t, const tf_metrics *eval, tf_error *err)
{
    json_t *o = json_object();
    for (int i = 0; i < eval->n; i++) json_object_set_new(o, eval->name[i], json_real(eval->value[i]));
    json_object_set_new(o, "tfcore", tfcore_section(t));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    return write_results_text(t->output_dir, text, err);
}
