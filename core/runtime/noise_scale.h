/* noise_scale.h — the gradient noise scale and Pollux's statistical
 * efficiency (pure arithmetic; the trainer's measurements are in
 * trainer_noise_scale.c, the definitions in docs/PARALLEL.md).
 *
 * McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training",
 * appendix A): a gradient averaged over B samples drawn independently has
 *     E |g_B|^2 = |G|^2 + tr(Sigma) / B
 * with G the true gradient and Sigma the per-sample covariance. Two squared
 * norms of the same step at batch sizes b_small < b_big give unbiased
 * estimates of both:
 *     |G|^2     ~ (b_big |g_big|^2 - b_small |g_small|^2) / (b_big - b_small)
 *     tr(Sigma) ~ (|g_small|^2 - |g_big|^2) / (1/b_small - 1/b_big)
 * Each step's estimates are noisy (either may come out negative), so they are
 * smoothed separately by an exponential moving average (Pollux does the same)
 * and the noise scale is their ratio phi = tr(Sigma) / |G|^2 (McCandlish's
 * B_simple, in samples).
 *
 * Pollux (Qiao et al., OSDI 2021) calls the progress a sample makes at global
 * batch M, relative to a reference batch M0, the statistical efficiency
 *     E(M) = (phi + M0) / (phi + M)
 * (1 at M = M0, falling towards M0 / M once M grows past phi), and
 * goodput = throughput x E(M). */
#ifndef TFCORE_NOISE_SCALE_H
#define TFCORE_NOISE_SCALE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tf_noise_scale {
    double beta;          /* the averages' smoothing per estimated step, in [0, 1) */
    double g2, trace;     /* the averages of the steps' |G|^2 and tr(Sigma) estimates (not bias-corrected) */
    double weight;        /* 1 - beta^steps: what the averages are divided by (bias correction) */
    int64_t steps;        /* steps that gave an estimate */
    double b_small, b_big; /* the batch sizes of the latest estimate */
} tf_noise_scale;

void tf_noise_scale_init(tf_noise_scale *n, double beta);

/* One step's unbiased estimates from |g_small|^2 at b_small samples and
 * |g_big|^2 at b_big samples (b_big > b_small > 0). */
void tf_noise_scale_step_estimates(double small_sq, double b_small, double big_sq, double b_big, double *g2,
                                   double *trace);

/* Fold one step in. small_sq may be the mean of several small batches' squared
 * norms (the ranks'); b_small is then their harmonic mean (the mean of 1/b is
 * what E|g|^2 averages). False, and nothing added, when the pair cannot give
 * an estimate (b_big <= b_small, b_small <= 0, a value not finite). */
bool tf_noise_scale_add(tf_noise_scale *n, double small_sq, double b_small, double big_sq, double b_big);

/* The smoothed |G|^2 and tr(Sigma) (bias-corrected); NAN before any step. */
double tf_noise_scale_g2(const tf_noise_scale *n);
double tf_noise_scale_trace(const tf_noise_scale *n);

/* phi = tr(Sigma) / |G|^2 in samples. NAN when there is no estimate or the
 * smoothed |G|^2 is not positive (the noise drowns the signal: more steps
 * are needed); a negative smoothed tr(Sigma) (a covariance's trace cannot be
 * negative: that is noise in the estimate) counts as 0. */
double tf_noise_scale_phi(const tf_noise_scale *n);

/* Pollux's E(M) = (phi + m0) / (phi + m); NAN when phi is NAN. */
double tf_statistical_efficiency(double phi, double m0, double m);

#endif
