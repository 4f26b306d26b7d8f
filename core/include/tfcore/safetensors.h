/* tfcore/safetensors.h — read and write Hugging Face safetensors files.
 *
 * File layout (as the safetensors package defines it):
 *   bytes [0, 8)          N, the header length, unsigned 64-bit little-endian
 *   bytes [8, 8+N)        JSON object, starting with '{', padded with spaces:
 *                         {"__metadata__": {"k": "v", ...},          (optional)
 *                          "name": {"dtype": "F32", "shape": [2, 3],
 *                                   "data_offsets": [begin, end]}, ...}
 *   bytes [8+N, size)     tensor data; [begin, end) is relative to 8+N,
 *                         row-major, little-endian
 *
 * Reading maps the file read-only and checks everything before returning:
 * header length (<= 100,000,000 and inside the file), JSON syntax, dtype
 * names, shapes (non-negative integers, no overflow), sizes equal to
 * product(shape) x dtype size, offsets that tile the data exactly (no overlap,
 * no hole, data end = file end), names unique and non-empty, metadata a
 * string -> string object. A failure is TF_ERR_DATA with one line naming the
 * file, the tensor and the byte offset, e.g.
 *   "m.safetensors: byte 1432: tensor 'w': data_offsets [1024, 2048) overlap tensor 'b' [2000, 2004)"
 * A tensor's data pointer is NOT aligned in general: read it with memcpy (or
 * the f32 helpers below), never through a cast to float*. The pointers stay
 * valid until tf_safetensors_close; a file truncated by someone else while
 * mapped faults on access (tfcore's own writer never rewrites a file in place).
 *
 * Writing produces what the safetensors Python package (0.4.x) writes: tensors
 * ordered by dtype (widest first, the package's order) then name, header padded
 * with spaces to a multiple of 8, so every tensor starts aligned in the file.
 * The file is written to "PATH.tmp.<pid>", fsynced, renamed over PATH and the
 * directory fsynced: PATH is either the old file or the complete new one.
 */
#ifndef TFCORE_SAFETENSORS_H
#define TFCORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/dtype.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest header the format allows (the Python package's limit). */
#define TF_SAFETENSORS_MAX_HEADER 100000000ull

/* One tensor. The reader fills every field; the writer reads name, dtype,
 * ndim, shape and data and ignores the rest, so a reader's tensor array can be
 * handed to the writer as it is. */
typedef struct tf_st_tensor {
    const char *name;      /* UTF-8, non-empty, not "__metadata__" */
    tf_dtype dtype;
    int ndim;              /* 0 for a scalar */
    const int64_t *shape;  /* [ndim], each >= 0; may be NULL when ndim == 0 */
    const void *data;      /* [nbytes] row-major little-endian, not aligned */
    size_t numel;          /* product(shape); 1 for a scalar */
    size_t nbytes;         /* numel x tf_dtype_size(dtype) */
    uint64_t file_offset;  /* byte of the file where the data starts */
} tf_st_tensor;

/* One metadata entry ("__metadata__" is a string -> string map). */
typedef struct tf_st_kv {
    const char *key;
    const char *value;
} tf_st_kv;

typedef struct tf_safetensors tf_safetensors; /* an open, checked file */

/* ---- reading ------------------------------------------------------------ */

/* Map `path` (read-only, MAP_PRIVATE) and check it. On error *out is NULL. */
tf_status tf_safetensors_open(const char *path, tf_safetensors **out, tf_error *err);

/* The same checks on bytes already in memory; `label` names them in messages.
 * Nothing is copied: bytes[0, size) must stay valid until tf_safetensors_close. */
tf_status tf_safetensors_open_memory(const void *bytes, size_t size, const char *label,
                                     tf_safetensors **out, tf_error *err);

void tf_safetensors_close(tf_safetensors *st); /* NULL is fine */

/* The path (or label) the file was opened with. */
const char *tf_safetensors_path(const tf_safetensors *st);

/* Tensors in file order (ascending data offset), an array of count entries
 * valid until close. */
