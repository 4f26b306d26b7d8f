/* errors.c — backend-cuda's error lines: every failure is one line
 * "backend-cuda: OP: what"; CUDA's failures add the error's name and
 * description, a launcher's failure the op's shape. */
#include <stdarg.h>
#include <stdio.h>

#include "backend_cuda.h"

tf_status cuda_fail(tf_error *err, tf_status code, const char *op, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tf_error_set(err, code, "backend-cuda: %s: %s", op, what);
    return code;
}

tf_status cuda_fail_rt(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* clear a non-sticky error so the next call does not see it again */
    (void)cudaGetLastError();
    tf_error_set(err, TF_ERR_RUNTIME, "backend-cuda: %s (%s): %s: %s", op, what,
                 cudaGetErrorName(e), cudaGetErrorString(e));
    return TF_ERR_RUNTIME;
}

tf_status cuda_need(tf_error *err, const char *op, const char *name, const void *p)
{
    return p ? TF_OK : cuda_fail(err, TF_ERR_RUNTIME, op, "%s is NULL", name);
}

tf_status cuda_need_min(tf_error *err, const char *op, const char *name, long long v,
                        long long lo)
{
    if (v >= lo) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "%s must be >= %lld, got %lld", name, lo, v);
}

tf_status cuda_need_act(tf_error *err, const char *op, const char *name, tf_dtype dt)
{
    if (dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16) return TF_OK;
    const char *dn = tf_dtype_name(dt);
    if (dn)
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "%s dtype %s is not supported (backend-cuda computes in F32, F16, BF16)",
                         name, dn);
    return cuda_fail(err, TF_ERR_PLUGIN, op, "%s dtype %d is not a tf_dtype", name, (int)dt);
}

tf_status cuda_launched(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
{
    if (e == cudaSuccess) return TF_OK;
    char shape[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(shape, sizeof shape, fmt, ap);
    va_end(ap);
    return cuda_fail_rt(err, op, e, "%s", shape);
}
