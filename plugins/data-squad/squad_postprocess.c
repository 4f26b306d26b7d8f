/* squad_postprocess.c — utils_qa.postprocess_qa_predictions in C, and the
 * files it writes (see squad_postprocess.h). Scores are float32 sums, as
 * numpy computes them from the model's float32 logits, so that null_odds.json
 * holds the very values Python would write. */
#include "squad_postprocess.h"
#include "tfcore/file.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- question ids -> their examples (utils_qa's example_id_to_index) -------- */

typedef struct id_entry {
    size_t first, last; /* the id's first and last example */
} id_entry;

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* entry_of[e] for every example e < n: the index of its id among the
 * distinct ids (in order of first appearance); entries[] their examples. */
static int map_ids(const tf_squad_dataset *data, size_t n, size_t *entry_of, id_entry *entries, size_t *n_entries)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slot = malloc(cap * sizeof *slot); /* [cap] entry index + 1, 0 = empty */
    if (!slot) return -1;
    memset(slot, 0, cap * sizeof *slot);
    size_t m = 0;
    for (size_t e = 0; e < n; e++) {
        const char *id = data->examples[e].id;
        size_t h = (size_t)hash_id(id) & (cap - 1);
        while (slot[h] && strcmp(data->examples[entries[slot[h] - 1].first].id, id) != 0) h = (h + 1) & (cap - 1);
        if (!slot[h]) {
            entries[m].first = e;
            slot[h] = ++m;
        }
        entries[slot[h] - 1].last = e;
        entry_of[e] = slot[h] - 1;
    }
    free(slot);
    *n_entries = m;
    return 0;
}

/* ---- np.argsort(x)[-1 : -k - 1 : -1] ---------------------------------------- */

/* Whether position a comes before position b in the reversed ascending
 * argsort: the larger value first, NaN largest (numpy sorts NaN to the end),
 * ties by the higher position (a stable ascending sort, reversed). */
static int argsort_before(float va, int32_t a, float vb, int32_t b)
{
    int na = isnan(va), nb = isnan(vb);
    if (na != nb) return na;
    if (!na && va != vb) return va > vb;
    return a > b;
}

/* The k best of x[0], x[2], ... x[2 * (P - 1)] (a stride of 2: the start or
 * end column of interleaved logits) into top[0..*n), best first. */
static void top_k(const float *x, int32_t P, int k, int32_t *top, int *n)
{
    int m = 0;
    for (int32_t p = 0; p < P; p++) {
        float v = x[2 * (size_t)p];
        if (m == k && !argsort_before(v, p, x[2 * (size_t)top[m - 1]], top[m - 1])) continue;
        int i = m < k ? m++ : m - 1; /* the slot to fill: a new one or the worst */
        while (i > 0 && argsort_before(v, p, x[2 * (size_t)top[i - 1]], top[i - 1])) {
            top[i] = top[i - 1];
            i--;
        }
        top[i] = p;
    }
    *n = m;
}

/* ---- one example ------------------------------------------------------------ */

typedef struct pp_pred {
    int64_t o0, o1;       /* offsets into the context (code points); the null prediction (0, 0) */
    float score, s, e;    /* start + end, start logit, end logit */
    size_t order;         /* generation order: the stable sort's tie-break */
    const char *text;     /* into the context (not NUL-terminated) or a literal */
    size_t text_len;
} pp_pred;

