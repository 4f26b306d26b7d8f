/* report_table.h — `tfcore report`: reading several runs' results.json and
 * comparing them as the hands-on's table (Markdown or JSON, report_table.c)
 * and as an SVG bar chart (report_svg.c). Code of the tfcore command, not of
 * libtfcore.
 *
 * A run is a folder holding results.json as tf_write_results writes it:
 * Trainer's keys at the top level (train_runtime, train_samples_per_second,
 * eval_accuracy, ...) and an object "tfcore" (phase_seconds, world_size,
 * plugin names, config). Keys that a run from an older tfcore lacks are
 * shown as "—"; a key that is present with the wrong type, a JSON syntax
 * error or a missing file is an error (TF_ERR_DATA) naming the file. */
#ifndef TFCORE_REPORT_TABLE_H
#define TFCORE_REPORT_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tfcore/error.h"

/* The phases of tfcore.phase_seconds, in the trainer's order. */
enum {
    TF_REPORT_DATA,
    TF_REPORT_FORWARD,
    TF_REPORT_BACKWARD,
    TF_REPORT_COMM, /* all gradient communication, overlapped with backward or not */
    TF_REPORT_OPTIMIZER,
    TF_REPORT_EVAL,
    TF_REPORT_SAVE,
    TF_REPORT_PHASES
};
extern const char *const tf_report_phase_name[TF_REPORT_PHASES];

/* The categories of tfcore.memory_bytes (weights, gradients, optimizer_states,
 * activations, temporaries), in that order. */
#define TF_REPORT_MEMORY 5
extern const char *const tf_report_memory_name[TF_REPORT_MEMORY];

/* One run. Numbers are NAN and strings NULL where results.json lacks the key. */
typedef struct tf_report_run {
    char *dir;    /* the folder as given (valid UTF-8: bad bytes became U+FFFD) */
    char *name;   /* its last component: the table's "run" column (same) */
    json_t *results;               /* the whole results.json, owned */
    double train_runtime;          /* seconds, >= 0 (required) */
    double samples_per_second;     /* train_samples_per_second */
    double phase[TF_REPORT_PHASES]; /* tfcore.phase_seconds.<name>, seconds */
    double comm_exposed;           /* tfcore.phase_seconds.comm_exposed: the optimizer's wait */
    long long world_size;          /* tfcore.world_size; -1 when absent */
    const char *config;            /* tfcore.config: the config file as given */
    const char *comm, *precision;  /* tfcore.comm ("none" for one worker), tfcore.precision */
    double memory[TF_REPORT_MEMORY]; /* tfcore.memory_bytes.<name>, bytes */
    /* tfcore.pipeline (a pipeline run, docs/PARALLEL.md): stages, replicas and
     * micro_batches (-1 when absent), schedule, expected_bubble,
     * measured_bubble and the mean of utilisation over the workers */
    long long pipe_stages, pipe_replicas, pipe_micro;
    const char *pipe_schedule;
    double pipe_expected_bubble, pipe_measured_bubble, pipe_utilisation;
    /* tfcore.statistics (docs/PARALLEL.md "Statistical efficiency and goodput"):
     * have_stats when the run has it; the global batch, the gradient noise
     * scale, the statistical efficiency and goodput (NAN when absent or null:
     * no estimate, the reason is stat_reason) */
    bool have_stats;
    double stat_batch, stat_noise_scale, stat_efficiency, stat_goodput;
    const char *stat_reason;
} tf_report_run;

/* Read DIR/results.json into *run. Errors (TF_ERR_DATA, one line):
 *   "DIR/results.json: cannot open: No such file or directory"
 *   "DIR/results.json:3:14: '}' expected near ','"   (jansson's message)
 *   "DIR/results.json: tfcore.phase_seconds.comm must be a number >= 0, got string"
 * On failure *run holds nothing to free. */
tf_status tf_report_read_run(const char *dir, tf_report_run *run, tf_error *err);
void tf_report_run_free(tf_report_run *run);

/* A top-level number of the run's results.json (eval_accuracy, train_loss,
 * ...), NAN when absent or not a number. */
double tf_report_value(const tf_report_run *run, const char *key);

/* The comparison: runs in command-line order, one of them the baseline. */
typedef struct tf_report {
    const tf_report_run *runs;
    size_t n;
    size_t baseline;    /* index into runs */
    const char *metric; /* the last column: a top-level key */
} tf_report;

/* eval_accuracy if any run has it, else eval_f1, else eval_loss. */
const char *tf_report_default_metric(const tf_report_run *runs, size_t n);
/* True when some run has `key` as a top-level number. */
bool tf_report_has_metric(const tf_report_run *runs, size_t n, const char *key);
/* The top-level numeric key of any run closest to `key` (a typo), or NULL. */
const char *tf_report_closest_metric(const tf_report_run *runs, size_t n, const char *key);

/* Baseline train_runtime / run i's; NAN when either is unknown or 0. */
double tf_report_speedup(const tf_report *r, size_t i);
/* 100 * comm_exposed / train_runtime; NAN when unknown. */
double tf_report_exposed_percent(const tf_report_run *run);

/* A growing text buffer; `failed` once an allocation failed (the text is
 * then incomplete and tf_report_text_take returns NULL). */
typedef struct tf_report_text {
    char *s;
    size_t len, cap;
    bool failed;
} tf_report_text;
void tf_report_printf(tf_report_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tf_report_puts(tf_report_text *t, const char *s);
/* The NUL-terminated text (caller frees), or NULL if an allocation failed. */
char *tf_report_text_take(tf_report_text *t);

/* The table as Markdown: a header, an alignment row, a row per run; every
 * line ends with a newline. NULL when out of memory. */
char *tf_report_markdown(const tf_report *r);
/* The table as JSON {"baseline", "metric", "runs": [...]} with null for
 * unknown values, and a trailing newline. NULL when out of memory. */
char *tf_report_json(const tf_report *r);
/* The chart (report_svg.c): a self-contained SVG document. NULL when out of memory. */
char *tf_report_svg(const tf_report *r);

/* Characters a terminal cell shows for UTF-8 text s (code points counted). */
size_t tf_report_width(const char *s);

#endif
