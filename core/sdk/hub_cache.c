/* hub_cache.c — the Hugging Face cache on disk: where it is (the same
 * environment variables as huggingface_hub), the models--org--name layout,
 * refs and snapshot links, and resolving a model name to its snapshot folder
 * (from the cache offline, fetching what is missing online). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_internal.h"
#include "tfcore/file.h"
#include "tfcore/log.h"

/* huggingface_hub's _is_true: "1", "ON", "YES", "TRUE" in any case */
static bool env_true(const char *name)
{
    const char *v = getenv(name);
    if (!v) return false;
    return strcasecmp(v, "1") == 0 || strcasecmp(v, "on") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "true") == 0;
}

/* out = a followed by b */
static tf_status set_path(char *out, size_t n, const char *what, tf_error *err, const char *a,
                          const char *b)
{
    int w = snprintf(out, n, "%s%s", a, b);
    if (w < 0 || (size_t)w >= n)
        return tf_error_set(err, TF_ERR_CONFIG, "%s is too long (%d bytes)", what, w);
    return TF_OK;
}

tf_status hub_env_read(hub_env *env, tf_error *err)
{
    memset(env, 0, sizeof *env);
    const char *home = getenv("HOME");
    if (!home || !home[0]) home = "/";
    /* HF_HOME = $HF_HOME, else ${XDG_CACHE_HOME:-~/.cache}/huggingface */
    char hf_home[4096];
    const char *v = getenv("HF_HOME");
    tf_status st;
    if (v && v[0]) st = set_path(hf_home, sizeof hf_home, "HF_HOME", err, v, "");
    else if ((v = getenv("XDG_CACHE_HOME")) && v[0])
        st = set_path(hf_home, sizeof hf_home, "XDG_CACHE_HOME", err, v, "/huggingface");
    else st = set_path(hf_home, sizeof hf_home, "HOME", err, home, "/.cache/huggingface");
    if (st) return st;
    /* HF_HUB_CACHE, else the older HUGGINGFACE_HUB_CACHE, else HF_HOME/hub */
    if ((v = getenv("HF_HUB_CACHE")) && v[0]) st = set_path(env->cache, sizeof env->cache, "HF_HUB_CACHE", err, v, "");
    else if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && v[0])
        st = set_path(env->cache, sizeof env->cache, "HUGGINGFACE_HUB_CACHE", err, v, "");
    else st = set_path(env->cache, sizeof env->cache, "HF_HOME", err, hf_home, "/hub");
    if (st) return st;
    v = getenv("HF_ENDPOINT");
    st = set_path(env->endpoint, sizeof env->endpoint, "HF_ENDPOINT", err,
                  v && v[0] ? v : "https://huggingface.co", "");
    if (st) return st;
    size_t el = strlen(env->endpoint);
    while (el > 0 && env->endpoint[el - 1] == '/') env->endpoint[--el] = '\0';
    env->offline = env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");

    /* the token: HF_TOKEN, else the file HF_TOKEN_PATH / HF_HOME/token */
    if ((v = getenv("HF_TOKEN")) && v[0]) {
        snprintf(env->token, sizeof env->token, "%s", v);
    } else {
        char path[4200];
        if ((v = getenv("HF_TOKEN_PATH")) && v[0]) snprintf(path, sizeof path, "%s", v);
        else snprintf(path, sizeof path, "%s/token", hf_home);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(env->token, 1, sizeof env->token - 1, f);
            env->token[got] = '\0';
            fclose(f);
        }
    }
    /* a token is one line: strip whitespace at both ends; anything else with
     * control characters would break the header, so it is not sent */
    char *t = env->token;
    size_t tl = strlen(t);
    while (tl > 0 && (t[tl - 1] == '\n' || t[tl - 1] == '\r' || t[tl - 1] == ' ')) t[--tl] = '\0';
    size_t lead = strspn(t, " \t\r\n");
    memmove(t, t + lead, tl - lead + 1);
    for (char *p = t; *p; p++)
        if ((unsigned char)*p < 0x20) {
            tf_warn("the Hugging Face token has control characters; it is not sent");
            t[0] = '\0';
            break;
        }

    env->timeout_s = 30;
    if ((v = getenv("TFCORE_HUB_TIMEOUT_S")) && v[0]) {
        char *end;
        double d = strtod(v, &end);
        if (*end || !(d > 0 && d <= 3600))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "TFCORE_HUB_TIMEOUT_S='%s' is not a number of seconds in (0, 3600]", v);
        env->timeout_s = d;
    }
    env->retries = 4;
    if ((v = getenv("TFCORE_HUB_RETRIES")) && v[0]) {
        char *end;
        long r = strtol(v, &end, 10);
        if (*end || r < 0 || r > 20)
            return tf_error_set(err, TF_ERR_CONFIG, "TFCORE_HUB_RETRIES='%s' is not a count in 0..20", v);
        env->retries = (int)r;
    }
    return TF_OK;
}