static int by_score_desc(const void *pa, const void *pb)
{
    const pp_pred *a = pa, *b = pb;
    int na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na - nb; /* NaN last */
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

typedef struct pp_work {
    pp_pred *cand;          /* [cap_cand] */
    size_t cap_cand;
    int32_t *top_s, *top_e; /* [n_best] */
    size_t *cp_byte;        /* [context_len + 1] byte offset of each code point */
    size_t cap_cp;
    const char *cp_of;      /* the context cp_byte describes */
} pp_work;

static int push_cand(pp_work *w, size_t *n, pp_pred p)
{
    if (*n == w->cap_cand) {
        size_t c = w->cap_cand ? 2 * w->cap_cand : 512;
        pp_pred *q = realloc(w->cand, c * sizeof *q);
        if (!q) return -1;
        w->cand = q;
        w->cap_cand = c;
    }
    p.order = *n;
    w->cand[(*n)++] = p;
    return 0;
}

/* Map code points to bytes for this context (once per paragraph). */
static int index_context(pp_work *w, const tf_squad_example *ex)
{
    if (w->cp_of == ex->context) return 0;
    size_t need = ex->context_len + 1;
    if (need > w->cap_cp) {
        size_t *q = realloc(w->cp_byte, need * sizeof *q);
        if (!q) return -1;
        w->cp_byte = q;
        w->cap_cp = need;
    }
    size_t k = 0;
    for (size_t b = 0; b < ex->context_bytes && k < ex->context_len; b++)
        if (((unsigned char)ex->context[b] & 0xC0) != 0x80) w->cp_byte[k++] = b;
    while (k <= ex->context_len) w->cp_byte[k++] = ex->context_bytes;
    w->cp_of = ex->context;
    return 0;
}

/* context[o0:o1] with Python's slice rules (clamped; empty when o1 <= o0). */
static void slice(const pp_work *w, const tf_squad_example *ex, pp_pred *p)
{
    int64_t n = (int64_t)ex->context_len, a = p->o0, b = p->o1;
    if (a < 0) a = a + n < 0 ? 0 : a + n;
    if (b < 0) b = b + n < 0 ? 0 : b + n;
    if (a > n) a = n;
    if (b > n) b = n;
    if (b <= a) {
        p->text = "";
        p->text_len = 0;
        return;
    }
    p->text = ex->context + w->cp_byte[a];
    p->text_len = w->cp_byte[b] - w->cp_byte[a];
}

static tf_status predict_one(pp_work *w, const tf_squad_example *ex, const squad_features *f, const size_t *feats,
                             size_t nf, const float *logits, int cols, const squad_pp_options *opt, char **text,
                             double *odds, tf_error *err)
{
    static const pp_pred no_text = {0, 0, 0.0f, 0.0f, 0.0f, 0, "", 0};
    const int32_t P = cols / 2;
    size_t n = 0;
    pp_pred null = {0};
    int have_null = 0;
    for (size_t k = 0; k < nf; k++) {
        size_t fi = feats[k];
        const float *row = logits + fi * (size_t)cols; /* [P, 2] (start, end) */
        float ns = row[0] + row[1];
        if (!have_null || null.score > ns) {
            null = (pp_pred){0, 0, ns, row[0], row[1], 0, "", 0};
            have_null = 1;
        }
        int nsi, nei;
        top_k(row, P, opt->n_best_size, w->top_s, &nsi);
        top_k(row + 1, P, opt->n_best_size, w->top_e, &nei);
        const int32_t c0 = f->ctx_first[fi], c1 = c0 + f->ctx_count[fi];
        const int32_t *off = f->offsets + 2 * f->off_start[fi]; /* [c1 - c0, 2]: position p at off[2 (p - c0)] */
        for (int i = 0; i < nsi; i++) {
            int32_t a = w->top_s[i];
            if (a < c0 || a >= c1) continue; /* offset_mapping[a] is None (or out of range) */
            for (int j = 0; j < nei; j++) {
                int32_t b = w->top_e[j];
                if (b < c0 || b >= c1) continue;
                if (b < a || b - a + 1 > opt->max_answer_length) continue;
                pp_pred p = {off[2 * (a - c0)], off[2 * (b - c0) + 1], row[2 * a] + row[2 * b + 1], row[2 * a],
                             row[2 * b + 1], 0, NULL, 0};
                if (push_cand(w, &n, p)) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
            }
        }
    }
    if (opt->version_2_with_negative && have_null && push_cand(w, &n, null))
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    if (n > 1) qsort(w->cand, n, sizeof *w->cand, by_score_desc);
    if (n > (size_t)opt->n_best_size) n = (size_t)opt->n_best_size;
    if (opt->version_2_with_negative && have_null) {
        int seen = 0;
        for (size_t i = 0; i < n; i++) seen |= w->cand[i].o0 == 0 && w->cand[i].o1 == 0;
        if (!seen && push_cand(w, &n, null)) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    }
    if (index_context(w, ex)) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    for (size_t i = 0; i < n; i++) slice(w, ex, &w->cand[i]);
    /* the "empty" fallback: nothing, or only the null prediction */
    if (n == 0 || (n == 1 && w->cand[0].text_len == 0)) {
        if (push_cand(w, &n, (pp_pred){0})) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
        memmove(w->cand + 1, w->cand, (n - 1) * sizeof *w->cand);
        w->cand[0] = (pp_pred){0, 0, 0.0f, 0.0f, 0.0f, 0, "empty", 5};
    }
    const pp_pred *best = &w->cand[0];
    *odds = 0.0;
    if (opt->version_2_with_negative) {
        size_t i = 0;
        while (i < n && w->cand[i].text_len == 0) i++;
        best = i < n ? &w->cand[i] : &no_text; /* utils_qa would fail here; never happens */
        /* null_score - start_logit - end_logit, each step in float32 */
        float diff = null.score - best->s;
        diff = diff - best->e;
        *odds = have_null ? (double)diff : 0.0;
        /* numpy compares the float32 difference with the threshold in float64 */
        if (have_null && (double)diff > opt->null_score_diff_threshold) best = &no_text;
    }
    *text = strndup(best->text, best->text_len);
    if (!*text) return tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    return TF_OK;
}

void squad_pp_result_free(squad_pp_result *r)
{
    if (!r) return;
    for (size_t i = 0; r->texts && i < r->n; i++) free(r->texts[i]);
    free(r->texts);
    free(r->ids);
    free(r->null_odds);
    memset(r, 0, sizeof *r);
}

tf_status squad_postprocess(const tf_squad_dataset *data, size_t n_examples, const squad_features *f,
                            const float *logits, size_t rows, int cols, const squad_pp_options *opt,
                            squad_pp_result *out, tf_error *err)
{
    memset(out, 0, sizeof *out);
    if (rows != f->n)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: got logits for %zu rows, the eval split has %zu features",
                            rows, f->n);
    if (cols < 2 || cols % 2 || cols / 2 < f->max_len)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "squad: logits have %d columns; expected (start, end) pairs for at least %d positions",
                            cols, f->max_len);
    if (!f->offsets && f->n)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: features built without offsets cannot be postprocessed");
    if (opt->n_best_size < 1 || opt->max_answer_length < 1)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: n_best_size and max_answer_length must be >= 1");
    if (n_examples > data->n_examples) n_examples = data->n_examples;
    for (size_t i = 0; i < f->n; i++)
        if ((size_t)f->example[i] >= n_examples)
            return tf_error_set(err, TF_ERR_RUNTIME, "squad: feature %zu belongs to question %d, beyond the %zu used",
                                i, f->example[i], n_examples);

    tf_status st = TF_OK;
    size_t ne = 0;
    size_t *entry_of = malloc((n_examples ? n_examples : 1) * sizeof *entry_of); /* [n_examples] */
    id_entry *entries = malloc((n_examples ? n_examples : 1) * sizeof *entries); /* [distinct ids] */
    size_t *feat_first = NULL, *feats = NULL; /* CSR: entry k's features feats[feat_first[k] .. [k + 1]) */
    pp_work w = {0};
    w.top_s = malloc((size_t)opt->n_best_size * sizeof *w.top_s);
    w.top_e = malloc((size_t)opt->n_best_size * sizeof *w.top_e);
    if (!entry_of || !entries || !w.top_s || !w.top_e || map_ids(data, n_examples, entry_of, entries, &ne)) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
        goto done;
    }
    feat_first = calloc(ne + 1, sizeof *feat_first);
    feats = malloc((f->n ? f->n : 1) * sizeof *feats);
    out->ids = calloc(ne ? ne : 1, sizeof *out->ids);
    out->texts = calloc(ne ? ne : 1, sizeof *out->texts);
    out->null_odds = calloc(ne ? ne : 1, sizeof *out->null_odds);
    if (!feat_first || !feats || !out->ids || !out->texts || !out->null_odds) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
        goto done;
    }
    out->n = ne;
    for (size_t i = 0; i < f->n; i++) feat_first[entry_of[f->example[i]] + 1]++;
    for (size_t k = 0; k < ne; k++) feat_first[k + 1] += feat_first[k];
    {
        size_t *fill = malloc((ne ? ne : 1) * sizeof *fill);
        if (!fill) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
            goto done;
        }
        memcpy(fill, feat_first, (ne ? ne : 1) * sizeof *fill);
        for (size_t i = 0; i < f->n; i++) feats[fill[entry_of[f->example[i]]]++] = i;
        free(fill);
    }
    for (size_t k = 0; k < ne && !st; k++) {
        /* the features of every example with this id, sliced from the last one's context */
        const tf_squad_example *ex = &data->examples[entries[k].last];
        size_t nf = feat_first[k + 1] - feat_first[k];
        out->ids[k] = ex->id;
        if (nf == 0) out->n_featureless++;
        st = predict_one(&w, ex, f, feats + feat_first[k], nf, logits, cols, opt, &out->texts[k], &out->null_odds[k],
                         err);
    }
