/* tfcore/rng.h — the random numbers every part of tfcore shares.
 *
 * Counter-based: a stream is (seed, stream id) and the n-th draw is a pure
 * function of (seed, stream, n), so results do not depend on thread counts,
 * shard layout or call order. The mixing function is SplitMix64's finalizer. */
#ifndef TFCORE_RNG_H
#define TFCORE_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_rng {
    uint64_t key;     /* from (seed, stream) */
    uint64_t counter; /* draws so far */
} tf_rng;

/* SplitMix64's finalizer: a bijective 64-bit mix. */
uint64_t tf_mix64(uint64_t x);

tf_rng tf_rng_init(uint64_t seed, uint64_t stream);
uint64_t tf_rng_u64(tf_rng *r);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t tf_rng_below(tf_rng *r, uint64_t n);
/* Uniform in [0, 1) with 53 random bits. */
double tf_rng_uniform(tf_rng *r);
/* Standard normal (Box-Muller, one value per two uniforms). */
double tf_rng_normal(tf_rng *r);

#ifdef __cplusplus
}
#endif
#endif
