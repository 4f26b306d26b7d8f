/* tfcore/hub.h — models by Hugging Face hub name ("bert-base-cased",
 * "google-bert/bert-base-cased"), resolved to a folder in the cache that
 * huggingface_hub itself uses, so the two tools share one cache:
 *
 *   $HF_HUB_CACHE               (else $HF_HOME/hub, else
 *                                ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub)
 *     models--org--name/
 *       blobs/<etag>              file contents, named by the server's ETag
 *                                 (the sha256 of LFS files, verified)
 *       refs/<revision>           the commit hash the revision pointed at
 *       snapshots/<commit>/<file> relative links to ../../blobs/<etag>
 *       .no_exist/<commit>/<file> empty markers for optional files the repo lacks
 *     .locks/models--org--name/<etag>.lock   flock()ed while a blob downloads
 *
 * Environment, read on every call: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE
 * (1/true/yes/on: use only the cache), HF_ENDPOINT (default
 * https://huggingface.co), HF_TOKEN or the token file (HF_TOKEN_PATH, else
 * $HF_HOME/token) sent as "Authorization: Bearer" to the endpoint,
 * TFCORE_HUB_TIMEOUT_S (connect and stall timeout, default 30) and
 * TFCORE_HUB_RETRIES (extra tries after a connection error or a 5xx,
 * default 4, with backoff).
 *
 * Downloads go to blobs/<etag>.incomplete (resumed with a Range request when
 * one is left over), are checked against the expected size and, for LFS
 * files, the sha256, and only then renamed to blobs/<etag>; the snapshot link
 * comes after the blob and refs/<revision> last, so nothing half-written is
 * ever under a final name. A progress bar is drawn when stderr is a terminal.
 */
#ifndef TFCORE_HUB_H
#define TFCORE_HUB_H

#include <stdbool.h>
#include <stddef.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_HUB_PATH_MAX 4096

/* True when s reads as a hub repo id: "name" or "org/name", each part made
 * of letters, digits, '-', '_' and '.', not starting or ending with '-' or
 * '.', no "--" or "..", at most 96 bytes. A local folder that exists wins
 * over a name (the caller checks that first). */
bool tf_hub_is_repo_id(const char *s);

/* Resolve the model `repo` at `revision` (NULL: "main") to its snapshot
 * folder, written to folder[0..n). Online, every file a BERT-style encoder
 * needs is fetched when missing: config.json and the weights (required:
 * model.safetensors, or for a sharded checkpoint model.safetensors.index.json
 * and every shard it names, each a plain file name; a repo with only
 * pytorch_model.bin is refused with a line saying so), vocab.txt,
 * tokenizer_config.json, tokenizer.json and special_tokens_map.json (when
 * the repo has them). When the server cannot
 * be reached and the cache has the revision, the cache is used with a
 * warning. Offline, only the cache is read; a missing model gives one
 * TF_ERR_DATA line naming the model, the revision, the cache folder and the
 * command that fetches it. Errors: TF_ERR_DATA (no such model/file, gated,
 * checksum mismatch, bad server response), TF_ERR_RUNTIME (network, disk
 * full, I/O), TF_ERR_CONFIG (a revision that is not a safe name). */
tf_status tf_hub_resolve_model(const char *repo, const char *revision, char *folder, size_t n,
                               tf_error *err);

/* The cache folder the environment selects (for messages and docs). */
tf_status tf_hub_cache_dir(char *folder, size_t n, tf_error *err);

/* False when tfcore was built without libcurl: names resolve from the cache
 * only, as if HF_HUB_OFFLINE were set. */
bool tf_hub_can_download(void);

#ifdef __cplusplus
}
#endif
#endif
