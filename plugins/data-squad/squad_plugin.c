/* squad_plugin.c — the "squad" dataset plugin: SQuAD v1.1 / v2.0 extractive
 * question answering as transformers' examples/pytorch/question-answering
 * run_qa.py trains and evaluates it. Reads the SQuAD JSON files with
 * libtfcore's loader, builds the windows and labels once at open
 * (squad_features.c), fills batches from them, and evaluates the eval split
 * by postprocessing the start/end logits into answers (squad_postprocess.c)
 * and scoring them with the official SQuAD metrics.
 *
 * Config (section "data", run_qa's names):
 *   train_file, validation_file   SQuAD JSON (v1.1 or v2.0); at least one,
 *                                 unless path names the dataset
 *   path                          "squad" or "squad_v2": the official train and
 *                                 dev files fetched into tfcore's cache
 *                                 (tfcore/dataset_fetch.h); train_file /
 *                                 validation_file, when given, replace one of them
 *   url                           for path: the folder URL the files are under
 *   train_sha256, validation_sha256   for path: the files' sha256 (no checksum
 *                                 is published: without these, the download's
 *                                 size and sha256 are recorded, not verified)
 *   version_2_with_negative       v2 postprocessing and metrics (default: the
 *                                 validation file's version, else the train file's)
 *   max_seq_length (384)          window width, special tokens included
 *   doc_stride (128)              tokens shared by consecutive windows
 *   n_best_size (20), max_answer_length (30), null_score_diff_threshold (0.0)
 *   max_train_samples, max_eval_samples   the first N questions, then the first
 *                                 N features, as run_qa cuts both (0 = all)
 *   pad_to_max_length (true)      false: pad each batch to its longest row
 *   padding ("max_length")        "longest" = pad_to_max_length false, the key
 *                                 every tfcore dataset shares; giving both
 *                                 keys with opposite meanings is a config error
 *   vocab_file                    when the model has no vocab.txt of its own
 *   do_lower_case                 override the model's tokenizer setting
 *
 * tfcore's choices where run_qa has none to copy:
 *   - questions whose answer text is not at its answer_start (the loader
 *     flags them misaligned) are left out of training, counted in one
 *     warning; evaluation keeps them;
 *   - eval rows carry the labels run_qa's training rule gives their windows
 *     (run_qa's eval features have none, so its Trainer reports no eval_loss);
 *   - version_2_with_negative = false with unanswerable eval questions is a
 *     config error at open (the v1.1 metric cannot score them; run_qa fails
 *     only after training);
 *   - max_seq_length above the model's positions is a config error (run_qa
 *     lowers it to the tokenizer's model_max_length with a warning).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "squad_features.h"
#include "squad_plugin.h"
#include "squad_postprocess.h"
#include "tfcore/config_keys.h"
#include "tfcore/dataset.h"
#include "tfcore/dataset_fetch.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"
#include "tfcore/squad.h"
#include "tfcore/tokenizer.h"

typedef struct squad_config {
    const char *train_file, *validation_file, *vocab_file;
    const char *path, *url, *train_sha256, *validation_sha256; /* a dataset by name */
    int version_2;      /* -1: from the files */
    long long max_seq_length, doc_stride, n_best_size, max_answer_length;
    long long max_train, max_eval;
    double null_score_diff_threshold;
    int do_lower_case;  /* -1: the model's */
    bool pad_to_max_length;
} squad_config;

struct tf_dataset {
    squad_config cfg;
    int version_2;
    int32_t pad_id;
    squad_features feat[2];     /* [TF_SPLIT_TRAIN], [TF_SPLIT_EVAL] */
    tf_squad_dataset *eval;     /* the validation file: contexts, ids and gold answers */
    size_t eval_examples;       /* its questions in use (max_eval_samples) */
    char *output_dir;
};

#define SQUAD_MAX_SEQ (1 << 16)

/* The data section's keys, run_qa's names (plugins/data-squad/README.md is
 * generated from it); the checks across keys follow in read_config. */
static const char *const squad_paddings[] = {"max_length", "longest", NULL};

