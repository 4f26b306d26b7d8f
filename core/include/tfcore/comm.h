/* tfcore/comm.h — the communication strategy vtable (kind TF_KIND_COMM).
 *
 * A comm plugin says how workers are started (launch) and answers "reduce
 * these gradients" (asynchronously where it can, so reductions overlap with
 * backward), broadcast and barrier. Whether the optimizer runs on every rank
 * (DDP, MPI) or on the root followed by a parameter broadcast (DataParallel)
 * is its call too.
 *
 * ABI 1.0. New slots are appended at the end and read through TF_HAS().
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
    void *shared;                     /* TF_LAUNCH_THREADS: state shared by all workers */
} tf_comm_init_args;

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
} tf_comm_vtable;

#ifdef __cplusplus
}
#endif
#endif
