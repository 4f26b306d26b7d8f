/* tokenizer_bench.c — times libtfcore's tokenizer on a file of texts, for
 * bench/tokenizer_vs_hf.py (which runs the tokenizers package on the same
 * texts and prints the comparison).
 *
 *   tokenizer_bench VOCAB TEXTS MODE MAX_LENGTH THREADS REPEAT
 *
 * TEXTS: one UTF-8 text per line. MODE:
 *   full   tf_tokenizer_encode_batch: complete encodings (ids, type ids,
 *          mask, offsets, word ids) as tokenizers' encode_batch returns them;
 *          MAX_LENGTH > 0 truncates (longest_first) and pads to it
 *   fixed  tf_tokenizer_encode_batch_fixed: [n, MAX_LENGTH] ids/type/mask
 *          rows, truncated and padded, as the IMDB dataset fills its arrays
 * THREADS: 0 = OpenMP's default (all cores). Prints the median of REPEAT runs:
 *   "seconds=S texts=N tokens=T" (T = tokens that are not padding). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfcore/tokenizer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "tokenizer_bench: %s: %s\n", what, msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: tokenizer_bench VOCAB TEXTS full|fixed MAX_LENGTH THREADS REPEAT\n");
        return 2;
    }
    const char *mode = argv[3];
    int max_length = atoi(argv[4]), threads = atoi(argv[5]), repeat = atoi(argv[6]);
    int fixed = strcmp(mode, "fixed") == 0;
    if ((!fixed && strcmp(mode, "full") != 0) || max_length < 0 || (fixed && max_length == 0) || repeat < 1)
        return die("arguments", "bad MODE, MAX_LENGTH or REPEAT");

    tf_error err;
    tf_tokenizer *tok;
    if (tf_tokenizer_load(argv[1], NULL, &tok, &err)) return die("load", err.msg);

    FILE *f = fopen(argv[2], "rb");
    if (!f) return die(argv[2], "cannot open");
    char **texts = NULL; /* [n] */
    size_t *lens = NULL; /* [n] */
    size_t n = 0, cap = 0, lcap = 0;
    char *line = NULL;
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        if (got > 0 && line[got - 1] == '\n') got--;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            texts = realloc(texts, cap * sizeof *texts);
            lens = realloc(lens, cap * sizeof *lens);
            if (!texts || !lens) return die("texts", "out of memory");
        }
        texts[n] = malloc((size_t)got + 1);
        if (!texts[n]) return die("texts", "out of memory");
        memcpy(texts[n], line, (size_t)got);
        texts[n][got] = '\0';
        lens[n++] = (size_t)got;
    }
    free(line);
    fclose(f);

    tf_encode_options eo;
    tf_encode_options_init(&eo);
    if (max_length > 0) {
        eo.truncation = TF_TRUNCATE_LONGEST_FIRST;
        eo.max_length = max_length;
        eo.pad_to_max_length = 1;
    }
    size_t L = (size_t)max_length;
    int32_t *ids = NULL, *type_ids = NULL, *mask = NULL; /* [n, L] in fixed mode */
    tf_encoding *enc = NULL;                              /* [n] in full mode */
    if (fixed) {
        ids = malloc(n * L * sizeof *ids);
        type_ids = malloc(n * L * sizeof *type_ids);
        mask = malloc(n * L * sizeof *mask);
        if (!ids || !type_ids || !mask) return die("rows", "out of memory");
    } else {
        enc = malloc((n ? n : 1) * sizeof *enc);
        if (!enc) return die("encodings", "out of memory");
        for (size_t i = 0; i < n; i++) tf_encoding_init(&enc[i]);
    }
    double times[64];
    if (repeat > 64) repeat = 64;
    long long tokens = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        tf_status st;
        if (fixed)
            st = tf_tokenizer_encode_batch_fixed(tok, n, (const char *const *)texts, lens, NULL, NULL, &eo,
                                                 threads, ids, type_ids, mask, &err);
        else
            st = tf_tokenizer_encode_batch(tok, n, (const char *const *)texts, lens, NULL, NULL, &eo, threads,
                                           enc, &err);
        double t = now() - t0;
        if (st) return die("encode", err.msg);
        times[r] = t;
    }
    for (int i = 1; i < repeat; i++) /* insertion sort: repeat is small */
        for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
            double x = times[j];
            times[j] = times[j - 1];
            times[j - 1] = x;
        }
    double median = times[repeat / 2];
    for (size_t i = 0; i < n; i++) {
        if (fixed)
            for (size_t k = 0; k < L; k++) tokens += mask[i * L + k];
        else
            for (int32_t k = 0; k < enc[i].n_tokens; k++) tokens += enc[i].attention_mask[k];
    }
    printf("seconds=%.6f texts=%zu tokens=%lld\n", median, n, tokens);
    for (size_t i = 0; i < n; i++) {
        if (enc) tf_encoding_free(&enc[i]);
        free(texts[i]);
    }
    free(enc);
    free(texts);
    free(lens);
    free(ids);
    free(type_ids);
    free(mask);
    tf_tokenizer_free(tok);
    return 0;
}
