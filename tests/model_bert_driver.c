/* model_bert_driver — runs tfcore-model-bert on one batch for the reference
 * test (tests/ref/model_bert_vs_hf.py): it loads the backend and model plugins
 * by path, through the core's registry over each one's folder (so the file
 * must be named tfcore-<kind>-<name>.so), and uses their vtables directly.
 *
 *   model_bert_driver --config FILE --batch IN.safetensors --out OUT.safetensors
 *                     [--steps K] [--lr X] [--weight-decay X] [--loss-scale X]
 *                     [--seed N] [--save DIR] [--dump-params] [--label-smoothing E]
 *                     [--backend PATH.so] [--model PATH.so] [--matmul fp32|bf16]
 *
 * FILE is a libconfig file with a "model" section. IN holds I32 tensors
 * input_ids [B, S] and optionally token_type_ids, attention_mask [B, S],
 * labels [B] (classification), start_positions, end_positions [B] (QA).
 *
 * What it does, step s = 1 .. max(K, 1): zero_grad, forward (train), backward
 * with the loss scale, and when K > 0 an AdamW step through the backend's
 * adamw (betas 0.9/0.999, eps 1e-8, weight decay on every view without
 * no_decay, as Trainer's parameter groups). Then one eval forward.
 * OUT (F32 unless noted): logits [B, cols] and loss [1] of step 1,
 * "grad.NAME" for every parameter after step 1's backward (divided by the loss
 * scale), step_losses [max(K,1)], final_logits [B, cols] and final_loss [1]
 * of the eval forward, ready_ranges I64 [r, 2] (offset, count) in the order
 * grads_ready reported them, "param.NAME" of the initial parameters with
 * --dump-params. --save DIR saves the final model with the model's save().
 * --matmul bf16: f32 activations with bf16 GEMMs (precision bf16 on
 * backend-cpu, tests/ref/model_bert_bf16_vs_autocast.py).
 * The grads_ready ranges must tile [0, n) in ascending order (checked).
 * Exit 0 on success, 1 with one line on stderr otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tfcore/tfcore.h"
#include "tfcore/safetensors.h"

typedef struct ready_log {
    int64_t (*ranges)[2];
    size_t count, cap;
} ready_log;

static void on_ready(void *user, size_t offset, size_t count)
{
    ready_log *r = user;
    if (r->count == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        void *p = realloc(r->ranges, cap * sizeof *r->ranges);
        if (!p) return;
        r->ranges = p;
        r->cap = cap;
    }
    r->ranges[r->count][0] = (int64_t)offset;
    r->ranges[r->count][1] = (int64_t)count;
    r->count++;
}

/* An output tensor whose data the driver owns. */
typedef struct out_list {
    tf_st_tensor *t;
    int64_t (*shapes)[2];
    size_t n, cap;
    void *owned[16]; /* host buffers the tensors point into, freed at the end */
    int nowned;
} out_list;

/* Remember a host buffer to free with the list (NULL-safe). */
static void *own(out_list *o, void *p)
{
    if (p && o->nowned < 16) o->owned[o->nowned++] = p;
    return p;
}

static void out_free(out_list *o)
{
    for (size_t i = 0; i < o->n; i++) free((char *)o->t[i].name);
    for (int i = 0; i < o->nowned; i++) free(o->owned[i]);
    free(o->t);
    free(o->shapes);
}

static int out_add(out_list *o, const char *name, tf_dtype dt, int ndim, int64_t d0, int64_t d1,
                   void *data)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        void *t = realloc(o->t, cap * sizeof *o->t), *s = NULL;
        if (t) o->t = t;
        s = realloc(o->shapes, cap * sizeof *o->shapes);
        if (!t || !s) return -1;
        o->shapes = s;
        o->cap = cap;
    }
    tf_st_tensor *t = &o->t[o->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->dtype = dt;
    t->ndim = ndim;
    o->shapes[o->n][0] = d0;
    o->shapes[o->n][1] = d1;
    t->numel = (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1);
    t->nbytes = t->numel * tf_dtype_size(dt);
    t->data = data;
    o->n++;
    return t->name ? 0 : -1;
}

static void out_fix_shapes(out_list *o)
{
    for (size_t i = 0; i < o->n; i++) o->t[i].shape = o->shapes[i];
}

typedef struct args {
    const char *config, *batch, *out, *save, *backend, *model;
    int steps;
    double lr, wd, loss_scale, label_smoothing;
    unsigned long long seed;
    int dump_params;
    tf_matmul_mode matmul;
} args;

static int usage(void)
{
    fprintf(stderr, "usage: model_bert_driver --config FILE --batch IN --out OUT [--steps K] "
                    "[--lr X] [--weight-decay X] [--loss-scale X] [--seed N] [--save DIR] "
                    "[--dump-params] [--label-smoothing E] [--backend SO] [--model SO] "
                    "[--matmul fp32|bf16]\n");
    return 1;
}

