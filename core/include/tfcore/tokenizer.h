/* tfcore/tokenizer.h — the BERT WordPiece tokenizer of libtfcore.
 *
 * Produces exactly what Hugging Face's fast tokenizer (tokenizers 0.20.3,
 * transformers' BertTokenizerFast) produces: ids, token type ids, attention
 * mask, offsets, sequence ids, word ids and overflowing windows, for a text
 * or a pair of texts. Datasets tokenize with it; so can plugin authors.
 *
 *   tf_tokenizer *tok;
 *   if (tf_tokenizer_load("model/vocab.txt", NULL, &tok, &err)) ...  // or tokenizer.json
 *   tf_encode_options eo;
 *   tf_encode_options_init(&eo);
 *   eo.truncation = TF_TRUNCATE_LONGEST_FIRST; eo.max_length = 128; eo.pad_to_max_length = 1;
 *   tf_encoding enc;
 *   tf_encoding_init(&enc);
 *   if (tf_tokenizer_encode(tok, text, strlen(text), NULL, 0, &eo, &enc, &err)) ...
 *   ... enc.ids[0 .. enc.n_tokens) ...
 *   tf_encoding_free(&enc);
 *   tf_tokenizer_free(tok);
 *
 * The rules (SPEC.md, "BERT WordPiece tokenizer"), as the fast tokenizer
 * applies them:
 *  - special tokens ([CLS] [SEP] [PAD] [MASK] [UNK], case-sensitive) written in
 *    the text are found first, in the raw text, and map straight to their ids;
 *  - the rest is cleaned (U+0000, U+FFFD, Cc/Cf/Co dropped except \t \n \r;
 *    whitespace becomes a space), CJK ideographs become words of their own,
 *    then (do_lower_case) NFD without Mn and Rust's lowercasing;
 *  - words split on whitespace and punctuation, then greedy longest-match
 *    WordPiece with the "##" continuation prefix; a word longer than 100 code
 *    points, or one WordPiece cannot cover, is one [UNK];
 *  - [CLS] A [SEP] (B [SEP]), truncation, overflowing windows, padding.
 *  Character classes follow tokenizers' own (older) Unicode tables, not the
 *  newest Unicode: the two differ for a few hundred rare code points.
 *
 * Text is UTF-8 with an explicit length (it may contain NUL bytes). Invalid
 * UTF-8 is not an error: every maximal invalid subsequence (as Python's
 * bytes.decode("utf-8", errors="replace") finds them) becomes one U+FFFD,
 * which the cleaner then drops. Offsets count that U+FFFD as one code point,
 * so they index the string Python's decode(errors="replace") would give.
 *
 * Offsets are code-point indices [start, end) into the text of the token's
 * own sequence (the second text of a pair starts again at 0), like the
 * offsets of transformers' return_offsets_mapping=True. A "##" piece covers
 * its own characters, an [UNK] word the whole word, added [CLS]/[SEP] and
 * padding (0, 0).
 *
 * Thread safety: a loaded tf_tokenizer is read-only; any number of threads
 * may encode and decode with it at once, each with its own tf_encoding.
 * Nothing is allocated per token: a tf_encoding keeps its buffers (and the
 * tokenizer's scratch space) from one call to the next.
 */
#ifndef TFCORE_TOKENIZER_H
#define TFCORE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_tokenizer tf_tokenizer;

/* ---------------------------------------------------------------- loading */

/* Normalization settings. -1 = "not set": take the tokenizer.json's
 * normalizer value, else the default in brackets. */
typedef struct tf_tokenizer_options {
    uint32_t size;              /* sizeof(tf_tokenizer_options), set by _init */
    int do_lower_case;          /* [1] lowercase (and, by default, strip accents) */
    int strip_accents;          /* [= do_lower_case] NFD, then drop category Mn */
    int tokenize_chinese_chars; /* [1] CJK ideographs become words of their own */
    int clean_text;             /* [1] drop control characters, whitespace -> ' ' */
} tf_tokenizer_options;

