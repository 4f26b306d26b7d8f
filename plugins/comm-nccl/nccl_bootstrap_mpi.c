/* nccl_bootstrap_mpi.c — the ncclUniqueId through MPI when Open MPI's mpirun
 * started the ranks: MPI_Bcast of the id, MPI_Allreduce of "did your GPU
 * setup work". Built without MPI (configure found none), every entry point
 * says so.
 *
 * libmpi is opened at run time (dlopen), when this bootstrap is chosen, and
 * is not linked: the plugin then loads, and its other bootstraps work, on a
 * GPU machine without Open MPI. mpi.h gives the types and constants only;
 * every function and Open MPI's predefined handles (MPI_COMM_WORLD is the
 * address of the object ompi_mpi_comm_world, ...) come from dlsym. */
#include <stdio.h>
#include <string.h>

#include "nccl_internal.h"

#ifdef TF_NCCL_WITH_MPI
#include <dlfcn.h>
#include <mpi.h>

/* Open MPI's libmpi: soname 40 since Open MPI 3.0 (4.x and 5.x keep it). */
#define NCCL_LIBMPI "libmpi.so.40"

/* The part of MPI this bootstrap uses, resolved from libmpi. */
static struct {
    void *lib;
    int (*Initialized)(int *);
    int (*Finalized)(int *);
    int (*Init)(int *, char ***);
    int (*Finalize)(void);
    int (*Comm_dup)(MPI_Comm, MPI_Comm *);
    int (*Comm_free)(MPI_Comm *);
    int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
    int (*Comm_rank)(MPI_Comm, int *);
    int (*Comm_size)(MPI_Comm, int *);
    int (*Bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*Allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*Error_string)(int, char *, int *);
    MPI_Comm comm_world;
    MPI_Errhandler errors_return;
    MPI_Datatype byte, chr, two_int;
    MPI_Op minloc;
} mpi;

/* A duplicate of MPI_COMM_WORLD whose errors come back as return codes (the
 * world communicator's handler aborts the job, and it is not ours to change
 * when someone else initialized MPI). */
static MPI_Comm boot_comm;
static bool have_boot_comm;
static int boot_rank = -1;

bool nccl_mpi_built(void) { return true; }

bool nccl_mpi_running(void) { return have_boot_comm; }

/* Open libmpi and resolve what is used, once. RTLD_GLOBAL: Open MPI loads its
 * components (mca_*.so) with dlopen, and they look for the symbols of libmpi
 * and libopen-pal in the global scope. The library stays open on purpose. */
static tf_status load_libmpi(int rank, tf_error *err)
{
    if (mpi.lib) return TF_OK;
    void *h = dlopen(NCCL_LIBMPI, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-nccl: rank %d: bootstrap \"mpi\" needs Open MPI, and %s cannot "
                            "be loaded (%s); install Open MPI or use bootstrap = \"file\"",
                            rank, NCCL_LIBMPI, dlerror());
    const char *missing = NULL;
#define NEED_FN(field, name)                                                               \
    do {                                                                                   \
        if (!missing && !(*(void **)&mpi.field = dlsym(h, name))) missing = name;          \
    } while (0)
#define NEED_OBJ(field, type, name)                                                        \
    do {                                                                                   \
        void *p_ = missing ? NULL : dlsym(h, name);                                        \
        if (!missing && !p_) missing = name;                                               \
        mpi.field = (type)p_;                                                              \
    } while (0)
    NEED_FN(Initialized, "MPI_Initialized");
    NEED_FN(Finalized, "MPI_Finalized");
    NEED_FN(Init, "MPI_Init");
    NEED_FN(Finalize, "MPI_Finalize");
    NEED_FN(Comm_dup, "MPI_Comm_dup");
    NEED_FN(Comm_free, "MPI_Comm_free");
    NEED_FN(Comm_set_errhandler, "MPI_Comm_set_errhandler");
    NEED_FN(Comm_rank, "MPI_Comm_rank");
    NEED_FN(Comm_size, "MPI_Comm_size");
    NEED_FN(Bcast, "MPI_Bcast");
    NEED_FN(Allreduce, "MPI_Allreduce");
    NEED_FN(Error_string, "MPI_Error_string");
    /* the objects behind Open MPI's predefined handles (see mpi.h) */
    NEED_OBJ(comm_world, MPI_Comm, "ompi_mpi_comm_world");
    NEED_OBJ(errors_return, MPI_Errhandler, "ompi_mpi_errors_return");
    NEED_OBJ(byte, MPI_Datatype, "ompi_mpi_byte");
    NEED_OBJ(chr, MPI_Datatype, "ompi_mpi_char");
    NEED_OBJ(two_int, MPI_Datatype, "ompi_mpi_2int");
    NEED_OBJ(minloc, MPI_Op, "ompi_mpi_op_minloc");
#undef NEED_FN
#undef NEED_OBJ
    if (missing) {
        memset(&mpi, 0, sizeof mpi);
        dlclose(h);
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-nccl: rank %d: bootstrap \"mpi\": %s has no %s (not Open MPI "
                            "3.0 or later?)",
                            rank, NCCL_LIBMPI, missing);
    }
    mpi.lib = h;
    return TF_OK;
}

