/* bert_rng.c — the plugin's own random numbers: a counter-based generator
 * (splitmix64 outputs indexed by position) and Box-Muller normals, so a
 * tensor's initial values depend only on (seed, tensor name, element index),
 * not on the order tensors are visited or on the flat layout. */
#include <math.h>
#include <stdint.h>

#include "bert.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t bert_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t bert_hash_name(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return bert_mix64(h ^ bert_mix64(seed + GOLDEN));
}

/* The c-th output of splitmix64 started at `key`. */
static uint64_t stream_at(uint64_t key, uint64_t c) { return bert_mix64(key + (c + 1) * GOLDEN); }

double bert_normal(uint64_t key, uint64_t i)
{
    uint64_t pair = i >> 1;
    /* u1 in (0, 1] (log defined), u2 in [0, 1), 53 bits each */
    double u1 = (double)((stream_at(key, 2 * pair) >> 11) + 1) * 0x1.0p-53;
    double u2 = (double)(stream_at(key, 2 * pair + 1) >> 11) * 0x1.0p-53;
    double r = sqrt(-2.0 * log(u1));
    double t = 2.0 * M_PI * u2;
    return (i & 1) ? r * sin(t) : r * cos(t);
}
