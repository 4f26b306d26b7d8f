/* comm_nccl.c — the "nccl" comm plugin: DDP-style gradient all-reduce over
 * NCCL, one process per GPU (tfcore forks them, or mpirun/srun starts them).
 *
 * Streams. The backend computes on its default stream. Every collective of
 * this plugin runs on one comm stream (created through the backend; its
 * cudaStream_t comes from the backend's native_stream slot), ordered after
 * what the default stream holds at the time of the call (an event), so the
 * all-reduce of one gradient bucket overlaps with the backward of the layers
 * still to come. wait() orders the default stream after the reduction
 * (another event): the host never blocks there. The host blocks only in
 * reduce, broadcast, barrier and finalize, and there it polls the comm
 * stream, NCCL's asynchronous error state, the other ranks' failure flag
 * (launcher) and abort(), with a timeout: a dead peer gives an error, not a
 * hang. Events come from a pool that grows to the number of buckets in
 * flight during the first step and is reused afterwards.
 *
 * Point-to-point (send / recv, a pipeline's activations and gradients) is in
 * nccl_p2p.c: those requests are held on the host and issued together as one
 * NCCL group when one of them is waited for.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "tfcore/dtype.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

#include "nccl_comm.h"

#define POOL_INITIAL 8
#define NCCL_MIN_VERSION 21000 /* 2.10.0: ncclAvg */

/* What the collective does, for the enqueue. */
typedef enum coll_kind { COLL_ALLREDUCE, COLL_REDUCE, COLL_BROADCAST, COLL_REDUCE_SCATTER, COLL_ALL_GATHER } coll_kind;
typedef struct coll {
    coll_kind kind;
    void *buf;
    size_t count; /* elements of `type`; the sharded kinds: of each rank's block */
    size_t esize; /* the sharded kinds: bytes of one element */
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
} coll;

/* --- errors ----------------------------------------------------------------- */

/* NCCL's last-error text may hold newlines; a tf_error is one line. */
static void flatten(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

static tf_status cuda_fail(const tf_comm *c, tf_error *err, const char *what, const char *call,
                           cudaError_t e)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: %s failed: %s (%s)", c->rank,
                        what, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* last: ncclGetLastError's text, read while the communicator was known alive. */
tf_status nccl_fail(const tf_comm *c, tf_error *err, const char *what, const char *call,
                           ncclResult_t r, const char *last)
{
    bool has_last = last && *last;
    tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: %s failed: %s%s%s%s", c->rank, what,
                 call, ncclGetErrorString(r), has_last ? " (" : "", has_last ? last : "",
                 has_last ? ")" : "");
    flatten(err->msg);
    return TF_ERR_RUNTIME;
}

tf_status nccl_backend_fail(const tf_comm *c, tf_error *err, const char *what, const char *call)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the backend's %s failed",
                        c->rank, what, call);
}

tf_status nccl_aborted_error(const tf_comm *c, tf_error *err, const char *what)
{
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the communicator was aborted: %s",
                        c->rank, what, c->abort_why);
}

/* Mark the communicator dead and ncclCommAbort it (ends its kernels, frees it). */
void nccl_abort_local(tf_comm *c, const char *why)
{
    pthread_mutex_lock(&c->lock);
    if (!atomic_load(&c->aborted)) {
        snprintf(c->abort_why, sizeof c->abort_why, "%s", why && *why ? why : "(no reason given)");
        atomic_store(&c->aborted, true);
    }
    ncclComm_t comm = c->nccl;
    c->nccl = NULL; /* no NCCL call can start on it any more */
    pthread_mutex_unlock(&c->lock);
    if (comm) {
        ncclResult_t r = ncclCommAbort(comm);
        if (r != ncclSuccess)
            tf_log(TF_LOG_WARN, "comm-nccl: rank %d: ncclCommAbort failed: %s", c->rank,
                   ncclGetErrorString(r));
    }
}

/* Aborted by abort(), a failed peer (launcher's flag), or an asynchronous
 * NCCL error (a peer died, the network failed): then abort and say so. */
/* A peer's failure published in the launcher's shared region: stop with its
 * reason (true), abort included. */
