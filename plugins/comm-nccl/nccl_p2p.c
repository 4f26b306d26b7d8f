/* nccl_p2p.c — point-to-point messages of comm-nccl (ABI 1.4 send / recv):
 * a pipeline stage's activations to the next stage and their gradients back.
 *
 * NCCL's ncclSend / ncclRecv block the GPU until the peer's matching call
 * runs, and the operations of one communicator run one after another; only
 * the calls of one ncclGroupStart / ncclGroupEnd progress together. Issued
 * one by one on the comm stream, a 1F1B stage's "send activation j+1" would
 * wait for the next stage's "receive activation j+1", queued behind that
 * stage's "send gradient j", which waits for our "receive gradient j",
 * queued behind our send: a deadlock. So send and recv only record where
 * the default stream is (the buffer's producer, or its last reader) and hold
 * the request on the host; the first wait for any held request (or any
 * collective, or finalize) issues every held one as one group, in the order
 * they were started, on the comm stream after those events. Within a group,
 * calls to one peer keep their order (NCCL's rule), so the k-th send to a
 * rank meets that rank's k-th receive from us, as the contract wants.
 *
 * wait then blocks the host until the comm stream is done, polling like the
 * blocking collectives (nccl_host_wait): the communicator's asynchronous
 * error, a peer's published failure, abort(), and comm.timeout_s plus the
 * grace. The default stream also waits for the request's done event, so
 * work queued after wait sees the received data and may overwrite a sent
 * buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tfcore/dtype.h"

#include "nccl_comm.h"

static tf_status hold(tf_comm *c, tf_comm_request *q, tf_error *err)
{
    if (c->nheld == c->cap_held) {
        size_t cap = c->cap_held ? 2 * c->cap_held : 16;
        tf_comm_request **h = realloc(c->held, cap * sizeof *h);
        if (!h)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: out of memory for %zu held requests",
                                c->rank, q->what, cap);
        c->held = h;
        c->cap_held = cap;
    }
    c->held[c->nheld++] = q;
    q->held = true;
    return TF_OK;
}

static tf_status p2p_start(tf_comm *c, nccl_req_kind kind, void *buf, size_t count, tf_dtype dt, int peer,
                           tf_comm_request **req, tf_error *err)
{
    const char *op = kind == NCCL_REQ_SEND ? "send" : "recv";
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: %s: NULL %s", op, !c ? "communicator" : "request pointer");
    *req = NULL;
    char what[112];
    snprintf(what, sizeof what, "%s of %zu %s %s rank %d", op, count, nccl_dt_name(dt),
             kind == NCCL_REQ_SEND ? "to" : "from", peer);
    ncclDataType_t type;
    size_t es = tf_dtype_size(dt);
    if (es == 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: unknown dtype %d", c->rank, what, (int)dt);
    if (!nccl_type_of(dt, &type)) { /* a type NCCL does not name travels as its bytes */
        if (count > SIZE_MAX / es)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the size overflows", c->rank, what);
        type = ncclUint8;
        count *= es;
    }
    if (peer < 0 || peer >= c->world_size || peer == c->rank)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the peer is not another rank in [0, %d)",
                            c->rank, what, c->world_size);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: the buffer is NULL", c->rank, what);
    tf_status st = nccl_check_usable(c, what, err);
    if (st) return st;
    tf_comm_request *q = NULL;
    if ((st = nccl_req_get(c, &q, err))) return st;
    q->kind = kind;
    q->buf = buf;
    q->count = count;
    q->type = type;
    q->peer = peer;
    snprintf(q->what, sizeof q->what, "%s", what);
    /* the buffer's producer (send) or its last reader (recv) on the default stream */
    if (c->bvt->event_record(c->be, q->ready, NULL) != TF_OK) st = nccl_backend_fail(c, err, what, "event_record on the default stream");
    if (!st) st = hold(c, q, err);
    if (st) {
        nccl_req_put(c, q);
        return st;
    }
    q->in_flight = true;
    *req = q;
    return TF_OK;
}

tf_status nccl_send(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                    tf_error *err)
{
    /* ncclSend does not write its buffer; the request keeps one pointer type */
    return p2p_start(c, NCCL_REQ_SEND, (void *)(uintptr_t)buf, count, dt, peer, req, err);
}

tf_status nccl_recv(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                    tf_error *err)
{
    return p2p_start(c, NCCL_REQ_RECV, buf, count, dt, peer, req, err);
}

