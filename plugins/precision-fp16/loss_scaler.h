/* loss_scaler.h — dynamic loss scaling with torch.cuda.amp.GradScaler's
 * rules, as a plain state machine (no device, no config).
 *
 * After each optimizer step's gradients were checked:
 *   overflow (inf/NaN): scale *= backoff_factor, tracker = 0, step skipped;
 *   clean:              tracker += 1; when tracker == growth_interval,
 *                       scale *= growth_factor (unless that is not a finite
 *                       float: then the scale stays) and tracker = 0.
 * The scale is kept as a float (torch keeps a float32 tensor) and each
 * product is taken in double and rounded to float, as torch's kernel does.
 *
 * One deliberate difference: torch lets the scale underflow (to a subnormal
 * and then 0, after which 1/scale is inf and every later step overflows).
 * Here the scale never goes below FLT_MIN, the smallest normal float, whose
 * inverse 2^126 is still finite; the first time the clamp applies the
 * scaler says so (loss_scaler_step's `clamped`), and the plugin logs it. */
#ifndef PRECISION_FP16_LOSS_SCALER_H
#define PRECISION_FP16_LOSS_SCALER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct loss_scaler {
    float scale;              /* current loss scale, in [FLT_MIN, FLT_MAX] */
    int64_t tracker;          /* clean steps since the scale last changed, < growth_interval */
    int64_t skipped;          /* overflowing (skipped) steps, in total */
    double growth_factor;     /* > 1 */
    double backoff_factor;    /* in (0, 1) */
    int64_t growth_interval;  /* >= 1 */
    bool clamp_reported;      /* the underflow clamp was already reported */
} loss_scaler;

/* A scaler at init_scale (rounded to float and clamped to [FLT_MIN, FLT_MAX]). */
void loss_scaler_init(loss_scaler *s, double init_scale, double growth_factor,
                      double backoff_factor, int64_t growth_interval);

/* Move the scale after a step. Returns whether the step must be skipped
 * (= found_inf). *clamped (may be NULL) is set true only on the first step
 * whose backoff had to be clamped at FLT_MIN. */
bool loss_scaler_step(loss_scaler *s, bool found_inf, bool *clamped);

/* Restore a checkpointed state. A scale that is not a positive finite number
 * is ignored (the current scale stays); a positive one is clamped to
 * [FLT_MIN, FLT_MAX]; the tracker is clamped to [0, growth_interval - 1] so
 * a smaller growth_interval than the checkpoint's still grows;
 * negative counts become 0. Returns false when the scale was ignored. */
bool loss_scaler_restore(loss_scaler *s, double scale, int64_t tracker, int64_t skipped);

/* 1/scale as torch computes it: in double, rounded to float. Finite for
 * every scale the scaler can hold. */
float loss_scaler_inverse(const loss_scaler *s);

#endif