static bool peer_failed(tf_comm *c, const char *what, tf_error *err)
{
    int who = -1;
    char why[TF_ERROR_MSG_MAX];
    if (c->boot.kind != NCCL_BOOT_LAUNCHER || !nccl_shared_failed(c->boot.shared, &who, why, sizeof why) ||
        who == c->rank)
        return false;
    tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s stopped: rank %d failed: %s", c->rank, what, who,
                 why);
    nccl_abort_local(c, err->msg);
    return true;
}

static tf_status check_health(tf_comm *c, const char *what, tf_error *err)
{
    if (atomic_load(&c->aborted)) return nccl_aborted_error(c, err, what);
    if (peer_failed(c, what, err)) return TF_ERR_RUNTIME;
    ncclResult_t async = ncclSuccess, r = ncclSuccess;
    char last[512] = "";
    pthread_mutex_lock(&c->lock);
    if (c->nccl) {
        r = ncclCommGetAsyncError(c->nccl, &async);
        if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
            snprintf(last, sizeof last, "%s", ncclGetLastError(c->nccl));
    }
    pthread_mutex_unlock(&c->lock);
    if (r != ncclSuccess) return nccl_fail(c, err, what, "ncclCommGetAsyncError", r, last);
    if (async != ncclSuccess && async != ncclInProgress) {
        /* a peer that fails publishes its reason before it aborts the
         * communicator: if its abort is what broke the collective, its reason
         * may have arrived since the check above */
        if (peer_failed(c, what, err)) return TF_ERR_RUNTIME;
        nccl_fail(c, err, what, "an earlier collective (asynchronous NCCL error)", async, last);
        if (c->boot.kind == NCCL_BOOT_LAUNCHER) nccl_shared_fail(c->boot.shared, c->rank, err->msg);
        nccl_abort_local(c, err->msg);
        return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

/* Every entry point: healthy, and this thread on our GPU. */
tf_status nccl_check_usable(tf_comm *c, const char *what, tf_error *err)
{
    tf_status st = check_health(c, what, err);
    if (st) return st;
    cudaError_t e = cudaSetDevice(c->device);
    return e == cudaSuccess ? TF_OK : cuda_fail(c, err, what, "cudaSetDevice", e);
}

/* --- the request (event) pool ------------------------------------------------ */

static tf_status req_new(tf_comm *c, tf_error *err)
{
    if (c->nreqs == c->cap_reqs) {
        size_t cap = c->cap_reqs ? 2 * c->cap_reqs : 16;
        tf_comm_request **r = realloc(c->reqs, cap * sizeof *r);
        if (!r)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: out of memory for %zu requests",
                                c->rank, cap);
        c->reqs = r;
        c->cap_reqs = cap;
    }
    tf_comm_request *q = calloc(1, sizeof *q);
    if (!q) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: out of memory", c->rank);
    tf_status st = c->bvt->event_create(c->be, &q->ready, err);
    if (!st) st = c->bvt->event_create(c->be, &q->done, err);
    if (st) {
        tf_error_prefix(err, "comm-nccl: rank %d: creating the events of request %zu", c->rank,
                        c->nreqs);
        if (q->ready) c->bvt->event_destroy(c->be, q->ready);
        free(q);
        return st;
    }
    q->magic = NCCL_REQ_MAGIC;
    c->reqs[c->nreqs++] = q;
    q->next_free = c->free_reqs;
    c->free_reqs = q;
    return TF_OK;
}

tf_status nccl_req_get(tf_comm *c, tf_comm_request **out, tf_error *err)
{
    if (!c->free_reqs) {
        tf_status st = req_new(c, err);
        if (st) return st;
    }
    tf_comm_request *q = c->free_reqs;
    c->free_reqs = q->next_free;
    q->next_free = NULL;
    *out = q;
    return TF_OK;
}

void nccl_req_put(tf_comm *c, tf_comm_request *q)
{
    q->in_flight = false;
    q->kind = NCCL_REQ_COLL;
    q->held = false;
    q->next_free = c->free_reqs;
    c->free_reqs = q;
}

/* --- enqueue and host wait ------------------------------------------------- */

/* Order the comm stream after the default stream's current work (the
 * buffer's producer), run the collective there, and mark its end in q->done. */
static tf_status enqueue(tf_comm *c, tf_comm_request *q, const coll *k, const char *what,
                         tf_error *err)
{
    /* sends and receives started before this collective go to NCCL first */
    tf_status held = nccl_p2p_flush(c, what, err);
    if (held) return held;
    if (c->bvt->event_record(c->be, q->ready, NULL) != TF_OK)
        return nccl_backend_fail(c, err, what, "event_record on the default stream");
    if (c->bvt->stream_wait_event(c->be, c->stream, q->ready) != TF_OK)
        return nccl_backend_fail(c, err, what, "stream_wait_event of the comm stream");
    if (k->count > 0) {
        const char *call = "";
        ncclResult_t r = ncclSuccess;
        char last[512] = "";
        pthread_mutex_lock(&c->lock);
        if (!c->nccl) {
            pthread_mutex_unlock(&c->lock);
            return nccl_aborted_error(c, err, what);
        }
        switch (k->kind) {
        case COLL_ALLREDUCE:
            call = "ncclAllReduce";
            r = ncclAllReduce(k->buf, k->buf, k->count, k->type, k->op, c->nccl, c->cu_stream);
            break;
        case COLL_REDUCE:
            call = "ncclReduce";
            r = ncclReduce(k->buf, k->buf, k->count, k->type, k->op, k->root, c->nccl, c->cu_stream);
            break;
        case COLL_BROADCAST:
            call = "ncclBroadcast";
            r = ncclBroadcast(k->buf, k->buf, k->count, k->type, k->root, c->nccl, c->cu_stream);
            break;
        case COLL_REDUCE_SCATTER: /* in place: the own block of buf receives */
            call = "ncclReduceScatter";
            r = ncclReduceScatter(k->buf, (char *)k->buf + (size_t)c->rank * k->count * k->esize, k->count, k->type,
                                  k->op, c->nccl, c->cu_stream);
            break;
        case COLL_ALL_GATHER: /* in place: the own block of buf is the input */
            call = "ncclAllGather";
            r = ncclAllGather((char *)k->buf + (size_t)c->rank * k->count * k->esize, k->buf, k->count, k->type,
                              c->nccl, c->cu_stream);
            break;
        }
        if (r != ncclSuccess) snprintf(last, sizeof last, "%s", ncclGetLastError(c->nccl));
        pthread_mutex_unlock(&c->lock);
        if (r != ncclSuccess) return nccl_fail(c, err, what, call, r, last);
    }
    if (c->bvt->event_record(c->be, q->done, c->stream) != TF_OK)
        return nccl_backend_fail(c, err, what, "event_record on the comm stream");
    return TF_OK;
}

/* Block the host until the comm stream is idle: polls, never a blocking CUDA
 * sync, so that failures and the timeout are seen. */
tf_status nccl_host_wait(tf_comm *c, const char *what, tf_error *err)
{
    /* the launcher's report of an overdue collective comes first (tfcore/comm.h) */
    double deadline = nccl_now_s() + c->opt.timeout_s + TF_COMM_TIMEOUT_GRACE_S, pause = 20e-6;
    for (unsigned polls = 0;; polls++) {
        cudaError_t e = cudaStreamQuery(c->cu_stream);
        /* an aborted communicator's kernels end too: idle is no success then */
        if (e == cudaSuccess) return check_health(c, what, err);
        if (e != cudaErrorNotReady) return cuda_fail(c, err, what, "cudaStreamQuery of the comm stream", e);
        /* "not ready" is not an error; make sure it is not left as CUDA's last
         * error for the backend to find (a real error there stays) */
        if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
        tf_status st = check_health(c, what, err);
        if (st) return st;
        if (nccl_now_s() > deadline) {
            tf_error_set(err, TF_ERR_RUNTIME,
                         "comm-nccl: rank %d: %s did not finish in %g s (comm.timeout_s, and %g s more): "
                         "a rank is stuck or dead; communicator aborted",
                         c->rank, what, c->opt.timeout_s, TF_COMM_TIMEOUT_GRACE_S);
            if (c->boot.kind == NCCL_BOOT_LAUNCHER) nccl_shared_fail(c->boot.shared, c->rank, err->msg);
            nccl_abort_local(c, err->msg);
            return TF_ERR_RUNTIME;
        }
        if (polls < 200) {
            sched_yield();
        } else {
            nccl_sleep_s(pause);
            if (pause < 1e-3) pause *= 2;
        }
    }
}

static tf_status run_blocking(tf_comm *c, const coll *k, const char *what, tf_error *err)
{
    tf_status st = nccl_check_usable(c, what, err);
    if (st) return st;
    tf_comm_request *q = NULL;
    if ((st = nccl_req_get(c, &q, err))) return st;
    st = enqueue(c, q, k, what, err);
    if (!st) st = nccl_host_wait(c, what, err);
    nccl_req_put(c, q);
    return st;
}

/* --- dtypes -------------------------------------------------------------------- */

bool nccl_type_of(tf_dtype dt, ncclDataType_t *t)
{
    switch (dt) {
    case TF_DTYPE_F32: *t = ncclFloat32; return true;
    case TF_DTYPE_F16: *t = ncclFloat16; return true;
    case TF_DTYPE_BF16: *t = ncclBfloat16; return true;
    case TF_DTYPE_F64: *t = ncclFloat64; return true;
    case TF_DTYPE_I32: *t = ncclInt32; return true;
    case TF_DTYPE_I64: *t = ncclInt64; return true;
    case TF_DTYPE_U8: *t = ncclUint8; return true;
    case TF_DTYPE_I8: *t = ncclInt8; return true;
    case TF_DTYPE_U32: *t = ncclUint32; return true;
    case TF_DTYPE_U64: *t = ncclUint64; return true;
    default: return false;
    }
}

static bool is_floating(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16 || dt == TF_DTYPE_F64;
}

const char *nccl_dt_name(tf_dtype dt)
{
    const char *n = tf_dtype_name(dt);
    return n ? n : "(unknown dtype)";
}

/* The arguments of allreduce / reduce, checked. */
static tf_status reduction_args(const tf_comm *c, const char *what, void *buf, size_t count,
                                tf_dtype dt, tf_reduce_op op, coll *k, tf_error *err)
{
    if (!nccl_type_of(dt, &k->type))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: %s: cannot reduce %s (F32, F64, F16, BF16, I32, "
                            "I64, U8, I8, U32, U64 can be)",
                            c->rank, what, nccl_dt_name(dt));
    if (op == TF_REDUCE_SUM)
        k->op = ncclSum;
    else if (op == TF_REDUCE_AVG && is_floating(dt))
        k->op = ncclAvg;
    else if (op == TF_REDUCE_AVG)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: %s: TF_REDUCE_AVG needs a floating-point dtype, "
                            "got %s",
                            c->rank, what, nccl_dt_name(dt));
    else
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: unknown reduce op %d",
                            c->rank, what, (int)op);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the buffer is NULL",
                            c->rank, what);
    k->buf = buf;
    k->count = count;
    k->root = 0;
    return TF_OK;
}

