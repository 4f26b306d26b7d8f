/* bert_load.c — a Hugging Face checkpoint folder into the host copy of the
 * flat parameter buffer.
 *
 * Accepted as transformers accepts them: tensors in F32, F16 or BF16 (F64
 * too), converted to f32; names with or without the "bert." prefix (task
 * models vs a bare BertModel); the legacy LayerNorm.gamma / LayerNorm.beta
 * spellings. cls.* (pretraining heads) and embeddings.position_ids are skipped
 * silently. The head (classifier / qa_outputs) and the pooler may be missing:
 * they are initialised as transformers does and listed in one warning line.
 * Anything else missing, a shape that disagrees with config.json, or a
 * tensor named twice is TF_ERR_DATA; tensors the model has no use for are
 * listed in one warning line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bert.h"
#include "tfcore/safetensors.h"

#define NAME_MAX_LEN 256

/* The model's name for a checkpoint tensor (no "bert." prefix, legacy
 * LayerNorm names mapped); false when the tensor is skipped on purpose. */
static bool canonical_name(const char *file_name, char *out, size_t n)
{
    const char *s = strncmp(file_name, "bert.", 5) == 0 ? file_name + 5 : file_name;
    if (strncmp(s, "cls.", 4) == 0 || strcmp(s, "embeddings.position_ids") == 0) return false;
    snprintf(out, n, "%s", s);
    size_t len = strlen(out);
    static const struct {
        const char *old, *new_;
    } legacy[] = {{"LayerNorm.gamma", "LayerNorm.weight"}, {"LayerNorm.beta", "LayerNorm.bias"}};
    for (size_t i = 0; i < 2; i++) {
        size_t lo = strlen(legacy[i].old);
        if (len >= lo && strcmp(out + len - lo, legacy[i].old) == 0 && len - lo + strlen(legacy[i].new_) < n)
            strcpy(out + len - lo, legacy[i].new_);
    }
    return true;
}

static void format_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* A list of names for one log line: "a, b, c" (first `max` names, then a count). */
typedef struct name_list {
    char buf[2048];
    size_t len, count;
} name_list;

static void list_add(name_list *l, const char *name, bool quoted)
{
    l->count++;
    if (l->count > 24) return;
    if (l->len + strlen(name) + 8 >= sizeof l->buf) return;
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, quoted ? "%s'%s'" : "%s%s",
                               l->count > 1 ? ", " : "", name);
}

static const char *list_tail(const name_list *l, char *buf, size_t n)
{
    if (l->count > 24) snprintf(buf, n, ", ... (%zu in all)", l->count);
    else buf[0] = '\0';
    return buf;
}

/* When there is no model.safetensors (nor its shards' index), say what the folder has instead. */
static tf_status no_safetensors(const char *dir, const char *path, tf_error *err)
{
    char alt[BERT_PATH_MAX + 64];
    struct stat sb;
    snprintf(alt, sizeof alt, "%s/pytorch_model.bin", dir);
    if (stat(alt, &sb) == 0)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: only pytorch_model.bin found; model-bert reads safetensors "
                            "(re-save with save_pretrained(..., safe_serialization=True))",
                            dir);
    return tf_error_set(err, TF_ERR_DATA, "%s: %s", path, strerror(errno));
}

/* A NaN or infinite weight would make every logit NaN (predict printed
 * empty logits for it): refused with the tensor and the element. Checked on
 * the f32 values the model will use, so an F64 weight beyond f32's range
 * counts too. */
static tf_status check_finite(const char *path, const tf_st_tensor *t, const float *v, size_t n,
                              tf_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i])) continue;
        const char *what = isnan(v[i]) ? "NaN" : "infinite";
        return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%s' element %zu is %s%s; the weights must be finite",
                            path, t->name, i, what, t->dtype == TF_DTYPE_F64 ? " (as f32)" : "");
    }
    return TF_OK;
}

