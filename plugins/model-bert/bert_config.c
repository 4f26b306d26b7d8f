/* bert_config.c — the "model" section, presets and a checkpoint's config.json,
 * merged into one validated bert_config.
 *
 * Precedence: the preset (or the pretrained folder's config.json, else
 * BertConfig's defaults), then every key set in the section. Keys are named as
 * in transformers' BertConfig. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bert.h"
#include "tfcore/config_keys.h"
#include "tfcore/hub.h"

typedef struct bert_preset {
    const char *name;
    int layers, hidden, heads, intermediate;
} bert_preset;

/* Google's BERT miniatures and the two original sizes; vocab 30522,
 * 512 positions, 2 token types for all. */
static const bert_preset presets[] = {
    {"bert-tiny", 2, 128, 2, 512},      {"bert-mini", 4, 256, 4, 1024},
    {"bert-small", 4, 512, 8, 2048},    {"bert-medium", 8, 512, 8, 2048},
    {"bert-base", 12, 768, 12, 3072},   {"bert-large", 24, 1024, 16, 4096},
};
static const char *const preset_names[] = {"bert-tiny",   "bert-mini", "bert-small",
                                           "bert-medium", "bert-base", "bert-large", NULL};
static const char *const task_names[] = {"classification", "question-answering", NULL};
static const char *const act_names[] = {"gelu", "gelu_new", NULL};

const char *bert_act_name(tf_gelu_kind act) { return act == TF_GELU_TANH ? "gelu_new" : "gelu"; }

const char *bert_architecture(tf_task task)
{
    return task == TF_TASK_QUESTION_ANSWERING ? "BertForQuestionAnswering"
                                              : "BertForSequenceClassification";
}

double bert_classifier_dropout(const bert_config *cfg)
{
    return cfg->classifier_dropout >= 0 ? cfg->classifier_dropout : cfg->hidden_dropout;
}

