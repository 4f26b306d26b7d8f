/* cpu_math.h — branch-free float exp, tanh, normal CDF and GELU that the
 * compiler vectorizes inside `#pragma omp simd` loops (libm's expf/erff are
 * calls it cannot vectorize without -ffast-math).
 *
 * Accuracy (measured by tests/backend-cpu/test_elementwise.c against double libm over
 * dense grids): exp, tanh, Phi within a few ulp, relative, over the whole
 * range where the result is a normal float. Phi(x) = P(N(0,1) <= x) is
 * accurate relative to its value even far in the left tail, so
 * gelu(x) = x * Phi(x) keeps its precision for negative x, where
 * 0.5 * (1 + erf(x / sqrt 2)) in float would cancel.
 *
 * The polynomial coefficients were fitted for this file by weighted least
 * squares on Chebyshev nodes against 40-digit mpmath values.
 */
#ifndef TF_BACKEND_CPU_MATH_H
#define TF_BACKEND_CPU_MATH_H

#include <stdint.h>

/* Always inlined: a call inside a `#pragma omp simd` loop stops it from
 * vectorizing, and GCC's inliner gives up on these inside target clones. */
#if defined(__GNUC__)
#define CPU_MATH_FN static inline __attribute__((always_inline))
#else
#define CPU_MATH_FN static inline
#endif

CPU_MATH_FN float cpu_bits_to_float(int32_t i)
{
    union {
        int32_t i;
        float f;
    } u = {.i = i};
    return u.f;
}

/* e^x. Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-7 Taylor
 * polynomial (truncation error < 1e-8 relative), then 2^n applied in two
 * halves so results down in the subnormal range come out right. NaN in,
 * NaN out; x > 88.73 gives +inf, x < -104 gives 0. */
CPU_MATH_FN float cpu_expf(float x)
{
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    float t = x * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest integer */
    float r = x - n * 0.693359375f;           /* ln2 split: hi has 9 bits, n*hi exact */
    r = r + n * 2.12194440e-4f;               /* - n * (ln2 - hi) */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* NaN in, NaN out through p; n becomes 0 so the int conversion and the
     * exponent shifts below stay defined (a select, so loops still vectorize) */
    int32_t ni = (int32_t)(n == n ? n : 0.0f);
    int32_t n1 = ni >> 1, n2 = ni - n1; /* each in [-75, 64]: 2^n1, 2^n2 are normal */
    return p * cpu_bits_to_float((uint32_t)(n1 + 127) << 23) * cpu_bits_to_float((uint32_t)(n2 + 127) << 23);
}

/* e^(-x*x/2) with x*x = hi + lo carried in two floats (Dekker's exact
 * product over a Veltkamp split of x), so the rounding of x*x does not cost
 * up to x*x/2 ulps of the result: e^(-hi/2) * (1 - lo/2), |lo| <= ulp(hi)/2. */
CPU_MATH_FN float cpu_exp_neg_half_sq(float x)
{
    float ax = x < 0.0f ? -x : x;
    ax = ax > 15.0f ? 15.0f : ax; /* e^-112.5 is 0 in float; keeps 4097*x finite */
    float c = ax * 4097.0f;
    float xh = c - (c - ax); /* the top 12 bits of ax */
    float xl = ax - xh;      /* the rest, also <= 12 bits */
    float hi = ax * ax;
    float lo = ((xh * xh - hi) + 2.0f * xh * xl) + xl * xl; /* each step exact */
    return cpu_expf(-0.5f * hi) * (1.0f - 0.5f * lo);
}

/* tanh x: an odd polynomial for |x| < 0.625, else 1 - 2/(e^2|x| + 1). */
CPU_MATH_FN float cpu_tanhf(float x)
{
    float ax = x < 0.0f ? -x : x;
    float u = x * x;
    float p = -5.697522352e-03f;
    p = p * u + 2.063030701e-02f;
    p = p * u - 5.373586514e-02f;
    p = p * u + 1.333136559e-01f;
    p = p * u - 3.333327535e-01f;
    p = p * u + 1.0f;
    float small = x * p;
    float e = cpu_expf(2.0f * (ax > 44.0f ? 44.0f : ax));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0.0f ? -big : big;
    return ax < 0.625f ? small : (x != x ? x : big);
}

/* The standard normal CDF Phi(x) = 0.5 * erfc(-x / sqrt 2), for the exact
 * GELU. With z = x / sqrt 2:
 *   |z| < 0.5:  Phi = 0.5 + 0.5 * z * A(z^2)          (A: erf(z)/z)
 *   |z| >= 0.5: erfc(|z|) = e^(-z^2) * B(t), t = 1/(1 + |z|/2)
 *             Phi = 0.5 * erfc(|z|) (x < 0) or 1 - 0.5 * erfc(|z|) (x > 0). */
