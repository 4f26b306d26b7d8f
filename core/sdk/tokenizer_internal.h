/* tokenizer_internal.h — what the tokenizer's files share (not installed).
 *
 * The pipeline of one text (see tfcore/tokenizer.h for the rules):
 *   tokenizer_unicode.c    UTF-8 -> code points; Hugging Face's character classes
 *   tokenizer_normalize.c  special tokens, cleaning, CJK, words, NFD/lowercase,
 *                          punctuation -> pieces handed to WordPiece
 *   tokenizer_wordpiece.c  greedy longest-match WordPiece of one piece
 *   tokenizer_encode.c     [CLS]/[SEP], truncation, windows, padding, batches
 *   tokenizer_decode.c     ids -> text
 *   tokenizer_vocab.c      vocab.txt / tokenizer.json, the token hash tables
 */
#ifndef TF_TOKENIZER_INTERNAL_H
#define TF_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"
#include "tfcore/tokenizer.h"

/* Nothing here is part of libtfcore's ABI: keep these symbols out of it. */
#pragma GCC visibility push(hidden)

/* ------------------------------------------------------ token hash table */

/* Open addressing, linear probing; a slot with id < 0 is empty. The key is
 * the bytes pool[off .. off + len). */
typedef struct tok_slot {
    uint32_t hash;
    uint32_t len;
    uint32_t off;
    int32_t id;
} tok_slot;

typedef struct tok_table {
    tok_slot *slots; /* [mask + 1] */
    uint32_t mask;
    uint32_t count;
    uint32_t max_len; /* longest key in bytes: WordPiece never tries longer pieces */
} tok_table;

uint32_t tok_hash(const char *s, size_t len);

static inline int32_t tok_table_find(const tok_table *t, const char *pool, const char *key,
                                     uint32_t len)
{
    if (len > t->max_len) return -1;
    uint32_t h = tok_hash(key, len);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const tok_slot *s = &t->slots[i];
        if (s->id < 0) return -1;
        if (s->hash == h && s->len == len) {
            const char *a = pool + s->off;
            uint32_t k = 0;
            while (k < len && a[k] == key[k]) k++;
            if (k == len) return s->id;
        }
    }
}

/* A token matched in the raw text before normalization ([CLS] ... or a
 * tokenizer.json's added token): its code points, longest first in the list. */
typedef struct tok_added {
    uint32_t *cps; /* [len] */
    int32_t len;
    int32_t id;
    int special; /* decode's skip_special_tokens drops it */
} tok_added;

#define TOK_MAX_PREFIX 32

struct tf_tokenizer {
    char *pool;          /* every token, NUL-terminated, one after the other */
    size_t pool_len;
    int32_t vocab_size;  /* largest id + 1 */
    uint32_t *tok_off;   /* [vocab_size] where id's token starts in pool; UINT32_MAX = none */
    uint32_t *tok_len;   /* [vocab_size] its length in bytes */
    tok_table whole;     /* token -> id, every token */
    tok_table cont;      /* continuation pieces: token without the prefix -> id */
    tok_added *added;    /* [n_added], longest first */
    int n_added;
    uint8_t added_first_ascii[16]; /* bitmap: ASCII code points an added token starts with */
    int added_first_other;         /* some added token starts with a non-ASCII code point */
    int32_t special[5];  /* indexed by tf_special_token; -1 = absent */
    char prefix[TOK_MAX_PREFIX + 1]; /* "##" */
    uint32_t prefix_len;
    int max_word_chars;  /* 100: longer words are [UNK] */
    int decoder_cleanup; /* the WordPiece decoder's cleanup flag */
    tf_tokenizer_options opt; /* in effect, no -1 */
};

/* --------------------------------------------------- Unicode (HF classes) */

/* Character class bits, as Hugging Face's BertNormalizer/BertPreTokenizer see them. */
enum {
    TOKC_OTHER = 1,   /* Cc/Cf/Co (not \t \n \r): dropped when cleaning */
    TOKC_SPACE = 2,   /* Rust's char::is_whitespace (and \t \n \r) */
    TOKC_PUNCT = 4,   /* ASCII punctuation or P* */
    TOKC_CJK = 8,     /* the CJK ideograph blocks that become words of their own */
    TOKC_MN = 16,     /* category Mn: dropped by strip_accents */
    TOKC_DECOMP = 32, /* NFD changes it */
    TOKC_MARK = 64,   /* non-zero canonical combining class: NFD may reorder it */
    TOKC_LOWER = 128  /* lowercasing changes it */
};