void bert_labels_free(char **labels, int n)
{
    if (!labels) return;
    for (int i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

/* BertConfig's defaults (transformers 4.46). */
static void config_defaults(bert_config *c)
{
    memset(c, 0, sizeof *c);
    c->vocab_size = 30522;
    c->hidden_size = 768;
    c->num_layers = 12;
    c->num_heads = 12;
    c->intermediate_size = 3072;
    c->max_position_embeddings = 512;
    c->type_vocab_size = 2;
    c->pad_token_id = 0;
    c->act = TF_GELU_ERF;
    c->layer_norm_eps = 1e-12;
    c->hidden_dropout = 0.1;
    c->attention_dropout = 0.1;
    c->classifier_dropout = -1;
    c->initializer_range = 0.02;
    c->task = TF_TASK_CLASSIFICATION;
    c->num_labels = 2;
}

/* ---- config.json --------------------------------------------------------- */

typedef struct json_ctx {
    const char *path; /* DIR/config.json, for messages */
    json_t *root;
    tf_error *err;
} json_ctx;

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* An integer field in [min, max], left as is when absent. null is allowed
 * (meaning "none") only where null_value is not NULL. */
static tf_status json_int(json_ctx *j, const char *key, long long min, long long max, int *out,
                          const int *null_value)
{
    json_t *v = json_object_get(j->root, key);
    if (!v) return TF_OK;
    if (json_is_null(v) && null_value) {
        *out = *null_value;
        return TF_OK;
    }
    /* transformers writes integers; 12.0 would be a float there too */
    if (!json_is_integer(v))
        return tf_error_set(j->err, TF_ERR_DATA, "%s: '%s' must be an integer, got %s", j->path,
                            key, json_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return tf_error_set(j->err, TF_ERR_DATA, "%s: '%s' must be in [%lld, %lld], got %lld",
                            j->path, key, min, max, (long long)x);
    *out = (int)x;
    return TF_OK;
}

/* A number field in [min, max] (max_open: strictly below max). */
static tf_status json_num(json_ctx *j, const char *key, double min, double max, bool max_open,
                          double *out, bool allow_null)
{
    json_t *v = json_object_get(j->root, key);
    if (!v) return TF_OK;
    if (json_is_null(v) && allow_null) {
        *out = -1;
        return TF_OK;
    }
    if (!json_is_number(v))
        return tf_error_set(j->err, TF_ERR_DATA, "%s: '%s' must be a number, got %s", j->path, key,
                            json_kind(v));
    double x = json_number_value(v);
    if (!(x >= min && (max_open ? x < max : x <= max)))
        return tf_error_set(j->err, TF_ERR_DATA, "%s: '%s' must be in [%g, %g%c, got %g", j->path,
                            key, min, max, max_open ? ')' : ']', x);
    *out = x;
    return TF_OK;
}

static tf_status json_str(json_ctx *j, const char *key, const char **out)
{
    json_t *v = json_object_get(j->root, key);
    *out = NULL;
    if (!v || json_is_null(v)) return TF_OK;
    if (!json_is_string(v))
        return tf_error_set(j->err, TF_ERR_DATA, "%s: '%s' must be a string, got %s", j->path, key,
                            json_kind(v));
    *out = json_string_value(v);
    return TF_OK;
}

/* id2label: {"0": "NEG", "1": "POS"}. Returns the count (0 when absent) and,
 * when names is not NULL and every id 0..n-1 is present, the names. */
static tf_status json_id2label(json_ctx *j, int *count, char ***names)
{
    json_t *v = json_object_get(j->root, "id2label");
    *count = 0;
    if (!v || json_is_null(v)) return TF_OK;
    if (!json_is_object(v))
        return tf_error_set(j->err, TF_ERR_DATA, "%s: 'id2label' must be an object, got %s",
                            j->path, json_kind(v));
    size_t n = json_object_size(v);
    if (n < 1 || n > BERT_MAX_LABELS)
        return tf_error_set(j->err, TF_ERR_DATA, "%s: 'id2label' has %zu entries; expected 1 to %d",
                            j->path, n, BERT_MAX_LABELS);
    *count = (int)n;
    if (!names) return TF_OK;
    char **out = calloc(n, sizeof *out);
    if (!out) return tf_error_set(j->err, TF_ERR_RUNTIME, "out of memory reading %s", j->path);
    bool complete = true;
    for (size_t i = 0; i < n && complete; i++) {
        char key[24];
        snprintf(key, sizeof key, "%zu", i);
        json_t *name = json_object_get(v, key);
        if (!name || !json_is_string(name)) {
            complete = false;
            break;
        }
        out[i] = strdup(json_string_value(name));
        if (!out[i]) complete = false;
    }
    if (!complete) {
        bert_labels_free(out, (int)n);
        out = NULL; /* written back as LABEL_i */
    }
    *names = out;
    return TF_OK;
}

/* Read DIR/config.json over the defaults in c. */
static tf_status read_config_json(bert_config *c, char ***labels, int *json_labels,
                                  tf_error *err)
{
    char path[BERT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", c->pretrained);
    json_error_t jerr;
    FILE *f;
    tf_status fst = tf_file_fopen_read(path, "model config", TF_ERR_DATA, &f, err);
    if (fst != TF_OK) return fst;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root) {
        if (jerr.line <= 0) /* the file itself: missing or unreadable */
            return tf_error_set(err, TF_ERR_DATA, "%s: %s", path, jerr.text);
        return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", path, jerr.line, jerr.column,
                            jerr.text);
    }
    json_ctx j = {path, root, err};
    tf_status st = TF_OK;
    int nlab = 0;
    if (!json_is_object(root)) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: expected a JSON object, got %s", path,
                          json_kind(root));
        goto out;
    }
    const char *s;
    if ((st = json_str(&j, "model_type", &s))) goto out;
    if (s && strcmp(s, "bert") != 0) {
        st = tf_error_set(err, TF_ERR_DATA,
                          "%s: model_type is '%s'; model-bert reads only 'bert' checkpoints", path, s);
        goto out;
    }
    if ((st = json_str(&j, "position_embedding_type", &s))) goto out;
    if (s && strcmp(s, "absolute") != 0) {
        st = tf_error_set(err, TF_ERR_DATA,
                          "%s: position_embedding_type '%s' is not supported (only 'absolute')",
                          path, s);
        goto out;
    }
    if ((st = json_str(&j, "problem_type", &s))) goto out;
    if (s && strcmp(s, "single_label_classification") != 0) {
        st = tf_error_set(err, TF_ERR_DATA,
                          "%s: problem_type '%s' is not supported (only single_label_classification)",
                          path, s);
        goto out;
    }
    const int none = -1;
    if ((st = json_int(&j, "vocab_size", 1, BERT_MAX_VOCAB, &c->vocab_size, NULL)) ||
        (st = json_int(&j, "hidden_size", 1, BERT_MAX_DIM, &c->hidden_size, NULL)) ||
        (st = json_int(&j, "num_hidden_layers", 1, BERT_MAX_LAYERS, &c->num_layers, NULL)) ||
        (st = json_int(&j, "num_attention_heads", 1, BERT_MAX_DIM, &c->num_heads, NULL)) ||
        (st = json_int(&j, "intermediate_size", 1, BERT_MAX_DIM, &c->intermediate_size, NULL)) ||
        (st = json_int(&j, "max_position_embeddings", 1, BERT_MAX_DIM,
                       &c->max_position_embeddings, NULL)) ||
        (st = json_int(&j, "type_vocab_size", 1, BERT_MAX_DIM, &c->type_vocab_size, NULL)) ||
        (st = json_int(&j, "pad_token_id", 0, BERT_MAX_VOCAB, &c->pad_token_id, &none)) ||
        (st = json_num(&j, "layer_norm_eps", 1e-30, 1, false, &c->layer_norm_eps, false)) ||
        (st = json_num(&j, "hidden_dropout_prob", 0, 1, true, &c->hidden_dropout, false)) ||
        (st = json_num(&j, "attention_probs_dropout_prob", 0, 1, true, &c->attention_dropout,
                       false)) ||
        (st = json_num(&j, "classifier_dropout", 0, 1, true, &c->classifier_dropout, true)) ||
        (st = json_num(&j, "initializer_range", 0, 10, false, &c->initializer_range, false)))
        goto out;
    if ((st = json_str(&j, "hidden_act", &s))) goto out;
    if (s) {
        if (strcmp(s, "gelu") == 0) c->act = TF_GELU_ERF;
        else if (strcmp(s, "gelu_new") == 0) c->act = TF_GELU_TANH;
        else {
            st = tf_error_set(err, TF_ERR_DATA,
                              "%s: hidden_act '%s' is not supported (model-bert has gelu, gelu_new)",
                              path, s);
            goto out;
        }
    }
    if ((st = json_id2label(&j, &nlab, labels))) goto out;
    int num_labels = nlab;
    if ((st = json_int(&j, "num_labels", 1, BERT_MAX_LABELS, &num_labels, NULL))) goto out;
    if (nlab && num_labels != nlab) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: num_labels %d disagrees with id2label (%d entries)",
                          path, num_labels, nlab);
        goto out;
    }
    *json_labels = num_labels;
    /* The task of a saved task model, from transformers' architectures list. */
    json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch) && json_array_size(arch) > 0 &&
        json_is_string(json_array_get(arch, 0))) {
        const char *a = json_string_value(json_array_get(arch, 0));
        if (strcmp(a, "BertForQuestionAnswering") == 0) {
            c->task = TF_TASK_QUESTION_ANSWERING;
        } else if (strcmp(a, "BertForSequenceClassification") == 0) {
            c->task = TF_TASK_CLASSIFICATION;
        }
    }