/* The held requests leave the list (they stay in flight until waited for);
 * on failure the communicator is aborted, so their waits fail with the reason. */
static tf_status flush_failed(tf_comm *c, tf_error *err)
{
    for (size_t i = 0; i < c->nheld; i++) c->held[i]->held = false;
    c->nheld = 0;
    if (c->boot.kind == NCCL_BOOT_LAUNCHER) nccl_shared_fail(c->boot.shared, c->rank, err->msg);
    nccl_abort_local(c, err->msg);
    return TF_ERR_RUNTIME;
}

tf_status nccl_p2p_flush(tf_comm *c, const char *what, tf_error *err)
{
    if (c->nheld == 0) return TF_OK;
    if (atomic_load(&c->aborted)) {
        for (size_t i = 0; i < c->nheld; i++) c->held[i]->held = false;
        c->nheld = 0;
        return nccl_aborted_error(c, err, what);
    }
    /* the comm stream after every held request's point of the default stream */
    for (size_t i = 0; i < c->nheld; i++)
        if (c->bvt->stream_wait_event(c->be, c->stream, c->held[i]->ready) != TF_OK) {
            nccl_backend_fail(c, err, c->held[i]->what, "stream_wait_event of the comm stream");
            return flush_failed(c, err);
        }
    const char *call = "ncclGroupStart";
    const tf_comm_request *bad = NULL;
    char last[512] = "";
    pthread_mutex_lock(&c->lock);
    if (!c->nccl) {
        pthread_mutex_unlock(&c->lock);
        nccl_aborted_error(c, err, what);
        for (size_t i = 0; i < c->nheld; i++) c->held[i]->held = false;
        c->nheld = 0;
        return TF_ERR_RUNTIME;
    }
    ncclResult_t r = ncclGroupStart();
    for (size_t i = 0; r == ncclSuccess && i < c->nheld; i++) {
        tf_comm_request *q = c->held[i];
        if (q->count == 0) continue; /* nothing travels; the peer's empty call is skipped too */
        if (q->kind == NCCL_REQ_SEND) {
            call = "ncclSend";
            r = ncclSend(q->buf, q->count, q->type, q->peer, c->nccl, c->cu_stream);
        } else {
            call = "ncclRecv";
            r = ncclRecv(q->buf, q->count, q->type, q->peer, c->nccl, c->cu_stream);
        }
        if (r != ncclSuccess) bad = q;
    }
    /* a group started is always ended, also after a failed call in it */
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess && e != ncclSuccess) {
        r = e;
        call = "ncclGroupEnd";
    }
    if (r != ncclSuccess) snprintf(last, sizeof last, "%s", ncclGetLastError(c->nccl));
    pthread_mutex_unlock(&c->lock);
    if (r != ncclSuccess) {
        nccl_fail(c, err, bad ? bad->what : what, call, r, last);
        return flush_failed(c, err);
    }
    for (size_t i = 0; i < c->nheld; i++) {
        tf_comm_request *q = c->held[i];
        q->held = false;
        if (c->bvt->event_record(c->be, q->done, c->stream) != TF_OK) {
            c->nheld = 0;
            nccl_backend_fail(c, err, q->what, "event_record on the comm stream");
            return flush_failed(c, err);
        }
    }
    c->nheld = 0;
    return TF_OK;
}

tf_status nccl_p2p_wait(tf_comm *c, tf_comm_request *q, tf_error *err)
{
    char what[112];
    snprintf(what, sizeof what, "%s", q->what);
    tf_status st = TF_OK;
    if (q->held) st = nccl_p2p_flush(c, what, err);
    if (!st && atomic_load(&c->aborted)) st = nccl_aborted_error(c, err, what);
    if (!st) {
        cudaError_t e = cudaSetDevice(c->device);
        if (e != cudaSuccess)
            st = tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s: cudaSetDevice failed: %s", c->rank, what,
                              cudaGetErrorString(e));
    }
    /* the host, bounded by comm.timeout_s; then the default stream, for what it queues next */
    if (!st) st = nccl_host_wait(c, what, err);
    if (!st && c->bvt->stream_wait_event(c->be, NULL, q->done) != TF_OK)
        st = nccl_backend_fail(c, err, what, "stream_wait_event of the default stream");
    nccl_req_put(c, q);
    return st;
}