static tf_status mpi_fail(tf_error *err, const char *call, int rc)
{
    char s[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (mpi.Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s failed: %s", boot_rank, call, s);
}

tf_status nccl_mpi_start(int rank, int world_size, bool *started_here, tf_error *err)
{
    boot_rank = rank;
    *started_here = false;
    tf_status st = load_libmpi(rank, err);
    if (st) return st;
    int inited = 0, finalized = 0, rc;
    mpi.Initialized(&inited);
    mpi.Finalized(&finalized);
    if (finalized)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-nccl: rank %d: MPI was already finalized in this process", rank);
    if (!inited) {
        if ((rc = mpi.Init(NULL, NULL)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Init", rc);
        *started_here = true;
    }
    if (!have_boot_comm) {
        if ((rc = mpi.Comm_dup(mpi.comm_world, &boot_comm)) != MPI_SUCCESS)
            return mpi_fail(err, "MPI_Comm_dup", rc);
        have_boot_comm = true;
        if ((rc = mpi.Comm_set_errhandler(boot_comm, mpi.errors_return)) != MPI_SUCCESS)
            return mpi_fail(err, "MPI_Comm_set_errhandler", rc);
    }
    int mrank = -1, msize = -1;
    if ((rc = mpi.Comm_rank(boot_comm, &mrank)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_rank", rc);
    if ((rc = mpi.Comm_size(boot_comm, &msize)) != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_size", rc);
    if (mrank != rank || msize != world_size)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-nccl: MPI says this is rank %d of %d, tfcore says rank %d of %d "
                            "(mpirun -np must equal comm.world_size)",
                            mrank, msize, rank, world_size);
    return TF_OK;
}

tf_status nccl_mpi_bcast_id(ncclUniqueId *id, tf_error *err)
{
    if (!have_boot_comm)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: MPI is not started", boot_rank);
    int rc = mpi.Bcast(id->internal, (int)sizeof id->internal, mpi.byte, 0, boot_comm);
    return rc == MPI_SUCCESS ? TF_OK : mpi_fail(err, "MPI_Bcast of the ncclUniqueId", rc);
}

tf_status nccl_mpi_agree(bool ok, const char *mine_why, int *first_failed, char *why, size_t n,
                         tf_error *err)
{
    *first_failed = -1;
    if (!have_boot_comm)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: MPI is not started", boot_rank);
    /* (ok, rank) with MINLOC: ok = 0 when any rank failed, and then the lowest such rank */
    struct {
        int ok, rank;
    } in = {ok ? 1 : 0, boot_rank}, out = {0, 0};
    int rc = mpi.Allreduce(&in, &out, 1, mpi.two_int, mpi.minloc, boot_comm);
    if (rc != MPI_SUCCESS) return mpi_fail(err, "MPI_Allreduce of the init results", rc);
    if (out.ok) return TF_OK;
    char msg[TF_ERROR_MSG_MAX];
    memset(msg, 0, sizeof msg);
    if (out.rank == boot_rank) snprintf(msg, sizeof msg, "%s", mine_why ? mine_why : "");
    rc = mpi.Bcast(msg, (int)sizeof msg, mpi.chr, out.rank, boot_comm);
    if (rc != MPI_SUCCESS) return mpi_fail(err, "MPI_Bcast of an init failure", rc);
    msg[sizeof msg - 1] = '\0';
    *first_failed = out.rank;
    snprintf(why, n, "%s", msg);
    return TF_OK;
}

void nccl_mpi_end(bool started_here, bool clean)
{
    if (!clean || !mpi.lib) return;
    if (have_boot_comm) mpi.Comm_free(&boot_comm);
    have_boot_comm = false;
    int finalized = 0;
    mpi.Finalized(&finalized);
    if (started_here && !finalized) mpi.Finalize();
}

#else /* built without MPI */

bool nccl_mpi_built(void) { return false; }

bool nccl_mpi_running(void) { return false; }

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
