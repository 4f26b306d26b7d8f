/* hub_download.c — fetching one file of a hub repo into the cache with
 * libcurl, following huggingface_hub's protocol (file_download.py):
 *
 *   HEAD {endpoint}/{repo}/resolve/{revision}/{file}, redirects not followed
 *        (except relative ones: a renamed repo), Accept-Encoding: identity;
 *        X-Repo-Commit names the snapshot, X-Linked-Etag or ETag the blob,
 *        X-Linked-Size or Content-Length its size, Location (an LFS file's
 *        storage URL) where the bytes are;
 *   GET  that location, redirects followed, into blobs/<etag>.incomplete,
 *        with "Range: bytes=N-" when N bytes are already there;
 *   then size and (LFS) sha256 check, rename to blobs/<etag>, snapshot link.
 *
 * The blob is written under an exclusive flock on
 * .locks/models--org--name/<etag>.lock, the same file huggingface_hub's
 * FileLock takes, so tfcore and Python never write one blob at once.
 * Connection errors, timeouts and 5xx are retried with backoff. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "hub_internal.h"
#include "tfcore/log.h"

#ifndef TF_HAVE_LIBCURL

bool tf_hub_can_download(void) { return false; }

tf_status hub_fetch_file(const hub_env *env, const char *repo, const char *storage,
                         const char *revision, const hub_file *file, char commit[41],
                         bool *absent, tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME,
                        "cannot download %s of %s: this tfcore was built without libcurl (install "
                        "libcurl4-openssl-dev and rebuild); local folders and a cache filled by "
                        "huggingface_hub still work",
                        file->name, repo);
}

tf_status hub_download_url(const hub_env *env, const char *url, const char *dest, const char *sha256,
                           char got[65], tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME,
                        "cannot download %s: this tfcore was built without libcurl (install "
                        "libcurl4-openssl-dev and rebuild)",
                        url);
}

#else

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>

#ifndef PACKAGE_VERSION
#include "config.h"
#endif

bool tf_hub_can_download(void) { return true; }

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    hub_meta_header(ud, buf, size * nitems);
    return size * nitems;
}

static size_t discard(char *buf, size_t size, size_t nmemb, void *ud) { return size * nmemb; }

/* The token goes only to the endpoint itself, never to the storage host an
 * LFS redirect points at. */
static bool same_server(const hub_env *env, const char *url)
{
    size_t el = strlen(env->endpoint);
    return strncmp(url, env->endpoint, el) == 0 && (url[el] == '/' || url[el] == '\0');
}

static struct curl_slist *request_headers(const hub_env *env, const char *url, const char *range)
{
    struct curl_slist *h = NULL;
    char line[640];
    h = curl_slist_append(h, "Accept-Encoding: identity");
    if (env->token[0] && same_server(env, url)) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", env->token);
        h = curl_slist_append(h, line);
    }
    if (range) h = curl_slist_append(h, range);
    return h;
}

static void common_options(CURL *c, const hub_env *env, const char *url, char *errbuf)
{
    long t = (long)ceil(env->timeout_s);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(env->timeout_s * 1000));
    /* a stall: less than 1 byte/s for the timeout */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, t < 1 ? 1L : t);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tfcore/" PACKAGE_VERSION);
}

/* A failed transfer worth trying again: the network, not the request. */
static bool transient(CURLcode cc)
{
    switch (cc) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_WRITE_ERROR:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_ABORTED_BY_CALLBACK:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_PEER_FAILED_VERIFICATION:
        return false;
    default:
        return true;
    }
}

