/* test_model_bert.c — tfcore-model-bert through its vtable (loaded from the
 * build tree by the core's registry, with backend-cpu for everything past
 * check_config): the config keys and presets, every configuration and
 * checkpoint error (each one line naming the key, tensor or file), checkpoint
 * variants transformers accepts (no "bert." prefix, legacy LayerNorm names,
 * F16/BF16, missing head), the parameter layout and views, initialisation,
 * forward/backward contracts (gradient accumulation, loss scale, grads_ready
 * order, bad batches), and save -> load round trips. Numerical agreement with
 * transformers is the job of tests/ref/model_bert_vs_hf.py. Checkpoints are
 * written here, into a temporary folder, with libtfcore's safetensors writer. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "tfcore/tfcore.h"
#include "tfcore/safetensors.h"

static tf_registry *reg; /* holds both plugins open */
static const tf_model_vtable *mv;
static const tf_backend_vtable *bk; /* NULL when backend-cpu is not built */
static char workdir[512];

/* ---- helpers ----------------------------------------------------------------- */

static tf_config *cfg_of(const char *text)
{
    tf_config *cfg = NULL;
    tf_error err = {0};
    ck_assert_msg(tf_config_load_string(&cfg, text, "test.cfg", NULL, &err) == TF_OK, "%s",
                  err.msg);
    return cfg;
}

/* check_config on `text`; returns the status, message in err. */
static tf_status check_text(const char *text, tf_error *err)
{
    tf_config *cfg = cfg_of(text);
    tf_error_clear(err);
    tf_status st = mv->check_config(tf_config_section(cfg, "model"), err);
    tf_config_free(cfg);
    return st;
}

static void expect_config_error(const char *text, tf_status code, const char *frag1,
                                const char *frag2)
{
    tf_error err = {0};
    tf_status st = check_text(text, &err);
    ck_assert_msg(st == code, "config <%s>: status %d, want %d (%s)", text, st, code, err.msg);
    ck_assert_msg(strstr(err.msg, frag1), "message '%s' lacks '%s'", err.msg, frag1);
    if (frag2) ck_assert_msg(strstr(err.msg, frag2), "message '%s' lacks '%s'", err.msg, frag2);
    ck_assert_msg(!strchr(err.msg, '\n'), "message has several lines: %s", err.msg);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    static char bufs[8][4096];
    static int at;
    char *b = bufs[at++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, 4096, f, ap);
    va_end(ap);
    return b;
}

