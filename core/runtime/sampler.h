/* sampler.h — which rows each worker trains on, step by step.
 *
 * Like torch's DistributedSampler: every epoch a permutation of the rows
 * seeded by (seed, epoch), padded by wrapping around to a multiple of the
 * world size, then rank r takes positions r, r+W, r+2W, ... So the shards are
 * disjoint (up to the padding), their union is every row, and a run on one
 * worker with batch B*W sees the same global batches as W workers with B.
 *
 * Grouped by length (training.group_by_length), the epoch's permutation is
 * reordered as transformers' get_length_grouped_indices reorders its
 * torch.randperm: megabatches of `mult` global batches (mult = 50, or fewer so
 * that there are 4 megabatches, at least 1), each sorted by length, longest
 * first; then the longest row of all is swapped to the very front. The global
 * batch is sliced over the ranks as above, so each global batch holds rows of
 * similar lengths whatever the world size. */
#ifndef TFCORE_SAMPLER_H
#define TFCORE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/dataset.h"
#include "tfcore/error.h"

typedef struct tf_sampler {
    size_t rows;        /* rows in the split */
    int rank, world;
    uint64_t seed;
    int shuffle;        /* 0: rows in order (evaluation) */
    size_t *perm;       /* [padded] this epoch's global order */
    size_t padded;      /* rows rounded up to a multiple of world */
    int64_t epoch;      /* the epoch perm was made for, -1 none */
    int32_t *lengths;   /* [rows] real tokens per row, or NULL: not grouped */
    size_t group_batch; /* global batch of the grouping (rows per optimizer step) */
    void *group_scratch; /* [megabatch] sort keys */
    /* the epoch's micro-batches (tf_sampler_set_batch) */
    size_t batch_rows;  /* rows of one micro-batch of the sampled stream */
    int scatter_world;  /* > 1: each micro-batch is split over this many replicas */
    int scatter_rank;   /* this replica's chunk of it */
} tf_sampler;

tf_status tf_sampler_init(tf_sampler *s, size_t rows, int rank, int world, uint64_t seed,
                          int shuffle, tf_error *err);
void tf_sampler_free(tf_sampler *s);

/* Group every epoch's order by length: lengths[rows] (copied), batch = the
 * global batch (per-device batch x world x accumulation). Call before the
 * first tf_sampler_set_epoch. */
tf_status tf_sampler_group_by_length(tf_sampler *s, const int32_t *lengths, size_t batch, tf_error *err);

/* transformers' get_length_grouped_indices(lengths, batch) given its
 * permutation perm[n] (what torch.randperm drew there), written to out[n]
 * (out != perm). scratch: tf_length_group_scratch_bytes(n, batch) bytes. */
size_t tf_length_group_scratch_bytes(size_t n, size_t batch);
void tf_length_grouped_order(const size_t *perm, size_t n, const int32_t *lengths, size_t batch, void *scratch,
                             size_t *out);

/* Every row's length of a split from the dataset's row_length slot, into a
 * new array *out[rows] (free it). Errors: the dataset has no row_length
 * (config), a row with no tokens (data), out of memory. */
tf_status tf_sampler_row_lengths(const tf_dataset_vtable *dvt, tf_dataset *ds, tf_split split, size_t rows,
                                 int32_t **out, tf_error *err);

/* Rows of this rank per epoch: padded / world. */
size_t tf_sampler_rank_rows(const tf_sampler *s);

/* How the epoch is cut into micro-batches — the step arithmetic, in one
 * place. per_device = training.per_device_train_batch_size. scatter_world
 * 1: each rank samples its own shard, per_device rows a micro-batch (DDP).
 * scatter_world W > 1 (a sampler of world 1): one global stream whose
 * micro-batches of per_device*W rows are split into W chunks of ceil(m/W)
 * rows, replica scatter_rank taking chunk scatter_rank (torch DataParallel's
 * scatter: the last replicas may get fewer rows, or none). */
void tf_sampler_set_batch(tf_sampler *s, size_t per_device, int scatter_world, int scatter_rank);

/* Micro-batches per epoch (the same count on every rank: tf_batches_per_epoch). */
int64_t tf_sampler_batches_per_epoch(const tf_sampler *s);

/* This rank's rows of micro-batch b of the epoch: positions [first, first+n)
 * of its shard (n may be 0 for a scattered replica), and the replicas the
 * micro-batch's rows went to (1 unless scattered). */
typedef struct tf_micro_batch {
    size_t first, n;
    size_t replicas;
} tf_micro_batch;
tf_micro_batch tf_sampler_micro_batch(const tf_sampler *s, int64_t b);

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
