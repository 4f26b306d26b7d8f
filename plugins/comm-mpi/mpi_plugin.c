/* mpi_plugin.c — the "mpi" comm plugin: DDP-style gradient all-reduce over
 * MPI (Open MPI), started by mpirun (TF_LAUNCH_EXTERNAL), optimizer on every
 * rank. This file: descriptor, vtable, probe, check_config, init/finalize
 * (MPI start-up, the rank/size check, the communicator, the buffer path),
 * abort, and the error helpers. README.md tells the user side. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_mpi.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;

/* Process-wide MPI state, under cm_lock. */
static bool mpi_ours;        /* this plugin called MPI_Init_thread */
static int live_comms;       /* comms initialised and not finalised */
static size_t stuck_requests; /* reductions finalize found still in flight */

/* --- errors ---------------------------------------------------------------- */

static int where_prefix(const tf_comm *c, char *out, size_t n)
{
    return c ? snprintf(out, n, "comm-mpi: rank %d of %d: ", c->rank, c->size)
             : snprintf(out, n, "comm-mpi: ");
}

tf_status cm_fail(const tf_comm *c, tf_error *err, const char *fmt, ...)
{
    char msg[TF_ERROR_MSG_MAX];
    int k = where_prefix(c, msg, sizeof msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    return tf_error_set(err, TF_ERR_RUNTIME, "%s", msg);
}

tf_status cm_mpi_fail(const tf_comm *c, tf_error *err, int rc, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX / 2], lib[MPI_MAX_ERROR_STRING];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int len = 0;
    if (MPI_Error_string(rc, lib, &len) != MPI_SUCCESS || len <= 0)
        snprintf(lib, sizeof lib, "MPI error code %d", rc);
    else
        lib[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    lib[strcspn(lib, "\n")] = '\0';
    return cm_fail(c, err, "%s failed: %s", what, lib);
}

/* --- config and probe --------------------------------------------------------- */

static tf_status mpi_check_config(tf_section *section, tf_error *err)
{
    cm_options opt;
    return cm_read_options(section, &opt, err);
}

/* Cheap: the library is loaded (the plugin links it) and answers; MPI is not started. */
static int mpi_probe(char *why, size_t n)
{
    char path[4096];
    tf_error e = {0};
    if (cm_library_path(path, sizeof path, &e)) {
        snprintf(why, n, "%s", e.msg);
        return 0;
    }
    char version[96];
    cm_library_version(version, sizeof version);
    if (strncmp(version, "an MPI", 6) == 0) {
        snprintf(why, n, "comm-mpi: %s does not answer MPI_Get_library_version", path);
        return 0;
    }
    return 1;
}

static tf_launch_mode mpi_launch_mode(void) { return TF_LAUNCH_EXTERNAL; }
static bool mpi_optimizer_on_root_only(void) { return false; }

/* --- init ----------------------------------------------------------------------- */

/* MPI_Init_thread unless MPI runs already (under cm_lock). *provided: the thread level. */
static tf_status start_mpi(bool progress_thread, int *provided, tf_error *err)
{
    int finalized = 0, initialized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return cm_fail(NULL, err, "MPI was already finalized in this process (a comm was "
                                  "finalized before); it cannot be started again");
    MPI_Initialized(&initialized);
    if (initialized) return MPI_Query_thread(provided) == MPI_SUCCESS ? TF_OK
                            : cm_fail(NULL, err, "MPI_Query_thread failed");
    /* The progress thread tests requests while the trainer starts others; the
     * plugin serializes its own calls, but abort may come from any thread. */
    int want = progress_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    int rc = MPI_Init_thread(NULL, NULL, want, provided);
    if (rc != MPI_SUCCESS) return cm_mpi_fail(NULL, err, rc, "MPI_Init_thread");
    mpi_ours = true;
    /* Open MPI 4.1 reports a failed non-blocking collective (MPI_Ibcast,
     * MPI_Ireduce, ...) through MPI_COMM_WORLD's error handler, not the
     * communicator's: ours returns it too (MPI is this plugin's alone). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    return TF_OK;
}

/* A private communicator, its errors returned, not fatal. The dup itself runs
 * with MPI_ERRORS_RETURN on the world communicator, put back afterwards. */
static tf_status make_comm(tf_comm *c, tf_error *err)
{
    MPI_Errhandler old;
    int rc = MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    if (rc != MPI_SUCCESS) return cm_mpi_fail(c, err, rc, "MPI_Comm_get_errhandler");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    MPI_Errhandler_free(&old);
    if (rc != MPI_SUCCESS) return cm_mpi_fail(c, err, rc, "MPI_Comm_dup of MPI_COMM_WORLD");
    rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&c->comm);
        return cm_mpi_fail(c, err, rc, "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)");
    }
    return TF_OK;
}