done:
    free(entry_of);
    free(entries);
    free(feat_first);
    free(feats);
    free(w.cand);
    free(w.top_s);
    free(w.top_e);
    free(w.cp_byte);
    if (st) squad_pp_result_free(out);
    return st;
}

/* ---- the JSON files ------------------------------------------------------- */

static int put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1) c *= 2;
        char *q = realloc(*buf, c);
        if (!q) return -1;
        *buf = q;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

int squad_json_string(char **buf, size_t *len, size_t *cap, const char *s)
{
    if (put(buf, len, cap, "\"", 1)) return -1;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t c = *p;
        size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80) n = 1; /* never in JSON-loaded text; read the byte alone */
        if (n == 2) c &= 0x1F;
        else if (n == 3) c &= 0x0F;
        else if (n == 4) c &= 0x07;
        for (size_t i = 1; i < n; i++) c = (c << 6) | (p[i] & 0x3F);
        p += n;
        char e[16];
        int el;
        switch (c) {
        case '"': el = snprintf(e, sizeof e, "\\\""); break;
        case '\\': el = snprintf(e, sizeof e, "\\\\"); break;
        case '\n': el = snprintf(e, sizeof e, "\\n"); break;
        case '\r': el = snprintf(e, sizeof e, "\\r"); break;
        case '\t': el = snprintf(e, sizeof e, "\\t"); break;
        case '\b': el = snprintf(e, sizeof e, "\\b"); break;
        case '\f': el = snprintf(e, sizeof e, "\\f"); break;
        default:
            if (c >= 0x20 && c < 0x7F) {
                e[0] = (char)c;
                el = 1;
            } else if (c > 0xFFFF) { /* a surrogate pair, lowercase hex as Python writes it */
                uint32_t v = c - 0x10000;
                el = snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                el = snprintf(e, sizeof e, "\\u%04x", c);
            }
        }
        if (put(buf, len, cap, e, (size_t)el)) return -1;
    }
    return put(buf, len, cap, "\"", 1);
}

