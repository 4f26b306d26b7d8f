/* tfcore/comm.h — the communication strategy vtable (kind TF_KIND_COMM).
 *
 * A comm plugin says how workers are started (launch) and answers "reduce
 * these gradients" (asynchronously where it can, so reductions overlap with
 * backward), broadcast and barrier. Whether the optimizer runs on every rank
 * (DDP, MPI) or on the root followed by a parameter broadcast (DataParallel)
 * is its call too.
 *
 * ABI 1.1 (abort appended); ABI 1.4 (reduce_scatter, all_gather appended for
 * ZeRO; then send, recv for pipeline stages); ABI 1.5 (reduce_start for
 * ZeRO-2's buckets). New slots are appended at the
 * end and read through TF_HAS().
 */
#ifndef TFCORE_COMM_H
#define TFCORE_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/backend.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_comm tf_comm;
typedef struct tf_comm_request tf_comm_request;

typedef enum tf_launch_mode {
    TF_LAUNCH_THREADS = 1,   /* one process, a thread per worker (DataParallel) */
    TF_LAUNCH_PROCESSES = 2, /* tfcore forks one process per device (like torchrun) */
    TF_LAUNCH_EXTERNAL = 3   /* started by mpirun / srun; rank read from the environment */
} tf_launch_mode;

typedef enum tf_reduce_op { TF_REDUCE_SUM = 0, TF_REDUCE_AVG = 1 } tf_reduce_op;

typedef struct tf_comm_init_args {
    uint32_t size;                    /* sizeof(tf_comm_init_args) */
    tf_section *section;              /* the config's "comm" section */
    int rank, world_size, local_rank;
    const tf_backend_vtable *backend;
    tf_backend *be;
    /* Where workers of one job meet before they can talk (see TF_COMM_SHARED_BYTES):
     * TF_LAUNCH_THREADS: one `void *` cell, NULL at first, common to every worker.
     *   The core calls init for ranks 0, 1, ..., N-1 in that order on one thread
     *   before any worker runs, and finalize for every rank after all stopped; so
     *   rank 0's init can allocate the shared state and store it in the cell, and
     *   init must not wait for other ranks.
     * TF_LAUNCH_PROCESSES: TF_COMM_SHARED_BYTES of zero-filled memory mapped
     *   MAP_SHARED before the core forked the workers: every worker process sees
     *   the same bytes (e.g. rank 0 publishes an ncclUniqueId there). init is
     *   called in every worker process, concurrently.
     * TF_LAUNCH_EXTERNAL: NULL (the launcher's own runtime connects the ranks). */
    void *shared;
    int local_world_size;             /* workers on this machine (<= world_size) */
    /* --- appended in ABI 1.4: read only when size covers it ------------------ */
    /* comm.timeout_s, which the core owns (below): a plugin that waits in its
     * own loops gives up TF_COMM_TIMEOUT_GRACE_S after it. Args from an older
     * core end before it: the plugin then uses TF_COMM_TIMEOUT_DEFAULT. */
    double timeout_s;
} tf_comm_init_args;

/* comm.timeout_s: the seconds a rank may wait in one collective, measured
 * from when it entered it, before the job is stopped. The core reads and
 * validates the key (its flight recorder and the launcher enforce it for
 * every plugin) and passes it in tf_comm_init_args.timeout_s; plugins never
 * read the key themselves. */
#define TF_COMM_TIMEOUT_DEFAULT 600.0
#define TF_COMM_TIMEOUT_MIN 0.1
#define TF_COMM_TIMEOUT_MAX 604800.0
/* A plugin that waits in its own loops gives up this many seconds after comm.timeout_s, so that the
 * launching tfcore, which reads every rank's recorder, reports first (a
 * plugin's error would end its rank, and mpirun continues a stopped rank
 * with SIGCONT before it kills it: the report would no longer see it
 * stopped). Where nothing watches (ranks you start with mpirun or srun) the
 * plugin's error and the rank's own line are the report. */
