/* tokenizer_encode.c — from the tokens of one or two texts to the encoding:
 * truncation (tokenizers' truncate_encodings and Encoding::truncate), the
 * overflowing windows in Hugging Face's order, [CLS]/[SEP] and type ids
 * (BERT's template), padding; and the OpenMP batch entry points. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tokenizer_internal.h"

void tf_encode_options_init_size(tf_encode_options *opt, size_t size)
{
    if (!opt) return;
    tf_encode_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.add_special_tokens = 1;
    o.truncation = TF_TRUNCATE_NONE;
    if (size > sizeof o) size = sizeof o;
    if (size < sizeof o.size) return;
    memcpy(opt, &o, size);
    opt->size = (uint32_t)size;
}

void tf_encoding_init_size(tf_encoding *enc, size_t size)
{
    if (!enc) return;
    if (size > sizeof *enc) size = sizeof *enc;
    if (size < sizeof enc->size) return;
    memset(enc, 0, size);
    enc->size = (uint32_t)size;
}

static void scratch_free(struct tf_tok_scratch *sc)
{
    if (!sc) return;
    free(sc->cps);
    free(sc->raw);
    free(sc->raw_at);
    free(sc->norm);
    free(sc->norm_at);
    free(sc->norm_new);
    free(sc->bytes);
    free(sc->boff);
    free(sc->tmp);
    free(sc->tmp_new);
    for (int i = 0; i < 2; i++) {
        free(sc->seq[i].id);
        free(sc->seq[i].start);
        free(sc->seq[i].end);
        free(sc->seq[i].word);
        free(sc->win[i]);
    }
    free(sc);
}

void tf_encoding_free(tf_encoding *enc)
{
    if (!enc) return;
    free(enc->window_start);
    free(enc->ids);
    free(enc->type_ids);
    free(enc->attention_mask);
    free(enc->offsets);
    free(enc->sequence_ids);
    free(enc->word_ids);
    scratch_free(enc->scratch);
    /* keep the caller's size; a zeroed, never initialized one is taken whole */
    tf_encoding_init_size(enc, enc->size ? enc->size : sizeof *enc);
}

static tf_status oom(tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
}

/* ------------------------------------------------------------ truncation */

static int win_push(struct tf_tok_scratch *sc, int which, int32_t *count, int32_t start, int32_t stop)
{
    if (*count >= sc->win_cap[which]) {
        size_t cap = (size_t)sc->win_cap[which];
        if (tok_grow((void **)&sc->win[which], &cap, (size_t)*count + 1, sizeof(tok_range)) ||
            cap > INT32_MAX)
            return -1;
        sc->win_cap[which] = (int32_t)cap;
    }
    sc->win[which][*count] = (tok_range){start, stop};
    (*count)++;
    return 0;
}

/* Encoding::truncate(max_len, stride): the kept window first, then the
 * overflowing ones; consecutive windows share `stride` tokens and the last
 * one is the first that reaches the end. */
static tf_status cut(struct tf_tok_scratch *sc, int which, int32_t n, int64_t max_len, int32_t stride,
                     int32_t *count, tf_error *err)
{
    *count = 0;
    if (max_len >= n) return win_push(sc, which, count, 0, n) ? oom(err) : TF_OK;
    if (max_len == 0) /* everything overflows, as one window */
        return win_push(sc, which, count, 0, 0) || win_push(sc, which, count, 0, n) ? oom(err) : TF_OK;
    if (stride >= max_len)
        return tf_error_set(err, TF_ERR_USAGE,
                            "tokenizer: stride %d must be less than the %lld tokens the %s text is cut "
                            "to (max_length less the special tokens)",
                            stride, (long long)max_len, which ? "second" : "first");
    int32_t step = (int32_t)(max_len - stride);
    for (int64_t start = 0;; start += step) {
        int64_t stop = start + max_len < n ? start + max_len : n;
        if (win_push(sc, which, count, (int32_t)start, (int32_t)stop)) return oom(err);
        if (stop == n) break;
    }
    return TF_OK;
}

/* tokenizers' truncate_encodings, with max_length already less the special
 * tokens; fills the windows of both sequences. */