static const tf_cfg_key keys[] = {
    {"train_file", TF_CFG_KEY_STRING, .doc = "SQuAD JSON (v1.1 or v2.0) to train on; at least one of the two files"},
    {"validation_file", TF_CFG_KEY_STRING, .doc = "SQuAD JSON (v1.1 or v2.0) to evaluate on"},
    {"path", TF_CFG_KEY_STRING,
     .doc = "instead of the files: \"squad\" or \"squad_v2\", the official train/dev JSON fetched into tfcore's cache"},
    {"url", TF_CFG_KEY_STRING, .default_text = "the official SQuAD-explorer folder",
     .doc = "for path: the folder URL the two JSON files are fetched from"},
    {"train_sha256", TF_CFG_KEY_STRING, .default_text = "none (recorded at first download)",
     .doc = "for path: the train file's sha256, checked before it is kept"},
    {"validation_sha256", TF_CFG_KEY_STRING, .default_text = "none (recorded at first download)",
     .doc = "for path: the dev file's sha256, checked before it is kept"},
    {"version_2_with_negative", TF_CFG_KEY_BOOL, .bool_def = false, .default_text = "the files' version",
     .doc = "v2 postprocessing and metrics; unset: the validation file's version, else the train file's"},
    {"max_seq_length", TF_CFG_KEY_INT, .int_def = 384, .int_min = 4, .int_max = SQUAD_MAX_SEQ,
     .doc = "window width, special tokens included (at most the model's positions)"},
    {"doc_stride", TF_CFG_KEY_INT, .int_def = 128, .int_min = 0, .int_max = SQUAD_MAX_SEQ,
     .doc = "tokens shared by consecutive windows; less than max_seq_length - 3"},
    {"n_best_size", TF_CFG_KEY_INT, .int_def = 20, .int_min = 1, .int_max = SQUAD_MAX_SEQ,
     .doc = "start and end candidates per window in postprocessing"},
    {"max_answer_length", TF_CFG_KEY_INT, .int_def = 30, .int_min = 1, .int_max = SQUAD_MAX_SEQ,
     .doc = "longest answer, in tokens, postprocessing accepts"},
    {"null_score_diff_threshold", TF_CFG_KEY_FLOAT, .float_def = 0.0, .float_min = -INFINITY,
     .float_max = INFINITY, .doc = "v2: predict no answer when the null score beats the best span's by more"},
    {"max_train_samples", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = INT32_MAX,
     .doc = "the first N questions, then the first N features, as run_qa cuts both (0: all)"},
    {"max_eval_samples", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = INT32_MAX,
     .doc = "as max_train_samples, for evaluation"},
    {"pad_to_max_length", TF_CFG_KEY_BOOL, .bool_def = true,
     .doc = "pad every row to max_seq_length; false: each batch to its longest row"},
    {"padding", TF_CFG_KEY_CHOICE, .string_def = "max_length", .choices = squad_paddings,
     .doc = "the other datasets' name for pad_to_max_length: \"max_length\" = true, \"longest\" = false (both set must agree)"},
    {"vocab_file", TF_CFG_KEY_STRING, .doc = "a vocab.txt, for a model without one of its own; unset: the model's"},
    {"do_lower_case", TF_CFG_KEY_BOOL, .bool_def = true, .default_text = "the model's",
     .doc = "override the model's tokenizer setting"},
    {0},
};
TF_PLUGIN_KEYS(keys);