/* Host memory goes as is; device memory to a CUDA-aware library, else staged. */
static tf_status choose_path(tf_comm *c, const cm_options *opt, tf_section *section,
                             tf_error *err)
{
    bool host = TF_HAS(c->bvt, host_memory) && c->bvt->host_memory(c->be);
    bool aware = cm_library_cuda_aware();
    if (strcmp(opt->device_buffers, "cuda-aware") == 0 && !aware)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm.device_buffers is \"cuda-aware\", but %s is not "
                            "CUDA-aware (MPIX_Query_cuda_support() says no); use \"auto\" or "
                            "\"staged\"",
                            tf_cfg_where(section, "device_buffers"), c->library);
    if (strcmp(opt->device_buffers, "staged") == 0) c->path = CM_PATH_STAGED;
    else if (host) c->path = CM_PATH_HOST;
    else c->path = aware ? CM_PATH_CUDA_AWARE : CM_PATH_STAGED;
    return TF_OK;
}

static tf_status init_locked(const tf_comm_init_args *args, const cm_options *opt, tf_comm *c,
                             int *provided, tf_error *err)
{
    tf_status st = start_mpi(opt->progress_thread, provided, err);
    if (st) return st;
    int size = 0, rank = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size != args->world_size)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-mpi: mpirun started %d rank%s, but comm.world_size is %d "
                            "(run `mpirun -np %d`, or set comm.world_size = %d)",
                            size, size == 1 ? "" : "s", args->world_size, args->world_size,
                            size);
    if (rank != args->rank)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-mpi: MPI says this process is rank %d of %d, but tfcore "
                            "started it as rank %d (launcher environment from another job?)",
                            rank, size, args->rank);
    c->rank = rank;
    c->size = size;
    cm_library_version(c->library, sizeof c->library);
    if ((st = choose_path(c, opt, args->section, err))) return st;
    if ((st = make_comm(c, err))) return st;
    live_comms++;
    return TF_OK;
}

