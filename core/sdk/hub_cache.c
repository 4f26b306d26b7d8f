/* hub_cache.c — the Hugging Face cache on disk: where it is (the same
 * environment variables as huggingface_hub), the models--org--name layout,
 * refs and snapshot links. Resolving a model name to its snapshot folder,
 * which uses both this and the downloader, is hub_resolve.c. */
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
