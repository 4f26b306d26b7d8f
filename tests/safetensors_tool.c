/* safetensors_tool.c — a test driver for tfcore's safetensors reader and
 * writer, used by tests/ref/safetensors_vs_hf.py.
 *
 *   safetensors_tool dump FILE       JSON on stdout: metadata, and per tensor (in
 *                                    file order) name, dtype, shape, file offset,
 *                                    byte count, CRC-32 of the raw bytes and, for
 *                                    F32/F16/BF16/F64, CRC-32 of the f32 values
 *                                    tfcore converts them to
 *   safetensors_tool copy IN OUT     read IN, write its tensors and metadata to OUT
 *
 * Exit 0 on success, 1 with tfcore's one-line error on stderr otherwise,
 * 2 on a bad command line. The CRC is zlib's (Python's zlib.crc32). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tfcore/safetensors.h"

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32_of(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static int dump(const char *path)
{
    tf_error err;
    tf_safetensors *st;
    if (tf_safetensors_open(path, &st, &err) != TF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    json_t *out = json_object(), *meta = json_object(), *list = json_array();
    size_t n_meta;
    const tf_st_kv *kv = tf_safetensors_metadata(st, &n_meta);
    for (size_t i = 0; i < n_meta; i++) {
        json_object_set_new(meta, kv[i].key, json_string(kv[i].value));
        if (tf_safetensors_metadata_get(st, kv[i].key) != kv[i].value) {
            fprintf(stderr, "%s: metadata_get('%s') does not find its entry\n", path, kv[i].key);
            return 1;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < tf_safetensors_count(st); i++) {
        const tf_st_tensor *t = tf_safetensors_at(st, i);
        if (tf_safetensors_find(st, t->name) != t) {
            fprintf(stderr, "%s: find('%s') does not return the tensor\n", path, t->name);
            rc = 1;
        }
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "name", t->name, "dtype",
                              tf_dtype_name(t->dtype), "shape", shape, "offset", (json_int_t)t->file_offset,
                              "nbytes", (json_int_t)t->nbytes, "crc32",
                              (json_int_t)crc32_of(t->data, t->nbytes));
        if (t->dtype == TF_DTYPE_F32 || t->dtype == TF_DTYPE_F16 || t->dtype == TF_DTYPE_BF16 ||
            t->dtype == TF_DTYPE_F64) {
            float *f = malloc((t->numel ? t->numel : 1) * sizeof *f); /* [numel] */
            if (!f || tf_safetensors_copy_f32(st, t, f, t->numel, &err) != TF_OK) {
                fprintf(stderr, "%s\n", f ? err.msg : "out of memory");
                free(f);
                return 1;
            }
            json_object_set_new(o, "f32_crc32", json_integer(crc32_of(f, t->numel * sizeof *f)));
            free(f);
        }
        json_array_append_new(list, o);
    }
    json_object_set_new(out, "metadata", meta);
    json_object_set_new(out, "tensors", list);
    char *s = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII);
    puts(s);
    free(s);
    json_decref(out);
    tf_safetensors_close(st);
    return rc;
}

static int copy(const char *in, const char *out)
{
    tf_error err;
    tf_safetensors *st;
    if (tf_safetensors_open(in, &st, &err) != TF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t n_meta;
    const tf_st_kv *kv = tf_safetensors_metadata(st, &n_meta);
    tf_status rc = tf_safetensors_write(out, tf_safetensors_tensors(st), tf_safetensors_count(st), kv,
                                        n_meta, &err);
    if (rc != TF_OK) fprintf(stderr, "%s\n", err.msg);
    tf_safetensors_close(st);
    return rc == TF_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    crc_init();
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
    if (argc == 4 && strcmp(argv[1], "copy") == 0) return copy(argv[2], argv[3]);
    fprintf(stderr, "usage: safetensors_tool dump FILE | copy IN OUT\n");
    return 2;
}
