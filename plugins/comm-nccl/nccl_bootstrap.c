/* nccl_bootstrap.c — how the ranks of one job learn rank 0's ncclUniqueId
 * before ncclCommInitRank, and learn whether every rank set up its GPU:
 *   launcher  the core's MAP_SHARED region (tfcore forked the ranks)
 *   mpi       MPI_Bcast / MPI_Allreduce (nccl_bootstrap_mpi.c)
 *   file      a file on a shared filesystem, tagged with a job token
 * Nothing here touches CUDA: rank 0's id comes from a callback. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tfcore/file.h"
#include "tfcore/log.h"

#include "nccl_internal.h"

double nccl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nccl_sleep_s(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---------------------------------------------------------------------------
 * The launcher's shared region. Every worker maps the same zero-filled bytes
 * (MAP_SHARED before the fork), so lock-free C11 atomics order the plain
 * fields: a writer fills them, then publishes with a release store; a reader
 * acquire-loads the flag before it reads them. */
typedef struct nccl_shared {
    _Atomic uint32_t id_ready;   /* 1 once rank 0 wrote id and world_size */
    _Atomic uint32_t ready;      /* ranks that set up their device */
    _Atomic uint32_t fail_claim; /* the first rank to fail sets it, then writes why */
    _Atomic uint32_t failed;     /* 0, or 1 + that rank, stored after why */
    int32_t world_size;
    ncclUniqueId id;
    char why[TF_ERROR_MSG_MAX];
} nccl_shared;

_Static_assert(sizeof(nccl_shared) <= TF_COMM_SHARED_BYTES,
               "comm-nccl's shared state must fit in the launcher's region");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "process-shared atomics need lock-free ints");

void nccl_shared_fail(void *shared, int rank, const char *why)
{
    nccl_shared *sh = shared;
    if (!sh) return;
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong_explicit(&sh->fail_claim, &zero, 1, memory_order_acq_rel,
                                                 memory_order_acquire))
        return; /* another rank failed first: its message stands */
    snprintf(sh->why, sizeof sh->why, "%s", why && *why ? why : "(no reason given)");
    atomic_store_explicit(&sh->failed, (uint32_t)rank + 1, memory_order_release);
}

bool nccl_shared_failed(void *shared, int *rank, char *why, size_t n)
{
    nccl_shared *sh = shared;
    if (!sh) return false;
    uint32_t f = atomic_load_explicit(&sh->failed, memory_order_acquire);
    if (f == 0) return false;
    if (rank) *rank = (int)f - 1;
    if (why && n) snprintf(why, n, "%s", sh->why);
    return true;
}

static tf_status peer_failed(const nccl_boot *b, const char *during, tf_error *err)
{
    int who = -1;
    char why[TF_ERROR_MSG_MAX];
    nccl_shared_failed(b->shared, &who, why, sizeof why);
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: %s stopped: rank %d failed: %s",
                        b->rank, during, who, why);
}

static tf_status launcher_exchange(nccl_boot *b, nccl_make_id_fn make_id, ncclUniqueId *id,
                                   tf_error *err)
{
    nccl_shared *sh = b->shared;
    if (b->rank == 0) {
        tf_status st = make_id(id, err);
        if (st) {
            tf_error_prefix(err, "comm-nccl: rank 0: ncclGetUniqueId");
            nccl_shared_fail(sh, 0, err->msg);
            return st;
        }
        memcpy(&sh->id, id, sizeof *id);
        sh->world_size = b->world_size;
        atomic_store_explicit(&sh->id_ready, 1, memory_order_release);
        return TF_OK;
    }
    double deadline = nccl_now_s() + b->opt->bootstrap_timeout_s;
    for (;;) {
        if (atomic_load_explicit(&sh->id_ready, memory_order_acquire)) {
            if (sh->world_size != b->world_size)
                return tf_error_set(err, TF_ERR_RUNTIME,
                                    "comm-nccl: rank %d: rank 0 runs with world_size %d, this "
                                    "rank with %d",
                                    b->rank, (int)sh->world_size, b->world_size);
            memcpy(id, &sh->id, sizeof *id);
            return TF_OK;
        }
        if (nccl_shared_failed(sh, NULL, NULL, 0)) return peer_failed(b, "init", err);
        if (nccl_now_s() > deadline)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "comm-nccl: rank %d: timed out after %g s waiting for rank 0's "
                                "ncclUniqueId (bootstrap launcher; comm.bootstrap_timeout_s)",
                                b->rank, b->opt->bootstrap_timeout_s);
        nccl_sleep_s(0.001);
    }
}

