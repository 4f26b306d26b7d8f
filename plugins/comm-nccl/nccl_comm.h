/* nccl_comm.h — the communicator and request of comm-nccl, and the helpers
 * its collectives (comm_nccl.c) and point-to-point messages (nccl_p2p.c)
 * share. */
#ifndef COMM_NCCL_COMM_H
#define COMM_NCCL_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "nccl_internal.h"

typedef enum nccl_req_kind { NCCL_REQ_COLL = 0, NCCL_REQ_SEND = 1, NCCL_REQ_RECV = 2 } nccl_req_kind;

struct tf_comm_request {
    uint32_t magic;
    bool in_flight;
    tf_event *ready; /* recorded on the default stream: the buffer is complete */
    tf_event *done;  /* recorded on the comm stream: the collective finished */
    tf_comm_request *next_free;
    /* point-to-point (nccl_p2p.c): what to issue, and whether it still waits on the host */
    nccl_req_kind kind;
    bool held;              /* started, not yet issued to NCCL (c->held lists it) */
    void *buf;
    size_t count;           /* elements of type */
    ncclDataType_t type;
    int peer;
    char what[112];         /* "send of 4096 f32 to rank 1", for errors */
};

struct tf_comm {
    const tf_backend_vtable *bvt;
    tf_backend *be;
    int rank, world_size, device;
    nccl_options opt;
    nccl_boot boot;
    ncclComm_t nccl;          /* NULL before ncclCommInitRank and after an abort */
    tf_stream *stream;        /* the comm stream (a backend stream) */
    cudaStream_t cu_stream;   /* its native handle */
    uint32_t *scratch;        /* [4] u32, device memory: the barrier's all-reduce */
    tf_comm_request **reqs;   /* [nreqs] every request made, freed at finalize */
    size_t nreqs, cap_reqs;
    tf_comm_request *free_reqs;
    tf_comm_request **held;   /* [nheld] sends and receives started and not yet issued */
    size_t nheld, cap_held;
    pthread_mutex_t lock;     /* NCCL calls against abort() from another thread */
    atomic_bool aborted;
    char abort_why[TF_ERROR_MSG_MAX];
};

#define NCCL_REQ_MAGIC 0x4b52434eu /* "NCRK" */

/* comm_nccl.c */
tf_status nccl_fail(const tf_comm *c, tf_error *err, const char *what, const char *call, ncclResult_t r,
                    const char *last);
tf_status nccl_backend_fail(const tf_comm *c, tf_error *err, const char *what, const char *call);
tf_status nccl_aborted_error(const tf_comm *c, tf_error *err, const char *what);
void nccl_abort_local(tf_comm *c, const char *why);
tf_status nccl_check_usable(tf_comm *c, const char *what, tf_error *err);
tf_status nccl_req_get(tf_comm *c, tf_comm_request **out, tf_error *err);
void nccl_req_put(tf_comm *c, tf_comm_request *q);
tf_status nccl_host_wait(tf_comm *c, const char *what, tf_error *err);
bool nccl_type_of(tf_dtype dt, ncclDataType_t *t);
const char *nccl_dt_name(tf_dtype dt);

/* nccl_p2p.c: the vtable's send and recv; wait of their requests */
tf_status nccl_send(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                    tf_error *err);
tf_status nccl_recv(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                    tf_error *err);
tf_status nccl_p2p_wait(tf_comm *c, tf_comm_request *q, tf_error *err);
/* Issue every held send and receive as one NCCL group on the comm stream
 * (before any collective, so that every rank's NCCL calls keep the order the
 * core made them in). A failure aborts the communicator. */
tf_status nccl_p2p_flush(tf_comm *c, const char *what, tf_error *err);

#endif
