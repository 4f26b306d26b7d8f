/* mpi_sharded.c — ZeRO's collectives (tfcore/comm.h, ABI 1.4):
 * reduce_scatter and all_gather on buf[block * size], in place, started as
 * non-blocking MPI calls and completed by cm_wait like an all-reduce (bounded
 * by comm.timeout_s, progressed by the same thread).
 *
 * A reduce-scatter is one MPI_Ireduce_scatter_block; it cannot write its
 * result where its input is, so the own block's sum arrives in a host buffer
 * of one block and cm_wait copies it in place (averaging first for AVG).
 *
 * MPI counts are int, so a block longer than chunk_elements goes as several
 * calls covering elements [off, off + m) of every block. An all-gather call
 * then uses a datatype of m elements resized to the extent of a whole
 * block, so that "the i-th block" of the call is rank i's block shifted by
 * off. Open MPI refuses MPI_SUM on such a derived type, so a chunked
 * reduce-scatter is one MPI_Ireduce per chunk and owner instead, in place at
 * the owner (the same sums, W calls a chunk).
 *
 * reduce_start (ABI 1.5, ZeRO-2's buckets) is MPI_Ireduce to the root, in
 * place there, one call per chunk; cm_wait averages the root's result.
 *
 * Device memory goes through pinned host buffers (staged) even on a
 * CUDA-aware comm: the receive buffer is host memory. */
#include <string.h>

#include "comm_mpi.h"

/* m elements of base, spaced a block apart (extent block_bytes). */
static int block_type(MPI_Datatype base, size_t m, size_t block_bytes, MPI_Datatype *out)
{
    MPI_Datatype run;
    int rc = MPI_Type_contiguous((int)m, base, &run);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Type_create_resized(run, 0, (MPI_Aint)block_bytes, out);
    MPI_Type_free(&run);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(out);
    return rc;
}

static tf_status start(tf_comm *c, cm_kind kind, void *buf, size_t block, tf_dtype dt, tf_reduce_op op,
                       tf_comm_request **req, tf_error *err)
{
    const char *name = kind == CM_REDUCE_SCATTER ? "reduce_scatter" : "all_gather";
    if (!c || !req) return cm_fail(c, err, "%s: %s is NULL", name, c ? "req" : "comm");
    *req = NULL;
    MPI_Datatype base = cm_reduce_type(dt);
    size_t esize = tf_dtype_size(dt);
    if (base == MPI_DATATYPE_NULL)
        return cm_fail(c, err, "%s: dtype %s is not supported (F32 and F64 are)", name,
                       tf_dtype_name(dt) ? tf_dtype_name(dt) : "unknown");
    if (kind == CM_REDUCE_SCATTER && op != TF_REDUCE_SUM && op != TF_REDUCE_AVG)
        return cm_fail(c, err, "%s: unknown reduce op %d", name, (int)op);
    if (!buf && block) return cm_fail(c, err, "%s: buffer is NULL for %zu elements a rank", name, block);
    if (block > SIZE_MAX / esize / (size_t)c->size)
        return cm_fail(c, err, "%s: %zu elements of %s a rank overflow size_t", name, block, tf_dtype_name(dt));
    size_t count = block * (size_t)c->size, bytes = count * esize, bbytes = block * esize;
    size_t at = (size_t)c->rank * bbytes;

    pthread_mutex_lock(&cm_lock);
    tf_comm_request *r = cm_request_get(c);
    pthread_mutex_unlock(&cm_lock);
    if (!r) return cm_fail(c, err, "%s: out of memory for a request", name);
    r->kind = kind;
    r->buf = buf;
    r->count = block ? count : 0;
    r->block = block;
    r->dt = dt;
    r->op = op;
    r->path = c->path == CM_PATH_HOST ? CM_PATH_HOST : CM_PATH_STAGED;
    r->mpi_buf = buf;
    r->complete = false;
    r->t_start = cm_now();
    r->mpi_rc = MPI_SUCCESS;
    r->nchunks = 0;
    tf_status st = TF_OK;
    if (block && r->path == CM_PATH_STAGED) {
        st = cm_host_reserve(c, &r->stage, bytes, name, err);
        /* a reduce-scatter reads every block; an all-gather only the own one */
        if (!st && kind == CM_REDUCE_SCATTER) st = cm_to_host(c, r->stage.ptr, buf, bytes, name, err);
        if (!st && kind == CM_ALL_GATHER)
            st = cm_to_host(c, (char *)r->stage.ptr + at, (char *)buf + at, bbytes, name, err);
        r->mpi_buf = r->stage.ptr;
    }
    size_t nchunks = block == 0 ? 0 : (block - 1) / c->chunk + 1;
    /* one chunk: MPI_Ireduce_scatter_block into recv; more: MPI_Ireduce per owner, in place */
    r->in_place = kind == CM_ALL_GATHER || nchunks > 1;
    if (!st && block && !r->in_place) st = cm_host_reserve(c, &r->recv, bbytes, name, err);
    pthread_mutex_lock(&cm_lock);
    if (!st) st = cm_request_chunks(c, r, kind == CM_REDUCE_SCATTER && nchunks > 1 ? nchunks * (size_t)c->size
                                                                                   : nchunks, err);
    if (!st && kind == CM_REDUCE_SCATTER && nchunks == 1) {
        int rc = MPI_Ireduce_scatter_block(r->mpi_buf, r->recv.ptr, (int)block, base, MPI_SUM, c->comm, &r->chunks[0]);
        if (rc != MPI_SUCCESS)
            st = cm_mpi_fail(c, err, rc, "MPI_Ireduce_scatter_block of %zu %s a rank", block, tf_dtype_name(dt));
        else
            r->nchunks = 1;
        nchunks = 0;
    }
    for (size_t i = 0; !st && kind == CM_REDUCE_SCATTER && i < nchunks; i++) {
        size_t off = i * c->chunk, m = block - off < c->chunk ? block - off : c->chunk;
        for (int owner = 0; !st && owner < c->size; owner++) {
            char *p = (char *)r->mpi_buf + ((size_t)owner * block + off) * esize;
            int rc = MPI_Ireduce(owner == c->rank ? MPI_IN_PLACE : p, p, (int)m, base, MPI_SUM, owner, c->comm,
                                 &r->chunks[r->nchunks]);
            if (rc != MPI_SUCCESS)
                st = cm_mpi_fail(c, err, rc, "MPI_Ireduce of %zu %s to rank %d, chunk %zu of %zu", m,
                                 tf_dtype_name(dt), owner, i + 1, nchunks);
            else
                r->nchunks++;
        }
    }
    for (size_t i = 0; !st && kind == CM_ALL_GATHER && i < nchunks; i++) {
        size_t off = i * c->chunk, m = block - off < c->chunk ? block - off : c->chunk;
        MPI_Datatype type;
        /* runs of m elements, a block apart */
        int rc = block_type(base, m, bbytes, &type);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, (char *)r->mpi_buf + off * esize, 1, type,
                                c->comm, &r->chunks[i]);
            MPI_Type_free(&type); /* a call in flight keeps its datatype */
        }
        if (rc != MPI_SUCCESS) {
            st = cm_mpi_fail(c, err, rc, "MPI_Iallgather of %zu %s a rank, chunk %zu of %zu (%zu elements)", block,
                             tf_dtype_name(dt), i + 1, nchunks, m);
            break;
        }
        r->nchunks = i + 1;
    }
    st = cm_request_launched(c, r, st, req);
    pthread_mutex_unlock(&cm_lock);
    return st;
}