static tf_status launcher_agree(nccl_boot *b, tf_status mine, const tf_error *mine_err,
                                tf_error *err)
{
    nccl_shared *sh = b->shared;
    if (mine) {
        nccl_shared_fail(sh, b->rank, mine_err->msg);
        if (err != mine_err) *err = *mine_err;
        return mine;
    }
    atomic_fetch_add_explicit(&sh->ready, 1, memory_order_acq_rel);
    double deadline = nccl_now_s() + b->opt->bootstrap_timeout_s;
    for (;;) {
        if (nccl_shared_failed(sh, NULL, NULL, 0)) return peer_failed(b, "init", err);
        uint32_t n = atomic_load_explicit(&sh->ready, memory_order_acquire);
        if (n >= (uint32_t)b->world_size) return TF_OK;
        if (nccl_now_s() > deadline) {
            tf_error_set(err, TF_ERR_RUNTIME,
                         "comm-nccl: rank %d: timed out after %g s waiting for the other ranks "
                         "to set up their GPU (%u of %d ready; comm.bootstrap_timeout_s)",
                         b->rank, b->opt->bootstrap_timeout_s, n, b->world_size);
            nccl_shared_fail(sh, b->rank, err->msg);
            return TF_ERR_RUNTIME;
        }
        nccl_sleep_s(0.001);
    }
}

/* ---------------------------------------------------------------------------
 * The file bootstrap. Rank 0 sets up its GPU first, then writes, atomically
 * (temporary file + rename):
 *     tfcore-nccl-bootstrap 1
 *     token <job token>
 *     world_size <N>
 *     id <256 hex digits: the 128 bytes of the ncclUniqueId>
 * or, when its setup failed, "failed <its error>" as line 4, so that the
 * others stop at once instead of at their timeout. The other ranks poll
 * until they read a file whose token is theirs: a file left by an earlier
 * run has another token and is never used. Rank 0 removes the id file once
 * every rank has joined the communicator (a failure file stays). */
#define BOOT_MAGIC "tfcore-nccl-bootstrap 1"
#define BOOT_FILE_MAX 4096

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The file's fields. */
typedef struct boot_file {
    char token[NCCL_TOKEN_MAX + 1];
    long world_size;
    ncclUniqueId id;
    char failed[BOOT_FILE_MAX]; /* rank 0's error when line 4 is "failed <message>" */
} boot_file;

/* Cuts the next '\n'-terminated line off *p (at most end). NULL at the end
 * or for a last line without its newline. */
static char *next_line(char **p, char *end)
{
    char *s = *p;
    if (s >= end) return NULL;
    char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl) return NULL;
    *nl = '\0';
    *p = nl + 1;
    return s;
}

