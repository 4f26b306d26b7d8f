/* squad_features.c — run_qa.py's prepare_train_features and
 * prepare_validation_features in C (see squad_features.h). Examples are
 * tokenized in chunks (one tf_tokenizer_encode_batch call each, OpenMP
 * inside) so that a 130k-question training file never holds more than one
 * chunk of full encodings; the features keep only their unpadded ids. */
#include "squad_features.h"

#include <stdlib.h>
#include <string.h>

#define SQUAD_CHUNK_DEFAULT 2048

/* ---- text helpers --------------------------------------------------------- */

size_t squad_utf8_len(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* The code point at s[0..len) (valid UTF-8, as the JSON loader guarantees)
 * and its length in bytes. */
static uint32_t utf8_decode(const unsigned char *s, size_t len, size_t *used)
{
    uint32_t c = s[0];
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (n > len) n = 1;
    if (n == 2) c &= 0x1F;
    else if (n == 3) c &= 0x0F;
    else if (n == 4) c &= 0x07;
    for (size_t i = 1; i < n; i++) c = (c << 6) | (s[i] & 0x3F);
    *used = n;
    return c;
}

/* Python's str.isspace(): bidirectional class WS, B or S, or category Zs. */
static int py_isspace(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

const char *squad_lstrip(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        size_t used;
        if (!py_isspace(utf8_decode(p, (size_t)(end - p), &used))) break;
        p += used;
    }
    return (const char *)p;
}

/* ---- the label rule ------------------------------------------------------- */

void squad_window_label(const int32_t *ids, const int32_t *offsets, const int8_t *seq_ids, int32_t len,
                        int32_t cls_id, int has_answer, int64_t start_char, int64_t end_char,
                        int32_t *start, int32_t *end)
{
    /* cls_index = input_ids.index(cls_token_id), else 0 */
    int32_t cls = 0;
    for (int32_t i = 0; i < len; i++)
        if (ids[i] == cls_id) {
            cls = i;
            break;
        }
    *start = *end = cls;
    if (!has_answer) return;
    /* the window's first and last context token; Python would raise an
     * IndexError on a window without one (an empty context) */
    int32_t ts = 0, te = len - 1;
    while (ts < len && seq_ids[ts] != 1) ts++;
    while (te >= 0 && seq_ids[te] != 1) te--;
    if (ts >= len || te < 0) return;
    /* the answer not inside this window: [CLS] */
    if (!(offsets[2 * ts] <= start_char && offsets[2 * te + 1] >= end_char)) return;
    /* An empty answer at 0 (end_char <= 0) would walk te below 0 into
     * Python's negative indices until run_qa dies with an IndexError: it has
     * no label there, tfcore gives [CLS]. For end_char > 0 the walk stops at
     * the latest on the [SEP] before the context (offsets (0, 0)). */
    if (end_char <= 0) return;
    /* the walks, as run_qa writes them: the start walk goes on over [SEP] and
     * padding, whose offsets (0, 0) satisfy offsets[i][0] <= start_char */
    while (ts < len && offsets[2 * ts] <= start_char) ts++;
    while (offsets[2 * te + 1] >= end_char) te--;
    *start = ts - 1;
    *end = te + 1;
}

/* ---- growable storage ----------------------------------------------------- */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return -1;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

typedef struct builder {
    squad_features *f;
    int offsets;                     /* keep_offsets */
    size_t cap_feat, cap_ids, cap_off; /* elements allocated */
} builder;

/* Room for `need` features in every per-feature array (tok_start and
 * off_start hold need + 1). */
static int reserve_features(builder *b, size_t need)
{
    if (need + 1 <= b->cap_feat) return 0;
    size_t c = b->cap_feat ? b->cap_feat : 1024;
    while (c < need + 1) {
        if (c > SIZE_MAX / 2 / sizeof(int64_t)) return -1;
        c *= 2;
    }
    squad_features *f = b->f;
    int32_t **arr32[] = {&f->type1, &f->start_pos, &f->end_pos, &f->example, &f->ctx_first, &f->ctx_count};
    int64_t **arr64[] = {&f->tok_start, &f->off_start};
    size_t n32 = b->offsets ? 6 : 4, n64 = b->offsets ? 2 : 1;
    for (size_t i = 0; i < n32; i++) {
        void *p = realloc(*arr32[i], c * sizeof(int32_t));
        if (!p) return -1;
        *arr32[i] = p;
    }
    for (size_t i = 0; i < n64; i++) {
        void *p = realloc(*arr64[i], c * sizeof(int64_t));
        if (!p) return -1;
        *arr64[i] = p;
    }
    b->cap_feat = c;
    return 0;
}

static tf_status oom(tf_error *err, const char *file)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory building SQuAD features", file);
}

