/* random.c — Philox4x32-10 and the dropout keep-mask recipe described in
 * cpu_random.h. */
#include <math.h>

#include "cpu.h"
#include "cpu_random.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* key schedule: golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

/* One round on (x0, x1, x2, x3) with key (k0, k1). */
#define PHILOX_ROUND(x0, x1, x2, x3, k0, k1)                                \
    do {                                                                    \
        uint64_t p0_ = (uint64_t)PHILOX_M0 * (x0);                          \
        uint64_t p1_ = (uint64_t)PHILOX_M1 * (x2);                          \
        uint32_t y0_ = (uint32_t)(p1_ >> 32) ^ (x1) ^ (k0);                 \
        uint32_t y2_ = (uint32_t)(p0_ >> 32) ^ (x3) ^ (k1);                 \
        (x1) = (uint32_t)p1_;                                               \
        (x3) = (uint32_t)p0_;                                               \
        (x0) = y0_;                                                         \
        (x2) = y2_;                                                         \
    } while (0)

/* Ten rounds, the key bumped by (W0, W1) between rounds; written out so the
 * compiler can vectorize a loop over counters. */
#define PHILOX_10(x0, x1, x2, x3, k0, k1)                                   \
    do {                                                                    \
        PHILOX_ROUND(x0, x1, x2, x3, (k0), (k1));                           \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 1u * PHILOX_W0, (k1) + 1u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 2u * PHILOX_W0, (k1) + 2u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 3u * PHILOX_W0, (k1) + 3u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 4u * PHILOX_W0, (k1) + 4u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 5u * PHILOX_W0, (k1) + 5u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 6u * PHILOX_W0, (k1) + 6u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 7u * PHILOX_W0, (k1) + 7u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 8u * PHILOX_W0, (k1) + 8u * PHILOX_W1); \
        PHILOX_ROUND(x0, x1, x2, x3, (k0) + 9u * PHILOX_W0, (k1) + 9u * PHILOX_W1); \
    } while (0)

void cpu_philox4x32_10(uint32_t ctr[4], const uint32_t key[2])
{
    uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3];
    PHILOX_10(x0, x1, x2, x3, key[0], key[1]);
    ctr[0] = x0;
    ctr[1] = x1;
    ctr[2] = x2;
    ctr[3] = x3;
}

/* keep bytes for whole counters c0 .. c0+nblocks-1, 4 per counter. */
CPU_CLONES
static void mask_blocks(uint64_t c0, size_t nblocks, uint32_t k0, uint32_t k1, uint32_t o0,
                        uint32_t o1, uint32_t thr, uint8_t *keep)
{
#pragma omp simd
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t c = c0 + i;
        uint32_t x0 = (uint32_t)c, x1 = (uint32_t)(c >> 32), x2 = o0, x3 = o1;
        PHILOX_10(x0, x1, x2, x3, k0, k1);
        keep[4 * i + 0] = (uint8_t)((x0 >> 8) >= thr);
        keep[4 * i + 1] = (uint8_t)((x1 >> 8) >= thr);
        keep[4 * i + 2] = (uint8_t)((x2 >> 8) >= thr);
        keep[4 * i + 3] = (uint8_t)((x3 >> 8) >= thr);
    }
}

void cpu_dropout_mask(uint64_t seed, uint64_t offset, uint64_t first, size_t n, float p,
                      uint8_t *keep)
{
    if (n == 0) return;
    /* (w >> 8) is uniform on [0, 2^24): keep when it is >= p * 2^24 (exact in float) */
    float t = ceilf(p * 16777216.0f);
    uint32_t thr = t <= 0.0f ? 0u : t >= 16777216.0f ? 16777216u : (uint32_t)t;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t o0 = (uint32_t)offset, o1 = (uint32_t)(offset >> 32);
    uint64_t i = first, end = first + n;
    /* a partial counter at either end goes through a 4-word buffer */
    while (i < end && (i % 4 != 0 || end - i < 4)) {
        uint64_t c = i / 4;
        uint8_t four[4];
        mask_blocks(c, 1, k0, k1, o0, o1, thr, four);
        for (; i < end && i / 4 == c; i++) keep[i - first] = four[i % 4];
    }
    if (i < end) {
        size_t whole = (size_t)((end - i) / 4);
        mask_blocks(i / 4, whole, k0, k1, o0, o1, thr, keep + (i - first));
        i += 4 * (uint64_t)whole;
        while (i < end) {
            uint64_t c = i / 4;
            uint8_t four[4];
            mask_blocks(c, 1, k0, k1, o0, o1, thr, four);
            for (; i < end && i / 4 == c; i++) keep[i - first] = four[i % 4];
        }
    }
}
