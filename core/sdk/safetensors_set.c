/* safetensors_set.c — a model folder's weights as one list of tensors: the
 * single model.safetensors, or the shards its index names
 * (tfcore/safetensors.h, tf_safetensors_set_open). */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/file_read.h"
#include "tfcore/safetensors.h"

struct tf_safetensors_set {
    char *path;              /* the index, or the single file */
    tf_safetensors **files;  /* [nfiles] */
    size_t nfiles;
    size_t count;            /* tensors of every file */
};

void tf_safetensors_set_close(tf_safetensors_set *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->nfiles; i++) tf_safetensors_close(set->files[i]);
    free(set->files);
    free(set->path);
    free(set);
}

const char *tf_safetensors_set_path(const tf_safetensors_set *set) { return set->path; }

size_t tf_safetensors_set_count(const tf_safetensors_set *set) { return set->count; }

const tf_st_tensor *tf_safetensors_set_at(const tf_safetensors_set *set, size_t i, const tf_safetensors **file)
{
    for (size_t f = 0; f < set->nfiles; f++) {
        size_t n = tf_safetensors_count(set->files[f]);
        if (i < n) {
            if (file) *file = set->files[f];
            return tf_safetensors_at(set->files[f], i);
        }
        i -= n;
    }
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* The index's shard names, checked and sorted without repeats, into *names
 * (pointers into the JSON, which outlives them). */
static tf_status shard_names(const char *index, json_t *map, const char ***names, size_t *n, tf_error *err)
{
    size_t cap = json_object_size(map);
    const char **v = calloc(cap ? cap : 1, sizeof *v);
    if (!v) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", index);
    size_t k = 0;
    const char *tensor;
    json_t *file;
    json_object_foreach(map, tensor, file) {
        const char *s = json_string_value(file);
        /* names go into one-line errors: none may carry a control byte */
        if (has_control(tensor) || (s && has_control(s))) {
            free(v);
            return tf_error_set(err, TF_ERR_DATA, "%s: weight_map entry %zu: a control character in its %s", index,
                                k + 1, has_control(tensor) ? "tensor name" : "shard name");
        }
        if (!s) {
            free(v);
            return tf_error_set(err, TF_ERR_DATA, "%s: weight_map['%s'] is not a string", index, tensor);
        }
        /* a shard lives in the folder itself: no path may lead out of it */
        if (!*s || strchr(s, '/') || strchr(s, '\\') || !strcmp(s, ".") || !strcmp(s, "..")) {
            free(v);
            return tf_error_set(err, TF_ERR_DATA,
                                "%s: weight_map['%s'] = '%s': a shard must be a file name in the model's folder",
                                index, tensor, s);
        }
        v[k++] = s;
    }
    qsort(v, k, sizeof *v, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || strcmp(v[u - 1], v[i])) v[u++] = v[i];
    *names = v;
    *n = u;
    return TF_OK;
}

/* Every tensor of shard `file` (named `shard`) mapped to it, and every mapped
 * tensor of it present. */
static tf_status check_shard(const char *index, json_t *map, const char *shard, tf_safetensors_set *set,
                             tf_error *err)
{
    tf_safetensors *st = set->files[set->nfiles - 1];
    size_t n = tf_safetensors_count(st);
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *t = tf_safetensors_at(st, i);
        const char *want = json_string_value(json_object_get(map, t->name));
        if (!want)
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%s' of shard '%s' is not in the weight_map", index,
                                t->name, shard);
        if (strcmp(want, shard) != 0) {
            return tf_error_set(err, TF_ERR_DATA,
                                "%s: tensor '%s' is in shard '%s', but the weight_map puts it in '%s' (a tensor "
                                "may be in one shard only)",
                                index, t->name, shard, want);
        }
    }
    const char *tensor;
    json_t *file;
    json_object_foreach(map, tensor, file) {
        if (strcmp(json_string_value(file), shard) == 0 && !tf_safetensors_find(st, tensor))
            return tf_error_set(err, TF_ERR_DATA, "%s: the weight_map puts tensor '%s' in shard '%s', which does not hold it",
                                index, tensor, shard);
    }
    return TF_OK;
}

static tf_status open_sharded(tf_safetensors_set *set, const char *dir, tf_error *err)
{
    const char *index = set->path;
    FILE *f;
    tf_status st = tf_file_fopen_read(index, NULL, TF_ERR_DATA, &f, err);
    if (st) return st;
    json_error_t je;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root) return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", index, je.line, je.column, je.text);
    json_t *map = json_object_get(root, "weight_map");
    const char **names = NULL;
    size_t nnames = 0;
    if (!json_is_object(root) || !json_is_object(map) || json_object_size(map) == 0)
        st = tf_error_set(err, TF_ERR_DATA, "%s: no \"weight_map\" object naming each tensor's shard", index);
    if (!st) st = shard_names(index, map, &names, &nnames, err);
    if (!st && !(set->files = calloc(nnames, sizeof *set->files)))
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", index);
    for (size_t i = 0; !st && i < nnames; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: shard path %s/%s is too long", index, dir, names[i]);
            break;
        }
        if ((st = tf_safetensors_open(path, &set->files[set->nfiles], err))) {
            tf_error_prefix(err, "%s: shard '%s'", index, names[i]);
            break;
        }
        set->nfiles++;
        st = check_shard(index, map, names[i], set, err);
        if (!st) set->count += tf_safetensors_count(set->files[set->nfiles - 1]);
    }
    free(names);
    json_decref(root);
    return st;
}

tf_status tf_safetensors_set_open(const char *dir, const char *name, tf_safetensors_set **out, tf_error *err)
{
    *out = NULL;
    char single[4096], index[4096];
    if (snprintf(single, sizeof single, "%s/%s", dir, name) >= (int)sizeof single ||
        snprintf(index, sizeof index, "%s/%s.index.json", dir, name) >= (int)sizeof index)
        return tf_error_set(err, TF_ERR_DATA, "%s: path too long", dir);
    struct stat sb;
    bool sharded = stat(single, &sb) != 0 && errno == ENOENT && stat(index, &sb) == 0;
    if (!sharded && stat(single, &sb) != 0)
        return tf_error_set(err, TF_ERR_DATA, "%s: %s", single, strerror(errno));
    tf_safetensors_set *set = calloc(1, sizeof *set);
    if (!set || !(set->path = strdup(sharded ? index : single))) {
        free(set);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", dir);
    }
    tf_status st;
    if (sharded) {
        st = open_sharded(set, dir, err);
    } else if (!(set->files = calloc(1, sizeof *set->files))) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", single);
    } else if (!(st = tf_safetensors_open(single, &set->files[0], err))) {
        set->nfiles = 1;
        set->count = tf_safetensors_count(set->files[0]);
    }
    if (st) {
        tf_safetensors_set_close(set);
        return st;
    }
    *out = set;
    return TF_OK;
}
