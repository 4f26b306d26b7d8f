/* cpu_ops.c — backend-cpu op timings at the shapes BERT training uses.
 *
 *   bench/cpu_ops [threads] [batch] [seq] [model]   (defaults: all cores, 16, 128)
 *
 * Prints sgemm GFLOP/s (and, where backend-cpu has bf16 GEMMs, the same
 * GEMM in bf16 and its speed-up) at every GEMM shape of a bert-mini (L4 H256 A4 I1024)
 * and a MiniLM-L6 (L6 H384 A12 I1536) training step next to a large square
 * sgemm, the time of every other op at those shapes, and the time of a whole
 * BertForSequenceClassification training step (embeddings, encoder, pooler,
 * classifier, loss, backward, AdamW over every parameter) built from the ops
 * the way a model plugin calls them, as samples/s. bench/cpu_ops_torch.py
 * times the same step in PyTorch. A fourth argument "model" runs only the
 * whole-model steps. The plugin's sources are compiled in. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_blas.h"
#include "tfcore/backend.h"
#include "tfcore/plugin.h"

const tf_plugin *tfcore_plugin_entry(void);

static const tf_backend_vtable *vt;
static tf_backend *be;
static tf_error err;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (every thread). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ok(tf_status st)
{
    if (st != TF_OK) {
        fprintf(stderr, "cpu_ops: %s\n", err.msg);
        exit(1);
    }
}

static float *buf(size_t n)
{
    void *p = NULL;
    ok(vt->alloc(be, (n ? n : 1) * sizeof(float), TF_MEM_DEVICE, &p, &err));
    float *f = p;
    for (size_t i = 0; i < n; i++) f[i] = (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
    return f;
}

/* Seconds per call of the statement: the fastest of at least 5 calls and
 * 0.5 s after one warm-up (the fastest, not the mean: on a shared machine
 * the slow calls are other programs' time). */
#define TIME(secs, ...)                                                 \
    do {                                                                \
        __VA_ARGS__;                                                    \
        int reps_ = 0;                                                  \
        double start_ = now(), best_ = 1e30;                            \
        do {                                                            \
            double t0_ = now();                                         \
            __VA_ARGS__;                                                \
            double t_ = now() - t0_;                                    \
            best_ = t_ < best_ ? t_ : best_;                            \
            reps_++;                                                    \
        } while (reps_ < 5 || now() - start_ < 0.5);                    \
        (secs) = best_;                                                 \
    } while (0)

static tf_gemm_desc gemm_desc(bool ta, bool tb, int m, int n, int k, const float *a,
                              const float *b, float *c, float beta)
{
    tf_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 1.0f,
                      .beta = beta, .a = a, .lda = ta ? m : k, .b = b, .ldb = tb ? k : n,
                      .c = c, .ldc = n, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                      .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_FP32};
    return g;
}

static void bench_gemm(const char *what, bool ta, bool tb, int m, int n, int k)
{
    float *a = buf((size_t)m * k), *b = buf((size_t)k * n), *c = buf((size_t)m * n);
    tf_gemm_desc g = gemm_desc(ta, tb, m, n, k, a, b, c, 0.0f);
    double s;
    TIME(s, ok(vt->gemm(be, NULL, &g, &err)));
    printf("  %-28s %5d x %5d x %5d  %7.3f ms  %6.1f GFLOP/s", what, m, n, k, s * 1e3,
           2.0 * m * n * k / s * 1e-9);
    if (vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_F32)) {
        /* precision bf16: the same GEMM with its inputs rounded to bf16 (the
         * rounding included), oneDNN's matmul */
        double s16;
        g.mode = TF_MATMUL_BF16;
        TIME(s16, ok(vt->gemm(be, NULL, &g, &err)));
        printf("  | bf16 %7.3f ms  %6.1f GFLOP/s  %4.2fx", s16 * 1e3, 2.0 * m * n * k / s16 * 1e-9,
               s / s16);
    }
    printf("\n");
    vt->free(be, a, TF_MEM_DEVICE);
    vt->free(be, b, TF_MEM_DEVICE);
    vt->free(be, c, TF_MEM_DEVICE);
}

typedef struct shape {
    const char *name;
    int layers, hidden, heads, inter;
} shape;

