/* stream.c — backend-cuda streams and events: a tf_stream wraps a
 * non-blocking cudaStream_t (plus its workspaces), a tf_event a
 * cudaEvent_t without timing (the cheap kind). NULL is the backend's
 * default stream, itself a created non-blocking stream, so nothing here
 * ever serializes against the legacy stream 0 of other libraries.
 *
 * The synchronizations (stream_sync, event_sync) are also where a bad
 * embedding id, found on the device, is reported: see cuda_take_id_error. */
#include <stdlib.h>

#include "backend_cuda.h"
#include "tfcore/log.h"

tf_status cuda_stream_create(tf_backend *be, tf_stream **out, tf_error *err)
{
    const char *op = "stream_create";
    tf_stream *def;
    tf_status rc;
    if ((rc = cuda_need(err, op, "out", out))) return rc;
    *out = NULL;
    if ((rc = cuda_enter(be, NULL, op, &def, err))) return rc;
    tf_stream *s = calloc(1, sizeof *s);
    if (!s) return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory (%zu bytes)", sizeof *s);
    cudaError_t e = cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(s);
        return cuda_fail_rt(err, op, e, "cudaStreamCreateWithFlags");
    }
    s->be = be;
    *out = s;
    return TF_OK;
}

void cuda_stream_destroy(tf_backend *be, tf_stream *s)
{
    if (!s || !be || s->is_default) return;
    if (s->be != be) {
        tf_log(TF_LOG_ERROR, "backend-cuda: stream_destroy: the stream belongs to another backend");
        return;
    }
    if (cuda_bind(be) != cudaSuccess) (void)cudaGetLastError();
    /* its workspaces may still be in use by queued work */
    if (cudaStreamSynchronize(s->s) != cudaSuccess) (void)cudaGetLastError();
    cuda_stream_release(be, s);
    if (cudaStreamDestroy(s->s) != cudaSuccess) (void)cudaGetLastError();
    free(s);
}

tf_status cuda_take_id_error(tf_backend *be, tf_error *err)
{
    volatile tfc_id_error *r = be->bad_id;
    if (!r || r->state != 2) return TF_OK;
    int op = r->op, id = r->id, row = r->row, vocab = r->vocab;
    r->state = 0;
    /* launches from now on may claim the record again */
    __atomic_fetch_add(&be->bad_id_gen, 1, __ATOMIC_RELEASE);
    return cuda_fail(err, TF_ERR_DATA,
                     op == TFC_OP_EMBEDDING_BWD ? "embedding_bwd" : "embedding_fwd",
                     "id %d at row %d is outside [0, %d) (found on the device, reported at "
                     "the next synchronization)",
                     id, row, vocab);
}

tf_status cuda_stream_sync(tf_backend *be, tf_stream *s, tf_error *err)
{
    tf_stream *st;
    tf_status rc = cuda_enter(be, s, "stream_sync", &st, err);
    if (rc) return rc;
    cudaError_t e = cudaStreamSynchronize(st->s);
    if (e != cudaSuccess) return cuda_fail_rt(err, "stream_sync", e, "cudaStreamSynchronize");
    return cuda_take_id_error(be, err);
}

tf_status cuda_event_create(tf_backend *be, tf_event **out, tf_error *err)
{
    const char *op = "event_create";
    tf_stream *def;
    tf_status rc;
    if ((rc = cuda_need(err, op, "out", out))) return rc;
    *out = NULL;
    if ((rc = cuda_enter(be, NULL, op, &def, err))) return rc;
    tf_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory (%zu bytes)", sizeof *ev);
    cudaError_t e = cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail_rt(err, op, e, "cudaEventCreateWithFlags");
    }
    ev->be = be;
    *out = ev;
    return TF_OK;
}

void cuda_event_destroy(tf_backend *be, tf_event *e)
{
    if (!e || !be) return;
    if (e->be != be) {
        tf_log(TF_LOG_ERROR, "backend-cuda: event_destroy: the event belongs to another backend");
        return;
    }
    if (cuda_bind(be) != cudaSuccess) (void)cudaGetLastError();
    /* destroying an event that is still pending is allowed: CUDA releases it when reached */
    if (cudaEventDestroy(e->e) != cudaSuccess) (void)cudaGetLastError();
    free(e);
}

tf_status cuda_event_record(tf_backend *be, tf_event *e, tf_stream *s)
{
    tf_stream *st;
    if (!e || !be || e->be != be || cuda_enter(be, s, "event_record", &st, NULL))
        return TF_ERR_RUNTIME;
    cudaError_t r = cudaEventRecord(e->e, st->s);
    if (r != cudaSuccess) {
        tf_log(TF_LOG_ERROR, "backend-cuda: event_record: %s: %s", cudaGetErrorName(r),
               cudaGetErrorString(r));
        return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

tf_status cuda_stream_wait_event(tf_backend *be, tf_stream *s, tf_event *e)
{
    tf_stream *st;
    if (!e || !be || e->be != be || cuda_enter(be, s, "stream_wait_event", &st, NULL))
        return TF_ERR_RUNTIME;
    cudaError_t r = cudaStreamWaitEvent(st->s, e->e, 0);
    if (r != cudaSuccess) {
        tf_log(TF_LOG_ERROR, "backend-cuda: stream_wait_event: %s: %s", cudaGetErrorName(r),
               cudaGetErrorString(r));
        return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

tf_status cuda_event_sync(tf_backend *be, tf_event *e, tf_error *err)
{
    tf_stream *def;
    tf_status rc;
    if ((rc = cuda_need(err, "event_sync", "event", e))) return rc;
    if ((rc = cuda_enter(be, NULL, "event_sync", &def, err))) return rc;
    if (e->be != be)
        return cuda_fail(err, TF_ERR_RUNTIME, "event_sync", "the event belongs to another backend");
    cudaError_t r = cudaEventSynchronize(e->e);
    if (r != cudaSuccess) return cuda_fail_rt(err, "event_sync", r, "cudaEventSynchronize");
    return cuda_take_id_error(be, err);
}

void *cuda_native_stream(tf_backend *be, tf_stream *s)
{
    if (!be) return NULL;
    if (!s) return (void *)be->def.s;
    if (s->be != be) {
        tf_log(TF_LOG_ERROR, "backend-cuda: native_stream: the stream belongs to another backend");
        return NULL;
    }
    return (void *)s->s;
}
