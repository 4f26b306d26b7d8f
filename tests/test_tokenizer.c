/* test_tokenizer.c — the BERT WordPiece tokenizer (tfcore/tokenizer.h), one
 * test per rule of SPEC.md's tokenizer section, with the small vocabulary
 * tests/data/tokenizer/vocab.txt (line i = id i; the ids used below are
 * listed there). Every expected value was produced by transformers'
 * BertTokenizerFast 4.46.3 / tokenizers 0.20.3 on the same vocabulary; the
 * large comparison lives in tests/ref/tokenizer_vs_hf.py. Every error path
 * of the loader and the encoder is exercised at the end. */
#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h" /* tf_cli_tokenize: core/cli/cli_tokenize.c is linked in */
#include "tfcore/dataset.h"
#include "tfcore/log.h"
#include "tfcore/tokenizer.h"

#ifndef TF_SRCDIR
#define TF_SRCDIR "."
#endif
#define DATA TF_SRCDIR "/tests/data/tokenizer/"

/* ids of tests/data/tokenizer/vocab.txt */
enum {
    PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, THE = 5, UN = 6, AFF = 7, ABLE = 8, HELLO = 9,
    WORLD = 10, COMMA = 11, BANG = 12, DOT = 13, APOS = 14, S = 15, CS = 16, CAFE = 17, CAFE_ACC = 18,
    A = 19, CA = 20, B = 21, CB = 22, X = 23, CX = 24, Y = 25, CY = 26, I = 27, CDOT = 28, ZH = 29,
    WEN = 30, EURO = 31, COPY = 32, LQ = 33, RQ = 34, LBR = 35, RBR = 36, CLS_LOW = 37, DO = 39,
    NOT = 40, QM = 41, DON = 42, T = 43, SIGMA = 51, CSIGMA = 52, SIGMA_UP = 54
};

static tf_tokenizer *load_opts(const char *file, int lower, int strip)
{
    tf_tokenizer_options o;
    tf_tokenizer_options_init(&o);
    o.do_lower_case = lower;
    o.strip_accents = strip;
    tf_tokenizer *tok = NULL;
    tf_error err;
    tf_status st = tf_tokenizer_load(file, &o, &tok, &err);
    ck_assert_msg(st == TF_OK, "load %s: %s", file, err.msg);
    return tok;
}

static tf_tokenizer *load_small(void)
{
    return load_opts(DATA "vocab.txt", -1, -1);
}

/* Encode and return the encoding (static: valid until the next call). */
static tf_encoding *enc_with(const tf_tokenizer *tok, const char *a, size_t alen, const char *b,
                             size_t blen, const tf_encode_options *eo)
{
    static tf_encoding e;
    static int init;
    if (!init) {
        tf_encoding_init(&e);
        init = 1;
    }
    tf_error err;
    tf_status st = tf_tokenizer_encode(tok, a, alen, b, blen, eo, &e, &err);
    ck_assert_msg(st == TF_OK, "encode '%s': %s", a, err.msg);
    return &e;
}

static tf_encoding *enc(const tf_tokenizer *tok, const char *a)
{
    return enc_with(tok, a, strlen(a), NULL, 0, NULL);
}

static void check_i32(const char *what, const int32_t *got, int32_t n, const int32_t *want, int32_t wn)
{
    ck_assert_msg(n == wn, "%s: %d values, expected %d", what, n, wn);
    for (int32_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d] = %d, expected %d", what, i, got[i], want[i]);
}

#define ARR(...) ((const int32_t[]){__VA_ARGS__})
#define N(...) ((int32_t)(sizeof(ARR(__VA_ARGS__)) / sizeof(int32_t)))
/* window w's ids / offsets (flattened start,end pairs) / type ids / word ids */
#define IDS(e, w, ...) \
    check_i32("ids", (e)->ids + (e)->window_start[w], win_len(e, w), ARR(__VA_ARGS__), N(__VA_ARGS__))
#define OFFS(e, w, ...) \
    check_i32("offsets", (e)->offsets + 2 * (e)->window_start[w], 2 * win_len(e, w), ARR(__VA_ARGS__), \
              N(__VA_ARGS__))
#define TYPES(e, w, ...) \
    check_i32("type_ids", (e)->type_ids + (e)->window_start[w], win_len(e, w), ARR(__VA_ARGS__), \
              N(__VA_ARGS__))
#define MASKS(e, w, ...) \
    check_i32("attention_mask", (e)->attention_mask + (e)->window_start[w], win_len(e, w), \
              ARR(__VA_ARGS__), N(__VA_ARGS__))
#define WORDS(e, w, ...) \
    check_i32("word_ids", (e)->word_ids + (e)->window_start[w], win_len(e, w), ARR(__VA_ARGS__), \
              N(__VA_ARGS__))

static int32_t win_len(const tf_encoding *e, int w)
{
    ck_assert_int_lt(w, e->n_windows);
    return e->window_start[w + 1] - e->window_start[w];
}

static void seq_ids(const tf_encoding *e, int w, const int8_t *want, int n)
{
    ck_assert_int_eq(win_len(e, w), n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(e->sequence_ids[e->window_start[w] + i] == want[i], "sequence_ids[%d] = %d, expected %d",
                      i, e->sequence_ids[e->window_start[w] + i], want[i]);
}

/* ------------------------------------------------------------ vocabulary */

START_TEST(test_load_vocab)
{
    tf_tokenizer *tok = load_small();
    ck_assert_int_eq(tf_tokenizer_vocab_size(tok), 67);
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "hello", 5), HELLO);
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "##aff", 5), AFF);
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "nope", 4), -1);
    ck_assert_str_eq(tf_tokenizer_id_to_token(tok, WORLD), "world");
    ck_assert_ptr_null(tf_tokenizer_id_to_token(tok, 67));
    ck_assert_ptr_null(tf_tokenizer_id_to_token(tok, -1));
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_PAD), PAD);
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_UNK), UNK);
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_CLS), CLS);
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_SEP), SEP);
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_MASK), MASK);
    ck_assert_int_eq(tf_tokenizer_special_id(tok, (tf_special_token)9), -1);
    tf_tokenizer_options o;
    tf_tokenizer_get_options(tok, &o);
    ck_assert_int_eq(o.do_lower_case, 1);
    ck_assert_int_eq(o.strip_accents, 1);
    ck_assert_int_eq(o.tokenize_chinese_chars, 1);
    ck_assert_int_eq(o.clean_text, 1);
    tf_tokenizer_free(tok);

    tok = load_opts(DATA "vocab.txt", 0, -1); /* strip_accents follows do_lower_case */
    tf_tokenizer_get_options(tok, &o);
    ck_assert_int_eq(o.do_lower_case, 0);
    ck_assert_int_eq(o.strip_accents, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_load_tokenizer_json)
{
    /* the same vocabulary through HF's tokenizer.json, and through a folder */
    const char *paths[] = {DATA "tokenizer.json", DATA};
    for (int k = 0; k < 2; k++) {
        tf_tokenizer *tok = load_opts(paths[k], -1, -1);
        ck_assert_int_eq(tf_tokenizer_vocab_size(tok), 67);
        ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_SEP), SEP);
        tf_encoding *e = enc(tok, "Hello, [SEP] Café!");
        IDS(e, 0, CLS, HELLO, COMMA, SEP, CAFE, BANG, SEP);
        tf_tokenizer_free(tok);
    }
    /* the caller's option overrides the file's normalizer */
    tf_tokenizer *tok = load_opts(DATA "tokenizer.json", 0, -1);
    IDS(enc(tok, "café Café"), 0, CLS, CAFE_ACC, UNK, SEP);
    tf_tokenizer_free(tok);
}
END_TEST

/* ------------------------------------------------------------------ rules */