static tf_status check_root(const tf_comm *c, const char *what, int root, tf_error *err)
{
    if (root < 0 || root >= c->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: root %d is not in [0, %d)",
                            c->rank, what, root, c->world_size);
    return TF_OK;
}

/* --- the vtable ----------------------------------------------------------------- */

static tf_status nccl_check_config(tf_section *section, tf_error *err)
{
    nccl_options o;
    return nccl_read_options(section, &o, err);
}

static tf_launch_mode nccl_launch_mode(void) { return TF_LAUNCH_PROCESSES; }
static bool nccl_optimizer_on_root_only(void) { return false; }

static tf_status make_unique_id(ncclUniqueId *id, tf_error *err)
{
    ncclResult_t r = ncclGetUniqueId(id);
    if (r == ncclSuccess) return TF_OK;
    tf_error_set(err, TF_ERR_RUNTIME, "%s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
    flatten(err->msg);
    return TF_ERR_RUNTIME;
}

/* The rank-specific part of init: the GPU, the comm stream, the barrier's
 * scratch word and the first requests. */
static tf_status setup_device(tf_comm *c, int local_rank, tf_error *err)
{
    const char *what = "init";
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess || version < NCCL_MIN_VERSION)
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-nccl: rank %d: the NCCL library loaded is version code %d; "
                            "comm-nccl needs 2.10 or newer (ncclAvg)",
                            c->rank, version);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cuda_fail(c, err, what, "cudaGetDeviceCount", e);
    if (local_rank >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: local rank %d needs CUDA device %d, but %d "
                            "device%s visible (CUDA_VISIBLE_DEVICES=%s)",
                            c->rank, local_rank, local_rank, n, n == 1 ? " is" : "s are",
                            vis ? vis : "(unset)");
    }
    /* The backend's device, not local_rank: backend.device_offset may shift it.
     * Its default stream knows which GPU it belongs to. */
    int dev = local_rank;
    if ((e = cudaStreamGetDevice((cudaStream_t)c->bvt->native_stream(c->be, NULL), &dev)) != cudaSuccess)
        return cuda_fail(c, err, what, "cudaStreamGetDevice", e);
    c->device = dev;
    if ((e = cudaSetDevice(dev)) != cudaSuccess)
        return cuda_fail(c, err, what, "cudaSetDevice", e);
    tf_status st = c->bvt->stream_create(c->be, &c->stream, err);
    if (st) {
        tf_error_prefix(err, "comm-nccl: rank %d: creating the comm stream", c->rank);
        return st;
    }
    c->cu_stream = (cudaStream_t)c->bvt->native_stream(c->be, c->stream);
    if (!c->cu_stream)
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-nccl: rank %d: the backend gave no native CUDA stream for the "
                            "comm stream it created",
                            c->rank);
    void *scratch = NULL;
    if ((st = c->bvt->alloc(c->be, 4 * sizeof(uint32_t), TF_MEM_DEVICE, &scratch, err))) {
        tf_error_prefix(err, "comm-nccl: rank %d: barrier scratch", c->rank);
        return st;
    }
    c->scratch = scratch;
    if (c->bvt->memset(c->be, c->scratch, 0, 4 * sizeof(uint32_t), c->stream) != TF_OK)
        return nccl_backend_fail(c, err, what, "memset of the barrier scratch");
    for (int i = 0; i < POOL_INITIAL; i++)
        if ((st = req_new(c, err))) return st;
    return TF_OK;
}