/* Strings that must outlive fmt's rotating buffers; freed after each test. */
static char *kept[64];
static int nkept;
static const char *keep(const char *s)
{
    char *d = strdup(s);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_lt(nkept, 64);
    kept[nkept++] = d;
    return d;
}
static void free_kept(void)
{
    while (nkept > 0) free(kept[--nkept]);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* A fresh folder under the work dir (the name stays valid: fmt's buffers rotate). */
static const char *fresh_dir(const char *name)
{
    const char *d = keep(fmt("%s/%s", workdir, name));
    nftw(d, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    ck_assert_int_eq(mkdir(d, 0777), 0);
    return d;
}

/* ---- a tiny checkpoint written here -------------------------------------- */

/* vocab 11, hidden 4, 1 layer, 2 heads, intermediate 8, 8 positions, 2 types */
enum { V = 11, H = 4, NH = 2, I = 8, P = 8, T = 2 };

typedef struct ckpt_opts {
    bool no_prefix;       /* bare BertModel names */
    bool legacy;          /* LayerNorm.gamma / .beta */
    tf_dtype dtype;       /* F32, F16, BF16 or another (for the error) */
    const char *skip;     /* a tensor left out (canonical name) */
    bool no_head;         /* classifier and pooler left out */
    const char *bad_shape; /* this tensor gets one extra row */
    bool extra;           /* an unknown tensor and cls.* */
    bool dup;             /* embeddings.LayerNorm.weight with and without prefix */
    bool qa;              /* qa_outputs instead of pooler + classifier */
    int labels;           /* classifier rows (2 when 0) */
} ckpt_opts;

typedef struct tensor_spec {
    const char *name; /* canonical, without "bert." */
    int ndim;
    int64_t d0, d1;
} tensor_spec;

static int specs_of(const ckpt_opts *o, tensor_spec *s)
{
    int n = 0;
    int labels = o->labels ? o->labels : 2;
#define SPEC(nm, nd, a, b) s[n++] = (tensor_spec){nm, nd, a, b}
    SPEC("embeddings.word_embeddings.weight", 2, V, H);
    SPEC("embeddings.position_embeddings.weight", 2, P, H);
    SPEC("embeddings.token_type_embeddings.weight", 2, T, H);
    SPEC("embeddings.LayerNorm.weight", 1, H, 0);
    SPEC("embeddings.LayerNorm.bias", 1, H, 0);
    SPEC("encoder.layer.0.attention.self.query.weight", 2, H, H);
    SPEC("encoder.layer.0.attention.self.query.bias", 1, H, 0);
    SPEC("encoder.layer.0.attention.self.key.weight", 2, H, H);
    SPEC("encoder.layer.0.attention.self.key.bias", 1, H, 0);
    SPEC("encoder.layer.0.attention.self.value.weight", 2, H, H);
    SPEC("encoder.layer.0.attention.self.value.bias", 1, H, 0);
    SPEC("encoder.layer.0.attention.output.dense.weight", 2, H, H);
    SPEC("encoder.layer.0.attention.output.dense.bias", 1, H, 0);
    SPEC("encoder.layer.0.attention.output.LayerNorm.weight", 1, H, 0);
    SPEC("encoder.layer.0.attention.output.LayerNorm.bias", 1, H, 0);
    SPEC("encoder.layer.0.intermediate.dense.weight", 2, I, H);
    SPEC("encoder.layer.0.intermediate.dense.bias", 1, I, 0);
    SPEC("encoder.layer.0.output.dense.weight", 2, H, I);
    SPEC("encoder.layer.0.output.dense.bias", 1, H, 0);
    SPEC("encoder.layer.0.output.LayerNorm.weight", 1, H, 0);
    SPEC("encoder.layer.0.output.LayerNorm.bias", 1, H, 0);
    if (!o->no_head) {
        if (o->qa) {
            SPEC("qa_outputs.weight", 2, 2, H);
            SPEC("qa_outputs.bias", 1, 2, 0);
        } else {
            SPEC("pooler.dense.weight", 2, H, H);
            SPEC("pooler.dense.bias", 1, H, 0);
            SPEC("classifier.weight", 2, labels, H);
            SPEC("classifier.bias", 1, labels, 0);
        }
    }
#undef SPEC
    return n;
}

/* The value the checkpoint holds for element i of tensor k (exact in bf16). */
static float ckpt_value(int k, size_t i)
{
    return (float)((int)((i * 7 + (size_t)k * 13) % 29) - 14) / 64.0f;
}

/* DIR/config.json of the tiny model; `extra` (", \"key\": value, ...") adds
 * keys or replaces the base's. */
static void write_config_json(const char *dir, const char *extra)
{
    static const char *const base[][2] = {
        {"vocab_size", "11"},          {"hidden_size", "4"},
        {"num_hidden_layers", "1"},    {"num_attention_heads", "2"},
        {"intermediate_size", "8"},    {"max_position_embeddings", "8"},
        {"type_vocab_size", "2"},
    };
    char text[4096] = "{\"_name_or_path\": \"tiny\"";
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        if (!extra || !strstr(extra, fmt("\"%s\"", base[i][0])))
            snprintf(text + strlen(text), sizeof text - strlen(text), ",\n \"%s\": %s",
                     base[i][0], base[i][1]);
    snprintf(text + strlen(text), sizeof text - strlen(text), "%s}\n", extra ? extra : "");
    write_text(fmt("%s/config.json", dir), text);
}

/* Write DIR/config.json and DIR/model.safetensors. */
static void write_checkpoint(const char *dir, const ckpt_opts *o, const char *config_extra)
{
    write_config_json(dir, config_extra);
    tensor_spec spec[40];
    int n = specs_of(o, spec);
    tf_st_tensor t[48];
    int64_t shapes[48][2];
    void *data[48];
    char names[48][128];
    int m = 0;
    tf_dtype dt = o->dtype;
    for (int k = 0; k < n; k++) {
        if (o->skip && strcmp(o->skip, spec[k].name) == 0) continue;
        const char *nm = spec[k].name;
        bool head = strncmp(nm, "classifier", 10) == 0 || strncmp(nm, "qa_outputs", 10) == 0;
        snprintf(names[m], sizeof names[m], "%s%s", o->no_prefix || head ? "" : "bert.", nm);
        if (o->legacy) {
            char *ln = strstr(names[m], "LayerNorm.");
            if (ln) strcpy(ln + 10, strcmp(ln + 10, "weight") == 0 ? "gamma" : "beta");
        }
        shapes[m][0] = spec[k].d0;
        shapes[m][1] = spec[k].d1;
        if (o->bad_shape && strcmp(o->bad_shape, nm) == 0) shapes[m][0] += 1;
        size_t numel = (size_t)shapes[m][0] * (size_t)(spec[k].ndim > 1 ? shapes[m][1] : 1);
        size_t es = tf_dtype_size(dt);
        unsigned char *buf = calloc(numel ? numel : 1, es);
        for (size_t i = 0; i < numel; i++) {
            float v = ckpt_value(k, i);
            if (dt == TF_DTYPE_F32) memcpy(buf + 4 * i, &v, 4);
            else if (dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16) {
                unsigned short h = dt == TF_DTYPE_F16 ? tf_f32_to_f16(v) : tf_f32_to_bf16(v);
                memcpy(buf + 2 * i, &h, 2);
            } else if (dt == TF_DTYPE_I64) {
                int64_t x = (int64_t)(v * 64);
                memcpy(buf + 8 * i, &x, 8);
            }
        }
        data[m] = buf;
        t[m] = (tf_st_tensor){.name = names[m], .dtype = dt, .ndim = spec[k].ndim,
                              .data = buf, .numel = numel, .nbytes = numel * es};
        m++;
    }
    if (o->extra) {
        static const float z[4] = {0};
        static int64_t s4[1] = {4};
        t[m++] = (tf_st_tensor){.name = "bert.encoder.layer.0.attention.self.rotary.weight",
                                .dtype = TF_DTYPE_F32, .ndim = 1, .shape = s4, .data = z,
                                .numel = 4, .nbytes = 16};
        t[m++] = (tf_st_tensor){.name = "cls.predictions.bias", .dtype = TF_DTYPE_F32,
                                .ndim = 1, .shape = s4, .data = z, .numel = 4, .nbytes = 16};
    }
    if (o->dup) {
        static const float one[H] = {1, 1, 1, 1};
        static int64_t sh[1] = {H};
        t[m++] = (tf_st_tensor){.name = "embeddings.LayerNorm.weight", .dtype = TF_DTYPE_F32,
                                .ndim = 1, .shape = sh, .data = one, .numel = H, .nbytes = 16};
    }
    for (int k = 0; k < m; k++)
        if (!t[k].shape) t[k].shape = shapes[k];
    const tf_st_kv meta[] = {{"format", "pt"}};
    tf_error err = {0};
    ck_assert_msg(tf_safetensors_write(fmt("%s/model.safetensors", dir), t, (size_t)m, meta, 1,
                                       &err) == TF_OK,
                  "%s", err.msg);
    int nd = m - (o->extra ? 2 : 0) - (o->dup ? 1 : 0);
    for (int k = 0; k < nd; k++) free(data[k]);
}

/* ---- a model on backend-cpu ---------------------------------------------- */

typedef struct fixture {
    tf_config *cfg;
    tf_backend *be;
    tf_model *m;
} fixture;

static tf_status create_model_defer(const char *text, int rows, int seq, uint64_t seed,
                                    bool defer_loss, fixture *f, tf_error *err);

static tf_status create_model(const char *text, int rows, int seq, uint64_t seed, fixture *f,
                              tf_error *err)
{
    return create_model_defer(text, rows, seq, seed, false, f, err);
}

static tf_status create_model_defer(const char *text, int rows, int seq, uint64_t seed,
                                    bool defer_loss, fixture *f, tf_error *err)
{
    memset(f, 0, sizeof *f);
    f->cfg = cfg_of(text);
    tf_backend_open_args oa = {.size = sizeof oa, .seed = 1, .threads = 1,
                               .section = tf_config_section(f->cfg, "backend")};
    ck_assert_msg(bk->open(&oa, &f->be, err) == TF_OK, "%s", err->msg);
    tf_model_create_args ca = {.size = sizeof ca, .section = tf_config_section(f->cfg, "model"),
                               .backend = bk, .be = f->be, .compute_dtype = TF_DTYPE_F32,
                               .matmul_mode = TF_MATMUL_FP32, .seed = seed, .max_rows = rows,
                               .max_seq = seq, .defer_loss = defer_loss};
    return mv->create(&ca, &f->m, err);
}

/* As create_model, with training.gradient_checkpointing (ABI 1.3). */
static tf_status create_model_ckpt(const char *text, int rows, int seq, uint64_t seed, bool ckpt, fixture *f,
                                   tf_error *err)
{
    memset(f, 0, sizeof *f);
    f->cfg = cfg_of(text);
    tf_backend_open_args oa = {.size = sizeof oa, .seed = 1, .threads = 1,
                               .section = tf_config_section(f->cfg, "backend")};
    ck_assert_msg(bk->open(&oa, &f->be, err) == TF_OK, "%s", err->msg);
    tf_model_create_args ca = {.size = sizeof ca, .section = tf_config_section(f->cfg, "model"),
                               .backend = bk, .be = f->be, .compute_dtype = TF_DTYPE_F32,
                               .matmul_mode = TF_MATMUL_FP32, .seed = seed, .max_rows = rows,
                               .max_seq = seq, .gradient_checkpointing = ckpt};
    return mv->create(&ca, &f->m, err);
}

static void fixture_free(fixture *f)
{
    if (f->m) mv->destroy(f->m);
    if (f->be) bk->close(f->be);
    tf_config_free(f->cfg);
    memset(f, 0, sizeof *f);
}

static void create_ok(const char *text, int rows, int seq, uint64_t seed, fixture *f)
{
    tf_error err = {0};
    tf_status st = create_model(text, rows, seq, seed, f, &err);
    ck_assert_msg(st == TF_OK, "create <%s>: %s", text, err.msg);
}

static void expect_create_error(const char *text, tf_status code, const char *frag1,
                                const char *frag2, const char *frag3)
{
    fixture f;
    tf_error err = {0};
    tf_status st = create_model(text, 2, 8, 1, &f, &err);
    ck_assert_msg(st == code, "create <%s>: status %d, want %d (%s)", text, st, code, err.msg);
    ck_assert_ptr_null(f.m);
    ck_assert_msg(strstr(err.msg, frag1), "message '%s' lacks '%s'", err.msg, frag1);
    if (frag2) ck_assert_msg(strstr(err.msg, frag2), "message '%s' lacks '%s'", err.msg, frag2);
    if (frag3) ck_assert_msg(strstr(err.msg, frag3), "message '%s' lacks '%s'", err.msg, frag3);
    ck_assert_msg(!strchr(err.msg, '\n'), "message has several lines: %s", err.msg);
    fixture_free(&f);
}

/* Host copy of the parameter buffer. */
static float *host_params(fixture *f, size_t *n)
{
    tf_model_buffers b;
    mv->buffers(f->m, &b);
    float *h = malloc(b.n * sizeof *h);
    tf_error err = {0};
    ck_assert_int_eq(bk->memcpy(f->be, h, b.params, b.n * sizeof *h, TF_COPY_DEVICE_TO_HOST, NULL),
                     TF_OK);
    ck_assert_int_eq(bk->stream_sync(f->be, NULL, &err), TF_OK);
    *n = b.n;
    return h;
}

static float *host_grads(fixture *f)
{
    tf_model_buffers b;
    mv->buffers(f->m, &b);
    float *h = malloc(b.n * sizeof *h);
    tf_error err = {0};
    ck_assert_int_eq(bk->memcpy(f->be, h, b.grads, b.n * sizeof *h, TF_COPY_DEVICE_TO_HOST, NULL),
                     TF_OK);
    ck_assert_int_eq(bk->stream_sync(f->be, NULL, &err), TF_OK);
    return h;
}

static const tf_param_info *find_param(fixture *f, const char *name)
{
    const tf_param_info *p;
    size_t n;
    mv->params(f->m, &p, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0) return &p[i];
    return NULL;
}

/* Run `fn` with stderr going to a file; returns what it wrote (static). */
static const char *capture_stderr(void (*fn)(void *), void *arg)
{
    static char buf[16384];
    fflush(stderr);
    char path[600];
    snprintf(path, sizeof path, "%s/stderr.txt", workdir);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t r = read(fd, buf, sizeof buf - 1);
    buf[r > 0 ? r : 0] = '\0';
    close(fd);
    return buf;
}

/* ---- a batch in backend memory (backend-cpu: host memory) ------------------ */

typedef struct test_batch {
    tf_batch b;
    int32_t ids[64], types[64], mask[64], labels[8], start[8], end[8];
} test_batch;

static void make_batch(test_batch *t, int rows, int seq, bool labels)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < rows * seq; i++) {
        t->ids[i] = 1 + (i * 5) % (V - 1);
        t->types[i] = (i % seq) >= seq / 2;
        t->mask[i] = (i % seq) < seq - (i / seq); /* row r has r padding tokens */
    }
    for (int r = 0; r < rows; r++) {
        t->labels[r] = r % 2;
        t->start[r] = r;
        t->end[r] = r + 1;
    }
    t->b = (tf_batch){.rows = rows, .seq = seq, .capacity_rows = rows, .capacity_seq = seq,
                      .input_ids = t->ids, .token_type_ids = t->types,
                      .attention_mask = t->mask, .labels = labels ? t->labels : NULL};
}

/* ---- config tests ------------------------------------------------------------ */

START_TEST(config_presets)
{
    static const char *const names[] = {"bert-tiny", "bert-mini", "bert-small", "bert-medium",
                                        "bert-base", "bert-large"};
    for (int i = 0; i < 6; i++) {
        tf_error err = {0};
        ck_assert_msg(check_text(fmt("model = { preset = \"%s\"; };", names[i]), &err) == TF_OK,
                      "%s: %s", names[i], err.msg);
    }
    tf_error err = {0};
    ck_assert_int_eq(check_text("model = { preset = \"bert-tiny\"; task = \"question-answering\";"
                                " hidden_act = \"gelu_new\"; vocab_size = 100; hidden_size = 64;"
                                " num_hidden_layers = 3; num_attention_heads = 4;"
                                " intermediate_size = 96; max_position_embeddings = 128;"
                                " type_vocab_size = 3; layer_norm_eps = 1e-7;"
                                " hidden_dropout_prob = 0.2; attention_probs_dropout_prob = 0;"
                                " classifier_dropout = 0.3; initializer_range = 0.05;"
                                " pad_token_id = 5; };",
                                &err),
                     TF_OK);
}
END_TEST

/* Every key check_config knows is read: tf_config_check_unread passes with
 * all of them set, and a misspelt one is reported with a suggestion. */
START_TEST(config_reads_every_key)
{
    const char *all = "model = { preset = \"bert-tiny\"; task = \"classification\";"
                      " num_labels = 3; hidden_act = \"gelu\"; vocab_size = 100;"
                      " hidden_size = 64; num_hidden_layers = 3; num_attention_heads = 4;"
                      " intermediate_size = 96; max_position_embeddings = 128;"
                      " type_vocab_size = 3; layer_norm_eps = 1e-7; hidden_dropout_prob = 0.2;"
                      " attention_probs_dropout_prob = 0; classifier_dropout = 0.3;"
                      " initializer_range = 0.05; pad_token_id = 5; };";
    tf_config *cfg = cfg_of(all);
    tf_error err = {0};
    ck_assert_msg(mv->check_config(tf_config_section(cfg, "model"), &err) == TF_OK, "%s", err.msg);
    ck_assert_msg(tf_config_check_unread(cfg, &err) == TF_OK, "%s", err.msg);
    tf_config_free(cfg);

    cfg = cfg_of("model = { preset = \"bert-tiny\"; hiden_size = 64; };");
    ck_assert_int_eq(mv->check_config(tf_config_section(cfg, "model"), &err), TF_OK);
    ck_assert_int_eq(tf_config_check_unread(cfg, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "hidden_size"), "%s", err.msg);
    tf_config_free(cfg);
}
END_TEST

START_TEST(config_errors)
{
    expect_config_error("model = { preset = \"bert-tinny\"; };", TF_ERR_CONFIG, "test.cfg:1",
                        "did you mean 'bert-tiny'");
    expect_config_error("model = { preset = \"bert-tiny\"; pretrained = \"/tmp\"; };",
                        TF_ERR_CONFIG, "exclusive", "test.cfg:1");
    expect_config_error("model = { task = \"classification\"; };", TF_ERR_CONFIG,
                        "needs 'pretrained'", "'preset'");
    expect_config_error("model = { preset = \"bert-tiny\"; num_attention_heads = 3; };",
                        TF_ERR_CONFIG, "hidden_size 128 is not a multiple of num_attention_heads 3",
                        "test.cfg:1");
    expect_config_error("model = { preset = \"bert-tiny\"; hidden_size = 101; };", TF_ERR_CONFIG,
                        "hidden_size 101 is not a multiple", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; hidden_act = \"relu\"; };",
                        TF_ERR_CONFIG, "gelu, gelu_new", "relu");
    expect_config_error("model = { preset = \"bert-tiny\"; task = \"ner\"; };", TF_ERR_CONFIG,
                        "classification, question-answering", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; num_labels = 1; };", TF_ERR_CONFIG,
                        "regression", "test.cfg:1");
    expect_config_error("model = { preset = \"bert-tiny\"; num_labels = 0; };", TF_ERR_CONFIG,
                        "num_labels", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; task = \"question-answering\";"
                        " num_labels = 3; };",
                        TF_ERR_CONFIG, "exactly 2", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; hidden_dropout_prob = 1.0; };",
                        TF_ERR_CONFIG, "hidden_dropout_prob must be below 1", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; attention_probs_dropout_prob = -0.1; };",
                        TF_ERR_CONFIG, "attention_probs_dropout_prob", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; hidden_size = \"big\"; };",
                        TF_ERR_CONFIG, "hidden_size", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; num_hidden_layers = 0; };",
                        TF_ERR_CONFIG, "num_hidden_layers", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; layer_norm_eps = 0.0; };",
                        TF_ERR_CONFIG, "layer_norm_eps", NULL);
    expect_config_error("model = { preset = \"bert-tiny\"; vocab_size = 10; pad_token_id = 10; };",
                        TF_ERR_CONFIG, "pad_token_id 10 is outside the vocabulary", NULL);
    expect_config_error("model = { pretrained = \"\"; };", TF_ERR_CONFIG, "empty", NULL);
    char longpath[5000];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = '\0';
    expect_config_error(fmt("model = { pretrained = \"/%.4064s\"; };", longpath), TF_ERR_CONFIG,
                        "model.pretrained is too long", NULL);
}
END_TEST

