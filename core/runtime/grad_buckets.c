/* grad_buckets.c — overlapped, bucketed gradient all-reduce (grad_buckets.h). */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grad_buckets.h"
#include "tfcore/plugin.h"

#define FIRST_BUCKET_BYTES (1u << 20) /* torch DDP's _DEFAULT_FIRST_BUCKET_BYTES */

tf_status tf_grad_buckets_init(tf_grad_buckets *b, const tf_comm_vtable *cvt, tf_comm *comm, float *grads,
                               size_t n, double bucket_mb, FILE *trace, tf_error *err)
{
    memset(b, 0, sizeof *b);
    b->cvt = cvt;
    b->comm = comm;
    b->grads = grads;
    b->n = n;
    double cap = bucket_mb * 1048576.0 / sizeof(float);
    b->cap = cap < 1.0 ? 1 : (size_t)cap;
    b->first_cap = FIRST_BUCKET_BYTES / sizeof(float) < b->cap ? FIRST_BUCKET_BYTES / sizeof(float) : b->cap;
    /* at most one bucket per reported range plus the ones split by size: grow on demand */
    b->capacity = 64;
    b->inflight = calloc(b->capacity, sizeof *b->inflight);
    if (!b->inflight) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for gradient buckets");
    b->trace = trace;
    b->trace_t0 = tf_now();
    return TF_OK;
}

void tf_grad_buckets_free(tf_grad_buckets *b)
{
    free(b->inflight);
    free(b->bounds);
    if (b->trace) fclose(b->trace);
    memset(b, 0, sizeof *b);
}

void tf_grad_buckets_trace(tf_grad_buckets *b, const char *event, size_t a, size_t c)
{
    if (!b->trace) return;
    fprintf(b->trace, "%.6f %s %zu %zu\n", tf_now() - b->trace_t0, event, a, c);
}

tf_status tf_grad_buckets_to_owners(tf_grad_buckets *b, int world, int rank, const size_t *bounds, tf_reduce_op op,
                                    tf_grad_retire_fn retire, void *user, tf_error *err)
{
    b->bounds = malloc(((size_t)world + 1) * sizeof *b->bounds);
    if (!b->bounds) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for gradient buckets");
    memcpy(b->bounds, bounds, ((size_t)world + 1) * sizeof *b->bounds);
    b->to_owners = true;
    b->world = world;
    b->rank = rank;
    b->op = op;
    b->retire = retire;
    b->retire_user = user;
    return TF_OK;
}

