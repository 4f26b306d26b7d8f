/* sum.c — adding the replicas' buffers on the root.
 *
 * f32 goes through the root backend's own `add` and `scale` ops (OpenMP
 * vector loops on backend-cpu, kernels on backend-cuda). backend.h defines
 * those for f32 (and compute dtypes) only, so the other reducible dtypes
 * (f64, i32, i64: loss sums, evaluation counts, all small) are added by
 * plain loops on host memory; on device memory they travel through host
 * buffers.
 *
 * The order is fixed: the root's own buffer, then every other rank in
 * increasing rank order, so the same inputs always give the same bits.
 */
#include <stdio.h>

#include "dp_master.h"

bool dp_reducible(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F64 || dt == TF_DTYPE_I32 || dt == TF_DTYPE_I64;
}

bool dp_is_float(tf_dtype dt) { return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F64; }

/* acc[i] += x[i] on host memory, for the dtypes the backend's add has not.
 * Integers wrap around (two's complement) instead of overflowing. */
static void add_loop(void *acc, const void *x, size_t n, tf_dtype dt)
{
    switch (dt) {
    case TF_DTYPE_F64: {
        double *a = acc;
        const double *b = x;
        for (size_t i = 0; i < n; i++) a[i] += b[i];
        break;
    }
    case TF_DTYPE_I32: {
        int32_t *a = acc;
        const int32_t *b = x;
        for (size_t i = 0; i < n; i++) a[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
        break;
    }
    case TF_DTYPE_I64: {
        int64_t *a = acc;
        const int64_t *b = x;
        for (size_t i = 0; i < n; i++) a[i] = (int64_t)((uint64_t)a[i] + (uint64_t)b[i]);
        break;
    }
    default: /* f32 is the backend's; callers check dp_reducible */
        break;
    }
}

tf_status dp_add_host(tf_comm *c, void *acc, const void *x, size_t n, tf_dtype dt,
                      tf_error *err)
{
    if (dt == TF_DTYPE_F32) return c->bvt->add(c->be, NULL, acc, x, acc, n, dt, err);
    add_loop(acc, x, n, dt);
    return TF_OK;
}

tf_status dp_average(tf_comm *c, void *x, size_t n, tf_dtype dt, tf_error *err)
{
    if (c->world == 1) return TF_OK; /* x / 1 == x */
    if (dt == TF_DTYPE_F32)
        return c->bvt->scale(c->be, NULL, x, n, 1.0f / (float)c->world, dt, err);
    double *d = x; /* f64: callers reject AVG on integers */
    for (size_t i = 0; i < n; i++) d[i] /= (double)c->world;
    return TF_OK;
}

/* Make the root's staging buffer hold at least `bytes` (backend memory). */
static tf_status grow_staging(tf_comm *c, size_t bytes, tf_error *err)
{
    if (c->staging_bytes >= bytes) return TF_OK;
    if (c->staging) c->bvt->free(c->be, c->staging, TF_MEM_DEVICE);
    c->staging = NULL;
    c->staging_bytes = 0;
    tf_status st = c->bvt->alloc(c->be, bytes, TF_MEM_DEVICE, &c->staging, err);
    if (st) {
        tf_error_prefix(err, "allocating the %zu-byte staging buffer", bytes);
        return st;
    }
    c->staging_bytes = bytes;
    return TF_OK;
}

/* Make the two host buffers hold at least `bytes` each (pinned host memory
 * of the root's backend, which device copies reach fastest). */
static tf_status grow_host(tf_comm *c, size_t bytes, tf_error *err)
{
    if (c->host_bytes >= bytes) return TF_OK;
    for (int i = 0; i < 2; i++) {
        void **p = i ? &c->host_tmp : &c->host_acc;
        if (*p) c->bvt->free(c->be, *p, TF_MEM_HOST_PINNED);
        *p = NULL;
    }
    c->host_bytes = 0;
    tf_status st = c->bvt->alloc(c->be, bytes, TF_MEM_HOST_PINNED, &c->host_acc, err);
    if (!st) st = c->bvt->alloc(c->be, bytes, TF_MEM_HOST_PINNED, &c->host_tmp, err);
    if (st) {
        tf_error_prefix(err, "allocating 2 x %zu bytes of pinned host buffers", bytes);
        return st; /* a half-made pair is freed by the next call or finalize */
    }
    c->host_bytes = bytes;
    return TF_OK;
}

static tf_status copy(tf_comm *c, void *dst, const void *src, size_t bytes, tf_memcpy_kind kind,
                      const char *what, tf_error *err)
{
    /* the memcpy slot has no tf_error: say what was copied */
    if (c->bvt->memcpy(c->be, dst, src, bytes, kind, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "memcpy of %zu bytes (%s) failed", bytes, what);
    return TF_OK;
}

tf_status dp_sum_staged(tf_comm *c, void *const *bufs, size_t n, tf_dtype dt, tf_reduce_op op,
                        tf_error *err)
{
    size_t bytes = n * tf_dtype_size(dt);
    void *acc = bufs[c->rank]; /* [n] dt, the root's backend memory */
    char what[64];
    tf_status st;
    if (c->world == 1) return TF_OK; /* nothing to add; x / 1 == x */
    if ((st = grow_staging(c, bytes, err))) return st;

    if (dt == TF_DTYPE_F32) {
        /* copy, add, copy, add ... all on the root's default stream, so each
         * add follows its copy and each copy waits for the previous add */
        for (int k = 0; k < c->world; k++) {
            if (k == c->rank) continue;
            snprintf(what, sizeof what, "rank %d's buffer into the staging buffer", k);
            if ((st = copy(c, c->staging, bufs[k], bytes, TF_COPY_DEVICE_TO_DEVICE, what, err)) ||
                (st = c->bvt->add(c->be, NULL, acc, c->staging, acc, n, dt, err)))
                return st;
        }
        if (op == TF_REDUCE_AVG && (st = dp_average(c, acc, n, dt, err))) return st;
        return c->bvt->stream_sync(c->be, NULL, err);
    }

    /* f64 / integers: sum on the host, in the same order */
    if ((st = grow_host(c, bytes, err)) ||
        (st = copy(c, c->host_acc, acc, bytes, TF_COPY_DEVICE_TO_HOST, "the root's buffer to the host", err)))
        return st;
    for (int k = 0; k < c->world; k++) {
        if (k == c->rank) continue;
        snprintf(what, sizeof what, "rank %d's buffer into the staging buffer", k);
        if ((st = copy(c, c->staging, bufs[k], bytes, TF_COPY_DEVICE_TO_DEVICE, what, err)) ||
            (st = copy(c, c->host_tmp, c->staging, bytes, TF_COPY_DEVICE_TO_HOST,
                       "the staging buffer to the host", err)) ||
            (st = c->bvt->stream_sync(c->be, NULL, err)))
            return st;
        add_loop(c->host_acc, c->host_tmp, n, dt);
    }
    if (op == TF_REDUCE_AVG && (st = dp_average(c, c->host_acc, n, dt, err))) return st;
    if ((st = copy(c, acc, c->host_acc, bytes, TF_COPY_HOST_TO_DEVICE, "the sum back to the root", err)))
        return st;
    return c->bvt->stream_sync(c->be, NULL, err);
}
