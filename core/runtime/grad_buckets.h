/* grad_buckets.h — DDP's gradient buckets: reduce gradients while backward
 * is still running.
 *
 * The model reports, during backward of the last micro-batch of a step, each
 * range of the flat gradient buffer as soon as it is final (tf_grads_ready_fn,
 * in the order backward produces them). Adjacent ranges are merged into a
 * bucket; when a bucket reaches its size (the first one is capped at 1 MiB,
 * later ones at comm.bucket_mb, as torch DDP does) its all-reduce (average) is
 * started right away, so communication overlaps the rest of backward. Before
 * the optimizer, tf_grad_buckets_finish starts whatever is left (ranges the
 * model never reported included) and waits for every bucket: only that wait
 * is "exposed" communication time.
 *
 * ZeRO-2 (tf_grad_buckets_to_owners) reduces each bucket instead to the
 * owners of its elements (the comm's reduce_start, one call per owner's part
 * of the bucket, ABI 1.5; an all-reduce of the part without it). Each ready
 * range first waits for the buckets started before it (they had that
 * range's backward to complete in), and every part whose wait returned is
 * handed to a retire callback, so the caller can free the memory of the
 * parts other ranks own while backward goes on: what is resident is the
 * open bucket, the buckets of the last ready range, and the range backward
 * is writing. */
#ifndef TFCORE_GRAD_BUCKETS_H
#define TFCORE_GRAD_BUCKETS_H

#include <stddef.h>
#include <stdio.h>

#include "comm_recorder.h"
#include "tfcore/comm.h"
#include "tfcore/error.h"

typedef struct tf_grad_bucket {
    size_t offset, count;   /* elements of grads */
    tf_comm_request *req;
    uint64_t seq;           /* its number in the flight recorder */
    int root;               /* to_owners: the rank it is reduced to (-1: all-reduced) */
} tf_grad_bucket;

/* to_owners: grads[offset, offset + count) was reduced to rank root (own: this
 * rank) and the wait returned. A failure stops the step (kept as the first error). */
typedef tf_status (*tf_grad_retire_fn)(void *user, size_t offset, size_t count, bool own, tf_error *err);

typedef struct tf_grad_buckets {
    const tf_comm_vtable *cvt;
    tf_comm *comm;
    float *grads;              /* [n] the model's flat gradients (backend memory) */
    size_t n;
    size_t first_cap, cap;     /* bucket sizes in elements: the first bucket, the others */
    size_t open_offset, open_count; /* ready ranges not yet started (one contiguous run) */
    tf_grad_bucket *inflight;  /* [ninflight] started, not yet waited for, in start order */
    size_t ninflight, capacity;
    size_t started;            /* elements started this step (to find unreported ranges) */
    double first_start;        /* tf_now() of the step's first start (for the comm span) */
    tf_status st;              /* the first error inside a ready callback (it cannot return one) */
    tf_error err;
    tf_comm_rank_log *rec;     /* the rank's flight recorder slot (comm_recorder.h), or NULL */
    /* called with each bucket's range just before its all-reduce starts (the
     * gradient noise scale's per-rank norm, trainer_noise_scale.h), or NULL */
    void (*before_start)(void *user, size_t offset, size_t count);
    void *before_start_user;
    size_t last_nbuckets;      /* buckets the previous step had (the recorder's "of n"; 0: first step) */
    FILE *trace;               /* TFCORE_TRACE_COMM: one line per event, or NULL */
    double trace_t0;
    /* to_owners (ZeRO-2): a start first waits for the oldest buckets until at
     * most two buckets' worth (2 * cap elements) is in flight */
    bool to_owners;
    int world, rank;
    size_t *bounds;            /* [world + 1] rank r owns grads[bounds[r], bounds[r+1]) */
    tf_reduce_op op;           /* the parts' reduction (ZeRO-2: sum; the caller averages its shard) */
    tf_grad_retire_fn retire;
    void *retire_user;
    size_t nwaited;            /* inflight[0, nwaited) already waited for this backward */
    size_t inflight_count;     /* elements started and not yet waited for */
    bool pending;              /* a backward began and was not finished yet */
    double early_wait;         /* seconds this backward waited for earlier buckets (exposed) */
} tf_grad_buckets;

tf_status tf_grad_buckets_init(tf_grad_buckets *b, const tf_comm_vtable *cvt, tf_comm *comm, float *grads,
                               size_t n, double bucket_mb, FILE *trace, tf_error *err);
void tf_grad_buckets_free(tf_grad_buckets *b);

/* Make b reduce each bucket to the owners of its parts (ZeRO-2, see above):
 * rank r owns grads[bounds[r], bounds[r+1]) (bounds[world + 1], ascending,
 * from 0 to n; copied). */
tf_status tf_grad_buckets_to_owners(tf_grad_buckets *b, int world, int rank, const size_t *bounds, tf_reduce_op op,
                                    tf_grad_retire_fn retire, void *user, tf_error *err);

/* Start of a step's last backward (to_owners: of every backward). */
void tf_grad_buckets_begin(tf_grad_buckets *b);
/* The tf_grads_ready_fn handed to the model's backward (user = the buckets). */
void tf_grad_buckets_ready(void *user, size_t offset, size_t count);
/* After backward: start what is left, wait for everything. *span is the
 * seconds from the first start to the end of the last wait (communication
 * in flight), *exposed the seconds spent waiting here. */
tf_status tf_grad_buckets_finish(tf_grad_buckets *b, double *span, double *exposed, tf_error *err);

/* A trace line "<seconds> <event> [numbers]" when tracing is on. */
void tf_grad_buckets_trace(tf_grad_buckets *b, const char *event, size_t a, size_t c);

#endif