out:
    json_decref(root);
    if (st != TF_OK && labels && *labels) {
        bert_labels_free(*labels, nlab);
        *labels = NULL;
    }
    return st;
}

/* ---- the section ---------------------------------------------------------- */

/* The model section's keys (README.md's key section is generated from this
 * table). The keys from task on are read only when set: their default is the
 * checkpoint's (or the preset's), which the defaults here only describe. */
static const tf_cfg_key keys[] = {
    {"pretrained", TF_CFG_KEY_STRING,
     .doc = "a Hugging Face folder: `config.json`, `model.safetensors` (F32/F16/BF16) or the shards of "
            "`model.safetensors.index.json`, optionally `vocab.txt`, `tokenizer_config.json`; or, where no such "
            "folder exists, a hub name (`\"bert-base-cased\"`, `\"org/name\"`) resolved in the Hugging Face cache "
            "and downloaded when online (the project README: \"Models by Hugging Face name\"). Exactly one of pretrained and preset"},
    {"revision", TF_CFG_KEY_STRING, .string_def = "main",
     .doc = "with a hub name in pretrained: the branch, tag or commit; an error with a folder or a preset"},
    {"preset", TF_CFG_KEY_CHOICE, .choices = preset_names,
     .doc = "random init of a BERT size: bert-tiny (L2 H128 A2 I512), bert-mini (L4 H256 A4 I1024), bert-small "
            "(L4 H512 A8 I2048), bert-medium (L8 H512 A8 I2048), bert-base (L12 H768 A12 I3072), bert-large "
            "(L24 H1024 A16 I4096); vocab 30522, 512 positions, 2 token types"},
    {"task", TF_CFG_KEY_CHOICE, .string_def = "classification", .choices = task_names,
     .default_text = "the checkpoint's `architectures`, else classification",
     .doc = "the head: BertForSequenceClassification or BertForQuestionAnswering"},
    {"num_labels", TF_CFG_KEY_INT, .int_def = 2, .int_min = 1, .int_max = BERT_MAX_LABELS,
     .default_text = "the checkpoint's `id2label`, else 2",
     .doc = "classification labels, 2 or more (1, regression in transformers, is refused); question answering "
            "has exactly 2"},
    /* BertConfig's keys: they override the preset or config.json */
    {"vocab_size", TF_CFG_KEY_INT, .int_def = 30522, .int_min = 1, .int_max = BERT_MAX_VOCAB,
     .default_text = "config.json's, else 30522", .doc = "BertConfig's: token embedding rows"},
    {"hidden_size", TF_CFG_KEY_INT, .int_def = 768, .int_min = 1, .int_max = BERT_MAX_DIM,
     .default_text = "the preset's or config.json's, else 768",
     .doc = "BertConfig's: a multiple of num_attention_heads"},
    {"num_hidden_layers", TF_CFG_KEY_INT, .int_def = 12, .int_min = 1, .int_max = BERT_MAX_LAYERS,
     .default_text = "the preset's or config.json's, else 12", .doc = "BertConfig's: encoder layers"},
    {"num_attention_heads", TF_CFG_KEY_INT, .int_def = 12, .int_min = 1, .int_max = BERT_MAX_DIM,
     .default_text = "the preset's or config.json's, else 12", .doc = "BertConfig's: attention heads"},
    {"intermediate_size", TF_CFG_KEY_INT, .int_def = 3072, .int_min = 1, .int_max = BERT_MAX_DIM,
     .default_text = "the preset's or config.json's, else 3072", .doc = "BertConfig's: the feed-forward width"},
    {"hidden_act", TF_CFG_KEY_CHOICE, .string_def = "gelu", .choices = act_names,
     .default_text = "config.json's, else gelu", .doc = "BertConfig's: GELU, exact (erf) or tanh form"},
    {"max_position_embeddings", TF_CFG_KEY_INT, .int_def = 512, .int_min = 1, .int_max = BERT_MAX_DIM,
     .default_text = "config.json's, else 512", .doc = "BertConfig's: position embedding rows"},
    {"type_vocab_size", TF_CFG_KEY_INT, .int_def = 2, .int_min = 1, .int_max = BERT_MAX_DIM,
     .default_text = "config.json's, else 2", .doc = "BertConfig's: token type embedding rows"},
    {"pad_token_id", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = BERT_MAX_VOCAB - 1,
     .default_text = "config.json's, else 0", .doc = "BertConfig's: the padding token, below vocab_size"},
    {"layer_norm_eps", TF_CFG_KEY_FLOAT, .float_def = 1e-12, .float_min = 1e-30, .float_max = 1,
     .default_text = "config.json's, else 1e-12", .doc = "BertConfig's: LayerNorm's epsilon"},
    {"hidden_dropout_prob", TF_CFG_KEY_FLOAT, .float_def = 0.1, .float_min = 0, .float_max = 1, .max_open = true,
     .default_text = "config.json's, else 0.1", .doc = "BertConfig's: dropout after embeddings, attention output and "
                                                         "feed-forward"},
    {"attention_probs_dropout_prob", TF_CFG_KEY_FLOAT, .float_def = 0.1, .float_min = 0, .float_max = 1,
     .max_open = true, .default_text = "config.json's, else 0.1",
     .doc = "BertConfig's: dropout on the attention probabilities"},
    {"classifier_dropout", TF_CFG_KEY_FLOAT, .float_def = 0.1, .float_min = 0, .float_max = 1, .max_open = true,
     .default_text = "config.json's, else hidden_dropout_prob",
     .doc = "BertConfig's: dropout before the classification head"},
    {"initializer_range", TF_CFG_KEY_FLOAT, .float_def = 0.02, .float_min = 0, .float_max = 10,
     .default_text = "config.json's, else 0.02", .doc = "BertConfig's: the std of the random init"},
    {"unpad", TF_CFG_KEY_BOOL, .bool_def = true,
     .doc = "classification: run a right-padded batch without its padding (the real tokens packed, "
            "attention over each row's own length; the same results as the padded layout, see the README's "
            "\"Unpadded execution\"); false computes the padded layout"},
    {0},
};
TF_PLUGIN_KEYS(keys);

