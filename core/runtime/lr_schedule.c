/* lr_schedule.c — transformers' schedule lambdas, term for term, so the
 * learning rates tfcore logs equal the Trainer's. */
#include <math.h>

#include "lr_schedule.h"

static double max1(int64_t v) { return v > 1 ? (double)v : 1.0; }

double tf_lr_at(const tf_lr_schedule *s, int64_t step)
{
    int64_t w = s->warmup_steps, t = s->total_steps;
    double f;
    switch (s->kind) {
    case TF_LR_CONSTANT: /* no warmup, as transformers' get_constant_schedule */
        f = 1.0;
        break;
    case TF_LR_CONSTANT_WITH_WARMUP:
        f = step < w ? (double)step / max1(w) : 1.0;
        break;
    case TF_LR_COSINE:
        if (step < w) {
            f = (double)step / max1(w);
        } else {
            double progress = (double)(step - w) / max1(t - w);
            f = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress)); /* num_cycles = 0.5 */
            if (f < 0) f = 0;
        }
        break;
    case TF_LR_LINEAR:
    default:
        if (step < w) {
            f = (double)step / max1(w);
        } else {
            f = (double)(t - step) / max1(t - w);
            if (f < 0) f = 0;
        }
        break;
    }
    return s->base_lr * f;
}
