/* fuzz_tokenizer_config.c — libFuzzer target for tokenizer_config.json
 * parsing (core/sdk/tokenizer_config.c): arbitrary bytes through
 * tf_tokenizer_config_parse.
 * Invariants checked: success leaves every field -1, 0 or 1; failure is
 * TF_ERR_DATA with a one-line message naming the label and leaves the
 * output all -1 (nothing half-read).
 * Seeds: tests/fuzz/corpus/tokenizer_config (real tokenizer_config.json
 * files of BERT models, and the malformed cases the tests use). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/tokenizer.h"

#define LABEL "fuzz/tokenizer_config.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 16)) return 0;
    tf_tokenizer_config c;
    tf_error err = {0};
    tf_status st = tf_tokenizer_config_parse((const char *)data, size, LABEL, &c, &err);
    const int v[3] = {c.do_lower_case, c.strip_accents, c.tokenize_chinese_chars};
    if (st == TF_OK) {
        for (int i = 0; i < 3; i++)
            if (v[i] < -1 || v[i] > 1) abort();
        return 0;
    }
    if (st != TF_ERR_DATA || err.code != TF_ERR_DATA) abort();
    if (strncmp(err.msg, LABEL, strlen(LABEL)) != 0 || strchr(err.msg, '\n')) abort();
    for (int i = 0; i < 3; i++)
        if (v[i] != -1) abort();
    return 0;
}