START_TEST(config_pretrained_errors)
{
    const char *d = fresh_dir("cfgerr");
    expect_config_error(fmt("model = { pretrained = \"%s/nope\"; };", d), TF_ERR_CONFIG,
                        fmt("%s/nope", d), "No such file");
    write_text(fmt("%s/file", d), "x");
    expect_config_error(fmt("model = { pretrained = \"%s/file\"; };", d), TF_ERR_CONFIG,
                        "is not a folder", NULL);
    /* a folder without config.json */
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        fmt("%s/config.json", d), NULL);
    /* malformed JSON: file:line:column */
    write_text(fmt("%s/config.json", d), "{\"hidden_size\": 4,\n \"vocab_size\": }\n");
    expect_config_error(fmt("model = { pretrained = \"%s/\"; };", d), TF_ERR_DATA,
                        fmt("%s/config.json:2:", d), NULL);
    write_text(fmt("%s/config.json", d), "[1, 2]");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "expected a JSON object", NULL);
    write_config_json(d, ", \"hidden_act\": \"relu\"");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        fmt("%s/config.json", d), "hidden_act 'relu' is not supported");
    write_config_json(d, ", \"model_type\": \"roberta\"");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "model_type is 'roberta'", NULL);
    write_config_json(d, ", \"num_attention_heads\": 3");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "hidden_size 4 is not a multiple of num_attention_heads 3",
                        fmt("%s/config.json", d));
    write_config_json(d, ", \"intermediate_size\": \"eight\"");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'intermediate_size' must be an integer, got string", NULL);
    write_config_json(d, ", \"layer_norm_eps\": true");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'layer_norm_eps' must be a number", NULL);
    write_config_json(d, ", \"hidden_dropout_prob\": 1.5");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'hidden_dropout_prob' must be in [0, 1)", NULL);
    write_config_json(d, ", \"vocab_size\": -3");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'vocab_size' must be in", NULL);
    write_config_json(d, ", \"position_embedding_type\": \"relative_key\"");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "position_embedding_type 'relative_key'", NULL);
    write_config_json(d, ", \"problem_type\": \"regression\"");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "problem_type 'regression'", NULL);
    write_config_json(d, ", \"id2label\": {\"0\": \"a\", \"1\": \"b\"}, \"num_labels\": 3");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "num_labels 3 disagrees with id2label (2 entries)", NULL);
    write_config_json(d, ", \"id2label\": [\"a\"]");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'id2label' must be an object", NULL);
    write_config_json(d, ", \"hidden_act\": 3");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'hidden_act' must be a string, got integer", NULL);
    write_config_json(d, ", \"id2label\": {}");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'id2label' has 0 entries", NULL);
    write_config_json(d, ", \"num_labels\": 0");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "'num_labels' must be in [1, ", NULL);
    write_config_json(d, ", \"num_labels\": 1");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "regression", fmt("%s/config.json", d));
    write_config_json(d, ", \"pad_token_id\": 11");
    expect_config_error(fmt("model = { pretrained = \"%s\"; };", d), TF_ERR_DATA,
                        "pad_token_id 11 is outside the vocabulary", NULL);
    /* a valid one, with overrides and the task from architectures */
    write_config_json(d, ", \"architectures\": [\"BertForQuestionAnswering\"], \"pad_token_id\": null,"
                         " \"classifier_dropout\": null");
    tf_error err = {0};
    ck_assert_msg(check_text(fmt("model = { pretrained = \"%s\"; hidden_dropout_prob = 0.0; };", d),
                             &err) == TF_OK,
                  "%s", err.msg);
    /* an override that breaks the checkpoint's heads is the config's fault */
    expect_config_error(fmt("model = { pretrained = \"%s\"; num_attention_heads = 3; };", d),
                        TF_ERR_CONFIG, "test.cfg:1", "not a multiple");
}
END_TEST

/* ---- checkpoint loading --------------------------------------------------------- */

static void expect_loaded_values(fixture *f, const ckpt_opts *o)
{
    size_t n;
    float *h = host_params(f, &n);
    tensor_spec spec[40];
    int ns = specs_of(o, spec);
    for (int k = 0; k < ns; k++) {
        const char *nm = spec[k].name;
        bool head = strncmp(nm, "classifier", 10) == 0 || strncmp(nm, "qa_outputs", 10) == 0;
        const tf_param_info *p = find_param(f, fmt("%s%s", head ? "" : "bert.", nm));
        ck_assert_msg(p != NULL, "no view %s", nm);
        for (size_t i = 0; i < p->numel; i++) {
            float want = ckpt_value(k, i);
            if (o->dtype == TF_DTYPE_F16) want = tf_f16_to_f32(tf_f32_to_f16(want));
            ck_assert_msg(h[p->offset + i] == want, "%s[%zu] = %g, want %g", nm, i,
                          h[p->offset + i], want);
        }
    }
    free(h);
}

START_TEST(load_variants)
{
    if (!bk) return;
    static const ckpt_opts variants[] = {
        {.dtype = TF_DTYPE_F32},
        {.dtype = TF_DTYPE_F32, .no_prefix = true},
        {.dtype = TF_DTYPE_F32, .legacy = true},
        {.dtype = TF_DTYPE_F16},
        {.dtype = TF_DTYPE_BF16, .no_prefix = true, .legacy = true},
        {.dtype = TF_DTYPE_F32, .qa = true},
        {.dtype = TF_DTYPE_F32, .labels = 5},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const ckpt_opts *o = &variants[v];
        const char *d = fresh_dir("variant");
        write_checkpoint(d, o,
                         o->qa ? ", \"architectures\": [\"BertForQuestionAnswering\"]"
                         : o->labels == 5 ? ", \"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": "
                                            "\"c\", \"3\": \"d\", \"4\": \"e\"}"
                                          : NULL);
        fixture f;
        create_ok(fmt("model = { pretrained = \"%s\"; };", d), 2, 8, 3, &f);
        const tf_model_info *info = mv->info(f.m);
        ck_assert_int_eq(info->task, o->qa ? TF_TASK_QUESTION_ANSWERING : TF_TASK_CLASSIFICATION);
        ck_assert_int_eq(info->num_labels, o->qa ? 2 : o->labels ? o->labels : 2);
        ck_assert_int_eq(info->hidden_size, H);
        ck_assert_int_eq(info->vocab_size, V);
        ck_assert_ptr_null(info->vocab_file);
        ck_assert_str_eq(info->source, fmt("pretrained %s", d));
        expect_loaded_values(&f, o);
        fixture_free(&f);
    }
}
END_TEST

static const char *g_text;
static void create_and_free(void *arg)
{
    (void)arg;
    fixture f;
    create_ok(g_text, 2, 8, 3, &f);
    fixture_free(&f);
}

START_TEST(load_missing_head_and_extras)
{
    if (!bk) return;
    const char *d = fresh_dir("nohead");
    ckpt_opts o = {.dtype = TF_DTYPE_F32, .no_prefix = true, .no_head = true, .extra = true};
    write_checkpoint(d, &o, NULL);
    g_text = keep(fmt("model = { pretrained = \"%s\"; num_labels = 3; };", d));
    const char *log = capture_stderr(create_and_free, NULL);
    /* one line for the fresh weights, one for the unused tensor; cls.* silent */
    ck_assert_msg(strstr(log, "Some weights of BertForSequenceClassification were not "
                              "initialized from the model checkpoint at"),
                  "%s", log);
    ck_assert_msg(strstr(log, "['bert.pooler.dense.weight', 'bert.pooler.dense.bias', "
                              "'classifier.weight', 'classifier.bias']"),
                  "%s", log);
    ck_assert_msg(strstr(log, "1 tensor not used by BertForSequenceClassification: "
                              "bert.encoder.layer.0.attention.self.rotary.weight"),
                  "%s", log);
    ck_assert_msg(!strstr(log, "cls.predictions"), "%s", log);
    int lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 2);

    /* the fresh head is initialised as transformers does: N(0, 0.02), bias 0,
     * and the same as a random-init model's head with the same seed */
    fixture f, g;
    create_ok(g_text, 2, 8, 3, &f);
    create_ok("model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 4;"
              " num_hidden_layers = 1; num_attention_heads = 2; intermediate_size = 8;"
              " max_position_embeddings = 8; num_labels = 3; };",
              2, 8, 3, &g);
    size_t n1, n2;
    float *a = host_params(&f, &n1), *b = host_params(&g, &n2);
    const char *names[] = {"classifier.weight", "classifier.bias", "bert.pooler.dense.weight",
                           "bert.pooler.dense.bias"};
    for (int k = 0; k < 4; k++) {
        const tf_param_info *p = find_param(&f, names[k]), *q = find_param(&g, names[k]);
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(q);
        ck_assert_int_eq(p->numel, q->numel);
        ck_assert_msg(memcmp(a + p->offset, b + q->offset, p->numel * 4) == 0, "%s differs",
                      names[k]);
        if (k % 2 == 1)
            for (size_t i = 0; i < p->numel; i++) ck_assert_float_eq(a[p->offset + i], 0.0f);
    }
    free(a);
    free(b);
    fixture_free(&f);
    fixture_free(&g);
}
END_TEST

START_TEST(load_errors)
{
    if (!bk) return;
    const char *d = fresh_dir("loaderr");
    const char *cfg = keep(fmt("model = { pretrained = \"%s\"; };", d));
    const char *file = keep(fmt("%s/model.safetensors", d));

    ckpt_opts o = {.dtype = TF_DTYPE_F32,
                   .bad_shape = "encoder.layer.0.attention.self.key.weight"};
    write_checkpoint(d, &o, NULL);
    expect_create_error(cfg, TF_ERR_DATA, file,
                        "tensor 'bert.encoder.layer.0.attention.self.key.weight' has shape [5, 4]",
                        "config.json gives [4, 4]");

    o = (ckpt_opts){.dtype = TF_DTYPE_F32, .bad_shape = "classifier.weight"};
    write_checkpoint(d, &o, NULL);
    expect_create_error(cfg, TF_ERR_DATA, "'classifier.weight' has shape [3, 4]", "[2, 4]", file);

    o = (ckpt_opts){.dtype = TF_DTYPE_F32, .skip = "encoder.layer.0.output.dense.bias"};
    write_checkpoint(d, &o, NULL);
    expect_create_error(cfg, TF_ERR_DATA, file,
                        "missing tensor 'bert.encoder.layer.0.output.dense.bias'", NULL);

    o = (ckpt_opts){.dtype = TF_DTYPE_I64};
    write_checkpoint(d, &o, NULL);
    expect_create_error(cfg, TF_ERR_DATA, file, "has dtype I64", "F32, F16 or BF16");

    o = (ckpt_opts){.dtype = TF_DTYPE_F32, .dup = true};
    write_checkpoint(d, &o, NULL);
    expect_create_error(cfg, TF_ERR_DATA, "'bert.embeddings.LayerNorm.weight' and "
                                          "'embeddings.LayerNorm.weight' both hold", file, NULL);

    /* truncated: the last 10 bytes cut off */
    o = (ckpt_opts){.dtype = TF_DTYPE_F32};
    write_checkpoint(d, &o, NULL);
    struct stat sb;
    ck_assert_int_eq(stat(file, &sb), 0);
    ck_assert_int_eq(truncate(file, sb.st_size - 10), 0);
    expect_create_error(cfg, TF_ERR_DATA, file, NULL, NULL);
    /* corrupt: garbage header */
    write_text(file, "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": nonsense}xxxxxxx");
    expect_create_error(cfg, TF_ERR_DATA, file, NULL, NULL);
    /* an unknown dtype in the header */
    {
        const char *hdr = "{\"bert.embeddings.LayerNorm.bias\":{\"dtype\":\"Q7\",\"shape\":[4],"
                          "\"data_offsets\":[0,16]}}";
        FILE *fp = fopen(file, "wb");
        uint64_t len = strlen(hdr);
        unsigned char le[8];
        for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
        fwrite(le, 1, 8, fp);
        fwrite(hdr, 1, len, fp);
        static const unsigned char zeros[16];
        fwrite(zeros, 1, 16, fp);
        fclose(fp);
        expect_create_error(cfg, TF_ERR_DATA, file, "Q7", NULL);
    }
    /* no model.safetensors at all, with and without a pytorch_model.bin */
    unlink(file);
    expect_create_error(cfg, TF_ERR_DATA, file, "No such file", NULL);
    write_text(fmt("%s/pytorch_model.bin", d), "pickle");
    expect_create_error(cfg, TF_ERR_DATA, "only pytorch_model.bin found", d, NULL);
    unlink(fmt("%s/pytorch_model.bin", d));
    write_text(fmt("%s/model.safetensors.index.json", d), "{}");
    /* sharded: the index is read (an empty one names what it lacks) */
    expect_create_error(cfg, TF_ERR_DATA, "model.safetensors.index.json: no \"weight_map\" object", d, NULL);
}
END_TEST