tf_status cm_reduce_scatter_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                                  tf_comm_request **req, tf_error *err)
{
    return start(c, CM_REDUCE_SCATTER, buf, count, dt, op, req, err);
}

tf_status cm_all_gather_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_comm_request **req,
                              tf_error *err)
{
    return start(c, CM_ALL_GATHER, buf, count, dt, TF_REDUCE_SUM, req, err);
}

tf_status cm_reduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op, int root,
                          tf_comm_request **req, tf_error *err)
{
    if (!c || !req) return cm_fail(c, err, "reduce_start: %s is NULL", c ? "req" : "comm");
    *req = NULL;
    MPI_Datatype type = cm_reduce_type(dt);
    if (type == MPI_DATATYPE_NULL)
        return cm_fail(c, err, "reduce_start: dtype %s cannot be reduced (F32 and F64 can)",
                       tf_dtype_name(dt) ? tf_dtype_name(dt) : "unknown");
    if (op != TF_REDUCE_SUM && op != TF_REDUCE_AVG) return cm_fail(c, err, "reduce_start: unknown reduce op %d", (int)op);
    if (root < 0 || root >= c->size) return cm_fail(c, err, "reduce_start: root %d is not in [0, %d)", root, c->size);
    if (!buf && count) return cm_fail(c, err, "reduce_start: buffer is NULL for %zu elements", count);
    size_t esize = tf_dtype_size(dt);
    if (count > SIZE_MAX / esize)
        return cm_fail(c, err, "reduce_start: %zu elements of %s overflow size_t", count, tf_dtype_name(dt));
    size_t bytes = count * esize;

    pthread_mutex_lock(&cm_lock);
    tf_comm_request *r = cm_request_get(c);
    pthread_mutex_unlock(&cm_lock);
    if (!r) return cm_fail(c, err, "reduce_start: out of memory for a request");
    r->kind = CM_REDUCE;
    r->peer = root;
    r->buf = buf;
    r->count = count;
    r->block = 0;
    r->dt = dt;
    r->op = op;
    r->path = c->path == CM_PATH_HOST ? CM_PATH_HOST : CM_PATH_STAGED;
    r->mpi_buf = buf;
    r->in_place = true;
    r->complete = false;
    r->t_start = cm_now();
    r->mpi_rc = MPI_SUCCESS;
    r->nchunks = 0;
    tf_status st = TF_OK;
    if (count && r->path == CM_PATH_STAGED) {
        st = cm_host_reserve(c, &r->stage, bytes, "reduce_start", err);
        if (!st) st = cm_to_host(c, r->stage.ptr, buf, bytes, "reduce_start", err);
        r->mpi_buf = r->stage.ptr;
    }
    size_t nchunks = count == 0 ? 0 : (count - 1) / c->chunk + 1;
    pthread_mutex_lock(&cm_lock);
    if (!st) st = cm_request_chunks(c, r, nchunks, err);
    for (size_t i = 0; !st && i < nchunks; i++) {
        size_t off = i * c->chunk, m = count - off < c->chunk ? count - off : c->chunk;
        char *p = (char *)r->mpi_buf + off * esize;
        int rc = MPI_Ireduce(c->rank == root ? MPI_IN_PLACE : p, p, (int)m, type, MPI_SUM, root, c->comm,
                             &r->chunks[i]);
        if (rc != MPI_SUCCESS)
            st = cm_mpi_fail(c, err, rc, "MPI_Ireduce of %zu %s to rank %d, chunk %zu of %zu", m, tf_dtype_name(dt),
                             root, i + 1, nchunks);
        else
            r->nchunks = i + 1;
    }
    st = cm_request_launched(c, r, st, req);
    pthread_mutex_unlock(&cm_lock);
    return st;
}