/* Class bits of a code point (fast for ASCII and the BMP). */
unsigned tok_class(uint32_t cp);
/* NFD of one code point, as tokenizers' NFD does it: writes up to 4 code
 * points, returns how many (1 and out[0] = cp when it does not decompose). */
int tok_nfd(uint32_t cp, uint32_t out[4]);
/* Canonical combining class, as tokenizers' NFD knows it. */
int tok_ccc(uint32_t cp);
/* Rust's char::to_lowercase: writes 1..3 code points, returns how many. */
int tok_lower(uint32_t cp, uint32_t out[3]);

/* Decode len bytes of UTF-8 into out (room for len code points); invalid
 * maximal subsequences become one U+FFFD each. Returns the count. */
size_t tok_utf8_decode(const unsigned char *s, size_t len, uint32_t *out);
/* 1 if s is well-formed UTF-8. */
int tok_utf8_valid(const char *s, size_t len);
/* Encode one code point; returns its byte count (1..4). */
static inline int tok_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ASCII fast path: class bits and lowercase of bytes 0..127. */
extern const uint8_t tok_ascii_class[128];

/* ------------------------------------------------------------- scratch */

/* Tokens of one sequence before [CLS]/[SEP], truncation and padding. */
typedef struct tok_list {
    int32_t *id;    /* [cap] */
    int32_t *start; /* [cap] code point offsets in the sequence's text */
    int32_t *end;   /* [cap] */
    int32_t *word;  /* [cap] word index */
    int32_t n, cap;
} tok_list;

/* One window of a (possibly cut) sequence: tokens [start, stop). */
typedef struct tok_range {
    int32_t start, stop;
} tok_range;

/* Working memory of one encode call, kept in the tf_encoding between calls. */
struct tf_tok_scratch {
    uint32_t *cps;   /* [cps_cap] the decoded text */
    size_t cps_cap;
    /* the current word: cleaned code points and their index in cps */
    uint32_t *raw;   /* [raw_cap] */
    int32_t *raw_at; /* [raw_cap] */
    size_t raw_cap;
    int32_t raw_n;
    /* the current word normalized: code points, where each came from
     * (index in cps) and NFD's change flag (0 = consumes a source char) */
    uint32_t *norm;   /* [norm_cap] */
    int32_t *norm_at; /* [norm_cap] */
    int8_t *norm_new; /* [norm_cap] 1 = inserted by a decomposition */
    size_t norm_cap;
    /* one piece (word between punctuation) as UTF-8 with char boundaries */
    char *bytes;     /* [bytes_cap] */
    size_t bytes_cap;
    int32_t *boff;   /* [boff_cap] byte offset of char k, k = 0..n */
    size_t boff_cap;
    /* room to reorder a long run of combining marks */
    uint32_t *tmp;   /* [tmp_cap] */
    int8_t *tmp_new; /* [tmp_cap] */
    size_t tmp_cap;
    tok_list seq[2];
    tok_range *win[2]; /* [win_cap[i]] windows of each sequence after truncation */
    int32_t win_cap[2];
    int32_t word_index; /* next word index in the current sequence */
};

/* Grow *p (element size elt) to hold at least need elements. 0 or TF_ERR_RUNTIME. */
int tok_grow(void **p, size_t *cap, size_t need, size_t elt);
int tok_list_reserve(tok_list *l, int32_t need);

/* Tokenize one text into sc->seq[which] (no special tokens added). */
tf_status tok_tokenize_sequence(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int which,
                                const char *text, size_t len, tf_error *err);

/* WordPiece of the piece in sc->bytes / sc->boff (nchars code points, whose
 * sources are sc->norm_at[first .. first + nchars)), appended to out. */
tf_status tok_wordpiece(const tf_tokenizer *tok, struct tf_tok_scratch *sc, int32_t first,
                        int32_t nchars, tok_list *out, tf_error *err);

#pragma GCC visibility pop

#endif
