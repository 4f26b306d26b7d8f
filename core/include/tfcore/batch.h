/* tfcore/batch.h — one batch of tokenized examples, as a dataset fills it and a
 * model consumes it. Host memory; the trainer copies it to the backend. */
#ifndef TFCORE_BATCH_H
#define TFCORE_BATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_task {
    TF_TASK_CLASSIFICATION = 1,     /* sequence classification: one label per row */
    TF_TASK_QUESTION_ANSWERING = 2  /* extractive QA: start/end position per row */
} tf_task;

/* A batch of `rows` sequences of `seq` tokens (rows <= capacity_rows,
 * seq <= capacity_seq: buffers are allocated once for the largest batch).
 * All arrays are row-major [rows, seq] or [rows]; a NULL array is absent. */
typedef struct tf_batch {
    int rows, seq;
    int capacity_rows, capacity_seq;
    int32_t *input_ids;       /* [rows, seq] */
    int32_t *token_type_ids;  /* [rows, seq] */
    int32_t *attention_mask;  /* [rows, seq] 1 = token, 0 = padding */
    int32_t *labels;          /* [rows] classification label, or NULL */
    int32_t *start_positions; /* [rows] QA, token index (0 = [CLS] = no answer), or NULL */
    int32_t *end_positions;   /* [rows] QA, or NULL */
    int64_t *feature_index;   /* [rows] index of the feature (row of the split) each row is */
} tf_batch;

#ifdef __cplusplus
}
#endif
#endif