static void backoff(int attempt)
{
    double s = 0.5 * (double)(1 << (attempt < 5 ? attempt : 5));
    if (s > 8) s = 8;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static const char *curl_why(CURLcode cc, const char *errbuf, const hub_env *env, char *buf, size_t n)
{
    if (cc == CURLE_OPERATION_TIMEDOUT)
        snprintf(buf, n, "timed out: no data for %g s (%s; TFCORE_HUB_TIMEOUT_S sets the limit)",
                 env->timeout_s, errbuf[0] ? errbuf : curl_easy_strerror(cc));
    else snprintf(buf, n, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
    return buf;
}

/* The one line for an HTTP error status. */
static tf_status http_error(const hub_meta *m, const char *url, tf_error *err)
{
    const char *code = m->error_code[0] ? m->error_code : "";
    if (m->status == 401 || m->status == 403) {
        if (strcmp(code, "RepoNotFound") == 0)
            return tf_error_set(err, TF_ERR_DATA,
                                "HTTP %ld from %s: no such model, or it is private (set HF_TOKEN to a "
                                "token that can read it)",
                                m->status, url);
        return tf_error_set(err, TF_ERR_DATA,
                            "HTTP %ld from %s: access denied%s%s; the model may be gated or private: "
                            "accept its terms on the hub and set HF_TOKEN (or the token file "
                            "HF_TOKEN_PATH / $HF_HOME/token) to a token that can read it",
                            m->status, url, m->error_message[0] ? ": " : "", m->error_message);
    }
    if (m->status == 404)
        return tf_error_set(err, TF_ERR_DATA, "HTTP 404 from %s: no such model or file%s%s%s", url,
                            code[0] ? " (" : "", code, code[0] ? ")" : "");
    return tf_error_set(err, m->status >= 500 ? TF_ERR_RUNTIME : TF_ERR_DATA, "HTTP %ld from %s%s%s",
                        m->status, url, m->error_message[0] ? ": " : "", m->error_message);
}

/* HEAD url, following relative redirects only (huggingface_hub's
 * follow_relative_redirects), retried on connection errors and 5xx. On
 * TF_OK, m holds the final response (any status < 500). */
static tf_status head(const hub_env *env, const char *url0, hub_meta *m, char *final_url,
                      size_t fn, tf_error *err)
{
    char url[8192 + 1100];
    snprintf(url, sizeof url, "%s", url0);
    char errbuf[CURL_ERROR_SIZE], why[512];
    for (int attempt = 0;; attempt++) {
        int hops = 0;
    again:;
        CURL *c = curl_easy_init();
        if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "cannot start a download of %s: out of memory", url);
        errbuf[0] = '\0';
        hub_meta_reset(m);
        struct curl_slist *h = request_headers(env, url, NULL);
        common_options(c, env, url, errbuf);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, m);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        m->status = status;
        hub_meta_finish(m);
        if (cc != CURLE_OK) {
            if (transient(cc) && attempt < env->retries) {
                tf_debug("HEAD %s: %s; trying again", url, curl_why(cc, errbuf, env, why, sizeof why));
                backoff(attempt);
                continue;
            }
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot reach %s: %s", url,
                                curl_why(cc, errbuf, env, why, sizeof why));
        }
        if (status >= 500) {
            if (attempt < env->retries) {
                tf_debug("HEAD %s: HTTP %ld; trying again", url, status);
                backoff(attempt);
                continue;
            }
            return http_error(m, url, err);
        }
        /* a relative Location (no scheme): same server, new path */
        if (status >= 300 && status < 400 && m->location[0] && !strstr(m->location, "://")) {
            if (++hops > 10) return tf_error_set(err, TF_ERR_DATA, "too many redirects from %s", url0);
            if (m->location[0] != '/')
                return tf_error_set(err, TF_ERR_DATA, "redirect from %s to '%s' is not a path", url,
                                    m->location);
            const char *host_end = strstr(url, "://");
            host_end = host_end ? strchr(host_end + 3, '/') : NULL;
            size_t hl = host_end ? (size_t)(host_end - url) : strlen(url);
            char next[sizeof url];
            if (hl + strlen(m->location) >= sizeof next)
                return tf_error_set(err, TF_ERR_DATA, "redirect from %s is too long", url);
            memcpy(next, url, hl);
            strcpy(next + hl, m->location);
            strcpy(url, next);
            goto again;
        }
        snprintf(final_url, fn, "%s", url);
        return TF_OK;
    }
}

typedef struct sink {
    int fd;
    hub_meta *meta;
    long long *have;   /* bytes in the file */
    bool started;      /* the first body bytes of this response were seen */
    int write_errno;
    long long total;   /* expected size, -1 unknown */
    const char *name;
    bool bar;
    double last_draw;
} sink;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t on_body(char *buf, size_t size, size_t nmemb, void *ud)
{
    sink *s = ud;
    size_t n = size * nmemb;
    if (!s->started && s->meta->status == 200 && *s->have > 0) {
        /* the server ignored Range and sends the whole file: start over */
        if (ftruncate(s->fd, 0) != 0 || lseek(s->fd, 0, SEEK_SET) < 0) {
            s->write_errno = errno;
            return 0;
        }
        *s->have = 0;
    }
    s->started = true;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(s->fd, buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            s->write_errno = errno;
            return 0;
        }
        done += (size_t)w;
    }
    *s->have += (long long)n;
    return n;
}

