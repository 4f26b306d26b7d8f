/* safetensors_write.c — build a safetensors file the way the Python package
 * (0.4.x) does, and write it atomically (temp file, fsync, rename, fsync dir).
 *
 * The package's layout, which this reproduces byte for byte:
 *   - tensors sorted by dtype, widest first in the package's own order
 *     (U64 I64 F64 F32 U32 I32 BF16 F16 U16 I16 F8_E4M3 F8_E5M2 I8 U8 BOOL),
 *     then by name (bytewise), and stored back to back in that order;
 *   - header = compact JSON, "__metadata__" first when there is any, each
 *     entry {"dtype":..,"shape":[..],"data_offsets":[b,e]}, strings escaped
 *     as serde_json does (\" \\ \b \f \n \r \t, other controls as \u00xx,
 *     everything else raw UTF-8);
 *   - header padded with spaces to a multiple of 8 bytes.
 * The package keeps metadata in a hash map, so its key order is arbitrary;
 * tfcore writes the keys sorted, which is byte-identical when there is at most
 * one key (the usual {"format":"pt"}). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utf8proc.h>

#include "tfcore/file.h"
#include "tfcore/safetensors.h"

#define NAME_SHOWN 200 /* names are cut to this many bytes in messages */

/* Position of each dtype in the package's Dtype enum (ascending alignment);
 * tensors are written in descending rank. */
static const int dtype_rank[TF_DTYPE_COUNT] = {
    [TF_DTYPE_BOOL] = 0, [TF_DTYPE_U8] = 1,       [TF_DTYPE_I8] = 2,        [TF_DTYPE_F8_E5M2] = 3,
    [TF_DTYPE_F8_E4M3] = 4, [TF_DTYPE_I16] = 5,   [TF_DTYPE_U16] = 6,       [TF_DTYPE_F16] = 7,
    [TF_DTYPE_BF16] = 8, [TF_DTYPE_I32] = 9,      [TF_DTYPE_U32] = 10,      [TF_DTYPE_F32] = 11,
    [TF_DTYPE_F64] = 12, [TF_DTYPE_I64] = 13,     [TF_DTYPE_U64] = 14,
};