/* The rank that owns element i (bounds ascending: the last r with bounds[r] <= i). */
static int owner_of(const tf_grad_buckets *b, size_t i)
{
    int lo = 0, hi = b->world - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b->bounds[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void tf_grad_buckets_begin(tf_grad_buckets *b)
{
    b->open_offset = b->open_count = 0;
    b->ninflight = 0;
    b->nwaited = 0;
    b->inflight_count = 0;
    b->early_wait = 0;
    b->pending = true;
    b->started = 0;
    b->first_start = 0;
    b->st = TF_OK;
    tf_error_clear(&b->err);
    tf_grad_buckets_trace(b, "backward_begin", 0, 0);
}

/* Wait for inflight[nwaited] and hand it to retire (to_owners). An error
 * is kept in b->st (or, once one is, this wait's is dropped). */
static void wait_next(tf_grad_buckets *b, tf_error *err, tf_status *st)
{
    tf_grad_bucket *g = &b->inflight[b->nwaited++];
    tf_error e = {0};
    if (!*st) tf_comm_rec_block(b->rec, g->seq); /* after an error: the failed one */
    tf_status w = b->cvt->wait(b->comm, g->req, &e);
    tf_grad_buckets_trace(b, g->root >= 0 ? "reduce_done" : "allreduce_done", g->offset, g->count);
    b->inflight_count -= g->count;
    if (!w && !*st) {
        tf_comm_rec_exit(b->rec, g->seq);
        tf_comm_rec_block(b->rec, 0);
        if (b->to_owners && b->retire) w = b->retire(b->retire_user, g->offset, g->count, g->root == b->rank, &e);
    }
    if (w && !*st) *st = tf_error_set(err, w, "%s", e.msg);
}

/* During backward (to_owners): wait for the oldest buckets until at most
 * `keep` elements are in flight; the time counts as exposed. */
static void wait_oldest(tf_grad_buckets *b, size_t keep)
{
    if (b->st || b->inflight_count <= keep) return;
    double t0 = tf_now();
    while (!b->st && b->nwaited < b->ninflight && b->inflight_count > keep) wait_next(b, &b->err, &b->st);
    b->early_wait += tf_now() - t0;
}

/* Start the all-reduce (average) of grads[offset, offset+count), or
 * (root >= 0) its reduction to rank root. */
static void start_part(tf_grad_buckets *b, size_t offset, size_t count, int root)
{
    if (b->st || count == 0) return;
    if (b->to_owners) {
        /* at most two buckets' worth in flight: a part another rank owns stays
         * resident until its reduction is waited for, and a range as large as
         * the word embeddings' (reported at once) would otherwise be in flight
         * whole, as would MPI's reads of it (count <= cap) */
        wait_oldest(b, 2 * b->cap - count);
        if (b->st) return;
    }
    if (b->ninflight == b->capacity) {
        tf_grad_bucket *g = realloc(b->inflight, 2 * b->capacity * sizeof *g);
        if (!g) {
            b->st = tf_error_set(&b->err, TF_ERR_RUNTIME, "out of memory for gradient buckets");
            return;
        }
        b->inflight = g;
        b->capacity *= 2;
    }
    if (b->ninflight == 0) b->first_start = tf_now();
    tf_grad_bucket *g = &b->inflight[b->ninflight];
    g->offset = offset;
    g->count = count;
    g->req = NULL;
    g->root = root;
    bool reduce = root >= 0 && TF_HAS(b->cvt, reduce_start) && b->cvt->reduce_start;
    g->seq = tf_comm_rec_enter(b->rec, reduce ? TF_COMM_REDUCE : TF_COMM_ALLREDUCE, count * sizeof(float),
                               (int)b->ninflight + 1, (int)b->last_nbuckets);
    tf_grad_buckets_trace(b, reduce ? "reduce_start" : "allreduce_start", offset, count);
    if (b->before_start) b->before_start(b->before_start_user, offset, count);
    tf_comm_rec_block(b->rec, g->seq); /* a start may wait too (dp-master's is synchronous) */
    if (reduce)
        b->st = b->cvt->reduce_start(b->comm, b->grads + offset, count, TF_DTYPE_F32, b->op, root, &g->req, &b->err);
    else /* an older plugin without reduce_start: the owner's part all-reduced */
        b->st = b->cvt->allreduce_start(b->comm, b->grads + offset, count, TF_DTYPE_F32,
                                        root >= 0 ? b->op : TF_REDUCE_AVG, &g->req, &b->err);
    if (!b->st) tf_comm_rec_block(b->rec, 0); /* a failed one stays the one the rank is in */
    if (!b->st) {
        b->ninflight++;
        b->inflight_count += count;
    }
}

/* Start grads[offset, offset+count): one all-reduce, or (to_owners) one
 * reduction per owner's part (the parts cut where the shards meet). */
static void start(tf_grad_buckets *b, size_t offset, size_t count)
{
    if (b->st || count == 0) return;
    if (!b->to_owners) {
        start_part(b, offset, count, -1);
        if (!b->st) b->started += count;
        return;
    }
    for (size_t at = offset, end = offset + count; at < end && !b->st;) {
        int r = owner_of(b, at);
        size_t stop = b->bounds[r + 1] < end ? b->bounds[r + 1] : end;
        start_part(b, at, stop - at, r);
        at = stop;
    }
    if (!b->st) b->started += count;
}

/* Start the open run in pieces of at most the bucket size. */
static void flush(tf_grad_buckets *b, bool all)
{
    for (;;) {
        size_t cap = b->ninflight == 0 ? b->first_cap : b->cap;
        if (b->open_count == 0 || (!all && b->open_count < cap)) return;
        size_t c = b->open_count < cap ? b->open_count : cap;
        start(b, b->open_offset, c);
        b->open_offset += c;
        b->open_count -= c;
    }
}

void tf_grad_buckets_ready(void *user, size_t offset, size_t count)
{
    tf_grad_buckets *b = user;
    tf_grad_buckets_trace(b, "grads_ready", offset, count);
    if (b->st) return;
    if (offset > b->n || count > b->n - offset) {
        b->st = tf_error_set(&b->err, TF_ERR_PLUGIN,
                             "the model reported gradients [%zu, %zu) ready, past its %zu parameters", offset,
                             offset + count, b->n);
        return;
    }
    if (b->to_owners) {
        /* the buckets started before this range had its backward to finish in:
         * their memory goes now, before backward writes the next range */
        wait_oldest(b, 0);
        if (b->st) return;
    }
    if (b->open_count && offset != b->open_offset + b->open_count) flush(b, true); /* not adjacent */
    if (b->open_count == 0) b->open_offset = offset;
    b->open_count += count;
    flush(b, false);
}

static int by_offset(const void *x, const void *y)
{
    const tf_grad_bucket *a = x, *c = y;
    return (a->offset > c->offset) - (a->offset < c->offset);
}

tf_status tf_grad_buckets_finish(tf_grad_buckets *b, double *span, double *exposed, tf_error *err)
{
    flush(b, true);
    tf_grad_buckets_trace(b, "backward_end", 0, 0);
    if (!b->st && b->started != b->n) {
        /* ranges the model did not report (or a model without the callback):
         * start the gaps between what was started, in order */
        size_t k = b->ninflight;
        tf_grad_bucket *sorted = malloc((k ? k : 1) * sizeof *sorted);
        if (!sorted) {
            b->st = tf_error_set(&b->err, TF_ERR_RUNTIME, "out of memory for gradient buckets");
        } else {
            memcpy(sorted, b->inflight, k * sizeof *sorted);
            qsort(sorted, k, sizeof *sorted, by_offset);
            size_t at = 0;
            for (size_t i = 0; i <= k && !b->st; i++) {
                size_t end = i < k ? sorted[i].offset : b->n;
                if (end > at) {
                    b->open_offset = at;
                    b->open_count = end - at;
                    flush(b, true);
                }
                if (i < k && sorted[i].offset + sorted[i].count > at) at = sorted[i].offset + sorted[i].count;
            }
            free(sorted);
        }
    }
    double t0 = tf_now();
    tf_status st = b->st;
    if (st) tf_error_set(err, st, "%s", b->err.msg);
    /* wait for every started bucket even after an error, so none is left in flight */
    while (b->nwaited < b->ninflight) wait_next(b, err, &st);
    double t1 = tf_now();
    *exposed = t1 - t0 + b->early_wait;
    *span = b->ninflight ? t1 - b->first_start : 0;
    b->last_nbuckets = b->ninflight;
    b->ninflight = 0;
    b->nwaited = 0;
    b->pending = false;
    return st;
}