START_TEST(create_errors)
{
    if (!bk) return;
    /* longer sequences than the model has positions */
    fixture f;
    tf_error err = {0};
    ck_assert_int_eq(create_model("model = { preset = \"bert-tiny\"; max_position_embeddings = 4; };",
                                  2, 8, 1, &f, &err),
                     TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "sequences of 8 tokens, but the model has 4 positions"), "%s",
                  err.msg);
    fixture_free(&f);
    /* a compute dtype backend-cpu does not have */
    f.cfg = cfg_of("model = { preset = \"bert-tiny\"; };");
    tf_backend_open_args oa = {.size = sizeof oa, .threads = 1,
                               .section = tf_config_section(f.cfg, "backend")};
    ck_assert_int_eq(bk->open(&oa, &f.be, &err), TF_OK);
    tf_model_create_args ca = {.size = sizeof ca, .section = tf_config_section(f.cfg, "model"),
                               .backend = bk, .be = f.be, .compute_dtype = TF_DTYPE_F16,
                               .matmul_mode = TF_MATMUL_F16, .max_rows = 1, .max_seq = 4};
    if (!bk->supports(f.be, TF_MATMUL_F16, TF_DTYPE_F16)) {
        ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_PLUGIN);
        ck_assert_msg(strstr(err.msg, "cannot compute"), "%s", err.msg);
    }
    ca.compute_dtype = TF_DTYPE_I32;
    ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "compute dtype I32"), "%s", err.msg);
    ca.compute_dtype = TF_DTYPE_F32;
    ca.matmul_mode = TF_MATMUL_FP32;
    ca.max_rows = 0;
    ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_CONFIG);
    ca.max_rows = 1 << 22;
    ca.max_seq = 512;
    ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "too large a batch"), "%s", err.msg);
    ca.max_rows = 1;
    ca.section = NULL;
    ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_PLUGIN);
    ck_assert_msg(strstr(err.msg, "needs a config section and a backend"), "%s", err.msg);
    ca.section = tf_config_section(f.cfg, "model");
    ca.size = 8;
    ck_assert_int_eq(mv->create(&ca, &f.m, &err), TF_ERR_PLUGIN);
    ck_assert_ptr_null(f.m);
    fixture_free(&f);
}
END_TEST

/* ---- layout, views, initialisation ------------------------------------------------ */

START_TEST(layout_and_init)
{
    if (!bk) return;
    fixture f;
    create_ok("model = { preset = \"bert-mini\"; vocab_size = 1000; pad_token_id = 3; };", 1, 8,
              7, &f);
    const tf_model_info *info = mv->info(f.m);
    ck_assert_int_eq(info->num_layers, 4);
    ck_assert_int_eq(info->hidden_size, 256);
    ck_assert_int_eq(info->num_heads, 4);
    ck_assert_int_eq(info->intermediate_size, 1024);
    ck_assert_int_eq(info->max_position_embeddings, 512);
    ck_assert(info->do_lower_case);
    ck_assert_str_eq(info->source, "preset bert-mini (random init)");
    const tf_param_info *p;
    size_t np;
    mv->params(f.m, &p, &np);
    ck_assert_uint_eq(np, 5 + 16 * 4 + 4);
    ck_assert_str_eq(p[0].name, "bert.embeddings.word_embeddings.weight");
    ck_assert_str_eq(p[5].name, "bert.encoder.layer.0.attention.self.query.weight");
    ck_assert_str_eq(p[np - 1].name, "classifier.bias");
    tf_model_buffers b;
    mv->buffers(f.m, &b);
    /* views are disjoint, inside the buffer, aligned (layout_alignment); no_decay as Trainer */
    unsigned char *used = calloc(b.n, 1);
    size_t total = 0;
    for (size_t i = 0; i < np; i++) {
        ck_assert_uint_le(p[i].offset + p[i].numel, b.n);
        size_t prod = 1;
        for (int d = 0; d < p[i].ndim; d++) prod *= (size_t)p[i].shape[d];
        ck_assert_uint_eq(prod, p[i].numel);
        for (size_t j = 0; j < p[i].numel; j++) {
            ck_assert_msg(!used[p[i].offset + j], "%s overlaps", p[i].name);
            used[p[i].offset + j] = 1;
        }
        total += p[i].numel;
        bool nd = strstr(p[i].name, "LayerNorm") || strstr(p[i].name, ".bias");
        ck_assert_msg(p[i].no_decay == nd, "%s no_decay %d", p[i].name, p[i].no_decay);
    }
    /* the padding: at most 31 elements before each of the views (and the end) */
    ck_assert_uint_le(b.n - total, 31 * (np + 1));
    free(used);
    /* query, key, value of a layer are one [3H, H] block, their biases one [3H] */
    const tf_param_info *q = find_param(&f, "bert.encoder.layer.2.attention.self.query.weight");
    const tf_param_info *k = find_param(&f, "bert.encoder.layer.2.attention.self.key.weight");
    const tf_param_info *v = find_param(&f, "bert.encoder.layer.2.attention.self.value.weight");
    ck_assert_uint_eq(k->offset, q->offset + q->numel);
    ck_assert_uint_eq(v->offset, k->offset + k->numel);
    /* layer 3 comes before layer 0 in memory (backward order); head first */
    ck_assert_uint_lt(find_param(&f, "bert.encoder.layer.3.output.dense.weight")->offset,
                      find_param(&f, "bert.encoder.layer.0.output.dense.weight")->offset);
    ck_assert_uint_lt(find_param(&f, "classifier.weight")->offset, q->offset);
    ck_assert_uint_gt(find_param(&f, "bert.embeddings.word_embeddings.weight")->offset,
                      find_param(&f, "bert.encoder.layer.0.output.dense.weight")->offset);

    /* transformers' _init_weights */
    size_t n;
    float *h = host_params(&f, &n);
    for (size_t i = 0; i < np; i++) {
        const float *x = h + p[i].offset;
        if (strstr(p[i].name, "LayerNorm.weight")) {
            for (size_t j = 0; j < p[i].numel; j++) ck_assert_float_eq(x[j], 1.0f);
        } else if (p[i].no_decay) {
            for (size_t j = 0; j < p[i].numel; j++) ck_assert_float_eq(x[j], 0.0f);
        } else {
            double s = 0, s2 = 0;
            for (size_t j = 0; j < p[i].numel; j++) {
                s += x[j];
                s2 += (double)x[j] * x[j];
            }
            double mean = s / (double)p[i].numel, sd = sqrt(s2 / (double)p[i].numel - mean * mean);
            double tol = 6 * 0.02 / sqrt((double)p[i].numel) + 1e-4;
            ck_assert_msg(fabs(mean) < tol, "%s mean %g", p[i].name, mean);
            ck_assert_msg(fabs(sd - 0.02) < 0.02 * (0.05 + 6 / sqrt((double)p[i].numel)),
                          "%s sd %g", p[i].name, sd);
        }
    }
    /* the padding row of the word embeddings is zero */
    const tf_param_info *w = find_param(&f, "bert.embeddings.word_embeddings.weight");
    for (int j = 0; j < 256; j++) ck_assert_float_eq(h[w->offset + 3 * 256 + j], 0.0f);
    ck_assert_float_ne(h[w->offset + 2 * 256], 0.0f);

    /* same seed, same weights; another seed, other weights */
    fixture g, k2;
    create_ok("model = { preset = \"bert-mini\"; vocab_size = 1000; pad_token_id = 3; };", 2, 4,
              7, &g);
    create_ok("model = { preset = \"bert-mini\"; vocab_size = 1000; pad_token_id = 3; };", 1, 8,
              8, &k2);
    size_t n2, n3;
    float *h2 = host_params(&g, &n2), *h3 = host_params(&k2, &n3);
    ck_assert_uint_eq(n, n2);
    ck_assert(memcmp(h, h2, n * 4) == 0);
    ck_assert(memcmp(h, h3, n * 4) != 0);
    free(h);
    free(h2);
    free(h3);
    fixture_free(&f);
    fixture_free(&g);
    fixture_free(&k2);
}
END_TEST

/* Every tensor of every copy of the weights starts 64-byte aligned: the f32
 * master parameters, gradients and AdamW moments, and the f16/bf16 compute
 * copy, which reuses the same element offsets at 2 bytes an element (so a
 * 16-byte step in f32 would be 8 bytes there). Checked for heads whose
 * tensors have odd sizes (2, 3 and 7 labels, question answering). */
START_TEST(layout_alignment)
{
    if (!bk) return;
    static const char *const cfgs[] = {
        "model = { preset = \"bert-tiny\"; vocab_size = 1001; num_labels = 2; };",
        "model = { preset = \"bert-mini\"; vocab_size = 999; num_labels = 3; };",
        "model = { preset = \"bert-tiny\"; vocab_size = 77; num_labels = 7;"
        " max_position_embeddings = 33; type_vocab_size = 3; };",
        "model = { preset = \"bert-tiny\"; vocab_size = 1001; task = \"question-answering\"; };",
    };
    static const size_t elem_bytes[] = {4, 2}; /* f32 copies; the f16 and bf16 compute copy */
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        fixture f;
        create_ok(cfgs[c], 2, 8, 1, &f);
        tf_model_buffers b;
        mv->buffers(f.m, &b);
        /* the backend's blocks start at least 64-byte aligned */
        ck_assert_uint_eq((uintptr_t)b.params % 64, 0);
        ck_assert_uint_eq((uintptr_t)b.grads % 64, 0);
        const tf_param_info *p;
        size_t np;
        mv->params(f.m, &p, &np);
        for (size_t i = 0; i < np; i++)
            for (size_t e = 0; e < 2; e++)
                ck_assert_msg(p[i].offset * elem_bytes[e] % 64 == 0,
                              "config %zu: %s at element %zu is not 64-byte aligned with "
                              "%zu-byte elements",
                              c, p[i].name, p[i].offset, elem_bytes[e]);
        fixture_free(&f);
    }
}
END_TEST

/* ---- forward / backward contracts --------------------------------------------------- */

static const char *tiny_cfg(const char *extra)
{
    return fmt("model = { preset = \"bert-tiny\"; vocab_size = %d; hidden_size = 8;"
               " num_hidden_layers = 2; num_attention_heads = 2; intermediate_size = 16;"
               " max_position_embeddings = 16; hidden_dropout_prob = 0.0;"
               " attention_probs_dropout_prob = 0.0; %s };",
               V, extra ? extra : "");
}

typedef struct ready_log {
    size_t off[64], cnt[64];
    int n;
} ready_log;

static void on_ready(void *user, size_t offset, size_t count)
{
    ready_log *r = user;
    if (r->n < 64) {
        r->off[r->n] = offset;
        r->cnt[r->n] = count;
    }
    r->n++;
}

