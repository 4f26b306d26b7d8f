/* imdb.c — the "imdb" dataset plugin: IMDB sentiment (2 classes) as the
 * Hugging Face hands-on trains it. Reads the Stanford aclImdb folder, a
 * `review,sentiment` CSV or a JSONL file (imdb_read.c), tokenizes every review
 * once at open with libtfcore's tokenizer ([CLS] text [SEP], truncated to
 * max_length), and fills batches padded to max_length (the hands-on's
 * padding="max_length") or to the batch's longest row (padding = "longest").
 *
 * Config (section "data"):
 *   path           aclImdb root (with train/ and test/), or one .csv / .jsonl file,
 *                  or the name "imdb": the Stanford archive fetched into tfcore's
 *                  cache (tfcore/dataset_fetch.h) unless a file or folder of
 *                  that name exists here
 *   url, sha256    for path = "imdb": where the archive comes from and its
 *                  sha256 (defaults: Stanford's URL and its published checksum)
 *   format         "auto" (by path) | "folder" | "csv" | "jsonl"
 *   eval_path      for a single-file path: the eval file (same format)
 *   eval_fraction  for a single file without eval_path: share held out for eval (0.1)
 *   max_length     tokens per row, special tokens included (default: the model's maximum)
 *   padding        "max_length" | "longest"
 *   max_train_samples, max_eval_samples   keep only the first N rows (0 = all)
 *   vocab_file     when the model has no vocab.txt of its own (a preset)
 *   do_lower_case  override the model's tokenizer setting
 *   predictions_file  write eval predictions (JSONL) to output_dir/<this name>
 *   seed           the held-out split's shuffle (default: training.seed)
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imdb_read.h"
#include "tfcore/config_keys.h"
#include "tfcore/dataset.h"
#include "tfcore/dataset_fetch.h"
#include "tfcore/file.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"
#include "tfcore/rng.h"
#include "tfcore/tokenizer.h"

typedef struct imdb_config {
    const char *path, *format, *eval_path, *padding, *vocab_file, *predictions_file;
    const char *url, *sha256; /* for path = "imdb" */
    double eval_fraction;
    long long max_length, max_train, max_eval, seed;
    int do_lower_case; /* -1: the model's */
} imdb_config;

/* One split, tokenized: ids [n, max_length] (padded with [PAD]), lengths [n]. */
typedef struct imdb_split {
    size_t n;
    int32_t *ids;
    int32_t *lengths;
    int *labels;
} imdb_split;

struct tf_dataset {
    imdb_config cfg;
    int max_length;
    bool longest;
    int32_t pad_id;
    imdb_split split[2];
    char *output_dir;
};

static const char *const formats[] = {"auto", "folder", "csv", "jsonl", NULL};
static const char *const paddings[] = {"max_length", "longest", NULL};

/* The data section's keys (plugins/data-imdb/README.md is generated from it). */
static const tf_cfg_key keys[] = {
    {"path", TF_CFG_KEY_STRING, .required = true,
     .doc = "the aclImdb root (with train/ and test/), one review,sentiment .csv or .jsonl file, or the name "
            "\"imdb\": Stanford's archive fetched into tfcore's cache (a file or folder of that name here wins)"},
    {"url", TF_CFG_KEY_STRING, .default_text = "Stanford's aclImdb_v1.tar.gz",
     .doc = "for path = \"imdb\": where the archive is fetched from"},
    {"sha256", TF_CFG_KEY_STRING, .default_text = "the published checksum (with the default url)",
     .doc = "for path = \"imdb\": the archive's sha256, checked before it is unpacked"},
    {"format", TF_CFG_KEY_CHOICE, .string_def = "auto", .choices = formats,
     .doc = "how to read path and eval_path; auto: by path (a folder, .csv, .jsonl)"},
    {"eval_path", TF_CFG_KEY_STRING, .doc = "for a single-file path: the eval file (same format); unset: eval_fraction of path"},
    {"eval_fraction", TF_CFG_KEY_FLOAT, .float_def = 0.1, .float_min = 0.0, .float_max = 0.9,
     .doc = "for a single file without eval_path: the share held out for eval"},
    {"max_length", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = 1 << 20,
     .doc = "tokens per row, special tokens included, in [3, the model's positions]; 0: the model's maximum"},
    {"padding", TF_CFG_KEY_CHOICE, .string_def = "max_length", .choices = paddings,
     .doc = "pad every row to max_length (the hands-on's padding), or each batch to its longest row"},
    {"max_train_samples", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = 1LL << 40,
     .doc = "keep only the first N training rows (0: all)"},
    {"max_eval_samples", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = 1LL << 40,
     .doc = "keep only the first N eval rows (0: all)"},
    {"vocab_file", TF_CFG_KEY_STRING, .doc = "a vocab.txt, for a model without one of its own (a preset); unset: the model's"},
    {"predictions_file", TF_CFG_KEY_STRING, .doc = "write eval predictions (JSONL) into output_dir under this file name; unset: none"},
    {"seed", TF_CFG_KEY_INT, .int_def = -1, .int_min = -1, .int_max = INT64_MAX,
     .doc = "the held-out split's shuffle; -1: training.seed"},
    {"do_lower_case", TF_CFG_KEY_BOOL, .bool_def = true, .default_text = "the model's",
     .doc = "override the model's tokenizer setting"},
    {0},
};
TF_PLUGIN_KEYS(keys);

