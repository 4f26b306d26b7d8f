/* tokenizer_wordpiece.c — WordPiece of one piece, as tokenizers' WordPiece
 * model: more than max_input_chars_per_word code points -> [UNK]; else
 * greedy longest match from the left, later pieces looked up with the
 * continuation prefix ("##"); if some position matches nothing, the whole
 * piece is one [UNK]. */
#include "tokenizer_internal.h"

/* Offsets of normalized characters [a, b) of the word: the smallest and
 * largest original positions they came from (tokenizers takes min/max too,
 * which matters only after NFD reordered marks). */
static void span(const struct tf_tok_scratch *sc, int32_t a, int32_t b, int32_t *start, int32_t *end)
{
    int32_t lo = sc->norm_at[a], hi = lo;
    for (int32_t k = a + 1; k < b; k++) {
        int32_t v = sc->norm_at[k];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    *start = lo;
    *end = hi + 1;
}

tf_status tok_wordpiece(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int32_t first,
                        int32_t nchars, tok_list *out, tf_error *err)
{
    const char *bytes = sc->bytes;
    const int32_t *boff = sc->boff;
    const int32_t word = sc->word_index;
    const int32_t mark = out->n;
    if (nchars <= tok->max_word_chars) {
        int32_t s = 0;
        while (s < nchars) {
            const tok_table *t = s == 0 ? &tok->whole : &tok->cont;
            int32_t e = nchars;
            /* no key is longer than max_len bytes: skip the hopeless tries */
            while (e > s && (uint32_t)(boff[e] - boff[s]) > t->max_len) e--;
            int32_t id = -1;
            for (; e > s; e--) {
                id = tok_table_find(t, tok->pool, bytes + boff[s], (uint32_t)(boff[e] - boff[s]));
                if (id >= 0) break;
            }
            if (id < 0) break; /* nothing matches here: the piece is [UNK] */
            if (out->n >= out->cap && tok_list_reserve(out, out->n + 16))
                return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
            out->id[out->n] = id;
            span(sc, first + s, first + e, &out->start[out->n], &out->end[out->n]);
            out->word[out->n] = word;
            out->n++;
            s = e;
        }
        if (s == nchars) return TF_OK;
    }
    out->n = mark;
    if (tok_list_reserve(out, out->n + 1))
        return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
    out->id[out->n] = tok->special[TF_TOKEN_UNK];
    span(sc, first, first + nchars, &out->start[out->n], &out->end[out->n]);
    out->word[out->n] = word;
    out->n++;
    return TF_OK;
}
