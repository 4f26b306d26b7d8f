/* trainer_zero.c — ZeRO stage 1 and 2 (trainer_strategy.h): the optimizer state
 * (and at stage 2 the gradients) sharded over the data-parallel ranks, as
 * DeepSpeed's ZeRO and PyTorch's ZeroRedundancyOptimizer / FSDP
 * SHARD_GRAD_OP do.
 *
 * The shard of rank r (tf_zero_shard) is a contiguous range of the model's
 * flat buffers: block r of the first W * (n / W) elements, and for the last
 * rank also the n % W (< W) elements past them. Its AdamW moments cover that
 * range only (trainer.c allocates t->opt_n of each). A step:
 *
 *   stage 1  gradients all-reduced (average) in DDP's buckets, overlapping
 *            the last backward; each rank unscales, clips and steps its shard;
 *   stage 2  during every micro-batch's backward, each DDP bucket is reduced
 *            (sum) to the owners of its parts as soon as it is full (one
 *            reduce_start per owner's part, grad_buckets.h), and waited for
 *            when backward reports its next range; once a part's reduction
 *            is done, a part this rank does not own is zeroed, and on a
 *            backend of host memory its pages go back to the system
 *            (madvise MADV_DONTNEED: they read as zero again, which is the
 *            zeroed-gradients state). The owner's part keeps the running sum
 *            over ranks and micro-batches (the next micro-batch's backward
 *            adds to it; the others add to zero), divided by W after the last
 *            one. So the gradient buffer is resident only for the rank's
 *            shard and the buckets in flight; zero_grad zeroes the shard only;
 *   both     overflow and the gradient norm agreed by all-reducing each
 *            rank's part, then the updated parameters all-gathered (the tail
 *            broadcast from the last rank), so every rank holds the whole
 *            model for the next forward.
 *
 * The model's f32 parameter buffer stays whole on every rank: with fp32 it
 * is the forward's weights; with fp16/bf16 it is the fp32 master copy the
 * model casts its compute copy from at every forward (and reads LayerNorm's
 * parameters from),
 * which the model ABI gives no way to hold in part. On a device backend
 * (CUDA) the gradient buffer is one allocation the model owns: parts are
 * zeroed, not freed, so device memory is not divided (docs/PARALLEL.md). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plan.h"
#include "stack.h"
#include "trainer_strategy.h"
#include "trainer_internal.h"

void tf_zero_shard(size_t n, int world, int rank, size_t *lo, size_t *count)
{
    size_t block = n / (size_t)world;
    *lo = (size_t)rank * block;
    *count = rank == world - 1 ? n - *lo : block;
}

/* Elements of each rank's block in the sharded collectives, and the tail. */
static size_t block_of(const tf_trainer *t) { return t->buf.n / (size_t)t->world; }

/* One collective on backend memory, recorded in the flight recorder and
 * counted as exposed communication: started by start, then waited. */
typedef tf_status (*start_fn)(tf_trainer *t, void *buf, size_t count, tf_comm_request **req, tf_error *err);

static tf_status start_all_gather(tf_trainer *t, void *buf, size_t count, tf_comm_request **req, tf_error *err)
{
    return t->cvt->all_gather(t->comm, buf, count, TF_DTYPE_F32, req, err);
}

