/* squad_features.h — SQuAD examples into model rows ("features"), as
 * transformers' examples/pytorch/question-answering/run_qa.py builds them in
 * prepare_train_features / prepare_validation_features: the question with its
 * leading whitespace stripped, the pair (question, context) tokenized with
 * only_second truncation into overlapping windows (doc_stride tokens of
 * overlap), one feature per window, and each window's start/end token labels.
 *
 * What a feature keeps is only what batches and postprocessing need: its
 * token ids without padding, where the context starts (type ids and the
 * attention mask follow from that and the length), its labels, its example,
 * and (evaluation) the code-point offsets of its context tokens.
 */
#ifndef TF_SQUAD_FEATURES_H
#define TF_SQUAD_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"
#include "tfcore/squad.h"
#include "tfcore/tokenizer.h"

typedef struct squad_feature_options {
    int max_seq_length;    /* window width, special tokens included */
    int doc_stride;        /* tokens shared by consecutive windows */
    int pad_to_max_length; /* padding="max_length": labels see the padded window */
    int skip_misaligned;   /* training: leave out examples the loader flagged misaligned */
    int keep_offsets;      /* evaluation: keep the context tokens' offsets */
    size_t max_examples;   /* use only the first N examples (0 = all) */
    size_t max_features;   /* then keep only the first N features (0 = all) */
    int threads;           /* tokenizer threads, 0 = OpenMP's default */
    size_t chunk;          /* examples per tokenizer batch (0 = 2048) */
    const char *file;      /* the file's name, for messages */
} squad_feature_options;

typedef struct squad_features {
    size_t n;            /* features (windows) */
    size_t n_examples;   /* examples considered (after max_examples) */
    size_t n_skipped;    /* of them left out as misaligned (skip_misaligned) */
    int max_len;         /* longest row, tokens before padding */
    int64_t *tok_start;  /* [n + 1] feature f's tokens are ids[tok_start[f] .. tok_start[f + 1]) */
    int32_t *ids;        /* [tok_start[n]] token ids, unpadded, one feature after another */
    int32_t *type1;      /* [n] first position of token type 1 (the context and the last [SEP]) */
    int32_t *start_pos;  /* [n] run_qa's start_positions label */
    int32_t *end_pos;    /* [n] run_qa's end_positions label */
    int32_t *example;    /* [n] the example (index into the dataset) the window comes from */
    /* keep_offsets only (else NULL): */
    int32_t *ctx_first;  /* [n] position of the first context token (sequence id 1) */
    int32_t *ctx_count;  /* [n] context tokens in the window */
    int64_t *off_start;  /* [n + 1] feature f's context offsets start at offsets[2 * off_start[f]] */
    int32_t *offsets;    /* [off_start[n], 2] code points [start, end) in the context */
} squad_features;

/* Build the features of the first max_examples examples of `data`. Errors:
 * TF_ERR_DATA naming the file and the question when a window cannot be made
 * (a question too long for max_seq_length), TF_ERR_RUNTIME when out of memory. */
tf_status squad_features_build(const tf_tokenizer *tok, const tf_squad_dataset *data,
                               const squad_feature_options *opt, squad_features *out, tf_error *err);
void squad_features_free(squad_features *f);

/* Length of feature f in tokens (before padding). */
static inline int squad_feature_len(const squad_features *f, size_t i)
{
    return (int)(f->tok_start[i + 1] - f->tok_start[i]);
}

/* run_qa's label of one window (prepare_train_features, one iteration):
 * offsets [len, 2] and seq_ids [len] of the whole window as the tokenizer
 * returned it (padding included when padded: [SEP] and padding have offsets
 * (0, 0), which the start walk may step over, as in Hugging Face), the window's
 * input_ids to find [CLS], and the first gold answer (start_char, end_char in
 * code points) or has_answer = 0. */
void squad_window_label(const int32_t *ids, const int32_t *offsets, const int8_t *seq_ids, int32_t len,
                        int32_t cls_id, int has_answer, int64_t start_char, int64_t end_char,
                        int32_t *start, int32_t *end);

/* Python's str.lstrip(): skip leading code points for which str.isspace() is
 * true. Returns the first byte kept. */
const char *squad_lstrip(const char *s, size_t len);

/* Code points in len bytes of valid UTF-8 (Python's len()). */
size_t squad_utf8_len(const char *s, size_t len);

#endif
