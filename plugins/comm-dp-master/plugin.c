/* plugin.c — the "dp-master" comm plugin: nn.DataParallel in one process.
 * N replicas run as threads (TF_LAUNCH_THREADS); the core splits each batch
 * over them, calls reduce(SUM, root 0) on the gradients, runs the optimizer
 * on rank 0 only, then broadcast(root 0) on the parameters. This file holds
 * the vtable, init/finalize and the argument checks; collective.c moves the
 * data. See README.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_master.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

static tf_status dp_check_config(tf_section *section, tf_error *err)
{
    dp_config cfg;
    return dp_read_config(section, &cfg, err);
}

static tf_launch_mode dp_launch_mode(void) { return TF_LAUNCH_THREADS; }
static bool dp_optimizer_on_root_only(void) { return true; }

/* --- init / finalize ---------------------------------------------------------- */

static void shared_free(dp_shared *sh)
{
    if (!sh) return;
    dp_barrier_destroy(&sh->barrier);
    free(sh->slots);
    free(sh->posts[0]);
    free(sh->posts[1]);
    free(sh);
}

static tf_status shared_new(int world, const dp_config *cfg, bool host, void **cell,
                            dp_shared **out, tf_error *err)
{
    dp_shared *sh = calloc(1, sizeof *sh);
    if (!sh) return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": init: out of memory");
    int rc = dp_barrier_init(&sh->barrier, world);
    if (rc) {
        free(sh);
        return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": init: creating the barrier: %s",
                            strerror(rc));
    }
    sh->slots = calloc((size_t)world, sizeof *sh->slots);
    sh->posts[0] = calloc((size_t)world, sizeof(dp_post));
    sh->posts[1] = calloc((size_t)world, sizeof(dp_post));
    if (!sh->slots || !sh->posts[0] || !sh->posts[1]) {
        shared_free(sh);
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init: out of memory for the state of %d replicas", world);
    }
    sh->world = world;
    sh->cell = cell;
    sh->force_staging = cfg->force_staging;
    sh->algo = cfg->algo;
    sh->host_path = host && !cfg->force_staging;
    *out = sh;
    return TF_OK;
}

static tf_status dp_init(const tf_comm_init_args *args, tf_comm **out, tf_error *err)
{
    if (!args || !out)
        return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": init: args or out is NULL");
    *out = NULL;
    size_t need = offsetof(tf_comm_init_args, shared) + sizeof(void *);
    if (args->size < need)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init: args.size is %u, expected at least %zu (a core "
                            "older than comm ABI 1.1 has no shared cell)",
                            args->size, need);
    int rank = args->rank, world = args->world_size;
    if (world < 1 || world > DP_MAX_WORLD)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init: world_size must be in [1, %d], got %d",
                            DP_MAX_WORLD, world);
    if (rank < 0 || rank >= world)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init: rank must be in [0, %d), got %d", world, rank);
    if (!args->backend || !args->be)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init (rank %d): no backend (backend or be is NULL)", rank);
    if (!args->shared)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": init (rank %d): no shared cell: dp-master runs replicas "
                            "as threads of one process (launch mode threads)",
                            rank);
    dp_config cfg;
    tf_status st = dp_read_config(args->section, &cfg, err);
    if (st) return st;
    const tf_backend_vtable *bvt = args->backend;
    bool host = TF_HAS(bvt, host_memory) && bvt->host_memory(args->be);

    tf_comm *c = calloc(1, sizeof *c);
    void **bufs = calloc((size_t)world, sizeof *bufs);
    if (!c || !bufs) {
        free(c);
        free(bufs);
        return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": init (rank %d): out of memory", rank);
    }
    void **cell = args->shared;
    dp_shared *sh = *cell;
    if (rank == 0) {
        if (sh) st = tf_error_set(err, TF_ERR_RUNTIME,
                                  DP_NAME ": init (rank 0): the shared cell already holds a "
                                  "dp-master state (rank 0 initialized twice?)");
        else if ((st = shared_new(world, &cfg, host, cell, &sh, err)) == TF_OK)
            *cell = sh;
    } else if (!sh) {
        st = tf_error_set(err, TF_ERR_RUNTIME,
                          DP_NAME ": init (rank %d): rank 0 was not initialized first (the "
                          "shared cell is empty)",
                          rank);
    } else if (sh->world != world) {
        st = tf_error_set(err, TF_ERR_RUNTIME,
                          DP_NAME ": init (rank %d): world_size %d, but rank 0 was initialized "
                          "with %d",
                          rank, world, sh->world);
    } else if (sh->slots[rank].attached) {
        st = tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": init (rank %d): rank %d initialized twice",
                          rank, rank);
    } else if (host != sh->slots[0].host) {
        st = tf_error_set(err, TF_ERR_RUNTIME,
                          DP_NAME ": init (rank %d): this replica's backend holds %s memory but "
                          "rank 0's holds %s memory; every replica needs the same kind",
                          rank, host ? "host" : "device", sh->slots[0].host ? "host" : "device");
    }
    if (st) {
        free(c);
        free(bufs);
        return st;
    }
    sh->slots[rank] = (dp_slot){bvt, args->be, host, true};
    sh->refs++;
    c->sh = sh;
    c->rank = rank;
    c->world = world;
    c->bvt = bvt;
    c->be = args->be;
    c->bufs = bufs;
    if (rank == 0)
        tf_debug(DP_NAME ": %d replicas; %s", world,
                 sh->host_path ? "host memory: replicas read each other's buffers"
                 : sh->force_staging ? "staging forced: copies through the root's staging buffer"
                                     : "device memory: copies through the root's staging buffer");
    *out = c;
    return TF_OK;
}