static tf_status read_config(tf_section *s, imdb_config *c, tf_error *err)
{
    tf_status st;
    bool lower_set;
    memset(c, 0, sizeof *c);
    if ((st = tf_cfg_key_string(s, keys, "path", &c->path, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "format", &c->format, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "eval_path", &c->eval_path, err))) return st;
    if ((st = tf_cfg_key_float(s, keys, "eval_fraction", &c->eval_fraction, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "max_length", &c->max_length, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "padding", &c->padding, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "max_train_samples", &c->max_train, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "max_eval_samples", &c->max_eval, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "vocab_file", &c->vocab_file, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "predictions_file", &c->predictions_file, err))) return st;
    if ((st = tf_cfg_key_int(s, keys, "seed", &c->seed, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "url", &c->url, err))) return st;
    if ((st = tf_cfg_key_string(s, keys, "sha256", &c->sha256, err))) return st;
    if ((c->url || c->sha256) && strcmp(c->path, "imdb") != 0)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: data.%s is for data.path = \"imdb\" (fetched by name), not a path",
                            tf_cfg_where(s, c->url ? "url" : "sha256"), c->url ? "url" : "sha256");
    if (c->sha256 && (strlen(c->sha256) != 64 || strspn(c->sha256, "0123456789abcdefABCDEF") != 64))
        return tf_error_set(err, TF_ERR_CONFIG, "%s: data.sha256 '%s' is not 64 hex digits",
                            tf_cfg_where(s, "sha256"), c->sha256);
    lower_set = tf_cfg_has(s, "do_lower_case");
    bool lower = true;
    if ((st = tf_cfg_key_bool(s, keys, "do_lower_case", &lower, err))) return st;
    c->do_lower_case = lower_set ? (int)lower : -1;
    return TF_OK;
}

/* data.path: a file or folder, else the name "imdb" resolved to the
 * aclImdb folder in tfcore's cache (fetched when missing). */
static tf_status resolve_path(tf_section *s, imdb_config *c, char *buf, size_t n, tf_error *err)
{
    struct stat sb;
    if (stat(c->path, &sb) == 0 || strcmp(c->path, "imdb") != 0) return TF_OK;
    tf_dataset_source src = {.size = sizeof src, .url = c->url, .sha256 = {c->sha256, NULL}};
    tf_status st = tf_dataset_fetch(c->path, &src, buf, n, err);
    if (st) {
        tf_error_prefix(err, "%s: data.path \"imdb\"", tf_cfg_where(s, "path"));
        return st;
    }
    c->path = buf;
    if (strcmp(c->format, "auto") != 0 && strcmp(c->format, "folder") != 0)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: data.format \"%s\" does not fit data.path \"imdb\" (a folder)",
                            tf_cfg_where(s, "format"), c->format);
    return TF_OK;
}

