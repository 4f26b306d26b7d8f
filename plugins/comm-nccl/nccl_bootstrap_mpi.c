/* nccl_bootstrap_mpi.c — the ncclUniqueId through MPI when Open MPI's mpirun
 * started the ranks: MPI_Bcast of the id, MPI_Allreduce of "did your GPU
 * setup work". Built without MPI (configure found none), every entry point
 * says so. */
#include <stdio.h>
#include <string.h>

#include "nccl_internal.h"

#ifdef TF_NCCL_WITH_MPI
#include <dlfcn.h>
#include <mpi.h>

#include "tfcore/log.h"

/* A duplicate of MPI_COMM_WORLD whose errors come back as return codes (the
 * world communicator's handler aborts the job, and it is not ours to change
 * when someone else initialized MPI). */
static MPI_Comm boot_comm = MPI_COMM_NULL;
static int boot_rank = -1;

bool nccl_mpi_built(void) { return true; }

static tf_status mpi_fail(tf_error *err, const char *call, int rc)
{
    char s[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s failed: %s", boot_rank, call, s);
}

/* Open MPI 4 loads its components (mca_*.so) with dlopen, and they find the
 * symbols of libmpi and libopen-pal in the global scope. The core dlopen()s
 * this plugin RTLD_LOCAL, which brings libmpi in local too, and MPI_Init then
 * fails to load its components. Re-opening the already loaded libmpi with
 * RTLD_GLOBAL (RTLD_NOLOAD: never a second copy) puts it, and the libraries
 * it needs, in the global scope. The handle stays open on purpose. */
static void promote_libmpi_to_global(void)
{
    Dl_info info;
    if (!dladdr((void *)&MPI_Init, &info) || !info.dli_fname) {
        tf_log(TF_LOG_WARN, "comm-nccl: cannot find which library holds MPI_Init (dladdr); "
                            "MPI_Init may fail to load Open MPI's components");
        return;
    }
    if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
        tf_log(TF_LOG_WARN, "comm-nccl: cannot make %s global: %s", info.dli_fname, dlerror());
}

tf_status nccl_mpi_start(int rank, int world_size, bool *started_here, tf_error *err)
{
    boot_rank = rank;
    *started_here = false;
    int inited = 0, finalized = 0, rc;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: MPI was already finalized in this process", rank);
    if (!inited) {
        promote_libmpi_to_global();
        if ((rc = MPI_Init(NULL, NULL)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Init", rc);
        *started_here = true;
    }
    if (boot_comm == MPI_COMM_NULL) {
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &boot_comm)) != MPI_SUCCESS)
            return mpi_fail(err, "MPI_Comm_dup", rc);
        if ((rc = MPI_Comm_set_errhandler(boot_comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
            return mpi_fail(err, "MPI_Comm_set_errhandler", rc);
    }
    int mrank = -1, msize = -1;
    if ((rc = MPI_Comm_rank(boot_comm, &mrank)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_rank", rc);
    if ((rc = MPI_Comm_size(boot_comm, &msize)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_size", rc);
    if (mrank != rank || msize != world_size)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-nccl: MPI says this is rank %d of %d, tfcore says rank %d of %d "
                            "(mpirun -np must equal comm.world_size)",
                            mrank, msize, rank, world_size);
    return TF_OK;
}

tf_status nccl_mpi_bcast_id(ncclUniqueId *id, tf_error *err)
{
    if (boot_comm == MPI_COMM_NULL)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: MPI is not started", boot_rank);
    int rc = MPI_Bcast(id->internal, (int)sizeof id->internal, MPI_BYTE, 0, boot_comm);
    return rc == MPI_SUCCESS ? TF_OK : mpi_fail(err, "MPI_Bcast of the ncclUniqueId", rc);
}

tf_status nccl_mpi_agree(bool ok, const char *mine_why, int *first_failed, char *why, size_t n,
                         tf_error *err)
{
    *first_failed = -1;
    if (boot_comm == MPI_COMM_NULL)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: MPI is not started", boot_rank);
    /* (ok, rank) with MINLOC: ok = 0 when any rank failed, and then the lowest such rank */
    struct {
        int ok, rank;
    } in = {ok ? 1 : 0, boot_rank}, out = {0, 0};
    int rc = MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, boot_comm);
    if (rc != MPI_SUCCESS) return mpi_fail(err, "MPI_Allreduce of the init results", rc);
    if (out.ok) return TF_OK;
    char msg[TF_ERROR_MSG_MAX];
    memset(msg, 0, sizeof msg);
    if (out.rank == boot_rank) snprintf(msg, sizeof msg, "%s", mine_why ? mine_why : "");
    rc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, out.rank, boot_comm);
    if (rc != MPI_SUCCESS) return mpi_fail(err, "MPI_Bcast of an init failure", rc);
    msg[sizeof msg - 1] = '\0';
    *first_failed = out.rank;
    snprintf(why, n, "%s", msg);
    return TF_OK;
}

void nccl_mpi_end(bool started_here, bool clean)
{
    if (!clean) return;
    if (boot_comm != MPI_COMM_NULL) MPI_Comm_free(&boot_comm);
    boot_comm = MPI_COMM_NULL;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (started_here && !finalized) MPI_Finalize();
}

#else /* built without MPI */

bool nccl_mpi_built(void) { return false; }

static tf_status no_mpi(tf_error *err)
{
    return tf_error_set(err, TF_ERR_CONFIG,
                        "comm-nccl: bootstrap \"mpi\" needs comm-nccl built with Open MPI "
                        "(configure found no mpicc/mpi.h)");
}

tf_status nccl_mpi_start(int rank, int world_size, bool *started_here, tf_error *err)
{
    (void)rank, (void)world_size;
    *started_here = false;
    return no_mpi(err);
}

tf_status nccl_mpi_bcast_id(ncclUniqueId *id, tf_error *err)
{
    (void)id;
    return no_mpi(err);
}

tf_status nccl_mpi_agree(bool ok, const char *mine_why, int *first_failed, char *why, size_t n,
                         tf_error *err)
{
    (void)ok, (void)mine_why, (void)why, (void)n;
    *first_failed = -1;
    return no_mpi(err);
}

void nccl_mpi_end(bool started_here, bool clean) { (void)started_here, (void)clean; }

#endif