static bool parse_boot_file(char *text, size_t len, boot_file *f, char *why, size_t n)
{
    char *p = text, *end = text + len, *line;
    if (!(line = next_line(&p, end)) || strcmp(line, BOOT_MAGIC) != 0) {
        snprintf(why, n, "line 1 is not \"%s\"", BOOT_MAGIC);
        return false;
    }
    if (!(line = next_line(&p, end)) || strncmp(line, "token ", 6) != 0 ||
        !nccl_token_valid(line + 6)) {
        snprintf(why, n, "line 2 is not \"token <1 to %d printable characters>\"", NCCL_TOKEN_MAX);
        return false;
    }
    snprintf(f->token, sizeof f->token, "%s", line + 6);
    char *stop = NULL;
    if (!(line = next_line(&p, end)) || strncmp(line, "world_size ", 11) != 0 ||
        (errno = 0, f->world_size = strtol(line + 11, &stop, 10), errno) || stop == line + 11 ||
        *stop != '\0' || f->world_size < 1) {
        snprintf(why, n, "line 3 is not \"world_size <a positive integer>\"");
        return false;
    }
    f->failed[0] = '\0';
    if ((line = next_line(&p, end)) && strncmp(line, "failed ", 7) == 0 && p == end) {
        snprintf(f->failed, sizeof f->failed, "%s", line + 7);
        return true;
    }
    if (!line || strncmp(line, "id ", 3) != 0 || strlen(line + 3) != 2 * sizeof f->id.internal) {
        snprintf(why, n, "line 4 is not \"id <%zu hex digits>\" nor \"failed <message>\"",
                 2 * sizeof f->id.internal);
        return false;
    }
    for (size_t i = 0; i < sizeof f->id.internal; i++) {
        int hi = hex_digit(line[3 + 2 * i]), lo = hex_digit(line[3 + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(why, n, "line 4 has a character that is not a lowercase hex digit");
            return false;
        }
        f->id.internal[i] = (char)(hi << 4 | lo);
    }
    if (p != end) {
        snprintf(why, n, "it has more than 4 lines");
        return false;
    }
    return true;
}

/* 1: *f read; 0: no file yet; -1: error in err. */
static int read_boot_file(const nccl_boot *b, boot_file *f, tf_error *err)
{
    const char *path = b->opt->bootstrap_file;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: cannot read the bootstrap file %s: %s",
                     b->rank, path, strerror(errno));
        return -1;
    }
    char buf[BOOT_FILE_MAX + 1];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            tf_error_set(err, TF_ERR_RUNTIME,
                         "comm-nccl: rank %d: cannot read the bootstrap file %s at byte %zu: %s",
                         b->rank, path, len, strerror(e));
            return -1;
        }
        if (r == 0 || (len += (size_t)r) == sizeof buf) break;
    }
    close(fd);
    if (len > BOOT_FILE_MAX) {
        tf_error_set(err, TF_ERR_DATA,
                     "comm-nccl: rank %d: %s is not a comm-nccl bootstrap file (more than %d "
                     "bytes); comm.bootstrap_file must name a path only this job writes",
                     b->rank, path, BOOT_FILE_MAX);
        return -1;
    }
    char why[160];
    if (!parse_boot_file(buf, len, f, why, sizeof why)) {
        tf_error_set(err, TF_ERR_DATA,
                     "comm-nccl: rank %d: %s is not a comm-nccl bootstrap file: %s; "
                     "comm.bootstrap_file must name a path only this job writes",
                     b->rank, path, why);
        return -1;
    }
    return 1;
}

static tf_status file_exchange(nccl_boot *b, nccl_make_id_fn make_id, ncclUniqueId *id,
                               tf_error *err)
{
    const char *path = b->opt->bootstrap_file;
    if (b->rank == 0) {
        tf_status st = make_id(id, err);
        if (st) {
            tf_error_prefix(err, "comm-nccl: rank 0: ncclGetUniqueId");
            return st;
        }
        char hex[2 * sizeof id->internal + 1];
        hex_encode((const unsigned char *)id->internal, sizeof id->internal, hex);
        char text[BOOT_FILE_MAX];
        snprintf(text, sizeof text, BOOT_MAGIC "\ntoken %s\nworld_size %d\nid %s\n", b->token,
                 b->world_size, hex);
        if ((st = tf_file_write_text_atomic(path, text, err))) {
            tf_error_prefix(err, "comm-nccl: rank 0: bootstrap file");
            return st;
        }
        b->file_written = true;
        tf_log(TF_LOG_DEBUG, "comm-nccl: rank 0: wrote the ncclUniqueId to %s (token %s)", path,
               b->token);
        return TF_OK;
    }
    double t0 = nccl_now_s(), deadline = t0 + b->opt->bootstrap_timeout_s, pause = 0.01;
    char stale[NCCL_TOKEN_MAX + 1] = "";
    for (;;) {
        boot_file f;
        int got = read_boot_file(b, &f, err);
        if (got < 0) return err->code;
        if (got > 0 && strcmp(f.token, b->token) == 0) {
            if (f.failed[0])
                return tf_error_set(err, TF_ERR_RUNTIME,
                                    "comm-nccl: rank %d: init stopped: rank 0 failed: %s", b->rank,
                                    f.failed);
            if (f.world_size != b->world_size)
                return tf_error_set(err, TF_ERR_RUNTIME,
                                    "comm-nccl: rank %d: %s (token %s) was written for "
                                    "world_size %ld, but this rank runs with world_size %d",
                                    b->rank, path, b->token, f.world_size, b->world_size);
            *id = f.id;
            tf_log(TF_LOG_DEBUG,
                   "comm-nccl: rank %d: read the ncclUniqueId from %s (token %s) after %.2f s",
                   b->rank, path, b->token, nccl_now_s() - t0);
            return TF_OK;
        }
        if (got > 0 && strcmp(f.token, stale) != 0) {
            snprintf(stale, sizeof stale, "%s", f.token);
            tf_log(TF_LOG_DEBUG, "comm-nccl: rank %d: %s has token %s, not this run's %s: waiting",
                   b->rank, path, f.token, b->token);
        }
        if (nccl_now_s() > deadline) {
            if (got > 0)
                return tf_error_set(err, TF_ERR_RUNTIME,
                                    "comm-nccl: rank %d: timed out after %g s waiting for rank 0 "
                                    "to write %s with token %s (the file there has token %s: "
                                    "left by another run?)",
                                    b->rank, b->opt->bootstrap_timeout_s, path, b->token, f.token);
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "comm-nccl: rank %d: timed out after %g s waiting for rank 0 to "
                                "write %s with token %s (no such file)",
                                b->rank, b->opt->bootstrap_timeout_s, path, b->token);
        }
        /* from 10 ms up to 250 ms between looks: cheap for a shared filesystem */
        nccl_sleep_s(pause);
        if (pause < 0.25) pause *= 1.5;
    }
}

