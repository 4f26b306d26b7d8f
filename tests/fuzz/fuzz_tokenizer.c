/* fuzz_tokenizer.c — arbitrary bytes through the tokenizer: encode as one
 * text or a pair (split at the first TAB), with truncation, windows and
 * padding picked by the first bytes, then decode every window.
 *
 * Input: [flags][max_length][stride] text-bytes
 *   flags bits 0-1: tokenizer (uncased, cased, lowercase keeping accents,
 *                   from tokenizer.json), bits 2-3: truncation strategy,
 *                   bit 4: return_overflowing, bit 5: pad, bit 6: no special
 *                   tokens, bit 7: split into a pair at the first TAB
 * Invariants checked: ids in the vocabulary, offsets ordered and inside the
 * text, masks and sequence ids well-formed, windows no longer than
 * max_length once truncated, padding to max_length, decode succeeds.
 * Seeds: tests/fuzz/corpus/tokenizer (tests/ref/tokenizer_corpus.py
 * --write-fuzz-seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/log.h"
#include "tfcore/tokenizer.h"

static tf_tokenizer *toks[4];

/* tests/data/tokenizer/ next to this file's tests/fuzz/ */
static void data_path(char *out, size_t n, const char *name)
{
    const char *f = __FILE__;
    const char *cut = strstr(f, "fuzz/fuzz_tokenizer.c");
    int keep = cut ? (int)(cut - f) : 0;
    snprintf(out, n, "%.*sdata/tokenizer/%s", keep, f, name);
}

static void load_all(void)
{
    tf_log_set_level(TF_LOG_QUIET);
    static const int lower[3] = {1, 0, 1}, strip[3] = {1, 0, 0};
    char vocab[4096], json[4096];
    data_path(vocab, sizeof vocab, "vocab.txt");
    data_path(json, sizeof json, "tokenizer.json");
    tf_error err;
    for (int k = 0; k < 4; k++) {
        tf_tokenizer_options o;
        tf_tokenizer_options_init(&o);
        if (k < 3) {
            o.do_lower_case = lower[k];
            o.strip_accents = strip[k];
        }
        if (tf_tokenizer_load(k < 3 ? vocab : json, &o, &toks[k], &err) != TF_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
            abort();
        }
    }
}

#define REQUIRE(c)                                                                       \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "fuzz_tokenizer: %s:%d: %s\n", __FILE__, __LINE__, #c);      \
            abort();                                                                     \
        }                                                                                \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!toks[0]) load_all();
    uint8_t flags = size > 0 ? data[0] : 0;
    int max_length = size > 1 ? data[1] % 64 : 0;
    int stride = size > 2 ? data[2] % 16 : 0;
    const char *text = size > 3 ? (const char *)data + 3 : "";
    size_t len = size > 3 ? size - 3 : 0;

    const tf_tokenizer *tok = toks[flags & 3];
    tf_encode_options eo;
    tf_encode_options_init(&eo);
    eo.truncation = (tf_truncation)((flags >> 2) & 3);
    eo.max_length = max_length;
    eo.stride = stride;
    eo.return_overflowing = (flags >> 4) & 1;
    eo.pad_to_max_length = (flags >> 5) & 1;
    eo.add_special_tokens = !((flags >> 6) & 1);
    if (eo.truncation != TF_TRUNCATE_NONE && eo.max_length == 0) eo.max_length = 1;

    const char *pair = NULL;
    size_t alen = len, blen = 0;
    if (flags & 0x80) {
        const char *tab = memchr(text, '\t', len);
        if (tab) {
            alen = (size_t)(tab - text);
            pair = tab + 1;
            blen = len - alen - 1;
        } else {
            pair = "";
        }
    }

    tf_encoding enc;
    tf_encoding_init(&enc);
    tf_error err;
    tf_status st = tf_tokenizer_encode(tok, text, alen, pair, blen, &eo, &enc, &err);
    if (st == TF_OK) {
        const int32_t vs = tf_tokenizer_vocab_size(tok);
        REQUIRE(enc.n_windows >= 1 && enc.window_start[0] == 0);
        REQUIRE(enc.window_start[enc.n_windows] == enc.n_tokens);
        int special = eo.add_special_tokens ? (pair ? 3 : 2) : 0;
        for (int32_t w = 0; w < enc.n_windows; w++) {
            int32_t a = enc.window_start[w], b = enc.window_start[w + 1];
            REQUIRE(a <= b);
            /* (a text cut to 0 tokens — max_length equal to the special tokens, or
             * a pair sharing 1 token — moves whole into one overflowing window,
             * longer than max_length, as in tokenizers) */
            if (eo.truncation != TF_TRUNCATE_NONE && eo.max_length - special >= (pair ? 2 : 1))
                REQUIRE(b - a <= eo.max_length || (eo.pad_to_max_length && b - a == eo.max_length));
            if (eo.pad_to_max_length) REQUIRE(b - a >= eo.max_length);
            for (int32_t i = a; i < b; i++) {
                REQUIRE(enc.ids[i] >= 0 && enc.ids[i] < vs);
                REQUIRE(enc.attention_mask[i] == 0 || enc.attention_mask[i] == 1);
                int8_t s = enc.sequence_ids[i];
                REQUIRE(s >= -1 && s <= (pair ? 1 : 0));
                int32_t o0 = enc.offsets[2 * i], o1 = enc.offsets[2 * i + 1];
                size_t limit = s == 1 ? blen : alen; /* code points <= bytes */
                REQUIRE(o0 >= 0 && o0 <= o1 && (size_t)o1 <= limit);
                REQUIRE((s < 0) == (enc.word_ids[i] < 0));
                REQUIRE(enc.type_ids[i] == 0 || enc.type_ids[i] == 1);
                if (s >= 0) REQUIRE(enc.type_ids[i] == s);
                if (enc.attention_mask[i] == 0) REQUIRE(enc.type_ids[i] == 0 && s == -1);
            }
            for (int skip = 0; skip < 2; skip++) {
                char *out = NULL;
                size_t out_len = 0;
                REQUIRE(tf_tokenizer_decode(tok, enc.ids + a, (size_t)(b - a), skip, !skip, &out, &out_len,
                                            &err) == TF_OK);
                REQUIRE(out && strlen(out) <= out_len + 1);
                free(out);
            }
        }
    } else {
        REQUIRE(st == TF_ERR_USAGE || st == TF_ERR_DATA);
        REQUIRE(err.msg[0] != '\0');
    }
    /* the same text through the batch entry point (one thread) */
    const char *texts[1] = {text};
    size_t lens[1] = {alen};
    const char *pairs[1] = {pair};
    size_t plens[1] = {blen};
    tf_encoding b1;
    tf_encoding_init(&b1);
    tf_status bs = tf_tokenizer_encode_batch(tok, 1, texts, lens, pair ? pairs : NULL, pair ? plens : NULL,
                                             &eo, 1, &b1, &err);
    REQUIRE((bs == TF_OK) == (st == TF_OK));
    if (bs == TF_OK) {
        REQUIRE(b1.n_tokens == enc.n_tokens);
        REQUIRE(memcmp(b1.ids, enc.ids, (size_t)enc.n_tokens * sizeof *enc.ids) == 0);
        REQUIRE(memcmp(b1.offsets, enc.offsets, 2 * (size_t)enc.n_tokens * sizeof *enc.offsets) == 0);
    }
    tf_encoding_free(&b1);
    tf_encoding_free(&enc);
    return 0;
}
