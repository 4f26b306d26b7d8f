/* hub_parse.c — reading the hub's answers: response headers (X-Repo-Commit,
 * X-Linked-Etag, ETag, X-Linked-Size, Content-Length, Location, X-Error-*),
 * ETag normalisation and refs/<revision> files, each as huggingface_hub
 * reads them. Pure functions on bytes; fuzzed by tests/fuzz/fuzz_hub_parse.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "hub_internal.h"

void hub_meta_reset(hub_meta *m)
{
    memset(m, 0, sizeof *m);
    m->size = m->linked_size = m->content_length = -1;
}

/* Copy [s, s+len) to out[n] as a C string; false (and out = "") if it does
 * not fit or holds a NUL / control byte. */
static bool copy_value(const char *s, size_t len, char *out, size_t n)
{
    out[0] = '\0';
    if (len >= n) return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t') return false;
    memcpy(out, s, len);
    out[len] = '\0';
    return true;
}

/* A non-negative decimal that fits in a long long, the whole value; else -1. */
static long long parse_size(const char *s, size_t len)
{
    if (len == 0 || len > 18) return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

bool hub_normalize_etag(const char *in, size_t len, char *out, size_t n)
{
    /* Python's str.lstrip("W/") drops any run of 'W' and '/' characters,
     * then strip('"') drops quotes at both ends: the same here. */
    size_t b = 0, e = len;
    while (b < e && (in[b] == 'W' || in[b] == '/')) b++;
    while (b < e && in[b] == '"') b++;
    while (e > b && in[e - 1] == '"') e--;
    return copy_value(in + b, e - b, out, n);
}

bool hub_etag_is_safe(const char *etag)
{
    size_t len = strlen(etag);
    if (len == 0 || len > 128) return false;
    if (strcmp(etag, ".") == 0 || strcmp(etag, "..") == 0) return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)etag[i];
        if (c < 0x21 || c == 0x7f || c == '/' || c == '\\') return false;
    }
    return true;
}

static bool all_hex(const char *s, size_t want, bool lower_only)
{
    size_t i = 0;
    for (; s[i]; i++) {
        char c = s[i];
        bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                  (!lower_only && c >= 'A' && c <= 'F');
        if (!ok) return false;
    }
    return i == want;
}

bool hub_etag_is_sha256(const char *etag) { return all_hex(etag, 64, false); }

bool hub_is_commit_hash(const char *s) { return all_hex(s, 40, true); }

bool hub_parse_ref(const char *data, size_t len, char *out, size_t n)
{
    if (n < 41) return false;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r')) len--;
    if (len != 40) return false;
    char tmp[41];
    memcpy(tmp, data, 40);
    tmp[40] = '\0';
    if (!hub_is_commit_hash(tmp)) return false;
    memcpy(out, tmp, 41);
    return true;
}

bool hub_revision_is_safe(const char *rev)
{
    size_t len = strlen(rev);
    if (len == 0 || len > 255 || rev[0] == '/' || rev[len - 1] == '/') return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)rev[i];
        if (c <= 0x20 || c == 0x7f || c == '\\' || c == '?' || c == '#' || c == '%') return false;
    }
    /* no empty, "." or ".." path components */
    const char *p = rev;
    while (*p) {
        const char *q = strchr(p, '/');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.')) return false;
        p += l + (q ? 1 : 0);
    }
    return true;
}

void hub_meta_header(hub_meta *m, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* a new response (after a redirect, or 100 Continue): start over */
        hub_meta_reset(m);
        const char *sp = memchr(line, ' ', len);
        if (sp && (size_t)(sp - line) + 4 <= len) {
            const char *d = sp + 1;
            if (isdigit((unsigned char)d[0]) && isdigit((unsigned char)d[1]) &&
                isdigit((unsigned char)d[2]))
                m->status = (d[0] - '0') * 100 + (d[1] - '0') * 10 + (d[2] - '0');
        }
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon) return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = len - nlen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
#define IS(name) (nlen == sizeof(name) - 1 && strncasecmp(line, name, nlen) == 0)
    if (IS("X-Repo-Commit")) {
        if (!copy_value(v, vlen, m->commit, sizeof m->commit)) m->overflow = true;
    } else if (IS("X-Linked-Etag")) {
        if (!hub_normalize_etag(v, vlen, m->linked_etag, sizeof m->linked_etag)) m->overflow = true;
    } else if (IS("ETag")) {
        if (!hub_normalize_etag(v, vlen, m->plain_etag, sizeof m->plain_etag)) m->overflow = true;
    } else if (IS("X-Linked-Size")) {
        m->linked_size = parse_size(v, vlen);
    } else if (IS("Content-Length")) {
        m->content_length = parse_size(v, vlen);
    } else if (IS("Location")) {
        if (!copy_value(v, vlen, m->location, sizeof m->location)) m->overflow = true;
    } else if (IS("X-Error-Code")) {
        if (!copy_value(v, vlen, m->error_code, sizeof m->error_code)) m->error_code[0] = '\0';
    } else if (IS("X-Error-Message")) {
        size_t l = vlen < sizeof m->error_message - 1 ? vlen : sizeof m->error_message - 1;
        if (!copy_value(v, l, m->error_message, sizeof m->error_message)) m->error_message[0] = '\0';
    }
#undef IS
}

void hub_meta_finish(hub_meta *m)
{
    /* huggingface_hub: X-Linked-Etag or ETag; X-Linked-Size or Content-Length
     * (Python's `or`: an empty value falls through to the next). */
    snprintf(m->etag, sizeof m->etag, "%s", m->linked_etag[0] ? m->linked_etag : m->plain_etag);
    m->size = m->linked_size >= 0 ? m->linked_size : m->content_length;
}

/* A shard name the cache may hold: one plain file name of the snapshot. */
static bool shard_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20 || *p == 0x7f) return false;
    return true;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void hub_shards_free(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

tf_status hub_index_shards(const char *text, size_t len, const char *label, char ***names, size_t *n,
                           tf_error *err)
{
    *names = NULL;
    *n = 0;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", label, je.line, je.column, je.text);
    json_t *map = json_object_get(root, "weight_map");
    tf_status st = TF_OK;
    char **v = NULL;
    size_t k = 0;
    if (!json_is_object(root) || !json_is_object(map) || json_object_size(map) == 0)
        st = tf_error_set(err, TF_ERR_DATA, "%s: no \"weight_map\" object naming each tensor's shard", label);
    if (!st && !(v = calloc(json_object_size(map), sizeof *v)))
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", label);
    const char *tensor;
    json_t *file;
    if (!st) json_object_foreach(map, tensor, file) {
        const char *s = json_string_value(file);
        if (!s) {
            st = tf_error_set(err, TF_ERR_DATA, "%s: weight_map['%.200s'] is not a string", label, tensor);
            break;
        }
        /* the shard is fetched into the snapshot folder: nothing may lead out of it */
        if (!shard_name_ok(s)) {
            st = tf_error_set(err, TF_ERR_DATA,
                              "%s: weight_map['%.200s'] = '%.200s' is not a plain file name; refused", label,
                              tensor, s);
            break;
        }
        if (!(v[k] = strdup(s))) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", label);
            break;
        }
        k++;
    }
    json_decref(root);
    if (st) {
        hub_shards_free(v, k);
        return st;
    }
    qsort(v, k, sizeof *v, cmp_name);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u && strcmp(v[u - 1], v[i]) == 0) free(v[i]);
        else v[u++] = v[i];
    }
    *names = v;
    *n = u;
    return TF_OK;
}
