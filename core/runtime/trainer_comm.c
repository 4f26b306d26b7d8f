/* trainer_comm.c — what the trainer asks of the comm plugin: setting it up
 * for this worker, collectives on host values (losses, flags, evaluation
 * logits) staged through backend memory when the backend's memory is not the
 * host's, and the whole-buffer collectives the strategies use (trainer_strategy.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_peers.h"
#include "trainer_pipeline.h"
#include "trainer_strategy.h"
#include "trainer_internal.h"
#include "tfcore/log.h"

static bool host_backend(const tf_trainer *t)
{
    return TF_HAS(t->bvt, host_memory) && t->bvt->host_memory(t->be);
}

/* The heartbeat across machines (comm_peers.h): every rank's address in one
 * all-reduce (always, so that the ranks' collectives stay in step), then a
 * thread. A rank that cannot have one trains without it (a warning). */
static tf_status start_peers(tf_trainer *t, tf_error *err)
{
    size_t n = (size_t)t->w.world * TF_COMM_PEERS_SLOT;
    double *exchange = calloc(n, sizeof *exchange);
    if (!exchange) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for the heartbeat's addresses");
    tf_error why = {0};
    if (tf_comm_peers_open(t->w.rank, t->w.world, &t->peers, &why) == TF_OK) tf_comm_peers_fill(t->peers, exchange);
    tf_status st = tf_trainer_allreduce_host(t, exchange, n, TF_DTYPE_F64, TF_REDUCE_SUM, err);
    if (!st && t->peers && tf_comm_peers_start(t->peers, exchange, t->rec, &why) != TF_OK) {
        tf_comm_peers_close(t->peers);
        t->peers = NULL;
    }
    if (!t->peers) tf_warn("%s: no heartbeat across machines from this rank", why.msg);
    free(exchange);
    return st;
}

tf_status tf_trainer_comm_init(tf_trainer *t, tf_error *err)
{
    const tf_worker *w = &t->w;
    if (!w->cvt) return TF_OK;
    t->cvt = w->cvt;
    tf_comm_init_args a = {sizeof a,  tf_config_section(t->plan->cfg, "comm"), w->rank, w->world, w->local_rank,
                           t->bvt,    t->be,                                  w->shared, w->local_world,
                           t->plan->comm.timeout_s};
    /* the flight recorder: the launcher's, or one of this rank's own */
    if (w->recorder) {
        t->rec = &w->recorder->rank[w->rank];
    } else {
        if (!(t->rec_own = calloc(1, tf_comm_recorder_bytes(1))))
            return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for the collectives' recorder");
        tf_comm_recorder_init(t->rec_own, 1);
        t->rec = &t->rec_own->rank[0];
    }
    t->rec->pid = (int32_t)getpid();
    /* threads share one process: a beat would say nothing about one of them */
    if (w->mode != TF_LAUNCH_THREADS) t->heartbeat = tf_comm_heartbeat_start(t->rec);
    tf_status st = t->cvt->init(&a, &t->comm, err);
    if (st) {
        tf_error_prefix(err, "comm %s, rank %d of %d", t->plan->plugin[TF_KIND_COMM]->desc->name, w->rank,
                        w->world);
        return st;
    }
    FILE *trace = NULL;
    const char *tp = getenv("TFCORE_TRACE_COMM");
    if (tp && *tp) {
        char path[4096];
        snprintf(path, sizeof path, "%s.rank%d", tp, w->rank);
        if (!(trace = fopen(path, "w")))
            return tf_error_set(err, TF_ERR_RUNTIME, "TFCORE_TRACE_COMM: cannot open %s", path);
    }
    if ((st = t->strategy->init(t, trace, err))) return st;
    if ((st = t->bvt->alloc(t->be, TF_COMM_SCRATCH_BYTES, TF_MEM_DEVICE, &t->comm_scratch, err))) return st;
    /* ranks no launcher on this machine watches (mpirun across machines, srun) */
    if (w->mode == TF_LAUNCH_EXTERNAL && w->world > 1 && !w->recorder && (st = start_peers(t, err)))
        return st;
    return t->plan->pipeline.stages > 1 ? tf_pipeline_setup(t, err) : TF_OK;
}

void tf_trainer_comm_finalize(tf_trainer *t)
{
    if (t->comm) {
        t->strategy->free(t);
        if (t->comm_scratch) t->bvt->free(t->be, t->comm_scratch, TF_MEM_DEVICE);
        t->comm_scratch = NULL;
        t->cvt->finalize(t->comm);
        t->comm = NULL;
    }
    tf_comm_peers_close(t->peers);
    t->peers = NULL;
    tf_comm_rec_where(t->rec, TF_WHERE_DONE, t->global_step, 0);
    tf_comm_heartbeat_stop(t->heartbeat);
    t->heartbeat = NULL;
    t->rec = NULL;
    free(t->rec_own);
    t->rec_own = NULL;
}

