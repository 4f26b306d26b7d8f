/* grad_buckets.c — overlapped, bucketed gradient all-reduce (grad_buckets.h). */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grad_buckets.h"

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
    if (b->trace) fclose(b->trace);
    memset(b, 0, sizeof *b);
}

void tf_grad_buckets_trace(tf_grad_buckets *b, const char *event, size_t a, size_t c)
{
    if (!b->trace) return;
    fprintf(b->trace, "%.6f %s %zu %zu\n", tf_now() - b->trace_t0, event, a, c);
}

void tf_grad_buckets_begin(tf_grad_buckets *b)
{
    b->open_offset = b->open_count = 0;
    b->ninflight = 0;
    b->started = 0;
    b->first_start = 0;
    b->st = TF_OK;
    tf_error_clear(&b->err);
    tf_grad_buckets_trace(b, "backward_begin", 0, 0);
}

/* Start the all-reduce (average) of grads[offset, offset+count). */
static void start(tf_grad_buckets *b, size_t offset, size_t count)
{
    if (b->st || count == 0) return;
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
    g->seq = tf_comm_rec_enter(b->rec, TF_COMM_ALLREDUCE, count * sizeof(float), (int)b->ninflight + 1,
                               (int)b->last_nbuckets);
    tf_grad_buckets_trace(b, "allreduce_start", offset, count);
    if (b->before_start) b->before_start(b->before_start_user, offset, count);
    tf_comm_rec_block(b->rec, g->seq); /* a start may wait too (dp-master's is synchronous) */
    b->st = b->cvt->allreduce_start(b->comm, b->grads + offset, count, TF_DTYPE_F32, TF_REDUCE_AVG, &g->req,
                                    &b->err);
    if (!b->st) tf_comm_rec_block(b->rec, 0); /* a failed one stays the one the rank is in */
    if (!b->st) {
        b->ninflight++;
        b->started += count;
    }
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
    for (size_t i = 0; i < b->ninflight; i++) {
        tf_error e = {0};
        if (!st) tf_comm_rec_block(b->rec, b->inflight[i].seq); /* after an error: the failed one */
        tf_status w = b->cvt->wait(b->comm, b->inflight[i].req, &e);
        tf_grad_buckets_trace(b, "allreduce_done", b->inflight[i].offset, b->inflight[i].count);
        if (!w && !st) {
            tf_comm_rec_exit(b->rec, b->inflight[i].seq);
            tf_comm_rec_block(b->rec, 0);
        }
        if (w && !st) st = tf_error_set(err, w, "%s", e.msg);
    }
    double t1 = tf_now();
    *exposed = t1 - t0;
    *span = b->ninflight ? t1 - b->first_start : 0;
    b->last_nbuckets = b->ninflight;
    b->ninflight = 0;
    return st;
}
