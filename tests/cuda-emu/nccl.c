/* nccl.c — the NCCL stand-in of the test-only CUDA emulation (see nccl.h and
 * tests/cuda-emu/README.md, "NCCL stand-in").
 *
 * Rendezvous. ncclGetUniqueId names a POSIX shared-memory segment; the first
 * rank of ncclCommInitRank creates it, the others open it, every rank marks
 * its slot (pid) and waits until all nranks joined; the last to join
 * unlinks the name (the mappings stay), so nothing is left in /dev/shm.
 *
 * Collectives. ncclAllReduce/Broadcast/Reduce/ReduceScatter/AllGather check their arguments on the
 * caller's thread and enqueue a task on the stream (emu_enqueue): it runs on
 * the stream's host thread in stream order. A task is a sequence of
 * barriers over the ranks (each rank counts its barriers in its slot's
 * `phase`; barrier k is passed when every rank's phase is >= k):
 *   1. publish (kind, count, type, op, root) and the collective's sequence
 *      number; after the barrier every rank compares every rank's record, so
 *      a mismatch is ncclInvalidUsage on every rank at once, never a hang;
 *   2. per chunk of at most CHUNK_BYTES: copy the input into the rank's
 *      staging area, barrier, compute the output from the staging areas of
 *      all ranks in rank order (so every rank computes the same bits, and
 *      16-bit types are summed in f32 and rounded to nearest even once),
 *      barrier (nobody overwrites a staging area still being read).
 *   ReduceScatter runs step 2 once per block owner o (a reduce of block o
 *   to rank o); AllGather stages each chunk of the own input and copies
 *   every rank's into its block of the output.
 * The n-th collective of each rank meets the n-th of the others.
 *
 * Failures. While a task waits it watches for its own communicator's abort,
 * a peer's ncclCommAbort (the segment's abort record), a peer process that
 * died (/proc/PID/stat gone or a zombie) or left (ncclCommDestroy) without
 * reaching the barrier, and a no-progress limit
 * (TFCORE_EMU_NCCL_TIMEOUT_S, default 300). It then records the
 * communicator's asynchronous error (ncclRemoteError, ncclSystemError) with
 * a one-line ncclGetLastError text, and ends: unlike a real NCCL kernel,
 * which spins until ncclCommAbort, the stream goes on (the output is left
 * unspecified, as after an abort). Later collectives of a communicator in
 * error do nothing. A peer's abort or death is also reported by
 * ncclCommGetAsyncError when no collective is pending. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"
#include "nccl.h"

#define ID_MAGIC "tfcore-emu-nccl"
#define SEG_MAGIC 0x4c43434e554d4554ull /* "TEMUNCCL" */
#define MAX_RANKS 64
#define CHUNK_BYTES ((size_t)1 << 20)
#define MSG_MAX 512

/* --- the shared segment ------------------------------------------------------ */

enum slot_state { SLOT_EMPTY = 0, SLOT_JOINED = 1, SLOT_LEFT = 2, SLOT_ABORTED = 3 };

typedef struct coll_desc {
    uint64_t seq; /* 1-based number of the collective on this communicator */
    int32_t kind, type, op, root;
    uint64_t count;
} coll_desc;

typedef struct rank_slot {
    _Atomic int32_t state;
    int32_t pid;
    _Atomic uint64_t phase; /* barriers this rank has reached */
    coll_desc desc;         /* its current collective (written before its first barrier) */
    char pad[64];
} rank_slot;

typedef struct segment {
    uint64_t magic;
    int32_t nranks;
    _Atomic int32_t ready;  /* the creator initialised the header */
    _Atomic int32_t joined; /* ranks that marked their slot */
    _Atomic int32_t abort_rank; /* -1, or the first rank that called ncclCommAbort */
    rank_slot slots[];      /* [nranks], then nranks staging areas of CHUNK_BYTES */
} segment;

/* Point-to-point: one channel per ordered pair of ranks (src -> dst), a
 * byte stream through a ring of RING_BYTES; each message is a header, then
 * its bytes. Only src writes `written`, only dst writes `consumed`. */
#define RING_BYTES ((size_t)1 << 18)
typedef struct pair_chan {
    _Atomic uint64_t written;  /* bytes src put into the ring so far */
    _Atomic uint64_t consumed; /* bytes dst took out so far */
    _Atomic int32_t broken;    /* dst found a message that does not match its receive */
    char why[MSG_MAX];         /* dst's line about it */
    char pad[64];
} pair_chan;

typedef struct msg_header {
    uint64_t magic;
    uint64_t seq;   /* 1-based number of the message from src to dst */
    uint64_t count;
    int32_t type;
    int32_t unused;
} msg_header;
#define MSG_MAGIC 0x3250504e554d4554ull /* "TEMUNPP2" */

static size_t segment_head(int nranks)
{
    size_t head = sizeof(segment) + (size_t)nranks * sizeof(rank_slot);
    return (head + 4095) & ~(size_t)4095;
}

static size_t pairs_bytes(int nranks)
{
    size_t b = (size_t)nranks * (size_t)nranks * sizeof(pair_chan);
    return (b + 4095) & ~(size_t)4095;
}

static size_t segment_bytes(int nranks)
{
    return segment_head(nranks) + (size_t)nranks * CHUNK_BYTES + pairs_bytes(nranks) +
           (size_t)nranks * (size_t)nranks * RING_BYTES;
}

static pair_chan *pair_of(segment *s, int src, int dst)
{
    pair_chan *p = (pair_chan *)((unsigned char *)s + segment_head(s->nranks) + (size_t)s->nranks * CHUNK_BYTES);
    return p + (size_t)src * (size_t)s->nranks + (size_t)dst;
}

static unsigned char *ring_of(segment *s, int src, int dst)
{
    unsigned char *r = (unsigned char *)s + segment_head(s->nranks) + (size_t)s->nranks * CHUNK_BYTES +
                       pairs_bytes(s->nranks);
    return r + ((size_t)src * (size_t)s->nranks + (size_t)dst) * RING_BYTES;
}

static unsigned char *staging(segment *s, int rank)
{
    size_t head = sizeof(segment) + (size_t)s->nranks * sizeof(rank_slot);
    head = (head + 4095) & ~(size_t)4095;
    return (unsigned char *)s + head + (size_t)rank * CHUNK_BYTES;
}

/* --- the communicator (process-local) ---------------------------------------- */