static void teardown(tf_comm *c, bool clean)
{
    if (c->nccl) {
        ncclResult_t r = ncclSuccess;
        if (clean && (r = ncclCommFinalize(c->nccl)) == ncclSuccess) {
            r = ncclCommDestroy(c->nccl);
            if (r != ncclSuccess)
                tf_log(TF_LOG_WARN, "comm-nccl: rank %d: ncclCommDestroy failed: %s", c->rank,
                       ncclGetErrorString(r));
        } else {
            if (clean)
                tf_log(TF_LOG_WARN, "comm-nccl: rank %d: ncclCommFinalize failed: %s; aborting",
                       c->rank, ncclGetErrorString(r));
            ncclCommAbort(c->nccl);
        }
        c->nccl = NULL;
    }
    for (size_t i = 0; i < c->nreqs; i++) {
        c->bvt->event_destroy(c->be, c->reqs[i]->ready);
        c->bvt->event_destroy(c->be, c->reqs[i]->done);
        free(c->reqs[i]);
    }
    free(c->reqs);
    free(c->held);
    if (c->scratch) c->bvt->free(c->be, c->scratch, TF_MEM_DEVICE);
    if (c->stream) c->bvt->stream_destroy(c->be, c->stream);
    nccl_boot_end(&c->boot, clean);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static tf_status nccl_init(const tf_comm_init_args *args, tf_comm **out, tf_error *err)
{
    if (!args || !out)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: init: NULL %s", !args ? "args" : "out");
    *out = NULL;
    if (args->size < offsetof(tf_comm_init_args, shared) + sizeof args->shared)
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-nccl: init: the core's init args are %u bytes, fewer than the "
                            "%zu comm-nccl reads",
                            args->size, offsetof(tf_comm_init_args, shared) + sizeof args->shared);
    if (args->world_size < 1 || args->rank < 0 || args->rank >= args->world_size ||
        args->local_rank < 0)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: init: rank %d, world_size %d, local_rank %d are not a valid "
                            "placement",
                            args->rank, args->world_size, args->local_rank);
    if (!args->backend || !args->be)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: init: no backend", args->rank);
    double timeout_s = TF_COMM_TIMEOUT_DEFAULT; /* the core's comm.timeout_s (ABI 1.4) */
    if (args->size >= offsetof(tf_comm_init_args, timeout_s) + sizeof args->timeout_s)
        timeout_s = args->timeout_s;
    if (!(timeout_s >= TF_COMM_TIMEOUT_MIN && timeout_s <= TF_COMM_TIMEOUT_MAX))
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: init: timeout_s %g is outside [%g, %g]",
                            args->rank, timeout_s, TF_COMM_TIMEOUT_MIN, TF_COMM_TIMEOUT_MAX);
    const tf_backend_vtable *bvt = args->backend;
    /* The same on every rank, so every rank fails here at once. */
    if (!TF_HAS(bvt, native_stream)) {
        const char *name = bvt->device_name ? bvt->device_name(args->be) : NULL;
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-nccl needs a CUDA backend (backend \"%s\" has no native streams)",
                            name ? name : "without a device name");
    }

    tf_comm *c = calloc(1, sizeof *c);
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: out of memory", args->rank);
    c->bvt = bvt;
    c->be = args->be;
    c->rank = args->rank;
    c->world_size = args->world_size;
    c->device = args->local_rank;
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->aborted, false);

    tf_status st = nccl_read_options(args->section, &c->opt, err);
    c->opt.timeout_s = timeout_s;
    if (!st) st = nccl_boot_resolve(&c->boot, &c->opt, c->rank, c->world_size, args->shared, err);
    if (st) {
        nccl_shared_fail(args->shared, c->rank, err->msg);
        teardown(c, false);
        return st;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->boot.kind == NCCL_BOOT_FILE && c->rank == 0) {
        /* The file is the only channel of that bootstrap: rank 0 hands out
         * the id only once its own GPU works, else it writes its failure. */
        st = setup_device(c, args->local_rank, err);
        if (st) nccl_boot_fail(&c->boot, err->msg);
        else st = nccl_boot_exchange(&c->boot, make_unique_id, &id, err);
    } else {
        st = nccl_boot_exchange(&c->boot, make_unique_id, &id, err);
        if (!st) st = setup_device(c, args->local_rank, err);
    }
    /* every rank learns whether all got this far (not in file mode: no channel) */
    st = nccl_boot_agree(&c->boot, st, err, err);
    if (!st) {
        ncclResult_t r = ncclCommInitRank(&c->nccl, c->world_size, id, c->rank);
        if (r != ncclSuccess) {
            c->nccl = NULL;
            st = nccl_fail(c, err, "init", "ncclCommInitRank", r, ncclGetLastError(NULL));
        }
    }
    if (st) {
        nccl_boot_fail(&c->boot, err->msg);
        teardown(c, false);
        return st;
    }
    nccl_boot_done(&c->boot);
    int version = 0;
    ncclGetVersion(&version);
    tf_log(TF_LOG_DEBUG, "comm-nccl: rank %d of %d on CUDA device %d, NCCL %d.%d.%d, bootstrap %s",
           c->rank, c->world_size, c->device, version / 10000, version / 100 % 100, version % 100,
           nccl_boot_name(c->boot.kind));
    *out = c;
    return TF_OK;
}