/* json.dumps(d, indent=4) + "\n" of {ids[i]: value i} */
static int dump_dict(const squad_pp_result *r, int odds, char **buf, size_t *len, size_t *cap)
{
    if (r->n == 0) return put(buf, len, cap, "{}\n", 3);
    if (put(buf, len, cap, "{\n", 2)) return -1;
    for (size_t i = 0; i < r->n; i++) {
        if (put(buf, len, cap, "    ", 4) || squad_json_string(buf, len, cap, r->ids[i]) || put(buf, len, cap, ": ", 2))
            return -1;
        if (odds) {
            char num[32];
            tf_squad_repr_double(r->null_odds[i], num);
            if (put(buf, len, cap, num, strlen(num))) return -1;
        } else if (squad_json_string(buf, len, cap, r->texts[i])) {
            return -1;
        }
        if (put(buf, len, cap, i + 1 < r->n ? ",\n" : "\n", i + 1 < r->n ? 2 : 1)) return -1;
    }
    return put(buf, len, cap, "}\n", 2);
}

/* Write text to dir/name atomically (libtfcore's temp file, fsync, rename):
 * readers see the old file or the new one. */
static tf_status write_atomic(const char *dir, const char *name, const char *text, size_t len, tf_error *err)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return tf_error_set(err, TF_ERR_RUNTIME, "squad: the path of %s is too long (output_dir %.200s... has %zu bytes)",
                            name, dir, strlen(dir));
    tf_file_part part = {text, len};
    return tf_file_write_atomic(path, &part, 1, err);
}

tf_status squad_write_predictions(const char *dir, const squad_pp_result *r, int version_2, tf_error *err)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    tf_status st = TF_OK;
    if (dump_dict(r, 0, &buf, &len, &cap)) st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
    if (!st) st = write_atomic(dir, "predictions.json", buf, len, err);
    if (!st && version_2) {
        len = 0;
        if (dump_dict(r, 1, &buf, &len, &cap)) st = tf_error_set(err, TF_ERR_RUNTIME, "squad: out of memory");
        if (!st) st = write_atomic(dir, "null_odds.json", buf, len, err);
    }
    free(buf);
    return st;
}