size_t tf_safetensors_count(const tf_safetensors *st);
const tf_st_tensor *tf_safetensors_tensors(const tf_safetensors *st);
const tf_st_tensor *tf_safetensors_at(const tf_safetensors *st, size_t i); /* NULL if i >= count */

/* Lookup by exact name (binary search); NULL when absent. */
const tf_st_tensor *tf_safetensors_find(const tf_safetensors *st, const char *name);

/* "__metadata__", sorted by key; *n gets the number of entries (0 if none). */
const tf_st_kv *tf_safetensors_metadata(const tf_safetensors *st, size_t *n);
/* The value for `key`, or NULL. */
const char *tf_safetensors_metadata_get(const tf_safetensors *st, const char *key);

/* Copy tensor t (of st) into dst[count] as f32, converting from F32, F16,
 * BF16 (exact) or F64 (rounded to nearest). Errors: another dtype, or count
 * != t->numel (the message names the tensor and both shapes). */
tf_status tf_safetensors_copy_f32(const tf_safetensors *st, const tf_st_tensor *t, float *dst,
                                  size_t count, tf_error *err);

/* Look `name` up, check that its shape is exactly shape[ndim], and copy it
 * into dst[product(shape)] as f32 (as tf_safetensors_copy_f32). What model
 * loading needs: a missing tensor or a different shape is TF_ERR_DATA. */
tf_status tf_safetensors_load_f32(const tf_safetensors *st, const char *name, int ndim,
                                  const int64_t *shape, float *dst, tf_error *err);

/* ---- a model folder's weights: one file, or shards with an index --------- */

/* What transformers' save_pretrained writes into a folder: DIR/NAME (NAME is
 * "model.safetensors"), or, for a model past max_shard_size, the shards that
 * DIR/NAME.index.json lists:
 *   {"metadata": {"total_size": N}, "weight_map": {"tensor": "shard file", ...}}
 * tf_safetensors_set_open opens DIR/NAME when it exists, else the index and
 * every shard it names (each checked as tf_safetensors_open does), and checks
 * the index against the shards: shard names are plain file names in DIR (no
 * '/', not "." or ".."), every shard exists, every tensor of a shard is in
 * the weight_map under that shard (a tensor in two shards is refused), every
 * tensor of the weight_map is in its shard, and no key repeats. A failure is
 * TF_ERR_DATA, one line naming the index and the tensor or shard; neither
 * file is TF_ERR_DATA "DIR/NAME: <strerror>". */
typedef struct tf_safetensors_set tf_safetensors_set;

tf_status tf_safetensors_set_open(const char *dir, const char *name, tf_safetensors_set **out, tf_error *err);
void tf_safetensors_set_close(tf_safetensors_set *set); /* NULL is fine */

/* The index's path, or the single file's. */
const char *tf_safetensors_set_path(const tf_safetensors_set *set);
/* Every tensor of every file: shards in sorted name order (as transformers
 * loads them), each in file order. *file (may be NULL) gets the file that
 * holds tensor i, for tf_safetensors_copy_f32 and messages. NULL if i >= count. */
size_t tf_safetensors_set_count(const tf_safetensors_set *set);
const tf_st_tensor *tf_safetensors_set_at(const tf_safetensors_set *set, size_t i, const tf_safetensors **file);

/* ---- writing ------------------------------------------------------------ */

/* Write tensors[n] (+ metadata[n_meta], may be NULL/0) to `path` atomically.
 * Checks the input first: names non-empty, valid UTF-8, unique, not
 * "__metadata__"; dtype known; ndim >= 0, dims >= 0, no size overflow; data
 * non-NULL unless nbytes is 0; metadata keys unique, keys and values UTF-8.
 * On failure the temporary file is removed and an existing `path` is left as
 * it was. */
tf_status tf_safetensors_write(const char *path, const tf_st_tensor *tensors, size_t n,
                               const tf_st_kv *metadata, size_t n_meta, tf_error *err);

/* The same file, built in memory: *out (free() it) holds *out_size bytes. */
tf_status tf_safetensors_serialize(const tf_st_tensor *tensors, size_t n, const tf_st_kv *metadata,
                                   size_t n_meta, unsigned char **out, size_t *out_size,
                                   tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