static void nccl_finalize(tf_comm *c)
{
    if (!c) return;
    bool clean = !atomic_load(&c->aborted);
    if (clean) {
        tf_error e;
        cudaError_t ce = cudaSetDevice(c->device);
        if (ce != cudaSuccess || nccl_p2p_flush(c, "finalize", &e) != TF_OK ||
            nccl_host_wait(c, "finalize", &e) != TF_OK) {
            if (ce != cudaSuccess) cuda_fail(c, &e, "finalize", "cudaSetDevice", ce);
            tf_log(TF_LOG_WARN, "%s", e.msg);
            clean = false;
        }
    }
    teardown(c, clean);
}

static tf_status nccl_allreduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt,
                                      tf_reduce_op op, tf_comm_request **req, tf_error *err)
{
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: allreduce_start: NULL %s",
                            !c ? "communicator" : "request pointer");
    *req = NULL;
    char what[96];
    snprintf(what, sizeof what, "allreduce of %zu %s", count, nccl_dt_name(dt));
    coll k = {.kind = COLL_ALLREDUCE};
    tf_status st = reduction_args(c, what, buf, count, dt, op, &k, err);
    if (!st) st = nccl_check_usable(c, what, err);
    if (st) return st;
    tf_comm_request *q = NULL;
    if ((st = nccl_req_get(c, &q, err))) return st;
    if ((st = enqueue(c, q, &k, what, err))) {
        nccl_req_put(c, q);
        return st;
    }
    q->in_flight = true;
    *req = q;
    return TF_OK;
}

