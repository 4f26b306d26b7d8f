/* stack.h — the compute stack a model runs on: the backend, the precision and
 * the model, each held as {vtable, handle}. One function opens them in that
 * order (backend open, precision create, the check that the backend can
 * compute in that precision, model create → info) and one closes them in
 * reverse, so the trainer, `tfcore predict` and `--dry-run`'s precision check
 * open them the same way and say the same line when a part cannot. */
#ifndef TFCORE_STACK_H
#define TFCORE_STACK_H

#include <stdbool.h>

#include "plan.h"
#include "tfcore/backend.h"
#include "tfcore/model.h"
#include "tfcore/precision.h"

typedef struct tf_stack_backend {
    const tf_backend_vtable *vt;
    tf_backend *h;
} tf_stack_backend;

typedef struct tf_stack_precision {
    const tf_precision_vtable *vt;
    tf_precision *h;
} tf_stack_precision;

typedef struct tf_stack_model {
    const tf_model_vtable *vt;
    tf_model *h;
    const tf_model_info *info; /* vt->info(h), valid while the model is */
} tf_stack_model;

typedef struct tf_stack {
    tf_stack_backend backend;
    tf_stack_precision precision;
    tf_stack_model model;     /* all NULL when opened without a model */
    tf_dtype compute_dtype;   /* the precision's activations */
    tf_matmul_mode matmul_mode;
    bool defer_loss;          /* the model was created with defer_loss (asked, and it has read_loss) */
} tf_stack;

typedef struct tf_stack_options {
    int device;                   /* the backend's device index (the worker's local rank) */
    int threads;                  /* the backend's host threads (0: its default) */
    int local_world;              /* workers sharing this machine's cores (0 or 1: this one alone) */
    bool with_model;              /* false: backend and precision only (the --dry-run check) */
    bool defer_loss;              /* ask for defer_loss when the model has read_loss (tfcore/model.h) */
    float label_smoothing_factor; /* tf_model_create_args' (0 without labels) */
    bool gradient_checkpointing;  /* tf_model_create_args' (training.gradient_checkpointing) */
} tf_stack_options;

/* Open the plan's backend, precision and (with_model) model with the
 * config's sections and training.seed. On error s holds what was opened
 * and the caller still calls tf_stack_close. */
tf_status tf_stack_open(tf_stack *s, const tf_plan *plan, const tf_stack_options *o, tf_error *err);
/* Close what is open, in reverse order; s is zeroed (closing twice is safe). */
void tf_stack_close(tf_stack *s);

/* Open the plan's backend (device 0) and create its precision, to check the
 * backend can compute in that precision (`--dry-run`; a run checks it at
 * setup), and close them again. */
tf_status tf_stack_check_precision(const tf_plan *plan, tf_error *err);

#endif
