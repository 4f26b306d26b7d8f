/* fuzz_hub_parse.c — libFuzzer target for what tfcore reads from a hub
 * server and from the cache (core/sdk/hub_parse.c): any bytes as a response's
 * header lines, an ETag, a refs/<revision> file and a revision name. What is
 * accepted must be usable as a file name in the cache.
 * Run: scripts/fuzz.sh 60 hub_parse */
#include <stdint.h>
#include <string.h>

#include "hub_internal.h"

static void must(int ok)
{
    if (!ok) __builtin_trap();
}

/* a C string with no control bytes and no more than n-1 bytes */
static void clean(const char *s, size_t n)
{
    size_t l = strnlen(s, n);
    must(l < n);
    for (size_t i = 0; i < l; i++) must((unsigned char)s[i] >= 0x20 || s[i] == '\t');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    /* header lines, split at '\n' as libcurl hands them over */
    hub_meta m;
    hub_meta_reset(&m);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || p[i] == '\n') {
            hub_meta_header(&m, p + start, i - start + (i < size));
            start = i + 1;
        }
    }
    hub_meta_finish(&m);
    clean(m.commit, sizeof m.commit);
    clean(m.etag, sizeof m.etag);
    clean(m.location, sizeof m.location);
    clean(m.error_code, sizeof m.error_code);
    clean(m.error_message, sizeof m.error_message);
    must(m.size >= -1 && m.status >= 0 && m.status <= 999);
    if (hub_etag_is_safe(m.etag)) must(strchr(m.etag, '/') == NULL && strcmp(m.etag, "..") != 0);

    /* the whole input as one ETag */
    char etag[160];
    if (hub_normalize_etag(p, size, etag, sizeof etag)) {
        clean(etag, sizeof etag);
        must(strlen(etag) <= size);
        if (etag[0]) must(etag[0] != '"' && etag[strlen(etag) - 1] != '"');
    }
    /* as a refs file */
    char commit[41];
    if (hub_parse_ref(p, size, commit, sizeof commit)) must(hub_is_commit_hash(commit));
    /* as a revision name */
    char rev[300];
    size_t rl = size < sizeof rev - 1 ? size : sizeof rev - 1;
    memcpy(rev, p, rl);
    rev[rl] = '\0';
    if (hub_revision_is_safe(rev)) { /* stays under refs/: no empty, "." or ".." component */
        must(rev[0] != '/');
        for (char *c = rev, *e;; c = e + 1) {
            e = strchr(c, '/');
            size_t l = e ? (size_t)(e - c) : strlen(c);
            must(l > 0 && !(l == 1 && c[0] == '.') && !(l == 2 && c[0] == '.' && c[1] == '.'));
            if (!e) break;
        }
    }
    (void)tf_hub_is_repo_id(rev);
    /* as a model.safetensors.index.json: every accepted shard is a plain name */
    char **names;
    size_t n;
    tf_error err;
    if (hub_index_shards(p, size, "index", &names, &n, &err) == TF_OK) {
        for (size_t i = 0; i < n; i++)
            must(names[i][0] && !strchr(names[i], '/') && strcmp(names[i], "..") != 0 && strcmp(names[i], ".") != 0);
        hub_shards_free(names, n);
    }
    return 0;
}
