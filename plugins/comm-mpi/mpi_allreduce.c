/* mpi_allreduce.c — asynchronous all-reduce (allreduce_start / wait), the
 * request pool, and progress; wait completes the sharded collectives of
 * mpi_sharded.c too.
 *
 * allreduce_start starts one MPI_Iallreduce per chunk of at most
 * `chunk_elements` elements, in place, and returns. Open MPI has no
 * asynchronous progress of its own: a non-blocking collective advances only
 * while some MPI call runs in this process. So every allreduce_start tests
 * the requests in flight, and the progress thread (progress_thread = true,
 * README.md says why it is the default) tests them every
 * progress_interval_us while any is pending. wait finishes the MPI requests,
 * divides for AVG and, on the staged path, copies the result back.
 *
 * Requests come from a FIFO pool: the core starts the same buckets in the
 * same order every step and waits them in start order, so request k of a
 * step gets back the staging buffer and chunk array of request k of the
 * step before, and nothing is allocated after the first step. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "comm_mpi.h"

/* --- lists (under cm_lock) --------------------------------------------------- */

static void list_push_tail(tf_comm_request **head, tf_comm_request **tail, tf_comm_request *r)
{
    r->next = NULL;
    r->prev = *tail;
    if (*tail) (*tail)->next = r;
    else *head = r;
    *tail = r;
}

static void list_remove(tf_comm_request **head, tf_comm_request **tail, tf_comm_request *r)
{
    if (r->prev) r->prev->next = r->next;
    else *head = r->next;
    if (r->next) r->next->prev = r->prev;
    else *tail = r->prev;
    r->next = r->prev = NULL;
}

tf_comm_request *cm_request_get(tf_comm *c)
{
    tf_comm_request *r = c->pool_head;
    if (r) {
        list_remove(&c->pool_head, &c->pool_tail, r);
        return r;
    }
    r = calloc(1, sizeof *r);
    if (r) c->nrequests++;
    return r;
}

void cm_request_inflight(tf_comm *c, tf_comm_request *r)
{
    list_push_tail(&c->inflight_head, &c->inflight_tail, r);
    if (r->nchunks == 0) {
        r->complete = true;
    } else {
        c->pending++;
        if (c->progress_running) pthread_cond_signal(&c->progress_wake);
    }
}

void cm_request_release(tf_comm *c, tf_comm_request *r)
{
    list_push_tail(&c->pool_head, &c->pool_tail, r);
}

/* Test every pending request once (this is what moves Open MPI's schedules on). */
void cm_test_inflight(tf_comm *c)
{
    for (tf_comm_request *r = c->inflight_head; r && c->pending; r = r->next) {
        if (r->complete) continue;
        int done = 0;
        int rc = MPI_Testall((int)r->nchunks, r->chunks, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            /* The request's state is now unknown: wait reports the error. */
            r->mpi_rc = rc;
            done = 1;
        }
        if (done) {
            r->complete = true;
            c->pending--;
        }
    }
}

/* --- the progress thread ------------------------------------------------------ */

static void *progress_main(void *arg)
{
    tf_comm *c = arg;
    struct timespec nap = {c->progress_interval_ns / 1000000000L,
                           c->progress_interval_ns % 1000000000L};
    pthread_mutex_lock(&cm_lock);
    while (!c->progress_stop) {
        if (c->pending == 0) {
            pthread_cond_wait(&c->progress_wake, &cm_lock);
            continue;
        }
        cm_test_inflight(c);
        pthread_mutex_unlock(&cm_lock);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&cm_lock);
    }
    pthread_mutex_unlock(&cm_lock);
    return NULL;
}