/* reduce_scatter / all_gather (ABI 1.4): buf[count * world], in place,
 * asynchronous like allreduce_start (the comm stream, then wait). */
static tf_status sharded_start(tf_comm *c, coll *k, const char *what, void *buf, size_t count, tf_dtype dt,
                               tf_comm_request **req, tf_error *err)
{
    *req = NULL;
    size_t es = tf_dtype_size(dt);
    if (es == 0) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: unknown dtype %d", c->rank, what, (int)dt);
    if (count > SIZE_MAX / es / (size_t)c->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the size overflows", c->rank, what);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the buffer is NULL", c->rank, what);
    k->buf = buf;
    k->count = count;
    k->esize = es;
    tf_status st = nccl_check_usable(c, what, err);
    if (st) return st;
    tf_comm_request *q = NULL;
    if ((st = nccl_req_get(c, &q, err))) return st;
    if ((st = enqueue(c, q, k, what, err))) {
        nccl_req_put(c, q);
        return st;
    }
    q->in_flight = true;
    *req = q;
    return TF_OK;
}

static tf_status nccl_reduce_scatter(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                                     tf_comm_request **req, tf_error *err)
{
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: reduce_scatter: NULL %s",
                            !c ? "communicator" : "request pointer");
    char what[112];
    snprintf(what, sizeof what, "reduce-scatter of %zu %s a rank", count, nccl_dt_name(dt));
    coll k = {.kind = COLL_REDUCE_SCATTER};
    tf_status st = reduction_args(c, what, buf, count, dt, op, &k, err);
    return st ? st : sharded_start(c, &k, what, buf, count, dt, req, err);
}