START_TEST(forward_backward_contracts)
{
    if (!bk) return;
    for (int task = 0; task < 2; task++) {
        fixture f;
        create_ok(tiny_cfg(task ? "task = \"question-answering\";" : NULL), 4, 6, 11, &f);
        test_batch tb;
        make_batch(&tb, 3, 6, !task);
        if (task) {
            tb.b.start_positions = tb.start;
            tb.b.end_positions = tb.end;
        }
        tf_model_output o;
        tf_error err = {0};
        ck_assert_int_eq(mv->zero_grad(f.m, &err), TF_OK);
        ck_assert_msg(mv->forward(f.m, &tb.b, true, &o, &err) == TF_OK, "%s", err.msg);
        ck_assert_int_eq(o.rows, 3);
        ck_assert_int_eq(o.cols, task ? 12 : 2);
        ck_assert_int_eq(o.logits_dtype, TF_DTYPE_F32);
        ck_assert(isfinite(o.loss) && o.loss > 0);
        float loss1 = o.loss;
        ready_log r = {0};
        ck_assert_msg(mv->backward(f.m, 1.0f, on_ready, &r, &err) == TF_OK, "%s", err.msg);
        /* head+pooler, layer 1, layer 0, embeddings: ascending, tiling [0, n) */
        tf_model_buffers b;
        mv->buffers(f.m, &b);
        ck_assert_int_eq(r.n, 4);
        size_t at = 0;
        for (int i = 0; i < r.n; i++) {
            ck_assert_uint_eq(r.off[i], at);
            at += r.cnt[i];
        }
        ck_assert_uint_eq(at, b.n);
        float *g1 = host_grads(&f);
        /* backward consumed the forward */
        ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_ERR_RUNTIME);
        ck_assert_msg(strstr(err.msg, "without a forward"), "%s", err.msg);
        /* gradients accumulate; loss scale multiplies */
        ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &o, &err), TF_OK);
        ck_assert_float_eq(o.loss, loss1);
        ck_assert_int_eq(mv->backward(f.m, 3.0f, NULL, NULL, &err), TF_OK);
        float *g4 = host_grads(&f);
        double worst = 0, big = 0;
        for (size_t i = 0; i < b.n; i++) {
            worst = fmax(worst, fabs(g4[i] - 4 * g1[i]));
            big = fmax(big, fabs(g1[i]));
        }
        ck_assert_msg(big > 0 && worst <= 1e-5 * big * 4, "accumulation: %g (max %g)", worst, big);
        /* the padding row (id 0) of the word embeddings gets no gradient */
        const tf_param_info *w = find_param(&f, "bert.embeddings.word_embeddings.weight");
        for (int j = 0; j < 8; j++) ck_assert_float_eq(g4[w->offset + j], 0.0f);
        ck_assert_int_eq(mv->zero_grad(f.m, &err), TF_OK);
        float *g0 = host_grads(&f);
        for (size_t i = 0; i < b.n; i++) ck_assert_float_eq(g0[i], 0.0f);
        free(g0);
        free(g1);
        free(g4);

        /* forward without labels: logits, no loss, and no backward */
        test_batch nb;
        make_batch(&nb, 2, 5, false);
        ck_assert_int_eq(mv->forward(f.m, &nb.b, true, &o, &err), TF_OK);
        ck_assert_float_eq(o.loss, 0.0f);
        ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_ERR_RUNTIME);
        ck_assert_msg(strstr(err.msg, task ? "start/end positions" : "labels"), "%s", err.msg);
        /* batches that do not fit */
        make_batch(&nb, 5, 6, !task);
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o, &err), TF_ERR_DATA);
        ck_assert_msg(strstr(err.msg, "batch of 5 rows; the model was created for 1 to 4"), "%s",
                      err.msg);
        make_batch(&nb, 2, 7, !task);
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o, &err), TF_ERR_DATA);
        ck_assert_msg(strstr(err.msg, "sequence length 7"), "%s", err.msg);
        make_batch(&nb, 2, 6, !task);
        nb.b.input_ids = NULL;
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o, &err), TF_ERR_DATA);
        /* a token id outside the vocabulary: the backend names it */
        make_batch(&nb, 2, 6, !task);
        nb.ids[3] = V + 4;
        ck_assert_int_ne(mv->forward(f.m, &nb.b, false, &o, &err), TF_OK);
        ck_assert_msg(strstr(err.msg, "model-bert: embeddings"), "%s", err.msg);
        /* a training forward is needed for backward */
        make_batch(&nb, 2, 6, !task);
        nb.b.start_positions = task ? nb.start : NULL;
        nb.b.end_positions = task ? nb.end : NULL;
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o, &err), TF_OK);
        ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_ERR_RUNTIME);
        ck_assert_msg(strstr(err.msg, "needs a training forward"), "%s", err.msg);
        if (!task) { /* a label outside [0, num_labels): the head says so */
            nb.labels[1] = 7;
            ck_assert_int_ne(mv->forward(f.m, &nb.b, true, &o, &err), TF_OK);
            ck_assert_msg(strstr(err.msg, "model-bert: classification head") &&
                              strstr(err.msg, "7"),
                          "%s", err.msg);
        }
        if (task) { /* QA needs both positions */
            make_batch(&nb, 2, 6, false);
            nb.b.start_positions = nb.start;
            ck_assert_int_eq(mv->forward(f.m, &nb.b, true, &o, &err), TF_ERR_DATA);
            ck_assert_msg(strstr(err.msg, "start_positions but no end_positions"), "%s", err.msg);
        }
        /* without token types or mask: zeros and all-ones, as transformers */
        make_batch(&nb, 2, 6, !task);
        nb.b.start_positions = task ? nb.start : NULL;
        nb.b.end_positions = task ? nb.end : NULL;
        for (int i = 0; i < 12; i++) {
            nb.types[i] = 0;
            nb.mask[i] = 1;
        }
        tf_model_output o1, o2;
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o1, &err), TF_OK);
        float l1 = o1.loss;
        nb.b.token_type_ids = NULL;
        nb.b.attention_mask = NULL;
        ck_assert_int_eq(mv->forward(f.m, &nb.b, false, &o2, &err), TF_OK);
        ck_assert_float_eq(o2.loss, l1);
        fixture_free(&f);
    }
}
END_TEST

/* defer_loss (ABI 1.2): forward leaves out.loss NaN and read_loss, asked
 * after backward was queued, gives the loss a waiting forward gives, bit for
 * bit; the gradients are the same too. */
START_TEST(deferred_loss)
{
    if (!bk) return;
    ck_assert(TF_HAS(mv, read_loss));
    for (int task = 0; task < 2; task++) {
        const char *cfg = tiny_cfg(task ? "task = \"question-answering\";" : NULL);
        fixture f, d;
        tf_error err = {0};
        create_ok(cfg, 4, 6, 11, &f);
        ck_assert_msg(create_model_defer(cfg, 4, 6, 11, true, &d, &err) == TF_OK, "%s", err.msg);
        float got = -1;
        ck_assert_int_eq(mv->read_loss(d.m, &got, &err), TF_ERR_RUNTIME);
        ck_assert_msg(strstr(err.msg, "read_loss before a forward"), "%s", err.msg);
        test_batch tb;
        make_batch(&tb, 3, 6, !task);
        if (task) {
            tb.b.start_positions = tb.start;
            tb.b.end_positions = tb.end;
        }
        tf_model_output of, od;
        ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &of, &err), TF_OK);
        ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_OK);
        ck_assert_msg(mv->forward(d.m, &tb.b, true, &od, &err) == TF_OK, "%s", err.msg);
        ck_assert(isnan(od.loss));
        ck_assert_int_eq(mv->backward(d.m, 1.0f, NULL, NULL, &err), TF_OK);
        ck_assert_msg(mv->read_loss(d.m, &got, &err) == TF_OK, "%s", err.msg);
        ck_assert(isfinite(of.loss) && of.loss > 0);
        ck_assert(memcmp(&got, &of.loss, sizeof got) == 0);
        float again = -1, plain = -1;
        ck_assert_int_eq(mv->read_loss(d.m, &again, &err), TF_OK); /* read twice: the same */
        ck_assert(memcmp(&again, &got, sizeof got) == 0);
        ck_assert_int_eq(mv->read_loss(f.m, &plain, &err), TF_OK); /* without defer_loss too */
        ck_assert(memcmp(&plain, &of.loss, sizeof got) == 0);
        tf_model_buffers bf;
        mv->buffers(f.m, &bf);
        float *gf = host_grads(&f), *gd = host_grads(&d);
        ck_assert(memcmp(gf, gd, bf.n * sizeof *gf) == 0);
        free(gf);
        free(gd);
        /* no labels: no loss, 0 */
        test_batch nb;
        make_batch(&nb, 2, 5, false);
        ck_assert_int_eq(mv->forward(d.m, &nb.b, false, &od, &err), TF_OK);
        ck_assert_int_eq(mv->read_loss(d.m, &got, &err), TF_OK);
        ck_assert_float_eq(got, 0.0f);
        fixture_free(&f);
        fixture_free(&d);
    }
}
END_TEST

/* QA positions outside [0, S] are clamped; S itself is ignored. */
START_TEST(qa_position_clamping)
{
    if (!bk) return;
    fixture f;
    create_ok(tiny_cfg("task = \"question-answering\";"), 2, 6, 5, &f);
    test_batch a, b;
    make_batch(&a, 2, 6, false);
    make_batch(&b, 2, 6, false);
    a.b.start_positions = a.start;
    a.b.end_positions = a.end;
    b.b.start_positions = b.start;
    b.b.end_positions = b.end;
    a.start[0] = -5; /* -> 0 */
    b.start[0] = 0;
    a.end[1] = 99;   /* -> 6: ignored */
    b.end[1] = 6;
    tf_model_output oa, ob;
    tf_error err = {0};
    ck_assert_int_eq(mv->forward(f.m, &a.b, false, &oa, &err), TF_OK);
    ck_assert_int_eq(mv->forward(f.m, &b.b, false, &ob, &err), TF_OK);
    ck_assert_float_eq(oa.loss, ob.loss);
    /* the caller's positions are not modified */
    ck_assert_int_eq(a.start[0], -5);
    fixture_free(&f);
}
END_TEST

/* Dropout: the same seed gives the same masks, training forwards differ from
 * each other and from eval; eval is deterministic. */
START_TEST(dropout_streams)
{
    if (!bk) return;
    const char *text = "model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 8;"
                       " num_hidden_layers = 1; num_attention_heads = 2; intermediate_size = 16;"
                       " max_position_embeddings = 8; hidden_dropout_prob = 0.3;"
                       " attention_probs_dropout_prob = 0.3; };";
    fixture f, g;
    create_ok(text, 2, 6, 9, &f);
    create_ok(text, 2, 6, 9, &g);
    test_batch tb;
    make_batch(&tb, 2, 6, true);
    tf_model_output o;
    tf_error err = {0};
    float lf[3], lg[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &o, &err), TF_OK);
        lf[i] = o.loss;
        ck_assert_int_eq(mv->forward(g.m, &tb.b, true, &o, &err), TF_OK);
        lg[i] = o.loss;
        ck_assert_float_eq(lf[i], lg[i]);
    }
    ck_assert(lf[0] != lf[1] || lf[1] != lf[2]);
    ck_assert_int_eq(mv->forward(f.m, &tb.b, false, &o, &err), TF_OK);
    float e1 = o.loss;
    ck_assert_int_eq(mv->forward(f.m, &tb.b, false, &o, &err), TF_OK);
    ck_assert_float_eq(o.loss, e1);
    ck_assert(e1 != lf[0]);
    fixture_free(&f);
    fixture_free(&g);
}
END_TEST

/* set_rows (ABI 1.3): a row's dropout masks follow its global position, so
 * a batch of 4 rows (positions 8..11 of epoch 2) and the two strided halves
 * a rank of 2 takes (positions 8, 10 and 9, 11) give the same logits per
 * row; set_step draws by batch instead, and another epoch draws anew. */
static void take_rows(const test_batch *from, int seq, const int *rows, int n, test_batch *to)
{
    make_batch(to, n, seq, true);
    for (int k = 0; k < n; k++) {
        int r = rows[k];
        memcpy(to->ids + k * seq, from->ids + r * seq, (size_t)seq * sizeof(int32_t));
        memcpy(to->types + k * seq, from->types + r * seq, (size_t)seq * sizeof(int32_t));
        memcpy(to->mask + k * seq, from->mask + r * seq, (size_t)seq * sizeof(int32_t));
        to->labels[k] = from->labels[r];
    }
}