/* 512 B, 73.0 kB, 1.2 GB */
static const char *human(long long bytes, char *buf, size_t n)
{
    static const char *units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, u++;
    if (u == 0) snprintf(buf, n, "%lld B", bytes);
    else snprintf(buf, n, "%.1f %s", v, units[u]);
    return buf;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    sink *s = ud;
    double t = now_s();
    if (!s->bar || t - s->last_draw < 0.2) return 0;
    s->last_draw = t;
    long long have = *s->have;
    char a[32], b[32];
    if (s->total > 0)
        fprintf(stderr, "\r  %-24.24s %5.1f%%  %9s / %s", s->name, 100.0 * (double)have / (double)s->total,
                human(have, a, sizeof a), human(s->total, b, sizeof b));
    else fprintf(stderr, "\r  %-24.24s %9s", s->name, human(have, a, sizeof a));
    return 0;
}

static tf_status sha256_file(int fd, char hex[65], tf_error *err, const char *path)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot start a sha256 of %s", path);
    }
    static unsigned char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t r = pread(fd, buf, sizeof buf, off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            EVP_MD_CTX_free(ctx);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot read %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        EVP_DigestUpdate(ctx, buf, (size_t)r);
        off += r;
    }
    unsigned char md[32];
    unsigned int mdl = 0;
    EVP_DigestFinal_ex(ctx, md, &mdl);
    EVP_MD_CTX_free(ctx);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return TF_OK;
}

/* GET url into fd (which already holds *have bytes), resuming with Range,
 * retried on connection errors and 5xx. */
static tf_status get_into(const hub_env *env, const char *url, int fd, long long *have,
                          long long total, const char *name, const char *path, tf_error *err)
{
    char errbuf[CURL_ERROR_SIZE], why[512];
    hub_meta m;
    bool bar = isatty(STDERR_FILENO) && tf_log_get_level() <= TF_LOG_INFO;
    for (int attempt = 0;; attempt++) {
        if (total >= 0 && *have == total) return TF_OK; /* complete already */
        CURL *c = curl_easy_init();
        if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "cannot start a download of %s: out of memory", url);
        errbuf[0] = '\0';
        hub_meta_reset(&m);
        char range[64] = "";
        if (*have > 0) snprintf(range, sizeof range, "Range: bytes=%lld-", *have);
        struct curl_slist *h = request_headers(env, url, range[0] ? range : NULL);
        sink s = {.fd = fd, .meta = &m, .have = have, .total = total, .name = name, .bar = bar};
        common_options(c, env, url, errbuf);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &m);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, bar ? 0L : 1L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (bar) fprintf(stderr, "\r%*s\r", 60, "");
        m.status = status;
        if (s.write_errno) {
            if (s.write_errno == ENOSPC || s.write_errno == EDQUOT)
                return tf_error_set(err, TF_ERR_RUNTIME, "disk full writing %s (from %s)", path, url);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: %s", path, strerror(s.write_errno));
        }
        if (cc == CURLE_HTTP_RETURNED_ERROR && status == 416 && *have > 0 && total < 0)
            return TF_OK; /* asked past the end: the partial file was whole */
        if (cc == CURLE_HTTP_RETURNED_ERROR && status < 500) return http_error(&m, url, err);
        if (cc != CURLE_OK || status >= 500) {
            if ((cc == CURLE_HTTP_RETURNED_ERROR || transient(cc)) && attempt < env->retries) {
                tf_debug("GET %s: %s; trying again from byte %lld", url,
                         cc == CURLE_HTTP_RETURNED_ERROR ? "server error" : curl_why(cc, errbuf, env, why, sizeof why),
                         *have);
                backoff(attempt);
                continue;
            }
            if (cc == CURLE_HTTP_RETURNED_ERROR) return http_error(&m, url, err);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot download %s: %s (%lld bytes kept in %s to resume)",
                                url, curl_why(cc, errbuf, env, why, sizeof why), *have, path);
        }
        return TF_OK;
    }
}

