/* synthetic.c — the "synthetic" dataset plugin: random token ids, as in
 * Hugging Face's single-GPU efficiency guide (ids uniform in [100, 30000),
 * fixed length), for benchmarks and quick runs without any download.
 *
 * With `learnable = true` the labels are a function of the tokens, so a model
 * visibly learns:
 *   classification: each example contains its label's keyword token
 *     (KEYWORD_BASE + label) at three random positions;
 *   question-answering: the answer span is the tokens between the markers
 *     SPAN_OPEN and SPAN_CLOSE in the context.
 * Otherwise labels are random (throughput work only).
 *
 * Config (section "data"):
 *   task, num_labels, seq_len (128), num_examples (2048), eval_examples (512),
 *   seed (42), learnable (true)
 *   min_length (seq_len)   rows get a length uniform in [min_length, seq_len]
 *                          (as real text varies: IMDB reviews after WordPiece
 *                          spread from tens to hundreds of tokens); the rest
 *                          of the row is [PAD] (id 0) with attention mask 0
 *   padding ("max_length") "longest": a batch is as wide as its longest row,
 *                          transformers' padding="longest" (dynamic padding)
 *
 * Layout of a row of length T ([T] tokens, then padding to the batch width):
 *   classification:       [CLS] t1 ... t(T-2) [SEP]                 types 0
 *   question-answering:   [CLS] q1..q8 [SEP] c1 ... c(T-11) [SEP]   types 0 | 1
 * Everything is a pure function of (seed, split, row), so any sampler, shard
 * or thread count sees the same data; a row's length comes from its own
 * stream, so min_length = seq_len gives exactly the rows of a config without
 * it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config_keys.h"
#include "tfcore/dataset.h"
#include "tfcore/plugin.h"
#include "tfcore/rng.h"

#define ID_CLS 101
#define ID_SEP 102
#define ID_LOW 100      /* random ids are drawn from [ID_LOW, ID_HIGH) */
#define ID_HIGH 30000
#define KEYWORD_BASE 1000
#define SPAN_OPEN 2000
#define SPAN_CLOSE 2001
#define QUESTION_LEN 8
#define MAX_ANSWER 30

typedef struct synthetic_config {
    tf_task task;
    long long seq_len, train_examples, eval_examples, num_labels;
    long long seed, min_length;
    bool learnable, longest;
} synthetic_config;

struct tf_dataset {
    synthetic_config cfg;
    int vocab_high;  /* min(ID_HIGH, vocab_size) */
};

static const char *const task_names[] = {"classification", "question-answering", NULL};
static const char *const paddings[] = {"max_length", "longest", NULL};

/* The data section's keys (plugins/data-synthetic/README.md is generated from it). */
static const tf_cfg_key keys[] = {
    {"task", TF_CFG_KEY_CHOICE, .string_def = "classification", .choices = task_names,
     .doc = "what the rows are for: a label per row, or an answer span in a context"},
    {"seq_len", TF_CFG_KEY_INT, .int_def = 128, .int_min = 16, .int_max = 65536,
     .doc = "tokens per row, [CLS] and [SEP] included: the longest row"},
    {"min_length", TF_CFG_KEY_INT, .int_def = 3, .int_min = 3, .int_max = 65536, .default_text = "seq_len",
     .doc = "rows' lengths uniform in [min_length, seq_len], right-padded with mask 0; at least 3 "
            "(classification) or 15 (question-answering), at most seq_len"},
    {"padding", TF_CFG_KEY_CHOICE, .string_def = "max_length", .choices = paddings,
     .doc = "pad every row to seq_len, or each batch to its longest row"},
    {"num_examples", TF_CFG_KEY_INT, .int_def = 2048, .int_min = 1, .int_max = 1LL << 40,
     .doc = "rows in the train split"},
    {"eval_examples", TF_CFG_KEY_INT, .int_def = 512, .int_min = 0, .int_max = 1LL << 40,
     .doc = "rows in the eval split (0: none)"},
    {"num_labels", TF_CFG_KEY_INT, .int_def = 2, .int_min = 2, .int_max = 1000,
     .doc = "classes (classification)"},
    {"seed", TF_CFG_KEY_INT, .int_def = 42, .int_min = 0, .int_max = INT64_MAX,
     .doc = "every row is a pure function of (seed, split, row)"},
    {"learnable", TF_CFG_KEY_BOOL, .bool_def = true,
     .doc = "labels follow from the tokens (a keyword, a marked span), so a model visibly learns; false: random"},
    {0},
};
TF_PLUGIN_KEYS(keys);