static tf_status truncate_pair(struct tf_tok_scratch *sc, int has_pair, const tf_encode_options *opt,
                               int64_t ml, int32_t nw[2], tf_error *err)
{
    int32_t n1 = sc->seq[0].n, n2 = has_pair ? sc->seq[1].n : 0;
    int32_t stride = opt->stride;
    tf_status st;
    nw[1] = 0;
    if (ml == 0) {
        if ((st = cut(sc, 0, n1, 0, stride, &nw[0], err))) return st;
        return has_pair ? cut(sc, 1, n2, 0, stride, &nw[1], err) : TF_OK;
    }
    int64_t total = (int64_t)n1 + n2;
    if (opt->truncation == TF_TRUNCATE_NONE || total <= ml) {
        if ((st = cut(sc, 0, n1, n1, stride, &nw[0], err))) return st;
        return has_pair ? cut(sc, 1, n2, n2, stride, &nw[1], err) : TF_OK;
    }
    int64_t to_remove = total - ml;
    switch (opt->truncation) {
    case TF_TRUNCATE_LONGEST_FIRST:
        if (has_pair) {
            /* the shorter keeps its length if the longer can take the rest;
             * else they share the budget, the shorter (A on a tie) gets the
             * smaller half */
            int64_t a = n1, b = n2;
            int swap = a > b;
            if (swap) {
                int64_t t = a;
                a = b;
                b = t;
            }
            if (a > ml)
                b = a;
            else
                b = a > ml - a ? a : ml - a;
            if (a + b > ml) {
                a = ml / 2;
                b = a + ml % 2;
            }
            if (swap) {
                int64_t t = a;
                a = b;
                b = t;
            }
            if ((st = cut(sc, 0, n1, a, stride, &nw[0], err))) return st;
            return cut(sc, 1, n2, b, stride, &nw[1], err);
        }
        return cut(sc, 0, n1, total - to_remove, stride, &nw[0], err);
    case TF_TRUNCATE_ONLY_FIRST:
    case TF_TRUNCATE_ONLY_SECOND: {
        int which = opt->truncation == TF_TRUNCATE_ONLY_SECOND;
        if (which && !has_pair)
            return tf_error_set(err, TF_ERR_USAGE,
                                "tokenizer: truncation only_second needs a second text");
        int32_t tl = sc->seq[which].n;
        if (tl <= to_remove)
            return tf_error_set(err, TF_ERR_DATA,
                                "tokenizer: the %s text has %d tokens, too few to cut %lld and fit "
                                "max_length %d",
                                which ? "second" : "first", tl, (long long)to_remove, opt->max_length);
        if ((st = cut(sc, which, tl, tl - to_remove, stride, &nw[which], err))) return st;
        int other = !which;
        if (other == 1 && !has_pair) return TF_OK;
        return cut(sc, other, sc->seq[other].n, sc->seq[other].n, stride, &nw[other], err);
    }
    default:
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: unknown truncation strategy %d",
                            (int)opt->truncation);
    }
}

/* ------------------------------------------------------------- assembly */

static int enc_reserve(tf_encoding *enc, int64_t tokens, int64_t windows)
{
    if (tokens < 1) tokens = 1; /* arrays exist even for an empty encoding */
    if (tokens > enc->capacity) {
        size_t cap = (size_t)enc->capacity, c;
        c = cap;
        if (tok_grow((void **)&enc->ids, &c, (size_t)tokens, sizeof *enc->ids)) return -1;
        c = cap;
        if (tok_grow((void **)&enc->type_ids, &c, (size_t)tokens, sizeof *enc->type_ids)) return -1;
        c = cap;
        if (tok_grow((void **)&enc->attention_mask, &c, (size_t)tokens, sizeof *enc->attention_mask))
            return -1;
        c = cap;
        if (tok_grow((void **)&enc->sequence_ids, &c, (size_t)tokens, sizeof *enc->sequence_ids)) return -1;
        c = cap;
        if (tok_grow((void **)&enc->word_ids, &c, (size_t)tokens, sizeof *enc->word_ids)) return -1;
        c = cap;
        if (tok_grow((void **)&enc->offsets, &c, (size_t)tokens, 2 * sizeof *enc->offsets)) return -1;
        enc->capacity = c > INT32_MAX ? INT32_MAX : (int32_t)c;
    }
    if (windows + 1 > enc->window_capacity) {
        size_t c = (size_t)enc->window_capacity;
        if (tok_grow((void **)&enc->window_start, &c, (size_t)windows + 1, sizeof *enc->window_start))
            return -1;
        enc->window_capacity = c > INT32_MAX ? INT32_MAX : (int32_t)c;
    }
    return 0;
}

