/* tfcore/squad.h — SQuAD v1.1 / v2.0 data and the official SQuAD evaluation.
 *
 * Loading: tf_squad_load() reads a SQuAD JSON file (the format of
 * train-v1.1.json, dev-v2.0.json, ...) into a flat list of examples, one per
 * question, in file order. Evaluation: tf_squad_evaluate() computes exactly
 * what the official scripts evaluate-v1.1.py and evaluate-v2.0.py compute
 * (and transformers' data/metrics/squad_metrics.py, which copies the v2
 * script), and tf_squad_result_format() prints it byte for byte as those
 * scripts print it.
 *
 * Version: a file is v2 when its "version" string starts with "v2" or "2",
 * or when any question carries an "is_impossible" field; otherwise v1.1.
 *
 * Offsets: answer_start in SQuAD files counts Unicode code points of the
 * context (Python string indices), and so does this API.
 *
 * Differences from the Python scripts, all on inputs real SQuAD files never
 * contain: JSON with "\u0000" in a string, lone UTF-16 surrogates, NaN or
 * Infinity, or integers beyond 64 bits is rejected (Python accepts them);
 * lowercasing follows Unicode 15 (utf8proc) where Python 3.11 follows 14, so
 * code points assigned only in Unicode 15 may lowercase differently.
 */
#ifndef TFCORE_SQUAD_H
#define TFCORE_SQUAD_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_squad_version {
    TF_SQUAD_V1 = 1, /* SQuAD v1.1: every question has an answer */
    TF_SQUAD_V2 = 2  /* SQuAD v2.0: unanswerable questions too */
} tf_squad_version;

typedef struct tf_squad_answer {
    const char *text;   /* UTF-8, as in the file */
    int64_t start;      /* answer_start: code points into the context */
    int64_t start_byte; /* the same position in bytes; -1 when misaligned */
    int aligned;        /* 1 when context[start : start+len(text)] == text */
} tf_squad_answer;

typedef struct tf_squad_example {
    const char *id;          /* the question id ("qas[].id") */
    const char *title;       /* the article's title ("" when the file has none) */
    const char *context;     /* UTF-8; examples of one paragraph share the pointer */
    size_t context_bytes;    /* strlen(context) */
    size_t context_len;      /* code points in context (Python len()) */
    size_t context_index;    /* which paragraph, 0-based over the whole file */
    const char *question;    /* UTF-8, as in the file (not stripped) */
    const tf_squad_answer *answers; /* [n_answers], file order; training uses [0] */
    size_t n_answers;
    int is_impossible;       /* the file's "is_impossible" (v2); 0 when absent */
    int misaligned;          /* some answer's text is not at its answer_start (or
                                the start lies outside the context): kept for
                                evaluation, skipped by training */
} tf_squad_example;

typedef struct tf_squad_storage tf_squad_storage; /* private */

typedef struct tf_squad_dataset {
    tf_squad_version version;
    const char *version_string; /* the file's "version", or "" */
    size_t n_examples;
    tf_squad_example *examples; /* [n_examples], one per question, file order */
    size_t n_contexts;          /* paragraphs */
    size_t n_unanswerable;      /* examples with no answers (the v2 script's NoAns) */
    size_t n_misaligned;        /* examples flagged misaligned (each was warned about) */
    size_t n_duplicate_ids;     /* questions whose id already appeared earlier */
    tf_squad_storage *storage;
} tf_squad_dataset;

/* Load a SQuAD JSON file. Errors (TF_ERR_DATA), one line each:
 *   "FILE:LINE:COLUMN: <jansson message>"                 malformed JSON
 *   "FILE: data[3].paragraphs[1].qas[0]: missing 'question'"   (or "'id' is not a string")
 *   "FILE: no questions (empty dataset)"
 * An answer whose text is not at its answer_start is not an error: the
 * example is kept, flagged `misaligned`, counted, and a warning naming the
 * question id is logged (the first 20; then one line with the total). A
 * repeated question id is logged likewise and counted. */
