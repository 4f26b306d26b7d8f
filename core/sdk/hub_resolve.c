/* hub_resolve.c — a model name to its snapshot folder in the Hugging Face
 * cache (tf_hub_resolve_model): from the cache offline, fetching what is
 * missing online (hub_download.c) into the cache's layout (hub_cache.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_internal.h"
#include "tfcore/log.h"

/* The files a BERT-style encoder needs from its repo. */
static const hub_file model_files[] = {
    {"config.json", true},
    {"vocab.txt", false},
    {"tokenizer_config.json", false},
    {"tokenizer.json", false},
    {"special_tokens_map.json", false},
};
#define N_MODEL_FILES (sizeof model_files / sizeof model_files[0])
/* The weights: one file, or (transformers' big checkpoints) an index naming
 * the shards, as from_pretrained looks for them. */
#define WEIGHTS_FILE "model.safetensors"
#define WEIGHTS_INDEX "model.safetensors.index.json"
/* An index larger than this is not one (a 100-shard model's is ~100 KB). */
#define INDEX_MAX_BYTES ((size_t)64 << 20)

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The shards the index in snapshot `folder` names (hub_index_shards). */
static tf_status read_index(const char *folder, char ***names, size_t *n, tf_error *err)
{
    char path[TF_HUB_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", folder, WEIGHTS_INDEX);
    FILE *f = fopen(path, "rb");
    if (!f) return tf_error_set(err, TF_ERR_DATA, "cannot open %s: %s", path, strerror(errno));
    char *text = malloc(INDEX_MAX_BYTES + 1);
    size_t len = text ? fread(text, 1, INDEX_MAX_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    tf_status st;
    if (!text) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    else if (bad) st = tf_error_set(err, TF_ERR_DATA, "cannot read %s", path);
    else if (len > INDEX_MAX_BYTES) st = tf_error_set(err, TF_ERR_DATA, "%s: larger than %zu bytes: not an index", path, INDEX_MAX_BYTES);
    else st = hub_index_shards(text, len, path, names, n, err);
    free(text);
    return st;
}

/* The weights are in snapshot `folder`: the single file, or the index and
 * every shard it names. */
static bool weights_complete(const char *folder)
{
    char path[TF_HUB_PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", folder, WEIGHTS_FILE);
    if (is_file(path)) return true;
    char **names;
    size_t n;
    tf_error e = {0};
    if (read_index(folder, &names, &n, &e) != TF_OK) return false;
    bool all = true;
    for (size_t i = 0; all && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", folder, names[i]);
        all = is_file(path);
    }
    hub_shards_free(names, n);
    return all;
}

/* Fetch the weights at commit: model.safetensors, else (a 404 on it) the
 * index and every shard it names, each checked as any other file. A bad
 * index is refused and taken out of the snapshot again. */
static tf_status fetch_weights(const hub_env *env, const char *repo, const char *storage, const char *commit,
                               tf_error *err)
{
    char c[41];
    bool absent = false;
    hub_file single = {WEIGHTS_FILE, false}, index = {WEIGHTS_INDEX, false};
    tf_status st = hub_fetch_file(env, repo, storage, commit, &single, c, &absent, err);
    if (st || !absent) return st;
    if ((st = hub_fetch_file(env, repo, storage, commit, &index, c, &absent, err))) return st;
    if (absent) { /* neither: the answer (and hint) for the single file, required */
        single.required = true;
        return hub_fetch_file(env, repo, storage, commit, &single, c, &absent, err);
    }
    char folder[TF_HUB_PATH_MAX + 64], path[TF_HUB_PATH_MAX + 128];
    snprintf(folder, sizeof folder, "%s/snapshots/%s", storage, commit);
    char **names;
    size_t n;
    if ((st = read_index(folder, &names, &n, err))) {
        snprintf(path, sizeof path, "%s/%s", folder, WEIGHTS_INDEX);
        unlink(path); /* the snapshot never offers an index it cannot use */
        return st;
    }
    for (size_t i = 0; !st && i < n; i++) {
        hub_file shard = {names[i], true};
        st = hub_fetch_file(env, repo, storage, commit, &shard, c, &absent, err);
    }
    hub_shards_free(names, n);
    return st;
}

/* The snapshot folder for commit when it holds every required file. */
static bool snapshot_complete(const char *storage, const char *commit, char *folder, size_t n)
{
    char path[TF_HUB_PATH_MAX + 64];
    if (snprintf(folder, n, "%s/snapshots/%s", storage, commit) >= (int)n) return false;
    for (size_t i = 0; i < N_MODEL_FILES; i++) {
        if (!model_files[i].required) continue;
        snprintf(path, sizeof path, "%s/%s", folder, model_files[i].name);
        if (!is_file(path)) return false;
    }
    return weights_complete(folder);
}

static tf_status not_cached(const char *repo, const char *revision, const hub_env *env,
                            const char *storage, const char *why, tf_error *err)
{
    char commit[41];
    const char *what = "is not in";
    if (hub_cache_commit(storage, revision, commit)) what = "is incomplete in";
    return tf_error_set(err, TF_ERR_DATA,
                        "model '%s' (revision '%s') %s the Hugging Face cache %s (%s); fetch it "
                        "with `tfcore download %s%s%s` on a machine with internet%s (same HF_HOME / "
                        "HF_HUB_CACHE)",
                        repo, revision, what, env->cache, why, repo,
                        strcmp(revision, "main") ? " --revision " : "",
                        strcmp(revision, "main") ? revision : "",
                        tf_hub_can_download() ? "" : " and a tfcore built with libcurl (or `huggingface-cli download`)");
}

tf_status tf_hub_resolve_model(const char *repo, const char *revision, char *folder, size_t n,
                               tf_error *err)
{
    if (!revision || !revision[0]) revision = "main";
    if (!tf_hub_is_repo_id(repo))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "'%s' is neither a folder nor a Hugging Face model name (org/name)", repo);
    if (!hub_revision_is_safe(revision))
        return tf_error_set(err, TF_ERR_CONFIG, "revision '%s' is not a branch, tag or commit name",
                            revision);
    hub_env env;
    tf_status st = hub_env_read(&env, err);
    if (st) return st;
    char storage[TF_HUB_PATH_MAX], rf[256];
    hub_repo_folder(repo, rf, sizeof rf);
    if (snprintf(storage, sizeof storage, "%s/%s", env.cache, rf) >= (int)sizeof storage)
        return tf_error_set(err, TF_ERR_CONFIG, "the Hugging Face cache path is too long");

    char commit[41];
    bool offline = env.offline || !tf_hub_can_download();
    if (offline) {
        const char *why = env.offline ? "offline: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set"
                                      : "this tfcore was built without libcurl";
        if (!hub_cache_commit(storage, revision, commit) ||
            !snapshot_complete(storage, commit, folder, n))
            return not_cached(repo, revision, &env, storage, why, err);
        return TF_OK;
    }

    /* Online: the first file fixes the commit; the rest are fetched at that
     * commit so one snapshot is never a mix of two. */
    char at[256];
    snprintf(at, sizeof at, "%s", revision);
    char first_commit[41] = "";
    for (size_t i = 0; i < N_MODEL_FILES; i++) {
        bool absent = false;
        st = hub_fetch_file(&env, repo, storage, at, &model_files[i], commit, &absent, err);
        if (st == TF_ERR_RUNTIME && i == 0 && hub_cache_commit(storage, revision, commit) &&
            snapshot_complete(storage, commit, folder, n)) {
            /* as huggingface_hub: a server out of reach falls back to the cache */
            tf_warn("%s; using the cached %s at %s", err ? err->msg : "the hub cannot be reached",
                    repo, commit);
            tf_error_clear(err);
            return TF_OK;
        }
        if (st) return st;
        if (!first_commit[0]) {
            memcpy(first_commit, commit, 41);
            snprintf(at, sizeof at, "%s", commit);
        }
    }
    if ((st = fetch_weights(&env, repo, storage, first_commit, err))) return st;
    st = hub_write_ref(storage, revision, first_commit, err);
    if (st) return st;
    if (!snapshot_complete(storage, first_commit, folder, n))
        return tf_error_set(err, TF_ERR_RUNTIME, "the snapshot %s/snapshots/%s is incomplete after the download",
                            storage, first_commit);
    return TF_OK;
}