/* The BertConfig keys the section overrides, and where each goes. */
static const struct {
    const char *key;
    size_t off; /* offsetof(bert_config, ...) */
} int_keys[] = {
    {"vocab_size", offsetof(bert_config, vocab_size)},
    {"hidden_size", offsetof(bert_config, hidden_size)},
    {"num_hidden_layers", offsetof(bert_config, num_layers)},
    {"num_attention_heads", offsetof(bert_config, num_heads)},
    {"intermediate_size", offsetof(bert_config, intermediate_size)},
    {"max_position_embeddings", offsetof(bert_config, max_position_embeddings)},
    {"type_vocab_size", offsetof(bert_config, type_vocab_size)},
    {"pad_token_id", offsetof(bert_config, pad_token_id)},
}, float_keys[] = {
    {"layer_norm_eps", offsetof(bert_config, layer_norm_eps)},
    {"hidden_dropout_prob", offsetof(bert_config, hidden_dropout)},
    {"attention_probs_dropout_prob", offsetof(bert_config, attention_dropout)},
    {"classifier_dropout", offsetof(bert_config, classifier_dropout)},
    {"initializer_range", offsetof(bert_config, initializer_range)},
};
#define N_INT_KEYS (sizeof int_keys / sizeof int_keys[0])
#define N_FLOAT_KEYS (sizeof float_keys / sizeof float_keys[0])