static tf_status nccl_all_gather(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_comm_request **req,
                                 tf_error *err)
{
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: all_gather: NULL %s",
                            !c ? "communicator" : "request pointer");
    char what[112];
    snprintf(what, sizeof what, "all-gather of %zu %s a rank", count, nccl_dt_name(dt));
    coll k = {.kind = COLL_ALL_GATHER, .op = ncclSum};
    if (!nccl_type_of(dt, &k.type)) {
        k.type = ncclUint8; /* a type NCCL does not name travels as its bytes */
        size_t es = tf_dtype_size(dt);
        if (es == 0 || count > SIZE_MAX / es)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: unknown dtype or the size overflows",
                                c->rank, what);
        return sharded_start(c, &k, what, buf, count * es, TF_DTYPE_U8, req, err);
    }
    return sharded_start(c, &k, what, buf, count, dt, req, err);
}

/* reduce_start (ABI 1.5): ncclReduce in place to root on the comm stream,
 * asynchronous like allreduce_start. */
static tf_status nccl_reduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op, int root,
                                   tf_comm_request **req, tf_error *err)
{
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: reduce_start: NULL %s",
                            !c ? "communicator" : "request pointer");
    *req = NULL;
    char what[112];
    snprintf(what, sizeof what, "reduce of %zu %s to root %d", count, nccl_dt_name(dt), root);
    coll k = {.kind = COLL_REDUCE};
    tf_status st = check_root(c, what, root, err);
    if (!st) st = reduction_args(c, what, buf, count, dt, op, &k, err);
    if (!st) st = nccl_check_usable(c, what, err);
    if (st) return st;
    k.root = root;
    tf_comm_request *q = NULL;
    if ((st = nccl_req_get(c, &q, err))) return st;
    if ((st = enqueue(c, q, &k, what, err))) {
        nccl_req_put(c, q);
        return st;
    }
    q->in_flight = true;
    *req = q;
    return TF_OK;
}