static int parse_args(int argc, char **argv, args *a)
{
    static char be_path[4096], m_path[4096];
    const char *top = getenv("top_builddir");
    if (!top) top = ".";
    snprintf(be_path, sizeof be_path, "%s/plugins/backend-cpu/.libs/tfcore-backend-cpu.so", top);
    snprintf(m_path, sizeof m_path, "%s/plugins/model-bert/.libs/tfcore-model-bert.so", top);
    *a = (args){.backend = be_path, .model = m_path, .lr = 1e-3, .wd = 0.01, .loss_scale = 1,
                .seed = 42};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (strcmp(k, "--dump-params") == 0) {
            a->dump_params = 1;
            continue;
        }
        if (i + 1 >= argc) return -1;
        const char *v = argv[++i];
        if (strcmp(k, "--config") == 0) a->config = v;
        else if (strcmp(k, "--batch") == 0) a->batch = v;
        else if (strcmp(k, "--out") == 0) a->out = v;
        else if (strcmp(k, "--save") == 0) a->save = v;
        else if (strcmp(k, "--backend") == 0) a->backend = v;
        else if (strcmp(k, "--model") == 0) a->model = v;
        else if (strcmp(k, "--steps") == 0) a->steps = atoi(v);
        else if (strcmp(k, "--lr") == 0) a->lr = atof(v);
        else if (strcmp(k, "--weight-decay") == 0) a->wd = atof(v);
        else if (strcmp(k, "--loss-scale") == 0) a->loss_scale = atof(v);
        else if (strcmp(k, "--seed") == 0) a->seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "--label-smoothing") == 0) a->label_smoothing = atof(v);
        else if (strcmp(k, "--matmul") == 0 && strcmp(v, "fp32") == 0) a->matmul = TF_MATMUL_FP32;
        else if (strcmp(k, "--matmul") == 0 && strcmp(v, "bf16") == 0) a->matmul = TF_MATMUL_BF16;
        else return -1;
    }
    return a->config && a->batch && a->out && a->steps >= 0 ? 0 : -1;
}

/* An optional I32 batch tensor of the given shape, copied into backend memory. */
static tf_status batch_tensor(const tf_safetensors *st, const char *name, int ndim, int64_t d0,
                              int64_t d1, const tf_backend_vtable *bk, tf_backend *be,
                              int32_t **out, tf_error *err)
{
    *out = NULL;
    const tf_st_tensor *t = tf_safetensors_find(st, name);
    if (!t) return TF_OK;
    if (t->dtype != TF_DTYPE_I32 || t->ndim != ndim || t->shape[0] != d0 ||
        (ndim > 1 && t->shape[1] != d1))
        return tf_error_set(err, TF_ERR_DATA, "%s: '%s' must be I32 of shape [%lld%s%lld]",
                            tf_safetensors_path(st), name, (long long)d0, ndim > 1 ? ", " : "",
                            ndim > 1 ? (long long)d1 : 0LL);
    tf_status s = bk->alloc(be, t->nbytes, TF_MEM_DEVICE, (void **)out, err);
    if (s != TF_OK) return s;
    return bk->memcpy(be, *out, t->data, t->nbytes, TF_COPY_HOST_TO_DEVICE, NULL);
}

/* Host copy of logits as f32 [rows, cols]. */
static float *fetch_logits(const tf_backend_vtable *bk, tf_backend *be, const tf_model_output *o,
                           tf_error *err)
{
    size_t n = (size_t)o->rows * (size_t)o->cols;
    size_t es = tf_dtype_size(o->logits_dtype);
    unsigned char *raw = malloc(n * es);
    float *f = malloc(n * sizeof *f);
    if (!raw || !f || bk->memcpy(be, raw, o->logits, n * es, TF_COPY_DEVICE_TO_HOST, NULL) ||
        bk->stream_sync(be, NULL, err)) {
        free(raw);
        free(f);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned short h;
        if (o->logits_dtype == TF_DTYPE_F32) memcpy(&f[i], raw + 4 * i, 4);
        else {
            memcpy(&h, raw + 2 * i, 2);
            f[i] = o->logits_dtype == TF_DTYPE_F16 ? tf_f16_to_f32(h) : tf_bf16_to_f32(h);
        }
    }
    free(raw);
    return f;
}

#define CHECK(expr)                                                                              \
    do {                                                                                         \
        if ((expr) != TF_OK) goto fail;                                                          \
    } while (0)