START_TEST(test_basic_layout)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "Hello, world!");
    ck_assert_int_eq(e->n_windows, 1);
    IDS(e, 0, CLS, HELLO, COMMA, WORLD, BANG, SEP);
    OFFS(e, 0, 0, 0, 0, 5, 5, 6, 7, 12, 12, 13, 0, 0);
    TYPES(e, 0, 0, 0, 0, 0, 0, 0);
    MASKS(e, 0, 1, 1, 1, 1, 1, 1);
    WORDS(e, 0, -1, 0, 1, 2, 3, -1);
    seq_ids(e, 0, (const int8_t[]){-1, 0, 0, 0, 0, -1}, 6);
    /* empty text: just the special tokens */
    IDS(enc(tok, ""), 0, CLS, SEP);
    IDS(enc(tok, " \t\n "), 0, CLS, SEP);
    /* no special tokens */
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.add_special_tokens = 0;
    IDS(enc_with(tok, "hello", 5, NULL, 0, &eo), 0, HELLO);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_special_tokens_in_text)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "[CLS] hello [SEP]");
    IDS(e, 0, CLS, CLS, HELLO, SEP, SEP);
    OFFS(e, 0, 0, 0, 0, 5, 6, 11, 12, 17, 0, 0);
    WORDS(e, 0, -1, 0, 1, 2, -1);
    /* case-sensitive: "[cls]" is ordinary text, split on punctuation */
    IDS(enc(tok, "[cls]"), 0, CLS, LBR, CLS_LOW, RBR, SEP);
    /* found inside words too, before normalization */
    IDS(enc(tok, "a[MASK]b"), 0, CLS, A, MASK, B, SEP);
    IDS(enc(tok, "[MASK][MASK]"), 0, CLS, MASK, MASK, SEP);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_cleaning)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "hel\xe2\x80\x8blo"); /* U+200B (Cf) dropped: one word */
    IDS(e, 0, CLS, HELLO, SEP);
    OFFS(e, 0, 0, 0, 0, 6, 0, 0);
    e = enc_with(tok, "a\0b", 3, NULL, 0, NULL); /* U+0000 dropped */
    IDS(e, 0, CLS, A, CB, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 2, 3, 0, 0);
    IDS(enc(tok, "a\xef\xbf\xbd" "b"), 0, CLS, A, CB, SEP); /* U+FFFD dropped */
    IDS(enc(tok, "a\x0b" "b"), 0, CLS, A, CB, SEP);          /* VT is Cc: dropped, not a space */
    IDS(enc(tok, "a\x7f" "b\xc2\x85" "a"), 0, CLS, A, CB, CA, SEP);
    /* NBSP, U+2028, U+3000 and tabs are whitespace */
    e = enc(tok, "a\xc2\xa0" "b\xe2\x80\xa8" "a\xe3\x80\x80" "b\ta\nb\rb");
    IDS(e, 0, CLS, A, B, A, B, A, B, B, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 0);
    /* Cf characters tokenizers does not know (newer than its tables) stay */
    IDS(enc(tok, "x\xe0\xa2\x90y"), 0, CLS, UNK, SEP); /* U+0890 */
    /* unassigned code points (Cn) are not dropped either */
    IDS(enc(tok, "x\xcd\xb8y"), 0, CLS, UNK, SEP);     /* U+0378 */
    /* private use (Co) is */
    IDS(enc(tok, "x\xee\x80\x80y"), 0, CLS, X, CY, SEP); /* U+E000 */
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_cjk)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "x\xe4\xb8\xad\xe6\x96\x87y"); /* x中文y */
    IDS(e, 0, CLS, X, ZH, WEN, Y, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 0, 0);
    WORDS(e, 0, -1, 0, 1, 2, 3, -1);
    /* tokenize_chinese_chars off: one word */
    tf_tokenizer_options o;
    tf_tokenizer_options_init(&o);
    o.tokenize_chinese_chars = 0;
    tf_tokenizer *t2;
    tf_error err;
    ck_assert_int_eq(tf_tokenizer_load(DATA "vocab.txt", &o, &t2, &err), TF_OK);
    IDS(enc(t2, "x\xe4\xb8\xad\xe6\x96\x87y"), 0, CLS, UNK, SEP);
    tf_tokenizer_free(t2);
    /* Hiragana is not one of BERT's CJK blocks */
    IDS(enc(tok, "x\xe3\x81\x82y"), 0, CLS, UNK, SEP);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_lowercase_and_accents)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "Caf\xc3\xa9"); /* Café -> cafe */
    IDS(e, 0, CLS, CAFE, SEP);
    OFFS(e, 0, 0, 0, 0, 4, 0, 0);
    IDS(enc(tok, "CAFE\xcc\x81"), 0, CLS, CAFE, SEP); /* decomposed accent */
    /* İ: NFD gives I + U+0307, the mark goes, then "i" */
    IDS(enc(tok, "\xc4\xb0"), 0, CLS, I, SEP);
    /* Greek: no final-sigma rule, Σ -> σ everywhere */
    e = enc(tok, "\xce\xa3\xce\xa3 \xce\xa3");
    IDS(e, 0, CLS, SIGMA, CSIGMA, SIGMA, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 1, 2, 3, 4, 0, 0);
    tf_tokenizer_free(tok);

    tok = load_opts(DATA "vocab.txt", 0, -1); /* cased */
    IDS(enc(tok, "caf\xc3\xa9 Caf\xc3\xa9"), 0, CLS, CAFE_ACC, UNK, SEP);
    IDS(enc(tok, "\xce\xa3 \xcf\x82"), 0, CLS, SIGMA_UP, UNK, SEP);
    tf_tokenizer_free(tok);

    /* lowercase without stripping accents: Rust lowercases İ to "i" U+0307,
     * two characters that both point back at İ */
    tok = load_opts(DATA "vocab.txt", 1, 0);
    e = enc(tok, "\xc4\xb0");
    IDS(e, 0, CLS, I, CDOT, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 0, 1, 0, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_nfd_reordering_offsets)
{
    /* x U+0301 U+1D165 y, accents stripped, not lowercased: NFD puts the
     * U+1D165 (class 216, Mc, kept) before U+0301 (230, Mn, dropped), and
     * tokenizers then aligns it with the position of U+0301 */
    tf_tokenizer *tok = load_opts(DATA "vocab.txt", 0, 1);
    tf_encoding *e = enc(tok, "x\xcc\x81\xf0\x9d\x85\xa5y");
    IDS(e, 0, CLS, UNK, SEP);
    OFFS(e, 0, 0, 0, 0, 4, 0, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_punctuation)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "\xe2\x80\x9chello\xe2\x80\x9d a!b a\xe2\x82\xac" "b a\xc2\xa9" "b");
    /* “ ” and ! split; € and © are symbols, not punctuation */
    IDS(e, 0, CLS, LQ, HELLO, RQ, A, BANG, B, UNK, UNK, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 1, 6, 6, 7, 8, 9, 9, 10, 10, 11, 12, 15, 16, 19, 0, 0);
    WORDS(e, 0, -1, 0, 1, 2, 3, 4, 5, 6, 7, -1);
    /* punctuation by tokenizers' (Unicode 8) tables: U+2E43 is not, U+166D is */
    IDS(enc(tok, "x\xe2\xb9\x83y x\xe1\x99\xadY"), 0, CLS, UNK, X, UNK, Y, SEP);
    /* U+1734 is Mn for tokenizers (Mc today): stripped like an accent */
    IDS(enc(tok, "x\xe1\x9c\xb4y"), 0, CLS, X, CY, SEP);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_wordpiece)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc(tok, "unaffable");
    IDS(e, 0, CLS, UN, AFF, ABLE, SEP);
    OFFS(e, 0, 0, 0, 0, 2, 2, 5, 5, 9, 0, 0);
    WORDS(e, 0, -1, 0, 0, 0, -1);
    /* a word WordPiece cannot cover is one [UNK] over the whole word */
    e = enc(tok, "hello unaffablez");
    IDS(e, 0, CLS, HELLO, UNK, SEP);
    OFFS(e, 0, 0, 0, 0, 5, 6, 16, 0, 0);
    /* 100 code points: pieces; 101: [UNK] */
    char w[102];
    memset(w, 'a', 101);
    w[100] = '\0';
    e = enc(tok, w);
    ck_assert_int_eq(win_len(e, 0), 102);
    ck_assert_int_eq(e->ids[1], A);
    ck_assert_int_eq(e->ids[100], CA);
    w[100] = 'a';
    w[101] = '\0';
    e = enc(tok, w);
    IDS(e, 0, CLS, UNK, SEP);
    OFFS(e, 0, 0, 0, 0, 101, 0, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_offsets_code_points_and_invalid_utf8)
{
    tf_tokenizer *tok = load_small();
    /* offsets count code points, not bytes */
    tf_encoding *e = enc(tok, "\xe4\xb8\xad hello");
    OFFS(e, 0, 0, 0, 0, 1, 2, 7, 0, 0);
    /* "a" 0xFF "b" 0xE2 0x82: each invalid run is one U+FFFD (as Python's
     * errors="replace"), dropped by the cleaner but counted by offsets */
    e = enc(tok, "a\xff" "b\xe2\x82");
    IDS(e, 0, CLS, A, CB, SEP);
    OFFS(e, 0, 0, 0, 0, 1, 2, 3, 0, 0);
    /* a truncated sequence followed by ASCII: the ASCII byte survives */
    e = enc(tok, "\xe2\x82" "a \xed\xa0\x80" "b"); /* surrogate bytes: 3 replacements */
    IDS(e, 0, CLS, A, B, SEP);
    OFFS(e, 0, 0, 0, 1, 2, 6, 7, 0, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_pair)
{
    tf_tokenizer *tok = load_small();
    tf_encoding *e = enc_with(tok, "hello", 5, "world", 5, NULL);
    IDS(e, 0, CLS, HELLO, SEP, WORLD, SEP);
    TYPES(e, 0, 0, 0, 0, 1, 1);
    OFFS(e, 0, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0);
    WORDS(e, 0, -1, 0, -1, 0, -1);
    seq_ids(e, 0, (const int8_t[]){-1, 0, -1, 1, -1}, 5);
    /* an empty second text is still a pair */
    e = enc_with(tok, "hello", 5, "", 0, NULL);
    IDS(e, 0, CLS, HELLO, SEP, SEP);
    TYPES(e, 0, 0, 0, 0, 1);
    /* without special tokens the second text keeps type 1 */
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.add_special_tokens = 0;
    e = enc_with(tok, "hello", 5, "world", 5, &eo);
    IDS(e, 0, HELLO, WORLD);
    TYPES(e, 0, 0, 1);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_truncation)
{
    tf_tokenizer *tok = load_small();
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    /* 5 + 3 tokens into 7 - 3 = 4: both cut to half */
    eo.max_length = 7;
    tf_encoding *e = enc_with(tok, "a b a b a", 9, "x y x", 5, &eo);
    IDS(e, 0, CLS, A, B, SEP, X, Y, SEP);
    /* 6 + 5 into 5: the shorter (second) gets floor(5/2), the first the rest */
    eo.max_length = 8;
    e = enc_with(tok, "a b a b a b", 11, "x y x y x", 9, &eo);
    IDS(e, 0, CLS, A, B, A, SEP, X, Y, SEP);
    /* the shorter fits: only the longer is cut */
    eo.max_length = 7;
    e = enc_with(tok, "x", 1, "a b a b a b", 11, &eo);
    IDS(e, 0, CLS, X, SEP, A, B, A, SEP);
    /* single text: the first max_length - 2 tokens */
    eo.max_length = 4;
    IDS(enc_with(tok, "a b a b", 7, NULL, 0, &eo), 0, CLS, A, B, SEP);
    /* only_first */
    eo.truncation = TF_TRUNCATE_ONLY_FIRST;
    eo.max_length = 6;
    IDS(enc_with(tok, "a b a b a b", 11, "x y", 3, &eo), 0, CLS, A, SEP, X, Y, SEP);
    /* only_second */
    eo.truncation = TF_TRUNCATE_ONLY_SECOND;
    IDS(enc_with(tok, "x y", 3, "a b a b a b", 11, &eo), 0, CLS, X, Y, SEP, A, SEP);
    /* fits: nothing is cut, even for only_second without a pair */
    eo.max_length = 60;
    IDS(enc_with(tok, "a b", 3, NULL, 0, &eo), 0, CLS, A, B, SEP);
    /* max_length below the special tokens truncates nothing (tokenizers'
     * usize arithmetic wraps around) */
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.max_length = 1;
    IDS(enc_with(tok, "a b a", 5, NULL, 0, &eo), 0, CLS, A, B, A, SEP);
    /* exactly the special tokens: everything goes to the overflow */
    eo.max_length = 2;
    eo.return_overflowing = 1;
    e = enc_with(tok, "a b a", 5, NULL, 0, &eo);
    ck_assert_int_eq(e->n_windows, 2);
    IDS(e, 0, CLS, SEP);
    IDS(e, 1, CLS, A, B, A, SEP);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_windows_only_second)
{
    /* SQuAD's windows: 8 context tokens, room for 3, stride 1 */
    tf_tokenizer *tok = load_small();
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_ONLY_SECOND;
    eo.max_length = 7;
    eo.stride = 1;
    eo.return_overflowing = 1;
    tf_encoding *e = enc_with(tok, "x", 1, "a b a b a b a b", 15, &eo);
    ck_assert_int_eq(e->n_windows, 4);
    IDS(e, 0, CLS, X, SEP, A, B, A, SEP);
    OFFS(e, 1, 0, 0, 0, 1, 0, 0, 4, 5, 6, 7, 8, 9, 0, 0);
    WORDS(e, 2, -1, 0, -1, 4, 5, 6, -1);
    IDS(e, 3, CLS, X, SEP, A, B, SEP);
    OFFS(e, 3, 0, 0, 0, 1, 0, 0, 12, 13, 14, 15, 0, 0);
    TYPES(e, 3, 0, 0, 0, 1, 1, 1);
    /* without return_overflowing: the first window only */
    eo.return_overflowing = 0;
    e = enc_with(tok, "x", 1, "a b a b a b a b", 15, &eo);
    ck_assert_int_eq(e->n_windows, 1);
    ck_assert_int_eq(e->n_tokens, 7);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_windows_longest_first_order)
{
    /* both texts overflow: windows (A0,B0), then (A1,B0..B3), (A2,..),
     * (A3,..), then (A0,B1..B3) — Hugging Face's merge order */
    tf_tokenizer *tok = load_small();
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.max_length = 7;
    eo.stride = 1;
    eo.return_overflowing = 1;
    tf_encoding *e = enc_with(tok, "a b a b a", 9, "x y x y x", 9, &eo);
    ck_assert_int_eq(e->n_windows, 16);
    OFFS(e, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 2, 3, 0, 0);
    OFFS(e, 1, 0, 0, 2, 3, 4, 5, 0, 0, 0, 1, 2, 3, 0, 0);
    OFFS(e, 4, 0, 0, 2, 3, 4, 5, 0, 0, 6, 7, 8, 9, 0, 0);
    OFFS(e, 5, 0, 0, 4, 5, 6, 7, 0, 0, 0, 1, 2, 3, 0, 0);
    OFFS(e, 12, 0, 0, 6, 7, 8, 9, 0, 0, 6, 7, 8, 9, 0, 0);
    OFFS(e, 13, 0, 0, 0, 1, 2, 3, 0, 0, 2, 3, 4, 5, 0, 0);
    OFFS(e, 15, 0, 0, 0, 1, 2, 3, 0, 0, 6, 7, 8, 9, 0, 0);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_padding)
{
    tf_tokenizer *tok = load_small();
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.max_length = 5;
    eo.pad_to_max_length = 1; /* padding without truncation */
    tf_encoding *e = enc_with(tok, "hello", 5, NULL, 0, &eo);
    IDS(e, 0, CLS, HELLO, SEP, PAD, PAD);
    MASKS(e, 0, 1, 1, 1, 0, 0);
    TYPES(e, 0, 0, 0, 0, 0, 0);
    WORDS(e, 0, -1, 0, -1, -1, -1);
    seq_ids(e, 0, (const int8_t[]){-1, 0, -1, -1, -1}, 5);
    /* longer than max_length and not truncated: left as it is */
    e = enc_with(tok, "a b a b a", 9, NULL, 0, &eo);
    ck_assert_int_eq(win_len(e, 0), 7);
    /* every window is padded */
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.stride = 1;
    eo.return_overflowing = 1;
    eo.max_length = 5;
    e = enc_with(tok, "a b a b", 7, NULL, 0, &eo);
    ck_assert_int_eq(e->n_windows, 2);
    IDS(e, 1, CLS, A, B, SEP, PAD);
    MASKS(e, 1, 1, 1, 1, 1, 0);
    tf_tokenizer_free(tok);
}
END_TEST

/* ----------------------------------------------------------------- decode */

static void check_decode(const tf_tokenizer *tok, const int32_t *ids, size_t n, int skip, int cleanup,
                         const char *want)
{
    char *s = NULL;
    size_t len = 0;
    tf_error err;
    ck_assert_int_eq(tf_tokenizer_decode(tok, ids, n, skip, cleanup, &s, &len, &err), TF_OK);
    ck_assert_str_eq(s, want);
    ck_assert_uint_eq(len, strlen(want));
    free(s);
}

START_TEST(test_decode)
{
    tf_tokenizer *tok = load_small();
    const int32_t a[] = {CLS, HELLO, COMMA, WORLD, BANG, SEP};
    check_decode(tok, a, 6, 0, 1, "[CLS] hello, world! [SEP]");
    check_decode(tok, a, 6, 1, 1, "hello, world!");
    const int32_t b[] = {CLS, UN, AFF, ABLE, SEP};
    check_decode(tok, b, 5, 1, 1, "unaffable");
    /* the decoder's cleanup works per token ("do not" stays), transformers'
     * clean_up_tokenization on the whole text (" ' " -> "'") */
    const int32_t c[] = {CLS, DON, APOS, T, DOT, DO, NOT, QM, SEP, PAD, PAD};
    check_decode(tok, c, 11, 0, 1, "[CLS] don't. do not? [SEP] [PAD] [PAD]");
    check_decode(tok, c, 11, 1, 1, "don't. do not?");
    check_decode(tok, c, 11, 0, 0, "[CLS] don ' t. do not? [SEP] [PAD] [PAD]");
    /* ids outside the vocabulary are skipped; a leading ## piece keeps its ## */
    const int32_t d[] = {UNK, MASK, HELLO, 999, -5, CS};
    check_decode(tok, d, 6, 0, 1, "[UNK] [MASK] hellos");
    check_decode(tok, d, 6, 1, 1, "hellos");
    const int32_t f[] = {CS, CS};
    check_decode(tok, f, 2, 0, 1, "##ss");
    check_decode(tok, NULL, 0, 0, 1, "");
    tf_error err;
    char *s;
    ck_assert_int_eq(tf_tokenizer_decode(tok, NULL, 3, 0, 1, &s, NULL, &err), TF_ERR_USAGE);
    tf_tokenizer_free(tok);
}
END_TEST

/* ---------------------------------------------------------------- batches */

START_TEST(test_batch)
{
    tf_tokenizer *tok = load_small();
    enum { NT = 200 };
    const char *texts[NT], *pairs[NT];
    static const char *pool[] = {"Hello, world!", "unaffable", "a b a b a b a b a", "[CLS] x [SEP]",
                                 "\xe4\xb8\xad\xe6\x96\x87", "", "Caf\xc3\xa9 hello"};
    for (int i = 0; i < NT; i++) {
        texts[i] = pool[i % 7];
        pairs[i] = pool[(i * 3 + 1) % 7];
    }
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.max_length = 8;
    eo.stride = 1;
    eo.return_overflowing = 1;
    for (int threads = 1; threads <= 3; threads++) {
        tf_encoding out[NT];
        for (int i = 0; i < NT; i++) tf_encoding_init(&out[i]);
        tf_error err;
        ck_assert_int_eq(tf_tokenizer_encode_batch(tok, NT, texts, NULL, pairs, NULL, &eo, threads, out, &err),
                         TF_OK);
        for (int i = 0; i < NT; i++) {
            tf_encoding *one = enc_with(tok, texts[i], strlen(texts[i]), pairs[i], strlen(pairs[i]), &eo);
            ck_assert_int_eq(out[i].n_windows, one->n_windows);
            check_i32("batch ids", out[i].ids, out[i].n_tokens, one->ids, one->n_tokens);
            check_i32("batch offsets", out[i].offsets, 2 * out[i].n_tokens, one->offsets, 2 * one->n_tokens);
            tf_encoding_free(&out[i]);
        }
    }
    /* fixed shape rows */
    int32_t ids[NT * 8], types[NT * 8], mask[NT * 8];
    tf_error err;
    ck_assert_int_eq(tf_tokenizer_encode_batch_fixed(tok, NT, texts, NULL, pairs, NULL, &eo, 2, ids, types,
                                                     mask, &err),
                     TF_OK);
    for (int i = 0; i < NT; i++) {
        tf_encode_options o1 = eo;
        o1.return_overflowing = 0;
        o1.pad_to_max_length = 1;
        tf_encoding *one = enc_with(tok, texts[i], strlen(texts[i]), pairs[i], strlen(pairs[i]), &o1);
        check_i32("fixed ids", ids + 8 * i, 8, one->ids, one->n_tokens);
        check_i32("fixed types", types + 8 * i, 8, one->type_ids, one->n_tokens);
        check_i32("fixed mask", mask + 8 * i, 8, one->attention_mask, one->n_tokens);
    }
    /* NULL type ids / mask, explicit lengths (NUL bytes inside) */
    const char *t2[] = {"a\0b", "hello"};
    size_t l2[] = {3, 5};
    ck_assert_int_eq(tf_tokenizer_encode_batch_fixed(tok, 2, t2, l2, NULL, NULL, &eo, 0, ids, NULL, NULL, &err),
                     TF_OK);
    check_i32("fixed ids", ids, 8, ARR(CLS, A, CB, SEP, PAD, PAD, PAD, PAD), 8);
    /* a row that does not fit (no truncation) names its text */
    tf_encode_options nt;
    tf_encode_options_init(&nt);
    nt.max_length = 3;
    ck_assert_int_eq(tf_tokenizer_encode_batch_fixed(tok, 2, t2, l2, NULL, NULL, &nt, 1, ids, NULL, NULL, &err),
                     TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "text 0:") && strstr(err.msg, "max_length 3"), "%s", err.msg);
    nt.max_length = 0;
    ck_assert_int_eq(tf_tokenizer_encode_batch_fixed(tok, 2, t2, l2, NULL, NULL, &nt, 1, ids, NULL, NULL, &err),
                     TF_ERR_USAGE);
    /* errors in a batch name the first failing text */
    tf_encoding out[3];
    for (int i = 0; i < 3; i++) tf_encoding_init(&out[i]);
    tf_encode_options os;
    tf_encode_options_init(&os);
    os.truncation = TF_TRUNCATE_ONLY_SECOND;
    os.max_length = 4;
    const char *t3[] = {"a", "a b a b", "a b a b a b"};
    ck_assert_int_eq(tf_tokenizer_encode_batch(tok, 3, t3, NULL, NULL, NULL, &os, 2, out, &err), TF_ERR_USAGE);
    ck_assert_msg(strncmp(err.msg, "text 1: ", 8) == 0 && strstr(err.msg, "only_second"), "%s", err.msg);
    for (int i = 0; i < 3; i++) tf_encoding_free(&out[i]);
    tf_tokenizer_free(tok);
}
END_TEST