void tf_trainer_comm_abort(tf_trainer *t, const char *why)
{
    if (t->comm && TF_HAS(t->cvt, abort)) t->cvt->abort(t->comm, why);
}

/* Collective seq returned: it left it. A failed one stays the one the rank
 * is in, for the launcher's report (comm_recorder.h). */
static void unblock(tf_comm_rank_log *rec, uint64_t seq)
{
    tf_comm_rec_exit(rec, seq);
    tf_comm_rec_block(rec, 0);
}

/* Run op on host[count] through backend memory: directly for a host backend,
 * else through the scratch (small) or a temporary buffer (large). */
typedef tf_status (*collective_fn)(tf_trainer *t, void *buf, size_t count, tf_dtype dt, int arg, tf_error *err);

static tf_status staged(tf_trainer *t, void *host, size_t count, tf_dtype dt, int arg, collective_fn fn,
                        tf_comm_kind kind, tf_error *err)
{
    double t0 = tf_now();
    /* recorded up to the result on the host: a plugin whose wait only orders
     * streams (nccl) completes here, in the copy back */
    uint64_t seq = tf_comm_rec_enter(t->rec, kind, count * tf_dtype_size(dt), 0, 0);
    tf_comm_rec_block(t->rec, seq);
    tf_status st;
    if (host_backend(t)) {
        st = fn(t, host, count, dt, arg, err);
    } else {
        size_t bytes = count * tf_dtype_size(dt);
        void *dev = t->comm_scratch;
        if (bytes > TF_COMM_SCRATCH_BYTES && (st = t->bvt->alloc(t->be, bytes, TF_MEM_DEVICE, &dev, err)))
            return st;
        st = t->bvt->memcpy(t->be, dev, host, bytes, TF_COPY_HOST_TO_DEVICE, NULL);
        if (st) st = tf_error_set(err, st, "copying %zu bytes to the backend for a collective failed", bytes);
        if (!st) st = fn(t, dev, count, dt, arg, err);
        if (!st && (st = t->bvt->memcpy(t->be, host, dev, bytes, TF_COPY_DEVICE_TO_HOST, NULL)))
            st = tf_error_set(err, st, "copying %zu bytes back from the backend after a collective failed", bytes);
        if (!st) st = t->bvt->stream_sync(t->be, NULL, err);
        if (dev != t->comm_scratch) t->bvt->free(t->be, dev, TF_MEM_DEVICE);
    }
    if (!st) unblock(t->rec, seq);
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

static tf_status do_allreduce(tf_trainer *t, void *buf, size_t count, tf_dtype dt, int op, tf_error *err)
{
    tf_comm_request *req = NULL;
    tf_status st = t->cvt->allreduce_start(t->comm, buf, count, dt, (tf_reduce_op)op, &req, err);
    return st ? st : t->cvt->wait(t->comm, req, err);
}

static tf_status do_broadcast(tf_trainer *t, void *buf, size_t count, tf_dtype dt, int root, tf_error *err)
{
    return t->cvt->broadcast(t->comm, buf, count, dt, root, err);
}

tf_status tf_trainer_allreduce_host(tf_trainer *t, void *host, size_t count, tf_dtype dt, tf_reduce_op op,
                                    tf_error *err)
{
    if (!t->comm || count == 0) return TF_OK;
    return staged(t, host, count, dt, (int)op, do_allreduce, TF_COMM_ALLREDUCE, err);
}

tf_status tf_trainer_broadcast_host(tf_trainer *t, void *host, size_t count, tf_dtype dt, int root, tf_error *err)
{
    if (!t->comm || count == 0) return TF_OK;
    return staged(t, host, count, dt, root, do_broadcast, TF_COMM_BROADCAST, err);
}

tf_status tf_trainer_broadcast_params(tf_trainer *t, tf_error *err)
{
    if (!t->comm) return TF_OK;
    double t0 = tf_now();
    uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_BROADCAST, t->buf.n * sizeof(float), 0, 0);
    tf_comm_rec_block(t->rec, seq);
    tf_status st = t->cvt->broadcast(t->comm, t->buf.params, t->buf.n, TF_DTYPE_F32, 0, err);
    if (!st) unblock(t->rec, seq);
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}

tf_status tf_trainer_reduce_to_root(tf_trainer *t, tf_error *err)
{
    double t0 = tf_now();
    uint64_t seq = tf_comm_rec_enter(t->rec, TF_COMM_REDUCE, t->buf.n * sizeof(float), 0, 0);
    tf_comm_rec_block(t->rec, seq);
    tf_status st = t->cvt->reduce(t->comm, t->buf.grads, t->buf.n, TF_DTYPE_F32, TF_REDUCE_SUM, 0, err);
    if (!st) unblock(t->rec, seq);
    double d = tf_now() - t0;
    t->phase[TF_PHASE_COMM] += d;
    t->comm_exposed += d;
    return st;
}