tf_status cm_progress_start(tf_comm *c, long long interval_us, tf_error *err)
{
    c->progress_interval_ns = (long)interval_us * 1000L;
    c->progress_stop = false;
    int e = pthread_cond_init(&c->progress_wake, NULL);
    if (e) return cm_fail(c, err, "progress thread: pthread_cond_init: %s", strerror(e));
    e = pthread_create(&c->progress, NULL, progress_main, c);
    if (e) {
        pthread_cond_destroy(&c->progress_wake);
        return cm_fail(c, err, "cannot start the progress thread: %s", strerror(e));
    }
    c->progress_running = true;
    return TF_OK;
}

void cm_progress_stop(tf_comm *c)
{
    if (!c->progress_running) return;
    pthread_mutex_lock(&cm_lock);
    c->progress_stop = true;
    pthread_cond_signal(&c->progress_wake);
    pthread_mutex_unlock(&cm_lock);
    pthread_join(c->progress, NULL);
    pthread_cond_destroy(&c->progress_wake);
    c->progress_running = false;
}

/* --- start and wait ----------------------------------------------------------- */

static const char *op_name(tf_reduce_op op) { return op == TF_REDUCE_AVG ? "avg" : "sum"; }

/* Start the chunks of r (under cm_lock). On an MPI error the chunks already
 * started stay in flight: the job cannot continue, the core aborts it. */
tf_status cm_request_chunks(tf_comm *c, tf_comm_request *r, size_t nchunks, tf_error *err)
{
    if (nchunks > r->chunks_cap) {
        MPI_Request *p = realloc(r->chunks, nchunks * sizeof *p);
        if (!p) return cm_fail(c, err, "out of memory for %zu MPI requests", nchunks);
        r->chunks = p;
        r->chunks_cap = nchunks;
    }
    r->nchunks = 0;
    return TF_OK;
}

static tf_status start_chunks(tf_comm *c, tf_comm_request *r, MPI_Datatype type, size_t esize,
                              tf_error *err)
{
    size_t nchunks = r->count == 0 ? 0 : (r->count - 1) / c->chunk + 1;
    tf_status cst = cm_request_chunks(c, r, nchunks, err);
    if (cst) return cst;
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * c->chunk;
        size_t n = r->count - off < c->chunk ? r->count - off : c->chunk;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)r->mpi_buf + off * esize, (int)n, type,
                                MPI_SUM, c->comm, &r->chunks[i]);
        if (rc != MPI_SUCCESS)
            return cm_mpi_fail(c, err, rc,
                               "MPI_Iallreduce of %zu %s (%s), chunk %zu of %zu (%zu elements)",
                               r->count, tf_dtype_name(r->dt), op_name(r->op), i + 1, nchunks, n);
        r->nchunks = i + 1;
    }
    return TF_OK;
}

tf_status cm_allreduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                             tf_comm_request **req, tf_error *err)
{
    if (!c || !req) return cm_fail(c, err, "allreduce_start: %s is NULL", c ? "req" : "comm");
    *req = NULL;
    MPI_Datatype type = cm_reduce_type(dt);
    if (type == MPI_DATATYPE_NULL)
        return cm_fail(c, err, "allreduce_start: dtype %s cannot be reduced (F32 and F64 can)",
                       tf_dtype_name(dt) ? tf_dtype_name(dt) : "unknown");
    if (op != TF_REDUCE_SUM && op != TF_REDUCE_AVG)
        return cm_fail(c, err, "allreduce_start: unknown reduce op %d", (int)op);
    if (!buf && count)
        return cm_fail(c, err, "allreduce_start: buffer is NULL for %zu elements", count);
    size_t esize = tf_dtype_size(dt);
    if (count > SIZE_MAX / esize)
        return cm_fail(c, err, "allreduce_start: %zu elements of %s overflow size_t", count,
                       tf_dtype_name(dt));
    size_t bytes = count * esize;

    pthread_mutex_lock(&cm_lock);
    tf_comm_request *r = cm_request_get(c);
    if (!r) {
        pthread_mutex_unlock(&cm_lock);
        return cm_fail(c, err, "allreduce_start: out of memory for a request");
    }
    pthread_mutex_unlock(&cm_lock);

    r->kind = CM_ALLREDUCE;
    r->peer = -1;
    r->buf = buf;
    r->count = count;
    r->block = 0;
    r->dt = dt;
    r->op = op;
    r->path = cm_reduction_path(c, dt, op);
    r->mpi_buf = buf;
    r->complete = false;
    r->t_start = cm_now();
    r->mpi_rc = MPI_SUCCESS;
    r->nchunks = 0;
    tf_status st = TF_OK;
    if (count && r->path == CM_PATH_STAGED) {
        /* The copy waits for the backend's writes to buf (same default stream). */
        st = cm_host_reserve(c, &r->stage, bytes, "allreduce_start", err);
        if (!st) st = cm_to_host(c, r->stage.ptr, buf, bytes, "allreduce_start", err);
        r->mpi_buf = r->stage.ptr;
    } else if (count && r->path == CM_PATH_CUDA_AWARE) {
        st = cm_device_sync(c, "allreduce_start", err);
    }

    pthread_mutex_lock(&cm_lock);
    if (!st) st = start_chunks(c, r, type, esize, err);
    st = cm_request_launched(c, r, st, req);
    pthread_mutex_unlock(&cm_lock);
    return st;
}