static tf_status read_config(tf_section *s, synthetic_config *c, tf_error *err)
{
    const char *task;
    tf_status st;
    if ((st = tf_cfg_key_string(s, keys, "task", &task, err))) return st;
    c->task = strcmp(task, "classification") == 0 ? TF_TASK_CLASSIFICATION : TF_TASK_QUESTION_ANSWERING;
    if ((st = tf_cfg_key_int(s, keys, "seq_len", &c->seq_len, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "num_examples", &c->train_examples, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "eval_examples", &c->eval_examples, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "num_labels", &c->num_labels, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "seed", &c->seed, err))) return st;
    if ((st = tf_cfg_key_bool(s, keys, "learnable", &c->learnable, err))) return st;
    c->min_length = c->seq_len;
    if (tf_cfg_has(s, "min_length")) {
        if ((st = tf_cfg_key_int(s, keys, "min_length", &c->min_length, err))) return st;
        /* the shortest row a task can lay out: [CLS] x [SEP], or the question and a 4-token context */
        long long shortest = c->task == TF_TASK_CLASSIFICATION ? 3 : QUESTION_LEN + 7;
        if (c->min_length < shortest)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: data.min_length %lld is less than %lld, the shortest row of a %s task",
                                tf_cfg_where(s, "min_length"), c->min_length, shortest, task);
        if (c->min_length > c->seq_len)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: data.min_length %lld is more than seq_len %lld",
                                tf_cfg_where(s, "min_length"), c->min_length, c->seq_len);
    }
    const char *padding;
    if ((st = tf_cfg_key_string(s, keys, "padding", &padding, err))) return st;
    c->longest = strcmp(padding, "longest") == 0;
    return TF_OK;
}

static tf_status syn_check_config(tf_section *s, tf_error *err)
{
    synthetic_config c;
    return read_config(s, &c, err);
}

/* Rows come from tf_mix64 (libtfcore's SplitMix64) over a per-row counter,
 * so row r of a split is the same whoever asks for it and in whatever order. */
typedef struct row_rng {
    uint64_t state;
} row_rng;

static uint64_t next_u64(row_rng *r) { return tf_mix64(r->state++); }
static int uniform(row_rng *r, int lo, int hi) /* [lo, hi) */
{
    return lo + (int)(next_u64(r) % (uint64_t)(hi - lo));
}

/* A random filler token that is never a keyword or marker. */
static int32_t filler(row_rng *r, int high)
{
    for (;;) {
        int id = uniform(r, ID_LOW, high);
        if (!(id >= KEYWORD_BASE && id < KEYWORD_BASE + 1000) && id != SPAN_OPEN && id != SPAN_CLOSE)
            return id;
    }
}

static tf_status syn_open(const tf_dataset_open_args *a, tf_dataset **out, tf_error *err)
{
    synthetic_config c;
    tf_status st = read_config(a->section, &c, err);
    if (st) return st;
    if (c.task != a->task)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: data.task is '%s' but the model's task is '%s'",
                            tf_cfg_where(a->section, "task"),
                            task_names[c.task == TF_TASK_CLASSIFICATION ? 0 : 1],
                            task_names[a->task == TF_TASK_CLASSIFICATION ? 0 : 1]);
    if (c.task == TF_TASK_CLASSIFICATION && c.num_labels != a->num_labels)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: data.num_labels is %lld but the model has %d labels",
                            tf_cfg_where(a->section, "num_labels"), c.num_labels, a->num_labels);
    if (a->max_seq > 0 && c.seq_len > a->max_seq)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: data.seq_len %lld is longer than the model's %d positions",
                            tf_cfg_where(a->section, "seq_len"), c.seq_len, a->max_seq);
    if (c.task == TF_TASK_QUESTION_ANSWERING && c.seq_len < QUESTION_LEN + 3 + 4)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: question-answering needs seq_len >= %d",
                            tf_cfg_where(a->section, "seq_len"), QUESTION_LEN + 7);
    int high = a->vocab_size > 0 && a->vocab_size < ID_HIGH ? a->vocab_size : ID_HIGH;
    if (high <= SPAN_CLOSE + 1 || (c.task == TF_TASK_CLASSIFICATION && KEYWORD_BASE + c.num_labels >= high))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "synthetic data needs a vocabulary of more than %d ids, the model has %d",
                            SPAN_CLOSE + 1, a->vocab_size);
    tf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return tf_error_set(err, TF_ERR_RUNTIME, "synthetic: out of memory");
    ds->cfg = c;
    ds->vocab_high = high;
    *out = ds;
    return TF_OK;
}