static tf_status imdb_check_config(tf_section *s, tf_error *err)
{
    imdb_config c;
    tf_status st = read_config(s, &c, err);
    struct stat sb;
    if (st || stat(c.path, &sb) == 0 || strcmp(c.path, "imdb") != 0) return st;
    /* by name: offline and not cached fails here (--dry-run); nothing is downloaded */
    tf_dataset_source src = {.size = sizeof src, .url = c.url, .sha256 = {c.sha256, NULL}};
    if ((st = tf_dataset_check(c.path, &src, err)))
        tf_error_prefix(err, "%s: data.path \"imdb\"", tf_cfg_where(s, "path"));
    return st;
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Read one file (or folder) in the configured / detected format. */
static tf_status read_any(const char *path, const char *format, tf_imdb_data *d, tf_error *err)
{
    if (strcmp(format, "auto") == 0)
        format = is_dir(path) ? "folder" : ends_with(path, ".csv") ? "csv"
               : (ends_with(path, ".jsonl") || ends_with(path, ".json")) ? "jsonl" : NULL;
    if (!format)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "data.path %s: cannot tell its format (a folder, .csv or .jsonl); set data.format", path);
    if (strcmp(format, "folder") == 0) return tf_imdb_read_folder(path, d, err);
    if (strcmp(format, "csv") == 0) return tf_imdb_read_csv(path, d, err);
    return tf_imdb_read_jsonl(path, d, err);
}

/* Move rows [first, first+n) of `all` (in the order `order`) into a new set. */
static tf_status take_rows(tf_imdb_data *all, const size_t *order, size_t first, size_t n, tf_imdb_data *out,
                           tf_error *err)
{
    out->n = n;
    out->texts = calloc(n ? n : 1, sizeof *out->texts);
    out->lengths = calloc(n ? n : 1, sizeof *out->lengths);
    out->labels = calloc(n ? n : 1, sizeof *out->labels);
    if (!out->texts || !out->lengths || !out->labels) return tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t k = order[first + i];
        out->texts[i] = all->texts[k];
        all->texts[k] = NULL; /* ownership moves */
        out->lengths[i] = all->lengths[k];
        out->labels[i] = all->labels[k];
    }
    return TF_OK;
}

/* Split one file into train and eval: a seeded shuffle, then the last
 * eval_fraction of it is eval. */
static tf_status hold_out(tf_imdb_data *all, double fraction, uint64_t seed, tf_imdb_data *train,
                          tf_imdb_data *eval, tf_error *err)
{
    size_t n = all->n, ne = (size_t)((double)n * fraction + 0.5);
    if (ne == 0 || ne >= n)
        return tf_error_set(err, TF_ERR_DATA, "imdb: %zu reviews cannot be split with eval_fraction %g", n, fraction);
    size_t *order = malloc(n * sizeof *order);
    if (!order) return tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory");
    for (size_t i = 0; i < n; i++) order[i] = i;
    tf_rng r = tf_rng_init(seed, 0x494d4442u /* "IMDB" */);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)tf_rng_below(&r, (uint64_t)i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    tf_status st = take_rows(all, order, 0, n - ne, train, err);
    if (!st) st = take_rows(all, order, n - ne, ne, eval, err);
    free(order);
    return st;
}

static tf_status tokenize_split(tf_dataset *ds, const tf_tokenizer *tok, tf_imdb_data *d, long long limit,
                                imdb_split *out, int threads, tf_error *err)
{
    size_t n = limit > 0 && (size_t)limit < d->n ? (size_t)limit : d->n;
    size_t L = (size_t)ds->max_length;
    out->n = n;
    out->ids = malloc(n * L * sizeof *out->ids);
    out->lengths = malloc(n * sizeof *out->lengths);
    out->labels = malloc(n * sizeof *out->labels);
    int32_t *mask = malloc(n * L * sizeof *mask);
    tf_status st = TF_OK;
    if (!out->ids || !out->lengths || !out->labels || !mask)
        st = tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory for %zu x %zu token ids", n, L);
    if (!st) {
        tf_encode_options eo;
        tf_encode_options_init(&eo);
        eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
        eo.max_length = ds->max_length;
        eo.pad_to_max_length = 1;
        st = tf_tokenizer_encode_batch_fixed(tok, n, (const char *const *)d->texts, d->lengths, NULL, NULL, &eo,
                                             threads, out->ids, NULL, mask, err);
    }
    for (size_t i = 0; !st && i < n; i++) {
        int32_t len = 0;
        while ((size_t)len < L && mask[i * L + (size_t)len]) len++;
        out->lengths[i] = len;
        out->labels[i] = d->labels[i];
    }
    free(mask);
    return st;
}