/* ------------------------------------------------------------ error paths */

static char tmpdir[64];

static const char *write_tmp(const char *name, const char *data, size_t len)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

static void setup_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tf_test_tokenizer_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Loading `data` as file `name` fails with `code` and a message containing `what`. */
static void load_fails(const char *name, const char *data, size_t len, tf_status code, const char *what)
{
    const char *path = write_tmp(name, data, len);
    tf_tokenizer *tok = (tf_tokenizer *)1;
    tf_error err;
    tf_error_clear(&err);
    ck_assert_int_eq(tf_tokenizer_load(path, NULL, &tok, &err), code);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err.msg, what) != NULL, "'%s' lacks '%s'", err.msg, what);
    ck_assert_msg(strstr(err.msg, name) != NULL, "'%s' does not name %s", err.msg, name);
}

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"

START_TEST(test_vocab_txt_errors)
{
    tf_tokenizer *tok;
    tf_error err;
    ck_assert_int_eq(tf_tokenizer_load("/nonexistent/vocab.txt", NULL, &tok, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/nonexistent/vocab.txt: cannot open"), "%s", err.msg);
    ck_assert_int_eq(tf_tokenizer_load(NULL, NULL, &tok, &err), TF_ERR_USAGE);
    /* a folder without tokenizer.json or vocab.txt */
    ck_assert_int_eq(tf_tokenizer_load(tmpdir, NULL, &tok, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "no tokenizer.json or vocab.txt"), "%s", err.msg);
    load_fails("empty.txt", "", 0, TF_ERR_DATA, "empty.txt:0: empty vocab");
    load_fails("no_unk.txt", "[PAD]\n[CLS]\n[SEP]\n", 18, TF_ERR_DATA, "has no [UNK] token");
    load_fails("no_cls.txt", "[PAD]\n[UNK]\n[SEP]\n", 18, TF_ERR_DATA, "has no [CLS] token");
    load_fails("no_sep.txt", "[PAD]\n[UNK]\n[CLS]\n", 18, TF_ERR_DATA, "has no [SEP] token");
    load_fails("no_pad.txt", "[UNK]\n[CLS]\n[SEP]\n", 18, TF_ERR_DATA, "has no [PAD] token");
    static const char bad_utf8[] = SPECIALS "ok\nb\xff" "d\n";
    load_fails("bad_utf8.txt", bad_utf8, sizeof bad_utf8 - 1, TF_ERR_DATA, "bad_utf8.txt:6: invalid UTF-8");
    /* an over-long line is not a vocabulary */
    static char big[2048 + 64];
    memcpy(big, SPECIALS, 24);
    memset(big + 24, 'x', 1025);
    big[24 + 1025] = '\n';
    load_fails("long.txt", big, 24 + 1026, TF_ERR_DATA, "long.txt:5: token of 1025 bytes (the limit is 1024)");
    /* not a regular file */
    ck_assert_int_eq(tf_tokenizer_load("/dev/null", NULL, &tok, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "/dev/null: not a regular file"), "%s", err.msg);
    /* options from a caller with a shorter struct (an older header): init
     * writes only what it has, load refuses what it cannot read */
    tf_tokenizer_options o;
    memset(&o, 0x55, sizeof o);
    tf_tokenizer_options_init_size(&o, 8);
    ck_assert_uint_eq(o.size, 8);
    ck_assert_int_eq(o.do_lower_case, -1);
    ck_assert_int_eq(o.strip_accents, 0x55555555);
    ck_assert_int_eq(tf_tokenizer_load(DATA "vocab.txt", &o, &tok, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "options of size 8"), "%s", err.msg);
    tf_tokenizer_options_init_size(&o, 1000); /* a longer one: only ours is written */
    ck_assert_uint_eq(o.size, sizeof o);
    tf_tokenizer_options_init_size(&o, 2);    /* too short even for size: untouched */
    ck_assert_uint_eq(o.size, sizeof o);
    tf_encode_options eo;
    tf_encode_options_init_size(&eo, 4);
    ck_assert_uint_eq(eo.size, 4);
    tf_encoding en;
    tf_encoding_init_size(&en, 1 << 20);
    ck_assert_uint_eq(en.size, sizeof en);
}
END_TEST

START_TEST(test_vocab_txt_quirks)
{
    /* duplicate tokens: the last line wins (as Hugging Face's dict), and the
     * first id has no token any more; CRLF and trailing spaces are trimmed */
    const char v[] = SPECIALS "hello\r\nworld  \nhello\n\n";
    const char *path = write_tmp("dup.txt", v, sizeof v - 1);
    tf_log_set_level(TF_LOG_ERROR); /* the duplicate's warning */
    tf_tokenizer *tok = load_opts(path, -1, -1);
    tf_log_set_level(TF_LOG_INFO);
    ck_assert_int_eq(tf_tokenizer_vocab_size(tok), 8);
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "hello", 5), 6);
    ck_assert_ptr_null(tf_tokenizer_id_to_token(tok, 4));
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "world", 5), 5);
    ck_assert_int_eq(tf_tokenizer_token_to_id(tok, "", 0), 7); /* the empty line */
    IDS(enc(tok, "hello world"), 0, 2, 6, 5, 3);
    /* [MASK] is optional: without it "[MASK]" is plain text */
    ck_assert_int_eq(tf_tokenizer_special_id(tok, TF_TOKEN_MASK), -1);
    IDS(enc(tok, "[MASK]"), 0, 2, 1, 1, 1, 3);
    char *s;
    tf_error err;
    const int32_t ids[] = {4, 6};
    ck_assert_int_eq(tf_tokenizer_decode(tok, ids, 2, 0, 1, &s, NULL, &err), TF_OK);
    ck_assert_str_eq(s, "hello");
    free(s);
    tf_tokenizer_free(tok);
}
END_TEST

