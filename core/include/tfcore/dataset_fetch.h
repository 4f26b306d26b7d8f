/* tfcore/dataset_fetch.h — datasets by name ("imdb", "squad", "squad_v2"):
 * fetched once into tfcore's cache, then read from there, also offline.
 * Dataset plugins call tf_dataset_fetch when their path is such a name (and
 * no local file or folder of that name exists); `tfcore download NAME` calls
 * it for a login node with internet.
 *
 *   $TFCORE_CACHE/datasets   (else ${XDG_CACHE_HOME:-~/.cache}/tfcore/datasets)
 *     <name>/                 the dataset, renamed into place complete, once
 *       .tfcore-dataset       marker: the URL, each file's size and sha256
 *       imdb:     aclImdb/{train,test}/{pos,neg}/N_R.txt (the unpacked archive)
 *       squad:    train-v1.1.json dev-v1.1.json
 *       squad_v2: train-v2.0.json dev-v2.0.json
 *     .downloads/<name>/<file>[.incomplete]   while fetching (resumed)
 *     .tmp-<name>-<pid>/      being unpacked (removed on any error)
 *     .locks/<name>.lock      flock()ed while <name> is fetched
 *
 * Sources (documented defaults; data.url / data.sha256 override):
 *   imdb      https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz
 *             sha256 c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe
 *   squad     https://rajpurkar.github.io/SQuAD-explorer/dataset/ + train-v1.1.json, dev-v1.1.json
 *   squad_v2  the same folder + train-v2.0.json, dev-v2.0.json
 * The SQuAD files have no published checksum: they are verified when a
 * sha256 is given, and otherwise the size and sha256 of what was downloaded
 * are recorded in the marker.
 *
 * Environment, read on every call: TFCORE_CACHE (above); TFCORE_OFFLINE,
 * HF_DATASETS_OFFLINE, HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE (1/true/yes/on:
 * the cache only); TFCORE_DATASET_MAX_BYTES / TFCORE_DATASET_MAX_ENTRIES
 * (what an archive may unpack to, default 4 GB and 1,000,000 entries);
 * TFCORE_HUB_TIMEOUT_S and TFCORE_HUB_RETRIES as for models (tfcore/hub.h).
 */
#ifndef TFCORE_DATASET_FETCH_H
#define TFCORE_DATASET_FETCH_H

#include <stdbool.h>
#include <stddef.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True for a name tf_dataset_fetch knows: "imdb", "squad", "squad_v2". */
bool tf_dataset_is_name(const char *s);

/* Where a dataset comes from, when not the documented default. */
typedef struct tf_dataset_source {
    size_t size;           /* sizeof(tf_dataset_source): fields are appended only */
    const char *url;       /* NULL: the default. imdb: the archive's URL; squad,
                            * squad_v2: the folder URL the two files are under */
    const char *sha256[2]; /* 64 hex digits or NULL. imdb: [0] the archive (NULL:
                            * the documented default); squad: [0] train, [1] dev
                            * (NULL: not verified, recorded) */
} tf_dataset_source;

/* The folder of dataset `name` in the cache, fetched when missing: for imdb
 * the aclImdb folder (train/ and test/ in it), for squad / squad_v2 the
 * folder holding the two JSON files named above. src may be NULL (the
 * defaults). Online, the files are downloaded (resumed, retried), checked,
 * unpacked into a temporary folder that is renamed into place with its
 * marker, under a lock, so two processes fetching one dataset at once both
 * succeed and it is fetched once. A refused archive, a checksum mismatch or
 * any other failure leaves nothing under the final name. Offline (or built
 * without libcurl), a missing dataset is one TF_ERR_DATA line naming it, the
 * cache folder and the `tfcore download` command that fetches it.
 * A request with the defaults takes any cached copy (one fetched from a
 * mirror with a url serves later runs that name only the dataset); a
 * request that gives url or a sha256 takes only a copy the marker says came
 * from there / has it.
 * Errors: TF_ERR_CONFIG (unknown name, bad URL or sha256, a cached copy from
 * another URL or checksum than the ones given), TF_ERR_DATA (not cached offline, checksum
 * mismatch, refused or damaged archive, HTTP 404), TF_ERR_RUNTIME (network,
 * disk). */
tf_status tf_dataset_fetch(const char *name, const tf_dataset_source *src, char *folder, size_t n,
                           tf_error *err);

/* What a config check (--dry-run) asks, without downloading anything: TF_OK
 * when the dataset is cached, or missing but fetchable here (online); the
 * offline line of tf_dataset_fetch when it is missing and cannot be fetched;
 * TF_ERR_CONFIG for a bad name, URL or sha256, or a cached copy from another
 * URL or checksum than the ones given. */
tf_status tf_dataset_check(const char *name, const tf_dataset_source *src, tf_error *err);

/* The datasets cache folder the environment selects (for messages, docs). */
tf_status tf_dataset_cache_dir(char *folder, size_t n, tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
