/* cli_bench.c — `tfcore bench -c FILE [--steps N] [--warmup W] [--eval] [--json]`:
 * full training steps (forward, backward, optimizer) on the config's data
 * after a warm-up, timed one by one; prints the median samples/s, the matmul
 * GFLOP/s of SPEC.md's FLOPs formula, and the peak memory. With --eval, the
 * steps are evaluation batches instead (per_device_eval_batch_size rows of the
 * eval split, forward only, logits copied to the host: the work of
 * Trainer.evaluate per batch). Nothing is written to output_dir. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "plan.h"
#include "trainer_internal.h"

/* A benchmark times steps, it does not train: a million is far beyond any
 * useful median, and bounds the per-step timing array. */
#define BENCH_MAX_STEPS 1000000

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore bench -c FILE [-o section.key=value]... [--steps N] [--warmup W] [--eval] [--json]\n"
            "  Times N full training steps (default 10) after W warm-up steps (default 2)\n"
            "  with the config's model, data, backend and precision. Prints the median\n"
            "  samples/s, matmul GFLOP/s (6*L*(4H^2 + 2HI) + 12*L*S*H FLOPs per token) and\n"
            "  peak memory; --json adds one JSON object as the last line with the keys\n"
            "  samples_per_second, matmul_gflops, peak_rss_mb, memory_bytes by category\n"
            "  (weights, gradients, optimizer_states, activations, temporaries) (and more).\n"
            "  --eval times evaluation batches instead: per_device_eval_batch_size rows of\n"
            "  the eval split, forward only (a third of the training FLOPs per token).\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Training FLOPs of one token through the encoder's matmuls (SPEC.md, with the
 * FFN written for any intermediate size: 12H^2 = 4H^2 + 2*H*4H). */
/* CPU time of the whole process: under load (other processes on the cores)
 * it tracks the work a step did where wall time tracks the share it got. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double flops_per_token(const tf_model_info *m, int seq)
{
    double L = m->num_layers, H = m->hidden_size, I = m->intermediate_size;
    return 6.0 * L * (4.0 * H * H + 2.0 * H * I) + 12.0 * L * seq * H;
}

/* One evaluation batch of n rows from `first` (wrapping around the split), as
 * Trainer.evaluate runs it: fill, upload, forward without training, logits
 * and loss to the host. staging: [rows_cap * cols] floats of any dtype. */
static tf_status eval_batch(tf_trainer *t, size_t first, size_t n, size_t rows, size_t *idx, void *staging,
                            size_t staging_bytes, float *loss, tf_error *err)
{
    for (size_t i = 0; i < n; i++) idx[i] = (first + i) % rows;
    tf_status st;
    if ((st = tf_trainer_host_batch_free(t, err))) return st;
    if ((st = t->dvt->fill_batch(t->ds, TF_SPLIT_EVAL, idx, n, &t->host, err))) return st;
    if ((st = tf_trainer_upload(t, err))) return st;
    tf_model_output o;
    if ((st = t->mvt->forward(t->model, &t->dev, false, &o, err))) return st;
    size_t bytes = (size_t)o.rows * (size_t)o.cols * tf_dtype_size(o.logits_dtype);
    if (bytes > staging_bytes)
        return tf_error_set(err, TF_ERR_RUNTIME, "bench: %zu bytes of logits, more than the %zu expected", bytes,
                            staging_bytes);
    if ((st = t->bvt->memcpy(t->be, staging, o.logits, bytes, TF_COPY_DEVICE_TO_HOST, NULL))) return st;
    if ((st = t->bvt->stream_sync(t->be, NULL, err))) return st;
    *loss = o.loss;
    if (t->defer_loss && (st = t->mvt->read_loss(t->model, loss, err))) return st;
    return TF_OK;
}