START_TEST(dropout_by_row)
{
    if (!bk) return;
    const char *text = "model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 8;"
                       " num_hidden_layers = 2; num_attention_heads = 2; intermediate_size = 16;"
                       " max_position_embeddings = 8; hidden_dropout_prob = 0.3;"
                       " attention_probs_dropout_prob = 0.3; num_labels = 3; };";
    const int S = 6, L = 3;
    fixture f;
    create_ok(text, 4, S, 9, &f);
    test_batch full, half;
    make_batch(&full, 4, S, true);
    tf_model_output o;
    tf_error err = {0};
    float want[4 * 3], got[4 * 3], other[4 * 3];
    mv->set_rows(f.m, 2, 8, 1);
    ck_assert_msg(mv->forward(f.m, &full.b, true, &o, &err) == TF_OK, "%s", err.msg);
    memcpy(want, o.logits, sizeof want);
    for (int r = 0; r < 2; r++) {
        int rows[2] = {r, r + 2};
        take_rows(&full, S, rows, 2, &half);
        mv->set_rows(f.m, 2, 8 + (uint64_t)r, 2);
        ck_assert_msg(mv->forward(f.m, &half.b, true, &o, &err) == TF_OK, "%s", err.msg);
        memcpy(got + 2 * r * L, o.logits, 2 * L * sizeof *got);
    }
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < L; j++) {
                float a = got[(2 * r + k) * L + j], b = want[(r + 2 * k) * L + j];
                ck_assert_msg(fabsf(a - b) <= 1e-5f * (1 + fabsf(b)), "row %d: %g vs %g", r + 2 * k, a, b);
            }
    /* the same positions by batch (set_step) draw other masks */
    int rows[2] = {1, 3};
    take_rows(&full, S, rows, 2, &half);
    mv->set_step(f.m, 0);
    ck_assert_int_eq(mv->forward(f.m, &half.b, true, &o, &err), TF_OK);
    memcpy(other, o.logits, 2 * L * sizeof *other);
    bool differs = false;
    for (int j = 0; j < 2 * L; j++) differs |= other[j] != got[2 * L + j];
    ck_assert_msg(differs, "set_step drew the masks of set_rows");
    /* another epoch, other masks */
    mv->set_rows(f.m, 3, 8, 1);
    ck_assert_int_eq(mv->forward(f.m, &full.b, true, &o, &err), TF_OK);
    differs = false;
    for (int j = 0; j < 4 * L; j++) differs |= ((const float *)o.logits)[j] != want[j];
    ck_assert_msg(differs, "epoch 3 drew epoch 2's masks");
    fixture_free(&f);
}
END_TEST

/* Unpadded execution (model.unpad, bert_unpad.c): a right-padded
 * classification batch with ragged lengths (1, full and between) gives the
 * padded layout's logits, loss and gradients, and after 3 SGD steps its
 * parameters, within 1e-5 relative; with dropout on too (set_rows: masks by
 * global row and position). The padding tokens are never read: ids out of
 * the vocabulary there fail the padded layout and not the packed one. */
static double max_rel(const float *a, const float *b, size_t n)
{
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), 1e-3 * scale + 1e-30);
        worst = fmax(worst, d);
    }
    return worst;
}

static void ragged_batch(test_batch *t)
{
    static const int len[6] = {1, 10, 3, 7, 10, 5};
    const int rows = 6, seq = 10;
    make_batch(t, rows, seq, true);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < seq; j++) {
            t->mask[r * seq + j] = j < len[r];
            if (j >= len[r]) t->ids[r * seq + j] = 0; /* [PAD] */
        }
    t->labels[2] = 2;
}

