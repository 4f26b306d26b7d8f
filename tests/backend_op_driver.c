/* backend_op_driver.c — runs one backend-cpu op on inputs read from files and
 * writes its outputs to files, for tests/ref/backend_cpu_vs_torch.py.
 *
 *   backend_op_driver OP DIR [key=value ...]
 *
 * Inputs and outputs are raw little-endian arrays in DIR, named below
 * (f32 unless marked i32); parameters come as key=value arguments.
 *   gemm       m n k ta tb alpha beta epilogue(0,1,2) gelu(0 erf, 1 tanh)
 *              in: a b c bias          out: c_out aux
 *   layernorm  rows cols eps residual(0/1)
 *              in: x res gamma beta dy out: y in mean rstd dx dgamma dbeta
 *   gelu       n kind(0 erf, 1 tanh)   in: x dy      out: y dx
 *   tanh       n                       in: x dy      out: y dx
 *   attention  batch seq heads head_dim scale
 *              in: qkv mask(i32) dout  out: out dqkv
 *   cross_entropy rows classes ignore_index grad_scale [label_smoothing (cross_entropy_ex)]
 *              in: logits labels(i32)  out: loss dlogits
 *   adamw      n steps lr beta1 beta2 eps grad_scale segs=off:count:wd,... [rule=hf (adamw_ex)]
 *              in: p grads [steps, n]  out: p_out m v
 *   adafactor  n steps lr eps clip decay grad_scale
 *              tensors=off:batch:rows:cols:factored(0/1):wd,...  (state packed in that order)
 *              in: p grads [steps, n]  out: p_out state
 *   embedding  rows vocab dim          in: ids(i32) table dout  out: out dtable
 *   sum_rows   rows cols               in: dy        out: db
 * The plugin's sources are compiled in; the vtable comes from
 * tfcore_plugin_entry(). Exit status 0 on success, 1 with a message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_blas.h"
#include "tfcore/backend.h"
#include "tfcore/plugin.h"

const tf_plugin *tfcore_plugin_entry(void);

static const char *dir;
static int nparams;
static char **params;
static const tf_backend_vtable *vt;
static tf_backend *be;
static tf_error err;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "backend_op_driver: %s%s\n", what, detail);
    exit(1);
}

static const char *param(const char *key)
{
    size_t len = strlen(key);
    for (int i = 0; i < nparams; i++)
        if (strncmp(params[i], key, len) == 0 && params[i][len] == '=') return params[i] + len + 1;
    die("missing parameter ", key);
    return NULL;
}
static const char *optional_param(const char *key)
{
    size_t len = strlen(key);
    for (int i = 0; i < nparams; i++)
        if (strncmp(params[i], key, len) == 0 && params[i][len] == '=') return params[i] + len + 1;
    return NULL;
}
static long long iparam(const char *key) { return strtoll(param(key), NULL, 10); }
static double fparam(const char *key) { return strtod(param(key), NULL); }

static void *load(const char *name, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open ", path);
    void *p = malloc(bytes ? bytes : 1);
    if (!p || fread(p, 1, bytes, f) != bytes) die("short read of ", path);
    fclose(f);
    return p;
}

static void save(const char *name, const void *p, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) die("cannot write ", path);
}

static void check(tf_status st)
{
    if (st != TF_OK) die("", err.msg);
}

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void run_gemm(void)
{
    int m = (int)iparam("m"), n = (int)iparam("n"), k = (int)iparam("k");
    bool ta = iparam("ta"), tb = iparam("tb");
    size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    float *a = load("a", mk * 4), *b = load("b", kn * 4), *c = load("c", mn * 4);
    float *bias = load("bias", (size_t)n * 4), *aux = zeros(mn);
    tf_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                      .alpha = (float)fparam("alpha"), .beta = (float)fparam("beta"), .a = a,
                      .lda = ta ? m : k, .b = b, .ldb = tb ? k : n, .c = c, .ldc = n, .batch = 1,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_FP32,
                      .epilogue = (tf_gemm_epilogue)iparam("epilogue"), .bias = bias, .aux = aux,
                      .gelu = (tf_gelu_kind)iparam("gelu")};
    check(vt->gemm(be, NULL, &g, &err));
    save("c_out", c, mn * 4);
    save("aux", aux, mn * 4);
}

static void run_layernorm(void)
{
    int rows = (int)iparam("rows"), cols = (int)iparam("cols");
    size_t n = (size_t)rows * cols;
    bool with_res = iparam("residual");
    float *x = load("x", n * 4), *res = with_res ? load("res", n * 4) : NULL;
    float *gamma = load("gamma", (size_t)cols * 4), *beta = load("beta", (size_t)cols * 4);
    float *dy = load("dy", n * 4), *in = zeros(n), *y = zeros(n), *dx = zeros(n);
    float *mean = zeros(rows), *rstd = zeros(rows), *dg = zeros(cols), *db = zeros(cols);
    check(vt->layernorm_fwd(be, NULL, x, res, in, y, gamma, beta, mean, rstd, rows, cols,
                            (float)fparam("eps"), TF_DTYPE_F32, &err));
    check(vt->layernorm_bwd(be, NULL, dy, in, gamma, mean, rstd, dx, false, dg, db, rows, cols,
                            TF_DTYPE_F32, &err));
    save("y", y, n * 4);
    save("in", in, n * 4);
    save("mean", mean, (size_t)rows * 4);
    save("rstd", rstd, (size_t)rows * 4);
    save("dx", dx, n * 4);
    save("dgamma", dg, (size_t)cols * 4);
    save("dbeta", db, (size_t)cols * 4);
}

static void run_unary(bool gelu)
{
    size_t n = (size_t)iparam("n");
    float *x = load("x", n * 4), *dy = load("dy", n * 4), *y = zeros(n), *dx = zeros(n);
    if (gelu) {
        tf_gelu_kind kind = (tf_gelu_kind)iparam("kind");
        check(vt->gelu_fwd(be, NULL, x, y, n, kind, TF_DTYPE_F32, &err));
        check(vt->gelu_bwd(be, NULL, dy, x, dx, n, kind, TF_DTYPE_F32, &err));
    } else {
        check(vt->tanh_fwd(be, NULL, x, y, n, TF_DTYPE_F32, &err));
        check(vt->tanh_bwd(be, NULL, dy, y, dx, n, TF_DTYPE_F32, &err));
    }
    save("y", y, n * 4);
    save("dx", dx, n * 4);
}

static void run_attention(void)
{
    tf_attention_desc d = {(int)iparam("batch"), (int)iparam("seq"), (int)iparam("heads"),
                           (int)iparam("head_dim"), (float)fparam("scale"), 0.0f, 0, 0,
                           TF_DTYPE_F32, TF_MATMUL_FP32};
    size_t H = (size_t)d.heads * d.head_dim, rows = (size_t)d.batch * d.seq;
    float *qkv = load("qkv", rows * 3 * H * 4), *dout = load("dout", rows * H * 4);
    int32_t *mask = load("mask", rows * 4);
    float *out = zeros(rows * H), *dqkv = zeros(rows * 3 * H);
    void *sv = NULL;
    check(vt->alloc(be, vt->attention_save_bytes(be, &d), TF_MEM_DEVICE, &sv, &err));
    check(vt->attention_fwd(be, NULL, &d, qkv, mask, out, sv, true, &err));
    check(vt->attention_bwd(be, NULL, &d, qkv, mask, out, sv, dout, dqkv, &err));
    vt->free(be, sv, TF_MEM_DEVICE);
    save("out", out, rows * H * 4);
    save("dqkv", dqkv, rows * 3 * H * 4);
}

static void run_cross_entropy(void)
{
    int rows = (int)iparam("rows"), classes = (int)iparam("classes");
    size_t n = (size_t)rows * classes;
    float *logits = load("logits", n * 4), *dl = zeros(n), loss = 0;
    int32_t *labels = load("labels", (size_t)rows * 4);
    const char *eps = optional_param("label_smoothing");
    if (eps) {
        tf_cross_entropy_desc d = {sizeof d, logits, classes, TF_DTYPE_F32, rows, classes, labels,
                                   (int)iparam("ignore_index"), strtof(eps, NULL), &loss, dl,
                                   (float)fparam("grad_scale")};
        if (!TF_HAS(vt, cross_entropy_ex)) die("the backend has no cross_entropy_ex", "");
        check(vt->cross_entropy_ex(be, NULL, &d, &err));
    } else {
        check(vt->cross_entropy(be, NULL, logits, classes, TF_DTYPE_F32, rows, classes, labels,
                                (int)iparam("ignore_index"), &loss, dl,
                                (float)fparam("grad_scale"), &err));
    }
    save("loss", &loss, 4);
    save("dlogits", dl, n * 4);
}

static void run_adamw(void)
{
    size_t n = (size_t)iparam("n");
    int steps = (int)iparam("steps");
    float *p = load("p", n * 4), *grads = load("grads", n * steps * 4), *m = zeros(n), *v = zeros(n);
    tf_adamw_segment segs[64];
    size_t nsegs = 0;
    const char *s = param("segs");
    while (*s && nsegs < 64) {
        char *end;
        segs[nsegs].offset = strtoull(s, &end, 10);
        segs[nsegs].count = strtoull(end + 1, &end, 10);
        segs[nsegs].weight_decay = strtof(end + 1, &end);
        nsegs++;
        s = *end == ',' ? end + 1 : end;
    }
    for (int t = 1; t <= steps; t++) {
        tf_adamw_hyper h = {(float)fparam("lr"), (float)fparam("beta1"), (float)fparam("beta2"),
                            (float)fparam("eps"), t, (float)fparam("grad_scale")};
        const char *rule = optional_param("rule");
        if (rule && strcmp(rule, "hf") == 0) {
            tf_adamw_desc d = {sizeof d, h, TF_ADAMW_HF};
            if (!TF_HAS(vt, adamw_ex)) die("the backend has no adamw_ex", "");
            check(vt->adamw_ex(be, NULL, p, grads + (size_t)(t - 1) * n, m, v, segs, nsegs, &d,
                               &err));
        } else {
            check(vt->adamw(be, NULL, p, grads + (size_t)(t - 1) * n, m, v, segs, nsegs, &h,
                            &err));
        }
    }
    save("p_out", p, n * 4);
    save("m", m, n * 4);
    save("v", v, n * 4);
}

static void run_adafactor(void)
{
    size_t n = (size_t)iparam("n");
    int steps = (int)iparam("steps");
    tf_adafactor_tensor ts[64];
    size_t nt = 0, ns = 0;
    const char *s = param("tensors");
    while (*s && nt < 64) {
        char *end;
        tf_adafactor_tensor *t = &ts[nt++];
        t->offset = strtoull(s, &end, 10);
        t->batch = strtoll(end + 1, &end, 10);
        t->rows = strtoll(end + 1, &end, 10);
        t->cols = strtoll(end + 1, &end, 10);
        t->factored = strtol(end + 1, &end, 10) != 0;
        t->weight_decay = strtof(end + 1, &end);
        t->state_offset = ns;
        ns += tf_adafactor_state_count(t);
        s = *end == ',' ? end + 1 : end;
    }
    if (!TF_HAS(vt, adafactor)) die("the backend has no adafactor", "");
    size_t wsb = tf_adafactor_workspace_bytes(ts, nt);
    float *p = load("p", n * 4), *grads = load("grads", n * steps * 4), *state = zeros(ns);
    float *ws = zeros(wsb / 4 + 1);
    for (int t = 1; t <= steps; t++) {
        tf_adafactor_desc d = {sizeof d, fparam("lr"), (float)fparam("eps"), (float)fparam("clip"),
                               (float)fparam("decay"), (float)fparam("grad_scale"), t, ts, nt, ws, wsb};
        check(vt->adafactor(be, NULL, p, grads + (size_t)(t - 1) * n, state, &d, &err));
    }
    save("p_out", p, n * 4);
    save("state", state, ns * 4);
}

static void run_embedding(void)
{
    int rows = (int)iparam("rows"), vocab = (int)iparam("vocab"), dim = (int)iparam("dim");
    int32_t *ids = load("ids", (size_t)rows * 4);
    float *table = load("table", (size_t)vocab * dim * 4), *dout = load("dout", (size_t)rows * dim * 4);
    float *out = zeros((size_t)rows * dim), *dt = zeros((size_t)vocab * dim);
    check(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, false, TF_DTYPE_F32, &err));
    check(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, vocab, dim, &err));
    save("out", out, (size_t)rows * dim * 4);
    save("dtable", dt, (size_t)vocab * dim * 4);
}

static void run_sum_rows(void)
{
    int rows = (int)iparam("rows"), cols = (int)iparam("cols");
    float *dy = load("dy", (size_t)rows * cols * 4), *db = zeros(cols);
    check(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, rows, cols, db, false, &err));
    save("db", db, (size_t)cols * 4);
}

int main(int argc, char **argv)
{
    tf_host_blas_reexec(argv); /* OpenBLAS's kernels as tfcore's own processes get them */
    if (argc < 3) {
        fprintf(stderr, "usage: backend_op_driver OP DIR [key=value ...]\n");
        return 1;
    }
    dir = argv[2];
    params = argv + 3;
    nparams = argc - 3;
    vt = tfcore_plugin_entry()->vtable;
    tf_backend_open_args a = {sizeof a, 0, 0, 0, NULL, 1};
    check(vt->open(&a, &be, &err));
    const char *op = argv[1];
    if (!strcmp(op, "gemm")) run_gemm();
    else if (!strcmp(op, "layernorm")) run_layernorm();
    else if (!strcmp(op, "gelu")) run_unary(true);
    else if (!strcmp(op, "tanh")) run_unary(false);
    else if (!strcmp(op, "attention")) run_attention();
    else if (!strcmp(op, "cross_entropy")) run_cross_entropy();
    else if (!strcmp(op, "adamw")) run_adamw();
    else if (!strcmp(op, "adafactor")) run_adafactor();
    else if (!strcmp(op, "embedding")) run_embedding();
    else if (!strcmp(op, "sum_rows")) run_sum_rows();
    else die("unknown op ", op);
    vt->close(be);
    return 0;
}