static void syn_close(tf_dataset *ds) { free(ds); }

static size_t syn_num_rows(tf_dataset *ds, tf_split split)
{
    return (size_t)(split == TF_SPLIT_TRAIN ? ds->cfg.train_examples : ds->cfg.eval_examples);
}

static int syn_seq_len(tf_dataset *ds, tf_split split) { return (int)ds->cfg.seq_len; }

/* Real tokens in row `row` of `split`: uniform in [min_length, seq_len], from
 * a stream of its own (the row's tokens do not depend on it being drawn). */
static int row_length(const tf_dataset *ds, tf_split split, size_t row)
{
    const synthetic_config *c = &ds->cfg;
    if (c->min_length >= c->seq_len) return (int)c->seq_len;
    uint64_t h = tf_mix64(tf_mix64((uint64_t)c->seed * 2 + (uint64_t)split) ^ 0x9e3779b97f4a7c15ull ^
                          tf_mix64(row * 0xd1b54a32d192ed03ull));
    return (int)(c->min_length + (long long)(h % (uint64_t)(c->seq_len - c->min_length + 1)));
}

static int syn_row_length(tf_dataset *ds, tf_split split, size_t row) { return row_length(ds, split, row); }

/* Row `row` of `split` into ids/types [width] (width >= its length T): the
 * row's T tokens, then [PAD] (id 0, type 0); label or span. Returns T. */
static int make_row(const tf_dataset *ds, tf_split split, size_t row, int width, int32_t *ids, int32_t *types,
                    int32_t *label, int32_t *start, int32_t *end)
{
    const synthetic_config *c = &ds->cfg;
    int S = row_length(ds, split, row);
    row_rng r = {tf_mix64((uint64_t)c->seed * 2 + (uint64_t)split) ^ tf_mix64(row * 0x632be59bd9b4e019ull)};
    for (int i = S; i < width; i++) ids[i] = 0;
    memset(types, 0, (size_t)width * sizeof *types);
    ids[0] = ID_CLS;
    ids[S - 1] = ID_SEP;
    for (int i = 1; i < S - 1; i++) ids[i] = filler(&r, ds->vocab_high);
    if (c->task == TF_TASK_CLASSIFICATION) {
        *label = uniform(&r, 0, (int)c->num_labels);
        if (c->learnable)
            for (int k = 0; k < 3; k++) ids[uniform(&r, 1, S - 1)] = KEYWORD_BASE + *label;
        return S;
    }
    /* question-answering: [CLS] question [SEP] context [SEP] */
    int ctx0 = QUESTION_LEN + 2, ctx1 = S - 1; /* context is [ctx0, ctx1) */
    ids[QUESTION_LEN + 1] = ID_SEP;
    for (int i = ctx0; i < S; i++) types[i] = 1;
    int max_len = ctx1 - ctx0 - 2 < MAX_ANSWER ? ctx1 - ctx0 - 2 : MAX_ANSWER;
    int len = uniform(&r, 1, max_len + 1);
    int s0 = uniform(&r, ctx0 + 1, ctx1 - len); /* leaves room for both markers */
    *start = s0;
    *end = s0 + len - 1;
    if (c->learnable) {
        ids[s0 - 1] = SPAN_OPEN;
        ids[s0 + len] = SPAN_CLOSE;
    }
    return S;
}