/* Is `file` (404 on model.safetensors) there as pytorch_model.bin? */
static bool has_bin_only(const hub_env *env, const char *repo, const char *revision)
{
    char url[2200], final_url[8192 + 1100];
    hub_meta m;
    tf_error e = {0};
    snprintf(url, sizeof url, "%s/%s/resolve/%s/pytorch_model.bin", env->endpoint, repo, revision);
    return head(env, url, &m, final_url, sizeof final_url, &e) == TF_OK && m.status >= 200 && m.status < 400;
}

static void touch_no_exist(const char *storage, const char *commit, const char *file)
{
    char path[TF_HUB_PATH_MAX], dir[TF_HUB_PATH_MAX];
    snprintf(path, sizeof path, "%s/.no_exist/%s/%s", storage, commit, file);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    tf_error e = {0};
    if (hub_mkdirs(dir, &e) != TF_OK) return; /* only a hint for huggingface_hub */
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) close(fd);
}

/* GET dl_url into `blob` by way of blob.incomplete (resumed when left over):
 * the size (when known) and the sha256 `want` (when not NULL) are checked
 * before the rename; `got` (when not NULL) receives the file's sha256. */
static tf_status download_blob(const hub_env *env, const char *dl_url, const char *blob,
                               const char *want, char got[65], long long size, const char *name,
                               tf_error *err)
{
    char part[TF_HUB_PATH_MAX + 256];
    snprintf(part, sizeof part, "%s.incomplete", blob);
    int fd = open(part, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot create %s: %s", part, strerror(errno));
    struct stat sb;
    fstat(fd, &sb);
    long long have = (long long)sb.st_size;
    if (size >= 0 && have > size) { /* longer than the file: not ours to resume */
        if (ftruncate(fd, 0) != 0) {
            int e = errno;
            close(fd);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot truncate %s: %s", part, strerror(e));
        }
        have = 0;
    }
    if (have > 0) tf_info("resuming %s from byte %lld", name, have);
    struct statvfs vfs;
    if (size > have && fstatvfs(fd, &vfs) == 0 &&
        (unsigned long long)vfs.f_bavail * vfs.f_frsize < (unsigned long long)(size - have)) {
        close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "disk full: %s needs %lld more bytes, %llu are free in that folder", part,
                            size - have, (unsigned long long)vfs.f_bavail * vfs.f_frsize);
    }
    tf_status st = get_into(env, dl_url, fd, &have, size, name, part, err);
    if (st == TF_OK && fsync(fd) != 0)
        st = tf_error_set(err, TF_ERR_RUNTIME, "cannot write %s: %s", part,
                          errno == ENOSPC ? "disk full" : strerror(errno));
    if (st) {
        close(fd);
        return st; /* the partial file stays, to resume */
    }
    fstat(fd, &sb);
    if (size >= 0 && (long long)sb.st_size != size) {
        close(fd);
        unlink(part);
        return tf_error_set(err, TF_ERR_DATA, "%s: got %lld bytes, the server announced %lld; removed %s",
                            dl_url, (long long)sb.st_size, size, part);
    }
    if (want || got) {
        char hex[65];
        st = sha256_file(fd, hex, err, part);
        if (st) {
            close(fd);
            return st;
        }
        if (want && strcasecmp(hex, want) != 0) {
            close(fd);
            unlink(part);
            return tf_error_set(err, TF_ERR_DATA,
                                "checksum mismatch for %s: expected sha256 %s, got %s; the download was removed",
                                dl_url, want, hex);
        }
        if (got) memcpy(got, hex, 65);
    }
    close(fd);
    if (rename(part, blob) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s to %s: %s", part, blob, strerror(errno));
    return TF_OK;
}

tf_status hub_fetch_file(const hub_env *env, const char *repo, const char *storage,
                         const char *revision, const hub_file *file, char commit[41],
                         bool *absent, tf_error *err)
{
    *absent = false;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot start libcurl: %s", curl_easy_strerror(curl_init_rc));
    char path[TF_HUB_PATH_MAX];
    struct stat sb;
    /* a commit that is cached: nothing to ask */
    if (hub_is_commit_hash(revision)) {
        snprintf(path, sizeof path, "%s/snapshots/%s/%s", storage, revision, file->name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            memcpy(commit, revision, 41);
            return TF_OK;
        }
    }
    char url[2200], final_url[8192 + 1100];
    if (snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", env->endpoint, repo, revision, file->name) >=
        (int)sizeof url)
        return tf_error_set(err, TF_ERR_CONFIG, "the URL for %s of %s is too long", file->name, repo);
    hub_meta m;
    tf_status st = head(env, url, &m, final_url, sizeof final_url, err);
    if (st) return st;
    if (m.status == 404 && strcmp(m.error_code, "RepoNotFound") != 0 &&
        strcmp(m.error_code, "RevisionNotFound") != 0) {
        if (!file->required) {
            *absent = true;
            if (hub_is_commit_hash(m.commit)) {
                memcpy(commit, m.commit, 41);
                touch_no_exist(storage, commit, file->name);
            } else {
                snprintf(commit, 41, "%s", hub_is_commit_hash(revision) ? revision : "");
            }
            return TF_OK;
        }
        if (strcmp(file->name, "model.safetensors") == 0 && has_bin_only(env, repo, revision))
            return tf_error_set(err, TF_ERR_DATA,
                                "%s has only pytorch_model.bin, no model.safetensors: tfcore reads "
                                "safetensors only (convert it in Python: from_pretrained(...)."
                                "save_pretrained(DIR, safe_serialization=True), then model.pretrained = DIR)",
                                repo);
    }
    if (m.status >= 400) return http_error(&m, url, err);
    if (m.overflow)
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: the answer has an X-Repo-Commit, ETag or Location header that is too "
                            "long or has control bytes",
                            final_url);
    if (!hub_is_commit_hash(m.commit))
        return tf_error_set(err, TF_ERR_DATA,
                            "%s: the answer has no commit (X-Repo-Commit)%s; is HF_ENDPOINT=%s a "
                            "Hugging Face hub?",
                            final_url, m.commit[0] ? " that is a 40-digit hash" : "", env->endpoint);
    if (!hub_etag_is_safe(m.etag))
        return tf_error_set(err, TF_ERR_DATA, "%s: the answer has %s ETag (X-Linked-Etag / ETag)",
                            final_url, m.etag[0] ? "an unusable" : "no");
    memcpy(commit, m.commit, 41);
    const char *dl_url = (m.status >= 300 && m.status < 400 && m.location[0]) ? m.location : final_url;

    /* cached under this commit: done */
    snprintf(path, sizeof path, "%s/snapshots/%s/%s", storage, commit, file->name);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return TF_OK;

    char blobs[TF_HUB_PATH_MAX], blob[TF_HUB_PATH_MAX + 200], locks[TF_HUB_PATH_MAX + 16], lock[TF_HUB_PATH_MAX + 200];
    const char *rf = strrchr(storage, '/') + 1;
    char cache[TF_HUB_PATH_MAX];
    snprintf(cache, sizeof cache, "%.*s", (int)(rf - storage - 1), storage);
    snprintf(blobs, sizeof blobs, "%s/blobs", storage);
    snprintf(blob, sizeof blob, "%s/%s", blobs, m.etag);
    snprintf(locks, sizeof locks, "%s/.locks/%s", cache, rf);
    snprintf(lock, sizeof lock, "%s/%s.lock", locks, m.etag);
    if ((st = hub_mkdirs(blobs, err)) || (st = hub_mkdirs(locks, err))) return st;

    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot open the lock %s: %s", lock, strerror(errno));
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        tf_info("waiting for another process downloading %s of %s (%s)", file->name, repo, lock);
        while (flock(lfd, LOCK_EX) != 0) {
            if (errno != EINTR) {
                int e = errno;
                close(lfd);
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot lock %s: %s", lock, strerror(e));
            }
        }
    }
    if (!(stat(blob, &sb) == 0 && S_ISREG(sb.st_mode))) {
        tf_info("downloading %s of %s (%lld bytes)", file->name, repo, m.size);
        st = download_blob(env, dl_url, blob, hub_etag_is_sha256(m.etag) ? m.etag : NULL, NULL, m.size,
                           file->name, err);
    }
    if (st == TF_OK) st = hub_link_snapshot(storage, commit, file->name, m.etag, err);
    close(lfd); /* releases the lock */
    return st;
}

tf_status hub_download_url(const hub_env *env, const char *url, const char *dest, const char *sha256,
                           char got[65], tf_error *err)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot start libcurl: %s", curl_easy_strerror(curl_init_rc));
    const char *name = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
    tf_info("downloading %s from %s", name, url);
    return download_blob(env, url, dest, sha256, got, -1, name, err);
}

#endif