tf_status bert_load_pretrained(const bert_config *cfg, const bert_layout *lay, uint64_t seed,
                               float *host, tf_error *err)
{
    char path[BERT_PATH_MAX + 32], index[BERT_PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/model.safetensors", cfg->pretrained);
    snprintf(index, sizeof index, "%s.index.json", path);
    struct stat sb;
    if (stat(path, &sb) != 0 && stat(index, &sb) != 0) return no_safetensors(cfg->pretrained, path, err);

    /* model.safetensors, or the shards of model.safetensors.index.json */
    tf_safetensors_set *set = NULL;
    BERT_TRY(tf_safetensors_set_open(cfg->pretrained, "model.safetensors", &set, err));
    snprintf(path, sizeof path, "%s", tf_safetensors_set_path(set)); /* the index when sharded */
    tf_status rc = TF_OK;
    const tf_st_tensor **source = calloc(lay->nparams, sizeof *source); /* per view */
    const tf_safetensors **source_file = calloc(lay->nparams, sizeof *source_file);
    name_list extra = {0}, missing = {0};
    if (!source || !source_file) {
        rc = tf_error_set(err, TF_ERR_RUNTIME, "model-bert: out of memory loading %s", path);
        goto out;
    }

    size_t count = tf_safetensors_set_count(set);
    for (size_t i = 0; i < count; i++) {
        const tf_safetensors *file;
        const tf_st_tensor *t = tf_safetensors_set_at(set, i, &file);
        char name[NAME_MAX_LEN];
        if (!canonical_name(t->name, name, sizeof name)) continue;
        const tf_param_info *p = bert_param_find(lay, name);
        if (!p) {
            list_add(&extra, t->name, false);
            continue;
        }
        size_t k = (size_t)(p - lay->params);
        if (source[k]) {
            rc = tf_error_set(err, TF_ERR_DATA, "%s: tensors '%s' and '%s' both hold '%s'", path,
                              source[k]->name, t->name, p->name);
            goto out;
        }
        bool same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same) {
            char got[128], want[128];
            format_shape(got, sizeof got, t->ndim, t->shape);
            format_shape(want, sizeof want, p->ndim, p->shape);
            rc = tf_error_set(err, TF_ERR_DATA,
                              "%s: tensor '%s' has shape %s, but %s/config.json gives %s", path,
                              t->name, got, cfg->pretrained, want);
            goto out;
        }
        if (t->dtype != TF_DTYPE_F32 && t->dtype != TF_DTYPE_F16 && t->dtype != TF_DTYPE_BF16 &&
            t->dtype != TF_DTYPE_F64) {
            const char *dn = tf_dtype_name(t->dtype);
            rc = tf_error_set(err, TF_ERR_DATA,
                              "%s: tensor '%s' has dtype %s; model weights must be F32, F16 or BF16",
                              path, t->name, dn ? dn : "?");
            goto out;
        }
        source[k] = t;
        source_file[k] = file;
    }

    /* Every encoder tensor must be there; head and pooler may be fresh. */
    for (size_t k = 0; k < lay->nparams; k++) {
        const tf_param_info *p = &lay->params[k];
        if (source[k]) continue;
        if (bert_param_part(p->name) == BERT_PART_ENCODER) {
            rc = tf_error_set(err, TF_ERR_DATA,
                              "%s: missing tensor '%s' (looked for it with and without the "
                              "'bert.' prefix)",
                              path, p->name);
            goto out;
        }
    }
    for (size_t k = 0; k < lay->nparams; k++) {
        const tf_param_info *p = &lay->params[k];
        if (source[k]) {
            rc = tf_safetensors_copy_f32(source_file[k], source[k], host + p->offset, p->numel, err);
            if (rc != TF_OK) goto out;
            if ((rc = check_finite(tf_safetensors_path(source_file[k]), source[k], host + p->offset, p->numel, err)))
                goto out;
        } else {
            bert_init_param(cfg, p, seed, host);
            list_add(&missing, p->name, true);
        }
    }
    char tail[64];
    if (missing.count)
        tf_warn("Some weights of %s were not initialized from the model checkpoint at %s and are "
                "newly initialized: [%s%s]; train this model on a down-stream task before using "
                "it for predictions",
                bert_architecture(cfg->task), cfg->pretrained, missing.buf,
                list_tail(&missing, tail, sizeof tail));
    if (extra.count)
        tf_warn("model-bert: %s: %zu tensor%s not used by %s: %s%s", path, extra.count,
                extra.count == 1 ? "" : "s", bert_architecture(cfg->task), extra.buf,
                list_tail(&extra, tail, sizeof tail));
out:
    free(source);
    free(source_file);
    tf_safetensors_set_close(set);
    return rc;
}
