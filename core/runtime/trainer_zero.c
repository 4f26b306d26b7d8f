/* trainer_zero.c — ZeRO stage 1 and 2 (trainer_strategy.h): the optimizer state
 * sharded over the data-parallel ranks, as DeepSpeed's ZeRO and PyTorch's
 * ZeroRedundancyOptimizer / FSDP SHARD_GRAD_OP do.
 *
 * The shard of rank r (tf_zero_shard) is a contiguous range of the model's
 * flat buffers: block r of the first W * (n / W) elements, and for the last
 * rank also the n % W (< W) elements past them. Its AdamW moments cover that
 * range only (trainer.c allocates t->opt_n of each). A step:
 *
 *   stage 1  gradients all-reduced (average) in DDP's buckets, overlapping
 *            the last backward; each rank unscales, clips and steps its shard;
 *   stage 2  after the last backward, the gradients reduce-scattered
 *            (average) into the owners' blocks (the tail all-reduced), so
 *            each rank receives only its shard's sum; then the same step;
 *   both     overflow and the gradient norm agreed by all-reducing each
 *            rank's part, then the updated parameters all-gathered (the tail
 *            broadcast from the last rank), so every rank holds the whole
 *            model for the next forward.
 *
 * The model's f32 parameter buffer is its forward weights, so it stays whole
 * on every rank, and its flat gradient buffer stays whole too (backward
 * writes every element): the memory ZeRO saves here is the optimizer state,
 * 2 x n x 4 bytes become 2 x n / W x 4 per rank. Stage 2 moves half the
 * bytes of stage 1's all-reduce but gives up the overlap with backward. */
#include <math.h>

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

static tf_status start_reduce_scatter(tf_trainer *t, void *buf, size_t count, tf_comm_request **req,
                                      tf_error *err)
{
    return t->cvt->reduce_scatter(t->comm, buf, count, TF_DTYPE_F32, TF_REDUCE_AVG, req, err);
}

static tf_status start_all_gather(tf_trainer *t, void *buf, size_t count, tf_comm_request **req, tf_error *err)
{
    return t->cvt->all_gather(t->comm, buf, count, TF_DTYPE_F32, req, err);
}

static tf_status start_allreduce_avg(tf_trainer *t, void *buf, size_t count, tf_comm_request **req, tf_error *err)
{
    return t->cvt->allreduce_start(t->comm, buf, count, TF_DTYPE_F32, TF_REDUCE_AVG, req, err);
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

static tf_grads_ready_fn zero2_hook(tf_trainer *t, bool last, void **user)
{
    (void)t;
    (void)last;
    *user = NULL;
    return NULL;
}

/* each owner's block averaged over the ranks, and the tail everywhere */
static tf_status zero2_reduce(tf_trainer *t, tf_error *err)
{
    size_t b = block_of(t), lo = b * (size_t)t->world;
    tf_status st = collective(t, TF_COMM_REDUCE_SCATTER, start_reduce_scatter, t->buf.grads, b,
                              lo * sizeof(float), err);
    if (!st && t->buf.n > lo)
        st = collective(t, TF_COMM_ALLREDUCE, start_allreduce_avg, t->buf.grads + lo, t->buf.n - lo,
                        (t->buf.n - lo) * sizeof(float), err);
    return st;
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
                                       zero1_reduce, zero_overflow, zero_norm, zero_after};
const tf_strategy tf_strategy_zero2 = {"zero2",      false,         true,      zero_init, zero_free, zero2_hook,
                                       zero2_reduce, zero_overflow, zero_norm, zero_after};

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
