/* safetensors_read.c — map a safetensors file, check every rule of the format
 * before handing out a single pointer, and convert tensors to f32.
 * See tfcore/safetensors.h for the layout and the rules. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "tfcore/file_read.h"
#include "tfcore/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and tfcore hands out pointers into it: little-endian hosts only"
#endif

#define NAME_SHOWN 200 /* tensor names are cut to this many bytes in messages */

struct tf_safetensors {
    char *path;                 /* as given, for messages */
    const unsigned char *bytes; /* [size] the whole file (mapped or borrowed) */
    size_t size;
    int mapped;                 /* bytes came from mmap and are unmapped on close */
    size_t header_len;          /* N: the JSON is bytes [8, 8+N), data starts at 8+N */
    json_t *root;               /* the header; names and metadata point into it */
    tf_st_tensor *tensors;      /* [count] in file order */
    size_t count;
    size_t *by_name;            /* [count] indices into tensors, sorted by name */
    int64_t *dims;              /* [sum of ndim] the shapes, tensors[i].shape points here */
    tf_st_kv *meta;             /* [n_meta] sorted by key */
    size_t n_meta;
};

/* What the checks keep about one tensor besides its tf_st_tensor. */
typedef struct st_span {
    uint64_t begin, end; /* data_offsets, relative to the data start */
    size_t order;        /* index in the header, breaks ties between empty tensors */
    size_t key_at;       /* file byte of the entry's key */
} st_span;

/* "PATH: byte B: tensor 'NAME': message" (the tensor part only when name != NULL). */
__attribute__((format(printf, 5, 6))) static tf_status fail(tf_error *err, const tf_safetensors *st,
                                                            unsigned long long byte,
                                                            const char *name, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (name)
        return tf_error_set(err, TF_ERR_DATA, "%s: byte %llu: tensor '%.*s%s': %s", st->path, byte,
                            NAME_SHOWN, name, strlen(name) > NAME_SHOWN ? "..." : "", what);
    return tf_error_set(err, TF_ERR_DATA, "%s: byte %llu: %s", st->path, byte, what);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

/* "[2, 3]" into buf[n], cut with "...]" when it does not fit. */
static const char *shape_str(char *buf, size_t n, const int64_t *dims, int ndim)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (used + 2 <= n) {
        snprintf(buf + used, n - used, "]");
    } else if (n >= 5) {
        memcpy(buf + n - 5, "...]", 5);
    }
    return buf;
}

/* Byte positions (relative to the header) of the top-level keys, in header
 * order. Runs only on text jansson has accepted, so it only has to skip
 * strings and nested values; every index stays below n. Returns the number of
 * keys found (positions beyond `max` are not stored). */
static size_t scan_top_keys(const unsigned char *h, size_t n, size_t *pos, size_t max)
{
    size_t i = 0, k = 0;
    int depth = 0, want_key = 1;
    while (i < n && h[i] != '{') i++;
    for (i++; i < n; i++) {
        unsigned char c = h[i];
        if (c == '"') {
            if (depth == 0 && want_key) {
                if (k < max) pos[k] = i;
                k++;
                want_key = 0;
            }
            for (i++; i < n && h[i] != '"'; i++)
                if (h[i] == '\\') i++; /* the escaped byte cannot end the string */
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) break;
            depth--;
        } else if (c == ',' && depth == 0) {
            want_key = 1;
        }
    }
    return k;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const tf_st_kv *)a)->key, ((const tf_st_kv *)b)->key);
}

static tf_status read_metadata(tf_safetensors *st, json_t *v, size_t at, tf_error *err)
{
    if (!json_is_object(v))
        return fail(err, st, at, NULL, "__metadata__ is %s, not an object of strings", json_kind(v));
    size_t n = json_object_size(v);
    st->meta = calloc(n ? n : 1, sizeof *st->meta);
    if (!st->meta) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", st->path);
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (!json_is_string(val))
            return fail(err, st, at, NULL, "__metadata__ key '%.*s' has %s value, not a string",
                        NAME_SHOWN, key, json_kind(val));
        st->meta[st->n_meta].key = key;
        st->meta[st->n_meta].value = json_string_value(val);
        st->n_meta++;
    }
    qsort(st->meta, st->n_meta, sizeof *st->meta, cmp_kv);
    return TF_OK;
}