tf_status tf_hub_cache_dir(char *folder, size_t n, tf_error *err)
{
    hub_env env;
    tf_status st = hub_env_read(&env, err);
    if (st) return st;
    if (strlen(env.cache) >= n)
        return tf_error_set(err, TF_ERR_CONFIG, "the Hugging Face cache path is too long");
    memcpy(folder, env.cache, strlen(env.cache) + 1);
    return TF_OK;
}

static bool part_ok(const char *s, size_t len)
{
    if (len == 0) return false;
    if (s[0] == '-' || s[0] == '.' || s[len - 1] == '-' || s[len - 1] == '.') return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok) return false;
        if (i > 0 && ((c == '-' && s[i - 1] == '-') || (c == '.' && s[i - 1] == '.'))) return false;
    }
    return true;
}

bool tf_hub_is_repo_id(const char *s)
{
    /* huggingface_hub's validate_repo_id: [\w\-.]{1,96} per part, no "--" or
     * "..", not starting/ending with '-' or '.'; at most one '/' */
    if (!s) return false;
    size_t len = strlen(s);
    if (len == 0 || len > 96) return false;
    const char *slash = strchr(s, '/');
    if (!slash) return part_ok(s, len);
    if (strchr(slash + 1, '/')) return false;
    return part_ok(s, (size_t)(slash - s)) && part_ok(slash + 1, len - (size_t)(slash - s) - 1);
}

void hub_repo_folder(const char *repo, char *out, size_t n)
{
    /* "models" + "--" + each '/'-separated part joined by "--" */
    size_t o = (size_t)snprintf(out, n, "models--");
    for (const char *p = repo; *p && o + 3 < n; p++) {
        if (*p == '/') {
            out[o++] = '-';
            out[o++] = '-';
        } else {
            out[o++] = *p;
        }
    }
    out[o < n ? o : n - 1] = '\0';
}

tf_status hub_mkdirs(const char *path, tf_error *err)
{
    char buf[TF_HUB_PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "path too long: %.200s...", path);
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot create the folder %s: %s", buf,
                                    strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return TF_OK;
}

bool hub_cache_commit(const char *storage, const char *revision, char commit[41])
{
    if (hub_is_commit_hash(revision)) {
        memcpy(commit, revision, 41);
        return true;
    }
    char path[TF_HUB_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/refs/%s", storage, revision) >= (int)sizeof path) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[128];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return hub_parse_ref(buf, got, commit, 41);
}

tf_status hub_write_ref(const char *storage, const char *revision, const char *commit, tf_error *err)
{
    if (strcmp(revision, commit) == 0) return TF_OK;
    char have[41];
    if (hub_cache_commit(storage, revision, have) && strcmp(have, commit) == 0) return TF_OK;
    char path[TF_HUB_PATH_MAX], dir[TF_HUB_PATH_MAX];
    snprintf(path, sizeof path, "%s/refs/%s", storage, revision);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    tf_status st = hub_mkdirs(dir, err);
    if (st) return st;
    /* no newline: huggingface_hub compares the file's text with the hash */
    return tf_file_write_text_atomic(path, commit, err);
}

tf_status hub_link_snapshot(const char *storage, const char *commit, const char *file,
                            const char *etag, tf_error *err)
{
    char link[TF_HUB_PATH_MAX], dir[TF_HUB_PATH_MAX], target[TF_HUB_PATH_MAX];
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", storage, commit, file);
    snprintf(dir, sizeof dir, "%s", link);
    *strrchr(dir, '/') = '\0';
    tf_status st = hub_mkdirs(dir, err);
    if (st) return st;
    /* from snapshots/<commit>/a/b/file: one ../ per folder under the commit */
    size_t o = (size_t)snprintf(target, sizeof target, "../../");
    for (const char *p = file; *p; p++)
        if (*p == '/') o += (size_t)snprintf(target + o, sizeof target - o, "../");
    snprintf(target + o, sizeof target - o, "blobs/%s", etag);
    /* make the link beside it and rename over: the final name is never
     * missing or half-made for a reader running at the same time */
    char tmp[TF_HUB_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", link, (long)getpid());
    unlink(tmp);
    if (symlink(target, tmp) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot create the link %s: %s", link, strerror(errno));
    if (rename(tmp, link) != 0) {
        int e = errno;
        unlink(tmp);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot create the link %s: %s", link, strerror(e));
    }
    return TF_OK;
}

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
