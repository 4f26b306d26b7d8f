/* hub_internal.h — the parts of the Hugging Face hub client that libtfcore
 * shares between its files (cache layout, response parsing, downloads) and
 * with the fuzz target. The public contract is tfcore/hub.h. */
#ifndef TFCORE_HUB_INTERNAL_H
#define TFCORE_HUB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"
#include "tfcore/hub.h"

/* What one HEAD on {endpoint}/{repo}/resolve/{revision}/{file} says, as
 * huggingface_hub's get_hf_file_metadata reads it. Fields are "" / -1 when
 * the header was absent. */
typedef struct hub_meta {
    long status;              /* HTTP status of the last response */
    char commit[64];          /* X-Repo-Commit */
    char etag[160];           /* X-Linked-Etag, else ETag, normalised */
    char linked_etag[160];    /* raw X-Linked-Etag (normalised), for precedence */
    char plain_etag[160];     /* raw ETag (normalised) */
    long long size;           /* X-Linked-Size, else Content-Length */
    long long linked_size;    /* X-Linked-Size */
    long long content_length; /* Content-Length */
    char location[8192];      /* Location (redirect target; signed storage URLs are long) */
    char error_code[64];      /* X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo, ...) */
    char error_message[256];  /* X-Error-Message */
    bool overflow;            /* a commit, ETag or Location longer than its field, or with
                               * control bytes: the answer is refused */
} hub_meta;

/* Forget every header (a new response starts: a redirect or a retry). */
void hub_meta_reset(hub_meta *m);

/* Feed one raw header line ("Name: value\r\n", or the status line
 * "HTTP/1.1 302 Found") of len bytes, not NUL-terminated. Unknown headers
 * are ignored; a status line resets what earlier responses said. */
void hub_meta_header(hub_meta *m, const char *line, size_t len);

/* Fill m->etag / m->size from the linked or plain values, as huggingface_hub
 * prefers X-Linked-* over the plain headers. */
void hub_meta_finish(hub_meta *m);

/* ETag normalisation exactly as huggingface_hub's _normalize_etag:
 * lstrip of the characters 'W' and '/' then strip of '"' at both ends.
 * Writes at most n-1 bytes plus NUL; returns false if it did not fit. */
bool hub_normalize_etag(const char *in, size_t len, char *out, size_t n);

/* An etag usable as a file name in blobs/: non-empty, no '/', not "." or
 * "..", no control characters. */
bool hub_etag_is_safe(const char *etag);

/* A 64-hex-digit etag is an LFS object's sha256 (verified after download). */
bool hub_etag_is_sha256(const char *etag);

/* A full commit hash: 40 lowercase hex digits (huggingface_hub's
 * REGEX_COMMIT_HASH). */
bool hub_is_commit_hash(const char *s);

/* The content of refs/<revision>: a commit hash, with no newline (as
 * huggingface_hub writes it; a trailing newline is tolerated). Copies it to
 * out (at least 41 bytes) and returns true when it is one. */
bool hub_parse_ref(const char *data, size_t len, char *out, size_t n);

/* A revision that can be a file name under refs/: branch or tag names as the
 * hub allows them ("main", "v1.0", "refs/pr/1" is a path with folders). */
bool hub_revision_is_safe(const char *rev);

/* The shard files a model.safetensors.index.json (text, len bytes; label
 * names it in errors) lists in its weight_map, sorted, each once, into
 * *names (free with hub_shards_free). Every name must be a plain file name of
 * the snapshot (no '/', '\\', "." or "..", no control bytes), else TF_ERR_DATA
 * naming the entry. */
tf_status hub_index_shards(const char *text, size_t len, const char *label, char ***names, size_t *n,
                           tf_error *err);
void hub_shards_free(char **names, size_t n);
/* The cache and server settings, read from the environment as
 * huggingface_hub's constants.py reads them. */
typedef struct hub_env {
    char cache[4096];    /* HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME|~/.cache + /huggingface/hub */
    char endpoint[1024]; /* HF_ENDPOINT without trailing '/', default https://huggingface.co */
    char token[512];     /* HF_TOKEN, else the token file; "" when none */
    bool offline;        /* HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is true */
    double timeout_s;    /* TFCORE_HUB_TIMEOUT_S (connect and stall timeout), default 30 */
    int retries;         /* TFCORE_HUB_RETRIES (extra tries on connection errors / 5xx), default 4 */
} hub_env;

tf_status hub_env_read(hub_env *env, tf_error *err);

/* "models--org--name" for repo "org/name" */
void hub_repo_folder(const char *repo, char *out, size_t n);

/* The commit a revision points at in the cache (revision itself when it is a
 * commit hash, else the content of refs/<revision>); false when unknown. */
bool hub_cache_commit(const char *storage, const char *revision, char commit[41]);

/* One file of a model download. */
typedef struct hub_file {
    const char *name;
    bool required;
} hub_file;

/* Download `file` of `repo` at `revision` into the cache rooted at env->cache
 * (storage = env->cache/models--...). On success *commit holds the commit the
 * server resolved the revision to; *absent is set (and TF_OK returned) when
 * an optional file does not exist (404). */
tf_status hub_fetch_file(const hub_env *env, const char *repo, const char *storage,
                         const char *revision, const hub_file *file, char commit[41],
                         bool *absent, tf_error *err);

/* GET url (redirects followed, retried, resumed from dest.incomplete when
 * one is left over) into dest: dest.incomplete while it downloads, checked
 * against sha256 (64 hex digits; NULL: not checked) and only then renamed to
 * dest. got (when not NULL) receives the sha256 of what was downloaded. The
 * caller holds the lock that makes it the only writer of dest. */
tf_status hub_download_url(const hub_env *env, const char *url, const char *dest, const char *sha256,
                           char got[65], tf_error *err);

/* Make snapshots/<commit>/<file> a relative link to ../../blobs/<etag>
 * (more ../ for a file in a subfolder), replacing whatever is there. */
tf_status hub_link_snapshot(const char *storage, const char *commit, const char *file,
                            const char *etag, tf_error *err);

/* Write refs/<revision> = commit (atomically), unless revision is the
 * commit itself or the ref already says so. */
tf_status hub_write_ref(const char *storage, const char *revision, const char *commit,
                        tf_error *err);

/* mkdir -p */
tf_status hub_mkdirs(const char *path, tf_error *err);

#endif