static tf_status read_config(tf_section *s, squad_config *c, tf_error *err)
{
    tf_status st;
    bool b;
    memset(c, 0, sizeof *c);
    if ((st = tf_cfg_key_string(s, keys, "train_file", &c->train_file, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "validation_file", &c->validation_file, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "path", &c->path, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "url", &c->url, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "train_sha256", &c->train_sha256, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "validation_sha256", &c->validation_sha256, err))) return st;
    if (c->path && strcmp(c->path, "squad") != 0 && strcmp(c->path, "squad_v2") != 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: data.path '%s' is not \"squad\" or \"squad_v2\" (local files go in "
                            "data.train_file / data.validation_file)",
                            tf_cfg_where(s, "path"), c->path);
    static const char *const fetch_keys[] = {"url", "train_sha256", "validation_sha256"};
    const char *fetch_vals[] = {c->url, c->train_sha256, c->validation_sha256};
    for (int i = 0; i < 3; i++) {
        if (fetch_vals[i] && !c->path)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: data.%s is for data.path = \"squad\" / \"squad_v2\"",
                                tf_cfg_where(s, fetch_keys[i]), fetch_keys[i]);
        if (i > 0 && fetch_vals[i] &&
            (strlen(fetch_vals[i]) != 64 || strspn(fetch_vals[i], "0123456789abcdefABCDEF") != 64))
            return tf_error_set(err, TF_ERR_CONFIG, "%s: data.%s '%s' is not 64 hex digits",
                                tf_cfg_where(s, fetch_keys[i]), fetch_keys[i], fetch_vals[i]);
    }
    bool set = tf_cfg_has(s, "version_2_with_negative");
    if ((st = tf_cfg_key_bool(s, keys, "version_2_with_negative", &b, err))) return st;
    c->version_2 = set ? (int)b : -1;
    if ((st = tf_cfg_key_int(s, keys, "max_seq_length", &c->max_seq_length, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "doc_stride", &c->doc_stride, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "n_best_size", &c->n_best_size, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "max_answer_length", &c->max_answer_length, err))) return st;
    if ((st = tf_cfg_key_float(s, keys, "null_score_diff_threshold", &c->null_score_diff_threshold, err)))
        return st;
    if ((st = tf_cfg_key_int(s, keys, "max_train_samples", &c->max_train, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "max_eval_samples", &c->max_eval, err))) return st;
    if ((st = tf_cfg_key_bool(s, keys, "pad_to_max_length", &c->pad_to_max_length, err))) return st;
    const char *padding;
    if ((st = tf_cfg_key_string(s, keys, "padding", &padding, err))) return st;
    if (tf_cfg_has(s, "padding")) {
        bool to_max = strcmp(padding, "max_length") == 0;
        if (tf_cfg_has(s, "pad_to_max_length") && to_max != c->pad_to_max_length)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: data.padding = \"%s\" contradicts data.pad_to_max_length = %s",
                                tf_cfg_where(s, "padding"), padding, c->pad_to_max_length ? "true" : "false");
        c->pad_to_max_length = to_max;
    }
    if ((st = tf_cfg_key_string(s, keys, "vocab_file", &c->vocab_file, err))) return st;
    set = tf_cfg_has(s, "do_lower_case");
    if ((st = tf_cfg_key_bool(s, keys, "do_lower_case", &b, err))) return st;
    c->do_lower_case = set ? (int)b : -1;
    /* [CLS] question [SEP] context [SEP]: the context's share of a window must
     * exceed the stride even for an empty question */
    if (c->doc_stride >= c->max_seq_length - 3)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: data.doc_stride %lld must be less than max_seq_length - 3 = %lld (the "
                            "windows must advance)",
                            tf_cfg_where(s, "doc_stride"), c->doc_stride, c->max_seq_length - 3);
    if (!c->train_file && !c->validation_file && !c->path)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: the squad dataset needs data.train_file and/or data.validation_file "
                            "(SQuAD JSON), or data.path = \"squad\" / \"squad_v2\" (fetched by name)",
                            tf_cfg_where(s, "plugin"));
    return TF_OK;
}

static tf_status squad_check_config(tf_section *s, tf_error *err)
{
    squad_config c;
    tf_status st = read_config(s, &c, err);
    if (st || !c.path || (c.train_file && c.validation_file)) return st;
    /* by name: offline and not cached fails here (--dry-run); nothing is downloaded */
    tf_dataset_source src = {.size = sizeof src, .url = c.url, .sha256 = {c.train_sha256, c.validation_sha256}};
    if ((st = tf_dataset_check(c.path, &src, err)))
        tf_error_prefix(err, "%s: data.path \"%s\"", tf_cfg_where(s, "path"), c.path);
    return st;
}

/* data.path "squad" / "squad_v2": the cached official files (fetched when
 * missing) for whichever of train_file / validation_file is not given. */