struct ncclComm {
    int rank, nranks, device;
    segment *seg;
    size_t seg_len;
    _Atomic int refs;          /* the user's handle + every queued task */
    _Atomic int pending;       /* queued tasks not yet ended */
    _Atomic bool aborted;      /* ncclCommAbort on this rank */
    _Atomic bool left;         /* ncclCommDestroy/Abort called: the handle is dead */
    _Atomic int async_err;     /* ncclResult_t, sticky */
    uint64_t sent[MAX_RANKS];  /* messages sent to each rank (exec_lock) */
    uint64_t recvd[MAX_RANKS]; /* messages received from each rank (exec_lock) */
    pthread_mutex_t msg_lock;
    char last[MSG_MAX];        /* this communicator's first error */
    pthread_mutex_t exec_lock; /* one collective of this communicator at a time */
    uint64_t seq;              /* collectives run (exec_lock) */
    uint64_t phase;            /* barriers reached (exec_lock) */
    double timeout_s;          /* no-progress limit of a barrier */
};

static pthread_mutex_t g_last_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_last[MSG_MAX];

static void set_last(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_last(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_last_lock);
    vsnprintf(g_last, sizeof g_last, fmt, ap);
    pthread_mutex_unlock(&g_last_lock);
    va_end(ap);
}

/* The communicator's asynchronous error: the first one stays. */
static void comm_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void comm_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int expect = ncclSuccess;
    pthread_mutex_lock(&c->msg_lock);
    if (atomic_compare_exchange_strong(&c->async_err, &expect, (int)r))
        snprintf(c->last, sizeof c->last, "%s", msg);
    pthread_mutex_unlock(&c->msg_lock);
    set_last("%s", msg);
}

static void comm_unref(ncclComm_t c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    munmap(c->seg, c->seg_len);
    pthread_mutex_destroy(&c->msg_lock);
    pthread_mutex_destroy(&c->exec_lock);
    free(c);
}

/* --- time, limits and liveness -------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    double d = strtod(v, &end);
    return (end && *end == '\0' && d > 0) ? d : dflt;
}

/* Polling with a growing pause: yields first, then sleeps up to 1 ms. */
typedef struct backoff {
    unsigned n;
    long ns;
} backoff;

static void backoff_pause(backoff *b)
{
    if (b->n++ < 64) {
        sched_yield();
        return;
    }
    struct timespec t = {0, b->ns};
    nanosleep(&t, NULL);
    if (b->ns < 1000000) b->ns = b->ns ? b->ns * 2 : 20000;
}

/* False when the process is gone or a zombie (killed, not yet reaped). */
static bool pid_alive(int pid)
{
    if (pid == getpid()) return true;
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return errno != ENOENT;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* A peer's failure that ends this communicator: returns the error code and
 * fills why, or ncclSuccess. `need` limits it to peers not yet at phase
 * `need` (0: any peer). */
static ncclResult_t peer_failure(ncclComm_t c, uint64_t need, bool check_pids, char *why, size_t n)
{
    segment *s = c->seg;
    int ar = atomic_load(&s->abort_rank);
    bool remote_abort = ar >= 0 && ar != c->rank;
    /* a peer's death first: an abort is often another rank's answer to it */
    for (int r = 0; r < c->nranks && (check_pids || remote_abort); r++) {
        rank_slot *sl = &s->slots[r];
        /* the state again after the pid: a rank that aborted or left and then
         * exited did not die */
        if (r != c->rank && atomic_load(&sl->state) == SLOT_JOINED && !pid_alive(sl->pid) &&
            atomic_load(&sl->state) == SLOT_JOINED) {
            snprintf(why, n, "rank %d (pid %d) died", r, (int)sl->pid);
            return ncclRemoteError;
        }
    }
    if (remote_abort) {
        snprintf(why, n, "rank %d aborted the communicator (ncclCommAbort)", ar);
        return ncclRemoteError;
    }
    for (int r = 0; r < c->nranks && need; r++) {
        rank_slot *sl = &s->slots[r];
        if (r != c->rank && atomic_load(&sl->phase) < need && atomic_load(&sl->state) == SLOT_LEFT) {
            snprintf(why, n, "rank %d destroyed the communicator before joining collective #%llu",
                     r, (unsigned long long)c->seq);
            return ncclRemoteError;
        }
    }
    return ncclSuccess;
}

/* --- ids and init ---------------------------------------------------------- */

typedef struct id_layout {
    char magic[16];
    char name[96]; /* the shared-memory name, "/tfcore-emu-nccl-..." */
} id_layout;
_Static_assert(sizeof(id_layout) <= NCCL_UNIQUE_ID_BYTES, "the id holds the segment's name");

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) {
        set_last("ncclGetVersion: version is NULL");
        return ncclInvalidArgument;
    }
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) {
        set_last("ncclGetUniqueId: uniqueId is NULL");
        return ncclInvalidArgument;
    }
    static _Atomic unsigned counter;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    id_layout l;
    memset(&l, 0, sizeof l);
    memcpy(l.magic, ID_MAGIC, sizeof ID_MAGIC);
    snprintf(l.name, sizeof l.name, "/tfcore-emu-nccl-%d-%u-%llx", (int)getpid(),
             atomic_fetch_add(&counter, 1) + 1u,
             (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &l, sizeof l);
    return ncclSuccess;
}