/* All fields -1 (file or default), size set. A macro: it passes the size
 * of the struct the caller was compiled with, so that a later libtfcore
 * with a longer struct never writes past it (the same holds for
 * tf_encode_options_init and tf_encoding_init). */
void tf_tokenizer_options_init_size(tf_tokenizer_options *opt, size_t size);
#define tf_tokenizer_options_init(opt) tf_tokenizer_options_init_size((opt), sizeof *(opt))

/* Load a tokenizer from
 *  - a vocab.txt (one token per line, line i = id i; lines end at '\n' and
 *    lose their trailing whitespace, '\r' included, as tokenizers'
 *    WordPiece.from_file reads them — transformers' Python reader keeps
 *    trailing spaces, which only matters for odd files), or
 *  - a tokenizer.json whose model is WordPiece (vocab, unk_token,
 *    continuing_subword_prefix, max_input_chars_per_word) with a
 *    BertNormalizer (its flags are used unless opt overrides them), a
 *    BertPreTokenizer and BERT's [CLS]/[SEP] post-processor (the file name
 *    ends in ".json" or the file starts with '{'), or
 *  - a directory holding tokenizer.json (preferred) or vocab.txt, as
 *    transformers' AutoTokenizer picks them for a BERT model, with the
 *    settings of BertTokenizerFast's constructor: tokenizer_config.json's
 *    do_lower_case, strip_accents, tokenize_chinese_chars, and for keys it
 *    lacks (or without the file) the constructor's defaults (true, follow
 *    do_lower_case, true) — these replace tokenizer.json's normalizer flags,
 *    as the constructor does; opt's set fields override all of them. This is the one
 *    place a model folder's tokenizer is chosen: training (the dataset
 *    plugins through tf_dataset_tokenizer), predict and `tfcore tokenize
 *    --vocab DIR` all load through it.
 * The special tokens are [UNK] [CLS] [SEP] [PAD] [MASK] (or what the
 * tokenizer.json names); [UNK] [CLS] [SEP] [PAD] must be in the vocabulary,
 * [MASK] may be missing (then "[MASK]" in a text is ordinary text).
 * Duplicate tokens in a vocab.txt: the last line wins (token -> id), as in
 * Hugging Face; the earlier id then decodes to nothing. A warning is logged.
 * Tokens longer than 1024 bytes and invalid UTF-8 are refused (TF_ERR_DATA,
 * "file:line: ..."), as is an empty file ("file:0: empty vocab").
 * A tokenizer.json's "truncation" and "padding" are ignored: encode applies
 * only what its options ask (as transformers does on each call).
 * opt may be NULL (all defaults). Errors name the file and line: TF_ERR_DATA
 * for unreadable or malformed files, TF_ERR_RUNTIME for out of memory. */
tf_status tf_tokenizer_load(const char *path, const tf_tokenizer_options *opt, tf_tokenizer **out,
                            tf_error *err);

void tf_tokenizer_free(tf_tokenizer *tok);

/* A model folder's tokenizer_config.json: the keys of BertTokenizerFast's
 * constructor that change ids, -1 where absent (strip_accents: absent or
 * null). Read strictly: text that is not JSON ("FILE:line:col: ..."), not an
 * object, or one of these keys of another type than a boolean (a string
 * "false" included) is TF_ERR_DATA naming the file and the key. Other keys
 * are not looked at. tf_tokenizer_load applies it to a folder itself. */
typedef struct tf_tokenizer_config {
    int do_lower_case;
    int strip_accents;
    int tokenize_chinese_chars;
} tf_tokenizer_config;
tf_status tf_tokenizer_config_read(const char *path, tf_tokenizer_config *out, tf_error *err);
/* The same on text in memory; label names it in errors (the fuzz target). */
tf_status tf_tokenizer_config_parse(const char *text, size_t len, const char *label, tf_tokenizer_config *out,
                                    tf_error *err);