static inline void put_special(tf_encoding *enc, int32_t at, int32_t id, int32_t type)
{
    enc->ids[at] = id;
    enc->type_ids[at] = type;
    enc->attention_mask[at] = 1;
    enc->offsets[2 * at] = 0;
    enc->offsets[2 * at + 1] = 0;
    enc->sequence_ids[at] = -1;
    enc->word_ids[at] = -1;
}

static int32_t put_range(tf_encoding *enc, int32_t at, const tok_list *l, tok_range r, int seq,
                         int32_t type)
{
    int32_t n = r.stop - r.start;
    if (n <= 0) return at;
    memcpy(enc->ids + at, l->id + r.start, (size_t)n * sizeof *enc->ids);
    memcpy(enc->word_ids + at, l->word + r.start, (size_t)n * sizeof *enc->word_ids);
    for (int32_t k = 0; k < n; k++) {
        enc->type_ids[at + k] = type;
        enc->attention_mask[at + k] = 1;
        enc->offsets[2 * (at + k)] = l->start[r.start + k];
        enc->offsets[2 * (at + k) + 1] = l->end[r.start + k];
        enc->sequence_ids[at + k] = (int8_t)seq;
    }
    return at + n;
}

/* The windows of the pair in Hugging Face's order: the kept window, then
 * for every overflowing window i of the first text: (i, kept second),
 * (i, each overflowing second); then (kept first, each overflowing second). */
static void window_pair(int32_t w, int32_t na, int32_t nb, int32_t *a, int32_t *b)
{
    if (w == 0) {
        *a = 0;
        *b = 0;
        return;
    }
    int32_t k = w - 1;
    int32_t block = nb; /* (i, 0), (i, 1..nb-1) */
    if (k < (int64_t)(na - 1) * block) {
        *a = 1 + k / block;
        *b = k % block;
        return;
    }
    k -= (na - 1) * block;
    *a = 0;
    *b = 1 + k;
}

static tf_status assemble(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int has_pair,
                          const tf_encode_options *opt, const int32_t nw[2], tf_encoding *enc,
                          tf_error *err)
{
    int32_t na = nw[0], nb = has_pair ? nw[1] : 1;
    int64_t nwin = opt->return_overflowing ? (int64_t)na * nb : 1;
    int special = opt->add_special_tokens ? (has_pair ? 3 : 2) : 0;
    int64_t total = 0;
    for (int64_t w = 0; w < nwin; w++) {
        int32_t a, b;
        window_pair((int32_t)w, na, nb, &a, &b);
        int64_t len = special + (sc->win[0][a].stop - sc->win[0][a].start) +
                      (has_pair ? sc->win[1][b].stop - sc->win[1][b].start : 0);
        if (opt->pad_to_max_length && len < opt->max_length) len = opt->max_length;
        total += len;
        if (total > INT32_MAX - 1 || w >= INT32_MAX - 1)
            return tf_error_set(err, TF_ERR_DATA, "tokenizer: the windows would hold more than 2^31 "
                                "tokens (raise max_length or lower stride)");
    }
    if (enc_reserve(enc, total, nwin)) return oom(err);
    const int32_t cls = tok->special[TF_TOKEN_CLS], sep = tok->special[TF_TOKEN_SEP];
    int32_t at = 0;
    for (int32_t w = 0; w < nwin; w++) {
        int32_t a, b;
        window_pair(w, na, nb, &a, &b);
        enc->window_start[w] = at;
        int32_t begin = at;
        if (special) put_special(enc, at++, cls, 0);
        at = put_range(enc, at, &sc->seq[0], sc->win[0][a], 0, 0);
        if (special) put_special(enc, at++, sep, 0);
        if (has_pair) {
            at = put_range(enc, at, &sc->seq[1], sc->win[1][b], 1, 1);
            if (special) put_special(enc, at++, sep, 1);
        }
        if (opt->pad_to_max_length) {
            int32_t pad = tok->special[TF_TOKEN_PAD];
            while (at - begin < opt->max_length) {
                put_special(enc, at, pad, 0);
                enc->attention_mask[at] = 0;
                at++;
            }
        }
    }
    enc->window_start[nwin] = at;
    enc->n_windows = (int32_t)nwin;
    enc->n_tokens = at;
    return TF_OK;
}