tf_status tf_squad_load(const char *path, tf_squad_dataset **out, tf_error *err);
/* The same from memory; `name` stands for the file name in messages. */
tf_status tf_squad_load_buffer(const char *data, size_t len, const char *name,
                               tf_squad_dataset **out, tf_error *err);
void tf_squad_free(tf_squad_dataset *ds);

/* ---- predictions ------------------------------------------------------- */

typedef struct tf_squad_prediction {
    const char *id;   /* question id */
    const char *text; /* predicted answer, UTF-8; "" = no answer */
} tf_squad_prediction;

typedef struct tf_squad_na_prob {
    const char *id;
    double prob;        /* the model's probability (or score) that there is no answer */
    int is_integer;     /* the JSON had an integer: best_*_thresh then prints as one */
    long long iprob;    /* the integer, when is_integer */
} tf_squad_na_prob;

/* Arrays read from JSON files ({"id": "text", ...} and {"id": 0.93, ...}),
 * in file order. A key given twice keeps its first position and its last
 * value, as Python's json.load does. */
typedef struct tf_squad_predictions {
    size_t n;
    tf_squad_prediction *items; /* [n] */
    tf_squad_storage *storage;
} tf_squad_predictions;

typedef struct tf_squad_na_probs {
    size_t n;
    tf_squad_na_prob *items; /* [n] */
    tf_squad_storage *storage;
} tf_squad_na_probs;

/* Errors: malformed JSON as above; "FILE: top level is not an object";
 * "FILE: 'ID': prediction is not a string" / "...: no-answer probability is
 * not a number". */
tf_status tf_squad_load_predictions(const char *path, tf_squad_predictions *out, tf_error *err);
tf_status tf_squad_load_na_probs(const char *path, tf_squad_na_probs *out, tf_error *err);
void tf_squad_predictions_free(tf_squad_predictions *p);
void tf_squad_na_probs_free(tf_squad_na_probs *p);

/* ---- evaluation -------------------------------------------------------- */

typedef struct tf_squad_eval_options {
    double na_prob_thresh;    /* the script's --na-prob-thresh: a question whose
                                 no-answer probability is > this counts as
                                 answered "" (v2 only). Default 1.0. */
    tf_squad_version version; /* 0: the dataset's version */
} tf_squad_eval_options;

#define TF_SQUAD_EVAL_OPTIONS_DEFAULT ((tf_squad_eval_options){1.0, (tf_squad_version)0})

#define TF_SQUAD_METRICS_MAX 16

typedef struct tf_squad_metric {
    char name[24];   /* "exact", "HasAns_f1", "best_f1_thresh", "exact_match", ... */
    int is_integer;  /* printed as an integer: totals, an integer threshold */
    double value;    /* scores are ×100, as the scripts print them */
    long long ivalue; /* the value, when is_integer */
} tf_squad_metric;

/* The metrics in the scripts' output order:
 *   v2:   exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total,
 *         NoAns_exact, NoAns_f1, NoAns_total (HasAns_* / NoAns_* only when
 *         such questions exist), and with no-answer probabilities
 *         best_exact, best_exact_thresh, best_f1, best_f1_thresh
 *   v1.1: exact_match, f1 */
typedef struct tf_squad_result {
    tf_squad_version version;
    int n;
    tf_squad_metric metric[TF_SQUAD_METRICS_MAX];
    size_t n_questions; /* questions in the dataset (v2: distinct ids) */
    size_t n_missing;   /* of them without a prediction */
} tf_squad_result;

