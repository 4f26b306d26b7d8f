/* bert_save.c — write the model as transformers' save_pretrained does:
 * DIR/config.json (BertConfig's fields, architectures, model_type, torch_dtype,
 * id2label/label2id when not the 2-label default) and DIR/model.safetensors
 * (Hugging Face names, F32, metadata {"format": "pt"}), each written to a
 * temporary file, fsynced and renamed. The tokenizer files of a pretrained
 * folder (vocab.txt, tokenizer_config.json, special_tokens_map.json,
 * tokenizer.json) are copied along so the folder is complete. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bert.h"
#include "tfcore/file.h"
#include "tfcore/safetensors.h"

/* mkdir -p */
static tf_status make_dirs(const char *dir, tf_error *err)
{
    char path[BERT_PATH_MAX];
    if (strlen(dir) >= sizeof path)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: save folder name too long: %s", dir);
    strcpy(path, dir);
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: cannot create %s: %s", path,
                                    strerror(errno));
            *p = saved;
        }
        if (end) break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: %s is not a folder", dir);
    return TF_OK;
}

/* Write bytes to PATH atomically (libtfcore's temp file, fsync, rename). */
static tf_status write_atomic(const char *path, const void *data, size_t len, tf_error *err)
{
    tf_file_part part = {data, len};
    return tf_file_write_atomic(path, &part, 1, err);
}

/* The fewest significant digits (<= 17) that print x so it reads back the same. */
static int roundtrip_digits(double x)
{
    char buf[40];
    for (int p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return p;
    }
    return 17;
}

static json_t *config_json(const tf_model *m, int *digits)
{
    const bert_config *c = &m->cfg;
    json_t *o = json_object();
    if (!o) return NULL;
    const double reals[] = {c->attention_dropout, c->hidden_dropout, c->initializer_range,
                            c->layer_norm_eps, c->classifier_dropout};
    *digits = 1;
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        int d = roundtrip_digits(reals[i]);
        if (d > *digits) *digits = d;
    }
    json_t *arch = json_array();
    json_array_append_new(arch, json_string(bert_architecture(c->task)));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "attention_probs_dropout_prob", json_real(c->attention_dropout));
    json_object_set_new(o, "classifier_dropout",
                        c->classifier_dropout >= 0 ? json_real(c->classifier_dropout) : json_null());
    json_object_set_new(o, "hidden_act", json_string(bert_act_name(c->act)));
    json_object_set_new(o, "hidden_dropout_prob", json_real(c->hidden_dropout));
    json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
    /* transformers leaves id2label out when it is the default LABEL_0, LABEL_1 */
    if (c->task == TF_TASK_CLASSIFICATION && (c->num_labels != 2 || m->labels)) {
        json_t *id2label = json_object(), *label2id = json_object();
        for (int i = 0; i < c->num_labels; i++) {
            char key[24], def[32];
            snprintf(key, sizeof key, "%d", i);
            snprintf(def, sizeof def, "LABEL_%d", i);
            const char *name = m->labels ? m->labels[i] : def;
            json_object_set_new(id2label, key, json_string(name));
            json_object_set_new(label2id, name, json_integer(i));
        }
        json_object_set_new(o, "id2label", id2label);
        json_object_set_new(o, "label2id", label2id);
    }
    json_object_set_new(o, "initializer_range", json_real(c->initializer_range));
    json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(o, "layer_norm_eps", json_real(c->layer_norm_eps));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
    json_object_set_new(o, "model_type", json_string("bert"));
    json_object_set_new(o, "num_attention_heads", json_integer(c->num_heads));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->num_layers));
    json_object_set_new(o, "pad_token_id",
                        c->pad_token_id >= 0 ? json_integer(c->pad_token_id) : json_null());
    json_object_set_new(o, "position_embedding_type", json_string("absolute"));
    json_object_set_new(o, "torch_dtype", json_string("float32"));
    json_object_set_new(o, "transformers_version", json_string("4.46.3"));
    json_object_set_new(o, "type_vocab_size", json_integer(c->type_vocab_size));
    json_object_set_new(o, "use_cache", json_true());
    json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
    return o;
}

static tf_status save_config(const tf_model *m, const char *dir, tf_error *err)
{
    int digits;
    json_t *o = config_json(m, &digits);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(digits))
                   : NULL;
    json_decref(o);
    if (!text) return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory (config.json)");
    size_t len = strlen(text);
    char *full = malloc(len + 2);
    tf_status st;
    if (!full) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory (config.json)");
    } else {
        memcpy(full, text, len);
        full[len] = '\n';
        char path[BERT_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/config.json", dir);
        st = write_atomic(path, full, len + 1, err);
    }
    free(full);
    free(text);
    return st;
}

static tf_status copy_file(const char *from, const char *to, tf_error *err)
{
    FILE *f = fopen(from, "rb");
    if (!f)
        return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: cannot read %s: %s", from,
                            strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    tf_status st = TF_OK;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                st = tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory copying %s",
                                  from);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            if (ferror(f))
                st = tf_error_set(err, TF_ERR_RUNTIME, "model-bert: reading %s failed", from);
            break;
        }
    }
    fclose(f);
    if (st == TF_OK) st = write_atomic(to, buf, len, err);
    free(buf);
    return st;
}

/* The tokenizer files of the pretrained folder, when saving elsewhere. */
static tf_status copy_tokenizer(const tf_model *m, const char *dir, tf_error *err)
{
    if (!m->cfg.pretrained[0]) return TF_OK;
    char a[PATH_MAX], b[PATH_MAX];
    if (realpath(m->cfg.pretrained, a) && realpath(dir, b) && strcmp(a, b) == 0) return TF_OK;
    static const char *const files[] = {"vocab.txt", "tokenizer_config.json",
                                        "special_tokens_map.json", "tokenizer.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[BERT_PATH_MAX + 64], to[BERT_PATH_MAX + 64];
        snprintf(from, sizeof from, "%s/%s", m->cfg.pretrained, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        struct stat sb;
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        BERT_TRY(copy_file(from, to, err));
    }
    return TF_OK;
}

tf_status bert_save(tf_model *m, const char *dir, tf_error *err)
{
    if (!dir || !dir[0]) return tf_error_set(err, TF_ERR_RUNTIME, "model-bert: save needs a folder");
    BERT_TRY(make_dirs(dir, err));
    const bert_layout *lay = &m->lay;
    float *host = malloc(lay->n * sizeof *host);
    tf_st_tensor *t = calloc(lay->nparams, sizeof *t);
    tf_status st = TF_OK;
    if (!host || !t) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory saving %zu parameters",
                          lay->n);
        goto out;
    }
    if ((st = bert_copy(m, host, m->params, lay->n * sizeof *host, TF_COPY_DEVICE_TO_HOST, err)) ||
        (st = bert_sync(m, err)))
        goto out;
    for (size_t i = 0; i < lay->nparams; i++) {
        const tf_param_info *p = &lay->params[i];
        t[i].name = p->name;
        t[i].dtype = TF_DTYPE_F32;
        t[i].ndim = p->ndim;
        t[i].shape = p->shape;
        t[i].data = host + p->offset;
        t[i].numel = p->numel;
        t[i].nbytes = p->numel * sizeof(float);
    }
    /* transformers refuses safetensors whose metadata lacks format=pt */
    const tf_st_kv meta[] = {{"format", "pt"}};
    char path[BERT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if ((st = tf_safetensors_write(path, t, lay->nparams, meta, 1, err))) goto out;
    if ((st = save_config(m, dir, err))) goto out;
    st = copy_tokenizer(m, dir, err);
out:
    free(host);
    free(t);
    return st;
}