int main(int argc, char **argv)
{
    args a;
    if (parse_args(argc, argv, &a) != 0) return usage();
    tf_error err = {0};
    tf_registry *breg = NULL, *mreg = NULL; /* hold the plugins open */
    const tf_backend_vtable *bk = tf_test_plugin_file(&breg, a.backend, TF_KIND_BACKEND, &err);
    const tf_model_vtable *mv = bk ? tf_test_plugin_file(&mreg, a.model, TF_KIND_MODEL, &err) : NULL;
    if (!bk || !mv) {
        fprintf(stderr, "model_bert_driver: %s\n", err.msg);
        tf_registry_free(mreg);
        tf_registry_free(breg);
        return 1;
    }
    tf_config *cfg = NULL;
    tf_safetensors *in = NULL;
    tf_backend *be = NULL;
    tf_model *m = NULL;
    ready_log ready = {0};
    out_list out = {0};
    float *m1 = NULL, *v1 = NULL;
    tf_batch b = {0}; /* arrays in backend memory */
    int rc = 1;

    CHECK(tf_config_load(&cfg, a.config, &err));
    tf_section *msec = tf_config_section(cfg, "model");
    CHECK(mv->check_config(msec, &err));
    CHECK(tf_safetensors_open(a.batch, &in, &err));
    const tf_st_tensor *ids = tf_safetensors_find(in, "input_ids");
    if (!ids || ids->ndim != 2) {
        tf_error_set(&err, TF_ERR_DATA, "%s: needs input_ids [B, S]", a.batch);
        goto fail;
    }
    const int B = (int)ids->shape[0], S = (int)ids->shape[1];

    tf_backend_open_args oa = {.size = sizeof oa, .device = 0, .threads = 0, .seed = a.seed,
                               .section = tf_config_section(cfg, "backend")};
    CHECK(bk->open(&oa, &be, &err));
    tf_model_create_args ca = {.size = sizeof ca, .section = msec, .backend = bk, .be = be,
                               .compute_dtype = TF_DTYPE_F32, .matmul_mode = a.matmul,
                               .seed = a.seed, .max_rows = B, .max_seq = S,
                               .label_smoothing_factor = (float)a.label_smoothing};
    CHECK(mv->create(&ca, &m, &err));
    CHECK(tf_config_check_unread(cfg, &err));
    const tf_model_info *info = mv->info(m);
    const bool qa = info->task == TF_TASK_QUESTION_ANSWERING;

    b = (tf_batch){.rows = B, .seq = S, .capacity_rows = B, .capacity_seq = S};
    CHECK(batch_tensor(in, "input_ids", 2, B, S, bk, be, &b.input_ids, &err));
    CHECK(batch_tensor(in, "token_type_ids", 2, B, S, bk, be, &b.token_type_ids, &err));
    CHECK(batch_tensor(in, "attention_mask", 2, B, S, bk, be, &b.attention_mask, &err));
    CHECK(batch_tensor(in, qa ? "start_positions" : "labels", 1, B, 0, bk, be,
                       qa ? &b.start_positions : &b.labels, &err));
    if (qa) CHECK(batch_tensor(in, "end_positions", 1, B, 0, bk, be, &b.end_positions, &err));

    const tf_param_info *params;
    size_t np;
    mv->params(m, &params, &np);
    tf_model_buffers buf;
    mv->buffers(m, &buf);
    if (a.dump_params) {
        float *init = own(&out, malloc(buf.n * sizeof *init));
        if (!init) goto oom;
        CHECK(bk->memcpy(be, init, buf.params, buf.n * sizeof *init, TF_COPY_DEVICE_TO_HOST, NULL));
        CHECK(bk->stream_sync(be, NULL, &err));
        for (size_t i = 0; i < np; i++) {
            char name[256];
            snprintf(name, sizeof name, "param.%s", params[i].name);
            if (out_add(&out, name, TF_DTYPE_F32, params[i].ndim, params[i].shape[0],
                        params[i].shape[1], init + params[i].offset))
                goto oom;
        }
    }

    /* AdamW state: the trainer's, so the driver's (see bert_plugin.c) */
    tf_adamw_segment *segs = own(&out, calloc(np, sizeof *segs));
    if (!segs) goto oom;
    for (size_t i = 0; i < np; i++)
        segs[i] = (tf_adamw_segment){params[i].offset, params[i].numel,
                                     params[i].no_decay ? 0.0f : (float)a.wd};
    CHECK(bk->alloc(be, buf.n * sizeof(float), TF_MEM_DEVICE, (void **)&m1, &err));
    CHECK(bk->alloc(be, buf.n * sizeof(float), TF_MEM_DEVICE, (void **)&v1, &err));
    CHECK(bk->memset(be, m1, 0, buf.n * sizeof(float), NULL));
    CHECK(bk->memset(be, v1, 0, buf.n * sizeof(float), NULL));

    const int nsteps = a.steps > 0 ? a.steps : 1;
    float *losses = own(&out, calloc((size_t)nsteps, sizeof *losses));
    float one_loss = 0, final_loss = 0;
    if (!losses) goto oom;
    for (int s = 1; s <= nsteps; s++) {
        tf_model_output o;
        CHECK(mv->zero_grad(m, &err));
        CHECK(mv->forward(m, &b, true, &o, &err));
        losses[s - 1] = o.loss;
        ready.count = 0;
        if (s == 1) {
            float *lg = own(&out, fetch_logits(bk, be, &o, &err));
            if (!lg) goto oom;
            one_loss = o.loss;
            if (out_add(&out, "logits", TF_DTYPE_F32, 2, o.rows, o.cols, lg) ||
                out_add(&out, "loss", TF_DTYPE_F32, 1, 1, 0, &one_loss))
                goto oom;
        }
        CHECK(mv->backward(m, (float)a.loss_scale, on_ready, &ready, &err));
        if (s == 1) {
            /* the ranges must tile [0, n) in ascending order */
            size_t at = 0;
            for (size_t r = 0; r < ready.count; r++) {
                if ((size_t)ready.ranges[r][0] != at) {
                    fprintf(stderr, "model_bert_driver: grads_ready range %zu starts at %lld, "
                                    "expected %zu\n",
                            r, (long long)ready.ranges[r][0], at);
                    goto done;
                }
                at += (size_t)ready.ranges[r][1];
            }
            if (at != buf.n) {
                fprintf(stderr, "model_bert_driver: grads_ready covered %zu of %zu\n", at, buf.n);
                goto done;
            }
            if (out_add(&out, "ready_ranges", TF_DTYPE_I64, 2, (int64_t)ready.count, 2,
                        ready.ranges))
                goto oom;
            float *g = own(&out, malloc(buf.n * sizeof *g));
            if (!g) goto oom;
            CHECK(bk->memcpy(be, g, buf.grads, buf.n * sizeof *g, TF_COPY_DEVICE_TO_HOST, NULL));
            CHECK(bk->stream_sync(be, NULL, &err));
            for (size_t i = 0; i < buf.n; i++) g[i] /= (float)a.loss_scale;
            for (size_t i = 0; i < np; i++) {
                char name[256];
                snprintf(name, sizeof name, "grad.%s", params[i].name);
                if (out_add(&out, name, TF_DTYPE_F32, params[i].ndim, params[i].shape[0],
                            params[i].shape[1], g + params[i].offset))
                    goto oom;
            }
            own(&out, ready.ranges); /* the output owns the ranges now */
            ready = (ready_log){0};
        }
        if (a.steps > 0) {
            tf_adamw_hyper h = {.lr = (float)a.lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                .step = s, .grad_scale = (float)(1.0 / a.loss_scale)};
            CHECK(bk->adamw(be, NULL, buf.params, buf.grads, m1, v1, segs, np, &h, &err));
        }
    }
    tf_model_output o;
    CHECK(mv->forward(m, &b, false, &o, &err));
    final_loss = o.loss;
    float *fl = own(&out, fetch_logits(bk, be, &o, &err));
    if (!fl) goto oom;
    if (out_add(&out, "final_logits", TF_DTYPE_F32, 2, o.rows, o.cols, fl) ||
        out_add(&out, "final_loss", TF_DTYPE_F32, 1, 1, 0, &final_loss) ||
        out_add(&out, "step_losses", TF_DTYPE_F32, 1, nsteps, 0, losses))
        goto oom;
    if (a.save) CHECK(mv->save(m, a.save, &err));
    out_fix_shapes(&out);
    CHECK(tf_safetensors_write(a.out, out.t, out.n, NULL, 0, &err));
    rc = 0;
    goto done;
oom:
    if (err.code == TF_OK) tf_error_set(&err, TF_ERR_RUNTIME, "out of memory");
fail:
    fprintf(stderr, "model_bert_driver: %s\n", err.msg);
done:
    if (be) {
        int32_t *dev[6] = {b.input_ids, b.token_type_ids, b.attention_mask, b.labels,
                           b.start_positions, b.end_positions};
        for (int i = 0; i < 6; i++)
            if (dev[i]) bk->free(be, dev[i], TF_MEM_DEVICE);
        if (m1) bk->free(be, m1, TF_MEM_DEVICE);
        if (v1) bk->free(be, v1, TF_MEM_DEVICE);
    }
    free(ready.ranges);
    out_free(&out);
    if (m) mv->destroy(m);
    if (be) bk->close(be);
    tf_safetensors_close(in);
    tf_config_free(cfg);
    tf_registry_free(mreg);
    tf_registry_free(breg);
    return rc;
}