static const char *json_head = "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",";
static const char *json_vocab = "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":4}},";
static const char *json_tail =
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":false},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
    "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
    "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}";

static void json_case(const char *name, const char *head, const char *vocab, const char *extra,
                      const char *tail, tf_status code, const char *what)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s%s%s}", head, vocab, extra, tail);
    if (code == TF_OK) {
        tf_tokenizer *tok = load_opts(write_tmp(name, buf, strlen(buf)), -1, -1);
        tf_tokenizer_options o;
        tf_tokenizer_get_options(tok, &o);
        ck_assert_int_eq(o.do_lower_case, 0); /* from the file */
        IDS(enc(tok, "a A"), 0, 2, 4, 1, 3);
        tf_tokenizer_free(tok);
        return;
    }
    load_fails(name, buf, strlen(buf), code, what);
}

START_TEST(test_tokenizer_json_errors)
{
    /* a minimal valid file first (BertProcessing post-processor) */
    json_case("ok.json", json_head, json_vocab, "", json_tail, TF_OK, NULL);
    load_fails("bad.json", "{\"model\":", 9, TF_ERR_DATA, "bad.json:1:");
    json_case("bpe.json", "{\"model\":{\"type\":\"BPE\",", json_vocab, "", json_tail, TF_ERR_DATA,
              "model is BPE");
    json_case("nounk.json", "{\"model\":{\"type\":\"WordPiece\",", json_vocab, "", json_tail, TF_ERR_DATA,
              "model.unk_token is missing");
    json_case("holes.json", json_head,
              "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":9}},", "", json_tail,
              TF_ERR_DATA, "ids up to 9");
    json_case("twice.json", json_head,
              "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":3}},", "", json_tail,
              TF_ERR_DATA, "model.vocab has 5 tokens but ids up to 3");
    json_case("negid.json", json_head, "\"vocab\":{\"[PAD]\":-1}},", "", json_tail, TF_ERR_DATA,
              "id must be an integer");
    json_case("empty.json", json_head, "\"vocab\":{}},", "", json_tail, TF_ERR_DATA, "empty vocab");
    json_case("norm.json", json_head, json_vocab, "\"normalizer\":{\"type\":\"NFKC\"}", "", TF_ERR_DATA,
              "normalizer NFKC is not supported");
    json_case("pre.json", json_head, json_vocab,
              "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Whitespace\"}", "", TF_ERR_DATA,
              "pre_tokenizer Whitespace is not supported");
    json_case("post.json", json_head, json_vocab,
              "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":{\"type\":\"RobertaProcessing\"}",
              "", TF_ERR_DATA, "post_processor type RobertaProcessing is not supported");
    json_case("nopost.json", json_head, json_vocab, "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}", "",
              TF_ERR_DATA, "post_processor is missing");
    json_case("dec.json", json_head, json_vocab,
              "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
              "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
              "\"decoder\":{\"type\":\"ByteLevel\"}",
              "", TF_ERR_DATA, "decoder ByteLevel is not supported");
    json_case("postid.json", json_head, json_vocab,
              "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
              "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",30],\"cls\":[\"[CLS]\",2]},"
              "\"decoder\":{\"type\":\"WordPiece\"}",
              "", TF_ERR_DATA, "are not in the vocabulary");
    json_case("tmpl.json", json_head, json_vocab,
              "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
              "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[],\"pair\":[]},"
              "\"decoder\":{\"type\":\"WordPiece\"}",
              "", TF_ERR_DATA, "only BERT's template");
    json_case("lstrip.json", json_head, json_vocab,
              "\"added_tokens\":[{\"id\":4,\"content\":\"a\",\"lstrip\":true}],", json_tail, TF_ERR_DATA,
              "uses single_word/lstrip/rstrip/normalized");
    json_case("extra.json", json_head, json_vocab, "\"added_tokens\":[{\"id\":4,\"content\":\"zz\"}],",
              json_tail, TF_ERR_DATA, "is not that token of model.vocab");
    json_case("addbad.json", json_head, json_vocab, "\"added_tokens\":[{\"content\":\"a\"}],", json_tail,
              TF_ERR_DATA, "added_tokens[0] needs a content string and an id");
    json_case("maxw.json", "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":-3,",
              json_vocab, "", json_tail, TF_ERR_DATA, "max_input_chars_per_word must be");
    json_case("dupkey.json", json_head, "\"vocab\":{\"[PAD]\":0,\"[PAD]\":1}},", "", json_tail, TF_ERR_DATA,
              "duplicate");
}
END_TEST