static tf_status resolve_path(tf_section *s, squad_config *c, char train[4200], char dev[4200], tf_error *err)
{
    if (!c->path || (c->train_file && c->validation_file)) return TF_OK;
    tf_dataset_source src = {.size = sizeof src, .url = c->url, .sha256 = {c->train_sha256, c->validation_sha256}};
    char folder[4096];
    tf_status st = tf_dataset_fetch(c->path, &src, folder, sizeof folder, err);
    if (st) {
        tf_error_prefix(err, "%s: data.path \"%s\"", tf_cfg_where(s, "path"), c->path);
        return st;
    }
    bool v2 = strcmp(c->path, "squad_v2") == 0;
    if (!c->train_file) {
        snprintf(train, 4200, "%s/%s", folder, v2 ? "train-v2.0.json" : "train-v1.1.json");
        c->train_file = train;
    }
    if (!c->validation_file) {
        snprintf(dev, 4200, "%s/%s", folder, v2 ? "dev-v2.0.json" : "dev-v1.1.json");
        c->validation_file = dev;
    }
    return TF_OK;
}

static void squad_close(tf_dataset *ds)
{
    if (!ds) return;
    squad_features_free(&ds->feat[0]);
    squad_features_free(&ds->feat[1]);
    tf_squad_free(ds->eval);
    free(ds->output_dir);
    free(ds);
}

static tf_status load_split(tf_dataset *ds, const tf_tokenizer *tok, const char *path, tf_split split,
                            int threads, tf_squad_dataset **data, tf_error *err)
{
    const squad_config *c = &ds->cfg;
    tf_status st = tf_squad_load(path, data, err);
    if (st) return st;
    squad_feature_options fo = {0};
    fo.max_seq_length = (int)c->max_seq_length;
    fo.doc_stride = (int)c->doc_stride;
    fo.pad_to_max_length = c->pad_to_max_length;
    fo.skip_misaligned = split == TF_SPLIT_TRAIN;
    fo.keep_offsets = split == TF_SPLIT_EVAL;
    fo.max_examples = (size_t)(split == TF_SPLIT_TRAIN ? c->max_train : c->max_eval);
    fo.max_features = fo.max_examples;
    fo.threads = threads;
    fo.file = path;
    squad_features *f = &ds->feat[split];
    if ((st = squad_features_build(tok, *data, &fo, f, err))) return st;
    if (f->n_skipped)
        tf_warn("%s: %zu of %zu training questions left out: their answer text is not at its answer_start "
                "(run_qa would train on them)",
                path, f->n_skipped, f->n_examples);
    if (f->n == 0)
        return tf_error_set(err, TF_ERR_DATA, "%s: no %s features (%zu questions used, %zu left out)", path,
                            split == TF_SPLIT_TRAIN ? "training" : "evaluation", f->n_examples, f->n_skipped);
    return TF_OK;
}

