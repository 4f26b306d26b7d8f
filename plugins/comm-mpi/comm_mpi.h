/* comm_mpi.h — internals of the "mpi" comm plugin (tfcore-comm-mpi.so),
 * shared by its source files. Nothing here is part of the ABI.
 *
 * Every MPI call the plugin makes, except MPI_Abort, runs under one
 * process-wide lock (cm_lock): MPI is one per process, the core may call from
 * more than one thread, and the optional progress thread tests requests while
 * the trainer starts new ones. */
#ifndef COMM_MPI_H
#define COMM_MPI_H

#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "tfcore/comm.h"

#define CM_PLUGIN_NAME "mpi"
#define CM_PLUGIN_VERSION "1.0.0"

/* --- configuration (mpi_config.c) ---------------------------------------- */

typedef struct cm_options {
    const char *device_buffers; /* "auto" | "cuda-aware" | "staged" */
    bool progress_thread;       /* a thread that drives MPI while backward computes */
    long long progress_interval_us; /* its sleep between two MPI_Testall rounds */
    long long chunk_elements;   /* most elements one MPI call is given */
} cm_options;

/* Read and validate the plugin's own keys of the comm section. */
tf_status cm_read_options(tf_section *section, cm_options *opt, tf_error *err);

/* --- the MPI library (mpi_library.c) ------------------------------------- */

/* Make libmpi's symbols global (see mpi_library.c for why), once. */
tf_status cm_library_promote(tf_error *err);
/* The path of the loaded libmpi (for messages); fails when it cannot be found. */
tf_status cm_library_path(char *out, size_t n, tf_error *err);
/* "Open MPI v4.1.4" (the first part of MPI_Get_library_version). */
void cm_library_version(char *out, size_t n);
/* Whether the library can take device pointers (asked at run time, after MPI_Init). */
bool cm_library_cuda_aware(void);

/* --- the communicator ----------------------------------------------------- */

/* How this rank's backend buffers reach MPI. */
typedef enum cm_path {
    CM_PATH_HOST = 0,       /* backend memory is host memory: given to MPI as is */
    CM_PATH_CUDA_AWARE = 1, /* device pointers given to a CUDA-aware MPI after a stream sync */
    CM_PATH_STAGED = 2      /* copied to pinned host memory, reduced there, copied back */
} cm_path;

const char *cm_path_name(cm_path p);

/* Host memory from the backend (TF_MEM_HOST_PINNED), kept and grown only when
 * a larger size is asked for. */
typedef struct cm_host_buffer {
    void *ptr;
    size_t bytes;
} cm_host_buffer;

/* What a request does. */
typedef enum cm_kind {
    CM_ALLREDUCE = 0,      /* MPI_Iallreduce, in place */
    CM_REDUCE_SCATTER = 1, /* MPI_Ireduce_scatter_block into recv, then into the own block */
    CM_ALL_GATHER = 2,     /* MPI_Iallgather, in place */
    CM_SEND = 3,           /* MPI_Isend to peer (ABI 1.4 send) */
    CM_RECV = 4,           /* MPI_Irecv from peer (ABI 1.4 recv) */
    CM_REDUCE = 5          /* MPI_Ireduce to peer (the root), in place there (ABI 1.5 reduce_start) */
} cm_kind;

struct tf_comm_request {
    tf_comm_request *next, *prev; /* in the comm's pool (FIFO) or in-flight list */
    cm_kind kind;
    int peer;                     /* send / recv: the other rank; CM_REDUCE: the root */
    void *buf;                    /* [count] dt, backend memory (the caller's) */
    size_t count;                 /* elements of buf: block * size for the sharded kinds */
    size_t block;                 /* the sharded kinds: elements of each rank's block */
    cm_host_buffer recv;          /* [block] dt, CM_REDUCE_SCATTER's result before it goes in place */
    bool in_place;                /* the sharded kinds: the result is in mpi_buf already (no recv) */
    tf_dtype dt;
    tf_reduce_op op;
    cm_path path;                 /* path this reduction takes (see cm_reduction_path) */
    void *mpi_buf;                /* [count] dt that MPI reduces in place: buf or stage.ptr */
    cm_host_buffer stage;         /* [count] dt, pinned host; reused across steps */
    MPI_Request *chunks;          /* [nchunks] one MPI request per chunk */
    size_t nchunks, chunks_cap;
    double t_start;               /* cm_now() at the start (the timeout counts from it) */
    bool complete;                /* every chunk finished (or failed) */
    int mpi_rc;                   /* first MPI error of the chunks, MPI_SUCCESS if none */
};

struct tf_comm {
    int rank, size;
    MPI_Comm comm;               /* a duplicate of MPI_COMM_WORLD, MPI_ERRORS_RETURN */
    const tf_backend_vtable *bvt;
    tf_backend *be;
    cm_path path;
    size_t chunk;                /* most elements in one MPI call */
    double timeout_s;            /* comm.timeout_s */
    long poll_ns;                /* a waiting rank's sleep between tests (progress_interval_us) */
    char library[96];            /* "Open MPI v4.1.4", for messages */

    /* Guarded by cm_lock. */
    tf_comm_request *pool_head, *pool_tail;         /* free requests, oldest first */
    tf_comm_request *inflight_head, *inflight_tail; /* started, not yet waited */
    size_t pending;              /* in-flight requests not yet complete */
    size_t nrequests;            /* requests allocated (pool + in flight) */
    cm_host_buffer blocking_stage; /* [bytes] staging of reduce and broadcast */
    MPI_Request *blocking_reqs;  /* [blocking_reqs_cap] requests of reduce, broadcast, barrier */
    size_t blocking_reqs_cap;
    size_t blocking_stuck;       /* requests of those left with MPI (a timeout): no MPI_Finalize */

