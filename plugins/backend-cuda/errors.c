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

const tf_backend_checker cuda_checker = {
    .name = "backend-cuda",
    .act_dtypes = TF_DTYPE_BIT(TF_DTYPE_F32) | TF_DTYPE_BIT(TF_DTYPE_F16) | TF_DTYPE_BIT(TF_DTYPE_BF16),
    .act_dtypes_text = "F32, F16, BF16",
};

tf_status cuda_need(tf_error *err, const char *op, const char *name, const void *p)
{
    return tf_check_need(&cuda_checker, err, op, name, p);
}

tf_status cuda_need_min(tf_error *err, const char *op, const char *name, long long v,
                        long long lo)
{
    return tf_check_min(&cuda_checker, err, op, name, v, lo);
}

tf_status cuda_need_act(tf_error *err, const char *op, const char *name, tf_dtype dt)
{
    return tf_check_act_dtype(&cuda_checker, err, op, name, dt);
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