/* The token of this run when the config gives none: the batch system's job
 * id (with the step, so two srun steps of one allocation differ). */
static bool token_from_env(char *out, size_t n)
{
    const char *v, *extra;
    if ((v = getenv("SLURM_JOB_ID")) && *v) {
        extra = getenv("SLURM_STEP_ID");
        snprintf(out, n, "slurm-%s%s%s", v, extra && *extra ? "." : "", extra && *extra ? extra : "");
    } else if ((v = getenv("PBS_JOBID")) && *v) {
        snprintf(out, n, "pbs-%s", v);
    } else if ((v = getenv("LSB_JOBID")) && *v) {
        extra = getenv("LSB_JOBINDEX");
        snprintf(out, n, "lsf-%s%s%s", v, extra && *extra && strcmp(extra, "0") ? "." : "",
                 extra && *extra && strcmp(extra, "0") ? extra : "");
    } else if ((v = getenv("FLUX_JOB_ID")) && *v) {
        snprintf(out, n, "flux-%s", v);
    } else {
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------- */

tf_status nccl_boot_resolve(nccl_boot *b, const nccl_options *opt, int rank, int world_size,
                            void *shared, tf_error *err)
{
    memset(b, 0, sizeof *b);
    b->rank = rank;
    b->world_size = world_size;
    b->shared = shared;
    b->opt = opt;
    nccl_boot_kind k = opt->bootstrap;
    if (k == NCCL_BOOT_AUTO) {
        if (shared)
            k = NCCL_BOOT_LAUNCHER;
        else if (getenv("OMPI_COMM_WORLD_SIZE") && nccl_mpi_built())
            k = NCCL_BOOT_MPI;
        else if (opt->bootstrap_file)
            k = NCCL_BOOT_FILE;
        else
            return tf_error_set(err, TF_ERR_CONFIG,
                                "comm-nccl: rank %d: no way to reach the other ranks: not started "
                                "by tfcore's process launcher nor by Open MPI's mpirun%s, and "
                                "comm.bootstrap_file is not set (see comm-nccl's README.md)",
                                rank, nccl_mpi_built() ? "" : " (and built without MPI)");
    }
    if (k == NCCL_BOOT_LAUNCHER && !shared)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-nccl: rank %d: comm.bootstrap = \"launcher\" but this process "
                            "was not started by tfcore's process launcher (no shared region: "
                            "started by mpirun or srun?)",
                            rank);
    if (k == NCCL_BOOT_FILE) {
        if (opt->bootstrap_token)
            snprintf(b->token, sizeof b->token, "%s", opt->bootstrap_token);
        else if (!token_from_env(b->token, sizeof b->token))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "comm-nccl: rank %d: the file bootstrap needs a job token, the "
                                "same on every rank and new for every run: set "
                                "comm.bootstrap_token, or run under Slurm, PBS, LSF or Flux",
                                rank);
        if (!nccl_token_valid(b->token))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "comm-nccl: rank %d: the job token from the environment (%.40s...) "
                                "is not 1 to %d printable characters without spaces: set "
                                "comm.bootstrap_token",
                                rank, b->token, NCCL_TOKEN_MAX);
    }
    b->kind = k;
    return TF_OK;
}