/* The settings in effect after load (no -1 left). */
void tf_tokenizer_get_options(const tf_tokenizer *tok, tf_tokenizer_options *out);

/* ------------------------------------------------------------- vocabulary */

typedef enum tf_special_token {
    TF_TOKEN_PAD = 0,
    TF_TOKEN_UNK = 1,
    TF_TOKEN_CLS = 2,
    TF_TOKEN_SEP = 3,
    TF_TOKEN_MASK = 4
} tf_special_token;

/* Number of ids (largest id + 1). */
int32_t tf_tokenizer_vocab_size(const tf_tokenizer *tok);
/* Id of a token ([len] bytes), -1 if not in the vocabulary. */
int32_t tf_tokenizer_token_to_id(const tf_tokenizer *tok, const char *token, size_t len);
/* The token of an id (NUL-terminated, owned by tok), NULL if out of range or
 * if no token has that id (shadowed duplicate). */
const char *tf_tokenizer_id_to_token(const tf_tokenizer *tok, int32_t id);
/* Id of a special token, -1 if the vocabulary lacks it. */
int32_t tf_tokenizer_special_id(const tf_tokenizer *tok, tf_special_token which);

/* --------------------------------------------------------------- encoding */

typedef enum tf_truncation {
    TF_TRUNCATE_NONE = 0,
    TF_TRUNCATE_LONGEST_FIRST = 1, /* cut the longer sequence first (pairs) */
    TF_TRUNCATE_ONLY_FIRST = 2,    /* cut only the first text */
    TF_TRUNCATE_ONLY_SECOND = 3    /* cut only the second text (SQuAD contexts) */
} tf_truncation;

typedef struct tf_encode_options {
    uint32_t size;            /* sizeof(tf_encode_options), set by _init */
    int add_special_tokens;   /* [1] [CLS] A [SEP] or [CLS] A [SEP] B [SEP] */
    tf_truncation truncation; /* [NONE] */
    int max_length;           /* [0 = none] length of a window, special tokens included,
                               * for truncation and padding. As in Hugging Face, a
                               * max_length below the number of special tokens (2, or 3
                               * for a pair) truncates nothing. */
    int stride;               /* [0] tokens of overlap between consecutive windows;
                               * must be below the length each cut sequence gets */
    int return_overflowing;   /* [0] keep what truncation cuts off as further windows,
                               * like return_overflowing_tokens=True */
    int pad_to_max_length;    /* [0] pad every window to max_length ([PAD], type 0, mask 0) */
} tf_encode_options;

/* Defaults (in brackets above), size set. */
void tf_encode_options_init_size(tf_encode_options *opt, size_t size);
#define tf_encode_options_init(opt) tf_encode_options_init_size((opt), sizeof *(opt))

/* The result of encoding one text or pair: one or more windows (the first is
 * Hugging Face's encoding, the others its encoding.overflowing, in the same
 * order), stored one after the other. Window w is tokens
 * [window_start[w], window_start[w + 1]). Arrays are owned by the encoding and
 * valid until the next call that fills it or tf_encoding_free. */
typedef struct tf_encoding {
    uint32_t size;            /* sizeof(tf_encoding), set by tf_encoding_init */
    int32_t n_windows;        /* >= 1 */
    int32_t n_tokens;         /* over all windows */
    int32_t *window_start;    /* [n_windows + 1] */
    int32_t *ids;             /* [n_tokens] */
    int32_t *type_ids;        /* [n_tokens] 0 = first text and its [CLS]/[SEP], 1 = second */
    int32_t *attention_mask;  /* [n_tokens] 1 = token, 0 = padding */
    int32_t *offsets;         /* [n_tokens, 2] code points [start, end) in the token's text */
    int8_t *sequence_ids;     /* [n_tokens] 0, 1, or -1 for added special tokens and padding */
    int32_t *word_ids;        /* [n_tokens] word index in its text, -1 for added special
                               * tokens and padding (transformers' word_ids()) */
    int32_t capacity;         /* tokens the arrays can hold (private) */
    int32_t window_capacity;  /* windows window_start can hold (private) */
    struct tf_tok_scratch *scratch; /* the tokenizer's working memory (private) */
} tf_encoding;

