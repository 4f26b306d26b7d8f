/* rng.c — counter-based random numbers (see tfcore/rng.h). */
#include <math.h>

#include "tfcore/rng.h"

uint64_t tf_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

tf_rng tf_rng_init(uint64_t seed, uint64_t stream)
{
    tf_rng r = {tf_mix64(seed ^ tf_mix64(stream + 0x5851f42d4c957f2dull)), 0};
    return r;
}

uint64_t tf_rng_u64(tf_rng *r) { return tf_mix64(r->key + 0x9e3779b97f4a7c15ull * ++r->counter); }

uint64_t tf_rng_below(tf_rng *r, uint64_t n)
{
    /* reject the top partial range so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do v = tf_rng_u64(r);
    while (v >= limit);
    return v % n;
}

double tf_rng_uniform(tf_rng *r) { return (double)(tf_rng_u64(r) >> 11) * 0x1.0p-53; }

double tf_rng_normal(tf_rng *r)
{
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