/* Phi(x) given e = e^(-x^2/2) (from cpu_exp_neg_half_sq(x)), so that GELU's
 * gradient, which needs the density too, computes the exponential once. */
CPU_MATH_FN float cpu_normal_cdf_e(float x, float e)
{
    float z = x * 0.70710678118654752f;
    float u = z * z;
    float a = 4.728139993e-03f;
    a = a * u - 2.676265949e-02f;
    a = a * u + 1.128291895e-01f;
    a = a * u - 3.761261450e-01f;
    a = a * u + 1.128379166e+00f;
    float central = 0.5f + 0.5f * (z * a);
    float ax = x < 0.0f ? -x : x;
    /* the tail fit covers |z| in [0.5, 10.5]; beyond 10.5, erfc(z)/2 underflows */
    float xc = ax > 14.849242f ? 14.849242f : ax;
    xc = xc < 0.70710678f ? 0.70710678f : xc;
    float t = 1.0f / (1.0f + 0.5f * (xc * 0.70710678118654752f));
    float b = -9.532275518e-03f;
    b = b * t - 3.077193641e-02f;
    b = b * t + 2.636250024e-01f;
    b = b * t - 5.095543211e-01f;
    b = b * t + 3.315787067e-01f;
    b = b * t - 7.146127975e-02f;
    b = b * t + 2.233570681e-01f;
    b = b * t + 2.374520204e-01f;
    b = b * t + 2.832798372e-01f;
    b = b * t + 2.820088930e-01f;
    b = b * t + 2.717443305e-06f;
    float half_erfc = 0.5f * (e * b); /* e^(-x^2/2) = e^(-z^2); unused where |x| < 0.707 */
    half_erfc = ax > 14.849242f ? 0.0f : half_erfc;
    float tail = x < 0.0f ? half_erfc : 1.0f - half_erfc;
    return ax < 0.70710678f ? central : (x != x ? x : tail);
}

CPU_MATH_FN float cpu_normal_cdf(float x) { return cpu_normal_cdf_e(x, cpu_exp_neg_half_sq(x)); }

/* The standard normal density phi(x) = e^(-x^2/2) / sqrt(2 pi). */
CPU_MATH_FN float cpu_normal_pdf(float x)
{
    return 0.398942280401432678f * cpu_exp_neg_half_sq(x);
}

/* GELU, exact form (hidden_act "gelu"): x * Phi(x). */
CPU_MATH_FN float cpu_gelu_erf(float x) { return x * cpu_normal_cdf(x); }

/* d gelu / dx = Phi(x) + x phi(x). */
CPU_MATH_FN float cpu_gelu_erf_grad(float x)
{
    float e = cpu_exp_neg_half_sq(x);
    return cpu_normal_cdf_e(x, e) + x * (0.398942280401432678f * e);
}

/* GELU, tanh form (hidden_act "gelu_new", "gelu_pytorch_tanh"):
 *   0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 * written as x * sigmoid(2u) = x / (1 + e^(-2u)), the same function without
 * the cancellation of 1 + tanh(u) for negative u. */
#define CPU_GELU_TANH_BETA 0.797884560802865356f /* sqrt(2/pi) */
#define CPU_GELU_TANH_KAPPA 0.044715f

CPU_MATH_FN float cpu_gelu_tanh(float x)
{
    float u = CPU_GELU_TANH_BETA * (x + CPU_GELU_TANH_KAPPA * (x * x * x));
    float au = u < 0.0f ? -u : u;
    float e = cpu_expf(-2.0f * au); /* in (0, 1]: no overflow either side */
    float s = (u < 0.0f ? e : 1.0f) / (1.0f + e);
    return x * s;
}

/* d/dx [x s], s = sigmoid(2u): s + x * 2 s (1 - s) * du/dx,
 * du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2); s (1 - s) = e / (1 + e)^2 with
 * e = e^(-2|u|), which is symmetric in u. */
CPU_MATH_FN float cpu_gelu_tanh_grad(float x)
{
    float x2 = x * x;
    float u = CPU_GELU_TANH_BETA * (x + CPU_GELU_TANH_KAPPA * (x2 * x));
    float au = u < 0.0f ? -u : u;
    float e = cpu_expf(-2.0f * au);
    float r = 1.0f / (1.0f + e);
    float s = (u < 0.0f ? e : 1.0f) * r;
    float du = CPU_GELU_TANH_BETA * (1.0f + 3.0f * CPU_GELU_TANH_KAPPA * x2);
    return s + x * (2.0f * (e * r * r) * du);
}

#endif