START_TEST(test_encode_errors)
{
    tf_tokenizer *tok = load_small();
    tf_encoding e;
    tf_encoding_init(&e);
    tf_error err;
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = TF_TRUNCATE_ONLY_SECOND;
    eo.max_length = 4;
    /* only_second without a second text, when cutting is needed */
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a b a b", 7, NULL, 0, &eo, &e, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "only_second needs a second text"), "%s", err.msg);
    /* the second text too short to absorb the cut */
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a b a b", 7, "x", 1, &eo, &e, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "too few to cut"), "%s", err.msg);
    /* stride not below the cut length (found while cutting) */
    eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
    eo.max_length = 5;
    eo.stride = 1;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a b a b", 7, "x y x", 5, &eo, &e, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "stride 1 must be less than the 1 tokens"), "%s", err.msg);
    /* stride refused up front, as tokenizers' enable_truncation does */
    eo.max_length = 4;
    eo.stride = 3;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, &eo, &e, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "stride 3 is more than max_length 4"), "%s", err.msg);
    /* options */
    tf_encode_options bad = eo;
    bad.size = 8;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, &bad, &e, &err), TF_ERR_USAGE);
    bad = eo;
    bad.max_length = -1;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, &bad, &e, &err), TF_ERR_USAGE);
    bad = eo;
    bad.max_length = 0;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, &bad, &e, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "truncation needs max_length"), "%s", err.msg);
    bad = eo;
    bad.truncation = (tf_truncation)7;
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, &bad, &e, &err), TF_ERR_USAGE);
    ck_assert_int_eq(tf_tokenizer_encode(tok, NULL, 3, NULL, 0, NULL, &e, &err), TF_ERR_USAGE);
    /* an encoding that was never initialized */
    tf_encoding zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, NULL, &zeroed, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "not initialized"), "%s", err.msg);
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, NULL, 0, NULL, NULL, &err), TF_ERR_USAGE);
    tf_encoding_free(&zeroed);
    ck_assert_uint_eq(zeroed.size, sizeof zeroed);
    /* the second text's errors say so: a pair with a text over 2^31 bytes */
    ck_assert_int_eq(tf_tokenizer_encode(tok, "a", 1, "b", (size_t)1 << 31, NULL, &e, &err), TF_ERR_USAGE);
    ck_assert_msg(strstr(err.msg, "second text: tokenizer: text of"), "%s", err.msg);
    /* windows that would hold more than 2^31 tokens: 100000 tokens in
     * windows of 50002 moving by one token */
    size_t n = 200000;
    char *many = malloc(n + 1);
    for (size_t i = 0; i < n; i++) many[i] = i % 2 ? ' ' : 'a';
    many[n] = '\0';
    tf_encode_options huge;
    tf_encode_options_init(&huge);
    huge.truncation = TF_TRUNCATE_LONGEST_FIRST;
    huge.max_length = 50004;
    huge.stride = 50001;
    huge.return_overflowing = 1;
    ck_assert_int_eq(tf_tokenizer_encode(tok, many, n, NULL, 0, &huge, &e, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "more than 2^31 tokens"), "%s", err.msg);
    free(many);
    tf_encoding_free(&e);
    tf_tokenizer_free(tok);
}
END_TEST