/* The JSON integer v as a non-negative value, or -1 with *what set. */
static long long json_count(const json_t *v, const char **what)
{
    if (!json_is_integer(v)) {
        *what = json_kind(v);
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < 0) *what = "negative";
    return x < 0 ? -1 : x;
}

/* Check one tensor entry (everything that does not need the other tensors)
 * and fill t and sp. dims has room for this tensor's shape. */
static tf_status check_entry(tf_safetensors *st, const char *name, json_t *v, size_t at,
                             int64_t *dims, tf_st_tensor *t, st_span *sp, tf_error *err)
{
    if (!name[0]) return fail(err, st, at, NULL, "a tensor has an empty name");
    if (!json_is_object(v))
        return fail(err, st, at, name, "entry is %s, not an object with dtype, shape and data_offsets",
                    json_kind(v));
    t->name = name;
    sp->key_at = at;

    json_t *jd = json_object_get(v, "dtype");
    if (!jd) return fail(err, st, at, name, "no \"dtype\"");
    if (!json_is_string(jd)) return fail(err, st, at, name, "\"dtype\" is %s, not a string", json_kind(jd));
    int dt = tf_dtype_from_name(json_string_value(jd));
    if (dt < 0)
        return fail(err, st, at, name,
                    "unknown dtype \"%.40s\" (known: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 "
                    "BOOL F8_E4M3 F8_E5M2)",
                    json_string_value(jd));
    t->dtype = (tf_dtype)dt;

    json_t *js = json_object_get(v, "shape");
    if (!js) return fail(err, st, at, name, "no \"shape\"");
    if (!json_is_array(js)) return fail(err, st, at, name, "\"shape\" is %s, not an array", json_kind(js));
    size_t ndim = json_array_size(js);
    if (ndim > 0x7fffffff) return fail(err, st, at, name, "shape has %zu dimensions", ndim);
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t d = 0; d < ndim; d++) {
        const char *what = NULL;
        long long x = json_count(json_array_get(js, d), &what);
        if (x < 0)
            return fail(err, st, at, name, "shape[%zu] is %s, not a non-negative integer", d, what);
        dims[d] = x;
        if (__builtin_mul_overflow(numel, (uint64_t)x, &numel)) overflow = 1;
    }
    t->ndim = (int)ndim;
    t->shape = dims;
    char sbuf[160];
    uint64_t nbytes;
    /* an overflowing product is an error even if a later dimension is 0: the
     * package (checked multiplication) rejects it too */
    if (overflow || numel > SIZE_MAX ||
        __builtin_mul_overflow(numel, (uint64_t)tf_dtype_size(t->dtype), &nbytes) || nbytes > SIZE_MAX)
        return fail(err, st, at, name, "shape %s of %s overflows 64 bits when counting its bytes",
                    shape_str(sbuf, sizeof sbuf, dims, t->ndim), tf_dtype_name(t->dtype));
    t->numel = (size_t)numel;
    t->nbytes = (size_t)nbytes;

    json_t *jo = json_object_get(v, "data_offsets");
    if (!jo) return fail(err, st, at, name, "no \"data_offsets\"");
    if (!json_is_array(jo))
        return fail(err, st, at, name, "\"data_offsets\" is %s, not an array [begin, end]", json_kind(jo));
    if (json_array_size(jo) != 2)
        return fail(err, st, at, name, "\"data_offsets\" has %zu items, not 2 [begin, end]",
                    json_array_size(jo));
    const char *what = NULL;
    long long b = json_count(json_array_get(jo, 0), &what);
    if (b < 0) return fail(err, st, at, name, "data_offsets begin is %s, not a non-negative integer", what);
    long long e = json_count(json_array_get(jo, 1), &what);
    if (e < 0) return fail(err, st, at, name, "data_offsets end is %s, not a non-negative integer", what);
    if (b > e) return fail(err, st, at, name, "data_offsets [%lld, %lld) are out of order (begin > end)", b, e);
    if ((uint64_t)(e - b) != nbytes)
        return fail(err, st, at, name, "data_offsets [%lld, %lld) hold %lld bytes but %s %s needs %llu",
                    b, e, e - b, tf_dtype_name(t->dtype), shape_str(sbuf, sizeof sbuf, dims, t->ndim),
                    (unsigned long long)nbytes);
    size_t data_size = st->size - 8 - st->header_len;
    if ((uint64_t)e > data_size)
        return fail(err, st, at, name,
                    "data_offsets [%lld, %lld) end past the data, which is %zu bytes (bytes %zu..%zu "
                    "of the file)",
                    b, e, data_size, 8 + st->header_len, st->size);
    sp->begin = (uint64_t)b;
    sp->end = (uint64_t)e;
    return TF_OK;
}

