/* mpi_p2p.c — point-to-point messages (ABI 1.4 send / recv): a pipeline
 * stage's activations to the next stage and their gradients back.
 *
 * Each side starts one MPI_Isend / MPI_Irecv of bytes per chunk (at most
 * chunk_elements elements, and INT_MAX bytes) on the comm's communicator and
 * returns a request from the same pool as the all-reduces; cm_wait finishes
 * it under the same deadline (comm.timeout_s from the start, plus the
 * grace). MPI keeps messages between two ranks on one communicator and tag in
 * order, so the k-th send to a rank meets that rank's k-th receive from us.
 * On the staged path a send copies to pinned host memory at the start and a
 * receive copies back to the device in wait; CUDA-aware sends wait for the
 * backend's stream first (the producer's writes must be done). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "comm_mpi.h"

#define CM_P2P_TAG 19 /* one tag for every message: order is per pair of ranks */

static tf_status p2p_start(tf_comm *c, cm_kind kind, void *buf, size_t count, tf_dtype dt,
                           int peer, tf_comm_request **req, tf_error *err)
{
    const char *op = kind == CM_SEND ? "send" : "recv";
    if (!c || !req) return cm_fail(c, err, "%s: %s is NULL", op, c ? "req" : "comm");
    *req = NULL;
    size_t esize = tf_dtype_size(dt);
    if (esize == 0) return cm_fail(c, err, "%s: unknown dtype %d", op, (int)dt);
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return cm_fail(c, err, "%s: peer %d is not another rank (ranks are 0..%d, this is %d)", op, peer,
                       c->size - 1, c->rank);
    if (!buf && count) return cm_fail(c, err, "%s: buffer is NULL for %zu elements", op, count);
    if (count > SIZE_MAX / esize)
        return cm_fail(c, err, "%s: %zu elements of %s overflow size_t", op, count, tf_dtype_name(dt));
    size_t bytes = count * esize;
    size_t chunk = c->chunk * esize;
    if (chunk > INT_MAX) chunk = INT_MAX;
    size_t nchunks = bytes == 0 ? 0 : (bytes - 1) / chunk + 1;

    pthread_mutex_lock(&cm_lock);
    tf_comm_request *r = cm_request_get(c);
    pthread_mutex_unlock(&cm_lock);
    if (!r) return cm_fail(c, err, "%s: out of memory for a request", op);
    r->kind = kind;
    r->peer = peer;
    r->buf = buf;
    r->count = count;
    r->dt = dt;
    r->op = TF_REDUCE_SUM;
    r->path = c->path;
    r->mpi_buf = buf;
    r->complete = false;
    r->t_start = cm_now();
    r->mpi_rc = MPI_SUCCESS;
    r->nchunks = 0;
    tf_status st = TF_OK;
    if (nchunks > r->chunks_cap) {
        MPI_Request *p = realloc(r->chunks, nchunks * sizeof *p);
        if (!p) st = cm_fail(c, err, "%s: out of memory for %zu MPI requests", op, nchunks);
        else {
            r->chunks = p;
            r->chunks_cap = nchunks;
        }
    }
    if (!st && bytes && r->path == CM_PATH_STAGED) {
        st = cm_host_reserve(c, &r->stage, bytes, op, err);
        if (!st && kind == CM_SEND) st = cm_to_host(c, r->stage.ptr, buf, bytes, op, err);
        r->mpi_buf = r->stage.ptr;
    } else if (!st && bytes && r->path == CM_PATH_CUDA_AWARE && kind == CM_SEND) {
        st = cm_device_sync(c, op, err);
    }

    pthread_mutex_lock(&cm_lock);
    for (size_t i = 0; !st && i < nchunks; i++) {
        size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
        char *at = (char *)r->mpi_buf + off;
        int rc = kind == CM_SEND ? MPI_Isend(at, (int)n, MPI_BYTE, peer, CM_P2P_TAG, c->comm, &r->chunks[i])
                                     : MPI_Irecv(at, (int)n, MPI_BYTE, peer, CM_P2P_TAG, c->comm, &r->chunks[i]);
        if (rc != MPI_SUCCESS)
            st = cm_mpi_fail(c, err, rc, "%s of %zu bytes (%s) %s rank %d, chunk %zu of %zu",
                             kind == CM_SEND ? "MPI_Isend" : "MPI_Irecv", bytes, tf_dtype_name(dt),
                             kind == CM_SEND ? "to" : "from", peer, i + 1, nchunks);
        else
            r->nchunks = i + 1;
    }
    if (st && r->nchunks == 0) { /* nothing reached MPI: back to the pool */
        cm_request_release(c, r);
        pthread_mutex_unlock(&cm_lock);
        return st;
    }
    cm_request_inflight(c, r);
    if (!st) cm_test_inflight(c);
    pthread_mutex_unlock(&cm_lock);
    if (st) return st; /* started chunks stay in flight; the core aborts the job */
    *req = r;
    return TF_OK;
}

tf_status cm_send(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer,
                  tf_comm_request **req, tf_error *err)
{
    /* MPI_Isend does not write its buffer; the request keeps one pointer type */
    return p2p_start(c, CM_SEND, (void *)(uintptr_t)buf, count, dt, peer, req, err);
}

tf_status cm_recv(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer,
                  tf_comm_request **req, tf_error *err)
{
    return p2p_start(c, CM_RECV, buf, count, dt, peer, req, err);
}