/* Create or open the id's segment and map it; *created when this rank made it. */
static ncclResult_t open_segment(const char *name, int nranks, int rank, double deadline,
                                 segment **out, size_t *len)
{
    size_t want = segment_bytes(nranks);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    bool created = fd >= 0;
    if (created) {
        if (ftruncate(fd, (off_t)want) != 0) {
            set_last("ncclCommInitRank: rank %d: ftruncate of %s to %zu bytes: %s", rank, name,
                     want, strerror(errno));
            close(fd);
            shm_unlink(name);
            return ncclSystemError;
        }
    } else if (errno == EEXIST) {
        fd = shm_open(name, O_RDWR, 0600);
    }
    if (fd < 0) {
        set_last("ncclCommInitRank: rank %d: shm_open %s: %s", rank, name, strerror(errno));
        return ncclSystemError;
    }
    /* an opener may come before the creator's ftruncate */
    struct stat st;
    backoff b = {0, 0};
    while (fstat(fd, &st) == 0 && st.st_size == 0 && now_s() < deadline) backoff_pause(&b);
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(segment)) {
        set_last("ncclCommInitRank: rank %d: the segment %s was never sized by its creator", rank,
                 name);
        close(fd);
        return ncclSystemError;
    }
    segment *s = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED) {
        set_last("ncclCommInitRank: rank %d: mmap of %s: %s", rank, name, strerror(errno));
        return ncclSystemError;
    }
    if (created) {
        s->magic = SEG_MAGIC;
        s->nranks = nranks;
        atomic_store(&s->joined, 0);
        atomic_store(&s->abort_rank, -1);
        atomic_store(&s->ready, 1);
    } else {
        b = (backoff){0, 0};
        while (!atomic_load(&s->ready) && now_s() < deadline) backoff_pause(&b);
        if (!atomic_load(&s->ready) || s->magic != SEG_MAGIC) {
            set_last("ncclCommInitRank: rank %d: the segment %s is not an initialised communicator",
                     rank, name);
            munmap(s, (size_t)st.st_size);
            return ncclSystemError;
        }
        if (s->nranks != nranks || (size_t)st.st_size != want) {
            set_last("ncclCommInitRank: rank %d passed nranks %d, but the communicator was made "
                     "with nranks %d",
                     rank, nranks, s->nranks);
            munmap(s, (size_t)st.st_size);
            return ncclInvalidUsage;
        }
    }
    *out = s;
    *len = (size_t)st.st_size;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    if (!comm) {
        set_last("ncclCommInitRank: comm is NULL");
        return ncclInvalidArgument;
    }
    *comm = NULL;
    if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        set_last("ncclCommInitRank: rank %d of nranks %d is invalid (the stand-in has at most %d "
                 "ranks)",
                 rank, nranks, MAX_RANKS);
        return ncclInvalidArgument;
    }
    id_layout l;
    memcpy(&l, commId.internal, sizeof l);
    if (memcmp(l.magic, ID_MAGIC, sizeof ID_MAGIC) != 0 || l.name[0] != '/' ||
        !memchr(l.name, '\0', sizeof l.name)) {
        set_last("ncclCommInitRank: rank %d: the ncclUniqueId was not made by ncclGetUniqueId", rank);
        return ncclInvalidArgument;
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        set_last("ncclCommInitRank: rank %d: cudaGetDevice failed", rank);
        return ncclUnhandledCudaError;
    }
    double limit = env_seconds("TFCORE_EMU_NCCL_INIT_TIMEOUT_S", 120);
    double deadline = now_s() + limit;
    segment *s = NULL;
    size_t len = 0;
    ncclResult_t r = open_segment(l.name, nranks, rank, deadline, &s, &len);
    if (r != ncclSuccess) return r;

    rank_slot *me = &s->slots[rank];
    int expect = SLOT_EMPTY;
    me->pid = (int32_t)getpid();
    if (!atomic_compare_exchange_strong(&me->state, &expect, SLOT_JOINED)) {
        set_last("ncclCommInitRank: rank %d joined the communicator twice", rank);
        munmap(s, len);
        return ncclInvalidUsage;
    }
    int joined = atomic_fetch_add(&s->joined, 1) + 1;
    if (joined == nranks) shm_unlink(l.name); /* every rank has it mapped */
    backoff b = {0, 0};
    double next_pid_check = 0;
    while (atomic_load(&s->joined) < nranks) {
        double t = now_s();
        if (t > deadline) {
            set_last("ncclCommInitRank: rank %d: only %d of %d ranks joined in %g s "
                     "(TFCORE_EMU_NCCL_INIT_TIMEOUT_S)",
                     rank, (int)atomic_load(&s->joined), nranks, limit);
            r = ncclSystemError;
        }
        if (r == ncclSuccess && t > next_pid_check) {
            next_pid_check = t + 0.1;
            for (int q = 0; q < nranks; q++)
                if (atomic_load(&s->slots[q].state) == SLOT_JOINED && !pid_alive(s->slots[q].pid)) {
                    set_last("ncclCommInitRank: rank %d: rank %d (pid %d) died during init", rank,
                             q, (int)s->slots[q].pid);
                    r = ncclSystemError;
                }
            int ar = atomic_load(&s->abort_rank);
            if (ar >= 0) {
                set_last("ncclCommInitRank: rank %d: rank %d aborted during init", rank, ar);
                r = ncclRemoteError;
            }
        }
        if (r != ncclSuccess) {
            atomic_store(&me->state, SLOT_ABORTED);
            atomic_store(&s->abort_rank, rank);
            shm_unlink(l.name);
            munmap(s, len);
            return r;
        }
        backoff_pause(&b);
    }
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) {
        atomic_store(&me->state, SLOT_ABORTED);
        munmap(s, len);
        set_last("ncclCommInitRank: rank %d: out of memory", rank);
        return ncclSystemError;
    }
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    c->seg = s;
    c->seg_len = len;
    c->timeout_s = env_seconds("TFCORE_EMU_NCCL_TIMEOUT_S", 300);
    atomic_init(&c->refs, 1);
    atomic_init(&c->pending, 0);
    atomic_init(&c->aborted, false);
    atomic_init(&c->left, false);
    atomic_init(&c->async_err, ncclSuccess);
    pthread_mutex_init(&c->msg_lock, NULL);
    pthread_mutex_init(&c->exec_lock, NULL);
    *comm = c;
    return ncclSuccess;
}

/* --- management ---------------------------------------------------------------- */