/* A growing byte buffer for the header. */
typedef struct strbuf {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_add(strbuf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_u64(strbuf *b, unsigned long long x)
{
    char tmp[24];
    sb_add(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%llu", x));
}

/* A JSON string literal, escaped as serde_json escapes it. */
static void sb_json(strbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    sb_add(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *esc = NULL;
        switch (*c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            sb_str(b, esc);
        } else if (*c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15]};
            sb_add(b, u, sizeof u);
        } else {
            sb_add(b, c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static int valid_utf8(const char *s)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t n = strlen(s);
    while (n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, (utf8proc_ssize_t)n, &cp);
        if (k <= 0) return 0;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

typedef struct name_ref {
    const char *name;
    size_t idx;
} name_ref;

static int cmp_name(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* The package's order: descending dtype rank, then name. */
typedef struct layout_ref {
    int rank;
    const char *name;
    size_t idx;
} layout_ref;

static int cmp_layout(const void *a, const void *b)
{
    const layout_ref *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Check the input; fill nbytes[n]. */
static tf_status check_input(const char *where, const tf_st_tensor *ts, size_t n, const tf_st_kv *meta,
                             size_t n_meta, size_t *nbytes, tf_error *err)
{
    if (n && !ts) return tf_error_set(err, TF_ERR_USAGE, "%s: %zu tensors but the array is NULL", where, n);
    if (n_meta && !meta)
        return tf_error_set(err, TF_ERR_USAGE, "%s: %zu metadata entries but the array is NULL", where, n_meta);
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *t = &ts[i];
        if (!t->name || !t->name[0])
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor %zu has no name", where, i);
        const char *nm = t->name;
        int cut = strlen(nm) > NAME_SHOWN;
        if (!valid_utf8(nm))
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor %zu: name '%.*s%s' is not valid UTF-8", where,
                                i, NAME_SHOWN, nm, cut ? "..." : "");
        if (strcmp(nm, "__metadata__") == 0)
            return tf_error_set(err, TF_ERR_DATA,
                                "%s: tensor %zu: the name '__metadata__' is reserved for the metadata", where, i);
        if (tf_dtype_size(t->dtype) == 0)
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s%s': unknown dtype value %d", where,
                                NAME_SHOWN, nm, cut ? "..." : "", (int)t->dtype);
        if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s%s': ndim %d with %s shape", where,
                                NAME_SHOWN, nm, cut ? "..." : "", t->ndim, t->shape ? "a" : "a NULL");
        size_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s%s': shape[%d] is %lld", where,
                                    NAME_SHOWN, nm, cut ? "..." : "", d, (long long)t->shape[d]);
            if (__builtin_mul_overflow(numel, (size_t)t->shape[d], &numel)) overflow = 1;
        }
        if (overflow || __builtin_mul_overflow(numel, tf_dtype_size(t->dtype), &nbytes[i]))
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s%s': the shape's byte count overflows",
                                where, NAME_SHOWN, nm, cut ? "..." : "");
        if (nbytes[i] && !t->data)
            return tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s%s': %zu bytes but data is NULL", where,
                                NAME_SHOWN, nm, cut ? "..." : "", nbytes[i]);
    }
    /* unique names: sort references, compare neighbours */
    name_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", where);
    for (size_t i = 0; i < n; i++) refs[i] = (name_ref){ts[i].name, i};
    qsort(refs, n, sizeof *refs, cmp_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(refs[i - 1].name, refs[i].name) == 0) {
            tf_status rc = tf_error_set(err, TF_ERR_DATA, "%s: tensor '%.*s' is given twice (entries %zu and %zu)",
                                        where, NAME_SHOWN, refs[i].name, refs[i - 1].idx, refs[i].idx);
            free(refs);
            return rc;
        }
    free(refs);

    for (size_t i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return tf_error_set(err, TF_ERR_DATA, "%s: metadata entry %zu has a NULL %s", where, i,
                                meta[i].key ? "value" : "key");
        if (!valid_utf8(meta[i].key) || !valid_utf8(meta[i].value))
            return tf_error_set(err, TF_ERR_DATA, "%s: metadata entry %zu ('%.*s'): %s is not valid UTF-8",
                                where, i, NAME_SHOWN, meta[i].key, valid_utf8(meta[i].key) ? "value" : "key");
        for (size_t j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return tf_error_set(err, TF_ERR_DATA, "%s: metadata key '%.*s' is given twice (entries %zu and %zu)",
                                    where, NAME_SHOWN, meta[i].key, j, i);
    }
    return TF_OK;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp((*(const tf_st_kv *const *)a)->key, (*(const tf_st_kv *const *)b)->key);
}

/* The layout: order[n] (indices into ts, in file order), the padded header
 * *hdr[*hdr_len] (malloc'd) and the data size. */
typedef struct st_layout {
    size_t *order;  /* [n] */
    size_t *nbytes; /* [n] bytes of ts[i] */
    char *hdr;      /* [hdr_len] JSON + padding */
    size_t hdr_len;
    size_t data_len;
} st_layout;

static void layout_free(st_layout *l)
{
    free(l->order);
    free(l->nbytes);
    free(l->hdr);
}