static void free_split(imdb_split *s)
{
    free(s->ids);
    free(s->lengths);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

static void imdb_close(tf_dataset *ds)
{
    if (!ds) return;
    free_split(&ds->split[0]);
    free_split(&ds->split[1]);
    free(ds->output_dir);
    free(ds);
}

static tf_status imdb_open(const tf_dataset_open_args *a, tf_dataset **out, tf_error *err)
{
    tf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory");
    tf_imdb_data all = {0}, train = {0}, eval = {0};
    tf_tokenizer *tok = NULL;
    tf_status st = read_config(a->section, &ds->cfg, err);
    const imdb_config *c = &ds->cfg;
    if (st) goto out;
    if (a->task != TF_TASK_CLASSIFICATION) {
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: the imdb dataset is for classification; the model is not",
                          tf_cfg_where(a->section, "plugin"));
        goto out;
    }
    if (a->num_labels != 2) {
        st = tf_error_set(err, TF_ERR_CONFIG, "imdb has 2 labels (negative, positive); the model has num_labels = %d",
                          a->num_labels);
        goto out;
    }
    ds->max_length = c->max_length > 0 ? (int)c->max_length : a->max_seq;
    if (ds->max_length <= 2 || (a->max_seq > 0 && ds->max_length > a->max_seq)) {
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: data.max_length %d must be in [3, %d] (the model's positions)",
                          tf_cfg_where(a->section, "max_length"), ds->max_length, a->max_seq);
        goto out;
    }
    ds->longest = strcmp(c->padding, "longest") == 0;
    if (a->output_dir && !(ds->output_dir = strdup(a->output_dir))) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory");
        goto out;
    }

    /* the model's vocab unless data.vocab_file says otherwise */
    if ((st = tf_dataset_tokenizer(a, c->vocab_file, c->do_lower_case, &tok, err))) goto out;
    ds->pad_id = tf_tokenizer_special_id(tok, TF_TOKEN_PAD);

    /* the splits */
    char fetched[4096];
    if ((st = resolve_path(a->section, &ds->cfg, fetched, sizeof fetched, err))) goto out;
    if (is_dir(c->path) && (strcmp(c->format, "auto") == 0 || strcmp(c->format, "folder") == 0)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/train", c->path);
        if ((st = tf_imdb_read_folder(p, &train, err))) goto out;
        snprintf(p, sizeof p, "%s/test", c->path);
        if ((st = tf_imdb_read_folder(p, &eval, err))) goto out;
    } else if (c->eval_path) {
        if ((st = read_any(c->path, c->format, &train, err))) goto out;
        if ((st = read_any(c->eval_path, c->format, &eval, err))) goto out;
    } else {
        if ((st = read_any(c->path, c->format, &all, err))) goto out;
        uint64_t seed = c->seed >= 0 ? (uint64_t)c->seed : a->seed;
        if ((st = hold_out(&all, c->eval_fraction, seed, &train, &eval, err))) goto out;
    }
    if ((st = tokenize_split(ds, tok, &train, c->max_train, &ds->split[TF_SPLIT_TRAIN], a->threads, err))) goto out;
    if ((st = tokenize_split(ds, tok, &eval, c->max_eval, &ds->split[TF_SPLIT_EVAL], a->threads, err))) goto out;
    tf_info("imdb: %zu train and %zu eval reviews, max_length %d, padding %s", ds->split[0].n, ds->split[1].n,
            ds->max_length, c->padding);
out:
    tf_imdb_data_free(&all);
    tf_imdb_data_free(&train);
    tf_imdb_data_free(&eval);
    tf_tokenizer_free(tok);
    if (st) {
        imdb_close(ds);
        return st;
    }
    *out = ds;
    return TF_OK;
}

static size_t imdb_num_rows(tf_dataset *ds, tf_split split) { return ds->split[split].n; }
static int imdb_seq_len(tf_dataset *ds, tf_split split) { return ds->max_length; }
static int imdb_row_length(tf_dataset *ds, tf_split split, size_t row)
{
    return row < ds->split[split].n ? ds->split[split].lengths[row] : 0;
}

