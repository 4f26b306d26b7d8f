/* squad_postprocess.h — model outputs back to answers, as transformers'
 * examples/pytorch/question-answering/utils_qa.py postprocess_qa_predictions
 * does, and the files it writes (predictions.json, null_odds.json).
 */
#ifndef TF_SQUAD_POSTPROCESS_H
#define TF_SQUAD_POSTPROCESS_H

#include <stddef.h>

#include "squad_features.h"
#include "tfcore/error.h"
#include "tfcore/squad.h"

typedef struct squad_pp_options {
    int version_2_with_negative;
    int n_best_size;
    int max_answer_length;
    double null_score_diff_threshold;
} squad_pp_options;

/* One entry per distinct question id, in the order of the id's first
 * appearance (a Python dict filled in example order). */
typedef struct squad_pp_result {
    size_t n;
    const char **ids;     /* [n] the dataset's strings */
    char **texts;         /* [n] predicted answers ("" = no answer), malloc'ed */
    double *null_odds;    /* [n] v2: null score minus the best non-null score (float32 values) */
    size_t n_featureless; /* examples without any feature (cut by max_eval_samples) */
} squad_pp_result;

/* Predict every example of data->examples[0 .. n_examples) from the logits of
 * its features: logits [rows, cols] f32 with rows = f->n and cols = 2 * P,
 * (start, end) for each of P positions (P >= every feature's length).
 *
 * As utils_qa: an example's null score is the smallest start[0] + end[0] over
 * its features; each feature offers the n_best_size highest start and end
 * positions (np.argsort order: descending, ties by the higher position,
 * NaN highest), pairs inside the context with end >= start and at most
 * max_answer_length tokens score start + end (float32); the n_best_size best
 * (a stable sort), v2 with the null prediction; "empty" when nothing else is
 * left; v2 predicts "" when null score - best non-null start - end (float32)
 * is above the threshold. Features belong to the last example with their id
 * (utils_qa's example_id_to_index); an example with no feature at all
 * (max_eval_samples cut it) predicts "empty" (utils_qa's fallback; v2's null
 * odds 0.0 for it, where utils_qa would fail). NaN scores sort last. */
tf_status squad_postprocess(const tf_squad_dataset *data, size_t n_examples, const squad_features *f,
                            const float *logits, size_t rows, int cols, const squad_pp_options *opt,
                            squad_pp_result *out, tf_error *err);
void squad_pp_result_free(squad_pp_result *r);

/* Write dir/predictions.json ({id: text}) and, for v2, dir/null_odds.json
 * ({id: diff}) byte for byte as utils_qa writes them (json.dumps(d, indent=4)
 * + "\n"), each through a temporary file renamed into place. */
tf_status squad_write_predictions(const char *dir, const squad_pp_result *r, int version_2,
                                  tf_error *err);

/* Python's json.dumps of a str (ensure_ascii): "..." with \uXXXX escapes,
 * appended to *buf (malloc'ed, *len bytes used, *cap allocated). -1 when out
 * of memory. */
int squad_json_string(char **buf, size_t *len, size_t *cap, const char *s);

#endif