/* Score predictions against the dataset, as the official script does:
 *
 *   normalize: Python str.lower(); drop ASCII punctuation (string.punctuation);
 *   the words a|an|the become " "; whitespace runs (Python str.split()) become
 *   one space. EM: normalized texts equal. F1: multiset overlap of the
 *   normalized whitespace tokens.
 *   v2: gold answers that normalize to "" are dropped, none left -> [""]
 *   (with F1 = 1 when both sides have no tokens); max over the golds; a
 *   question with no-answer probability > na_prob_thresh scores 1 when it
 *   has no answer and 0 otherwise; with `na` (the --na-prob-file) also the
 *   best thresholds. Without `na`, every prediction's probability is 0.0.
 *   v1.1: max over all golds; both-empty F1 = 0; a question with no gold
 *   answer is an error (the script stops there).
 *
 * Missing predictions: v1.1 counts each as 0 (and warns), as its script does.
 * v2 warns "Missing prediction for ID" and scores only the questions that
 * have a prediction: all totals then count those. (evaluate-v2.0.py prints
 * the same warning, already counts only them in "total", and then stops with
 * a KeyError in its HasAns/NoAns breakdown, so it has no output to match; no
 * prediction at all is an error.) A question id that appears twice counts
 * once in v2 (with its last gold answers, at its first position: the
 * script's dicts) and twice in v1.1. Predictions or probabilities for ids
 * the dataset lacks are ignored. Every predicted question needs a
 * probability in `na` when `na` is given.
 *
 * preds[n_preds] and na[n_na] are read as Python dicts built from the pairs
 * in order (a repeated id: first position, last value). na may be NULL. */
tf_status tf_squad_evaluate(const tf_squad_dataset *ds, const tf_squad_prediction *preds,
                            size_t n_preds, const tf_squad_na_prob *na, size_t n_na,
                            const tf_squad_eval_options *opt, tf_squad_result *out,
                            tf_error *err);

/* Look a metric up by name; NULL when the result has none. */
const tf_squad_metric *tf_squad_result_get(const tf_squad_result *r, const char *name);

typedef enum tf_squad_json_style {
    TF_SQUAD_JSON_COMPACT = 0, /* json.dumps(d): {"exact": 50.0, "f1": 50.0, ...} */
    TF_SQUAD_JSON_INDENT2 = 1  /* json.dumps(d, indent=2) */
} tf_squad_json_style;

/* The result as the scripts print it, without a trailing newline:
 *   v2 to stdout:   TF_SQUAD_JSON_INDENT2 + "\n"   (print(json.dumps(d, indent=2)))
 *   v2 --out-file:  TF_SQUAD_JSON_COMPACT          (json.dump(d, f))
 *   v1.1 stdout:    TF_SQUAD_JSON_COMPACT + "\n"   (print(json.dumps(d)))
 * Writes at most cap bytes incl. the NUL; returns the length the full text
 * needs (as snprintf). TF_SQUAD_JSON_MAX always suffices. */
#define TF_SQUAD_JSON_MAX 2048
size_t tf_squad_result_format(const tf_squad_result *r, tf_squad_json_style style, char *buf,
                              size_t cap);

/* ---- the pieces, for tests and for other metrics ----------------------- */

/* The official normalize_answer(s) of UTF-8 text, malloc'ed (NULL when out
 * of memory). Invalid UTF-8 bytes are read as U+FFFD. */
char *tf_squad_normalize_answer(const char *s);

/* compute_exact / compute_f1 of evaluate-v2.0.py (F1 = 1 when both have no
 * tokens), and exact_match_score / f1_score of evaluate-v1.1.py (F1 = 0
 * then). Return -1 when out of memory. */
int tf_squad_exact(const char *gold, const char *pred);
double tf_squad_f1(const char *gold, const char *pred, tf_squad_version version);

/* Python's repr(x) for a float (shortest text that reads back as x; "1e-05",
 * "66.66666666666667", "100.0", "NaN"/"Infinity" as json.dumps writes them).
 * buf needs 32 bytes; returns buf. */
char *tf_squad_repr_double(double x, char buf[32]);

#ifdef __cplusplus
}
#endif
#endif