static tf_status imdb_fill_batch(tf_dataset *ds, tf_split split, const size_t *idx, size_t n, tf_batch *out,
                                 tf_error *err)
{
    const imdb_split *s = &ds->split[split];
    int L = ds->max_length, S = L;
    if ((int)n > out->capacity_rows || L > out->capacity_seq)
        return tf_error_set(err, TF_ERR_RUNTIME, "imdb: batch of %zu x %d exceeds capacity %d x %d", n, L,
                            out->capacity_rows, out->capacity_seq);
    for (size_t b = 0; b < n; b++)
        if (idx[b] >= s->n) return tf_error_set(err, TF_ERR_RUNTIME, "imdb: row %zu out of range", idx[b]);
    if (ds->longest) { /* pad to the longest row of this batch */
        S = 0;
        for (size_t b = 0; b < n; b++)
            if (s->lengths[idx[b]] > S) S = s->lengths[idx[b]];
    }
    out->rows = (int)n;
    out->seq = S;
    for (size_t b = 0; b < n; b++) {
        const int32_t *src = s->ids + idx[b] * (size_t)L;
        int len = s->lengths[idx[b]];
        memcpy(out->input_ids + b * (size_t)S, src, (size_t)S * sizeof *src);
        for (int i = 0; i < S; i++) {
            out->token_type_ids[b * (size_t)S + (size_t)i] = 0;
            out->attention_mask[b * (size_t)S + (size_t)i] = i < len;
        }
        if (out->labels) out->labels[b] = s->labels[idx[b]];
        if (out->feature_index) out->feature_index[b] = (int64_t)idx[b];
    }
    return TF_OK;
}

/* output_dir/<predictions_file>: one JSON line per eval row, written atomically. */
static tf_status write_predictions(tf_dataset *ds, const float *logits, size_t rows, int cols, tf_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", ds->output_dir ? ds->output_dir : ".", ds->cfg.predictions_file);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory writing %s", path);
    for (size_t r = 0; r < rows; r++) {
        const float *l = logits + r * (size_t)cols;
        fprintf(f, "{\"index\": %zu, \"label\": %d, \"prediction\": %d, \"logits\": [%.9g, %.9g]}\n", r,
                ds->split[TF_SPLIT_EVAL].labels[r], l[1] > l[0], (double)l[0], (double)l[1]);
    }
    tf_status st = fclose(f) == 0 ? tf_file_write_text_atomic(path, text, err)
                                  : tf_error_set(err, TF_ERR_RUNTIME, "imdb: out of memory writing %s", path);
    free(text);
    return st;
}

static tf_status imdb_evaluate(tf_dataset *ds, tf_split split, const float *logits, size_t rows, int cols,
                               tf_metrics *out, tf_error *err)
{
    const imdb_split *s = &ds->split[split];
    if (rows != s->n || cols != 2)
        return tf_error_set(err, TF_ERR_RUNTIME, "imdb: evaluate got %zu x %d outputs, expected %zu x 2", rows, cols,
                            s->n);
    size_t correct = 0;
    for (size_t r = 0; r < rows; r++) correct += (logits[2 * r + 1] > logits[2 * r]) == (s->labels[r] == 1);
    out->n = 1;
    snprintf(out->name[0], TF_METRIC_NAME_MAX, "accuracy");
    out->value[0] = rows ? (double)correct / (double)rows : 0;
    if (ds->cfg.predictions_file && split == TF_SPLIT_EVAL) return write_predictions(ds, logits, rows, cols, err);
    return TF_OK;
}

static const tf_dataset_vtable imdb_vtable = {
    .size = TF_VTABLE_SIZE(tf_dataset_vtable),
    .check_config = imdb_check_config,
    .open = imdb_open,
    .close = imdb_close,
    .num_rows = imdb_num_rows,
    .seq_len = imdb_seq_len,
    .fill_batch = imdb_fill_batch,
    .evaluate = imdb_evaluate,
    .row_length = imdb_row_length,
};

TF_PLUGIN_DEFINE(TF_KIND_DATASET, "imdb", "1.0.0",
                 "IMDB sentiment: aclImdb folder, review/sentiment CSV or JSONL; accuracy", NULL, &imdb_vtable)