/* Append the windows of one encoded example. Returns 1 when max_features is reached. */
static int add_windows(builder *b, const tf_encoding *enc, const squad_feature_options *opt,
                       const tf_squad_example *ex, size_t example_index, int32_t cls_id, tf_status *st,
                       tf_error *err)
{
    squad_features *f = b->f;
    int has_answer = ex->n_answers > 0;
    int64_t start_char = 0, end_char = 0;
    if (has_answer) { /* the first gold answer, in code points */
        start_char = ex->answers[0].start;
        const char *t = ex->answers[0].text;
        end_char = start_char + (int64_t)squad_utf8_len(t, strlen(t));
    }
    for (int32_t w = 0; w < enc->n_windows; w++) {
        if (opt->max_features && f->n >= opt->max_features) return 1;
        int32_t ws = enc->window_start[w], wlen = enc->window_start[w + 1] - ws;
        const int32_t *ids = enc->ids + ws, *off = enc->offsets + 2 * (size_t)ws;
        const int32_t *types = enc->type_ids + ws, *mask = enc->attention_mask + ws;
        const int8_t *sid = enc->sequence_ids + ws;
        int32_t len = 0; /* tokens before padding (the mask is a prefix of ones) */
        while (len < wlen && mask[len]) len++;
        int32_t t1 = 0;
        while (t1 < len && types[t1] != 1) t1++;
        size_t i = f->n;
        if (reserve_features(b, i + 1) ||
            grow((void **)&f->ids, &b->cap_ids, (size_t)f->tok_start[i] + (size_t)len, sizeof *f->ids)) {
            *st = oom(err, opt->file);
            return -1;
        }
        memcpy(f->ids + f->tok_start[i], ids, (size_t)len * sizeof *ids);
        f->tok_start[i + 1] = f->tok_start[i] + len;
        f->type1[i] = t1;
        f->example[i] = (int32_t)example_index;
        squad_window_label(ids, off, sid, wlen, cls_id, has_answer, start_char, end_char, &f->start_pos[i],
                           &f->end_pos[i]);
        if (len > f->max_len) f->max_len = len;
        if (opt->keep_offsets) {
            int32_t first = 0, last = wlen - 1;
            while (first < wlen && sid[first] != 1) first++;
            while (last >= first && sid[last] != 1) last--;
            int32_t count = first < wlen ? last - first + 1 : 0;
            if (first >= wlen) first = 0;
            if (grow((void **)&f->offsets, &b->cap_off, 2 * ((size_t)f->off_start[i] + (size_t)count),
                     sizeof *f->offsets)) {
                *st = oom(err, opt->file);
                return -1;
            }
            memcpy(f->offsets + 2 * f->off_start[i], off + 2 * (size_t)first, 2 * (size_t)count * sizeof *off);
            f->off_start[i + 1] = f->off_start[i] + count;
            f->ctx_first[i] = first;
            f->ctx_count[i] = count;
        }
        f->n = i + 1;
    }
    return 0;
}

/* Name the first example of a failed chunk: encode them one by one. */
static tf_status explain_failure(const tf_tokenizer *tok, const tf_squad_dataset *data, const size_t *which,
                                 const char *const *q, const size_t *ql, size_t m, const tf_encode_options *eo,
                                 const squad_feature_options *opt, tf_error *err)
{
    tf_encoding enc;
    tf_encoding_init(&enc);
    tf_status st = TF_OK;
    for (size_t k = 0; k < m && !st; k++) {
        const tf_squad_example *ex = &data->examples[which[k]];
        tf_error e;
        if (tf_tokenizer_encode(tok, q[k], ql[k], ex->context, ex->context_bytes, eo, &enc, &e)) {
            st = tf_error_set(err, e.code,
                              "%s: question '%s' (index %zu): cannot make windows of max_seq_length %d "
                              "with doc_stride %d: %s",
                              opt->file, ex->id, which[k], opt->max_seq_length, opt->doc_stride, e.msg);
        }
    }
    tf_encoding_free(&enc);
    return st;
}

