/* test_noise_scale.c — the gradient noise scale estimator and Pollux's
 * statistical efficiency (core/runtime/noise_scale.h) against known answers:
 * exact expectations give back |G|^2 and tr(Sigma) exactly, and synthetic
 * per-sample gradients drawn from N(G, Sigma) with known |G|^2 and
 * tr(Sigma), averaged into small batches (the ranks') and their big batch
 * (the all-reduce's), give them back within five standard errors of the
 * smoothed average. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "noise_scale.h"

#define NEAR(a, b, tol) \
    ck_assert_msg(fabs((a) - (b)) <= (tol), "%.17g != %.17g (tolerance %.3g)", (double)(a), (double)(b), (double)(tol))

START_TEST(test_exact_expectations)
{
    /* E|g_B|^2 = |G|^2 + tr/B, fed in exactly: the estimates are exact */
    double G2 = 3.5, T = 70.0, g2, tr;
    tf_noise_scale_step_estimates(G2 + T / 4, 4, G2 + T / 32, 32, &g2, &tr);
    NEAR(g2, G2, 1e-12);
    NEAR(tr, T, 1e-10);
    tf_noise_scale n;
    tf_noise_scale_init(&n, 0.9);
    ck_assert(isnan(tf_noise_scale_phi(&n)));
    ck_assert(isnan(tf_noise_scale_g2(&n)));
    for (int i = 0; i < 3; i++) ck_assert(tf_noise_scale_add(&n, G2 + T / 4, 4, G2 + T / 32, 32));
    /* bias-corrected: three equal steps average to the step's value */
    NEAR(tf_noise_scale_g2(&n), G2, 1e-12);
    NEAR(tf_noise_scale_trace(&n), T, 1e-10);
    NEAR(tf_noise_scale_phi(&n), 20.0, 1e-12);
    ck_assert_int_eq(n.steps, 3);
    /* pairs that cannot give an estimate are refused and change nothing */
    ck_assert(!tf_noise_scale_add(&n, 1, 8, 1, 8));
    ck_assert(!tf_noise_scale_add(&n, 1, 0, 1, 8));
    ck_assert(!tf_noise_scale_add(&n, NAN, 4, 1, 8));
    ck_assert(!tf_noise_scale_add(&n, 1, 4, INFINITY, 8));
    ck_assert_int_eq(n.steps, 3);
}
END_TEST

START_TEST(test_phi_edges)
{
    tf_noise_scale n;
    tf_noise_scale_init(&n, 0.0);
    /* small batch quieter than the big one: tr < 0 is noise, phi = 0 */
    ck_assert(tf_noise_scale_add(&n, 1.0, 4, 2.0, 16));
    ck_assert(tf_noise_scale_trace(&n) < 0);
    NEAR(tf_noise_scale_phi(&n), 0.0, 0);
    /* |G|^2 estimate not positive: no noise scale */
    tf_noise_scale_init(&n, 0.0);
    ck_assert(tf_noise_scale_add(&n, 10.0, 4, 0.5, 16));
    ck_assert(tf_noise_scale_g2(&n) <= 0);
    ck_assert(isnan(tf_noise_scale_phi(&n)));
}
END_TEST

START_TEST(test_efficiency)
{
    NEAR(tf_statistical_efficiency(30, 16, 16), 1.0, 1e-15);   /* at the reference batch */
    NEAR(tf_statistical_efficiency(48, 16, 64), 64.0 / 112.0, 1e-15);
    NEAR(tf_statistical_efficiency(0, 16, 64), 0.25, 1e-15);   /* no noise: M0 / M, pure waste */
    NEAR(tf_statistical_efficiency(1e12, 16, 64), 1.0, 1e-9);  /* all noise: every sample counts */
    ck_assert(tf_statistical_efficiency(10, 8, 16) > tf_statistical_efficiency(10, 8, 32)); /* falls with M */
    ck_assert(isnan(tf_statistical_efficiency(NAN, 8, 16)));
}
END_TEST

/* --- synthetic gradients ---------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) /* (0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform()); }

#define D 48 /* gradient dimensions */

