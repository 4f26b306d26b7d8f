/* noise_scale.c — gradient noise scale estimates and statistical efficiency
 * (noise_scale.h). */
#include <math.h>

#include "noise_scale.h"

void tf_noise_scale_init(tf_noise_scale *n, double beta)
{
    *n = (tf_noise_scale){.beta = beta, .g2 = 0, .trace = 0, .weight = 0, .steps = 0};
}

void tf_noise_scale_step_estimates(double small_sq, double b_small, double big_sq, double b_big, double *g2,
                                   double *trace)
{
    *g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
    *trace = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big);
}

bool tf_noise_scale_add(tf_noise_scale *n, double small_sq, double b_small, double big_sq, double b_big)
{
    if (!(b_small > 0) || !(b_big > b_small) || !isfinite(small_sq) || !isfinite(big_sq) || !isfinite(b_big))
        return false;
    double g2, trace;
    tf_noise_scale_step_estimates(small_sq, b_small, big_sq, b_big, &g2, &trace);
    if (!isfinite(g2) || !isfinite(trace)) return false;
    n->g2 = n->beta * n->g2 + (1 - n->beta) * g2;
    n->trace = n->beta * n->trace + (1 - n->beta) * trace;
    n->weight = n->beta * n->weight + (1 - n->beta);
    n->steps++;
    n->b_small = b_small;
    n->b_big = b_big;
    return true;
}

double tf_noise_scale_g2(const tf_noise_scale *n) { return n->steps ? n->g2 / n->weight : NAN; }

double tf_noise_scale_trace(const tf_noise_scale *n) { return n->steps ? n->trace / n->weight : NAN; }

double tf_noise_scale_phi(const tf_noise_scale *n)
{
    if (!n->steps || !(n->g2 > 0)) return NAN;
    /* the bias corrections are the same divisor: they cancel in the ratio */
    return n->trace > 0 ? n->trace / n->g2 : 0.0;
}

double tf_statistical_efficiency(double phi, double m0, double m)
{
    if (isnan(phi)) return NAN;
    return (phi + m0) / (phi + m);
}