void squad_features_free(squad_features *f)
{
    if (!f) return;
    free(f->tok_start);
    free(f->ids);
    free(f->type1);
    free(f->start_pos);
    free(f->end_pos);
    free(f->example);
    free(f->ctx_first);
    free(f->ctx_count);
    free(f->off_start);
    free(f->offsets);
    memset(f, 0, sizeof *f);
}

tf_status squad_features_build(const tf_tokenizer *tok, const tf_squad_dataset *data,
                               const squad_feature_options *opt, squad_features *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    const char *file = opt->file ? opt->file : "squad";
    squad_feature_options o = *opt;
    o.file = file;
    size_t n_ex = data->n_examples;
    if (o.max_examples && o.max_examples < n_ex) n_ex = o.max_examples;
    if (n_ex > INT32_MAX)
        return tf_error_set(err, TF_ERR_DATA, "%s: %zu questions; at most %d are supported", file, n_ex,
                            INT32_MAX);
    size_t chunk = o.chunk ? o.chunk : SQUAD_CHUNK_DEFAULT;
    out->n_examples = n_ex;

    builder b = {out, o.keep_offsets != 0, 0, 0, 0};
    tf_status st = TF_OK;
    if (o.skip_misaligned)
        for (size_t i = 0; i < n_ex; i++) out->n_skipped += data->examples[i].misaligned != 0;
    size_t *which = malloc(chunk * sizeof *which);              /* [chunk] example indices */
    const char **q = malloc(chunk * sizeof *q);                  /* [chunk] stripped questions */
    size_t *ql = malloc(chunk * sizeof *ql);                     /* [chunk] their bytes */
    const char **c = malloc(chunk * sizeof *c);                  /* [chunk] contexts */
    size_t *cl = malloc(chunk * sizeof *cl);                     /* [chunk] their bytes */
    tf_encoding *enc = calloc(chunk, sizeof *enc);               /* [chunk] */
    if (!which || !q || !ql || !c || !cl || !enc || reserve_features(&b, 0)) st = oom(err, file);
    else {
        out->tok_start[0] = 0; /* the empty feature list */
        if (o.keep_offsets) out->off_start[0] = 0;
    }
    for (size_t k = 0; enc && k < chunk; k++) tf_encoding_init(&enc[k]);

    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_ONLY_SECOND;
    eo.max_length = o.max_seq_length;
    eo.stride = o.doc_stride;
    eo.return_overflowing = 1;
    eo.pad_to_max_length = o.pad_to_max_length;
    const int32_t cls_id = tf_tokenizer_special_id(tok, TF_TOKEN_CLS);

    int full = 0;
    for (size_t next = 0; !st && !full && next < n_ex;) {
        size_t m = 0;
        for (; next < n_ex && m < chunk; next++) {
            const tf_squad_example *ex = &data->examples[next];
            if (o.skip_misaligned && ex->misaligned) continue;
            size_t qlen = strlen(ex->question);
            q[m] = squad_lstrip(ex->question, qlen);
            ql[m] = qlen - (size_t)(q[m] - ex->question);
            c[m] = ex->context;
            cl[m] = ex->context_bytes;
            which[m++] = next;
        }
        if (m == 0) break;
        tf_error e;
        if (tf_tokenizer_encode_batch(tok, m, q, ql, c, cl, &eo, o.threads, enc, &e)) {
            st = explain_failure(tok, data, which, q, ql, m, &eo, &o, err);
            if (!st) st = tf_error_set(err, e.code, "%s: %s", file, e.msg);
            break;
        }
        for (size_t k = 0; k < m && !st; k++) {
            int r = add_windows(&b, &enc[k], &o, &data->examples[which[k]], which[k], cls_id, &st, err);
            if (r == 1) {
                full = 1;
                break;
            }
        }
    }
    if (!st && out->n) { /* give back the doubling's slack of the largest array */
        int32_t *ids = realloc(out->ids, (size_t)out->tok_start[out->n] * sizeof *ids);
        if (ids) out->ids = ids;
    }
    for (size_t k = 0; enc && k < chunk; k++) tf_encoding_free(&enc[k]);
    free(enc);
    free(which);
    free(q);
    free(ql);
    free(c);
    free(cl);
    if (st) squad_features_free(out);
    return st;
}