static tf_status squad_open(const tf_dataset_open_args *a, tf_dataset **out, tf_error *err)
{
    tf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    tf_tokenizer *tok = NULL;
    tf_squad_dataset *train = NULL;
    tf_status st = read_config(a->section, &ds->cfg, err);
    const squad_config *c = &ds->cfg;
    if (st) goto out;
    if (a->task != TF_TASK_QUESTION_ANSWERING) {
        st = tf_error_set(err, TF_ERR_CONFIG,
                          "%s: the squad dataset is for question answering, but the model is not (set "
                          "model.task = \"question-answering\")",
                          tf_cfg_where(a->section, "plugin"));
        goto out;
    }
    if (a->max_seq > 0 && c->max_seq_length > a->max_seq) {
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: data.max_seq_length %lld is more than the model's %d positions",
                          tf_cfg_where(a->section, "max_seq_length"), c->max_seq_length, a->max_seq);
        goto out;
    }
    if (a->output_dir && !(ds->output_dir = strdup(a->output_dir))) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
        goto out;
    }

    /* the model's vocab unless data.vocab_file says otherwise */
    if ((st = tf_dataset_tokenizer(a, c->vocab_file, c->do_lower_case, &tok, err))) goto out;
    ds->pad_id = tf_tokenizer_special_id(tok, TF_TOKEN_PAD);

    char fetched_train[4200], fetched_dev[4200];
    if ((st = resolve_path(a->section, &ds->cfg, fetched_train, fetched_dev, err))) goto out;
    if (c->train_file) {
        if ((st = load_split(ds, tok, c->train_file, TF_SPLIT_TRAIN, a->threads, &train, err))) goto out;
    }
    if (c->validation_file) {
        if ((st = load_split(ds, tok, c->validation_file, TF_SPLIT_EVAL, a->threads, &ds->eval, err))) goto out;
        ds->eval_examples = ds->feat[TF_SPLIT_EVAL].n_examples;
    }
    const tf_squad_dataset *ref = ds->eval ? ds->eval : train;
    ds->version_2 = c->version_2 >= 0 ? c->version_2 : ref->version == TF_SQUAD_V2;
    if (!ds->version_2 && ds->eval) { /* v1.1 metrics need a gold answer for every question */
        size_t none = 0;
        for (size_t i = 0; i < ds->eval_examples; i++) none += ds->eval->examples[i].n_answers == 0;
        if (none) {
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "%s: data.version_2_with_negative = false, but %s has %zu questions without an "
                              "answer, which SQuAD v1.1 metrics cannot score",
                              tf_cfg_where(a->section, "version_2_with_negative"), c->validation_file, none);
            goto out;
        }
    }
    tf_info("squad: %zu train features, %zu eval features (%zu questions); max_seq_length %lld, doc_stride %lld, "
            "SQuAD %s, padding %s",
            ds->feat[0].n, ds->feat[1].n, ds->eval_examples, c->max_seq_length, c->doc_stride,
            ds->version_2 ? "v2.0" : "v1.1", c->pad_to_max_length ? "max_length" : "longest");
out:
    tf_squad_free(train);
    tf_tokenizer_free(tok);
    if (st) {
        squad_close(ds);
        return st;
    }
    *out = ds;
    return TF_OK;
}

static size_t squad_num_rows(tf_dataset *ds, tf_split split) { return ds->feat[split].n; }
static int squad_seq_len(tf_dataset *ds, tf_split split) { return (int)ds->cfg.max_seq_length; }
static int squad_row_length(tf_dataset *ds, tf_split split, size_t row)
{
    return row < ds->feat[split].n ? squad_feature_len(&ds->feat[split], row) : 0;
}

static tf_status squad_fill_batch(tf_dataset *ds, tf_split split, const size_t *idx, size_t n, tf_batch *out,
                                  tf_error *err)
{
    const squad_features *f = &ds->feat[split];
    if (n > (size_t)out->capacity_rows)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: batch of %zu rows exceeds capacity %d", n,
                            out->capacity_rows);
    int S = (int)ds->cfg.max_seq_length;
    if (!ds->cfg.pad_to_max_length) S = 0;
    for (size_t b = 0; b < n; b++) {
        if (idx[b] >= f->n)
            return tf_error_set(err, TF_ERR_RUNTIME, "squad: row %zu out of range (%zu %s features)", idx[b], f->n,
                                split == TF_SPLIT_TRAIN ? "train" : "eval");
        if (!ds->cfg.pad_to_max_length && squad_feature_len(f, idx[b]) > S) S = squad_feature_len(f, idx[b]);
    }
    if (S > out->capacity_seq)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: batch of %zu x %d exceeds capacity %d x %d", n, S,
                            out->capacity_rows, out->capacity_seq);
    out->rows = (int)n;
    out->seq = S;
    for (size_t b = 0; b < n; b++) {
        size_t i = idx[b];
        int len = squad_feature_len(f, i), t1 = f->type1[i];
        int32_t *ids = out->input_ids + b * (size_t)S, *types = out->token_type_ids + b * (size_t)S;
        int32_t *mask = out->attention_mask + b * (size_t)S; /* each [S] */
        memcpy(ids, f->ids + f->tok_start[i], (size_t)len * sizeof *ids);
        for (int p = len; p < S; p++) ids[p] = ds->pad_id;
        for (int p = 0; p < S; p++) {
            types[p] = p >= t1 && p < len; /* 1 from the context to the last [SEP] */
            mask[p] = p < len;
        }
        if (out->start_positions) out->start_positions[b] = f->start_pos[i];
        if (out->end_positions) out->end_positions[b] = f->end_pos[i];
        if (out->labels) out->labels[b] = 0;
        if (out->feature_index) out->feature_index[b] = (int64_t)i;
    }
    return TF_OK;
}