static void dp_finalize(tf_comm *c)
{
    if (!c) return;
    if (c->staging) c->bvt->free(c->be, c->staging, TF_MEM_DEVICE);
    if (c->host_acc) c->bvt->free(c->be, c->host_acc, TF_MEM_HOST_PINNED);
    if (c->host_tmp) c->bvt->free(c->be, c->host_tmp, TF_MEM_HOST_PINNED);
    free(c->bufs);
    dp_shared *sh = c->sh;
    sh->slots[c->rank].attached = false;
    if (--sh->refs == 0) {
        *sh->cell = NULL;
        shared_free(sh);
    }
    free(c);
}

/* --- collectives: argument checks, then collective.c ---------------------------- */

/* Why this rank's arguments are wrong, written into why[n]; NULL if they are fine. */
static const char *bad_args(dp_kind kind, const tf_comm *c, const void *buf, size_t count,
                            tf_dtype dt, tf_reduce_op op, int root, char *why, size_t n)
{
    size_t esize = tf_dtype_size(dt);
    bool reduces = kind == DP_REDUCE || kind == DP_ALLREDUCE;
    if (esize == 0)
        snprintf(why, n, "unknown dtype %d", (int)dt);
    else if (reduces && !dp_reducible(dt))
        snprintf(why, n, "%s takes F32, F64, I32 or I64, not %s", dp_kind_name(kind),
                 tf_dtype_name(dt));
    else if (reduces && op != TF_REDUCE_SUM && op != TF_REDUCE_AVG)
        snprintf(why, n, "unknown reduce op %d", (int)op);
    else if (reduces && op == TF_REDUCE_AVG && !dp_is_float(dt))
        snprintf(why, n, "AVG needs F32 or F64, not %s", tf_dtype_name(dt));
    else if (kind != DP_ALLREDUCE && (root < 0 || root >= c->world))
        snprintf(why, n, "root %d is outside [0, %d)", root, c->world);
    else if (count > 0 && !buf)
        snprintf(why, n, "buf is NULL with count %zu", count);
    else if (count > SIZE_MAX / esize)
        snprintf(why, n, "%zu elements of %s overflow size_t", count, tf_dtype_name(dt));
    else
        return NULL;
    return why;
}

static tf_status no_comm(const char *what, tf_error *err)
{
    return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": %s: comm is NULL", what);
}

static tf_status dp_reduce(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                           int root, tf_error *err)
{
    if (!c) return no_comm("reduce", err);
    char why[200];
    const char *bad = bad_args(DP_REDUCE, c, buf, count, dt, op, root, why, sizeof why);
    return dp_collective(c, DP_REDUCE, buf, count, dt, op, root, bad, err);
}

static tf_status dp_broadcast(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                              tf_error *err)
{
    if (!c) return no_comm("broadcast", err);
    char why[200];
    const char *bad =
        bad_args(DP_BROADCAST, c, buf, count, dt, TF_REDUCE_SUM, root, why, sizeof why);
    return dp_collective(c, DP_BROADCAST, buf, count, dt, TF_REDUCE_SUM, root, bad, err);
}

/* Done synchronously: the request only marks completion. */
static tf_status dp_allreduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt,
                                    tf_reduce_op op, tf_comm_request **req, tf_error *err)
{
    if (!c) return no_comm("allreduce_start", err);
    if (req) *req = NULL;
    char why[200];
    const char *bad = bad_args(DP_ALLREDUCE, c, buf, count, dt, op, 0, why, sizeof why);
    if (!bad && !req) bad = "req is NULL";
    tf_status st = dp_collective(c, DP_ALLREDUCE, buf, count, dt, op, 0, bad, err);
    if (st) return st;
    tf_comm_request *r = malloc(sizeof *r);
    if (!r)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": allreduce_start on rank %d: out of memory for the request",
                            c->rank);
    r->magic = DP_REQUEST_MAGIC;
    r->owner = c;
    *req = r;
    return TF_OK;
}

static tf_status dp_wait(tf_comm *c, tf_comm_request *req, tf_error *err)
{
    if (!c) return no_comm("wait", err);
    if (!req)
        return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": wait on rank %d: request is NULL",
                            c->rank);
    if (req->magic != DP_REQUEST_MAGIC || req->owner != c)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            DP_NAME ": wait on rank %d: not a request of this rank's "
                            "allreduce_start",
                            c->rank);
    req->magic = 0;
    free(req);
    return TF_OK;
}

static tf_status dp_barrier_op(tf_comm *c, tf_error *err)
{
    if (!c) return no_comm("barrier", err);
    return dp_collective(c, DP_BARRIER, NULL, 0, TF_DTYPE_U8, TF_REDUCE_SUM, 0, NULL, err);
}

static void dp_abort(tf_comm *c, const char *why)
{
    if (!c) return;
    dp_barrier_abort(&c->sh->barrier, c->rank, why);
}

static const tf_comm_vtable dp_vtable = {
    .size = TF_VTABLE_SIZE(tf_comm_vtable),
    .check_config = dp_check_config,
    .launch_mode = dp_launch_mode,
    .optimizer_on_root_only = dp_optimizer_on_root_only,
    .init = dp_init,
    .finalize = dp_finalize,
    .allreduce_start = dp_allreduce_start,
    .wait = dp_wait,
    .reduce = dp_reduce,
    .broadcast = dp_broadcast,
    .barrier = dp_barrier_op,
    .abort = dp_abort,
};

TF_PLUGIN_DEFINE(TF_KIND_COMM, "dp-master", "1.0.0",
                 "DataParallel: replica threads, gradients summed on the root, which alone "
                 "steps and broadcasts parameters",
                 NULL, &dp_vtable)
