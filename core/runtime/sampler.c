/* sampler.c — per-epoch seeded permutation, sharded by rank, optionally
 * grouped by length (see sampler.h). */
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "training_args.h"
#include "tfcore/plugin.h"
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
    s->lengths = NULL;
    s->group_batch = 0;
    s->group_scratch = NULL;
    s->batch_rows = 1;
    s->scatter_world = 1;
    s->scatter_rank = 0;
    s->perm = malloc(s->padded * sizeof *s->perm);
    if (!s->perm) return tf_error_set(err, TF_ERR_RUNTIME, "sampler: out of memory for %zu rows", rows);
    return TF_OK;
}

void tf_sampler_free(tf_sampler *s)
{
    free(s->perm);
    free(s->lengths);
    free(s->group_scratch);
    s->perm = NULL;
    s->lengths = NULL;
    s->group_scratch = NULL;
}

/* A megabatch entry: sorted by length descending, ties in permutation order
 * (Python's sorted is stable). */
typedef struct group_key {
    int32_t length;
    size_t pos, row;
} group_key;

static int longer_first(const void *a, const void *b)
{
    const group_key *x = a, *y = b;
    if (x->length != y->length) return x->length > y->length ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* mega_batch_mult = min(n // (batch * 4), 50), at least 1 */
static size_t megabatch_rows(size_t n, size_t batch)
{
    size_t mult = n / (batch * 4);
    mult = mult > 50 ? 50 : mult < 1 ? 1 : mult;
    return mult * batch;
}

size_t tf_length_group_scratch_bytes(size_t n, size_t batch)
{
    size_t m = megabatch_rows(n, batch);
    return (m < n ? m : n) * sizeof(group_key);
}

void tf_length_grouped_order(const size_t *perm, size_t n, const int32_t *lengths, size_t batch, void *scratch,
                             size_t *out)
{
    if (n == 0) return;
    size_t mb = megabatch_rows(n, batch), longest_at = 0;
    group_key *k = scratch;
    for (size_t first = 0; first < n; first += mb) {
        size_t m = n - first < mb ? n - first : mb;
        for (size_t i = 0; i < m; i++) k[i] = (group_key){lengths[perm[first + i]], i, perm[first + i]};
        qsort(k, m, sizeof *k, longer_first);
        for (size_t i = 0; i < m; i++) out[first + i] = k[i].row;
        /* torch.argmax over the megabatches' heads: the first maximum */
        if (lengths[out[first]] > lengths[out[longest_at]]) longest_at = first;
    }
    size_t t = out[0];
    out[0] = out[longest_at];
    out[longest_at] = t;
}

tf_status tf_sampler_row_lengths(const tf_dataset_vtable *dvt, tf_dataset *ds, tf_split split, size_t rows,
                                 int32_t **out, tf_error *err)
{
    *out = NULL;
    if (!TF_HAS(dvt, row_length))
        return tf_error_set(err, TF_ERR_CONFIG, "training.group_by_length: the dataset does not report row lengths");
    int32_t *len = malloc((rows ? rows : 1) * sizeof *len);
    if (!len) return tf_error_set(err, TF_ERR_RUNTIME, "sampler: out of memory for the lengths of %zu rows", rows);
    for (size_t r = 0; r < rows; r++) {
        len[r] = dvt->row_length(ds, split, r);
        if (len[r] < 1) {
            int bad = len[r];
            free(len);
            return tf_error_set(err, TF_ERR_DATA, "%s row %zu has no tokens (length %d)",
                                split == TF_SPLIT_TRAIN ? "train" : "eval", r, bad);
        }
    }
    *out = len;
    return TF_OK;
}

tf_status tf_sampler_group_by_length(tf_sampler *s, const int32_t *lengths, size_t batch, tf_error *err)
{
    if (batch == 0) return tf_error_set(err, TF_ERR_RUNTIME, "sampler: grouping by length needs a batch size");
    s->lengths = malloc(s->rows * sizeof *s->lengths);
    /* the grouped order is written to a copy of the permutation, then back */
    s->group_scratch = malloc(tf_length_group_scratch_bytes(s->rows, batch) + s->rows * sizeof(size_t));
    if (!s->lengths || !s->group_scratch)
        return tf_error_set(err, TF_ERR_RUNTIME, "sampler: out of memory for the lengths of %zu rows", s->rows);
    memcpy(s->lengths, lengths, s->rows * sizeof *s->lengths);
    s->group_batch = batch;
    s->epoch = -1; /* any order made before is not grouped */
    return TF_OK;
}

size_t tf_sampler_rank_rows(const tf_sampler *s) { return s->padded / (size_t)s->world; }

void tf_sampler_set_batch(tf_sampler *s, size_t per_device, int scatter_world, int scatter_rank)
{
    s->scatter_world = scatter_world < 1 ? 1 : scatter_world;
    s->scatter_rank = scatter_rank;
    s->batch_rows = per_device * (size_t)s->scatter_world;
}

int64_t tf_sampler_batches_per_epoch(const tf_sampler *s)
{
    /* the sampler's world times the replicas one stream is scattered over */
    size_t per_device = s->batch_rows / (size_t)s->scatter_world;
    return (int64_t)tf_batches_per_epoch((long long)s->rows, (long long)per_device,
                                         (long long)s->world * s->scatter_world);
}

tf_micro_batch tf_sampler_micro_batch(const tf_sampler *s, int64_t b)
{
    size_t M = s->batch_rows, shard = tf_sampler_rank_rows(s), first = (size_t)b * M;
    size_t m = first >= shard ? 0 : shard - first < M ? shard - first : M;
    tf_micro_batch mb = {first, m, 1};
    if (s->scatter_world > 1) {
        size_t W = (size_t)s->scatter_world, r = (size_t)s->scatter_rank;
        size_t chunk = (m + W - 1) / W;
        mb.replicas = chunk ? (m + chunk - 1) / chunk : 0;
        mb.first = first + r * chunk;
        mb.n = r < mb.replicas ? (m - r * chunk < chunk ? m - r * chunk : chunk) : 0;
    }
    return mb;
}

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
    if (s->lengths) {
        size_t *grouped = (size_t *)((char *)s->group_scratch + tf_length_group_scratch_bytes(s->rows, s->group_batch));
        tf_length_grouped_order(s->perm, s->rows, s->lengths, s->group_batch, s->group_scratch, grouped);
        memcpy(s->perm, grouped, s->rows * sizeof *grouped);
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