/* One encoder layer: parameters (pointers into the flat buffer), activations
 * ([T, X] = T tokens by X features) and what backward needs. */
typedef struct layer {
    float *wqkv, *bqkv, *wo, *bo, *w1, *b1, *w2, *b2, *g1, *be1, *g2, *be2;
    float *qkv, *ctx, *att, *in1, *h1, *pre, *act, *ffo, *in2, *out;
    float *m1, *r1, *m2, *r2; /* [T] layernorm statistics */
    uint8_t *k1, *k2;         /* [T, H] dropout masks */
    void *save;               /* attention */
} layer;

#define VOCAB 30522
#define MAX_POS 512
#define LABELS 2

/* Parameter count of one layer, in the order layer_params lays them out. */
static size_t layer_size(int H, int I)
{
    return (size_t)3 * H * H + 3 * H + (size_t)H * H + H + (size_t)I * H + I + (size_t)H * I + H +
           4 * (size_t)H;
}

static void layer_params(layer *y, float *p, int H, int I)
{
    y->wqkv = p, p += (size_t)3 * H * H;
    y->bqkv = p, p += 3 * H;
    y->wo = p, p += (size_t)H * H;
    y->bo = p, p += H;
    y->w1 = p, p += (size_t)I * H;
    y->b1 = p, p += I;
    y->w2 = p, p += (size_t)H * I;
    y->b2 = p, p += H;
    y->g1 = p, p += H;
    y->be1 = p, p += H;
    y->g2 = p, p += H;
    y->be2 = p;
}

static tf_gemm_desc linear(const float *x, int64_t ldx, const float *w, const float *bias,
                           float *y, int64_t ldy, int rows, int out, int in)
{
    tf_gemm_desc g = gemm_desc(false, true, rows, out, in, x, w, y, 0.0f);
    g.lda = ldx, g.ldc = ldy;
    g.epilogue = bias ? TF_EPILOGUE_BIAS : TF_EPILOGUE_NONE;
    g.bias = bias;
    return g;
}

/* A whole BertForSequenceClassification training step from the backend's
 * ops, as a model plugin calls them: embeddings (word + position + type,
 * layernorm, dropout), L encoder layers, pooler (tanh), dropout, classifier,
 * cross-entropy, the backward of all of it, AdamW over every parameter. */