static tf_status collective(tf_trainer *t, tf_comm_kind kind, start_fn fn, float *buf, size_t count,
                            size_t bytes, tf_error *err)
{
    double t0 = tf_now();
    uint64_t seq = tf_comm_rec_enter(t->rec, kind, bytes, 0, 0);
    tf_comm_rec_block(t->rec, seq);
    tf_comm_request *req = NULL;
    tf_status st = fn(t, buf, count, &req, err);
    if (!st) st = t->cvt->wait(t->comm, req, err);
    if (!st) {
        tf_comm_rec_exit(t->rec, seq);
        tf_comm_rec_block(t->rec, 0);
    }
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

static tf_status broadcast_tail(tf_trainer *t, float *buf, tf_error *err)
{
    size_t lo = block_of(t) * (size_t)t->world, n = t->buf.n - lo;
    if (n == 0) return TF_OK;
    double t0 = tf_now();
    uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_BROADCAST, n * sizeof(float), 0, 0);
    tf_comm_rec_block(t->rec, seq);
    tf_status st = t->cvt->broadcast(t->comm, buf + lo, n, TF_DTYPE_F32, t->world - 1, err);
    if (!st) {
        tf_comm_rec_exit(t->rec, seq);
        tf_comm_rec_block(t->rec, 0);
    }
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

tf_status tf_zero_gather(tf_trainer *t, float *buf, tf_error *err)
{
    size_t b = block_of(t);
    tf_status st = collective(t, TF_COMM_ALL_GATHER, start_all_gather, buf, b, b * (size_t)t->world * sizeof(float),
                              err);
    return st ? st : broadcast_tail(t, buf, err);
}

/* --- the strategy's points ------------------------------------------------- */

static tf_status zero_init(tf_trainer *t, FILE *trace, tf_error *err)
{
    if (t->buf.n < (size_t)t->world)
        return tf_error_set(err, TF_ERR_CONFIG, "comm.zero_stage: %zu parameters cannot be sharded over %d ranks",
                            t->buf.n, t->world);
    /* stage 1 reduces in DDP's buckets; stage 2 keeps them unused (and the trace closed) */
    tf_status st = tf_grad_buckets_init(&t->buckets, t->cvt, t->comm, t->buf.grads, t->buf.n,
                                        t->plan->comm.bucket_mb, trace, err);
    t->buckets.rec = t->rec;
    return st;
}

static void zero_free(tf_trainer *t) { tf_grad_buckets_free(&t->buckets); }

static tf_grads_ready_fn zero1_hook(tf_trainer *t, bool last, void **user)
{
    *user = NULL;
    if (!last) return NULL;
    tf_grad_buckets_begin(&t->buckets);
    *user = &t->buckets;
    return tf_grad_buckets_ready;
}

static tf_status zero1_reduce(tf_trainer *t, tf_error *err)
{
    double span, exposed;
    tf_status st = tf_grad_buckets_finish(&t->buckets, &span, &exposed, err);
    t->phase[TF_PHASE_COMM] += span;
    t->comm_exposed += exposed;
    return st;
}

/* ZeRO-2's gradient residency: which pages of the gradient buffer are in
 * memory, measured (mincore) during backward on a backend of host memory. */
struct tf_zero2 {
    bool host;                /* the gradient buffer is this process's memory */
    size_t page;
    char *base;               /* the buffer's first page */
    size_t npages;
    unsigned char *vec;       /* [npages] mincore's answer */
    size_t resident_peak;     /* bytes, the most seen resident at once */
};

/* grads[offset, offset+count) is zero from now on; on host memory the whole
 * pages inside it go back to the system (they read as zero pages again). */
static tf_status zero2_release(tf_trainer *t, size_t offset, size_t count, tf_error *err)
{
    float *p = t->buf.grads + offset;
    if (!t->zero2->host) {
        tf_status st = t->bvt->memset(t->be, p, 0, count * sizeof(float), NULL);
        return st ? tf_error_set(err, st, "zeroing gradients [%zu, %zu) after their reduction failed", offset,
                                 offset + count)
                  : TF_OK;
    }
    size_t pg = t->zero2->page;
    uintptr_t a = (uintptr_t)p, e = a + count * sizeof(float);
    uintptr_t pa = (a + pg - 1) / pg * pg, pe = e / pg * pg;
    if (pe <= pa) {
        memset(p, 0, count * sizeof(float));
        return TF_OK;
    }
    memset(p, 0, pa - a); /* the ragged ends share their pages with other parts */
    memset((void *)pe, 0, e - pe);
    if (madvise((void *)pa, pe - pa, MADV_DONTNEED) != 0) memset((void *)pa, 0, pe - pa);
    return TF_OK;
}

static tf_status zero2_retire(void *user, size_t offset, size_t count, bool own, tf_error *err)
{
    return own ? TF_OK : zero2_release(user, offset, count, err);
}

/* Count the gradient buffer's resident pages; keep the peak. */
static void zero2_sample(tf_trainer *t)
{
    struct tf_zero2 *z = t->zero2;
    if (!z->host || !z->vec || mincore(z->base, z->npages * z->page, z->vec) != 0) return;
    size_t k = 0;
    for (size_t i = 0; i < z->npages; i++) k += z->vec[i] & 1;
    if (k * z->page > z->resident_peak) z->resident_peak = k * z->page;
}

static void zero2_ready(void *user, size_t offset, size_t count)
{
    tf_trainer *t = user;
    tf_grad_buckets_ready(&t->buckets, offset, count);
    zero2_sample(t);
}

static void zero2_free(tf_trainer *t)
{
    tf_grad_buckets_free(&t->buckets);
    if (t->zero2) free(t->zero2->vec);
    free(t->zero2);
    t->zero2 = NULL;
}

static tf_status zero2_init(tf_trainer *t, FILE *trace, tf_error *err)
{
    tf_status st = zero_init(t, trace, err);
    if (st) return st;
    struct tf_zero2 *z = calloc(1, sizeof *z);
    if (!z) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for ZeRO-2's state");
    t->zero2 = z;
    size_t *bounds = malloc(((size_t)t->world + 1) * sizeof *bounds);
    if (!bounds) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for ZeRO-2's shard bounds");
    for (int r = 0; r < t->world; r++) {
        size_t n;
        tf_zero_shard(t->buf.n, t->world, r, &bounds[r], &n);
    }
    bounds[t->world] = t->buf.n;
    st = tf_grad_buckets_to_owners(&t->buckets, t->world, t->rank, bounds, TF_REDUCE_SUM, zero2_retire, t, err);
    free(bounds);
    if (st) return st;
    z->host = TF_HAS(t->bvt, host_memory) && t->bvt->host_memory && t->bvt->host_memory(t->be);
    if (!z->host) return TF_OK;
    long pg = sysconf(_SC_PAGESIZE);
    z->page = pg > 0 ? (size_t)pg : 4096;
    uintptr_t a = (uintptr_t)t->buf.grads / z->page * z->page;
    uintptr_t e = ((uintptr_t)(t->buf.grads + t->buf.n) + z->page - 1) / z->page * z->page;
    z->base = (char *)a;
    z->npages = (e - a) / z->page;
    z->vec = malloc(z->npages); /* without it residency is not measured, nothing else changes */
    /* setup zeroed the whole buffer: what this rank does not own goes back now */
    size_t lo = t->opt_lo, hi = t->opt_lo + t->opt_n;
    if (lo > 0 && (st = zero2_release(t, 0, lo, err))) return st;
    if (hi < t->buf.n && (st = zero2_release(t, hi, t->buf.n - hi, err))) return st;
    return TF_OK;
}

/* Every micro-batch's backward reduces its buckets; the previous one's are
 * finished first (its last buckets overlapped this micro-batch's forward).
 * An error there is kept for zero2_reduce (a hook cannot return one). */
static tf_status zero2_finish(tf_trainer *t, tf_error *err)
{
    if (!t->buckets.pending) return TF_OK;
    zero2_sample(t);
    double span, exposed;
    tf_status st = tf_grad_buckets_finish(&t->buckets, &span, &exposed, err);
    t->phase[TF_PHASE_COMM] += span;
    t->comm_exposed += exposed;
    return st;
}

static tf_grads_ready_fn zero2_hook(tf_trainer *t, bool last, void **user)
{
    (void)last;
    *user = NULL;
    if (t->buckets.st) return NULL; /* a failed micro-batch: zero2_reduce reports it */
    tf_error e = {0};
    tf_status st = zero2_finish(t, &e);
    if (st) {
        t->buckets.st = st;
        t->buckets.err = e;
        return NULL;
    }
    tf_grad_buckets_begin(&t->buckets);
    *user = t;
    return zero2_ready;
}

/* The last micro-batch's buckets, then the shard's sum over ranks made their average. */
static tf_status zero2_reduce(tf_trainer *t, tf_error *err)
{
    if (!t->buckets.pending && t->buckets.st)
        return tf_error_set(err, t->buckets.st, "%s", t->buckets.err.msg);
    tf_status st = zero2_finish(t, err);
    if (!st && t->opt_n)
        st = t->bvt->scale(t->be, NULL, t->buf.grads + t->opt_lo, t->opt_n, 1.0f / (float)t->world, TF_DTYPE_F32,
                           err);
    return st;
}

/* The rest of the buffer is zero already (zero2_release). */
static tf_status zero2_zero_grads(tf_trainer *t, tf_error *err)
{
    tf_status st = t->bvt->memset(t->be, t->buf.grads + t->opt_lo, 0, t->opt_n * sizeof(float), NULL);
    return st ? tf_error_set(err, st, "zeroing the gradients of this rank's shard failed") : TF_OK;
}

bool tf_zero2_gradient_bytes(const tf_trainer *t, size_t *bytes)
{
    if (!t->zero2 || !t->zero2->host || !t->zero2->resident_peak) return false;
    *bytes = t->zero2->resident_peak;
    return true;
}

static tf_status zero_overflow(tf_trainer *t, bool *found_inf, tf_error *err)
{
    double f = *found_inf ? 1.0 : 0.0;
    tf_status st = tf_trainer_allreduce_host(t, &f, 1, TF_DTYPE_F64, TF_REDUCE_SUM, err);
    *found_inf = f > 0;
    return st;
}

static tf_status zero_norm(tf_trainer *t, double *sq, tf_error *err)
{
    return tf_trainer_allreduce_host(t, sq, 1, TF_DTYPE_F64, TF_REDUCE_SUM, err);
}

static tf_status zero_after(tf_trainer *t, bool skipped, tf_error *err)
{
    return skipped ? TF_OK : tf_zero_gather(t, t->buf.params, err);
}

const tf_strategy tf_strategy_zero1 = {"zero1",      false,         true,      zero_init, zero_free, zero1_hook,
                                       zero1_reduce, zero_overflow, zero_norm, zero_after, NULL};
const tf_strategy tf_strategy_zero2 = {"zero2",      false,         true,      zero2_init,      zero2_free, zero2_hook,
                                       zero2_reduce, zero_overflow, zero_norm, zero_after, zero2_zero_grads};

tf_status tf_zero_print_shards(const tf_plan *plan, FILE *out, tf_error *err)
{
    if (!plan->plugin[TF_KIND_COMM] || plan->comm.zero_stage == 0) return TF_OK;
    tf_stack s;
    tf_stack_options o = {.device = 0, .threads = 1, .with_model = true};
    tf_status st = tf_stack_open(&s, plan, &o, err);
    if (!st) {
        tf_model_buffers b;
        s.model.vt->buffers(s.model.h, &b);
        int w = plan->comm.world_size;
        fprintf(out, "# ZeRO stage %d over %d ranks: %zu parameters; each rank keeps the AdamW moments of its "
                     "shard%s:\n",
                plan->comm.zero_stage, w, b.n,
                plan->comm.zero_stage == 2 ? " and receives only its shard's reduced gradients" : "");
        for (int r = 0; r < w; r++) {
            size_t lo, n;
            tf_zero_shard(b.n, w, r, &lo, &n);
            fprintf(out, "#   rank %d: parameters [%zu, %zu), %zu elements; optimizer state %.2f MiB (whole: %.2f MiB)\n",
                    r, lo, lo + n, n, 2.0 * (double)n * 4 / 1048576.0, 2.0 * (double)b.n * 4 / 1048576.0);
        }
    }
    tf_stack_close(&s);
    return st;
}