int tf_cli_bench(int argc, char **argv)
{
    const char *config = NULL;
    long steps = 10, warmup = 2;
    int json = 0, eval = 0;
    char **ov = calloc((size_t)argc, sizeof *ov);
    size_t nov = 0;
    if (!ov) return TF_ERR_RUNTIME;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
            config = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            ov[nov++] = argv[++i];
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            errno = 0;
            steps = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || errno || steps < 1 || steps > BENCH_MAX_STEPS) {
                rc = tf_cli_usage_error("bench", "--steps needs an integer in [1, %d], got '%s'", BENCH_MAX_STEPS, argv[i]);
                goto out;
            }
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            errno = 0;
            warmup = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || errno || warmup < 0 || warmup > BENCH_MAX_STEPS) {
                rc = tf_cli_usage_error("bench", "--warmup needs an integer in [0, %d], got '%s'", BENCH_MAX_STEPS, argv[i]);
                goto out;
            }
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--eval")) {
            eval = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            goto out;
        } else {
            rc = tf_cli_usage_error("bench", "unknown or incomplete argument '%s'", argv[i]);
            goto out;
        }
    }
    if (!config) {
        rc = tf_cli_usage_error("bench", "no config file given (-c FILE)");
        goto out;
    }
    tf_error err = {0};
    tf_plan plan;
    if (tf_plan_resolve(&plan, config, ov, nov, NULL, 0, &err)) {
        rc = tf_cli_fail(&err);
        goto out;
    }
    tf_trainer t;
    memset(&t, 0, sizeof t);
    tf_sampler s = {0};
    double *times = calloc((size_t)steps, sizeof *times);
    tf_worker single = tf_worker_single();
    tf_status st = times ? tf_trainer_setup(&t, &plan, &single, &err) : tf_error_set(&err, TF_ERR_RUNTIME, "out of memory");
    size_t rows = st ? 0 : t.dvt->num_rows(t.ds, eval ? TF_SPLIT_EVAL : TF_SPLIT_TRAIN);
    if (!st && eval && rows == 0)
        st = tf_error_set(&err, TF_ERR_CONFIG, "bench --eval: the dataset has no eval rows");
    if (!st && !eval) st = tf_sampler_init(&s, rows, 0, 1, (uint64_t)t.args->seed, 1, &err);
    if (!st && !eval) tf_sampler_set_batch(&s, (size_t)t.args->per_device_train_batch_size, 1, 0);
    if (!st && !eval && t.args->group_by_length) { /* the training run's order, world 1 */
        int32_t *lengths;
        st = tf_sampler_row_lengths(t.dvt, t.ds, TF_SPLIT_TRAIN, rows, &lengths, &err);
        if (!st)
            st = tf_sampler_group_by_length(&s, lengths,
                                            (size_t)t.args->per_device_train_batch_size *
                                                (size_t)t.args->gradient_accumulation_steps,
                                            &err);
        free(lengths);
    }
    int64_t steps_per_epoch = 0;
    size_t eval_B = st ? 0 : (size_t)t.args->per_device_eval_batch_size;
    size_t *eval_idx = NULL;
    void *staging = NULL;
    size_t staging_bytes = 0;
    if (!st && eval) {
        int seq = t.dvt->seq_len(t.ds, TF_SPLIT_EVAL);
        size_t cols = t.info->task == TF_TASK_QUESTION_ANSWERING ? 2 * (size_t)seq : (size_t)t.info->num_labels;
        staging_bytes = (size_t)t.rows_cap * cols * 4;
        eval_idx = malloc(eval_B * sizeof *eval_idx);
        staging = malloc(staging_bytes);
        if (!eval_idx || !staging) st = tf_error_set(&err, TF_ERR_RUNTIME, "out of memory");
    }
    if (!st && !eval) {
        size_t B = (size_t)t.args->per_device_train_batch_size;
        steps_per_epoch = (int64_t)((rows / B) / (size_t)t.args->gradient_accumulation_steps);
        if (steps_per_epoch < 1)
            st = tf_error_set(&err, TF_ERR_CONFIG, "the training split (%zu rows) is smaller than one global batch", rows);
    }
    /* a constant learning rate: the schedule does not change the work */
    tf_lr_schedule lrs = {TF_LR_CONSTANT, t.args ? t.args->learning_rate : 0, 0, warmup + steps};
    double loss = 0, lr, norm;
    bool skipped;
    double cpu_steps = 0; /* process CPU seconds of the timed steps (all threads) */
    for (long i = 0; !st && i < warmup + steps; i++) {
        double t0 = tf_now(), c0 = cpu_seconds();
        if (eval) {
            float l = 0;
            st = eval_batch(&t, (size_t)i * eval_B % rows, eval_B, rows, eval_idx, staging, staging_bytes, &l, &err);
            loss = l;
        } else {
            int64_t k = i % steps_per_epoch;
            tf_sampler_set_epoch(&s, i / steps_per_epoch);
            t0 = tf_now();
            c0 = cpu_seconds();
            st = tf_trainer_step(&t, &s, &lrs, k, &loss, &lr, &norm, &skipped, &err);
        }
        if (i >= warmup) {
            times[i - warmup] = tf_now() - t0;
            cpu_steps += cpu_seconds() - c0;
        }
    }
    if (!st) {
        double total = 0; /* the mean: ragged batches (data.min_length) vary step to step */
        for (long i = 0; i < steps; i++) total += times[i];
        qsort(times, (size_t)steps, sizeof *times, cmp_double);
        double med = times[steps / 2];
        int seq = t.dvt->seq_len(t.ds, eval ? TF_SPLIT_EVAL : TF_SPLIT_TRAIN);
        double samples = eval ? (double)eval_B
                              : (double)t.args->per_device_train_batch_size * (double)t.args->gradient_accumulation_steps;
        double sps = samples / med;
        /* forward only: one of the three matmuls per weight of a training step */
        double gflops = sps * seq * flops_per_token(t.info, seq) / (eval ? 3.0 : 1.0) / 1e9;
        double rss = tf_peak_rss_mb();
        tf_backend_mem_info mi = {0};
        if (t.bvt->mem_info) t.bvt->mem_info(t.be, &mi);
        const char *dev = t.bvt->device_name ? t.bvt->device_name(t.be) : plan.plugin[TF_KIND_BACKEND]->desc->name;
        printf("model        %s (L%d H%d A%d I%d)\n", t.info->source, t.info->num_layers, t.info->hidden_size,
               t.info->num_heads, t.info->intermediate_size);
        if (eval)
            printf("batch        %zu x %d, evaluation (forward only), precision %s\n", eval_B, seq,
                   plan.plugin[TF_KIND_PRECISION]->desc->name);
        else
            printf("batch        %lld x %d (x%lld accumulation), precision %s\n",
                   (long long)t.args->per_device_train_batch_size, seq, (long long)t.args->gradient_accumulation_steps,
                   plan.plugin[TF_KIND_PRECISION]->desc->name);
        printf("device       %s\n", dev);
        printf("steps        %ld timed after %ld warm-up; median %.4f s, min %.4f s, max %.4f s\n", steps, warmup, med,
               times[0], times[steps - 1]);
        printf("samples/s    %.2f\n", sps);
        printf("matmul       %.1f GFLOP/s\n", gflops);
        printf("peak RSS     %.1f MiB\n", rss);
        tf_memory_breakdown mb;
        bool have_mb = tf_trainer_memory(&t, &mb);
        const double MiB = 1048576.0;
        if (have_mb) {
            printf("memory       weights %.1f MiB, gradients %.1f MiB, optimizer states %.1f MiB, "
                   "activations %.1f MiB",
                   (double)mb.weights / MiB, (double)mb.gradients / MiB, (double)mb.optimizer_states / MiB,
                   (double)mb.activations / MiB);
            if (mb.have_temporaries) printf(", temporaries %.1f MiB", (double)mb.temporaries / MiB);
            printf("\n");
        }
        if (json) {
            printf("{\"samples_per_second\": %.4f, \"matmul_gflops\": %.3f, \"peak_rss_mb\": %.2f, "
                   "\"peak_backend_memory_mb\": %.2f, \"median_step_seconds\": %.6f, \"steps\": %ld, "
                   "\"mean_step_seconds\": %.6f, \"samples_per_second_mean\": %.4f, "
                   "\"cpu_seconds_per_sample\": %.6f, "
                   "\"batch\": %lld, \"seq\": %d, \"layers\": %d, \"hidden\": %d, \"last_loss\": %.6f",
                   sps, gflops, rss, (double)mi.peak / 1048576.0, med, steps, total / (double)steps,
                   samples * (double)steps / total, cpu_steps / (samples * (double)steps),
                   eval ? (long long)eval_B
                        : (long long)(t.args->per_device_train_batch_size * t.args->gradient_accumulation_steps), seq,
                   t.info->num_layers, t.info->hidden_size, loss);
            if (have_mb) {
                printf(", \"memory_bytes\": {\"weights\": %zu, \"gradients\": %zu, \"optimizer_states\": %zu, "
                       "\"activations\": %zu",
                       mb.weights, mb.gradients, mb.optimizer_states, mb.activations);
                if (mb.have_temporaries) printf(", \"temporaries\": %zu", mb.temporaries);
                printf("}");
            }
            printf("}\n");
        }
    }
    if (st) rc = tf_cli_fail(&err);
    tf_sampler_free(&s);
    free(times);
    free(eval_idx);
    free(staging);
    if (t.plan) tf_trainer_teardown(&t);
    tf_plan_free(&plan);
out:
    free(ov);
    return rc;
}
