/* mpi_blocking.c — the blocking collectives: reduce to a root, broadcast
 * from a root, barrier. Device buffers follow the comm's path (as is, after a
 * stream sync, or staged through one pinned host buffer kept in the comm);
 * buffers longer than chunk_elements go as several MPI calls. The whole
 * operation holds cm_lock: the staging buffer is the comm's, and the progress
 * thread must not test requests meanwhile. */
#include <limits.h>
#include <stdint.h>

#include "comm_mpi.h"

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
    for (size_t off = 0; off < count; off += c->chunk) {
        size_t n = count - off < c->chunk ? count - off : c->chunk;
        char *at = (char *)p + off * esize;
        int rc = MPI_Reduce(c->rank == root ? MPI_IN_PLACE : at, at, (int)n, type, MPI_SUM, root,
                            c->comm);
        if (rc != MPI_SUCCESS)
            return cm_mpi_fail(c, err, rc, "MPI_Reduce of %zu %s to root %d (elements %zu..%zu)",
                               count, tf_dtype_name(dt), root, off, off + n - 1);
    }
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
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        int rc = MPI_Bcast((char *)p + off, (int)n, MPI_BYTE, root, c->comm);
        if (rc != MPI_SUCCESS)
            return cm_mpi_fail(c, err, rc,
                               "MPI_Bcast of %zu bytes (%s) from root %d (bytes %zu..%zu)",
                               bytes, tf_dtype_name(dt), root, off, off + n - 1);
    }
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
    int rc = MPI_Barrier(c->comm);
    pthread_mutex_unlock(&cm_lock);
    if (rc != MPI_SUCCESS) return cm_mpi_fail(c, err, rc, "MPI_Barrier");
    return TF_OK;
}
