/* fuzz_safetensors.c — arbitrary bytes as a safetensors file, through the
 * same parser the mmap path uses (tf_safetensors_open_memory).
 *
 * Beyond "no crash, no sanitizer report", every accepted file must hold up:
 * tensors lie inside the input in file order, lookup finds each one, the f32
 * conversion runs on every float tensor, and writing the tensors back
 * (tf_safetensors_serialize) gives a file that reads back equal and that
 * re-serializes to the very same bytes. A rejection must be one line that
 * starts with the file's label. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/safetensors.h"

static void same_tensor(const tf_st_tensor *a, const tf_st_tensor *b)
{
    if (!b || strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes)
        abort();
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) abort();
    if (a->nbytes && memcmp(a->data, b->data, a->nbytes)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_safetensors *st;
    tf_error err;
    if (tf_safetensors_open_memory(data, size, "fuzz", &st, &err) != TF_OK) {
        if (strncmp(err.msg, "fuzz: ", 6) != 0 || strchr(err.msg, '\n') || err.code != TF_ERR_DATA) abort();
        return 0;
    }
    size_t n = tf_safetensors_count(st), n_meta;
    const tf_st_tensor *ts = tf_safetensors_tensors(st);
    const tf_st_kv *kv = tf_safetensors_metadata(st, &n_meta);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *t = &ts[i];
        const uint8_t *p = t->data;
        if (p < data || t->nbytes > size || p - data > (ptrdiff_t)(size - t->nbytes)) abort();
        if ((uint64_t)(p - data) != t->file_offset || t->file_offset < prev) abort();
        prev = t->file_offset;
        if (tf_safetensors_find(st, t->name) != t) abort();
        if (t->dtype == TF_DTYPE_F32 || t->dtype == TF_DTYPE_F16 || t->dtype == TF_DTYPE_BF16 ||
            t->dtype == TF_DTYPE_F64) {
            float *f = malloc((t->numel ? t->numel : 1) * sizeof *f); /* [numel] */
            if (!f || tf_safetensors_copy_f32(st, t, f, t->numel, &err) != TF_OK) abort();
            free(f);
        }
    }
    for (size_t i = 0; i < n_meta; i++)
        if (tf_safetensors_metadata_get(st, kv[i].key) != kv[i].value) abort();

    /* write back, read again, write again */
    unsigned char *out, *out2;
    size_t out_size, out2_size;
    if (tf_safetensors_serialize(ts, n, kv, n_meta, &out, &out_size, &err) != TF_OK) abort();
    tf_safetensors *st2;
    if (tf_safetensors_open_memory(out, out_size, "fuzz-rewrite", &st2, &err) != TF_OK) abort();
    if (tf_safetensors_count(st2) != n) abort();
    for (size_t i = 0; i < n; i++) same_tensor(&ts[i], tf_safetensors_find(st2, ts[i].name));
    size_t n_meta2;
    const tf_st_kv *kv2 = tf_safetensors_metadata(st2, &n_meta2);
    if (n_meta2 != n_meta) abort();
    for (size_t i = 0; i < n_meta; i++)
        if (strcmp(kv[i].key, kv2[i].key) || strcmp(kv[i].value, kv2[i].value)) abort();
    if (tf_safetensors_serialize(tf_safetensors_tensors(st2), n, kv2, n_meta2, &out2, &out2_size, &err) != TF_OK)
        abort();
    if (out2_size != out_size || memcmp(out, out2, out_size)) abort();
    free(out2);
    tf_safetensors_close(st2);
    free(out);
    tf_safetensors_close(st);
    return 0;
}
