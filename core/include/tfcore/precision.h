/* tfcore/precision.h — the precision mode vtable (kind TF_KIND_PRECISION).
 *
 * A precision plugin fixes the compute dtype of activations, how GEMMs
 * multiply, and loss scaling (fp16): the scale to multiply the loss by, and
 * after backward whether the step's gradients are finite and how the scale
 * moves. Master weights, gradients and optimizer state stay f32.
 *
 * ABI 1.0. New slots are appended at the end and read through TF_HAS().
 */
#ifndef TFCORE_PRECISION_H
#define TFCORE_PRECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/backend.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_precision tf_precision;

/* Loss-scaler state, saved in checkpoints so a resumed run continues exactly. */
typedef struct tf_scaler_state {
    double scale;           /* current loss scale (1 when not scaling) */
    int64_t good_steps;     /* clean steps since the last change */
    int64_t skipped_steps;  /* steps skipped for inf/NaN gradients, in total */
} tf_scaler_state;

typedef struct tf_precision_vtable {
    uint32_t size; /* TF_VTABLE_SIZE(tf_precision_vtable) */
    /* Read and validate every key of the plugin's config section without
     * allocating anything (tfcore --dry-run, and before any work starts). */
    tf_status (*check_config)(tf_section *section, tf_error *err);
    tf_status (*create)(tf_section *section, tf_precision **out, tf_error *err);
    void (*destroy)(tf_precision *p);
    tf_dtype (*compute_dtype)(tf_precision *p);
    tf_matmul_mode (*matmul_mode)(tf_precision *p);
    /* The factor the loss is multiplied by before backward. */
    float (*loss_scale)(tf_precision *p);
    /* After gradients are reduced: tell whether they are finite (*found_inf)
     * and multiply them by 1/loss_scale. Uses the backend's finite_check/scale. */
    tf_status (*unscale_and_check)(tf_precision *p, const tf_backend_vtable *bvt, tf_backend *be,
                                   float *grads, size_t n, int32_t *dev_flag, bool *found_inf,
                                   tf_error *err);
    /* Move the scale after a step; returns whether the step must be skipped. */
    bool (*update)(tf_precision *p, bool found_inf);
    void (*get_state)(tf_precision *p, tf_scaler_state *out);
    void (*set_state)(tf_precision *p, const tf_scaler_state *in);
} tf_precision_vtable;

#ifdef __cplusplus
}
#endif
#endif