static tf_status mpi_init(const tf_comm_init_args *args, tf_comm **out, tf_error *err)
{
    if (!args || !out) return cm_fail(NULL, err, "init: %s is NULL", args ? "out" : "args");
    *out = NULL;
    if (args->size < offsetof(tf_comm_init_args, shared))
        return cm_fail(NULL, err, "init: init args are %u bytes, at least %zu expected",
                       args->size, offsetof(tf_comm_init_args, shared));
    if (!args->backend || !args->be) return cm_fail(NULL, err, "init: no backend given");
    if (args->world_size < 1 || args->rank < 0 || args->rank >= args->world_size)
        return cm_fail(NULL, err, "init: rank %d of world size %d is out of range", args->rank,
                       args->world_size);
    double timeout_s = TF_COMM_TIMEOUT_DEFAULT; /* the core's comm.timeout_s (ABI 1.4) */
    if (args->size >= offsetof(tf_comm_init_args, timeout_s) + sizeof args->timeout_s)
        timeout_s = args->timeout_s;
    if (!(timeout_s >= TF_COMM_TIMEOUT_MIN && timeout_s <= TF_COMM_TIMEOUT_MAX))
        return cm_fail(NULL, err, "init: timeout_s %g is outside [%g, %g]", timeout_s, TF_COMM_TIMEOUT_MIN,
                       TF_COMM_TIMEOUT_MAX);
    cm_options opt;
    tf_status st = cm_read_options(args->section, &opt, err);
    if (st) return st;
    /* Before MPI_Init: Open MPI's components need libmpi's symbols global. */
    if ((st = cm_library_promote(err))) return st;

    tf_comm *c = calloc(1, sizeof *c);
    if (!c) return cm_fail(NULL, err, "init: out of memory (%zu bytes)", sizeof *c);
    c->bvt = args->backend;
    c->be = args->be;
    c->chunk = (size_t)opt.chunk_elements;
    c->timeout_s = timeout_s;
    c->poll_ns = (long)opt.progress_interval_us * 1000L;
    c->comm = MPI_COMM_NULL;
    int provided = MPI_THREAD_SINGLE;
    pthread_mutex_lock(&cm_lock);
    st = init_locked(args, &opt, c, &provided, err);
    pthread_mutex_unlock(&cm_lock);
    /* On failure MPI is left running (never finalized here): a rank that fails
     * alone must not block in MPI_Finalize while the others wait for it; its
     * exit makes mpirun end the job. A later init in this process reuses MPI. */
    if (st) {
        free(c);
        return st;
    }

    bool thread = opt.progress_thread;
    if (thread && provided < MPI_THREAD_SERIALIZED) {
        tf_warn("comm-mpi: MPI runs at thread level %d (below MPI_THREAD_SERIALIZED): no "
                "progress thread; reductions advance only inside comm calls", provided);
        thread = false;
    }
    if (thread && (st = cm_progress_start(c, opt.progress_interval_us, err))) {
        pthread_mutex_lock(&cm_lock);
        MPI_Comm_free(&c->comm);
        live_comms--;
        pthread_mutex_unlock(&cm_lock);
        free(c);
        return st;
    }
    if (c->rank == 0)
        tf_info("comm-mpi: %d ranks, %s, buffers: %s, progress: %s", c->size, c->library,
                cm_path_name(c->path),
                thread ? "thread" : "inside comm calls only");
    *out = c;
    return TF_OK;
}

static void mpi_finalize(tf_comm *c)
{
    if (!c) return;
    cm_progress_stop(c);
    size_t left = cm_requests_free(c);
    if (left)
        tf_warn("comm-mpi: rank %d of %d: finalize with %zu reduction%s still in flight (never "
                "waited); MPI is left running",
                c->rank, c->size, left, left == 1 ? "" : "s");
    pthread_mutex_lock(&cm_lock);
    cm_host_release(c, &c->blocking_stage);
    free(c->blocking_reqs);
    stuck_requests += left + c->blocking_stuck;
    MPI_Comm_free(&c->comm);
    live_comms--;
    /* MPI_Finalize with operations pending is erroneous (it may hang). */
    if (live_comms == 0 && mpi_ours && stuck_requests == 0) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS) tf_warn("comm-mpi: MPI_Finalize returned error %d", rc);
        mpi_ours = false;
    }
    pthread_mutex_unlock(&cm_lock);
    free(c);
}

/* --- abort ------------------------------------------------------------------------ */

/* Not under cm_lock: the failing thread may hold it, blocked in a collective
 * that will never finish. MPI_Abort ends every rank of the job. */
static void mpi_abort(tf_comm *c, const char *why)
{
    char who[64];
    where_prefix(c, who, sizeof who);
    tf_log(TF_LOG_ERROR, "%saborting the job: %s", who, why ? why : "(no reason given)");
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
}

static const tf_comm_vtable mpi_vtable = {
    .size = TF_VTABLE_SIZE(tf_comm_vtable),
    .check_config = mpi_check_config,
    .launch_mode = mpi_launch_mode,
    .optimizer_on_root_only = mpi_optimizer_on_root_only,
    .init = mpi_init,
    .finalize = mpi_finalize,
    .allreduce_start = cm_allreduce_start,
    .wait = cm_wait,
    .reduce = cm_reduce,
    .broadcast = cm_broadcast,
    .barrier = cm_barrier,
    .abort = mpi_abort,
    .reduce_scatter = cm_reduce_scatter_start,
    .all_gather = cm_all_gather_start,
    .send = cm_send,
    .recv = cm_recv,
    .reduce_start = cm_reduce_start,
};

TF_PLUGIN_DEFINE(TF_KIND_COMM, CM_PLUGIN_NAME, CM_PLUGIN_VERSION,
                 "DDP-style gradient all-reduce over MPI (Open MPI), started by mpirun", mpi_probe,
                 &mpi_vtable)
