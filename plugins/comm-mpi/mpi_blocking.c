/* mpi_blocking.c — the collectives that return when done: reduce to a root,
 * broadcast from a root, barrier. Each is MPI's non-blocking form waited by
 * cm_poll, so a rank waits without spinning and never past comm.timeout_s
 * (+ the grace), as the all-reduce. Device buffers follow the comm's path (as is, after a
 * stream sync, or staged through one pinned host buffer kept in the comm);
 * buffers longer than chunk_elements go as several MPI calls. The whole
 * operation holds cm_lock: the staging buffer is the comm's, and the progress
 * thread must not test requests meanwhile. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_mpi.h"

/* Room for the requests of n chunks (the comm's, grown only). */
static tf_status chunk_requests(tf_comm *c, size_t n, const char *op, MPI_Request **out, tf_error *err)
{
    if (n > c->blocking_reqs_cap) {
        MPI_Request *p = realloc(c->blocking_reqs, n * sizeof *p);
        if (!p) return cm_fail(c, err, "%s: out of memory for %zu MPI requests", op, n);
        c->blocking_reqs = p;
        c->blocking_reqs_cap = n;
    }
    *out = c->blocking_reqs;
    return TF_OK;
}

/* Wait for the n requests of a collective started at t0: without spinning,
 * and not past comm.timeout_s (+ the grace). On a timeout MPI still holds
 * the open ones: they are left to it (the core stops the job; finalize then
 * skips MPI_Finalize), and a later call gets a new array. */
static tf_status wait_chunks(tf_comm *c, MPI_Request *reqs, size_t n, double t0, const char *what, tf_error *err)
{
    if (n == 0) return TF_OK;
    tf_status st = cm_poll(c, reqs, (int)n, t0 + c->timeout_s + CM_TIMEOUT_GRACE_S, what, err);
    size_t open = 0; /* a finished (or failed) request is MPI_REQUEST_NULL */
    for (size_t i = 0; st && i < n; i++) open += reqs[i] != MPI_REQUEST_NULL;
    if (open) {
        c->blocking_reqs = NULL; /* MPI may still write them */
        c->blocking_reqs_cap = 0;
        c->blocking_stuck += open;
    }
    return st;
}

static tf_status check_root(tf_comm *c, const char *op, int root, tf_error *err)
{
    if (root < 0 || root >= c->size)
        return cm_fail(c, err, "%s: root %d is not a rank (ranks are 0..%d)", op, root,
                       c->size - 1);
    return TF_OK;
}

/* Where MPI reads and writes: the caller's buffer, or the staging buffer. */
static tf_status mpi_side(tf_comm *c, cm_path path, void *buf, size_t bytes, const char *op,
                          void **out, tf_error *err)
{
    *out = buf;
    if (bytes == 0 || path == CM_PATH_HOST) return TF_OK;
    if (path == CM_PATH_CUDA_AWARE) return cm_device_sync(c, op, err);
    tf_status st = cm_host_reserve(c, &c->blocking_stage, bytes, op, err);
    if (st) return st;
    *out = c->blocking_stage.ptr;
    return TF_OK;
}

static tf_status reduce_locked(tf_comm *c, void *buf, size_t count, tf_dtype dt,
                               tf_reduce_op op, int root, tf_error *err)
{
    MPI_Datatype type = cm_reduce_type(dt);
    size_t esize = tf_dtype_size(dt), bytes = count * esize;
    cm_path path = cm_reduction_path(c, dt, op);
    void *p;
    tf_status st = mpi_side(c, path, buf, bytes, "reduce", &p, err);
    if (st) return st;
    if (p != buf && (st = cm_to_host(c, p, buf, bytes, "reduce", err))) return st;
    size_t nchunks = count == 0 ? 0 : (count - 1) / c->chunk + 1;
    MPI_Request *reqs = NULL;
    if ((st = chunk_requests(c, nchunks, "reduce", &reqs, err))) return st;
    double t0 = cm_now();
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * c->chunk, n = count - off < c->chunk ? count - off : c->chunk;
        char *at = (char *)p + off * esize;
        int rc = MPI_Ireduce(c->rank == root ? MPI_IN_PLACE : at, at, (int)n, type, MPI_SUM, root,
                             c->comm, &reqs[i]);
        if (rc != MPI_SUCCESS) {
            c->blocking_reqs = NULL; /* the chunks started stay MPI's */
            c->blocking_reqs_cap = 0;
            c->blocking_stuck += i;
            return cm_mpi_fail(c, err, rc, "MPI_Ireduce of %zu %s to root %d (elements %zu..%zu)",
                               count, tf_dtype_name(dt), root, off, off + n - 1);
        }
    }
    char what[128];
    snprintf(what, sizeof what, "MPI_Ireduce of %zu %s to root %d", count, tf_dtype_name(dt), root);
    if ((st = wait_chunks(c, reqs, nchunks, t0, what, err))) return st;
    if (c->rank != root || count == 0) return TF_OK;
    if (op == TF_REDUCE_AVG &&
        (st = cm_divide(c, p, path != CM_PATH_CUDA_AWARE, count, dt, "reduce", err)))
        return st;
    if (p != buf) st = cm_to_device(c, buf, p, bytes, "reduce", err);
    return st;
}