static tf_status build_layout(const char *where, const tf_st_tensor *ts, size_t n, const tf_st_kv *meta,
                              size_t n_meta, st_layout *l, tf_error *err)
{
    memset(l, 0, sizeof *l);
    l->order = malloc((n ? n : 1) * sizeof *l->order);
    l->nbytes = malloc((n ? n : 1) * sizeof *l->nbytes);
    const tf_st_kv **kv = malloc((n_meta ? n_meta : 1) * sizeof *kv);
    if (!l->order || !l->nbytes || !kv) {
        free(kv);
        layout_free(l);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", where);
    }
    tf_status rc = check_input(where, ts, n, meta, n_meta, l->nbytes, err);
    if (rc != TF_OK) {
        free(kv);
        layout_free(l);
        return rc;
    }
    layout_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs) {
        free(kv);
        layout_free(l);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", where);
    }
    for (size_t i = 0; i < n; i++) refs[i] = (layout_ref){dtype_rank[ts[i].dtype], ts[i].name, i};
    qsort(refs, n, sizeof *refs, cmp_layout);
    for (size_t i = 0; i < n; i++) l->order[i] = refs[i].idx;
    free(refs);
    for (size_t i = 0; i < n_meta; i++) kv[i] = &meta[i];
    qsort(kv, n_meta, sizeof *kv, cmp_kv);

    strbuf b = {0};
    sb_add(&b, "{", 1);
    if (n_meta) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) sb_add(&b, ",", 1);
            sb_json(&b, kv[i]->key);
            sb_add(&b, ":", 1);
            sb_json(&b, kv[i]->value);
        }
        sb_add(&b, "}", 1);
    }
    size_t offset = 0;
    for (size_t k = 0; k < n; k++) {
        const tf_st_tensor *t = &ts[l->order[k]];
        if (k || n_meta) sb_add(&b, ",", 1);
        sb_json(&b, t->name);
        sb_str(&b, ":{\"dtype\":");
        sb_json(&b, tf_dtype_name(t->dtype));
        sb_str(&b, ",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_add(&b, ",", 1);
            sb_u64(&b, (unsigned long long)t->shape[d]);
        }
        sb_str(&b, "],\"data_offsets\":[");
        sb_u64(&b, offset);
        sb_add(&b, ",", 1);
        if (__builtin_add_overflow(offset, l->nbytes[l->order[k]], &offset)) b.oom = 2;
        sb_u64(&b, offset);
        sb_str(&b, "]}");
    }
    sb_add(&b, "}", 1);
    while (!b.oom && b.len % 8) sb_add(&b, " ", 1); /* the package's padding: data starts 8-aligned */
    free(kv);
    l->hdr = b.p;
    l->hdr_len = b.len;
    l->data_len = offset;
    if (b.oom == 2) {
        layout_free(l);
        return tf_error_set(err, TF_ERR_DATA, "%s: the tensors' total size overflows", where);
    }
    if (b.oom) {
        layout_free(l);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory building the header", where);
    }
    if (l->hdr_len > TF_SAFETENSORS_MAX_HEADER) {
        size_t len = l->hdr_len;
        layout_free(l);
        return tf_error_set(err, TF_ERR_DATA, "%s: the header would be %zu bytes, over the format's limit of %llu",
                            where, len, TF_SAFETENSORS_MAX_HEADER);
    }
    return TF_OK;
}

static void put_le64(unsigned char out[8], uint64_t x)
{
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(x >> (8 * i));
}

tf_status tf_safetensors_serialize(const tf_st_tensor *tensors, size_t n, const tf_st_kv *metadata,
                                   size_t n_meta, unsigned char **out, size_t *out_size, tf_error *err)
{
    if (!out || !out_size) return tf_error_set(err, TF_ERR_USAGE, "tf_safetensors_serialize: NULL output");
    *out = NULL;
    *out_size = 0;
    st_layout l;
    tf_status rc = build_layout("safetensors", tensors, n, metadata, n_meta, &l, err);
    if (rc != TF_OK) return rc;
    size_t total = 8 + l.hdr_len + l.data_len;
    if (total < l.data_len) {
        layout_free(&l);
        return tf_error_set(err, TF_ERR_DATA, "safetensors: the file size overflows");
    }
    unsigned char *buf = malloc(total);
    if (!buf) {
        layout_free(&l);
        return tf_error_set(err, TF_ERR_RUNTIME, "safetensors: out of memory for %zu bytes", total);
    }
    put_le64(buf, l.hdr_len);
    memcpy(buf + 8, l.hdr, l.hdr_len);
    size_t at = 8 + l.hdr_len;
    for (size_t k = 0; k < n; k++) {
        size_t i = l.order[k];
        if (l.nbytes[i]) memcpy(buf + at, tensors[i].data, l.nbytes[i]);
        at += l.nbytes[i];
    }
    layout_free(&l);
    *out = buf;
    *out_size = total;
    return TF_OK;
}

tf_status tf_safetensors_write(const char *path, const tf_st_tensor *tensors, size_t n,
                               const tf_st_kv *metadata, size_t n_meta, tf_error *err)
{
    if (!path || !path[0]) return tf_error_set(err, TF_ERR_USAGE, "tf_safetensors_write: no path");
    st_layout l;
    tf_status rc = build_layout(path, tensors, n, metadata, n_meta, &l, err);
    if (rc != TF_OK) return rc;

    /* the file: 8-byte header length, header, every tensor's bytes in layout order */
    tf_file_part *parts = malloc((n + 2) * sizeof *parts);
    if (!parts) {
        layout_free(&l);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    }
    unsigned char len8[8];
    put_le64(len8, l.hdr_len);
    parts[0] = (tf_file_part){len8, 8};
    parts[1] = (tf_file_part){l.hdr, l.hdr_len};
    for (size_t k = 0; k < n; k++) parts[k + 2] = (tf_file_part){tensors[l.order[k]].data, l.nbytes[l.order[k]]};
    rc = tf_file_write_atomic(path, parts, n + 2, err);
    free(parts);
    layout_free(&l);
    return rc;
}