static void bench_model(const shape *sh, int batch, int seq)
{
    int T = batch * seq, H = sh->hidden, I = sh->inter, L = sh->layers, A = sh->heads;
    size_t TH = (size_t)T * H;
    tf_attention_desc ad = {batch, seq, A, H / A, 1.0f / sqrtf((float)(H / A)), 0.1f, 1, 0,
                            TF_DTYPE_F32, TF_MATMUL_FP32};
    size_t n_emb = ((size_t)VOCAB + MAX_POS + 2) * H + 2 * (size_t)H, n_layer = layer_size(H, I);
    size_t n_head = (size_t)H * H + H + (size_t)LABELS * H + LABELS;
    size_t np = n_emb + L * n_layer + n_head;
    /* parameters, gradients, moments: one flat buffer each */
    float *params = buf(np), *grads = buf(np), *mom = buf(np), *vel = buf(np);
    memset(mom, 0, np * 4);
    memset(vel, 0, np * 4);
    for (size_t i = 0; i < np; i++) params[i] *= 0.02f;
    float *word = params, *pos = word + (size_t)VOCAB * H, *type = pos + (size_t)MAX_POS * H;
    float *eg = type + 2 * (size_t)H, *eb = eg + H;
    float *gword = grads, *gpos = gword + (size_t)VOCAB * H, *gtype = gpos + (size_t)MAX_POS * H;
    float *geg = gtype + 2 * (size_t)H, *geb = geg + H;
    layer *ly = calloc((size_t)L, sizeof *ly), *gl = calloc((size_t)L, sizeof *gl);
    for (int l = 0; l < L; l++) {
        layer *y = &ly[l];
        layer_params(y, params + n_emb + n_layer * l, H, I);
        layer_params(&gl[l], grads + n_emb + n_layer * l, H, I);
        y->qkv = buf(TH * 3), y->ctx = buf(TH), y->att = buf(TH), y->in1 = buf(TH);
        y->h1 = buf(TH), y->pre = buf((size_t)T * I), y->act = buf((size_t)T * I);
        y->ffo = buf(TH), y->in2 = buf(TH), y->out = buf(TH);
        y->m1 = buf(T), y->r1 = buf(T), y->m2 = buf(T), y->r2 = buf(T);
        y->k1 = malloc(TH), y->k2 = malloc(TH);
        ok(vt->alloc(be, vt->attention_save_bytes(be, &ad), TF_MEM_DEVICE, &y->save, &err));
    }
    float *wp = params + n_emb + L * n_layer, *bp = wp + (size_t)H * H, *wc = bp + H, *bc = wc + LABELS * H;
    float *gwp = grads + n_emb + L * n_layer, *gbp = gwp + (size_t)H * H, *gwc = gbp + H, *gbc = gwc + LABELS * H;
    int32_t *ids = malloc(sizeof(int32_t) * T), *pids = malloc(sizeof(int32_t) * T);
    int32_t *tids = malloc(sizeof(int32_t) * T), *mask = malloc(sizeof(int32_t) * T);
    int32_t *labels = malloc(sizeof(int32_t) * batch);
    for (int i = 0; i < T; i++) {
        int b = i / seq, s = i % seq;
        ids[i] = (int32_t)(1000 + (i * 7919u) % 29000);
        pids[i] = s;
        tids[i] = 0;
        mask[i] = s < seq - 9 * (b % 3);
    }
    for (int b = 0; b < batch; b++) labels[b] = b % 2;
    float *emb = buf(TH), *x0 = buf(TH), *em = buf(T), *er = buf(T);
    uint8_t *ek = malloc(TH), *pk = malloc((size_t)batch * H);
    float *pooled = buf((size_t)batch * H), *pooled_pre = buf((size_t)batch * H);
    float *pooled_d = buf((size_t)batch * H), *logits = buf((size_t)batch * LABELS);
    float *dlogits = buf((size_t)batch * LABELS), *dpool = buf((size_t)batch * H), loss;
    float *dh = buf(TH), *dqkv = buf(TH * 3), *dctx = buf(TH), *dmid = buf(TH);
    float *dbig = buf((size_t)T * I), *din = buf(TH);
    tf_adamw_segment seg = {0, np, 0.01f};
    double s, c0 = cpu_now();
    int64_t step = 0;
    TIME(s, {
        step++;
        ok(vt->memset(be, grads, 0, np * 4, NULL));
        /* embeddings */
        ok(vt->embedding_fwd(be, NULL, ids, T, word, VOCAB, H, emb, false, TF_DTYPE_F32, &err));
        ok(vt->embedding_fwd(be, NULL, pids, T, pos, MAX_POS, H, emb, true, TF_DTYPE_F32, &err));
        ok(vt->embedding_fwd(be, NULL, tids, T, type, 2, H, emb, true, TF_DTYPE_F32, &err));
        ok(vt->layernorm_fwd(be, NULL, emb, NULL, NULL, x0, eg, eb, em, er, T, H, 1e-12f,
                             TF_DTYPE_F32, &err));
        ok(vt->dropout_fwd(be, NULL, x0, x0, ek, TH, 0.1f, 1, (uint64_t)step, TF_DTYPE_F32, &err));
        /* encoder */
        const float *x = x0;
        for (int l = 0; l < L; l++) {
            layer *y = &ly[l];
            tf_gemm_desc g = linear(x, H, y->wqkv, y->bqkv, y->qkv, 3 * H, T, 3 * H, H);
            ok(vt->gemm(be, NULL, &g, &err));
            ad.offset = (uint64_t)step;
            ok(vt->attention_fwd(be, NULL, &ad, y->qkv, mask, y->ctx, y->save, true, &err));
            g = linear(y->ctx, H, y->wo, y->bo, y->att, H, T, H, H);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->dropout_fwd(be, NULL, y->att, y->att, y->k1, TH, 0.1f, 2, (uint64_t)step,
                               TF_DTYPE_F32, &err));
            ok(vt->layernorm_fwd(be, NULL, y->att, x, y->in1, y->h1, y->g1, y->be1, y->m1, y->r1,
                                 T, H, 1e-12f, TF_DTYPE_F32, &err));
            g = linear(y->h1, H, y->w1, y->b1, y->act, I, T, I, H);
            g.epilogue = TF_EPILOGUE_BIAS_GELU, g.aux = y->pre;
            ok(vt->gemm(be, NULL, &g, &err));
            g = linear(y->act, I, y->w2, y->b2, y->ffo, H, T, H, I);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->dropout_fwd(be, NULL, y->ffo, y->ffo, y->k2, TH, 0.1f, 3, (uint64_t)step,
                               TF_DTYPE_F32, &err));
            ok(vt->layernorm_fwd(be, NULL, y->ffo, y->h1, y->in2, y->out, y->g2, y->be2, y->m2,
                                 y->r2, T, H, 1e-12f, TF_DTYPE_F32, &err));
            x = y->out;
        }
        /* pooler on each sequence's first token (rows seq*H apart), classifier, loss */
        tf_gemm_desc g = linear(x, (int64_t)seq * H, wp, bp, pooled_pre, H, batch, H, H);
        ok(vt->gemm(be, NULL, &g, &err));
        ok(vt->tanh_fwd(be, NULL, pooled_pre, pooled, (size_t)batch * H, TF_DTYPE_F32, &err));
        ok(vt->dropout_fwd(be, NULL, pooled, pooled_d, pk, (size_t)batch * H, 0.1f, 4,
                           (uint64_t)step, TF_DTYPE_F32, &err));
        g = linear(pooled_d, H, wc, bc, logits, LABELS, batch, LABELS, H);
        ok(vt->gemm(be, NULL, &g, &err));
        ok(vt->cross_entropy(be, NULL, logits, LABELS, TF_DTYPE_F32, batch, LABELS, labels, -100,
                             &loss, dlogits, 1.0f, &err));
        /* backward: head */
        g = gemm_desc(true, false, LABELS, H, batch, dlogits, pooled_d, gwc, 1);
        ok(vt->gemm(be, NULL, &g, &err));
        ok(vt->sum_rows(be, NULL, dlogits, TF_DTYPE_F32, batch, LABELS, gbc, true, &err));
        g = gemm_desc(false, false, batch, H, LABELS, dlogits, wc, dpool, 0);
        ok(vt->gemm(be, NULL, &g, &err));
        ok(vt->dropout_bwd(be, NULL, dpool, pk, dpool, (size_t)batch * H, 0.1f, TF_DTYPE_F32, &err));
        ok(vt->tanh_bwd(be, NULL, dpool, pooled, dpool, (size_t)batch * H, TF_DTYPE_F32, &err));
        g = gemm_desc(true, false, H, H, batch, dpool, x, gwp, 1);
        g.ldb = (int64_t)seq * H;
        ok(vt->gemm(be, NULL, &g, &err));
        ok(vt->sum_rows(be, NULL, dpool, TF_DTYPE_F32, batch, H, gbp, true, &err));
        ok(vt->memset(be, dh, 0, TH * 4, NULL));
        g = gemm_desc(false, false, batch, H, H, dpool, wp, dh, 0);
        g.ldc = (int64_t)seq * H;
        ok(vt->gemm(be, NULL, &g, &err));
        /* backward: encoder */
        for (int l = L - 1; l >= 0; l--) {
            layer *y = &ly[l], *gy = &gl[l];
            const float *xin = l ? ly[l - 1].out : x0;
            ok(vt->layernorm_bwd(be, NULL, dh, y->in2, y->g2, y->m2, y->r2, dmid, false, gy->g2,
                                 gy->be2, T, H, TF_DTYPE_F32, &err));
            ok(vt->memcpy(be, din, dmid, TH * 4, TF_COPY_DEVICE_TO_DEVICE, NULL)); /* residual */
            ok(vt->dropout_bwd(be, NULL, dmid, y->k2, dmid, TH, 0.1f, TF_DTYPE_F32, &err));
            g = gemm_desc(true, false, H, I, T, dmid, y->act, gy->w2, 1);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->sum_rows(be, NULL, dmid, TF_DTYPE_F32, T, H, gy->b2, true, &err));
            g = gemm_desc(false, false, T, I, H, dmid, y->w2, dbig, 0);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->gelu_bwd(be, NULL, dbig, y->pre, dbig, (size_t)T * I, TF_GELU_ERF,
                            TF_DTYPE_F32, &err));
            g = gemm_desc(true, false, I, H, T, dbig, y->h1, gy->w1, 1);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->sum_rows(be, NULL, dbig, TF_DTYPE_F32, T, I, gy->b1, true, &err));
            g = gemm_desc(false, false, T, H, I, dbig, y->w1, din, 1);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->layernorm_bwd(be, NULL, din, y->in1, y->g1, y->m1, y->r1, dmid, false, gy->g1,
                                 gy->be1, T, H, TF_DTYPE_F32, &err));
            ok(vt->memcpy(be, dh, dmid, TH * 4, TF_COPY_DEVICE_TO_DEVICE, NULL)); /* residual */
            ok(vt->dropout_bwd(be, NULL, dmid, y->k1, dmid, TH, 0.1f, TF_DTYPE_F32, &err));
            g = gemm_desc(true, false, H, H, T, dmid, y->ctx, gy->wo, 1);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->sum_rows(be, NULL, dmid, TF_DTYPE_F32, T, H, gy->bo, true, &err));
            g = gemm_desc(false, false, T, H, H, dmid, y->wo, dctx, 0);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->attention_bwd(be, NULL, &ad, y->qkv, mask, y->ctx, y->save, dctx, dqkv, &err));
            g = gemm_desc(true, false, 3 * H, H, T, dqkv, xin, gy->wqkv, 1);
            ok(vt->gemm(be, NULL, &g, &err));
            ok(vt->sum_rows(be, NULL, dqkv, TF_DTYPE_F32, T, 3 * H, gy->bqkv, true, &err));
            g = gemm_desc(false, false, T, H, 3 * H, dqkv, y->wqkv, dh, 1);
            ok(vt->gemm(be, NULL, &g, &err));
        }
        /* backward: embeddings */
        ok(vt->dropout_bwd(be, NULL, dh, ek, dh, TH, 0.1f, TF_DTYPE_F32, &err));
        ok(vt->layernorm_bwd(be, NULL, dh, emb, eg, em, er, dmid, false, geg, geb, T, H,
                             TF_DTYPE_F32, &err));
        ok(vt->embedding_bwd(be, NULL, ids, T, dmid, TF_DTYPE_F32, gword, VOCAB, H, &err));
        ok(vt->embedding_bwd(be, NULL, pids, T, dmid, TF_DTYPE_F32, gpos, MAX_POS, H, &err));
        ok(vt->embedding_bwd(be, NULL, tids, T, dmid, TF_DTYPE_F32, gtype, 2, H, &err));
        tf_adamw_hyper hy = {1e-5f, 0.9f, 0.999f, 1e-8f, step, 1.0f};
        ok(vt->adamw(be, NULL, params, grads, mom, vel, &seg, 1, &hy, &err));
    });
    double cpu_per_step = (cpu_now() - c0) / (double)step;
    double flops = 6.0 * 12.0 * L * (double)H * H * T + 12.0 * L * (double)seq * H * T;
    printf("  %-10s whole model step (L%d H%d A%d I%d, %.1fM params, %dx%d): %8.1f ms  "
           "%6.1f samples/s  %6.1f GFLOP/s (SPEC's matmul formula); %.1f CPU-ms per step\n",
           sh->name, L, H, A, I, np * 1e-6, batch, seq, s * 1e3, batch / s, flops / s * 1e-9,
           cpu_per_step * 1e3);
}