static tf_status nccl_wait(tf_comm *c, tf_comm_request *q, tf_error *err)
{
    if (!c || !q)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: wait: NULL %s",
                            !c ? "communicator" : "request");
    if (q->magic != NCCL_REQ_MAGIC || !q->in_flight)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: wait: the request is not in flight (waited for "
                            "twice, or not from a start call)",
                            c->rank);
    if (q->kind != NCCL_REQ_COLL) return nccl_p2p_wait(c, q, err);
    tf_status st;
    if (atomic_load(&c->aborted))
        st = nccl_aborted_error(c, err, "wait");
    else if (c->bvt->stream_wait_event(c->be, NULL, q->done) != TF_OK)
        st = nccl_backend_fail(c, err, "wait", "stream_wait_event of the default stream");
    else
        st = check_health(c, "wait", err);
    nccl_req_put(c, q);
    return st;
}

static tf_status nccl_reduce(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                             int root, tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: reduce: NULL communicator");
    char what[112];
    snprintf(what, sizeof what, "reduce of %zu %s to root %d", count, nccl_dt_name(dt), root);
    coll k = {.kind = COLL_REDUCE};
    tf_status st = check_root(c, what, root, err);
    if (!st) st = reduction_args(c, what, buf, count, dt, op, &k, err);
    if (st) return st;
    k.root = root;
    return run_blocking(c, &k, what, err);
}

static tf_status nccl_broadcast(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                                tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: broadcast: NULL communicator");
    char what[112];
    snprintf(what, sizeof what, "broadcast of %zu %s from root %d", count, nccl_dt_name(dt), root);
    tf_status st = check_root(c, what, root, err);
    if (st) return st;
    coll k = {.kind = COLL_BROADCAST, .buf = buf, .count = count, .op = ncclSum, .root = root};
    if (!nccl_type_of(dt, &k.type)) {
        /* a type NCCL does not name travels as its bytes */
        size_t es = tf_dtype_size(dt);
        if (es == 0)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: unknown dtype %d",
                                c->rank, what, (int)dt);
        if (count > SIZE_MAX / es)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the size overflows",
                                c->rank, what);
        k.type = ncclUint8;
        k.count = count * es;
    }
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the buffer is NULL",
                            c->rank, what);
    return run_blocking(c, &k, what, err);
}

static tf_status nccl_barrier(tf_comm *c, tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: barrier: NULL communicator");
    coll k = {.kind = COLL_ALLREDUCE, .buf = c->scratch, .count = 1, .type = ncclUint32,
              .op = ncclSum, .root = 0};
    return run_blocking(c, &k, "barrier", err);
}

static void nccl_abort(tf_comm *c, const char *why)
{
    if (!c) return;
    char msg[TF_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", why && *why ? why : "(no reason given)");
    if (c->boot.kind == NCCL_BOOT_LAUNCHER) nccl_shared_fail(c->boot.shared, c->rank, msg);
    nccl_abort_local(c, msg);
}

static const tf_comm_vtable nccl_vtable = {
    .size = TF_VTABLE_SIZE(tf_comm_vtable),
    .check_config = nccl_check_config,
    .launch_mode = nccl_launch_mode,
    .optimizer_on_root_only = nccl_optimizer_on_root_only,
    .init = nccl_init,
    .finalize = nccl_finalize,
    .allreduce_start = nccl_allreduce_start,
    .wait = nccl_wait,
    .reduce = nccl_reduce,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .reduce_scatter = nccl_reduce_scatter,
    .all_gather = nccl_all_gather,
    .send = nccl_send,
    .recv = nccl_recv,
    .reduce_start = nccl_reduce_start,
};

TF_PLUGIN_DEFINE(TF_KIND_COMM, "nccl", "1.0.0",
                 "DDP: bucketed asynchronous gradient all-reduce over NCCL, one process per GPU",
                 nccl_probe, &nccl_vtable)
