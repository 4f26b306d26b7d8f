/* sampler.h — which rows each worker trains on, step by step.
 *
 * Like torch's DistributedSampler: every epoch a permutation of the rows
 * seeded by (seed, epoch), padded by wrapping around to a multiple of the
 * world size, then rank r takes positions r, r+W, r+2W, ... So the shards are
 * disjoint (up to the padding), their union is every row, and a run on one
 * worker with batch B*W sees the same global batches as W workers with B. */
#ifndef TFCORE_SAMPLER_H
#define TFCORE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"

typedef struct tf_sampler {
    size_t rows;        /* rows in the split */
    int rank, world;
    uint64_t seed;
    int shuffle;        /* 0: rows in order (evaluation) */
    size_t *perm;       /* [padded] this epoch's global order */
    size_t padded;      /* rows rounded up to a multiple of world */
    int64_t epoch;      /* the epoch perm was made for, -1 none */
} tf_sampler;

tf_status tf_sampler_init(tf_sampler *s, size_t rows, int rank, int world, uint64_t seed,
                          int shuffle, tf_error *err);
void tf_sampler_free(tf_sampler *s);

/* Rows of this rank per epoch: padded / world. */
size_t tf_sampler_rank_rows(const tf_sampler *s);

/* Make `epoch`'s order (cheap if already made). */
void tf_sampler_set_epoch(tf_sampler *s, int64_t epoch);

/* This rank's rows at its positions [first, first+n) of the current epoch,
 * written to out[n]. Positions past the end are clamped by the caller. */
void tf_sampler_rows(const tf_sampler *s, size_t first, size_t n, size_t *out);

/* The global position in the epoch's order (the same for any world size) of
 * this rank's position `first`; this rank's next positions follow every
 * s->world global positions. */
size_t tf_sampler_position(const tf_sampler *s, size_t first);

#endif