START_TEST(test_reuse_and_growth)
{
    /* one encoding reused for texts of very different lengths */
    tf_tokenizer *tok = load_small();
    size_t n = 200000;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = (i % 4 == 3) ? ' ' : "hel"[i % 4];
    big[n] = '\0';
    tf_encoding *e = enc(tok, big);
    ck_assert_int_eq(win_len(e, 0), (int32_t)(n / 4 + 2));
    ck_assert_int_eq(e->ids[1], 55); /* "hel" */
    IDS(enc(tok, "a"), 0, CLS, A, SEP);
    /* a single 200000-character word of multi-byte characters */
    size_t m = 50000;
    char *w = malloc(4 * m + 1);
    for (size_t i = 0; i < m; i++) memcpy(w + 4 * i, "\xf0\x9f\x98\x80", 4);
    w[4 * m] = '\0';
    e = enc(tok, w);
    IDS(e, 0, CLS, UNK, SEP);
    OFFS(e, 0, 0, 0, 0, (int32_t)m, 0, 0);
    free(w);
    /* a run of 200000 combining marks: NFD reorders it in linear time */
    size_t k = 100000;
    char *marks = malloc(4 * k + 3);
    marks[0] = 'a';
    for (size_t i = 0; i < k; i++) memcpy(marks + 1 + 4 * i, "\xcc\x81\xcc\x96", 4); /* U+0301 U+0316 */
    marks[1 + 4 * k] = 'b';
    marks[2 + 4 * k] = '\0';
    e = enc(tok, marks); /* the marks are Mn: stripped, "ab" is left */
    IDS(e, 0, CLS, A, CB, SEP);
    OFFS(e, 0, 0, 0, 0, 1, (int32_t)(2 * k + 1), (int32_t)(2 * k + 2), 0, 0);
    free(marks);
    free(big);
    tf_encoding fresh;
    tf_encoding_init(&fresh);
    tf_encoding_free(&fresh); /* freeing an unused encoding is fine */
    tf_encoding_free(NULL);
    tf_tokenizer_free(NULL);
    tf_tokenizer_free(tok);
}
END_TEST

/* ------------------------------------------------------ tfcore tokenize */

typedef struct cli_result {
    int rc;
    char out[1 << 16];
    char err[4096];
} cli_result;

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Run `tfcore tokenize ARGS...` (NULL-terminated) with `in` as stdin
 * (stdin_path overrides it) and stdout_path (or a temp file) as stdout. */
