/* device.c — the current CUDA device, per thread: every entry point makes
 * the calling thread's current device its backend's (a thread-local compare
 * in the common case) and resolves the stream it was given. */
#include "backend_cuda.h"

static _Thread_local int tl_device = -1;

cudaError_t cuda_bind(tf_backend *be)
{
    if (tl_device == be->device) return cudaSuccess;
    cudaError_t e = cudaSetDevice(be->device);
    if (e == cudaSuccess) tl_device = be->device;
    return e;
}

void cuda_forget_device(void) { tl_device = -1; }

tf_status cuda_enter(tf_backend *be, tf_stream *s, const char *op, tf_stream **out,
                     tf_error *err)
{
    /* every failure returns a literal status, so *out is set whenever TF_OK is */
    if (!be) {
        cuda_fail(err, TF_ERR_RUNTIME, op, "backend is NULL");
        return TF_ERR_RUNTIME;
    }
    if (s && s->be != be) {
        cuda_fail(err, TF_ERR_RUNTIME, op, "the stream belongs to another backend");
        return TF_ERR_RUNTIME;
    }
    cudaError_t e = cuda_bind(be);
    if (e != cudaSuccess) {
        cuda_fail_rt(err, op, e, "cudaSetDevice(%d)", be->device);
        return TF_ERR_RUNTIME;
    }
    *out = s ? s : &be->def;
    return TF_OK;
}