    /* The progress thread (when options say so and the thread level allows). */
    bool progress_running, progress_stop;
    pthread_t progress;
    pthread_cond_t progress_wake;
    long progress_interval_ns;
};

/* The lock around every MPI call (see the top of this file). */
extern pthread_mutex_t cm_lock;

/* --- errors (mpi_plugin.c) -------------------------------------------------- */

/* TF_ERR_RUNTIME "comm-mpi: rank R of N: <what>: <MPI_Error_string(rc)>". */
tf_status cm_mpi_fail(const tf_comm *c, tf_error *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* TF_ERR_RUNTIME "comm-mpi: rank R of N: <what>" (c may be NULL: no rank). */
tf_status cm_fail(const tf_comm *c, tf_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- data movement (mpi_buffers.c) ---------------------------------------- */

/* The MPI type of a reducible dtype (F32, F64); MPI_DATATYPE_NULL otherwise. */
MPI_Datatype cm_reduce_type(tf_dtype dt);
/* The path a reduction of dt with op takes on this comm: the comm's path,
 * except that a CUDA-aware comm stages AVG of dtypes the backend cannot scale. */
cm_path cm_reduction_path(const tf_comm *c, tf_dtype dt, tf_reduce_op op);
/* Grow hb to at least `bytes` of pinned host memory (never shrinks). */
tf_status cm_host_reserve(tf_comm *c, cm_host_buffer *hb, size_t bytes, const char *what,
                          tf_error *err);
void cm_host_release(tf_comm *c, cm_host_buffer *hb);
/* Copy backend memory to host (and wait for the copy), or back. */
tf_status cm_to_host(tf_comm *c, void *host, const void *dev, size_t bytes, const char *what,
                     tf_error *err);
tf_status cm_to_device(tf_comm *c, void *dev, const void *host, size_t bytes, const char *what,
                       tf_error *err);
/* Wait for the backend's default stream (its writes to buffers are done). */
tf_status cm_device_sync(tf_comm *c, const char *what, tf_error *err);
/* buf[count] /= size: on the host for host memory, by the backend otherwise. */
tf_status cm_divide(tf_comm *c, void *buf, bool host, size_t count, tf_dtype dt,
                    const char *what, tf_error *err);

/* --- collectives ------------------------------------------------------------ */

/* mpi_allreduce.c */
tf_status cm_allreduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                             tf_comm_request **req, tf_error *err);
tf_status cm_wait(tf_comm *c, tf_comm_request *req, tf_error *err);
/* The pool and in-flight lists (cm_lock held). */
tf_comm_request *cm_request_get(tf_comm *c);
void cm_request_inflight(tf_comm *c, tf_comm_request *r);
void cm_request_release(tf_comm *c, tf_comm_request *r);
/* Test every pending request once (cm_lock held). */
void cm_test_inflight(tf_comm *c);
/* mpi_sharded.c: ZeRO's reduce_scatter and all_gather (tfcore/comm.h), as
 * requests of the same pool, completed by cm_wait. */
tf_status cm_reduce_scatter_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                                  tf_comm_request **req, tf_error *err);
tf_status cm_all_gather_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_comm_request **req,
                              tf_error *err);
tf_status cm_reduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op, int root,
                          tf_comm_request **req, tf_error *err);
/* mpi_allreduce.c, for mpi_sharded.c: putting a request whose chunks were started (nchunks of them;
 * st: how starting went) in flight or, none started, back in the pool. Both
 * under cm_lock. */
tf_status cm_request_launched(tf_comm *c, tf_comm_request *r, tf_status st, tf_comm_request **req);
/* The request's chunk array grown to n (under cm_lock). */
tf_status cm_request_chunks(tf_comm *c, tf_comm_request *r, size_t n, tf_error *err);
/* Progress thread start/stop, and freeing the request pool at finalize. */
tf_status cm_progress_start(tf_comm *c, long long interval_us, tf_error *err);
void cm_progress_stop(tf_comm *c);
/* Free every pooled request; returns the number still in flight (not freed). */
size_t cm_requests_free(tf_comm *c);

/* mpi_poll.c: wait for reqs[n] (cm_lock held; released while sleeping)
 * without spinning a core: MPI_Testall in a loop, at first back to back,
 * then every poll_ns, then every millisecond; an error once deadline
 * (cm_now()) has passed: comm.timeout_s, a rank is stalled or gone.
 * `what` names the collective in that error. */
double cm_now(void);
/* comm.timeout_s + TF_COMM_TIMEOUT_GRACE_S (tfcore/comm.h) after a collective's start. */
#define CM_TIMEOUT_GRACE_S TF_COMM_TIMEOUT_GRACE_S
tf_status cm_poll(tf_comm *c, MPI_Request *reqs, int n, double deadline, const char *what, tf_error *err);

/* mpi_p2p.c: point-to-point messages (ABI 1.4), completed by cm_wait. */
tf_status cm_send(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer,
                  tf_comm_request **req, tf_error *err);
tf_status cm_recv(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer,
                  tf_comm_request **req, tf_error *err);

/* mpi_blocking.c */
tf_status cm_reduce(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op, int root,
                    tf_error *err);
tf_status cm_broadcast(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                       tf_error *err);
tf_status cm_barrier(tf_comm *c, tf_error *err);

#endif