/* steps of W ranks holding rows[r] samples each: per sample a gradient G +
 * N(0, diag(sd^2)); rank r's gradient the mean of its rows, the big one the
 * mean of all of them. Checks the smoothed estimates within 5 standard
 * errors (the steps' estimates' standard deviation times the average's
 * sqrt((1 - beta) / (1 + beta)) for independent steps). The small batches
 * are the first nsmall ranks' (all of them for DDP, the first micro-batch of
 * an accumulation on one worker). */
static void synthetic(const int *rows, int W, int nsmall, int steps, double beta)
{
    double G[D], sd[D], G2 = 0, T = 0;
    for (int i = 0; i < D; i++) {
        G[i] = (i % 2 ? 0.5 : -0.5) * (1 + (i % 3));
        sd[i] = 0.5 + 0.5 * (i % 5);
        G2 += G[i] * G[i];
        T += sd[i] * sd[i];
    }
    int B = 0;
    double inv = 0;
    for (int r = 0; r < W; r++) B += rows[r];
    for (int r = 0; r < nsmall; r++) inv += 1.0 / rows[r];
    double b_small = nsmall / inv; /* the harmonic mean of the ranks' batches */
    tf_noise_scale n;
    tf_noise_scale_init(&n, beta);
    double s_g = 0, s_gg = 0, s_t = 0, s_tt = 0; /* the per-step estimates' moments */
    for (int k = 0; k < steps; k++) {
        double big[D] = {0}, small_sq = 0;
        for (int r = 0; r < W; r++) {
            double g[D] = {0};
            for (int j = 0; j < rows[r]; j++)
                for (int i = 0; i < D; i++) {
                    double x = G[i] + sd[i] * normal();
                    g[i] += x;
                    big[i] += x;
                }
            double sq = 0;
            for (int i = 0; i < D; i++) sq += (g[i] / rows[r]) * (g[i] / rows[r]);
            if (r < nsmall) small_sq += sq / nsmall;
        }
        double big_sq = 0;
        for (int i = 0; i < D; i++) big_sq += (big[i] / B) * (big[i] / B);
        double g2, tr;
        tf_noise_scale_step_estimates(small_sq, b_small, big_sq, B, &g2, &tr);
        s_g += g2;
        s_gg += g2 * g2;
        s_t += tr;
        s_tt += tr * tr;
        ck_assert(tf_noise_scale_add(&n, small_sq, b_small, big_sq, B));
    }
    double sd_g = sqrt(s_gg / steps - (s_g / steps) * (s_g / steps));
    double sd_t = sqrt(s_tt / steps - (s_t / steps) * (s_t / steps));
    double f = sqrt((1 - beta) / (1 + beta));
    double se_g = sd_g * f, se_t = sd_t * f;
    NEAR(tf_noise_scale_g2(&n), G2, 5 * se_g);
    NEAR(tf_noise_scale_trace(&n), T, 5 * se_t);
    /* the plain means of the steps' estimates, tighter still */
    NEAR(s_g / steps, G2, 5 * sd_g / sqrt(steps));
    NEAR(s_t / steps, T, 5 * sd_t / sqrt(steps));
    /* phi within the two relative errors */
    double phi = T / G2;
    NEAR(tf_noise_scale_phi(&n), phi, phi * 5 * (se_g / G2 + se_t / T));
}

START_TEST(test_synthetic_equal_ranks)
{
    const int rows[4] = {4, 4, 4, 4};
    synthetic(rows, 4, 4, 20000, 0.999);
}
END_TEST

START_TEST(test_synthetic_unequal_ranks)
{
    /* a short last shard: the ranks' batch sizes enter as their harmonic mean */
    const int rows[4] = {2, 6, 4, 4};
    synthetic(rows, 4, 4, 20000, 0.999);
}
END_TEST

START_TEST(test_synthetic_micro_batch)
{
    /* one worker, accumulation 4: the first micro-batch (4 rows) is the small batch of a 16-row step */
    const int rows[4] = {4, 4, 4, 4};
    synthetic(rows, 4, 1, 20000, 0.999);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("noise_scale");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_exact_expectations);
    tcase_add_test(tc, test_phi_edges);
    tcase_add_test(tc, test_efficiency);
    tcase_add_test(tc, test_synthetic_equal_ranks);
    tcase_add_test(tc, test_synthetic_unequal_ranks);
    tcase_add_test(tc, test_synthetic_micro_batch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