START_TEST(unpadded_matches_padded)
{
    if (!bk) return;
    for (int drop = 0; drop < 2; drop++) {
        const char *body = fmt("preset = \"bert-tiny\"; vocab_size = %d; hidden_size = 8;"
                               " num_hidden_layers = 2; num_attention_heads = 2; intermediate_size = 16;"
                               " max_position_embeddings = 16; num_labels = 3;"
                               " hidden_dropout_prob = %s; attention_probs_dropout_prob = %s;",
                               V, drop ? "0.2" : "0.0", drop ? "0.2" : "0.0");
        fixture u, p, r;
        create_ok(fmt("model = { %s };", body), 6, 10, 7, &u);
        create_ok(fmt("model = { %s unpad = false; };", body), 6, 10, 7, &p);
        /* a 1.4 backend (no dropout_varlen_fwd): one dropout call per row, the same bits */
        tf_backend_vtable v14 = *bk;
        v14.size = (uint32_t)offsetof(tf_backend_vtable, dropout_varlen_fwd);
        const tf_backend_vtable *bk15 = bk;
        bk = &v14;
        create_ok(fmt("model = { %s };", body), 6, 10, 7, &r);
        bk = bk15;
        test_batch tb;
        ragged_batch(&tb);
        tf_model_buffers bu, bp, br;
        mv->buffers(u.m, &bu);
        mv->buffers(p.m, &bp);
        mv->buffers(r.m, &br);
        tf_error err = {0};
        for (int step = 0; step < 3; step++) {
            tf_model_output ou, op, orow;
            mv->set_rows(u.m, 1, 6 * (uint64_t)step, 1);
            mv->set_rows(p.m, 1, 6 * (uint64_t)step, 1);
            mv->set_rows(r.m, 1, 6 * (uint64_t)step, 1);
            ck_assert_int_eq(mv->zero_grad(u.m, &err), TF_OK);
            ck_assert_int_eq(mv->zero_grad(p.m, &err), TF_OK);
            ck_assert_int_eq(mv->zero_grad(r.m, &err), TF_OK);
            ck_assert_msg(mv->forward(u.m, &tb.b, true, &ou, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(mv->forward(p.m, &tb.b, true, &op, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(mv->forward(r.m, &tb.b, true, &orow, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(memcmp(ou.logits, orow.logits, 6 * 3 * sizeof(float)) == 0,
                          "dropout %d step %d: dropout_varlen_fwd drew other masks than per-row calls", drop, step);
            ck_assert_msg(mv->backward(r.m, 1.0f, NULL, NULL, &err) == TF_OK, "%s", err.msg);
            double lr = max_rel(ou.logits, op.logits, 6 * 3);
            ck_assert_msg(lr <= 1e-5, "dropout %d step %d: logits differ by %g relative", drop, step, lr);
            ck_assert_msg(fabs(ou.loss - op.loss) <= 1e-5 * fabs(op.loss), "loss %g vs %g", ou.loss, op.loss);
            ck_assert_msg(mv->backward(u.m, 1.0f, NULL, NULL, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(mv->backward(p.m, 1.0f, NULL, NULL, &err) == TF_OK, "%s", err.msg);
            double gr = max_rel(bu.grads, bp.grads, bu.n);
            ck_assert_msg(gr <= 1e-5, "dropout %d step %d: gradients differ by %g relative", drop, step, gr);
            ck_assert_int_eq(memcmp(bu.grads, br.grads, bu.n * sizeof(float)), 0);
            for (size_t i = 0; i < bu.n; i++) { /* SGD, lr 0.5: the next step sees new weights */
                bu.params[i] -= 0.5f * bu.grads[i];
                bp.params[i] -= 0.5f * bp.grads[i];
                br.params[i] -= 0.5f * br.grads[i];
            }
        }
        double pr = max_rel(bu.params, bp.params, bu.n);
        ck_assert_msg(pr <= 1e-5, "dropout %d: parameters after 3 steps differ by %g relative", drop, pr);
        /* eval too, and the padding is never read */
        tf_model_output ou, op;
        for (int i = 0; i < 60; i++)
            if (!tb.mask[i]) tb.ids[i] = V + 3;
        ck_assert_msg(mv->forward(u.m, &tb.b, false, &ou, &err) == TF_OK, "%s", err.msg);
        ck_assert_int_eq(mv->forward(p.m, &tb.b, false, &op, &err), TF_ERR_DATA);
        /* a mask that is not right-padding runs the padded layout */
        tb.mask[9] = 1;
        ck_assert_int_eq(mv->forward(u.m, &tb.b, false, &ou, &err), TF_ERR_DATA);
        tb.mask[9] = 0;
        /* so does a 1.3 backend (no varlen attention slots) */
        tf_backend_vtable old = *bk;
        old.size = (uint32_t)offsetof(tf_backend_vtable, attention_varlen_fwd);
        const tf_backend_vtable *saved = bk;
        bk = &old;
        fixture o;
        create_ok(fmt("model = { %s };", body), 6, 10, 7, &o);
        ck_assert_int_eq(mv->forward(o.m, &tb.b, false, &ou, &err), TF_ERR_DATA);
        fixture_free(&o);
        bk = saved;
        fixture_free(&u);
        fixture_free(&p);
        fixture_free(&r);
    }
}
END_TEST

/* Gradient checkpointing: with dropout on, the same gradients bit for bit
 * as without, the same per-layer announcements (DDP buckets fire as layers
 * finish), and less memory: the layers' activations held once. */
START_TEST(gradient_checkpointing)
{
    if (!bk) return;
    for (int task = 0; task < 2; task++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 8;"
                 " num_hidden_layers = 3; num_attention_heads = 2; intermediate_size = 16;"
                 " max_position_embeddings = 8; hidden_dropout_prob = 0.3;"
                 " attention_probs_dropout_prob = 0.3; %s };",
                 task ? "task = \"question-answering\";" : "");
        fixture f, c;
        tf_error err = {0};
        ck_assert_msg(create_model_ckpt(text, 4, 6, 9, false, &f, &err) == TF_OK, "%s", err.msg);
        ck_assert_msg(create_model_ckpt(text, 4, 6, 9, true, &c, &err) == TF_OK, "%s", err.msg);
        test_batch tb;
        make_batch(&tb, 4, 6, !task);
        if (task) {
            tb.b.start_positions = tb.start;
            tb.b.end_positions = tb.end;
        }
        tf_model_output of, oc;
        for (int step = 0; step < 3; step++) { /* three steps: three sets of dropout masks */
            ready_log rf = {0}, rc = {0};
            ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &of, &err), TF_OK);
            ck_assert_int_eq(mv->backward(f.m, 1.0f, on_ready, &rf, &err), TF_OK);
            ck_assert_msg(mv->forward(c.m, &tb.b, true, &oc, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(mv->backward(c.m, 1.0f, on_ready, &rc, &err) == TF_OK, "%s", err.msg);
            ck_assert(memcmp(&of.loss, &oc.loss, sizeof of.loss) == 0);
            ck_assert_int_eq(rf.n, 5); /* head, layers 2, 1, 0, embeddings */
            ck_assert_int_eq(rc.n, rf.n);
            ck_assert(memcmp(rf.off, rc.off, sizeof rf.off) == 0 && memcmp(rf.cnt, rc.cnt, sizeof rf.cnt) == 0);
        }
        tf_model_buffers bf;
        mv->buffers(f.m, &bf);
        float *gf = host_grads(&f), *gc = host_grads(&c);
        ck_assert(memcmp(gf, gc, bf.n * sizeof *gf) == 0);
        free(gf);
        free(gc);
        /* the activations of layers 1 and 2 are layer 0's buffers but their outputs */
        tf_backend_mem_info mf, mc;
        bk->mem_info(f.be, &mf);
        bk->mem_info(c.be, &mc);
        ck_assert_msg(mc.current < mf.current, "%zu vs %zu bytes", mc.current, mf.current);
        fixture_free(&f);
        fixture_free(&c);
    }
}
END_TEST

/* ABI 1.4 pipeline stages: the model cut into 2 and 3 stages, chained
 * through the boundary activation and its gradient, gives forward's loss and
 * backward's gradients bit for bit (dropout on, masks by row), with and
 * without gradient checkpointing; the stages' parameter ranges are disjoint
 * and cover the buffer; misuse is refused. */
START_TEST(pipeline_stages)
{
    if (!bk) return;
    for (int task = 0; task < 2; task++)
        for (int ckpt = 0; ckpt < 2; ckpt++)
            for (int split = 0; split < 2; split++) {
                char text[512];
                snprintf(text, sizeof text,
                         "model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 8;"
                         " num_hidden_layers = 3; num_attention_heads = 2; intermediate_size = 16;"
                         " max_position_embeddings = 8; hidden_dropout_prob = 0.3;"
                         " attention_probs_dropout_prob = 0.3; %s };",
                         task ? "task = \"question-answering\";" : "");
                const int cuts[2][4] = {{0, 1, 3, -1}, {0, 1, 2, 3}};
                const int nst = split ? 3 : 2;
                fixture f, c;
                tf_error err = {0};
                ck_assert_msg(create_model_ckpt(text, 4, 6, 9, false, &f, &err) == TF_OK, "%s", err.msg);
                ck_assert_msg(create_model_ckpt(text, 4, 6, 9, ckpt, &c, &err) == TF_OK, "%s", err.msg);
                tf_model_buffers bf;
                mv->buffers(c.m, &bf);
                /* ranges: disjoint, covering [0, n) */
                size_t covered = 0;
                for (int k = nst - 1; k >= 0; k--) { /* the last stage's range starts at 0 */
                    size_t off, cnt;
                    mv->stage_params(c.m, cuts[split][k], cuts[split][k + 1], &off, &cnt);
                    ck_assert_uint_eq(off, covered);
                    covered += cnt;
                }
                ck_assert_uint_eq(covered, bf.n);
                test_batch tb;
                make_batch(&tb, 4, 6, !task);
                if (task) {
                    tb.b.start_positions = tb.start;
                    tb.b.end_positions = tb.end;
                }
                size_t bytes = 4 * 6 * 8 * sizeof(float);
                void *act[3], *grad[3];
                for (int k = 0; k < 3; k++) {
                    ck_assert_int_eq(bk->alloc(c.be, bytes, TF_MEM_DEVICE, &act[k], &err), TF_OK);
                    ck_assert_int_eq(bk->alloc(c.be, bytes, TF_MEM_DEVICE, &grad[k], &err), TF_OK);
                }
                for (int step = 0; step < 2; step++) {
                    tf_model_output of, oc;
                    mv->set_rows(f.m, 1, 4 * (uint64_t)step, 1);
                    ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &of, &err), TF_OK);
                    ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_OK);
                    /* the stages, each forward then (after the later ones) its backward;
                     * stage k's input is act[k-1], its output act[k] */
                    for (int k = 0; k < nst; k++) {
                        mv->set_rows(c.m, 1, 4 * (uint64_t)step, 1);
                        ck_assert_msg(mv->stage_forward(c.m, cuts[split][k], cuts[split][k + 1], &tb.b,
                                                        k ? act[k - 1] : NULL, k + 1 < nst ? act[k] : NULL, true,
                                                        &oc, &err) == TF_OK,
                                      "%s", err.msg);
                    }
                    float lf, lc;
                    ck_assert_int_eq(mv->read_loss(f.m, &lf, &err), TF_OK);
                    ck_assert_int_eq(mv->read_loss(c.m, &lc, &err), TF_OK);
                    ck_assert(memcmp(&lf, &lc, sizeof lf) == 0);
                    for (int k = nst - 1; k >= 0; k--) {
                        if (k + 1 < nst) { /* the stage's activations again: the later stages ran since */
                            mv->set_rows(c.m, 1, 4 * (uint64_t)step, 1);
                            ck_assert_int_eq(mv->stage_forward(c.m, cuts[split][k], cuts[split][k + 1], &tb.b,
                                                               k ? act[k - 1] : NULL, act[k], true, &oc, &err),
                                             TF_OK);
                        }
                        ck_assert_msg(mv->stage_backward(c.m, k + 1 < nst ? grad[k] : NULL, k ? grad[k - 1] : NULL,
                                                         1.0f, &err) == TF_OK,
                                      "%s", err.msg);
                    }
                }
                float *gf = host_grads(&f), *gc = host_grads(&c);
                ck_assert_msg(memcmp(gf, gc, bf.n * sizeof *gf) == 0, "task %d ckpt %d split %d", task, ckpt,
                              split);
                free(gf);
                free(gc);
                /* misuse: a later stage without its input, backward after a stage's forward */
                tf_model_output o;
                ck_assert_int_ne(mv->stage_forward(c.m, 1, 3, &tb.b, NULL, NULL, true, &o, &err), TF_OK);
                ck_assert_msg(strstr(err.msg, "stage of layers [1, 3)"), "%s", err.msg);
                ck_assert_int_eq(mv->stage_forward(c.m, 0, 1, &tb.b, NULL, act[0], true, &o, &err), TF_OK);
                ck_assert_int_ne(mv->backward(c.m, 1.0f, NULL, NULL, &err), TF_OK);
                ck_assert_msg(strstr(err.msg, "use stage_backward"), "%s", err.msg);
                ck_assert_int_ne(mv->stage_backward(c.m, NULL, NULL, 1.0f, &err), TF_OK);
                ck_assert_msg(strstr(err.msg, "grad_out"), "%s", err.msg);
                for (int k = 0; k < 3; k++) {
                    bk->free(c.be, act[k], TF_MEM_DEVICE);
                    bk->free(c.be, grad[k], TF_MEM_DEVICE);
                }
                fixture_free(&f);
                fixture_free(&c);
            }
}
END_TEST

/* ABI 1.5 keep_stage_grads: two models each keeping only its stage's
 * gradients, chained as a pipeline's stages, get the whole model's
 * gradients of their ranges bit for bit (dropout on, with and without
 * gradient checkpointing); buffers() then has no whole gradient buffer,
 * memory() counts the range, the backend holds less, zero_grad clears the
 * range; misuse is refused with one line. */
START_TEST(pipeline_stage_grads)
{
    if (!bk) return;
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        const char *text = "model = { preset = \"bert-tiny\"; vocab_size = 11; hidden_size = 8;"
                           " num_hidden_layers = 3; num_attention_heads = 2; intermediate_size = 16;"
                           " max_position_embeddings = 8; hidden_dropout_prob = 0.3;"
                           " attention_probs_dropout_prob = 0.3; };";
        const int cut[3] = {0, 1, 3};
        fixture f, s[2];
        tf_error err = {0};
        ck_assert_msg(create_model_ckpt(text, 4, 6, 9, false, &f, &err) == TF_OK, "%s", err.msg);
        tf_model_buffers bf;
        mv->buffers(f.m, &bf);
        float *g[2];
        size_t off[2], cnt[2];
        for (int k = 0; k < 2; k++) {
            ck_assert_msg(create_model_ckpt(text, 4, 6, 9, ckpt, &s[k], &err) == TF_OK, "%s", err.msg);
            tf_backend_mem_info before, after;
            bk->mem_info(s[k].be, &before);
            mv->stage_params(s[k].m, cut[k], cut[k + 1], &off[k], &cnt[k]);
            ck_assert_msg(mv->keep_stage_grads(s[k].m, cut[k], cut[k + 1], &g[k], &err) == TF_OK, "%s", err.msg);
            bk->mem_info(s[k].be, &after);
            ck_assert_uint_eq(before.current - after.current, (bf.n - cnt[k]) * sizeof(float));
            tf_model_buffers b;
            mv->buffers(s[k].m, &b);
            ck_assert_ptr_null(b.grads);
            ck_assert_ptr_nonnull(b.params);
            ck_assert_uint_eq(b.n, bf.n);
            tf_model_memory mm = {.size = sizeof mm};
            mv->memory(s[k].m, &mm);
            ck_assert_uint_eq(mm.gradients, cnt[k] * sizeof(float));
        }
        test_batch tb;
        make_batch(&tb, 4, 6, true);
        void *act, *grad;
        size_t bytes = 4 * 6 * 8 * sizeof(float);
        ck_assert_int_eq(bk->alloc(s[0].be, bytes, TF_MEM_DEVICE, &act, &err), TF_OK);
        ck_assert_int_eq(bk->alloc(s[0].be, bytes, TF_MEM_DEVICE, &grad, &err), TF_OK);
        for (int step = 0; step < 2; step++) { /* gradients accumulate over two steps */
            tf_model_output o;
            mv->set_rows(f.m, 1, 4 * (uint64_t)step, 1);
            ck_assert_int_eq(mv->forward(f.m, &tb.b, true, &o, &err), TF_OK);
            ck_assert_int_eq(mv->backward(f.m, 1.0f, NULL, NULL, &err), TF_OK);
            for (int k = 0; k < 2; k++) {
                mv->set_rows(s[k].m, 1, 4 * (uint64_t)step, 1);
                ck_assert_msg(mv->stage_forward(s[k].m, cut[k], cut[k + 1], &tb.b, k ? act : NULL, k ? NULL : act,
                                                true, &o, &err) == TF_OK,
                              "%s", err.msg);
            }
            ck_assert_msg(mv->stage_backward(s[1].m, NULL, grad, 1.0f, &err) == TF_OK, "%s", err.msg);
            ck_assert_msg(mv->stage_backward(s[0].m, grad, NULL, 1.0f, &err) == TF_OK, "%s", err.msg);
        }
        float *gf = host_grads(&f);
        for (int k = 0; k < 2; k++) {
            float *h = malloc(cnt[k] * sizeof *h);
            ck_assert_int_eq(bk->memcpy(s[k].be, h, g[k], cnt[k] * sizeof *h, TF_COPY_DEVICE_TO_HOST, NULL), TF_OK);
            ck_assert_int_eq(bk->stream_sync(s[k].be, NULL, &err), TF_OK);
            ck_assert_msg(memcmp(h, gf + off[k], cnt[k] * sizeof *h) == 0, "ckpt %d stage %d", ckpt, k);
            bool any = false;
            for (size_t i = 0; i < cnt[k]; i++) any |= h[i] != 0.0f;
            ck_assert(any);
            ck_assert_int_eq(mv->zero_grad(s[k].m, &err), TF_OK);
            ck_assert_int_eq(bk->memcpy(s[k].be, h, g[k], cnt[k] * sizeof *h, TF_COPY_DEVICE_TO_HOST, NULL), TF_OK);
            ck_assert_int_eq(bk->stream_sync(s[k].be, NULL, &err), TF_OK);
            for (size_t i = 0; i < cnt[k]; i++) ck_assert(h[i] == 0.0f);
            free(h);
        }
        free(gf);
        /* misuse: twice, a bad range, the whole backward, another stage's backward */
        float *again;
        ck_assert_int_ne(mv->keep_stage_grads(s[0].m, 0, 1, &again, &err), TF_OK);
        ck_assert_msg(strstr(err.msg, "keep_stage_grads called twice"), "%s", err.msg);
        ck_assert_int_ne(mv->keep_stage_grads(f.m, 2, 1, &again, &err), TF_OK);
        ck_assert_msg(strstr(err.msg, "keep_stage_grads of layers [2, 1) of 3"), "%s", err.msg);
        tf_model_output o;
        ck_assert_int_eq(mv->forward(s[0].m, &tb.b, true, &o, &err), TF_OK); /* evaluation runs the whole model */
        ck_assert_int_ne(mv->backward(s[0].m, 1.0f, NULL, NULL, &err), TF_OK);
        ck_assert_msg(strstr(err.msg, "keeps the gradients of stage [0, 1) only"), "%s", err.msg);
        ck_assert_int_eq(mv->stage_forward(s[1].m, 0, 1, &tb.b, NULL, act, true, &o, &err), TF_OK);
        ck_assert_int_ne(mv->stage_backward(s[1].m, grad, NULL, 1.0f, &err), TF_OK);
        ck_assert_msg(strstr(err.msg, "stage_backward of layers [0, 1), but the model keeps the gradients of "
                                      "stage [1, 3) only"),
                      "%s", err.msg);
        bk->free(s[0].be, act, TF_MEM_DEVICE);
        bk->free(s[0].be, grad, TF_MEM_DEVICE);
        fixture_free(&f);
        fixture_free(&s[0]);
        fixture_free(&s[1]);
    }
}
END_TEST

/* ---- save ------------------------------------------------------------------------------ */

START_TEST(save_and_reload)
{
    if (!bk) return;
    for (int task = 0; task < 2; task++) {
        fixture f;
        create_ok(tiny_cfg(task ? "task = \"question-answering\"; layer_norm_eps = 1e-7;"
                                : "num_labels = 4; hidden_act = \"gelu_new\";"),
                  2, 6, 21, &f);
        const char *d = keep(fmt("%s/saved-%d/sub", workdir, task)); /* parents are created */
        tf_error err = {0};
        ck_assert_msg(mv->save(f.m, d, &err) == TF_OK, "%s", err.msg);
        /* config.json as transformers writes it */
        FILE *fp = fopen(fmt("%s/config.json", d), "r");
        ck_assert_ptr_nonnull(fp);
        char text[8192];
        size_t len = fread(text, 1, sizeof text - 1, fp);
        text[len] = '\0';
        fclose(fp);
        ck_assert_msg(strstr(text, task ? "\"BertForQuestionAnswering\""
                                        : "\"BertForSequenceClassification\""),
                      "%s", text);
        ck_assert_msg(strstr(text, "\"model_type\": \"bert\""), "%s", text);
        ck_assert_msg(strstr(text, "\"torch_dtype\": \"float32\""), "%s", text);
        ck_assert_msg(strstr(text, "\"classifier_dropout\": null"), "%s", text);
        ck_assert_msg(strstr(text, "\"hidden_dropout_prob\": 0.0"), "%s", text);
        ck_assert_msg(strstr(text, "\"initializer_range\": 0.02"), "%s", text);
        if (task) {
            ck_assert_msg(strstr(text, "\"layer_norm_eps\": 1e-7") ||
                              strstr(text, "\"layer_norm_eps\": 1e-07"),
                          "%s", text);
            ck_assert_msg(!strstr(text, "id2label"), "%s", text);
        } else {
            ck_assert_msg(strstr(text, "\"hidden_act\": \"gelu_new\""), "%s", text);
            ck_assert_msg(strstr(text, "\"3\": \"LABEL_3\""), "%s", text);
            ck_assert_msg(strstr(text, "\"LABEL_3\": 3"), "%s", text);
        }
        /* the safetensors file: HF names and shapes, F32, format pt */
        tf_safetensors *st = NULL;
        ck_assert_msg(tf_safetensors_open(fmt("%s/model.safetensors", d), &st, &err) == TF_OK,
                      "%s", err.msg);
        ck_assert_str_eq(tf_safetensors_metadata_get(st, "format"), "pt");
        const tf_param_info *p;
        size_t np;
        mv->params(f.m, &p, &np);
        ck_assert_uint_eq(tf_safetensors_count(st), np);
        size_t n;
        float *h = host_params(&f, &n);
        for (size_t i = 0; i < np; i++) {
            const tf_st_tensor *t = tf_safetensors_find(st, p[i].name);
            ck_assert_msg(t != NULL, "%s not saved", p[i].name);
            ck_assert_int_eq(t->dtype, TF_DTYPE_F32);
            ck_assert_int_eq(t->ndim, p[i].ndim);
            ck_assert(memcmp(t->data, h + p[i].offset, t->nbytes) == 0);
        }
        tf_safetensors_close(st);
        /* tfcore loads its own save: same task, labels, parameters */
        fixture g;
        create_ok(fmt("model = { pretrained = \"%s\"; };", d), 2, 6, 99, &g);
        const tf_model_info *info = mv->info(g.m);
        ck_assert_int_eq(info->task, task ? TF_TASK_QUESTION_ANSWERING : TF_TASK_CLASSIFICATION);
        ck_assert_int_eq(info->num_labels, task ? 2 : 4);
        size_t n2;
        float *h2 = host_params(&g, &n2);
        ck_assert_uint_eq(n, n2);
        ck_assert(memcmp(h, h2, n * 4) == 0);
        /* and saves it again identically (config.json included) */
        const char *d2 = keep(fmt("%s/resaved-%d", workdir, task));
        ck_assert_int_eq(mv->save(g.m, d2, &err), TF_OK);
        fp = fopen(fmt("%s/config.json", d2), "r");
        char text2[8192];
        size_t len2 = fread(text2, 1, sizeof text2 - 1, fp);
        text2[len2] = '\0';
        fclose(fp);
        ck_assert_str_eq(text, text2);
        free(h);
        free(h2);
        fixture_free(&g);
        fixture_free(&f);
    }
}
END_TEST

/* A malformed tokenizer_config.json is an error naming the file and the key
 * when the model is created (it used to mean "lowercase" silently). */
START_TEST(bad_tokenizer_config)
{
    if (!bk) return;
    const char *d = fresh_dir("badtokcfg");
    ckpt_opts o = {.dtype = TF_DTYPE_F32, .labels = 2};
    write_checkpoint(d, &o, "");
    write_text(fmt("%s/vocab.txt", d), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nHello\n");
    const char *cfg = keep(fmt("model = { pretrained = \"%s\"; };", d));
    const char *file = keep(fmt("%s/tokenizer_config.json", d));
    write_text(file, "{\"do_lower_case\": \"false\"}");
    expect_create_error(cfg, TF_ERR_DATA, file, "\"do_lower_case\" must be true or false", "the string \"false\"");
    write_text(file, "{\"do_lower_case\": false,");
    expect_create_error(cfg, TF_ERR_DATA, file, "not valid JSON", file);
    write_text(file, "{\"strip_accents\": 1}");
    expect_create_error(cfg, TF_ERR_DATA, file, "\"strip_accents\" must be true or false (or null)", "got a number");
}
END_TEST

START_TEST(save_tokenizer_and_labels)
{
    if (!bk) return;
    const char *d = fresh_dir("withvocab");
    ckpt_opts o = {.dtype = TF_DTYPE_F32, .labels = 3};
    write_checkpoint(d, &o, ", \"id2label\": {\"0\": \"neg\", \"1\": \"neu\", \"2\": \"pos\"}");
    write_text(fmt("%s/vocab.txt", d), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
    write_text(fmt("%s/tokenizer_config.json", d), "{\"do_lower_case\": false}");
    fixture f;
    create_ok(fmt("model = { pretrained = \"%s\"; };", d), 1, 4, 1, &f);
    const tf_model_info *info = mv->info(f.m);
    /* the folder: tf_tokenizer_load picks the file and reads tokenizer_config.json */
    ck_assert_str_eq(info->vocab_file, d);
    ck_assert(!info->do_lower_case);
    ck_assert_int_eq(info->num_labels, 3);
    const char *out = keep(fmt("%s/withvocab-out", workdir));
    tf_error err = {0};
    ck_assert_int_eq(mv->save(f.m, out, &err), TF_OK);
    struct stat sb;
    ck_assert_int_eq(stat(fmt("%s/vocab.txt", out), &sb), 0);
    ck_assert_int_eq(sb.st_size, 30);
    ck_assert_int_eq(stat(fmt("%s/tokenizer_config.json", out), &sb), 0);
    FILE *fp = fopen(fmt("%s/config.json", out), "r");
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, fp);
    text[len] = '\0';
    fclose(fp);
    ck_assert_msg(strstr(text, "\"2\": \"pos\"") && strstr(text, "\"neu\": 1"), "%s", text);
    /* saving over the folder it came from keeps the tokenizer files */
    ck_assert_int_eq(mv->save(f.m, d, &err), TF_OK);
    ck_assert_int_eq(stat(fmt("%s/vocab.txt", d), &sb), 0);
    /* a temporary file that cannot be created, a target that is a folder */
    const char *sd = fresh_dir("savefail");
    ck_assert_int_eq(mkdir(fmt("%s/config.json.tmp.%ld", sd, (long)getpid()), 0777), 0);
    ck_assert_int_eq(mv->save(f.m, sd, &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "cannot create") && strstr(err.msg, "config.json.tmp"), "%s",
                  err.msg);
    ck_assert_int_eq(rmdir(fmt("%s/config.json.tmp.%ld", sd, (long)getpid())), 0);
    ck_assert_int_eq(mkdir(fmt("%s/config.json", sd), 0777), 0);
    write_text(fmt("%s/config.json/x", sd), "x");
    ck_assert_int_eq(mv->save(f.m, sd, &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "config.json: it is a folder; not replacing it"), "%s", err.msg);
    ck_assert_int_eq(mv->save(f.m, "", &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "save needs a folder"), "%s", err.msg);
    /* a folder that cannot be created */
    write_text(fmt("%s/afile", workdir), "x");
    ck_assert_int_eq(mv->save(f.m, fmt("%s/afile/sub", workdir), &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "afile"), "%s", err.msg);
    fixture_free(&f);
}
END_TEST

/* ---- main --------------------------------------------------------------------------- */

static Suite *suite(void)
{
    Suite *s = suite_create("model_bert");
    TCase *c = tcase_create("config");
    tcase_add_checked_fixture(c, NULL, free_kept);
    tcase_add_test(c, config_presets);
    tcase_add_test(c, config_reads_every_key);
    tcase_add_test(c, config_errors);
    tcase_add_test(c, config_pretrained_errors);
    suite_add_tcase(s, c);
    TCase *m = tcase_create("model");
    tcase_add_checked_fixture(m, NULL, free_kept);
    tcase_set_timeout(m, 300);
    tcase_add_test(m, load_variants);
    tcase_add_test(m, load_missing_head_and_extras);
    tcase_add_test(m, load_errors);
    tcase_add_test(m, create_errors);
    tcase_add_test(m, layout_and_init);
    tcase_add_test(m, layout_alignment);
    tcase_add_test(m, forward_backward_contracts);
    tcase_add_test(m, deferred_loss);
    tcase_add_test(m, qa_position_clamping);
    tcase_add_test(m, dropout_streams);
    tcase_add_test(m, dropout_by_row);
    tcase_add_test(m, gradient_checkpointing);
    tcase_add_test(m, pipeline_stages);
    tcase_add_test(m, pipeline_stage_grads);
    tcase_add_test(m, unpadded_matches_padded);
    tcase_add_test(m, save_and_reload);
    tcase_add_test(m, save_tokenizer_and_labels);
    tcase_add_test(m, bad_tokenizer_config);
    suite_add_tcase(s, m);
    return s;
}

int main(void)
{
    const char *rel[] = {"plugins/model-bert", "plugins/backend-cpu"};
    tf_error err = {0};
    const tf_loaded_plugin *p = NULL;
    if (tf_test_registry(&reg, rel, 2, &err) == TF_OK) p = tf_test_plugin(reg, TF_KIND_MODEL, "bert", &err);
    if (!p) {
        fprintf(stderr, "test_model_bert: cannot load the model plugin: %s\n", err.msg);
        tf_registry_free(reg);
        return 1;
    }
    mv = p->desc->vtable;
    p = tf_test_plugin(reg, TF_KIND_BACKEND, "cpu", &err);
    bk = p ? p->desc->vtable : NULL;
    if (!bk)
        fprintf(stderr, "test_model_bert: backend-cpu not built: only the config tests run (%s)\n", err.msg);
    snprintf(workdir, sizeof workdir, "%s/test_model_bert.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(workdir)) {
        tf_registry_free(reg);
        return 1;
    }
    int failed = tf_test_run(suite(), false);
    nftw(workdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    tf_registry_free(reg);
    return failed ? 1 : 0;
}