/* Spans are sorted through references so the tensors can follow them. */
typedef struct span_ref {
    const st_span *sp;
    size_t idx;
} span_ref;

static int cmp_span(const void *a, const void *b)
{
    const st_span *x = ((const span_ref *)a)->sp, *y = ((const span_ref *)b)->sp;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct name_ref {
    const char *name;
    size_t idx;
} name_ref;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

/* The union of the [begin, end) ranges, taken in file order, must be exactly
 * [0, data size): every gap is a hole, every step back an overlap. */
static tf_status check_tiling(tf_safetensors *st, const tf_st_tensor *ts, const st_span *sp,
                              const span_ref *order, size_t n, tf_error *err)
{
    size_t data_at = 8 + st->header_len, data_size = st->size - data_at;
    uint64_t covered = 0;  /* [0, covered) is tiled so far */
    size_t reach = n;      /* the tensor that ends at `covered` */
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k].idx;
        if (sp[i].begin < covered)
            return fail(err, st, data_at + sp[i].begin, ts[i].name,
                        "data_offsets [%llu, %llu) overlap tensor '%.*s' [%llu, %llu)",
                        (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end, NAME_SHOWN,
                        ts[reach].name, (unsigned long long)sp[reach].begin,
                        (unsigned long long)sp[reach].end);
        if (sp[i].begin > covered)
            return fail(err, st, data_at + covered, NULL,
                        "data bytes [%llu, %llu) belong to no tensor (a hole before tensor '%.*s' [%llu, "
                        "%llu))",
                        (unsigned long long)covered, (unsigned long long)sp[i].begin, NAME_SHOWN,
                        ts[i].name, (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
        if (sp[i].end > covered) {
            covered = sp[i].end;
            reach = i;
        }
    }
    if (covered != data_size)
        return fail(err, st, data_at + covered, NULL,
                    "the tensors end at data byte %llu but the data runs to %zu (file size %zu): %llu "
                    "trailing bytes belong to no tensor",
                    (unsigned long long)covered, data_size, st->size,
                    (unsigned long long)(data_size - covered));
    return TF_OK;
}

static tf_status parse(tf_safetensors *st, tf_error *err)
{
    const unsigned char *b = st->bytes;
    if (st->size < 8)
        return fail(err, st, 0, NULL, "the file is %zu bytes, too short for the 8-byte header length",
                    st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
    if (n > st->size - 8)
        return fail(err, st, 0, NULL, "header length %llu exceeds the file size %zu",
                    (unsigned long long)n, st->size);
    if (n > TF_SAFETENSORS_MAX_HEADER)
        return fail(err, st, 0, NULL, "header length %llu exceeds the limit of %llu bytes",
                    (unsigned long long)n, TF_SAFETENSORS_MAX_HEADER);
    st->header_len = (size_t)n;
    const unsigned char *h = b + 8;
    if (n == 0) return fail(err, st, 8, NULL, "the header is empty (length 0), expected a JSON object");
    if (h[0] != '{')
        return fail(err, st, 8, NULL, "the header starts with byte 0x%02x, not '{'", h[0]);

    json_error_t jerr;
    st->root = json_loadb((const char *)h, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!st->root) {
        size_t at = 8 + (jerr.position > 0 ? (size_t)jerr.position : 0);
        if (strncmp(jerr.text, "duplicate object key", 20) == 0)
            return fail(err, st, at, NULL, "header JSON: %s: a tensor name appears twice", jerr.text);
        return fail(err, st, at, NULL, "header JSON: %s", jerr.text);
    }
    /* '{' first means jansson's root is an object */
    size_t nkeys = json_object_size(st->root);
    size_t *key_at = malloc((nkeys ? nkeys : 1) * sizeof *key_at);
    if (!key_at) return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", st->path);
    /* jansson keeps object items in insertion (= header) order since 2.8 */
    size_t found = scan_top_keys(h, (size_t)n, key_at, nkeys);
    for (size_t i = found; i < nkeys; i++) key_at[i] = 0;
    for (size_t i = 0; i < nkeys; i++) key_at[i] += 8; /* header-relative -> file byte */

    /* room for every tensor and every dimension */
    size_t ntensors = 0, ndims = 0;
    const char *key;
    json_t *v;
    json_object_foreach(st->root, key, v) {
        if (strcmp(key, "__metadata__") == 0) continue;
        ntensors++;
        json_t *js = json_is_object(v) ? json_object_get(v, "shape") : NULL;
        if (json_is_array(js)) ndims += json_array_size(js);
    }
    tf_st_tensor *tmp = calloc(ntensors ? ntensors : 1, sizeof *tmp);
    st_span *spans = calloc(ntensors ? ntensors : 1, sizeof *spans);
    span_ref *order = calloc(ntensors ? ntensors : 1, sizeof *order);
    st->tensors = calloc(ntensors ? ntensors : 1, sizeof *st->tensors);
    st->by_name = calloc(ntensors ? ntensors : 1, sizeof *st->by_name);
    st->dims = calloc(ndims ? ndims : 1, sizeof *st->dims);
    name_ref *names = calloc(ntensors ? ntensors : 1, sizeof *names);
    tf_status rc = TF_OK;
    if (!tmp || !spans || !order || !st->tensors || !st->by_name || !st->dims || !names) {
        rc = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory for %zu tensors", st->path, ntensors);
        goto done;
    }

    size_t i = 0, k = 0, d = 0;
    json_object_foreach(st->root, key, v) {
        size_t at = key_at[k++];
        if (strcmp(key, "__metadata__") == 0) {
            rc = read_metadata(st, v, at, err);
        } else {
            spans[i].order = i;
            rc = check_entry(st, key, v, at, st->dims + d, &tmp[i], &spans[i], err);
            d += (size_t)tmp[i].ndim;
            i++;
        }
        if (rc != TF_OK) goto done;
    }

    for (i = 0; i < ntensors; i++) order[i] = (span_ref){&spans[i], i};
    qsort(order, ntensors, sizeof *order, cmp_span);
    rc = check_tiling(st, tmp, spans, order, ntensors, err);
    if (rc != TF_OK) goto done;

    const unsigned char *data = h + n;
    for (k = 0; k < ntensors; k++) {
        size_t src = order[k].idx;
        st->tensors[k] = tmp[src];
        st->tensors[k].data = data + spans[src].begin;
        st->tensors[k].file_offset = 8 + n + spans[src].begin;
        names[k] = (name_ref){st->tensors[k].name, k};
    }
    st->count = ntensors;
    qsort(names, ntensors, sizeof *names, cmp_name);
    for (k = 0; k < ntensors; k++) st->by_name[k] = names[k].idx;

done:
    free(key_at);
    free(tmp);
    free(spans);
    free(order);
    free(names);
    return rc;
}

static tf_status finish_open(tf_safetensors *st, tf_safetensors **out, tf_error *err)
{
    tf_status rc = parse(st, err);
    if (rc != TF_OK) {
        tf_safetensors_close(st);
        return rc;
    }
    *out = st;
    return TF_OK;
}

tf_status tf_safetensors_open_memory(const void *bytes, size_t size, const char *label,
                                     tf_safetensors **out, tf_error *err)
{
    if (!out) return tf_error_set(err, TF_ERR_USAGE, "tf_safetensors_open_memory: out is NULL");
    *out = NULL;
    tf_safetensors *st = calloc(1, sizeof *st);
    if (st) st->path = strdup(label ? label : "<memory>");
    if (!st || !st->path) {
        tf_safetensors_close(st);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", label ? label : "<memory>");
    }
    if (!bytes && size) {
        tf_safetensors_close(st);
        return tf_error_set(err, TF_ERR_USAGE, "%s: NULL bytes with size %zu", label, size);
    }
    st->bytes = bytes;
    st->size = size;
    return finish_open(st, out, err);
}

tf_status tf_safetensors_open(const char *path, tf_safetensors **out, tf_error *err)
{
    if (!out || !path) return tf_error_set(err, TF_ERR_USAGE, "tf_safetensors_open: NULL argument");
    *out = NULL;
    int fd;
    tf_status ost = tf_file_open_read(path, NULL, TF_ERR_DATA, &fd, err);
    if (ost != TF_OK) return ost;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tf_error_set(err, TF_ERR_DATA, "%s: cannot stat: %s", path, strerror(e));
    }
    tf_safetensors *st = calloc(1, sizeof *st);
    if (st) st->path = strdup(path);
    if (!st || !st->path) {
        close(fd);
        tf_safetensors_close(st);
        return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    }
    st->size = (size_t)sb.st_size;
    if (st->size > 0) { /* mmap refuses length 0; parse() reports the short file */
        void *p = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            tf_safetensors_close(st);
            return tf_error_set(err, TF_ERR_DATA, "%s: cannot map %lld bytes: %s", path,
                                (long long)sb.st_size, strerror(e));
        }
        st->bytes = p;
        st->mapped = 1;
    }
    close(fd); /* the mapping keeps the file */
    return finish_open(st, out, err);
}

void tf_safetensors_close(tf_safetensors *st)
{
    if (!st) return;
    if (st->mapped) munmap((void *)st->bytes, st->size);
    json_decref(st->root);
    free(st->tensors);
    free(st->by_name);
    free(st->dims);
    free(st->meta);
    free(st->path);
    free(st);
}

const char *tf_safetensors_path(const tf_safetensors *st) { return st->path; }
size_t tf_safetensors_count(const tf_safetensors *st) { return st->count; }
const tf_st_tensor *tf_safetensors_tensors(const tf_safetensors *st) { return st->tensors; }

const tf_st_tensor *tf_safetensors_at(const tf_safetensors *st, size_t i)
{
    return i < st->count ? &st->tensors[i] : NULL;
}

const tf_st_tensor *tf_safetensors_find(const tf_safetensors *st, const char *name)
{
    size_t lo = 0, hi = st->count; /* search [lo, hi) of by_name */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tf_st_tensor *t = &st->tensors[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const tf_st_kv *tf_safetensors_metadata(const tf_safetensors *st, size_t *n)
{
    if (n) *n = st->n_meta;
    return st->meta;
}

const char *tf_safetensors_metadata_get(const tf_safetensors *st, const char *key)
{
    tf_st_kv probe = {key, NULL};
    const tf_st_kv *kv = st->n_meta ? bsearch(&probe, st->meta, st->n_meta, sizeof *st->meta, cmp_kv) : NULL;
    return kv ? kv->value : NULL;
}

/* src[n] of dtype dt (little-endian, any alignment) -> dst[n] f32. */
static void to_f32(const unsigned char *src, tf_dtype dt, float *dst, size_t n)
{
    switch (dt) {
    case TF_DTYPE_F32:
        if (n) memcpy(dst, src, n * sizeof(float));
        break;
    case TF_DTYPE_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = tf_f16_to_f32((unsigned short)(src[2 * i] | src[2 * i + 1] << 8));
        break;
    case TF_DTYPE_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = tf_bf16_to_f32((unsigned short)(src[2 * i] | src[2 * i + 1] << 8));
        break;
    case TF_DTYPE_F64:
        for (size_t i = 0; i < n; i++) {
            double x;
            memcpy(&x, src + 8 * i, sizeof x);
            dst[i] = (float)x; /* round to nearest, as numpy's astype */
        }
        break;
    default: break; /* callers check the dtype first */
    }
}

static int f32_convertible(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16 || dt == TF_DTYPE_F64;
}

tf_status tf_safetensors_copy_f32(const tf_safetensors *st, const tf_st_tensor *t, float *dst,
                                  size_t count, tf_error *err)
{
    char sbuf[160];
    if (!f32_convertible(t->dtype))
        return fail(err, st, t->file_offset, t->name,
                    "dtype %s cannot be read as F32 (F32, F16, BF16 and F64 can)", tf_dtype_name(t->dtype));
    if (count != t->numel)
        return fail(err, st, t->file_offset, t->name,
                    "shape %s (%zu elements) does not match the buffer's shape [%zu] (%zu elements)",
                    shape_str(sbuf, sizeof sbuf, t->shape, t->ndim), t->numel, count, count);
    to_f32(t->data, t->dtype, dst, count);
    return TF_OK;
}

tf_status tf_safetensors_load_f32(const tf_safetensors *st, const char *name, int ndim,
                                  const int64_t *shape, float *dst, tf_error *err)
{
    const tf_st_tensor *t = tf_safetensors_find(st, name);
    if (!t)
        return tf_error_set(err, TF_ERR_DATA, "%s: no tensor named '%.*s' (the file has %zu tensors)",
                            st->path, NAME_SHOWN, name, st->count);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char have[160], want[160];
        return fail(err, st, t->file_offset, t->name, "shape %s, but %s was expected",
                    shape_str(have, sizeof have, t->shape, t->ndim),
                    shape_str(want, sizeof want, shape, ndim));
    }
    return tf_safetensors_copy_f32(st, t, dst, t->numel, err);
}