static tf_status squad_evaluate(tf_dataset *ds, tf_split split, const float *logits, size_t rows, int cols,
                                tf_metrics *out, tf_error *err)
{
    if (split != TF_SPLIT_EVAL || !ds->eval)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: only the eval split (data.validation_file) can be evaluated");
    squad_pp_options po = {ds->version_2, (int)ds->cfg.n_best_size, (int)ds->cfg.max_answer_length,
                           ds->cfg.null_score_diff_threshold};
    squad_pp_result r;
    tf_status st = squad_postprocess(ds->eval, ds->eval_examples, &ds->feat[TF_SPLIT_EVAL], logits, rows, cols,
                                     &po, &r, err);
    if (st) return st;
    if (r.n_featureless)
        tf_warn("squad: %zu of %zu eval questions have no feature left after max_eval_samples = %lld (run_qa cuts "
                "features too): predicted \"empty\"",
                r.n_featureless, r.n, ds->cfg.max_eval);
    if (ds->output_dir) st = squad_write_predictions(ds->output_dir, &r, ds->version_2, err);
    /* the official metrics over the questions in use, every no-answer
     * probability 0.0 as run_qa passes them (v2 then reports best_*) */
    tf_squad_prediction *preds = malloc((r.n ? r.n : 1) * sizeof *preds); /* [r.n] */
    tf_squad_na_prob *na = malloc((r.n ? r.n : 1) * sizeof *na);         /* [r.n] */
    if (!st && (!preds || !na)) st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    if (!st) {
        for (size_t i = 0; i < r.n; i++) {
            preds[i] = (tf_squad_prediction){r.ids[i], r.texts[i]};
            na[i] = (tf_squad_na_prob){r.ids[i], 0.0, 0, 0};
        }
        tf_squad_dataset view = *ds->eval; /* the first eval_examples questions */
        view.n_examples = ds->eval_examples;
        tf_squad_eval_options eo = TF_SQUAD_EVAL_OPTIONS_DEFAULT;
        eo.version = ds->version_2 ? TF_SQUAD_V2 : TF_SQUAD_V1;
        tf_squad_result res;
        st = tf_squad_evaluate(&view, preds, r.n, ds->version_2 ? na : NULL, ds->version_2 ? r.n : 0, &eo, &res,
                               err);
        if (!st) {
            out->n = 0;
            for (int i = 0; i < res.n && out->n < TF_METRICS_MAX; i++) {
                snprintf(out->name[out->n], TF_METRIC_NAME_MAX, "%s", res.metric[i].name);
                out->value[out->n++] = res.metric[i].is_integer ? (double)res.metric[i].ivalue : res.metric[i].value;
            }
        }
    }
    free(preds);
    free(na);
    squad_pp_result_free(&r);
    return st;
}

const tf_dataset_vtable squad_dataset_vtable = {
    .size = TF_VTABLE_SIZE(tf_dataset_vtable),
    .check_config = squad_check_config,
    .open = squad_open,
    .close = squad_close,
    .num_rows = squad_num_rows,
    .seq_len = squad_seq_len,
    .fill_batch = squad_fill_batch,
    .evaluate = squad_evaluate,
    .row_length = squad_row_length,
};

const squad_features *squad_dataset_features(const tf_dataset *ds, tf_split split) { return &ds->feat[split]; }
int squad_dataset_version_2(const tf_dataset *ds) { return ds->version_2; }

TF_PLUGIN_DEFINE(TF_KIND_DATASET, "squad", "1.0.0",
                 "SQuAD v1.1/v2.0 question answering as run_qa.py: windows, labels, n-best postprocessing; EM/F1",
                 NULL, &squad_dataset_vtable)