tf_status nccl_boot_exchange(nccl_boot *b, nccl_make_id_fn make_id, ncclUniqueId *id,
                             tf_error *err)
{
    tf_status st = TF_OK;
    switch (b->kind) {
    case NCCL_BOOT_LAUNCHER: st = launcher_exchange(b, make_id, id, err); break;
    case NCCL_BOOT_FILE: st = file_exchange(b, make_id, id, err); break;
    case NCCL_BOOT_MPI: {
        if ((st = nccl_mpi_start(b->rank, b->world_size, &b->mpi_started, err))) break;
        /* A rank 0 that cannot make the id still takes part in MPI_Bcast (with
         * zeros) so that nobody waits there; the agreement after the device
         * setup then tells every rank that rank 0 failed. */
        tf_status made = TF_OK;
        if (b->rank == 0 && (made = make_id(id, err))) {
            tf_error_prefix(err, "comm-nccl: rank 0: ncclGetUniqueId");
            memset(id, 0, sizeof *id);
        }
        tf_error bcast_err;
        tf_status sent = nccl_mpi_bcast_id(id, made ? &bcast_err : err);
        st = made ? made : sent;
        break;
    }
    default:
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: bootstrap not resolved",
                            b->rank);
    }
    if (!st)
        tf_log(TF_LOG_DEBUG, "comm-nccl: rank %d: has the ncclUniqueId (bootstrap %s)", b->rank,
               nccl_boot_name(b->kind));
    return st;
}

tf_status nccl_boot_agree(nccl_boot *b, tf_status mine, const tf_error *mine_err, tf_error *err)
{
    if (b->kind == NCCL_BOOT_LAUNCHER) return launcher_agree(b, mine, mine_err, err);
    /* without a running MPI (libmpi missing, MPI_Init failed) there is no one
     * to agree with: this rank's own error stands, and mpirun stops the job */
    if (b->kind == NCCL_BOOT_MPI && b->world_size > 1 && nccl_mpi_running()) {
        int first = -1;
        char why[TF_ERROR_MSG_MAX] = "";
        tf_status st = nccl_mpi_agree(mine == TF_OK, mine ? mine_err->msg : "", &first, why,
                                      sizeof why, err);
        if (st) return st;
        if (first < 0) return TF_OK;
        if (mine) {
            if (err != mine_err) *err = *mine_err;
            return mine;
        }
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-nccl: rank %d: init stopped: rank %d failed: %s",
                            b->rank, first, why);
    }
    if (mine && err != mine_err) *err = *mine_err;
    return mine;
}

void nccl_boot_fail(nccl_boot *b, const char *why)
{
    if (b->kind == NCCL_BOOT_LAUNCHER) {
        nccl_shared_fail(b->shared, b->rank, why);
        return;
    }
    if (b->kind != NCCL_BOOT_FILE || b->rank != 0 || b->file_written) return;
    char text[BOOT_FILE_MAX];
    snprintf(text, sizeof text, BOOT_MAGIC "\ntoken %s\nworld_size %d\nfailed %.3000s\n", b->token,
             b->world_size, why && *why ? why : "(no reason given)");
    tf_error e;
    if (tf_file_write_text_atomic(b->opt->bootstrap_file, text, &e) != TF_OK)
        tf_log(TF_LOG_WARN, "comm-nccl: rank 0: cannot tell the other ranks that it failed: %s",
               e.msg);
}

void nccl_boot_done(nccl_boot *b)
{
    if (b->kind != NCCL_BOOT_FILE || !b->file_written) return;
    b->file_written = false;
    if (unlink(b->opt->bootstrap_file) != 0 && errno != ENOENT)
        tf_log(TF_LOG_WARN, "comm-nccl: rank 0: cannot remove the bootstrap file %s: %s",
               b->opt->bootstrap_file, strerror(errno));
}

void nccl_boot_end(nccl_boot *b, bool clean)
{
    nccl_boot_done(b);
    if (b->kind == NCCL_BOOT_MPI) nccl_mpi_end(b->mpi_started, clean);
    b->mpi_started = false;
}