tf_status cm_reduce(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op, int root,
                    tf_error *err)
{
    if (!c) return cm_fail(c, err, "reduce: comm is NULL");
    if (cm_reduce_type(dt) == MPI_DATATYPE_NULL)
        return cm_fail(c, err, "reduce: dtype %s cannot be reduced (F32 and F64 can)",
                       tf_dtype_name(dt) ? tf_dtype_name(dt) : "unknown");
    if (op != TF_REDUCE_SUM && op != TF_REDUCE_AVG)
        return cm_fail(c, err, "reduce: unknown reduce op %d", (int)op);
    tf_status st = check_root(c, "reduce", root, err);
    if (st) return st;
    if (!buf && count) return cm_fail(c, err, "reduce: buffer is NULL for %zu elements", count);
    if (count > SIZE_MAX / tf_dtype_size(dt))
        return cm_fail(c, err, "reduce: %zu elements of %s overflow size_t", count,
                       tf_dtype_name(dt));
    pthread_mutex_lock(&cm_lock);
    st = reduce_locked(c, buf, count, dt, op, root, err);
    pthread_mutex_unlock(&cm_lock);
    return st;
}

static tf_status broadcast_locked(tf_comm *c, void *buf, size_t bytes, tf_dtype dt, int root,
                                  tf_error *err)
{
    void *p;
    tf_status st = mpi_side(c, c->path, buf, bytes, "broadcast", &p, err);
    if (st) return st;
    if (p != buf && c->rank == root && (st = cm_to_host(c, p, buf, bytes, "broadcast", err)))
        return st;
    /* Bytes, so that every dtype goes the same way; at most INT_MAX per call. */
    size_t chunk = c->chunk * tf_dtype_size(dt);
    if (chunk > INT_MAX) chunk = INT_MAX;
    size_t nchunks = bytes == 0 ? 0 : (bytes - 1) / chunk + 1;
    MPI_Request *reqs = NULL;
    if ((st = chunk_requests(c, nchunks, "broadcast", &reqs, err))) return st;
    double t0 = cm_now();
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
        int rc = MPI_Ibcast((char *)p + off, (int)n, MPI_BYTE, root, c->comm, &reqs[i]);
        if (rc != MPI_SUCCESS) {
            c->blocking_reqs = NULL;
            c->blocking_reqs_cap = 0;
            c->blocking_stuck += i;
            return cm_mpi_fail(c, err, rc,
                               "MPI_Ibcast of %zu bytes (%s) from root %d (bytes %zu..%zu)",
                               bytes, tf_dtype_name(dt), root, off, off + n - 1);
        }
    }
    char what[128];
    snprintf(what, sizeof what, "MPI_Ibcast of %zu bytes (%s) from root %d (bytes 0..%zu)", bytes,
             tf_dtype_name(dt), root, bytes ? bytes - 1 : 0);
    if ((st = wait_chunks(c, reqs, nchunks, t0, what, err))) return st;
    if (p != buf && c->rank != root) st = cm_to_device(c, buf, p, bytes, "broadcast", err);
    return st;
}

tf_status cm_broadcast(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                       tf_error *err)
{
    if (!c) return cm_fail(c, err, "broadcast: comm is NULL");
    size_t esize = tf_dtype_size(dt);
    if (esize == 0) return cm_fail(c, err, "broadcast: unknown dtype %d", (int)dt);
    tf_status st = check_root(c, "broadcast", root, err);
    if (st) return st;
    if (!buf && count)
        return cm_fail(c, err, "broadcast: buffer is NULL for %zu elements", count);
    if (count > SIZE_MAX / esize)
        return cm_fail(c, err, "broadcast: %zu elements of %s overflow size_t", count,
                       tf_dtype_name(dt));
    pthread_mutex_lock(&cm_lock);
    st = broadcast_locked(c, buf, count * esize, dt, root, err);
    pthread_mutex_unlock(&cm_lock);
    return st;
}

tf_status cm_barrier(tf_comm *c, tf_error *err)
{
    if (!c) return cm_fail(c, err, "barrier: comm is NULL");
    pthread_mutex_lock(&cm_lock);
    MPI_Request *req = NULL;
    double t0 = cm_now();
    tf_status st = chunk_requests(c, 1, "barrier", &req, err);
    int rc = st ? MPI_SUCCESS : MPI_Ibarrier(c->comm, req);
    if (!st && rc != MPI_SUCCESS) st = cm_mpi_fail(c, err, rc, "MPI_Ibarrier");
    if (!st) st = wait_chunks(c, req, 1, t0, "MPI_Ibarrier", err);
    pthread_mutex_unlock(&cm_lock);
    return st;
}
