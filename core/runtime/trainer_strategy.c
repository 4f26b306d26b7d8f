/* trainer_strategy.c — choosing a worker's parallel strategy, and the three that
 * keep every parameter's optimizer state on one rank or all: none, ddp,
 * dataparallel (trainer_strategy.h). ZeRO's are in trainer_zero.c. */
#include "trainer_pipeline.h"
#include "trainer_strategy.h"
#include "trainer_internal.h"

void tf_strategy_pick(tf_trainer *t)
{
    t->opt_lo = 0;
    t->opt_n = t->buf.n;
    if (!t->w.cvt) {
        t->strategy = &tf_strategy_none;
    } else if (t->plan->pipeline.stages > 1) { /* plan refuses it with DataParallel or ZeRO */
        t->strategy = &tf_strategy_pipeline;
    } else if (t->w.cvt->optimizer_on_root_only()) {
        t->strategy = &tf_strategy_dataparallel;
        if (t->rank != 0) t->opt_n = 0; /* only the root steps */
    } else if (t->plan->comm.zero_stage > 0) {
        t->strategy = t->plan->comm.zero_stage == 1 ? &tf_strategy_zero1 : &tf_strategy_zero2;
        tf_zero_shard(t->buf.n, t->world, t->rank, &t->opt_lo, &t->opt_n);
    } else {
        t->strategy = &tf_strategy_ddp;
    }
}

/* --- none: one worker ----------------------------------------------------- */

static tf_status no_init(tf_trainer *t, FILE *trace, tf_error *err)
{
    (void)t;
    (void)err;
    if (trace) fclose(trace);
    return TF_OK;
}
static void no_free(tf_trainer *t) { (void)t; }
static tf_grads_ready_fn no_hook(tf_trainer *t, bool last, void **user)
{
    (void)t;
    (void)last;
    *user = NULL;
    return NULL;
}
static tf_status no_reduce(tf_trainer *t, tf_error *err)
{
    (void)t;
    (void)err;
    return TF_OK;
}
static tf_status no_overflow(tf_trainer *t, bool *found_inf, tf_error *err)
{
    (void)t;
    (void)found_inf;
    (void)err;
    return TF_OK;
}
static tf_status no_norm(tf_trainer *t, double *sq, tf_error *err)
{
    (void)t;
    (void)sq;
    (void)err;
    return TF_OK;
}
static tf_status no_after(tf_trainer *t, bool skipped, tf_error *err)
{
    (void)t;
    (void)skipped;
    (void)err;
    return TF_OK;
}

const tf_strategy tf_strategy_none = {"none", false, false, no_init, no_free, no_hook, no_reduce, no_overflow, no_norm,
                                      no_after, NULL};

/* --- ddp: bucketed all-reduce overlapping the last backward --------------- */

static tf_status ddp_init(tf_trainer *t, FILE *trace, tf_error *err)
{
    tf_status st = tf_grad_buckets_init(&t->buckets, t->cvt, t->comm, t->buf.grads, t->buf.n,
                                        t->plan->comm.bucket_mb, trace, err);
    t->buckets.rec = t->rec;
    return st;
}

static void ddp_free(tf_trainer *t) { tf_grad_buckets_free(&t->buckets); }

static tf_grads_ready_fn ddp_hook(tf_trainer *t, bool last, void **user)
{
    *user = NULL;
    if (!last) return NULL; /* accumulation: gradients are final after the last backward */
    tf_grad_buckets_begin(&t->buckets);
    *user = &t->buckets;
    return tf_grad_buckets_ready;
}

static tf_status ddp_reduce(tf_trainer *t, tf_error *err)
{
    double span, exposed;
    tf_status st = tf_grad_buckets_finish(&t->buckets, &span, &exposed, err);
    t->phase[TF_PHASE_COMM] += span;
    t->comm_exposed += exposed;
    return st;
}

const tf_strategy tf_strategy_ddp = {"ddp", false, false, ddp_init, ddp_free, ddp_hook, ddp_reduce, no_overflow, no_norm,
                                     no_after, NULL};

/* --- dataparallel: reduce to the root, the root steps, broadcast ---------- */

static tf_status dp_reduce(tf_trainer *t, tf_error *err) { return tf_trainer_reduce_to_root(t, err); }

/* every replica's loss scaler moves as rank 0's */
static tf_status dp_overflow(tf_trainer *t, bool *found_inf, tf_error *err)
{
    int32_t f = *found_inf;
    tf_status st = tf_trainer_broadcast_host(t, &f, 1, TF_DTYPE_I32, 0, err);
    *found_inf = f != 0;
    return st;
}

static tf_status dp_after(tf_trainer *t, bool skipped, tf_error *err)
{
    return skipped ? TF_OK : tf_trainer_broadcast_params(t, err);
}

const tf_strategy tf_strategy_dataparallel = {"dataparallel", true, false, no_init,     no_free, no_hook,
                                              dp_reduce,      dp_overflow, no_norm, dp_after, NULL};

/* --- pipeline: the stages' step (trainer_pipeline.c) reduces each stage's
 * gradients over its replicas itself; the optimizer step, over the stage's
 * own range, only makes the overflow check and the gradient norm the whole
 * model's ------------------------------------------------------------------ */

/* an overflow in any stage skips the step in all */
static tf_status pipe_overflow(tf_trainer *t, bool *found_inf, tf_error *err)
{
    double f = *found_inf;
    tf_status st = tf_pipeline_sum(t, &f, 1, err);
    *found_inf = f > 0;
    return st;
}

/* each stage holds its own parameters' gradients: the norm is over all stages */
static tf_status pipe_norm(tf_trainer *t, double *sq, tf_error *err) { return tf_pipeline_sum(t, sq, 1, err); }

/* sharded: a stage's optimizer range is its own parameters (tf_pipeline_own_state) */
const tf_strategy tf_strategy_pipeline = {"pipeline", false, true, no_init,   no_free,  no_hook,
                                          no_reduce,  pipe_overflow, pipe_norm, no_after, NULL};
