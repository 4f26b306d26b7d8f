/* sampler.c — per-epoch seeded permutation, sharded by rank (see sampler.h). */
#include <stdlib.h>

#include "sampler.h"
#include "tfcore/rng.h"

tf_status tf_sampler_init(tf_sampler *s, size_t rows, int rank, int world, uint64_t seed,
                          int shuffle, tf_error *err)
{
    if (world < 1 || rank < 0 || rank >= world)
        return tf_error_set(err, TF_ERR_RUNTIME, "sampler: rank %d of world %d", rank, world);
    if (rows == 0) return tf_error_set(err, TF_ERR_DATA, "the split has no rows to sample");
    s->rows = rows;
    s->rank = rank;
    s->world = world;
    s->seed = seed;
    s->shuffle = shuffle;
    s->padded = (rows + (size_t)world - 1) / (size_t)world * (size_t)world;
    s->epoch = -1;
    s->perm = malloc(s->padded * sizeof *s->perm);
    if (!s->perm) return tf_error_set(err, TF_ERR_RUNTIME, "sampler: out of memory for %zu rows", rows);
    return TF_OK;
}

void tf_sampler_free(tf_sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}

size_t tf_sampler_rank_rows(const tf_sampler *s) { return s->padded / (size_t)s->world; }

void tf_sampler_set_epoch(tf_sampler *s, int64_t epoch)
{
    if (s->epoch == epoch) return;
    s->epoch = epoch;
    for (size_t i = 0; i < s->rows; i++) s->perm[i] = i;
    if (s->shuffle) {
        /* Fisher-Yates with a counter-based stream of (seed, epoch) */
        tf_rng r = tf_rng_init(s->seed, (uint64_t)epoch);
        for (size_t i = s->rows - 1; i > 0; i--) {
            size_t j = (size_t)tf_rng_below(&r, (uint64_t)i + 1);
            size_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    /* pad by wrapping around, as DistributedSampler does */
    for (size_t i = s->rows; i < s->padded; i++) s->perm[i] = s->perm[i - s->rows];
}

void tf_sampler_rows(const tf_sampler *s, size_t first, size_t n, size_t *out)
{
    for (size_t i = 0; i < n; i++) out[i] = s->perm[(first + i) * (size_t)s->world + (size_t)s->rank];
}

size_t tf_sampler_position(const tf_sampler *s, size_t first)
{
    return first * (size_t)s->world + (size_t)s->rank;
}