static tf_status check_options(const tf_encode_options *opt, tf_error *err)
{
    if (!opt) return TF_OK;
    if (opt->size < sizeof(tf_encode_options))
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: encode options of size %u, expected %zu "
                            "(use tf_encode_options_init)", opt->size, sizeof(tf_encode_options));
    if (opt->max_length < 0 || opt->stride < 0)
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: max_length %d and stride %d must be >= 0",
                            opt->max_length, opt->stride);
    if ((int)opt->truncation < TF_TRUNCATE_NONE || (int)opt->truncation > TF_TRUNCATE_ONLY_SECOND)
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: unknown truncation strategy %d",
                            (int)opt->truncation);
    if (opt->truncation != TF_TRUNCATE_NONE && opt->max_length == 0)
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: truncation needs max_length > 0");
    /* tokenizers refuses such settings up front (enable_truncation), counting
     * the 2 special tokens of a single text whatever is encoded; below 2 its
     * usize subtraction wraps around and nothing is refused */
    if (opt->truncation != TF_TRUNCATE_NONE && opt->max_length >= 2 && opt->max_length - 2 < opt->stride)
        return tf_error_set(err, TF_ERR_USAGE,
                            "tokenizer: stride %d is more than max_length %d less 2 special tokens",
                            opt->stride, opt->max_length);
    return TF_OK;
}

tf_status tf_tokenizer_encode(const tf_tokenizer *tok, const char *text, size_t len, const char *pair,
                              size_t pair_len, const tf_encode_options *opt, tf_encoding *enc,
                              tf_error *err)
{
    tf_encode_options dflt;
    tf_status st;
    if ((st = check_options(opt, err))) return st;
    if (!opt) {
        tf_encode_options_init(&dflt);
        opt = &dflt;
    }
    if (!enc || enc->size < sizeof(tf_encoding))
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: the encoding was not initialized "
                            "(tf_encoding_init)");
    if (!text && len) return tf_error_set(err, TF_ERR_USAGE, "tokenizer: NULL text of %zu bytes", len);
    if (!enc->scratch && !(enc->scratch = calloc(1, sizeof *enc->scratch))) return oom(err);
    struct tf_tok_scratch *sc = enc->scratch;
    enc->n_windows = enc->n_tokens = 0;
    if ((st = tok_tokenize_sequence(tok, sc, 0, text ? text : "", len, err))) return st;
    int has_pair = pair != NULL;
    if (has_pair && (st = tok_tokenize_sequence(tok, sc, 1, pair, pair_len, err))) {
        tf_error_prefix(err, "second text");
        return st;
    }
    int special = opt->add_special_tokens ? (has_pair ? 3 : 2) : 0;
    /* max_length below the special tokens: tokenizers' usize subtraction
     * wraps around and nothing is truncated; keep that */
    int64_t ml = opt->truncation == TF_TRUNCATE_NONE || opt->max_length < special
                     ? INT64_MAX
                     : (int64_t)opt->max_length - special;
    int32_t nw[2] = {0, 0};
    tf_encode_options o = *opt;
    if (ml == INT64_MAX) o.truncation = TF_TRUNCATE_NONE;
    if ((st = truncate_pair(sc, has_pair, &o, ml, nw, err))) return st;
    return assemble(tok, sc, has_pair, opt, nw, enc, err);
}

/* ---------------------------------------------------------------- batches */

static size_t text_len(const char *const *texts, const size_t *lens, size_t i)
{
    return lens ? lens[i] : texts[i] ? strlen(texts[i]) : 0;
}

/* Threads for n items: the caller's number, else OpenMP's default; never
 * more than there are items. */
static int batch_threads(int threads, size_t n)
{
#ifdef _OPENMP
    int t = threads > 0 ? threads : omp_get_max_threads();
#else
    int t = 1;
    (void)threads;
#endif
    if ((size_t)t > n) t = n > 0 ? (int)n : 1;
    return t;
}