static void run_cli_io(cli_result *r, const char *in, size_t in_len, const char *stdin_path,
                       const char *stdout_path, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "tokenize";
    va_list ap;
    va_start(ap, stdout_path);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && argc < 31) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    char in_path[256], out_path[256], err_path[256];
    snprintf(in_path, sizeof in_path, "%s/stdin", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/stdout", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmpdir);
    FILE *f = fopen(in_path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(in, 1, in_len, f), in_len);
    fclose(f);
    ck_assert_ptr_nonnull(freopen(stdin_path ? stdin_path : in_path, "rb", stdin));
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(stdout_path ? stdout_path : out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
    dup2(fo, 1);
    dup2(fe, 2);
    r->rc = tf_cli_tokenize(argc, argv);
    fflush(stdout);
    clearerr(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    if (stdout_path)
        r->out[0] = '\0';
    else
        slurp(out_path, r->out, sizeof r->out);
    slurp(err_path, r->err, sizeof r->err);
}

#define run_cli(r, in, ...) run_cli_io(r, in, strlen(in), NULL, NULL, __VA_ARGS__, (const char *)NULL)

static void cli_ok(const char *in, const char *want, ...)
{
    /* up to 11 arguments after --vocab DATA/vocab.txt, NULL-terminated */
    const char *args[12] = {0};
    va_list ap;
    va_start(ap, want);
    for (int i = 0; i < 11; i++)
        if (!(args[i] = va_arg(ap, const char *))) break;
    va_end(ap);
    static cli_result r;
    run_cli_io(&r, in, strlen(in), NULL, NULL, "--vocab", DATA "vocab.txt", args[0], args[1], args[2],
               args[3], args[4], args[5], args[6], args[7], args[8], args[9], args[10], (const char *)NULL);
    ck_assert_msg(r.rc == 0, "exit %d: %s", r.rc, r.err);
    ck_assert_str_eq(r.out, want);
}

static void cli_fails(int rc, const char *err_part, const char *in, ...)
{
    const char *args[12] = {0};
    va_list ap;
    va_start(ap, in);
    for (int i = 0; i < 11; i++)
        if (!(args[i] = va_arg(ap, const char *))) break;
    va_end(ap);
    static cli_result r;
    run_cli_io(&r, in, strlen(in), NULL, NULL, args[0], args[1], args[2], args[3], args[4], args[5],
               args[6], args[7], args[8], args[9], args[10], (const char *)NULL);
    ck_assert_msg(r.rc == rc, "exit %d, expected %d: %s", r.rc, rc, r.err);
    ck_assert_msg(strncmp(r.err, "tfcore tokenize: ", 17) == 0 && strstr(r.err, err_part) != NULL,
                  "stderr '%s' lacks '%s'", r.err, err_part);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "not one line: '%s'", r.err);
}

#define V "--vocab", DATA "vocab.txt"

static void copy_file(const char *from, const char *to)
{
    static char buf[1 << 20];
    FILE *f = fopen(from, "rb");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A model folder with tokenizer.json (lowercase: true), vocab.txt and a
 * tokenizer_config.json saying do_lower_case: false: the tokenizer training
 * uses (the dataset's, from the model's folder) and `tfcore tokenize --vocab
 * DIR` are the same one, and both honour tokenizer_config.json, as
 * BertTokenizerFast does (it rebuilds the normalizer from its arguments).
 * Before, training read vocab.txt and tokenize read tokenizer.json alone. */
START_TEST(test_same_source_for_training_and_tokenize)
{
    char dir[128], path[192];
    snprintf(dir, sizeof dir, "%s/model", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    copy_file(DATA "tokenizer.json", path);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    copy_file(DATA "vocab.txt", path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    /* as transformers writes it: model_max_length int(1e30), beyond a 64-bit integer */
    write_file(path, "{\"do_lower_case\": false, \"tokenizer_class\": \"BertTokenizer\", "
                     "\"model_max_length\": 1000000000000000019884624838656}");

    /* training: the dataset's tokenizer, the model folder as model-bert gives it */
    tf_dataset_open_args a = {.size = sizeof a, .task = TF_TASK_CLASSIFICATION, .num_labels = 2,
                              .vocab_file = dir, .do_lower_case = 0, .max_seq = 64, .vocab_size = 1000};
    tf_tokenizer *tok = NULL;
    tf_error err = {0};
    ck_assert_int_eq(tf_dataset_tokenizer(&a, NULL, -1, &tok, &err), TF_OK);
    tf_encoding *e = enc_with(tok, "Hello world", 11, NULL, 0, NULL);
    char train_ids[256];
    int len = snprintf(train_ids, sizeof train_ids, "[");
    for (int i = 0; i < e->n_tokens; i++) len += snprintf(train_ids + len, sizeof train_ids - len, "%s%d", i ? "," : "", e->ids[i]);
    snprintf(train_ids + len, sizeof train_ids - len, "]\n");
    tf_tokenizer_free(tok);

    static cli_result r;
    run_cli(&r, "Hello world\n", "--vocab", dir);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.out, train_ids);
    ck_assert_str_eq(r.out, "[2,1,10,3]\n"); /* cased: "Hello" is [UNK] in this uncased vocab */

    /* a malformed tokenizer_config.json: file and key, for both */
    write_file(path, "{\"do_lower_case\": \"false\"}");
    ck_assert_int_eq(tf_dataset_tokenizer(&a, NULL, -1, &tok, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "tokenizer_config.json: \"do_lower_case\" must be true or false, got the string"),
                  "%s", err.msg);
    run_cli(&r, "Hello world\n", "--vocab", dir);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_msg(strstr(r.err, "tokenizer_config.json: \"do_lower_case\" must be true or false"), "%s", r.err);
    write_file(path, "{\"do_lower_case\": false");
    run_cli(&r, "Hello world\n", "--vocab", dir);
    ck_assert_int_eq(r.rc, 5);
    ck_assert_msg(strstr(r.err, "tokenizer_config.json:1:") && strstr(r.err, "not valid JSON"), "%s", r.err);
}
END_TEST

START_TEST(test_cli_outputs)
{
    cli_ok("Hello, world!\nunaffable\n", "[2,9,11,10,12,3]\n[2,6,7,8,3]\n", NULL);
    cli_ok("", "", NULL);
    cli_ok("hello", "[2,9,3]\n", NULL); /* no newline at the end */
    cli_ok("hello\n", "{\"ids\":[2,9,3],\"type_ids\":[0,0,0],\"attention_mask\":[1,1,1],"
           "\"offsets\":[[0,0],[0,5],[0,0]]}\n", "--json", NULL);
    cli_ok("hello\n", "{\"ids\":[2,9,3,0],\"type_ids\":[0,0,0,0],\"attention_mask\":[1,1,1,0],"
           "\"offsets\":[[0,0],[0,5],[0,0],[0,0]],\"sequence_ids\":[null,0,null,null],"
           "\"word_ids\":[null,0,null,null]}\n", "--json", "--details", "--max-length", "4", "--pad", NULL);
    cli_ok("Caf\xc3\xa9\n", "[2,1,3]\n", "--no-lower", NULL);
    cli_ok("\xc4\xb0\n", "[2,27,28,3]\n", "--no-strip-accents", NULL);
    cli_ok("hello\tworld\n", "[2,9,3,10,3]\n", "--pair", NULL);
    cli_ok("a b a b a\n", "[2,19,21,3]\n", "--max-length", "4", NULL);
    cli_ok("a b a b a\n", "[[2,19,21,3],[2,21,19,3],[2,19,21,3],[2,21,19,3]]\n", "--max-length=4", "--stride=1",
           "--overflow", NULL);
    cli_ok("a b a b a\n", "[19,21,19,21,19]\n", "--no-special", NULL);
    cli_ok("a b a b a\n", "[2,19,21,19,21,19,3]\n", "--max-length", "4", "--truncation", "none", NULL);
    cli_ok("x\ta b a b a b a b\n",
           "{\"ids\":[2,23,3,19,21,19,3],\"type_ids\":[0,0,0,1,1,1,1],\"attention_mask\":[1,1,1,1,1,1,1],"
           "\"offsets\":[[0,0],[0,1],[0,0],[0,1],[2,3],[4,5],[0,0]],\"overflowing\":["
           "{\"ids\":[2,23,3,19,21,19,3],\"type_ids\":[0,0,0,1,1,1,1],\"attention_mask\":[1,1,1,1,1,1,1],"
           "\"offsets\":[[0,0],[0,1],[0,0],[4,5],[6,7],[8,9],[0,0]]},"
           "{\"ids\":[2,23,3,19,21,19,3],\"type_ids\":[0,0,0,1,1,1,1],\"attention_mask\":[1,1,1,1,1,1,1],"
           "\"offsets\":[[0,0],[0,1],[0,0],[8,9],[10,11],[12,13],[0,0]]},"
           "{\"ids\":[2,23,3,19,21,3],\"type_ids\":[0,0,0,1,1,1],\"attention_mask\":[1,1,1,1,1,1],"
           "\"offsets\":[[0,0],[0,1],[0,0],[12,13],[14,15],[0,0]]}]}\n",
           "--pair", "--json", "--max-length", "7", "--truncation", "only_second", "--stride", "1", "--overflow",
           NULL);
    /* JSON input: newlines and TABs inside texts */
    cli_ok("\"a\\nb\\tx\"\n\"\"\n", "[2,19,21,23,3]\n[2,3]\n", "--json-input", NULL);
    cli_ok("[\"hello\",\"world\"]\n", "[2,9,3,10,3]\n", "--json-input", "--pair", NULL);
    /* decode */
    cli_ok("[2,9,11,10,12,3]\n[]\n", "\"[CLS] hello, world! [SEP]\"\n\"\"\n", "--decode", NULL);
    cli_ok("[2,42,14,43,3]\n", "\"don't\"\n", "--decode", "--skip-special-tokens", NULL);
    cli_ok("[2,42,14,43,3]\n", "\"[CLS] don ' t [SEP]\"\n", "--decode", "--no-cleanup", NULL);
    /* a tokenizer.json and a model folder work as --vocab */
    static cli_result r;
    /* --keep-going: a bad line becomes {"error": ...}, the rest is done, and
     * the exit code is the first error's */
    run_cli(&r, "[\"hello\",\"world\"]\n\"a\"\n", V, "--json-input", "--keep-going");
    ck_assert_int_eq(r.rc, 5);
    ck_assert_str_eq(r.out, "{\"error\":\"--json-input: expected a JSON string\"}\n[2,19,3]\n");
    ck_assert_str_eq(r.err, "");
    run_cli(&r, "hello\n", "--vocab", DATA "tokenizer.json");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.out, "[2,9,3]\n");
    run_cli(&r, "hello\n", "--vocab", DATA);
    ck_assert_str_eq(r.out, "[2,9,3]\n");
    run_cli(&r, "", "--help");
    ck_assert_int_eq(r.rc, 0);
    ck_assert_msg(strncmp(r.out, "usage: tfcore tokenize --vocab FILE", 35) == 0, "%s", r.out);
}
END_TEST

START_TEST(test_cli_errors)
{
    /* usage (exit 2) */
    cli_fails(2, "--vocab FILE is required (see tfcore tokenize --help)", "", "--json", NULL);
    cli_fails(2, "unknown option '--bogus'", "", V, "--bogus", NULL);
    cli_fails(2, "--max-length needs a value", "", V, "--max-length", NULL);
    cli_fails(2, "--max-length: 'abc' is not a valid count", "", V, "--max-length", "abc", NULL);
    cli_fails(2, "--stride: '-1' is not a valid count", "", V, "--stride=-1", NULL);
    cli_fails(2, "--max-line-bytes: '0' is not a valid count", "", V, "--max-line-bytes", "0", NULL);
    cli_fails(2, "--truncation: 'most' is not", "", V, "--max-length", "5", "--truncation", "most", NULL);
    cli_fails(2, "--truncation needs --max-length", "", V, "--truncation", "only_first", NULL);
    cli_fails(2, "--pad, --overflow and --stride need --max-length", "", V, "--pad", NULL);
    cli_fails(2, "--details goes with --json", "", V, "--details", NULL);
    cli_fails(2, "--skip-special-tokens and --no-cleanup go with --decode", "", V, "--no-cleanup", NULL);
    /* a line the options cannot encode: the library's code (usage), or with
     * --keep-going an {"error"} line and the same exit code at the end */
    cli_fails(2, "stdin:2: tokenizer: truncation only_second needs a second text", "a\na b a b\n", V,
              "--max-length", "4", "--truncation", "only_second", NULL);
    static cli_result r;
    run_cli(&r, "a b a b\na\n", V, "--max-length", "4", "--truncation", "only_second", "--keep-going");
    ck_assert_int_eq(r.rc, 2);
    ck_assert_str_eq(r.out, "{\"error\":\"tokenizer: truncation only_second needs a second text\"}\n[2,19,3]\n");
    /* bad vocabulary or input (exit 5) */
    char path[256];
    snprintf(path, sizeof path, "%s", write_tmp("empty.txt", "", 0));
    cli_fails(5, "empty.txt:0: empty vocab", "", "--vocab", path, NULL);
    cli_fails(5, "stdin:1: --pair needs two texts separated by a TAB", "hello\n", V, "--pair", NULL);
    cli_fails(5, "stdin:1: --json-input: column", "{nope\n", V, "--json-input", NULL);
    cli_fails(5, "stdin:1: --json-input --pair: expected", "\"a\"\n", V, "--json-input", "--pair", NULL);
    cli_fails(5, "stdin:1: --decode: column", "[1,\n", V, "--decode", NULL);
    cli_fails(5, "stdin:1: --decode: expected a JSON array", "{}\n", V, "--decode", NULL);
    cli_fails(5, "stdin:2: --decode: element 1 is not a 32-bit integer", "[1]\n[1,4294967296]\n", V, "--decode",
              NULL);
    cli_fails(5, "stdin:2: line longer than 10 bytes (--max-line-bytes)", "hello\nhello world!\n", V,
              "--max-line-bytes", "10", NULL);
    /* I/O (exit 1): stdin that cannot be read, stdout that cannot be written */
    run_cli_io(&r, "", 0, tmpdir, NULL, V, (const char *)NULL);
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.err, "stdin:1: read error"), "%s", r.err);
    if (access("/dev/full", W_OK) == 0) {
        run_cli_io(&r, "hello\n", 6, NULL, "/dev/full", V, (const char *)NULL);
        ck_assert_int_eq(r.rc, 1);
        ck_assert_msg(strstr(r.err, "writing stdout"), "%s", r.err);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *t = tcase_create("rules");
    tcase_add_test(t, test_load_vocab);
    tcase_add_test(t, test_load_tokenizer_json);
    tcase_add_test(t, test_basic_layout);
    tcase_add_test(t, test_special_tokens_in_text);
    tcase_add_test(t, test_cleaning);
    tcase_add_test(t, test_cjk);
    tcase_add_test(t, test_lowercase_and_accents);
    tcase_add_test(t, test_nfd_reordering_offsets);
    tcase_add_test(t, test_punctuation);
    tcase_add_test(t, test_wordpiece);
    tcase_add_test(t, test_offsets_code_points_and_invalid_utf8);
    tcase_add_test(t, test_pair);
    tcase_add_test(t, test_truncation);
    tcase_add_test(t, test_windows_only_second);
    tcase_add_test(t, test_windows_longest_first_order);
    tcase_add_test(t, test_padding);
    tcase_add_test(t, test_decode);
    tcase_add_test(t, test_batch);
    tcase_add_test(t, test_reuse_and_growth);
    suite_add_tcase(s, t);
    TCase *e = tcase_create("errors");
    tcase_add_checked_fixture(e, setup_tmp, teardown_tmp);
    tcase_add_test(e, test_vocab_txt_errors);
    tcase_add_test(e, test_vocab_txt_quirks);
    tcase_add_test(e, test_tokenizer_json_errors);
    tcase_add_test(e, test_encode_errors);
    tcase_add_test(e, test_cli_outputs);
    tcase_add_test(e, test_same_source_for_training_and_tokenize);
    tcase_add_test(e, test_cli_errors);
    suite_add_tcase(s, e);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