static ncclResult_t check_comm(ncclComm_t c, const char *call)
{
    if (!c) {
        set_last("%s: comm is NULL", call);
        return ncclInvalidArgument;
    }
    if (atomic_load(&c->left)) {
        set_last("%s: the communicator was destroyed or aborted", call);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async)
{
    ncclResult_t r = check_comm(c, "ncclCommGetAsyncError");
    if (r != ncclSuccess) return r;
    if (!async) {
        set_last("ncclCommGetAsyncError: asyncError is NULL");
        return ncclInvalidArgument;
    }
    if (atomic_load(&c->async_err) == ncclSuccess) {
        char why[MSG_MAX];
        ncclResult_t f = peer_failure(c, 0, true, why, sizeof why);
        if (f != ncclSuccess) comm_fail(c, f, "rank %d: %s", c->rank, why);
    }
    *async = (ncclResult_t)atomic_load(&c->async_err);
    return ncclSuccess;
}

/* Until every task queued on this communicator has ended (they end on their
 * own when a peer fails, so this is bounded by the no-progress limit). */
static void wait_pending(ncclComm_t c)
{
    backoff b = {0, 0};
    while (atomic_load(&c->pending) > 0) backoff_pause(&b);
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    ncclResult_t r = check_comm(c, "ncclCommFinalize");
    if (r != ncclSuccess) return r;
    wait_pending(c);
    return (ncclResult_t)atomic_load(&c->async_err);
}

/* The handle ends: the slot says why, the last reference frees it. */
static void comm_leave(ncclComm_t c, int state)
{
    atomic_store(&c->left, true);
    atomic_store(&c->seg->slots[c->rank].state, state);
    comm_unref(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    ncclResult_t r = check_comm(c, "ncclCommDestroy");
    if (r != ncclSuccess) return r;
    wait_pending(c);
    comm_leave(c, SLOT_LEFT);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c) return ncclSuccess; /* as NCCL: aborting NULL is a no-op */
    if (atomic_load(&c->left)) {
        set_last("ncclCommAbort: the communicator was destroyed or aborted");
        return ncclInvalidUsage;
    }
    /* queued and running tasks see it and end; they hold their own reference */
    atomic_store(&c->aborted, true);
    int expect = -1;
    atomic_compare_exchange_strong(&c->seg->abort_rank, &expect, c->rank);
    comm_leave(c, SLOT_ABORTED);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *count)
{
    ncclResult_t r = check_comm(c, "ncclCommCount");
    if (r == ncclSuccess && !count) r = ncclInvalidArgument;
    if (r == ncclSuccess) *count = c->nranks;
    return r;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *device)
{
    ncclResult_t r = check_comm(c, "ncclCommCuDevice");
    if (r == ncclSuccess && !device) r = ncclInvalidArgument;
    if (r == ncclSuccess) *device = c->device;
    return r;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank)
{
    ncclResult_t r = check_comm(c, "ncclCommUserRank");
    if (r == ncclSuccess && !rank) r = ncclInvalidArgument;
    if (r == ncclSuccess) *rank = c->rank;
    return r;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

/* NCCL documents comm as unused here; the stand-in prefers comm's own first
 * error, so that one rank's threads of several communicators do not mix. */
const char *ncclGetLastError(ncclComm_t c)
{
    static _Thread_local char copy[MSG_MAX];
    if (c && !atomic_load(&c->left)) {
        pthread_mutex_lock(&c->msg_lock);
        bool has = c->last[0] != '\0';
        if (has) snprintf(copy, sizeof copy, "%s", c->last);
        pthread_mutex_unlock(&c->msg_lock);
        if (has) return copy;
    }
    pthread_mutex_lock(&g_last_lock);
    snprintf(copy, sizeof copy, "%s", g_last);
    pthread_mutex_unlock(&g_last_lock);
    return copy;
}

/* --- element types ------------------------------------------------------------ */

static size_t type_size(int t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static const char *type_name(int t)
{
    static const char *const names[] = {"int8", "uint8", "int32", "uint32", "int64",
                                        "uint64", "float16", "float32", "float64", "bfloat16"};
    return t >= 0 && t < ncclNumTypes ? names[t] : "(invalid type)";
}

static const char *op_name(int op)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
    return op >= 0 && op < ncclNumOps ? names[op] : "(invalid op)";
}

enum coll_kind { K_ALLREDUCE = 1, K_BROADCAST = 2, K_REDUCE = 3, K_REDUCE_SCATTER = 4, K_ALL_GATHER = 5 };

static const char *kind_name(int k)
{
    switch (k) {
    case K_ALLREDUCE: return "ncclAllReduce";
    case K_BROADCAST: return "ncclBroadcast";
    case K_REDUCE: return "ncclReduce";
    case K_REDUCE_SCATTER: return "ncclReduceScatter";
    case K_ALL_GATHER: return "ncclAllGather";
    }
    return "(collective)";
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        float f = ldexpf((float)man, -24); /* subnormal (or zero) */
        return sign ? -f : f;
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest even, overflow to inf, subnormals kept, NaN stays NaN. */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00 : 0x7c00);
    if (ax >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half */
        float a;
        memcpy(&a, &ax, sizeof a);
        float scaled = a * 16777216.0f; /* units of 2^-24, exact */
        return sign | (uint16_t)nearbyintf(scaled); /* default rounding: to nearest even */
    }
    uint32_t mant = ax + 0xfffu + ((ax >> 13) & 1u); /* RNE on the 13 dropped bits */
    return sign | (uint16_t)((mant >> 13) - (112u << 10));
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* out[i] = op over ranks r = 0..n-1 of in[r][i], in rank order; floating
 * types accumulate in ACC (f32 for the 16-bit ones, rounded once at the end). */
#define REDUCE_FLOAT(T, ACC, LOAD, STORE)                                                      \
    do {                                                                                       \
        for (size_t i = 0; i < count; i++) {                                                   \
            ACC a = LOAD(((const T *)in[0])[i]);                                               \
            for (int r = 1; r < n; r++) {                                                      \
                ACC v = LOAD(((const T *)in[r])[i]);                                           \
                switch (op) {                                                                  \
                case ncclSum: case ncclAvg: a = a + v; break;                                  \
                case ncclProd: a = a * v; break;                                               \
                case ncclMax: a = v > a ? v : a; break;                                        \
                case ncclMin: a = v < a ? v : a; break;                                        \
                }                                                                              \
            }                                                                                  \
            if (op == ncclAvg) a = a / (ACC)n;                                                 \
            ((T *)out)[i] = STORE(a);                                                          \
        }                                                                                      \
    } while (0)
/* Integers: sum and product wrap (computed unsigned), max/min compare with
 * the type's sign, avg is the wrapped sum divided by nranks, truncated. */
#define REDUCE_INT(T, WIDE)                                                                  \
    do {                                                                                       \
        for (size_t i = 0; i < count; i++) {                                                   \
            T a = ((const T *)in[0])[i];                                                       \
            uint64_t u = (uint64_t)a;                                                          \
            for (int r = 1; r < n; r++) {                                                      \
                T v = ((const T *)in[r])[i];                                                   \
                switch (op) {                                                                  \
                case ncclSum: case ncclAvg: u += (uint64_t)v; break;                           \
                case ncclProd: u *= (uint64_t)v; break;                                        \
                case ncclMax: a = v > a ? v : a; break;                                        \
                case ncclMin: a = v < a ? v : a; break;                                        \
                }                                                                              \
            }                                                                                  \
            if (op == ncclSum || op == ncclProd) a = (T)u;                                     \
            if (op == ncclAvg) a = (T)((WIDE)(T)u / (WIDE)n);                                  \
            ((T *)out)[i] = a;                                                                 \
        }                                                                                      \
    } while (0)
#define ID(x) (x)

static void reduce_elems(void *out, const void *const *in, int n, size_t count, int type, int op)
{
    switch (type) {
    case ncclInt8: REDUCE_INT(int8_t, int64_t); break;
    case ncclUint8: REDUCE_INT(uint8_t, uint64_t); break;
    case ncclInt32: REDUCE_INT(int32_t, int64_t); break;
    case ncclUint32: REDUCE_INT(uint32_t, uint64_t); break;
    case ncclInt64: REDUCE_INT(int64_t, int64_t); break;
    case ncclUint64: REDUCE_INT(uint64_t, uint64_t); break;
    case ncclFloat16: REDUCE_FLOAT(uint16_t, float, half_to_float, float_to_half); break;
    case ncclBfloat16: REDUCE_FLOAT(uint16_t, float, bf16_to_float, float_to_bf16); break;
    case ncclFloat32: REDUCE_FLOAT(float, float, ID, ID); break;
    case ncclFloat64: REDUCE_FLOAT(double, double, ID, ID); break;
    }
}

/* --- the collective task -------------------------------------------------- */

typedef struct task {
    ncclComm_t comm;
    coll_desc d; /* seq filled on the stream's thread */
    const void *send;
    void *recv;
} task;

/* Reach the next barrier and wait for every peer there. False (and the
 * communicator's async error set) when that cannot happen. */
static bool barrier(ncclComm_t c)
{
    segment *s = c->seg;
    uint64_t k = ++c->phase;
    atomic_store(&s->slots[c->rank].phase, k);
    double limit = c->timeout_s;
    double start = now_s(), next_pid_check = start + 0.05;
    backoff b = {0, 0};
    for (;;) {
        int r = 0;
        while (r < c->nranks && atomic_load(&s->slots[r].phase) >= k) r++;
        if (r == c->nranks) return true;
        if (atomic_load(&c->aborted)) return false; /* this rank's own abort: no error to add */
        double t = now_s();
        bool pids = t > next_pid_check;
        if (pids) next_pid_check = t + 0.05;
        char why[MSG_MAX];
        ncclResult_t f = peer_failure(c, k, pids, why, sizeof why);
        if (f != ncclSuccess) {
            /* a peer that reached the barrier and then left is no failure */
            for (r = 0; r < c->nranks && atomic_load(&s->slots[r].phase) >= k; r++) {}
            if (r == c->nranks) return true;
            comm_fail(c, f, "rank %d: %s of %llu %s (collective #%llu): %s", c->rank,
                      kind_name(c->seg->slots[c->rank].desc.kind),
                      (unsigned long long)c->seg->slots[c->rank].desc.count,
                      type_name(c->seg->slots[c->rank].desc.type), (unsigned long long)c->seq, why);
            return false;
        }
        if (t - start > limit) {
            comm_fail(c, ncclSystemError,
                      "rank %d: collective #%llu: rank %d made no progress in %g s "
                      "(TFCORE_EMU_NCCL_TIMEOUT_S)",
                      c->rank, (unsigned long long)c->seq, r, limit);
            return false;
        }
        backoff_pause(&b);
    }
}

static void describe(char *buf, size_t n, const coll_desc *d)
{
    if (d->kind == K_BROADCAST)
        snprintf(buf, n, "%s of %llu %s from root %d", kind_name(d->kind),
                 (unsigned long long)d->count, type_name(d->type), d->root);
    else if (d->kind == K_REDUCE)
        snprintf(buf, n, "%s(%s) of %llu %s to root %d", kind_name(d->kind), op_name(d->op),
                 (unsigned long long)d->count, type_name(d->type), d->root);
    else if (d->kind == K_ALL_GATHER)
        snprintf(buf, n, "%s of %llu %s a rank", kind_name(d->kind), (unsigned long long)d->count,
                 type_name(d->type));
    else
        snprintf(buf, n, "%s(%s) of %llu %s%s", kind_name(d->kind), op_name(d->op),
                 (unsigned long long)d->count, type_name(d->type), d->kind == K_REDUCE_SCATTER ? " a rank" : "");
}

static void run_collective(ncclComm_t c, task *t)
{
    segment *s = c->seg;
    const coll_desc *d = &t->d;
    rank_slot *me = &s->slots[c->rank];
    me->desc = *d;
    me->desc.seq = c->seq;
    if (!barrier(c)) return;
    for (int r = 0; r < c->nranks; r++) {
        const coll_desc *o = &s->slots[r].desc;
        bool same = o->seq == c->seq && o->kind == d->kind && o->count == d->count &&
                    o->type == d->type && (d->kind == K_BROADCAST || d->kind == K_ALL_GATHER || o->op == d->op) &&
                    (d->kind == K_ALLREDUCE || o->root == d->root);
        if (!same) {
            char mine[160], theirs[160];
            describe(mine, sizeof mine, &me->desc);
            describe(theirs, sizeof theirs, o);
            comm_fail(c, ncclInvalidUsage,
                      "rank %d: collective #%llu does not match between ranks: rank %d called %s, "
                      "rank %d called %s",
                      c->rank, (unsigned long long)c->seq, c->rank, mine, r, theirs);
            return;
        }
    }
    size_t es = type_size(d->type), per = CHUNK_BYTES / es;
    const void *in[MAX_RANKS];
    if (d->kind == K_REDUCE_SCATTER) { /* a reduce of block o to rank o, for every o */
        for (int o = 0; o < c->nranks; o++)
            for (size_t done = 0; done < d->count; done += per) {
                size_t n = d->count - done < per ? d->count - done : per;
                memcpy(staging(s, c->rank), (const unsigned char *)t->send + ((size_t)o * d->count + done) * es, n * es);
                if (!barrier(c)) return;
                if (c->rank == o) {
                    for (int r = 0; r < c->nranks; r++) in[r] = staging(s, r);
                    reduce_elems((unsigned char *)t->recv + done * es, in, c->nranks, n, d->type, d->op);
                }
                if (!barrier(c)) return;
            }
        return;
    }
    if (d->kind == K_ALL_GATHER) {
        for (size_t done = 0; done < d->count; done += per) {
            size_t n = d->count - done < per ? d->count - done : per;
            memcpy(staging(s, c->rank), (const unsigned char *)t->send + done * es, n * es);
            if (!barrier(c)) return;
            for (int r = 0; r < c->nranks; r++)
                memcpy((unsigned char *)t->recv + ((size_t)r * d->count + done) * es, staging(s, r), n * es);
            if (!barrier(c)) return;
        }
        return;
    }
    for (size_t done = 0; done < d->count; done += per) {
        size_t n = d->count - done < per ? d->count - done : per;
        const unsigned char *src = (const unsigned char *)t->send + done * es;
        unsigned char *dst = (unsigned char *)t->recv + done * es;
        if (d->kind != K_BROADCAST || c->rank == d->root) memcpy(staging(s, c->rank), src, n * es);
        if (!barrier(c)) return;
        if (d->kind == K_BROADCAST) {
            memcpy(dst, staging(s, d->root), n * es);
        } else if (d->kind == K_ALLREDUCE || c->rank == d->root) {
            for (int r = 0; r < c->nranks; r++) in[r] = staging(s, r);
            reduce_elems(dst, in, c->nranks, n, d->type, d->op);
        }
        if (!barrier(c)) return;
    }
}

static cudaError_t task_run(void *arg)
{
    task *t = arg;
    ncclComm_t c = t->comm;
    pthread_mutex_lock(&c->exec_lock);
    c->seq++;
    if (!atomic_load(&c->aborted) && atomic_load(&c->async_err) == ncclSuccess)
        run_collective(c, t);
    pthread_mutex_unlock(&c->exec_lock);
    /* NCCL's failures are the communicator's asynchronous error, not CUDA's */
    return cudaSuccess;
}

static void task_free(void *arg)
{
    task *t = arg;
    ncclComm_t c = t->comm;
    free(t);
    atomic_fetch_sub(&c->pending, 1);
    comm_unref(c);
}

/* The calling thread's open group (ncclGroupStart .. ncclGroupEnd): depth,
 * and the point-to-point calls it holds. */
typedef struct p2p_op {
    bool is_send;
    int peer;
    void *buf;
    size_t count, bytes;
    int type;
    /* progress, on the stream's thread */
    int state;       /* 0: header, 1: payload, 2: (send) waiting until the peer took it all, 3: done */
    size_t pos;      /* payload bytes moved */
    uint64_t end;    /* (send) the stream position after the message */
    uint64_t seq;
} p2p_op;

static _Thread_local struct group_state {
    int depth;
    ncclResult_t err;  /* the first failed call in the group */
    ncclComm_t comm;
    cudaStream_t stream;
    p2p_op *ops;
    size_t n, cap;
} g_group;

/* Argument checks on the caller's thread (ncclInvalidArgument, as NCCL), then
 * the task on the stream. */
static ncclResult_t enqueue(int kind, const void *send, void *recv, size_t count, ncclDataType_t type,
                            ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t stream)
{
    const char *call = kind_name(kind);
    ncclResult_t r = check_comm(c, call);
    if (r != ncclSuccess) return r;
    if (g_group.depth > 0) {
        set_last("%s: inside ncclGroupStart/ncclGroupEnd: the stand-in groups point-to-point calls only", call);
        return ncclInvalidUsage;
    }
    size_t es = type_size(type);
    if (es == 0) {
        set_last("%s: invalid data type %d", call, (int)type);
        return ncclInvalidArgument;
    }
    if (kind != K_BROADCAST && kind != K_ALL_GATHER && ((int)op < 0 || (int)op >= ncclNumOps)) {
        set_last("%s: invalid reduction operation %d", call, (int)op);
        return ncclInvalidArgument;
    }
    bool rooted = kind == K_BROADCAST || kind == K_REDUCE;
    if (rooted && (root < 0 || root >= c->nranks)) {
        set_last("%s: root %d is not in [0, %d)", call, root, c->nranks);
        return ncclInvalidArgument;
    }
    if (count > SIZE_MAX / es / (size_t)c->nranks) {
        set_last("%s: count %zu overflows", call, count);
        return ncclInvalidArgument;
    }
    int sdev = emu_stream_device(stream);
    if (sdev != c->device) {
        set_last("%s: rank %d: the stream belongs to device %d, the communicator to device %d",
                 call, c->rank, sdev, c->device);
        return ncclInvalidArgument;
    }
    size_t bytes = count * es, send_bytes = bytes, recv_bytes = bytes;
    if (kind == K_REDUCE_SCATTER) send_bytes *= (size_t)c->nranks; /* count: per rank */
    if (kind == K_ALL_GATHER) recv_bytes *= (size_t)c->nranks;
    /* what this rank reads and writes must be memory of the communicator's device */
    bool reads = kind != K_BROADCAST || c->rank == root;
    bool writes = kind != K_REDUCE || c->rank == root;
    if (count > 0 && reads && !emu_is_device_span(send, send_bytes, c->device)) {
        set_last("%s: rank %d: sendbuff %p (%zu bytes) is not memory of CUDA device %d", call,
                 c->rank, send, send_bytes, c->device);
        return ncclInvalidArgument;
    }
    if (count > 0 && writes && !emu_is_device_span(recv, recv_bytes, c->device)) {
        set_last("%s: rank %d: recvbuff %p (%zu bytes) is not memory of CUDA device %d", call,
                 c->rank, recv, recv_bytes, c->device);
        return ncclInvalidArgument;
    }
    task *t = calloc(1, sizeof *t);
    if (!t) {
        set_last("%s: out of memory", call);
        return ncclSystemError;
    }
    t->comm = c;
    t->d = (coll_desc){.kind = kind, .type = type, .op = kind == K_BROADCAST || kind == K_ALL_GATHER ? 0 : op,
                       .root = rooted ? root : 0, .count = count};
    t->send = send;
    t->recv = recv;
    atomic_fetch_add(&c->refs, 1);
    atomic_fetch_add(&c->pending, 1);
    cudaError_t e = emu_enqueue(stream, task_run, t, task_free);
    if (e != cudaSuccess) {
        task_free(t);
        set_last("%s: rank %d: the stream cannot take work (%s)", call, c->rank,
                 cudaGetErrorString(e));
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(K_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(K_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

/* --- point-to-point ------------------------------------------------------------
 *
 * A group (or a lone call, a group of one) is one task on the stream. It
 * moves every call's bytes through the pair channels until all are done,
 * each call progressing on its own except that calls to the same peer in
 * the same direction go in the order they were made (NCCL's rule). A send
 * ends when its peer has taken every byte (blocking for the stream until
 * the matching receive ran, as NCCL documents), a receive when it has them.
 * The receiver checks the sender's header: another count or type is
 * ncclInvalidUsage on both sides. The task holds exec_lock, so a
 * communicator's operations run one at a time on a rank, as on a GPU. */

typedef struct p2p_task {
    ncclComm_t comm;
    size_t n;
    p2p_op ops[];
} p2p_task;

static void ring_put(unsigned char *ring, uint64_t at, const void *src, size_t n)
{
    size_t off = (size_t)(at % RING_BYTES), first = RING_BYTES - off < n ? RING_BYTES - off : n;
    memcpy(ring + off, src, first);
    memcpy(ring, (const unsigned char *)src + first, n - first);
}

static void ring_get(const unsigned char *ring, uint64_t at, void *dst, size_t n)
{
    size_t off = (size_t)(at % RING_BYTES), first = RING_BYTES - off < n ? RING_BYTES - off : n;
    memcpy(dst, ring + off, first);
    memcpy((unsigned char *)dst + first, ring, n - first);
}

static void describe_p2p(char *buf, size_t n, const p2p_op *o)
{
    snprintf(buf, n, "%s of %zu %s %s rank %d", o->is_send ? "ncclSend" : "ncclRecv", o->count, type_name(o->type),
             o->is_send ? "to" : "from", o->peer);
}

/* One step of op o; true when it moved. False with *failed set when the
 * communicator failed. */
static bool p2p_step(ncclComm_t c, p2p_op *o, bool *failed)
{
    segment *s = c->seg;
    if (o->is_send) {
        pair_chan *ch = pair_of(s, c->rank, o->peer);
        unsigned char *ring = ring_of(s, c->rank, o->peer);
        if (atomic_load(&ch->broken)) {
            char mine[160];
            describe_p2p(mine, sizeof mine, o);
            comm_fail(c, ncclInvalidUsage, "rank %d: %s #%llu: %s", c->rank, mine, (unsigned long long)o->seq,
                      ch->why);
            *failed = true;
            return false;
        }
        uint64_t w = atomic_load_explicit(&ch->written, memory_order_relaxed);
        uint64_t space = RING_BYTES - (w - atomic_load_explicit(&ch->consumed, memory_order_acquire));
        if (o->state == 0 && space >= sizeof(msg_header)) {
            o->seq = ++c->sent[o->peer];
            msg_header h = {.magic = MSG_MAGIC, .seq = o->seq, .count = o->count, .type = o->type};
            ring_put(ring, w, &h, sizeof h);
            atomic_store_explicit(&ch->written, w + sizeof h, memory_order_release);
            o->state = 1;
            return true;
        }
        if (o->state == 1 && (space > 0 || o->pos == o->bytes)) {
            size_t n = o->bytes - o->pos < space ? o->bytes - o->pos : (size_t)space;
            ring_put(ring, w, (const unsigned char *)o->buf + o->pos, n);
            atomic_store_explicit(&ch->written, w + n, memory_order_release);
            o->pos += n;
            if (o->pos == o->bytes) {
                o->end = w + n;
                o->state = 2;
            }
            return true;
        }
        if (o->state == 2 && atomic_load_explicit(&ch->consumed, memory_order_acquire) >= o->end) {
            o->state = 3;
            return true;
        }
        return false;
    }
    pair_chan *ch = pair_of(s, o->peer, c->rank);
    const unsigned char *ring = ring_of(s, o->peer, c->rank);
    uint64_t r = atomic_load_explicit(&ch->consumed, memory_order_relaxed);
    uint64_t avail = atomic_load_explicit(&ch->written, memory_order_acquire) - r;
    if (o->state == 0 && avail >= sizeof(msg_header)) {
        msg_header h;
        ring_get(ring, r, &h, sizeof h);
        o->seq = ++c->recvd[o->peer];
        if (h.magic != MSG_MAGIC || h.seq != o->seq || h.count != o->count || h.type != o->type) {
            char mine[160];
            describe_p2p(mine, sizeof mine, o);
            snprintf(ch->why, sizeof ch->why,
                     "rank %d's message #%llu to rank %d is %llu %s, but rank %d's %s expected it", o->peer,
                     (unsigned long long)h.seq, c->rank, (unsigned long long)h.count, type_name(h.type), c->rank,
                     mine);
            atomic_store(&ch->broken, 1);
            comm_fail(c, ncclInvalidUsage, "rank %d: %s", c->rank, ch->why);
            *failed = true;
            return false;
        }
        atomic_store_explicit(&ch->consumed, r + sizeof h, memory_order_release);
        o->state = 1;
        return true;
    }
    if (o->state == 1 && (avail > 0 || o->pos == o->bytes)) {
        size_t n = o->bytes - o->pos < avail ? o->bytes - o->pos : (size_t)avail;
        ring_get(ring, r, (unsigned char *)o->buf + o->pos, n);
        atomic_store_explicit(&ch->consumed, r + n, memory_order_release);
        o->pos += n;
        if (o->pos == o->bytes) o->state = 3;
        return true;
    }
    return false;
}

static void run_p2p(ncclComm_t c, p2p_task *t)
{
    double limit = c->timeout_s, last_move = now_s(), next_pid_check = last_move + 0.05;
    backoff b = {0, 0};
    for (;;) {
        bool moved = false, failed = false, all_done = true;
        for (size_t i = 0; i < t->n && !failed; i++) {
            p2p_op *o = &t->ops[i];
            if (o->state == 3) continue;
            all_done = false;
            bool blocked = false; /* an earlier call to the same peer, same direction, not done */
            for (size_t j = 0; j < i && !blocked; j++)
                blocked = t->ops[j].state != 3 && t->ops[j].peer == o->peer && t->ops[j].is_send == o->is_send;
            while (!blocked && o->state != 3 && p2p_step(c, o, &failed)) moved = true;
        }
        if (failed || all_done) return;
        if (moved) {
            last_move = now_s();
            b = (backoff){0, 0};
            continue;
        }
        if (atomic_load(&c->aborted)) return; /* this rank's own abort: no error to add */
        double now = now_s();
        bool pids = now > next_pid_check;
        if (pids) next_pid_check = now + 0.05;
        char why[MSG_MAX];
        ncclResult_t f = peer_failure(c, 0, pids, why, sizeof why);
        const p2p_op *stuck = NULL;
        for (size_t i = 0; i < t->n && !stuck; i++)
            if (t->ops[i].state != 3) stuck = &t->ops[i];
        char what[160];
        describe_p2p(what, sizeof what, stuck);
        if (f == ncclSuccess && atomic_load(&c->seg->slots[stuck->peer].state) == SLOT_LEFT) {
            snprintf(why, sizeof why, "rank %d destroyed the communicator before the matching call", stuck->peer);
            f = ncclRemoteError;
        }
        if (f != ncclSuccess) {
            comm_fail(c, f, "rank %d: %s: %s", c->rank, what, why);
            return;
        }
        if (now - last_move > limit) {
            comm_fail(c, ncclSystemError, "rank %d: %s: rank %d made no progress in %g s (TFCORE_EMU_NCCL_TIMEOUT_S)",
                      c->rank, what, stuck->peer, limit);
            return;
        }
        backoff_pause(&b);
    }
}

static cudaError_t p2p_task_run(void *arg)
{
    p2p_task *t = arg;
    ncclComm_t c = t->comm;
    pthread_mutex_lock(&c->exec_lock);
    if (!atomic_load(&c->aborted) && atomic_load(&c->async_err) == ncclSuccess) run_p2p(c, t);
    pthread_mutex_unlock(&c->exec_lock);
    return cudaSuccess;
}

static void p2p_task_free(void *arg)
{
    p2p_task *t = arg;
    ncclComm_t c = t->comm;
    free(t);
    atomic_fetch_sub(&c->pending, 1);
    comm_unref(c);
}

static ncclResult_t p2p_enqueue(ncclComm_t c, cudaStream_t stream, const p2p_op *ops, size_t n)
{
    p2p_task *t = calloc(1, sizeof *t + n * sizeof *ops);
    if (!t) {
        set_last("ncclGroupEnd: out of memory");
        return ncclSystemError;
    }
    t->comm = c;
    t->n = n;
    memcpy(t->ops, ops, n * sizeof *ops);
    atomic_fetch_add(&c->refs, 1);
    atomic_fetch_add(&c->pending, 1);
    cudaError_t e = emu_enqueue(stream, p2p_task_run, t, p2p_task_free);
    if (e != cudaSuccess) {
        p2p_task_free(t);
        set_last("ncclSend/ncclRecv: rank %d: the stream cannot take work (%s)", c->rank, cudaGetErrorString(e));
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* Checks on the caller's thread; then into the open group, or queued alone. */
static ncclResult_t p2p_call(bool is_send, void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t c,
                             cudaStream_t stream)
{
    const char *call = is_send ? "ncclSend" : "ncclRecv";
    ncclResult_t r = check_comm(c, call);
    size_t es = type_size(type);
    if (r == ncclSuccess && es == 0) {
        set_last("%s: invalid data type %d", call, (int)type);
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess && (peer < 0 || peer >= c->nranks)) {
        set_last("%s: rank %d: peer %d is not in [0, %d)", call, c->rank, peer, c->nranks);
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess && count > SIZE_MAX / es) {
        set_last("%s: count %zu overflows", call, count);
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess && emu_stream_device(stream) != c->device) {
        set_last("%s: rank %d: the stream belongs to device %d, the communicator to device %d", call, c->rank,
                 emu_stream_device(stream), c->device);
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess && count > 0 && !emu_is_device_span(buf, count * es, c->device)) {
        set_last("%s: rank %d: %s %p (%zu bytes) is not memory of CUDA device %d", call, c->rank,
                 is_send ? "sendbuff" : "recvbuff", buf, count * es, c->device);
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess && g_group.depth > 0 && g_group.n > 0 &&
        (g_group.comm != c || g_group.stream != stream)) {
        set_last("%s: rank %d: the stand-in's groups hold calls of one communicator and one stream", call,
                 c->rank);
        r = ncclInvalidUsage;
    }
    if (r != ncclSuccess) {
        if (g_group.depth > 0 && g_group.err == ncclSuccess) g_group.err = r;
        return r;
    }
    p2p_op o = {.is_send = is_send, .peer = peer, .buf = buf, .count = count, .bytes = count * es, .type = type};
    if (g_group.depth == 0) return p2p_enqueue(c, stream, &o, 1);
    if (g_group.n == g_group.cap) {
        size_t cap = g_group.cap ? 2 * g_group.cap : 16;
        p2p_op *ops = realloc(g_group.ops, cap * sizeof *ops);
        if (!ops) {
            set_last("%s: out of memory", call);
            if (g_group.err == ncclSuccess) g_group.err = ncclSystemError;
            return ncclSystemError;
        }
        g_group.ops = ops;
        g_group.cap = cap;
    }
    g_group.comm = c;
    g_group.stream = stream;
    g_group.ops[g_group.n++] = o;
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    /* the stand-in only reads a send buffer; one pointer type for both directions */
    return p2p_call(true, (void *)(uintptr_t)sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p_call(false, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void)
{
    if (g_group.depth++ == 0) {
        g_group.n = 0;
        g_group.err = ncclSuccess;
        g_group.comm = NULL;
        g_group.stream = NULL;
    }
    return ncclSuccess;
}

/* The outermost end queues the group's calls as one task; after a failed
 * call in it, nothing is queued and the first error is returned. */
ncclResult_t ncclGroupEnd(void)
{
    if (g_group.depth == 0) {
        set_last("ncclGroupEnd: no ncclGroupStart open on this thread");
        return ncclInvalidUsage;
    }
    if (--g_group.depth > 0) return ncclSuccess;
    ncclResult_t r = g_group.err;
    if (r == ncclSuccess && g_group.n > 0) {
        r = check_comm(g_group.comm, "ncclGroupEnd");
        if (r == ncclSuccess) r = p2p_enqueue(g_group.comm, g_group.stream, g_group.ops, g_group.n);
    }
    free(g_group.ops); /* not kept: a thread that ends would leak it */
    g_group.ops = NULL;
    g_group.n = g_group.cap = 0;
    g_group.err = ncclSuccess;
    return r;
}
