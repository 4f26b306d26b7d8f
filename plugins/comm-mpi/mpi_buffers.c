/* mpi_buffers.c — getting backend buffers to MPI and back: the dtype map,
 * which path a reduction takes, pinned staging buffers, copies, and the
 * division of AVG. */
#include <string.h>

#include "comm_mpi.h"

const char *cm_path_name(cm_path p)
{
    switch (p) {
    case CM_PATH_HOST: return "host memory, given to MPI as is";
    case CM_PATH_CUDA_AWARE: return "device memory, given to CUDA-aware MPI";
    case CM_PATH_STAGED: return "device memory, staged through pinned host buffers";
    }
    return "?";
}

MPI_Datatype cm_reduce_type(tf_dtype dt)
{
    switch (dt) {
    case TF_DTYPE_F32: return MPI_FLOAT;
    case TF_DTYPE_F64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
    }
}

/* The backend's scale op takes f32 buffers; an AVG of f64 on a CUDA-aware
 * comm is therefore staged, and divided on the host. */
cm_path cm_reduction_path(const tf_comm *c, tf_dtype dt, tf_reduce_op op)
{
    if (c->path == CM_PATH_CUDA_AWARE && op == TF_REDUCE_AVG && dt != TF_DTYPE_F32)
        return CM_PATH_STAGED;
    return c->path;
}

tf_status cm_host_reserve(tf_comm *c, cm_host_buffer *hb, size_t bytes, const char *what,
                          tf_error *err)
{
    if (bytes <= hb->bytes) return TF_OK;
    cm_host_release(c, hb);
    void *p = NULL;
    tf_status st = c->bvt->alloc(c->be, bytes, TF_MEM_HOST_PINNED, &p, err);
    if (st) {
        tf_error_prefix(err, "comm-mpi: rank %d of %d: %s: staging buffer of %zu bytes", c->rank,
                        c->size, what, bytes);
        return st;
    }
    hb->ptr = p;
    hb->bytes = bytes;
    return TF_OK;
}

void cm_host_release(tf_comm *c, cm_host_buffer *hb)
{
    if (hb->ptr) c->bvt->free(c->be, hb->ptr, TF_MEM_HOST_PINNED);
    hb->ptr = NULL;
    hb->bytes = 0;
}

tf_status cm_device_sync(tf_comm *c, const char *what, tf_error *err)
{
    tf_status st = c->bvt->stream_sync(c->be, NULL, err);
    if (st)
        tf_error_prefix(err, "comm-mpi: rank %d of %d: %s: stream_sync", c->rank, c->size, what);
    return st;
}

static tf_status copy(tf_comm *c, void *dst, const void *src, size_t bytes, tf_memcpy_kind kind,
                      const char *what, tf_error *err)
{
    if (bytes == 0) return TF_OK;
    tf_status st = c->bvt->memcpy(c->be, dst, src, bytes, kind, NULL);
    if (st)
        return cm_fail(c, err, "%s: backend memcpy of %zu bytes %s failed (status %s)", what,
                       bytes, kind == TF_COPY_DEVICE_TO_HOST ? "to the host" : "to the device",
                       tf_status_name(st));
    /* MPI reads the host copy next (or the caller reads the device buffer): wait for it. */
    return cm_device_sync(c, what, err);
}

tf_status cm_to_host(tf_comm *c, void *host, const void *dev, size_t bytes, const char *what,
                     tf_error *err)
{
    return copy(c, host, dev, bytes, TF_COPY_DEVICE_TO_HOST, what, err);
}

tf_status cm_to_device(tf_comm *c, void *dev, const void *host, size_t bytes, const char *what,
                       tf_error *err)
{
    return copy(c, dev, host, bytes, TF_COPY_HOST_TO_DEVICE, what, err);
}

tf_status cm_divide(tf_comm *c, void *buf, bool host, size_t count, tf_dtype dt,
                    const char *what, tf_error *err)
{
    if (count == 0) return TF_OK;
    if (host) {
        /* Divide (not multiply by 1/size): SUM / size exactly as the sum's dtype rounds it. */
        if (dt == TF_DTYPE_F32) {
            float *x = buf, d = (float)c->size;
#pragma omp simd
            for (size_t i = 0; i < count; i++) x[i] /= d;
        } else {
            double *x = buf, d = (double)c->size;
#pragma omp simd
            for (size_t i = 0; i < count; i++) x[i] /= d;
        }
        return TF_OK;
    }
    /* Device memory (CUDA-aware path, f32 only: see cm_reduction_path). */
    tf_status st = c->bvt->scale(c->be, NULL, buf, count, 1.0f / (float)c->size, dt, err);
    if (!st) st = cm_device_sync(c, what, err);
    if (st) tf_error_prefix(err, "comm-mpi: rank %d of %d: %s: dividing by %d", c->rank, c->size,
                            what, c->size);
    return st;
}
