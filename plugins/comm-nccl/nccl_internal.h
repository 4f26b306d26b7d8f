/* nccl_internal.h — what the files of comm-nccl share: its config keys, the
 * exchange of the ncclUniqueId between ranks (the bootstrap), and the
 * launcher's shared region as comm-nccl lays it out. */
#ifndef COMM_NCCL_INTERNAL_H
#define COMM_NCCL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "tfcore/comm.h"
#include "tfcore/config.h"
#include "tfcore/error.h"

/* How the ranks learn rank 0's ncclUniqueId (key `bootstrap`). */
typedef enum nccl_boot_kind {
    NCCL_BOOT_AUTO = 0,     /* launcher if args->shared, else mpi under mpirun, else file */
    NCCL_BOOT_LAUNCHER = 1, /* through the core's shared region (tfcore forked the ranks) */
    NCCL_BOOT_MPI = 2,      /* MPI_Bcast (started by Open MPI's mpirun) */
    NCCL_BOOT_FILE = 3      /* a file on a filesystem every node shares */
} nccl_boot_kind;

const char *nccl_boot_name(nccl_boot_kind k);

/* The plugin's own keys of the comm section (README.md lists them). */
typedef struct nccl_options {
    nccl_boot_kind bootstrap;
    const char *bootstrap_file;  /* NULL when not set; lives as long as the config */
    const char *bootstrap_token; /* NULL: taken from the environment (Slurm, PBS, LSF, Flux) */
    double bootstrap_timeout_s;  /* how long a rank waits for the id / for the others */
    double timeout_s;            /* how long the host waits in a blocking collective: the
                                  * core's comm.timeout_s, from tf_comm_init_args */
} nccl_options;

#define NCCL_TOKEN_MAX 128 /* bytes of a job token, without the NUL */
/* 1 to NCCL_TOKEN_MAX printable ASCII characters, no spaces. */
bool nccl_token_valid(const char *t);

/* Read and check every key (check_config and init). sec may be NULL: defaults. */
tf_status nccl_read_options(tf_section *sec, nccl_options *o, tf_error *err);

/* True when comm-nccl was built with Open MPI (bootstrap = "mpi" possible). */
bool nccl_mpi_built(void);

/* --- the bootstrap: one rank's view ------------------------------------- */
typedef struct nccl_boot {
    nccl_boot_kind kind;   /* resolved: LAUNCHER, MPI or FILE */
    int rank, world_size;
    void *shared;          /* LAUNCHER: the core's TF_COMM_SHARED_BYTES region */
    const nccl_options *opt;
    char token[NCCL_TOKEN_MAX + 1]; /* FILE: this run's token */
    bool mpi_started;      /* MPI: this plugin called MPI_Init (and will finalize) */
    bool file_written;     /* FILE, rank 0: the file is there and is ours to remove */
} nccl_boot;

/* Makes rank 0's id (ncclGetUniqueId in the plugin). */
typedef tf_status (*nccl_make_id_fn)(ncclUniqueId *id, tf_error *err);

/* Pick the bootstrap (resolving "auto") and, for FILE, the job token.
 * TF_ERR_CONFIG when the chosen way cannot work in this process. */
tf_status nccl_boot_resolve(nccl_boot *b, const nccl_options *opt, int rank, int world_size,
                            void *shared, tf_error *err);
/* Rank 0 makes the id and hands it out; every other rank receives it. */
tf_status nccl_boot_exchange(nccl_boot *b, nccl_make_id_fn make_id, ncclUniqueId *id,
                             tf_error *err);
/* After each rank set up its device: `mine` is this rank's result (its
 * message in mine_err). Returns TF_OK only when every rank succeeded
 * (LAUNCHER: through the shared region, MPI: an MPI_Allreduce; FILE: no
 * channel, so only this rank's result counts). On failure err names the
 * first rank that failed and why. */
tf_status nccl_boot_agree(nccl_boot *b, tf_status mine, const tf_error *mine_err, tf_error *err);
/* This rank failed before the communicator exists: tell the others where a
 * channel exists (LAUNCHER: the shared region; FILE, rank 0 before it wrote
 * the id: a failure file). MPI ranks learn it in nccl_boot_agree. */
void nccl_boot_fail(nccl_boot *b, const char *why);
/* After ncclCommInitRank succeeded on this rank (every rank has the id):
 * FILE, rank 0: remove the file so no later run can read it. */
void nccl_boot_done(nccl_boot *b);
/* At finalize (clean) or after a failed init (not clean): remove rank 0's
 * file if still there; when clean, also MPI_Finalize if this plugin started
 * MPI. After a failure MPI is left alone: MPI_Finalize may wait for ranks
 * that will never come, and mpirun stops the job when this process exits. */
void nccl_boot_end(nccl_boot *b, bool clean);

/* --- the launcher's shared region ----------------------------------------- */
/* Record that `rank` failed or aborted (the first caller's why wins). */
void nccl_shared_fail(void *shared, int rank, const char *why);
/* True when some rank recorded a failure: *rank and why[n] say which and why. */
bool nccl_shared_failed(void *shared, int *rank, char *why, size_t n);

/* --- the MPI bootstrap (nccl_bootstrap_mpi.c) --------------------------- */
tf_status nccl_mpi_start(int rank, int world_size, bool *started_here, tf_error *err);
tf_status nccl_mpi_bcast_id(ncclUniqueId *id, tf_error *err);
/* ok: this rank's result; on return *first_failed is -1 or the lowest failed
 * rank, whose message is copied into why[n]. */
tf_status nccl_mpi_agree(bool ok, const char *mine_why, int *first_failed, char *why, size_t n,
                         tf_error *err);
/* True once nccl_mpi_start made the bootstrap communicator. */
bool nccl_mpi_running(void);
/* clean: free the bootstrap communicator, and MPI_Finalize if started_here. */
void nccl_mpi_end(bool started_here, bool clean);

/* --- the probe (nccl_probe.c): 1 when a CUDA device is there, else 0 and why */
int nccl_probe(char *why, size_t n);

/* --- small helpers ----------------------------------------------------------- */
double nccl_now_s(void);          /* CLOCK_MONOTONIC seconds */
void nccl_sleep_s(double seconds); /* nanosleep, restarted on EINTR */

#endif
