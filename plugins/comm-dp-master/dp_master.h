/* dp_master.h — internals of the "dp-master" comm plugin (nn.DataParallel
 * semantics: one process, one thread per replica; gradients are summed onto
 * the root, the root alone steps the optimizer, then broadcasts parameters).
 *
 * Every rank holds a tf_comm; all of them point at one dp_shared, created by
 * rank 0's init and stored in the launcher's shared cell. A collective is:
 *
 *   post    each rank writes what it was called with (dp_post) into its slot
 *   meet    abortable barrier
 *   check   every rank compares all posts the same way, so either all go on
 *           or all return the same mismatch error
 *   work    phases, each ending in a barrier after which every rank looks at
 *           every rank's `failed` flag of that phase (a backend error on one
 *           rank becomes an error on all, instead of a hang)
 *
 * Posts are double-buffered by the parity of the collective's sequence
 * number: a rank that leaves collective s early can post s+1 while slower
 * ranks still read the posts of s; it cannot reach s+2 before every rank has
 * posted s+1, i.e. has finished reading s.
 */
#ifndef TFCORE_COMM_DP_MASTER_H
#define TFCORE_COMM_DP_MASTER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"

#define DP_NAME "comm-dp-master"
#define DP_MAX_WORLD 4096 /* threads of one process; far above any real machine */
#define DP_WHY_MAX 400    /* bytes of an abort reason or a failure kept in shared state */

/* --- barrier.c: a barrier that can be aborted ------------------------------ */

/* pthread_barrier_t cannot be woken early; this one can: abort() sets a flag
 * that makes every waiter (now and later) return false. */
typedef struct dp_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int parties;
    int waiting;                /* arrived in the current generation */
    unsigned long generation;   /* bumped each time all parties arrived */
    bool aborted;
    int abort_rank;             /* the rank that called abort (first call wins) */
    char why[DP_WHY_MAX];       /* its reason */
} dp_barrier;

/* 0 or an errno value. */
int dp_barrier_init(dp_barrier *b, int parties);
void dp_barrier_destroy(dp_barrier *b);
/* Blocks until all parties arrived; false when the barrier was aborted before
 * that (or already was at entry). */
bool dp_barrier_wait(dp_barrier *b);
/* Wake every waiter for good. Later calls keep the first reason. */
void dp_barrier_abort(dp_barrier *b, int rank, const char *why);
/* True when aborted; copies the aborting rank and reason. */
bool dp_barrier_aborted(dp_barrier *b, int *rank, char *why, size_t n);

/* --- shared state ---------------------------------------------------------- */

typedef enum dp_kind {
    DP_REDUCE = 1,
    DP_BROADCAST = 2,
    DP_ALLREDUCE = 3,
    DP_BARRIER = 4
} dp_kind;

/* How allreduce works on host memory (config key `allreduce`). */
typedef enum dp_allreduce_algo {
    DP_ALLREDUCE_SLICES = 0,          /* rank r sums slice r of every buffer, all copy */
    DP_ALLREDUCE_REDUCE_BROADCAST = 1 /* root 0 sums everything, all copy */
} dp_allreduce_algo;

#define DP_PHASES 3 /* before posting, and at most two work phases (allreduce) */

/* What one rank was called with, and how its part of the work went. */
typedef struct dp_post {
    dp_kind kind;
    void *buf;                  /* [count] of dt, this rank's backend memory */
    size_t count;
    tf_dtype dt;
    tf_reduce_op op;
    int root;
    bool bad;                   /* the rank's own arguments were wrong: */
    char bad_why[DP_WHY_MAX];   /*   what was wrong */
    /* This rank failed before posting (phase 0) or in work phase 1 or 2. One
     * flag per phase: a rank may fail in phase 1 while a slower one still
     * reads the phase-0 flags after the first barrier. */
    bool failed[DP_PHASES];
    char fail_why[TF_ERROR_MSG_MAX]; /* the backend's message (written by the one failure) */
} dp_post;

/* One replica, as rank 0 .. N-1 registered it at init. */
typedef struct dp_slot {
    const tf_backend_vtable *bvt;
    tf_backend *be;
    bool host;                  /* its backend says its memory is host memory */
    bool attached;
} dp_slot;

typedef struct dp_shared {
    int world;
    void **cell;                /* the launcher's cell; reset to NULL when freed */
    int refs;                   /* ranks attached and not finalized yet */
    bool force_staging;         /* config: treat host memory as device memory */
    dp_allreduce_algo algo;     /* config: allreduce on host memory */
    bool host_path;             /* every replica's memory is host memory and staging is not forced */
    dp_barrier barrier;
    dp_slot *slots;             /* [world] */
    dp_post *posts[2];          /* [2][world], by collective parity */
} dp_shared;

struct tf_comm {
    dp_shared *sh;
    int rank, world;
    const tf_backend_vtable *bvt;
    tf_backend *be;
    uint64_t seq;               /* collectives this rank entered */
    void **bufs;                /* [world] scratch: every rank's buffer, for the root */
    /* The root's device staging buffer for other replicas' data: grown, never shrunk. */
    void *staging;              /* [staging_bytes] backend memory */
    size_t staging_bytes;
    /* Pinned host buffers for sums the backend's add cannot do (f64, integers) on device memory. */
    void *host_acc, *host_tmp;  /* [host_bytes] each */
    size_t host_bytes;
};

/* A request of allreduce_start: the work is already done; wait frees it. */
struct tf_comm_request {
    uint64_t magic;
    const tf_comm *owner;
};
#define DP_REQUEST_MAGIC 0x64702d6d61737472ull /* "dp-mastr" */

/* --- config.c -------------------------------------------------------------- */

typedef struct dp_config {
    bool force_staging;
    dp_allreduce_algo algo;
} dp_config;

/* Read the plugin's own keys (force_staging, allreduce); section may be NULL. */
tf_status dp_read_config(tf_section *section, dp_config *out, tf_error *err);

/* --- sum.c: adding replicas' buffers on the root ---------------------------- */

/* Dtypes a reduction accepts, and whether one is a float type (AVG). */
bool dp_reducible(tf_dtype dt);
bool dp_is_float(tf_dtype dt);

/* acc[i] += x[i] for i < n, both host memory, with rank c's backend (f32) or
 * a plain loop (other dtypes). */
tf_status dp_add_host(tf_comm *c, void *acc, const void *x, size_t n, tf_dtype dt,
                      tf_error *err);
/* Divide x[n] by the world size: f32 with the backend's scale by 1/world
 * (x in backend memory), f64 by a division loop (x in host memory). */
tf_status dp_average(tf_comm *c, void *x, size_t n, tf_dtype dt, tf_error *err);
/* The root (rank c->rank): bufs[c->rank] = sum over ranks of bufs[k], adding
 * the others in increasing rank order (then averaged for AVG), reading them
 * through its staging buffer with device-to-device copies. Used where
 * replicas hold device memory, or when staging is forced. bufs: [world]. */
tf_status dp_sum_staged(tf_comm *c, void *const *bufs, size_t n, tf_dtype dt, tf_reduce_op op,
                        tf_error *err);

/* --- collective.c ------------------------------------------------------------ */

const char *dp_kind_name(dp_kind kind);
tf_status dp_collective(tf_comm *c, dp_kind kind, void *buf, size_t count, tf_dtype dt,
                        tf_reduce_op op, int root, const char *local_bad, tf_error *err);

#endif