static tf_status syn_fill_batch(tf_dataset *ds, tf_split split, const size_t *idx, size_t n,
                                tf_batch *out, tf_error *err)
{
    int S = (int)ds->cfg.seq_len;
    if ((int)n > out->capacity_rows || S > out->capacity_seq)
        return tf_error_set(err, TF_ERR_RUNTIME, "synthetic: batch of %zu x %d exceeds capacity %d x %d",
                            n, S, out->capacity_rows, out->capacity_seq);
    size_t rows = syn_num_rows(ds, split);
    for (size_t b = 0; b < n; b++)
        if (idx[b] >= rows)
            return tf_error_set(err, TF_ERR_RUNTIME, "synthetic: row %zu out of range (%zu rows)", idx[b], rows);
    if (ds->cfg.longest) { /* pad to the longest row of this batch */
        S = 0;
        for (size_t b = 0; b < n; b++) {
            int len = row_length(ds, split, idx[b]);
            S = len > S ? len : S;
        }
    }
    out->rows = (int)n;
    out->seq = S;
    for (size_t b = 0; b < n; b++) {
        int32_t label = 0, start = 0, end = 0;
        int len = make_row(ds, split, idx[b], S, out->input_ids + b * S, out->token_type_ids + b * S, &label,
                           &start, &end);
        for (int i = 0; i < S; i++) out->attention_mask[b * S + i] = i < len;
        if (out->labels) out->labels[b] = label;
        if (out->start_positions) out->start_positions[b] = start;
        if (out->end_positions) out->end_positions[b] = end;
        if (out->feature_index) out->feature_index[b] = (int64_t)idx[b];
    }
    return TF_OK;
}

/* classification: accuracy. QA: exact = best legal span equals the gold one;
 * f1 = token-overlap F1 of the spans (as SQuAD's, over positions). */
static tf_status syn_evaluate(tf_dataset *ds, tf_split split, const float *logits, size_t rows,
                              int cols, tf_metrics *out, tf_error *err)
{
    const synthetic_config *c = &ds->cfg;
    int S = (int)c->seq_len;
    int want = c->task == TF_TASK_CLASSIFICATION ? (int)c->num_labels : 2 * S;
    if (cols != want || rows != syn_num_rows(ds, split))
        return tf_error_set(err, TF_ERR_RUNTIME, "synthetic: evaluate got %zu x %d outputs, expected %zu x %d",
                            rows, cols, syn_num_rows(ds, split), want);
    int32_t *ids = malloc(2 * (size_t)S * sizeof *ids);
    if (!ids) return tf_error_set(err, TF_ERR_RUNTIME, "synthetic: out of memory");
    double correct = 0, f1_sum = 0;
    for (size_t r = 0; r < rows; r++) {
        int32_t label = 0, start = 0, end = 0;
        int len = make_row(ds, split, r, S, ids, ids + S, &label, &start, &end);
        const float *l = logits + r * (size_t)cols;
        if (c->task == TF_TASK_CLASSIFICATION) {
            int best = 0;
            for (int k = 1; k < cols; k++)
                if (l[k] > l[best]) best = k;
            correct += best == label;
            continue;
        }
        /* logits [S, 2]: (start, end) per position; context is [QUESTION_LEN+2, len-1) */
        int bs = -1, be = -1;
        float bscore = 0;
        for (int i = QUESTION_LEN + 2; i < len - 1; i++)
            for (int j = i; j < len - 1 && j < i + MAX_ANSWER; j++) {
                float sc = l[2 * i] + l[2 * j + 1];
                if (bs < 0 || sc > bscore) bs = i, be = j, bscore = sc;
            }
        correct += bs == start && be == end;
        int lo = bs > start ? bs : start, hi = be < end ? be : end;
        int overlap = hi >= lo ? hi - lo + 1 : 0;
        if (overlap) {
            double p = (double)overlap / (be - bs + 1), rc = (double)overlap / (end - start + 1);
            f1_sum += 2 * p * rc / (p + rc);
        }
    }
    free(ids);
    out->n = 0;
    double denom = rows ? (double)rows : 1.0;
    if (c->task == TF_TASK_CLASSIFICATION) {
        strcpy(out->name[out->n], "accuracy");
        out->value[out->n++] = correct / denom;
    } else {
        strcpy(out->name[out->n], "exact");
        out->value[out->n++] = 100.0 * correct / denom;
        strcpy(out->name[out->n], "f1");
        out->value[out->n++] = 100.0 * f1_sum / denom;
    }
    return TF_OK;
}

static const tf_dataset_vtable synthetic_vtable = {
    .size = TF_VTABLE_SIZE(tf_dataset_vtable),
    .check_config = syn_check_config,
    .open = syn_open,
    .close = syn_close,
    .num_rows = syn_num_rows,
    .seq_len = syn_seq_len,
    .fill_batch = syn_fill_batch,
    .evaluate = syn_evaluate,
    .row_length = syn_row_length,
};

TF_PLUGIN_DEFINE(TF_KIND_DATASET, "synthetic", "1.0.0",
                 "random token ids (HF efficiency-guide style); learnable labels on request", NULL,
                 &synthetic_vtable)