/* A float key of the table, read as tf_cfg_float reads it (in [min, max]);
 * an open upper end is then said as "must be below" (a dropout of 1 is no model). */
static tf_status read_float(tf_section *sec, const char *name, double *out, tf_error *err)
{
    const tf_cfg_key *k = keys;
    while (k->name && strcmp(k->name, name) != 0) k++;
    if (!k->name || k->type != TF_CFG_KEY_FLOAT) return tf_cfg_key_float(sec, keys, name, out, err); /* its error */
    BERT_TRY(tf_cfg_float(sec, name, k->float_def, k->float_min, k->float_max, out, err));
    if (k->max_open && *out >= k->float_max)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: model.%s must be below %g, got %g", tf_cfg_where(sec, name),
                            name, k->float_max, *out);
    return TF_OK;
}

/* Where a value of the merged config came from, for messages. */
static const char *origin(tf_section *sec, const char *key, const bert_config *c, char *buf,
                          size_t n)
{
    if (tf_cfg_has(sec, key)) return tf_cfg_where(sec, key);
    if (c->pretrained[0]) snprintf(buf, n, "%s/config.json", c->pretrained);
    else snprintf(buf, n, "preset %s", c->preset);
    return buf;
}

tf_status bert_config_resolve(tf_section *sec, bert_config *cfg, char ***labels, tf_error *err)
{
    if (labels) *labels = NULL;
    config_defaults(cfg);

    /* Read every key first, so each is known to the config even when a later
     * check fails, and type/range errors come out in the section's terms. */
    const char *pretrained, *preset, *revision = NULL, *task = NULL, *act = NULL;
    long long num_labels = 2;
    BERT_TRY(tf_cfg_key_string(sec, keys, "pretrained", &pretrained, err));
    if (tf_cfg_has(sec, "revision")) BERT_TRY(tf_cfg_key_string(sec, keys, "revision", &revision, err));
    BERT_TRY(tf_cfg_key_string(sec, keys, "preset", &preset, err));
    /* Keys whose default depends on the checkpoint are read only when set (and
     * so do not show up with a made-up default in the dumped config);
     * tf_cfg_has records them as known either way. */
    if (tf_cfg_has(sec, "task")) BERT_TRY(tf_cfg_key_string(sec, keys, "task", &task, err));
    if (tf_cfg_has(sec, "num_labels")) BERT_TRY(tf_cfg_key_int(sec, keys, "num_labels", &num_labels, err));
    if (tf_cfg_has(sec, "hidden_act")) BERT_TRY(tf_cfg_key_string(sec, keys, "hidden_act", &act, err));
    BERT_TRY(tf_cfg_key_bool(sec, keys, "unpad", &cfg->unpad, err));
    long long ival[N_INT_KEYS] = {0};
    double fval[N_FLOAT_KEYS] = {0};
    for (size_t i = 0; i < N_INT_KEYS; i++)
        if (tf_cfg_has(sec, int_keys[i].key)) BERT_TRY(tf_cfg_key_int(sec, keys, int_keys[i].key, &ival[i], err));
    for (size_t i = 0; i < N_FLOAT_KEYS; i++)
        if (tf_cfg_has(sec, float_keys[i].key)) BERT_TRY(read_float(sec, float_keys[i].key, &fval[i], err));

    /* Where the weights come from: exactly one of pretrained and preset. */
    if (pretrained && preset)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: model.pretrained and model.preset are exclusive; set only one",
                            tf_cfg_where(sec, "preset"));
    if (!pretrained && !preset)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: model needs 'pretrained' (a Hugging Face folder) or 'preset' "
                            "(bert-tiny, bert-mini, bert-small, bert-medium, bert-base, bert-large)",
                            tf_cfg_where(sec, "pretrained"));
    if (preset && revision)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: model.revision applies to a Hugging Face name in model.pretrained, "
                            "not to a preset",
                            tf_cfg_where(sec, "revision"));
    int json_labels = 0;
    if (pretrained) {
        size_t len = strlen(pretrained);
        while (len > 1 && pretrained[len - 1] == '/') len--; /* "dir/" reads as "dir" */
        if (len == 0)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: model.pretrained is empty",
                                tf_cfg_where(sec, "pretrained"));
        if (len >= BERT_PATH_MAX - 32)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: model.pretrained is too long (%zu bytes)",
                                tf_cfg_where(sec, "pretrained"), len);
        memcpy(cfg->pretrained, pretrained, len);
        cfg->pretrained[len] = '\0';
        struct stat sb;
        if (stat(cfg->pretrained, &sb) != 0 && errno == ENOENT && tf_hub_is_repo_id(cfg->pretrained)) {
            /* not a folder here: a Hugging Face name, resolved in the shared
             * cache (fetched when online) to its snapshot folder */
            char name[128]; /* a repo id is at most 96 bytes */
            memcpy(name, cfg->pretrained, strlen(cfg->pretrained) + 1);
            tf_status hs = tf_hub_resolve_model(name, revision ? revision : "main", cfg->pretrained,
                                                sizeof cfg->pretrained, err);
            if (hs) {
                tf_error_prefix(err, "%s: model.pretrained '%s' is no folder here; as a Hugging Face name",
                                tf_cfg_where(sec, "pretrained"), name);
                return hs;
            }
            snprintf(cfg->hub_name, sizeof cfg->hub_name, "%s", name);
        } else if (revision) {
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: model.revision applies to a Hugging Face name, and model.pretrained "
                                "'%s' is a local path",
                                tf_cfg_where(sec, "revision"), cfg->pretrained);
        }
        if (stat(cfg->pretrained, &sb) != 0)
            return tf_error_set(err, TF_ERR_CONFIG, "%s: model.pretrained '%s': %s",
                                tf_cfg_where(sec, "pretrained"), cfg->pretrained, strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: model.pretrained '%s' is not a folder (expected one with "
                                "config.json and model.safetensors)",
                                tf_cfg_where(sec, "pretrained"), cfg->pretrained);
        BERT_TRY(read_config_json(cfg, labels, &json_labels, err));
    } else {
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
            if (strcmp(presets[i].name, preset) != 0) continue;
            cfg->num_layers = presets[i].layers;
            cfg->hidden_size = presets[i].hidden;
            cfg->num_heads = presets[i].heads;
            cfg->intermediate_size = presets[i].intermediate;
        }
        snprintf(cfg->preset, sizeof cfg->preset, "%s", preset);
    }

    /* The section's overrides. */
    for (size_t i = 0; i < N_INT_KEYS; i++)
        if (tf_cfg_has(sec, int_keys[i].key)) *(int *)((char *)cfg + int_keys[i].off) = (int)ival[i];
    for (size_t i = 0; i < N_FLOAT_KEYS; i++)
        if (tf_cfg_has(sec, float_keys[i].key))
            *(double *)((char *)cfg + float_keys[i].off) = fval[i];
    if (act)
        cfg->act = strcmp(act, "gelu_new") == 0 ? TF_GELU_TANH : TF_GELU_ERF;
    if (task)
        cfg->task = strcmp(task, "question-answering") == 0 ? TF_TASK_QUESTION_ANSWERING
                                                            : TF_TASK_CLASSIFICATION;

    tf_status st = TF_OK;
    char buf[BERT_PATH_MAX + 32];
    if (cfg->task == TF_TASK_QUESTION_ANSWERING) {
        if (tf_cfg_has(sec, "num_labels") && num_labels != 2) {
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "%s: model.num_labels is %lld, but question answering has exactly 2 "
                              "outputs (start, end); leave num_labels out",
                              tf_cfg_where(sec, "num_labels"), num_labels);
            goto fail;
        }
        cfg->num_labels = 2;
    } else {
        cfg->num_labels = tf_cfg_has(sec, "num_labels") ? (int)num_labels
                          : json_labels > 0            ? json_labels
                                                       : 2;
        if (cfg->num_labels < 2) {
            st = tf_error_set(err, tf_cfg_has(sec, "num_labels") ? TF_ERR_CONFIG : TF_ERR_DATA,
                              "%s: num_labels 1 means regression (MSE loss) in transformers, which "
                              "model-bert does not implement; use 2 or more labels",
                              origin(sec, "num_labels", cfg, buf, sizeof buf));
            goto fail;
        }
    }
    if (labels && *labels) {
        /* names of another head are not ours; LABEL_0, LABEL_1, ... are the default */
        bool keep = json_labels == cfg->num_labels;
        bool defaults = true;
        for (int i = 0; keep && defaults && i < json_labels; i++) {
            char def[32];
            snprintf(def, sizeof def, "LABEL_%d", i);
            defaults = strcmp((*labels)[i], def) == 0;
        }
        if (!keep || defaults) {
            bert_labels_free(*labels, json_labels);
            *labels = NULL;
        }
    }
    if (cfg->hidden_size % cfg->num_heads != 0) {
        const char *where = tf_cfg_has(sec, "num_attention_heads")
                                ? tf_cfg_where(sec, "num_attention_heads")
                                : origin(sec, "hidden_size", cfg, buf, sizeof buf);
        st = tf_error_set(err, tf_cfg_has(sec, "num_attention_heads") ||
                                       tf_cfg_has(sec, "hidden_size") || !cfg->pretrained[0]
                                   ? TF_ERR_CONFIG
                                   : TF_ERR_DATA,
                          "%s: hidden_size %d is not a multiple of num_attention_heads %d", where,
                          cfg->hidden_size, cfg->num_heads);
        goto fail;
    }
    if (cfg->pad_token_id >= cfg->vocab_size) {
        st = tf_error_set(err, tf_cfg_has(sec, "pad_token_id") || tf_cfg_has(sec, "vocab_size") ||
                                       !cfg->pretrained[0]
                                   ? TF_ERR_CONFIG
                                   : TF_ERR_DATA,
                          "%s: pad_token_id %d is outside the vocabulary (vocab_size %d)",
                          origin(sec, "pad_token_id", cfg, buf, sizeof buf), cfg->pad_token_id,
                          cfg->vocab_size);
        goto fail;
    }
    /* Sizes each in range can still multiply to a model no machine holds:
     * say so before trying to allocate it. The host keeps one fp32 copy of
     * the parameters (and training adds gradients and two AdamW moments). */
    double H = cfg->hidden_size, I = cfg->intermediate_size, L = cfg->num_layers;
    double nparams = (double)(cfg->vocab_size + cfg->max_position_embeddings + cfg->type_vocab_size) * H +
                     L * (4 * H * H + 2 * H * I + 9 * H + I) + H * H + 3 * H;
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (ram > 0 && nparams * sizeof(float) > ram) {
        const char *where = origin(sec, "hidden_size", cfg, buf, sizeof buf);
        st = tf_error_set(err, cfg->pretrained[0] && !tf_cfg_has(sec, "hidden_size") ? TF_ERR_DATA : TF_ERR_CONFIG,
                          "%s: this model has %.3g parameters (%.3g GB as fp32), more than this machine's "
                          "memory (%.3g GB): vocab_size %d, hidden_size %d, num_hidden_layers %d, "
                          "intermediate_size %d, max_position_embeddings %d",
                          where, nparams, nparams * 4 / 1e9, ram / 1e9, cfg->vocab_size, cfg->hidden_size,
                          cfg->num_layers, cfg->intermediate_size, cfg->max_position_embeddings);
        goto fail;
    }
    return TF_OK;
fail:
    if (labels && *labels) {
        bert_labels_free(*labels, json_labels);
        *labels = NULL;
    }
    return st;
}