tf_status cm_request_launched(tf_comm *c, tf_comm_request *r, tf_status st, tf_comm_request **req)
{
    if (st && r->nchunks == 0) {
        /* nothing reached MPI: the request goes back to the pool */
        list_push_tail(&c->pool_head, &c->pool_tail, r);
        return st;
    }
    cm_request_inflight(c, r);
    if (!st) cm_test_inflight(c); /* progress for this and earlier buckets */
    if (st) return st; /* started chunks stay in flight; see start_chunks */
    *req = r;
    return TF_OK;
}

/* The MPI call a request kind makes, and what it does, for messages. */
static const char *kind_call(cm_kind k)
{
    return k == CM_REDUCE_SCATTER ? "MPI_Ireduce_scatter_block"
           : k == CM_ALL_GATHER   ? "MPI_Iallgather"
           : k == CM_REDUCE       ? "MPI_Ireduce"
                                  : "MPI_Iallreduce";
}
static const char *kind_what(cm_kind k)
{
    return k == CM_REDUCE_SCATTER ? "reduce-scatter"
           : k == CM_ALL_GATHER   ? "all-gather"
           : k == CM_REDUCE       ? "reduce"
                                  : "all-reduce";
}

tf_status cm_wait(tf_comm *c, tf_comm_request *r, tf_error *err)
{
    if (!c || !r) return cm_fail(c, err, "wait: %s is NULL", c ? "request" : "comm");
    pthread_mutex_lock(&cm_lock);
    bool known = false;
    for (tf_comm_request *q = c->inflight_head; q; q = q->next)
        if (q == r) known = true;
    if (!known) {
        pthread_mutex_unlock(&cm_lock);
        return cm_fail(c, err, "wait: the request is not in flight on this comm (waited twice?)");
    }
    if (!r->complete) {
        char what[96];
        if (r->kind == CM_SEND || r->kind == CM_RECV)
            snprintf(what, sizeof what, "%s of %zu %s %s rank %d", r->kind == CM_SEND ? "send" : "receive",
                     r->count, tf_dtype_name(r->dt), r->kind == CM_SEND ? "to" : "from", r->peer);
        else
            snprintf(what, sizeof what, "%s of %zu %s", kind_what(r->kind), r->count, tf_dtype_name(r->dt));
        tf_error perr = {0};
        double deadline = r->t_start + c->timeout_s + CM_TIMEOUT_GRACE_S;
        tf_status pst = cm_poll(c, r->chunks, (int)r->nchunks, deadline, what, &perr);
        if (pst && !r->complete) {
            /* overdue or failed: MPI still holds the request, which stays in
             * flight (never reused); the core stops the job */
            pthread_mutex_unlock(&cm_lock);
            *err = perr;
            return pst;
        }
        if (!r->complete) { /* the progress thread may have finished it meanwhile */
            r->complete = true;
            c->pending--;
        }
    }
    list_remove(&c->inflight_head, &c->inflight_tail, r);
    pthread_mutex_unlock(&cm_lock);

    tf_status st = TF_OK;
    if (r->mpi_rc != MPI_SUCCESS) {
        if (r->kind == CM_SEND || r->kind == CM_RECV)
            st = cm_mpi_fail(c, err, r->mpi_rc, "%s of %zu %s %s rank %d",
                             r->kind == CM_SEND ? "MPI_Isend" : "MPI_Irecv", r->count,
                             tf_dtype_name(r->dt), r->kind == CM_SEND ? "to" : "from", r->peer);
        else
            st = cm_mpi_fail(c, err, r->mpi_rc, "%s of %zu %s (%s)", kind_call(r->kind), r->count,
                             tf_dtype_name(r->dt), op_name(r->op));
    } else if (r->kind == CM_SEND) {
        /* a send has nothing left to do */
    } else if (r->kind == CM_RECV) {
        if (r->count && r->path == CM_PATH_STAGED)
            st = cm_to_device(c, r->buf, r->stage.ptr, r->count * tf_dtype_size(r->dt), "recv", err);
    } else if (r->count && r->kind == CM_REDUCE_SCATTER) {
        /* the own block's sum is in recv (host) or in place: put it in place, average it */
        size_t esize = tf_dtype_size(r->dt), bytes = r->block * esize, at = (size_t)c->rank * bytes;
        char *own = (char *)r->mpi_buf + at;
        if (!r->in_place) memcpy(own, r->recv.ptr, bytes);
        if (r->op == TF_REDUCE_AVG) st = cm_divide(c, own, true, r->block, r->dt, "wait", err);
        if (!st && r->path == CM_PATH_STAGED)
            st = cm_to_device(c, (char *)r->buf + at, (char *)r->stage.ptr + at, bytes, "wait", err);
    } else if (r->count && r->kind == CM_REDUCE) {
        /* only the root's buffer holds the result */
        if (c->rank == r->peer && r->op == TF_REDUCE_AVG)
            st = cm_divide(c, r->mpi_buf, true, r->count, r->dt, "wait", err);
        if (!st && c->rank == r->peer && r->path == CM_PATH_STAGED)
            st = cm_to_device(c, r->buf, r->stage.ptr, r->count * tf_dtype_size(r->dt), "wait", err);
    } else if (r->count && r->kind == CM_ALL_GATHER) {
        if (r->path == CM_PATH_STAGED)
            st = cm_to_device(c, r->buf, r->stage.ptr, r->count * tf_dtype_size(r->dt), "wait", err);
    } else if (r->count) {
        size_t bytes = r->count * tf_dtype_size(r->dt);
        bool on_host = r->path != CM_PATH_CUDA_AWARE;
        if (r->op == TF_REDUCE_AVG) st = cm_divide(c, r->mpi_buf, on_host, r->count, r->dt, "wait", err);
        if (!st && r->path == CM_PATH_STAGED)
            st = cm_to_device(c, r->buf, r->stage.ptr, bytes, "wait", err);
    }
    pthread_mutex_lock(&cm_lock);
    list_push_tail(&c->pool_head, &c->pool_tail, r);
    pthread_mutex_unlock(&cm_lock);
    return st;
}

size_t cm_requests_free(tf_comm *c)
{
    pthread_mutex_lock(&cm_lock);
    tf_comm_request *r;
    while ((r = c->pool_head)) {
        list_remove(&c->pool_head, &c->pool_tail, r);
        cm_host_release(c, &r->stage);
        cm_host_release(c, &r->recv);
        free(r->chunks);
        free(r);
        c->nrequests--;
    }
    size_t left = c->nrequests;
    pthread_mutex_unlock(&cm_lock);
    return left;
}
