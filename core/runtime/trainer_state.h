/* trainer_state.h — reading a checkpoint's trainer_state.json (the counters a
 * resumed run continues from), apart from the trainer so the reader can be
 * fuzzed on its own (tests/fuzz/fuzz_trainer_state.c). */
#ifndef TFCORE_TRAINER_STATE_H
#define TFCORE_TRAINER_STATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"
#include "tfcore/precision.h"

typedef struct tf_trainer_state {
    int64_t global_step;    /* optimizer steps done, >= 0 */
    int64_t micro_step;     /* forward/backward passes done, >= 0 */
    int64_t skipped_steps;  /* >= 0 */
    int64_t num_parameters; /* of the model that saved it, >= 0 */
    double total_loss;      /* finite */
    tf_scaler_state scaler; /* scale finite and > 0, counts >= 0 */
} tf_trainer_state;

/* Parse text[0..len) (the file `path`, for messages). Every error is
 * TF_ERR_DATA naming path (and line:column for bad JSON). With root, *root is
 * the whole object (caller decrefs) for keys read elsewhere. */
tf_status tf_trainer_state_parse(const char *text, size_t len, const char *path, tf_trainer_state *s,
                                 json_t **root, tf_error *err);

/* The same from the file (a regular file: tf_file_open_read). */
tf_status tf_trainer_state_read(const char *path, tf_trainer_state *s, json_t **root, tf_error *err);

#endif
