/* tfcore/dataset.h — the dataset vtable (kind TF_KIND_DATASET).
 *
 * A dataset reads its files once at open, tokenizes with libtfcore's
 * tokenizer, and then fills batches for any list of example indices (the
 * sampler decides which). It also turns a split's model outputs into metrics.
 *
 * ABI 1.0. New slots are appended at the end and read through TF_HAS();
 * ABI 1.3 added row_length.
 */
#ifndef TFCORE_DATASET_H
#define TFCORE_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/batch.h"
#include "tfcore/config.h"
#include "tfcore/error.h"
#include "tfcore/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_dataset tf_dataset;

typedef enum tf_split { TF_SPLIT_TRAIN = 0, TF_SPLIT_EVAL = 1 } tf_split;

typedef struct tf_dataset_open_args {
    uint32_t size;          /* sizeof(tf_dataset_open_args) */
    tf_section *section;    /* the config's "data" section */
    tf_task task;           /* what the model expects */
    int num_labels;         /* classification */
    const char *vocab_file; /* the model's tokenizer (a folder or file for tf_tokenizer_load), or NULL
                               (then data.vocab_file) */
    int do_lower_case;      /* the model's tokenizer setting, for information; -1 = unknown */
    int max_seq;            /* the model's longest sequence */
    int vocab_size;         /* ids must be < vocab_size */
    uint64_t seed;
    const char *output_dir; /* where eval files (predictions.json ...) go; may be NULL */
    int threads;            /* tokenization threads; 0 = all */
} tf_dataset_open_args;

#define TF_METRIC_NAME_MAX 48
#define TF_METRICS_MAX 32

/* Metrics in Trainer's names without the "eval_" prefix ("accuracy", "exact", "f1", ...). */
typedef struct tf_metrics {
    int n;
    char name[TF_METRICS_MAX][TF_METRIC_NAME_MAX];
    double value[TF_METRICS_MAX];
} tf_metrics;

typedef struct tf_dataset_vtable {
    uint32_t size; /* TF_VTABLE_SIZE(tf_dataset_vtable) */
    /* Read and validate every key of the plugin's config section without
     * allocating anything (tfcore --dry-run, and before any work starts). */
    tf_status (*check_config)(tf_section *section, tf_error *err);
    tf_status (*open)(const tf_dataset_open_args *args, tf_dataset **out, tf_error *err);
    void (*close)(tf_dataset *ds);
    /* Rows (features) of a split: examples, or SQuAD windows. */
    size_t (*num_rows)(tf_dataset *ds, tf_split split);
    /* The sequence length batches of this split use (max_length, or the longest). */
    int (*seq_len)(tf_dataset *ds, tf_split split);
    /* Fill `out` (its buffers sized by the caller to capacity) with rows idx[0..n). */
    tf_status (*fill_batch)(tf_dataset *ds, tf_split split, const size_t *idx, size_t n,
                            tf_batch *out, tf_error *err);
    /* Metrics of a whole split from its outputs: logits[rows][cols] (host, f32)
     * for every row of the split in order, cols as the model's output. */
    tf_status (*evaluate)(tf_dataset *ds, tf_split split, const float *logits, size_t rows,
                          int cols, tf_metrics *out, tf_error *err);

    /* --- appended in ABI 1.3: optional, read through TF_HAS() ------------------ */
    /* Real tokens of row `row` (< num_rows) of a split: the sum of its
     * attention mask, the length transformers' LengthGroupedSampler sorts by
     * (training.group_by_length). NULL: the dataset cannot group by length. */
    int (*row_length)(tf_dataset *ds, tf_split split, size_t row);
} tf_dataset_vtable;

/* The tokenizer a dataset plugin should use: vocab_file (the plugin's
 * data.vocab_file, may be NULL) or else the model's tokenizer, loaded by
 * tf_tokenizer_load as `tfcore tokenize --vocab` loads it, lowercasing as
 * do_lower_case says (-1: as that tokenizer's own files say). Errors: neither
 * vocabulary exists (the model is a preset: "set data.vocab_file"), an
 * unreadable vocabulary, or one with more ids than the model's vocab_size.
 * Free with tf_tokenizer_free. */
tf_status tf_dataset_tokenizer(const tf_dataset_open_args *args, const char *vocab_file, int do_lower_case,
                               tf_tokenizer **out, tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
