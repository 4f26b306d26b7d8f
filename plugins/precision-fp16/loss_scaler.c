/* loss_scaler.c — GradScaler's dynamic loss scale (see loss_scaler.h). */
#include "loss_scaler.h"

#include <float.h>
#include <math.h>

/* A float in [FLT_MIN, FLT_MAX] from a positive double (inf -> FLT_MAX). */
static float clamp_scale(double v)
{
    if (v < (double)FLT_MIN) return FLT_MIN;
    if (v > (double)FLT_MAX) return FLT_MAX;
    float f = (float)v;
    return f < FLT_MIN ? FLT_MIN : f; /* rounding can land just below */
}

void loss_scaler_init(loss_scaler *s, double init_scale, double growth_factor,
                      double backoff_factor, int64_t growth_interval)
{
    s->scale = clamp_scale(init_scale);
    s->tracker = 0;
    s->skipped = 0;
    s->growth_factor = growth_factor;
    s->backoff_factor = backoff_factor;
    s->growth_interval = growth_interval;
    s->clamp_reported = false;
}

bool loss_scaler_step(loss_scaler *s, bool found_inf, bool *clamped)
{
    if (clamped) *clamped = false;
    if (found_inf) {
        float next = (float)((double)s->scale * s->backoff_factor);
        if (next < FLT_MIN) { /* would be subnormal or 0: 1/scale would stop being finite soon */
            next = FLT_MIN;
            if (!s->clamp_reported) {
                s->clamp_reported = true;
                if (clamped) *clamped = true;
            }
        }
        s->scale = next;
        s->tracker = 0;
        s->skipped++;
        return true;
    }
    int64_t successful = s->tracker + 1;
    if (successful >= s->growth_interval) {
        float grown = (float)((double)s->scale * s->growth_factor);
        if (isfinite(grown)) s->scale = grown; /* never grow past fp32's range to inf */
        s->tracker = 0;
    } else {
        s->tracker = successful;
    }
    return false;
}

bool loss_scaler_restore(loss_scaler *s, double scale, int64_t tracker, int64_t skipped)
{
    bool ok = isfinite(scale) && scale > 0;
    if (ok) s->scale = clamp_scale(scale);
    if (tracker < 0) tracker = 0;
    if (tracker > s->growth_interval - 1) tracker = s->growth_interval - 1;
    s->tracker = tracker;
    s->skipped = skipped < 0 ? 0 : skipped;
    return ok;
}

float loss_scaler_inverse(const loss_scaler *s) { return (float)(1.0 / (double)s->scale); }