static void bench_ops(const shape *sh, int batch, int seq)
{
    int T = batch * seq, H = sh->hidden, I = sh->inter, A = sh->heads;
    size_t TH = (size_t)T * H, TI = (size_t)T * I;
    float *x = buf(TI), *y = buf(TI), *z = buf(TI), *g = buf(I), *b = buf(I);
    float *m = buf(T), *r = buf(T), *dg = buf(I), *db = buf(I);
    uint8_t *keep = malloc(TI);
    double s;
    printf("  %s ops, %d tokens:\n", sh->name, T);
#define ROW(what, elems, body)                                                             \
    do {                                                                                   \
        TIME(s, body);                                                                     \
        printf("    %-34s %8.3f ms  %6.2f GB/s-equivalent\n", what, s * 1e3,             \
               (double)(elems) * 4 * 2 / s * 1e-9);                                       \
    } while (0)
    char what[96];
    snprintf(what, sizeof what, "layernorm_fwd+res [%d,%d]", T, H);
    ROW(what, TH, ok(vt->layernorm_fwd(be, NULL, x, y, z, z, g, b, m, r, T, H, 1e-12f,
                                      TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "layernorm_bwd [%d,%d]", T, H);
    ROW(what, TH, ok(vt->layernorm_bwd(be, NULL, x, z, g, m, r, y, false, dg, db, T, H,
                                      TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "gelu_fwd erf [%d,%d]", T, I);
    ROW(what, TI, ok(vt->gelu_fwd(be, NULL, x, y, TI, TF_GELU_ERF, TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "gelu_bwd erf [%d,%d]", T, I);
    ROW(what, TI, ok(vt->gelu_bwd(be, NULL, z, x, y, TI, TF_GELU_ERF, TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "gelu_fwd tanh [%d,%d]", T, I);
    ROW(what, TI, ok(vt->gelu_fwd(be, NULL, x, y, TI, TF_GELU_TANH, TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "dropout_fwd [%d,%d]", T, H);
    ROW(what, TH, ok(vt->dropout_fwd(be, NULL, x, y, keep, TH, 0.1f, 1, 2, TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "dropout_bwd [%d,%d]", T, H);
    ROW(what, TH, ok(vt->dropout_bwd(be, NULL, x, keep, y, TH, 0.1f, TF_DTYPE_F32, &err)));
    snprintf(what, sizeof what, "sum_rows [%d,%d]", T, I);
    ROW(what, TI, ok(vt->sum_rows(be, NULL, x, TF_DTYPE_F32, T, I, dg, true, &err)));
    snprintf(what, sizeof what, "add [%d,%d]", T, H);
    ROW(what, TH, ok(vt->add(be, NULL, x, y, z, TH, TF_DTYPE_F32, &err)));

    tf_attention_desc ad = {batch, seq, A, H / A, 1.0f / sqrtf((float)(H / A)), 0.1f, 1, 0,
                            TF_DTYPE_F32, TF_MATMUL_FP32};
    float *qkv = buf(TH * 3), *out = buf(TH), *dout = buf(TH), *dqkv = buf(TH * 3);
    int32_t *mask = malloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) mask[i] = 1;
    void *save = NULL;
    ok(vt->alloc(be, vt->attention_save_bytes(be, &ad), TF_MEM_DEVICE, &save, &err));
    double aflops = 4.0 * batch * A * (double)seq * seq * (H / A);
    TIME(s, ok(vt->attention_fwd(be, NULL, &ad, qkv, mask, out, save, true, &err)));
    printf("    %-34s %8.3f ms  %6.1f GFLOP/s\n", "attention_fwd (dropout 0.1)", s * 1e3,
           aflops / s * 1e-9);
    TIME(s, ok(vt->attention_bwd(be, NULL, &ad, qkv, mask, out, save, dout, dqkv, &err)));
    printf("    %-34s %8.3f ms  %6.1f GFLOP/s\n", "attention_bwd", s * 1e3, 2 * aflops / s * 1e-9);
    ad.dropout = 0.0f;
    TIME(s, ok(vt->attention_fwd(be, NULL, &ad, qkv, mask, out, NULL, false, &err)));
    printf("    %-34s %8.3f ms  %6.1f GFLOP/s\n", "attention_fwd (eval)", s * 1e3,
           aflops / s * 1e-9);

    int vocab = 30522;
    float *table = buf((size_t)vocab * H), *dtab = buf((size_t)vocab * H);
    int32_t *ids = malloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 7919u) % vocab);
    ROW("embedding_fwd (word)", TH, ok(vt->embedding_fwd(be, NULL, ids, T, table, vocab, H, y,
                                                          false, TF_DTYPE_F32, &err)));
    ROW("embedding_bwd (word)", TH, ok(vt->embedding_bwd(be, NULL, ids, T, x, TF_DTYPE_F32,
                                                          dtab, vocab, H, &err)));
    float loss;
    int32_t *labels = malloc(sizeof(int32_t) * batch);
    for (int i = 0; i < batch; i++) labels[i] = i % 2;
    ROW("cross_entropy [batch, 2]", batch * 2,
        ok(vt->cross_entropy(be, NULL, x, 2, TF_DTYPE_F32, batch, 2, labels, -100, &loss, y,
                             1.0f, &err)));
    size_t np = (size_t)sh->layers * (12 * (size_t)H * H + 13 * (size_t)H) + (size_t)vocab * H;
    float *p = buf(np), *gr = buf(np), *mo = buf(np), *ve = buf(np);
    memset(mo, 0, np * 4), memset(ve, 0, np * 4);
    tf_adamw_segment seg = {0, np, 0.01f};
    tf_adamw_hyper hy = {1e-5f, 0.9f, 0.999f, 1e-8f, 1, 1.0f};
    snprintf(what, sizeof what, "adamw (%.1fM params)", np * 1e-6);
    TIME(s, ok(vt->adamw(be, NULL, p, gr, mo, ve, &seg, 1, &hy, &err)));
    printf("    %-34s %8.3f ms  %6.2f GB/s\n", what, s * 1e3, np * 4.0 * 7 / s * 1e-9);
    TIME(s, ok(vt->sum_squares(be, NULL, gr, np, &loss, &err)));
    printf("    %-34s %8.3f ms  %6.2f GB/s\n", "sum_squares (same)", s * 1e3, np * 4.0 / s * 1e-9);
    int32_t found = 0;
    TIME(s, ok(vt->finite_check(be, NULL, gr, np, TF_DTYPE_F32, &found, &err)));
    printf("    %-34s %8.3f ms  %6.2f GB/s\n", "finite_check (same)", s * 1e3, np * 4.0 / s * 1e-9);
}

int main(int argc, char **argv)
{
    tf_host_blas_reexec(argv); /* OpenBLAS's kernels as tfcore's processes get them */
    int threads = argc > 1 ? atoi(argv[1]) : 0, batch = argc > 2 ? atoi(argv[2]) : 16;
    int seq = argc > 3 ? atoi(argv[3]) : 128;
    vt = tfcore_plugin_entry()->vtable;
    tf_backend_open_args a = {sizeof a, 0, threads, 0, NULL, 1};
    ok(vt->open(&a, &be, &err));
    printf("backend-cpu on %s\n", vt->device_name(be));
    shape shapes[2] = {{"bert-mini", 4, 256, 4, 1024}, {"MiniLM-L6", 6, 384, 12, 1536}};
    int T = batch * seq;
    bool only_model = argc > 4 && strcmp(argv[4], "model") == 0;
    if (only_model) goto model;
    printf("sgemm through the gemm slot (row-major; t = transposed operand):\n");
    bench_gemm("square", false, false, 2048, 2048, 2048);
    for (int i = 0; i < 2; i++) {
        int H = shapes[i].hidden, I = shapes[i].inter;
        printf(" %s, %d tokens:\n", shapes[i].name, T);
        bench_gemm("qkv fwd  x Wt", false, true, T, 3 * H, H);
        bench_gemm("out fwd  x Wt", false, true, T, H, H);
        bench_gemm("ffn1 fwd x Wt", false, true, T, I, H);
        bench_gemm("ffn2 fwd x Wt", false, true, T, H, I);
        bench_gemm("ffn1 dX  dY W", false, false, T, H, I);
        bench_gemm("ffn2 dX  dY W", false, false, T, I, H);
        bench_gemm("qkv dX   dY W", false, false, T, H, 3 * H);
        bench_gemm("ffn1 dW  dYt X", true, false, I, H, T);
        bench_gemm("ffn2 dW  dYt X", true, false, H, I, T);
        bench_gemm("qkv dW   dYt X", true, false, 3 * H, H, T);
    }
    for (int i = 0; i < 2; i++) bench_ops(&shapes[i], batch, seq);
model:
    printf("whole BertForSequenceClassification training steps (dropout 0.1, AdamW):\n");
    for (int i = 0; i < 2; i++) bench_model(&shapes[i], batch, seq);
    return 0;
}
