/* tokenizer_decode.c — ids back to text, as BertTokenizerFast.decode:
 * tokenizers' WordPiece decoder (a space before every token but the first,
 * none before "##" pieces, whose prefix goes; its cleanup on each token),
 * then transformers' clean_up_tokenization on the whole string. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static int sb_reserve(strbuf *b, size_t extra)
{
    return tok_grow((void **)&b->s, &b->cap, b->len + extra + 1, 1);
}

static int sb_put(strbuf *b, const char *s, size_t n)
{
    if (sb_reserve(b, n)) return -1;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return 0;
}

/* Replace every non-overlapping `from` (left to right) by `to`; every
 * replacement below shrinks the text, so it is done in place. */
static void replace_all(char *s, size_t *len, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    size_t r = 0, w = 0, n = *len;
    while (r < n) {
        if (r + fl <= n && memcmp(s + r, from, fl) == 0) {
            memmove(s + w, to, tl);
            w += tl;
            r += fl;
        } else {
            s[w++] = s[r++];
        }
    }
    s[w] = '\0';
    *len = w;
}

/* The WordPiece decoder's cleanup (tokenizers), applied to one token. */
static const char *const decoder_cleanup[][2] = {
    {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
    {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};
/* transformers' clean_up_tokenization, applied to the whole text. */
static const char *const python_cleanup[][2] = {
    {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

static int is_special_id(const tf_tokenizer *tok, int32_t id)
{
    /* tokenizers compares the token's text with its special added tokens */
    const char *t = tf_tokenizer_id_to_token(tok, id);
    for (int k = 0; k < tok->n_added; k++) {
        const tok_added *a = &tok->added[k];
        if (!a->special) continue;
        const char *s = tf_tokenizer_id_to_token(tok, a->id);
        if (s && t && tok->tok_len[a->id] == tok->tok_len[id] && memcmp(s, t, tok->tok_len[id]) == 0)
            return 1;
    }
    return 0;
}

tf_status tf_tokenizer_decode(const tf_tokenizer *tok, const int32_t *ids, size_t n,
                              int skip_special_tokens, int clean_up_tokenization_spaces, char **out,
                              size_t *out_len, tf_error *err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (n > 0 && !ids) return tf_error_set(err, TF_ERR_USAGE, "tokenizer: decode without ids");
    strbuf b = {0}, piece = {0};
    if (sb_reserve(&b, 0)) goto oom;
    b.s[0] = '\0';
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = tf_tokenizer_id_to_token(tok, ids[i]);
        if (!t) continue; /* unknown id: the fast tokenizer skips it */
        if (skip_special_tokens && is_special_id(tok, ids[i])) continue;
        size_t tl = tok->tok_len[ids[i]];
        piece.len = 0;
        if (kept > 0) {
            if (tl >= tok->prefix_len && memcmp(t, tok->prefix, tok->prefix_len) == 0) {
                t += tok->prefix_len;
                tl -= tok->prefix_len;
            } else if (sb_put(&piece, " ", 1)) {
                goto oom;
            }
        }
        if (sb_put(&piece, t, tl)) goto oom;
        if (tok->decoder_cleanup)
            for (size_t k = 0; k < sizeof decoder_cleanup / sizeof decoder_cleanup[0]; k++)
                replace_all(piece.s, &piece.len, decoder_cleanup[k][0], decoder_cleanup[k][1]);
        if (sb_put(&b, piece.s, piece.len)) goto oom;
        kept++;
    }
    free(piece.s);
    if (clean_up_tokenization_spaces)
        for (size_t k = 0; k < sizeof python_cleanup / sizeof python_cleanup[0]; k++)
            replace_all(b.s, &b.len, python_cleanup[k][0], python_cleanup[k][1]);
    *out = b.s;
    if (out_len) *out_len = b.len;
    return TF_OK;
oom:
    free(piece.s);
    free(b.s);
    return tf_error_set(err, TF_ERR_RUNTIME, "tokenizer: out of memory");
}
