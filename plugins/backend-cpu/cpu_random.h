/* cpu_random.h — backend-cpu's counter-based random numbers for dropout.
 *
 * The generator is Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel
 * Random Numbers: As Easy as 1, 2, 3", SC'11): a keyed bijection of a
 * 128-bit counter, 10 rounds, 4 uniform 32-bit words out per counter.
 *
 * Dropout stream (seed, offset), element index i. The ops call it once per
 * row of their tensor with offset = the op's offset + the row's global index
 * and i the element's index within the row (tfcore/backend.h "Dropout
 * masks"; for attention, i = (h * 2^16 + query) * 2^16 + key):
 *   key     = { seed & 0xffffffff, seed >> 32 }
 *   counter = { (i/4) & 0xffffffff, (i/4) >> 32, offset & 0xffffffff, offset >> 32 }
 *   w       = word (i % 4) of Philox4x32-10(counter, key)
 *   keep[i] = (w >> 8) >= ceil(p * 2^24)     i.e. u = (w >> 8) / 2^24 >= p
 * So the mask is a pure function of (seed, offset, i): the same on any
 * number of threads, and any backend implementing this recipe draws the same
 * mask. Distinct offsets give independent streams of 2^66 elements each. */
#ifndef TF_BACKEND_CPU_RANDOM_H
#define TF_BACKEND_CPU_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* ctr <- Philox4x32-10(ctr, key). */
void cpu_philox4x32_10(uint32_t ctr[4], const uint32_t key[2]);

/* keep[j] for elements i = first + j, j < n, of stream (seed, offset) with
 * drop probability p (0 keeps all, 1 drops all). */
void cpu_dropout_mask(uint64_t seed, uint64_t offset, uint64_t first, size_t n, float p,
                      uint8_t *keep);

#endif