/* Zero everything and set size; an initialized encoding owns nothing yet.
 * Every encoding must be initialized before its first use. */
void tf_encoding_init_size(tf_encoding *enc, size_t size);
#define tf_encoding_init(enc) tf_encoding_init_size((enc), sizeof *(enc))
/* Free what the encoding owns and re-initialize it (NULL is fine). */
void tf_encoding_free(tf_encoding *enc);

/* Encode text (len bytes of UTF-8) or, when pair != NULL, the pair
 * (text, pair) — an empty pair is still a pair. Fills enc (initialized with
 * tf_encoding_init; TF_ERR_USAGE otherwise). opt NULL = the defaults.
 * Errors: TF_ERR_USAGE for inconsistent options (truncation without
 * max_length, ONLY_SECOND without a pair when cutting is needed, a stride not
 * below the cut length, a text longer than 2^31-1 bytes), TF_ERR_DATA when
 * the chosen sequence is too short to absorb the cut ("Sequence to truncate
 * too short" in Hugging Face), TF_ERR_RUNTIME for out of memory. */
tf_status tf_tokenizer_encode(const tf_tokenizer *tok, const char *text, size_t len,
                              const char *pair, size_t pair_len, const tf_encode_options *opt,
                              tf_encoding *enc, tf_error *err);

/* Encode n texts (or pairs) in parallel with OpenMP, out[i] for texts[i].
 * lens (and pair_lens) may be NULL: then the strings are NUL-terminated.
 * pairs NULL = single texts. threads: 0 = OpenMP's default, else that many.
 * Each out[i] must be initialized (tf_encoding_init) and is refilled. On
 * error the message names the first failing index ("text 17: ..."). */
tf_status tf_tokenizer_encode_batch(const tf_tokenizer *tok, size_t n, const char *const *texts,
                                    const size_t *lens, const char *const *pairs,
                                    const size_t *pair_lens, const tf_encode_options *opt,
                                    int threads, tf_encoding *out, tf_error *err);

/* Encode n texts (or pairs) in parallel straight into fixed-shape rows, as a
 * dataset fills a tf_batch: every row is exactly opt->max_length tokens
 * (padded whatever opt->pad_to_max_length says; overflowing windows are not
 * produced). opt->max_length must be > 0 and every encoded row must fit
 * (use truncation), else TF_ERR_DATA naming the text.
 * ids, type_ids, attention_mask: [n, max_length]; type_ids and
 * attention_mask may be NULL. */
tf_status tf_tokenizer_encode_batch_fixed(const tf_tokenizer *tok, size_t n,
                                          const char *const *texts, const size_t *lens,
                                          const char *const *pairs, const size_t *pair_lens,
                                          const tf_encode_options *opt, int threads,
                                          int32_t *ids, int32_t *type_ids,
                                          int32_t *attention_mask, tf_error *err);

/* --------------------------------------------------------------- decoding */

/* Ids back to text, as BertTokenizerFast.decode: tokens joined by spaces,
 * "##" pieces glued to the previous token, the WordPiece decoder's cleanup
 * (" ." -> "." etc.), then, if clean_up_tokenization_spaces, transformers'
 * clean_up_tokenization (" 's" -> "'s", " n't" -> "n't", ...).
 * skip_special_tokens drops [CLS] [SEP] [PAD] [MASK] [UNK]. Ids outside the
 * vocabulary (negative too) are skipped, as the fast tokenizer skips them.
 * *out is malloc'ed, NUL-terminated, *out_len (may be NULL) its length;
 * the caller frees it. */
tf_status tf_tokenizer_decode(const tf_tokenizer *tok, const int32_t *ids, size_t n,
                              int skip_special_tokens, int clean_up_tokenization_spaces,
                              char **out, size_t *out_len, tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