tf_status tf_tokenizer_encode_batch(const tf_tokenizer *tok, size_t n, const char *const *texts,
                                    const size_t *lens, const char *const *pairs,
                                    const size_t *pair_lens, const tf_encode_options *opt,
                                    int threads, tf_encoding *out, tf_error *err)
{
    tf_status st;
    if ((st = check_options(opt, err))) return st;
    if (n > 0 && (!texts || !out)) return tf_error_set(err, TF_ERR_USAGE, "tokenizer: batch without texts");
    size_t first_bad = n;
    tf_error bad;
    tf_error_clear(&bad);
    int nt = batch_threads(threads, n);
    (void)nt;
    long long nn = (long long)n;
#pragma omp parallel for schedule(dynamic, 8) num_threads(nt)
    for (long long i = 0; i < nn; i++) {
        tf_error e;
        tf_status s = tf_tokenizer_encode(tok, texts[i], text_len(texts, lens, (size_t)i),
                                          pairs ? pairs[i] : NULL,
                                          pairs ? text_len(pairs, pair_lens, (size_t)i) : 0, opt,
                                          &out[i], &e);
        if (s != TF_OK) {
#pragma omp critical(tf_tokenizer_batch_error)
            if ((size_t)i < first_bad) {
                first_bad = (size_t)i;
                bad = e;
            }
        }
    }
    if (first_bad < n) {
        tf_error_set(err, bad.code, "text %zu: %s", first_bad, bad.msg);
        return bad.code;
    }
    return TF_OK;
}

tf_status tf_tokenizer_encode_batch_fixed(const tf_tokenizer *tok, size_t n, const char *const *texts,
                                          const size_t *lens, const char *const *pairs,
                                          const size_t *pair_lens, const tf_encode_options *opt,
                                          int threads, int32_t *ids, int32_t *type_ids,
                                          int32_t *attention_mask, tf_error *err)
{
    tf_status st;
    if ((st = check_options(opt, err))) return st;
    if (!opt || opt->max_length <= 0)
        return tf_error_set(err, TF_ERR_USAGE, "tokenizer: fixed-shape batches need max_length > 0");
    if (n > 0 && (!texts || !ids)) return tf_error_set(err, TF_ERR_USAGE, "tokenizer: batch without texts");
    tf_encode_options o = *opt;
    o.return_overflowing = 0;
    o.pad_to_max_length = 1;
    const size_t L = (size_t)opt->max_length;
    size_t first_bad = n;
    tf_error bad;
    tf_error_clear(&bad);
    int nt = batch_threads(threads, n);
    (void)nt;
    long long nn = (long long)n;
#pragma omp parallel num_threads(nt)
    {
        tf_encoding enc; /* one per thread: its scratch is reused row after row */
        tf_encoding_init(&enc);
#pragma omp for schedule(dynamic, 8)
        for (long long i = 0; i < nn; i++) {
            tf_error e;
            tf_status s = tf_tokenizer_encode(tok, texts[i], text_len(texts, lens, (size_t)i),
                                              pairs ? pairs[i] : NULL,
                                              pairs ? text_len(pairs, pair_lens, (size_t)i) : 0, &o,
                                              &enc, &e);
            if (s == TF_OK && (size_t)enc.window_start[1] != L)
                s = tf_error_set(&e, TF_ERR_DATA, "%d tokens do not fit max_length %zu (truncate)",
                                 enc.window_start[1], L);
            if (s != TF_OK) {
#pragma omp critical(tf_tokenizer_batch_error)
                if ((size_t)i < first_bad) {
                    first_bad = (size_t)i;
                    bad = e;
                }
                continue;
            }
            size_t row = (size_t)i * L;
            memcpy(ids + row, enc.ids, L * sizeof *ids);
            if (type_ids) memcpy(type_ids + row, enc.type_ids, L * sizeof *type_ids);
            if (attention_mask) memcpy(attention_mask + row, enc.attention_mask, L * sizeof *attention_mask);
        }
        tf_encoding_free(&enc);
    }
    if (first_bad < n) {
        tf_error_set(err, bad.code, "text %zu: %s", first_bad, bad.msg);
        return bad.code;
    }
    return TF_OK;
}