#define TF_COMM_TIMEOUT_GRACE_S 2.0

/* Bytes of the TF_LAUNCH_PROCESSES shared region. */
#define TF_COMM_SHARED_BYTES 65536

typedef struct tf_comm_vtable {
    uint32_t size; /* TF_VTABLE_SIZE(tf_comm_vtable) */
    /* Read and validate every key of the plugin's config section without
     * allocating anything (tfcore --dry-run, and before any work starts). */
    tf_status (*check_config)(tf_section *section, tf_error *err);
    tf_launch_mode (*launch_mode)(void);
    /* true: only the root runs the optimizer, then broadcasts parameters. */
    bool (*optimizer_on_root_only)(void);
    tf_status (*init)(const tf_comm_init_args *args, tf_comm **out, tf_error *err);
    void (*finalize)(tf_comm *c);
    /* Start reducing buf[count] (backend memory) across ranks, in place. */
    tf_status (*allreduce_start)(tf_comm *c, void *buf, size_t count, tf_dtype dt,
                                 tf_reduce_op op, tf_comm_request **req, tf_error *err);
    tf_status (*wait)(tf_comm *c, tf_comm_request *req, tf_error *err);
    /* Blocking reduce to the root (in place on the root). */
    tf_status (*reduce)(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                        int root, tf_error *err);
    tf_status (*broadcast)(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                           tf_error *err);
    tf_status (*barrier)(tf_comm *c, tf_error *err);

    /* --- appended in ABI 1.1: optional, read through TF_HAS() ------------------ */
    /* A worker failed: make every other worker's pending and future calls return
     * (with an error) or end its process, so the job stops instead of hanging
     * in a collective. May be called from any thread of the failing worker. */
    void (*abort)(tf_comm *c, const char *why);

    /* --- appended in ABI 1.4 (ZeRO's sharded collectives): optional, read
     * through TF_HAS(); the core refuses comm.zero_stage > 0 without both --- */
    /* Start reducing buf[count * world] (backend memory) across ranks so that
     * each rank's own block, buf[rank*count, (rank+1)*count), holds the sum
     * (or average) of that block over the ranks; the other blocks are
     * unspecified afterwards. In place; completes through wait. */
    tf_status (*reduce_scatter)(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                                tf_comm_request **req, tf_error *err);
    /* Start gathering buf[count * world] (backend memory): each rank's own
     * block buf[rank*count, (rank+1)*count) is copied into the same block of
     * every other rank. In place; completes through wait. */
    tf_status (*all_gather)(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_comm_request **req,
                            tf_error *err);

    /* --- appended in ABI 1.4: point-to-point (pipeline stages); optional, read through TF_HAS() */
    /* Start sending buf[count] dt (backend memory, read until wait returns:
     * not to be written before) to rank peer, or start receiving
     * buf[count] dt (backend memory, valid once wait returns) from rank peer.
     * Messages from one rank to another arrive in the order they were sent;
     * count and dt must match the peer's. Complete each with wait, which
     * fails rather than waits longer than comm.timeout_s (+ the grace) from
     * the start. Several may be in flight, in both directions, so a rank can
     * start a send and then wait in a receive without deadlocking. */
    tf_status (*send)(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer,
                      tf_comm_request **req, tf_error *err);
    tf_status (*recv)(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer,
                      tf_comm_request **req, tf_error *err);

    /* --- appended in ABI 1.5 (ZeRO-2's gradient buckets): optional, read through TF_HAS() */
    /* Start reducing buf[count] (backend memory) across ranks to rank root:
     * when wait returns, root's buf holds the sum (or average); the other
     * ranks' buf is unspecified (the core zeroes it). In place; several may
     * be in flight, to different roots, completed in any order by wait. */
    tf_status (*reduce_start)(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                              int root, tf_comm_request **req, tf_error *err);
} tf_comm_vtable;

#ifdef __cplusplus
}
#endif
#endif
