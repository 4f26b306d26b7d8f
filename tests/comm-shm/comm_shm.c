/* comm_shm.c — the "shm" comm plugin: a small, real CPU communicator for
 * tests of the core's process launcher (TF_LAUNCH_PROCESSES) on machines
 * without GPUs. It is a test double, not a shipped plugin.
 *
 * Workers are processes forked on one machine; buffers are host memory
 * (the backend must say host_memory). The core's 64 KiB MAP_SHARED region
 * holds the control block below. Rank 0 creates a POSIX shared-memory
 * segment of world_size slots (shm_open with a unique name), publishes its
 * name there, and unlinks the name once every rank has mapped it.
 *
 * Collectives go through the slots, chunk by chunk: every rank copies its
 * chunk into its slot, barrier, every rank sums the same slots in rank
 * order (so every rank gets the same bits), barrier. The barrier is a
 * counter plus a generation word that waiters sleep on with a futex. A
 * waiting rank fails when nothing moved for `timeout_s`, naming what it was
 * doing; abort() marks the job stopped and wakes every waiter.
 *
 * allreduce_start only queues the request; the reduction runs when the
 * request (or any later one, or another collective) is waited for, in start
 * order, so every rank runs the same sequence of collectives.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tfcore/comm.h"
#include "tfcore/dtype.h"
#include "tfcore/plugin.h"

#define SHM_NAME_MAX 64

/* The control block, in the core's shared region (zero-filled at first). */
typedef struct shm_ctl {
    _Atomic uint32_t name_ready;  /* 1 once rank 0 wrote name, world_size, slot_bytes */
    _Atomic uint32_t attached;    /* ranks that mapped the segment */
    _Atomic uint32_t stop_claim;  /* the first rank to stop the job sets it, then writes why */
    _Atomic uint32_t stopped;     /* 0, or 1 + that rank, stored after why */
    _Atomic uint32_t bar_count;   /* ranks at the current barrier */
    _Atomic uint32_t bar_gen;     /* barrier generation; waiters sleep on it (futex) */
    int32_t world_size;
    uint64_t slot_bytes;
    char name[SHM_NAME_MAX];
    char why[TF_ERROR_MSG_MAX];
} shm_ctl;

_Static_assert(sizeof(shm_ctl) <= TF_COMM_SHARED_BYTES, "the control block must fit the region");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "process-shared atomics need lock-free ints");

struct tf_comm_request {
    struct tf_comm_request *next; /* the queue, in start order */
    void *buf;
    size_t count;
    tf_dtype dt;
    tf_reduce_op op;
    bool done;                    /* ran (during an earlier wait or collective) */
    tf_status status;             /* its result then */
    tf_error err;
};

struct tf_comm {
    int rank, world_size;
    const tf_backend_vtable *bvt;
    tf_backend *be;
    double timeout_s;
    shm_ctl *ctl;
    unsigned char *seg;           /* [world_size][slot_bytes] */
    size_t slot_bytes, seg_bytes;
    tf_comm_request *head, *tail; /* queued all-reduces */
    char name[SHM_NAME_MAX];      /* rank 0: the segment's name while it is linked */
};

/* --- keys --------------------------------------------------------------------- */
typedef struct shm_options {
    double timeout_s;
    long long slot_kb;
} shm_options;

static tf_status read_options(tf_section *sec, shm_options *o, tf_error *err)
{
    o->timeout_s = TF_COMM_TIMEOUT_DEFAULT;
    o->slot_kb = 1024;
    if (!sec) return TF_OK;
    /* the core's key (tfcore/comm.h), with its default and bounds */
    tf_status st = tf_cfg_float(sec, "timeout_s", TF_COMM_TIMEOUT_DEFAULT, TF_COMM_TIMEOUT_MIN, TF_COMM_TIMEOUT_MAX,
                                &o->timeout_s, err);
    if (!st) st = tf_cfg_int(sec, "slot_kb", 1024, 1, 1 << 20, &o->slot_kb, err);
    return st;
}

static tf_status shm_check_config(tf_section *section, tf_error *err)
{
    shm_options o;
    return read_options(section, &o, err);
}

/* --- time, futex, stop flag ---------------------------------------------------- */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Shared (not FUTEX_PRIVATE) futexes: the word is in memory several processes map. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Mark the job stopped by `rank` (the first stop's reason stands) and wake
 * every waiter. */
static void stop_job(shm_ctl *k, int rank, const char *why)
{
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong_explicit(&k->stop_claim, &zero, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        snprintf(k->why, sizeof k->why, "%s", why && *why ? why : "(no reason given)");
        atomic_store_explicit(&k->stopped, (uint32_t)rank + 1, memory_order_release);
    }
    futex_wake_all(&k->bar_gen); /* waiters look at `stopped` when they wake */
}

/* TF_OK, or the job's stop as this rank's error: "comm-shm: rank R stopped: why". */
static tf_status check_stopped(shm_ctl *k, tf_error *err)
{
    uint32_t s = atomic_load_explicit(&k->stopped, memory_order_acquire);
    if (s == 0) return TF_OK;
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %u stopped: %s", s - 1, k->why);
}

/* A wait that made no progress for timeout_s: stop the job with the reason
 * (so the others stop too) and fail. */
static tf_status timed_out(tf_comm *c, const char *what, const char *detail, tf_error *err)
{
    char why[TF_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s timed out: no progress for %g s (%s)", what, c->timeout_s, detail);
    stop_job(c->ctl, c->rank, why);
    return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s", c->rank, why);
}

/* --- barrier -------------------------------------------------------------------- */
static tf_status barrier_wait(tf_comm *c, const char *what, tf_error *err)
{
    shm_ctl *k = c->ctl;
    tf_status st = check_stopped(k, err);
    if (st) return st;
    uint32_t gen = atomic_load_explicit(&k->bar_gen, memory_order_acquire);
    uint32_t n = atomic_fetch_add_explicit(&k->bar_count, 1, memory_order_acq_rel) + 1;
    if (n == (uint32_t)c->world_size) {
        /* the last one in: reset the count for the next barrier, then release
         * everyone (the count's reset happens-before their next arrival) */
        atomic_store_explicit(&k->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&k->bar_gen, 1, memory_order_release);
        futex_wake_all(&k->bar_gen);
        return TF_OK;
    }
    double deadline = now_s() + c->timeout_s;
    uint32_t seen = n;
    for (;;) {
        if (atomic_load_explicit(&k->bar_gen, memory_order_acquire) != gen) return TF_OK;
        if ((st = check_stopped(k, err))) return st;
        uint32_t cnt = atomic_load_explicit(&k->bar_count, memory_order_relaxed);
        double t = now_s();
        if (cnt != seen) { /* someone arrived: progress */
            seen = cnt;
            deadline = t + c->timeout_s;
        } else if (t > deadline) {
            char detail[96];
            snprintf(detail, sizeof detail, "%u of %d ranks at the barrier", cnt, c->world_size);
            return timed_out(c, what, detail, err);
        }
        double left = deadline - t;
        futex_wait(&k->bar_gen, gen, left < 0.05 ? (left > 0 ? left : 0.001) : 0.05);
    }
}

/* --- collectives over the slots ---------------------------------------------- */
static unsigned char *slot(tf_comm *c, int r) { return c->seg + (size_t)r * c->slot_bytes; }

/* Make sure the backend finished writing the buffers we are about to read.
 * A rank that fails here would leave the others waiting in the collective:
 * it stops the job instead. */
static tf_status sync_backend(tf_comm *c, const char *what, tf_error *err)
{
    tf_status st = c->bvt->stream_sync(c->be, NULL, err);
    if (st) {
        tf_error_prefix(err, "comm-shm: rank %d: %s", c->rank, what);
        stop_job(c->ctl, c->rank, err->msg);
    }
    return st;
}

/* Sum slot 0..N-1 in rank order into out[n] (AVG: then / N). */
static void sum_slots(tf_comm *c, void *out, size_t n, tf_dtype dt, tf_reduce_op op)
{
    int N = c->world_size;
    if (dt == TF_DTYPE_F32) {
        float *o = out;
        for (size_t i = 0; i < n; i++) {
            float acc = ((const float *)slot(c, 0))[i];
            for (int r = 1; r < N; r++) acc += ((const float *)slot(c, r))[i];
            o[i] = op == TF_REDUCE_AVG ? acc / (float)N : acc;
        }
    } else {
        double *o = out;
        for (size_t i = 0; i < n; i++) {
            double acc = ((const double *)slot(c, 0))[i];
            for (int r = 1; r < N; r++) acc += ((const double *)slot(c, r))[i];
            o[i] = op == TF_REDUCE_AVG ? acc / (double)N : acc;
        }
    }
}

static tf_status check_reduction(tf_comm *c, const char *what, const void *buf, size_t count,
                                 tf_dtype dt, tf_reduce_op op, tf_error *err)
{
    if (dt != TF_DTYPE_F32 && dt != TF_DTYPE_F64) {
        const char *name = tf_dtype_name(dt);
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: cannot reduce %s (F32, F64)",
                            c->rank, what, name ? name : "an unknown dtype");
    }
    if (op != TF_REDUCE_SUM && op != TF_REDUCE_AVG)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: unknown reduce op %d",
                            c->rank, what, (int)op);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: the buffer is NULL",
                            c->rank, what);
    return TF_OK;
}

/* root < 0: all-reduce (every rank gets the result), else reduce to root. */
static tf_status reduce_chunks(tf_comm *c, const char *what, void *buf, size_t count, tf_dtype dt,
                               tf_reduce_op op, int root, tf_error *err)
{
    tf_status st = sync_backend(c, what, err);
    size_t es = tf_dtype_size(dt), per = c->slot_bytes / es;
    for (size_t off = 0; !st && off < count; off += per) {
        size_t n = count - off < per ? count - off : per;
        unsigned char *mine = (unsigned char *)buf + off * es;
        memcpy(slot(c, c->rank), mine, n * es);
        if ((st = barrier_wait(c, what, err))) break;
        if (root < 0 || root == c->rank) sum_slots(c, mine, n, dt, op);
        st = barrier_wait(c, what, err); /* nobody refills a slot still being read */
    }
    return st;
}

static void describe(char *out, size_t n, const char *op, size_t count, tf_dtype dt, int root)
{
    const char *name = tf_dtype_name(dt);
    if (root >= 0)
        snprintf(out, n, "%s of %zu %s elements (root %d)", op, count, name ? name : "?", root);
    else
        snprintf(out, n, "%s of %zu %s elements", op, count, name ? name : "?");
}

/* Run the queued all-reduces in start order, up to and including `upto`
 * (NULL: all of them). Each keeps its own result. */
static tf_status run_queue(tf_comm *c, tf_comm_request *upto)
{
    tf_status last = TF_OK;
    while (c->head) {
        tf_comm_request *q = c->head;
        c->head = q->next;
        if (!c->head) c->tail = NULL;
        q->next = NULL;
        char what[128];
        describe(what, sizeof what, "allreduce", q->count, q->dt, -1);
        q->status = reduce_chunks(c, what, q->buf, q->count, q->dt, q->op, -1, &q->err);
        q->done = true;
        last = q->status;
        if (q == upto) break;
    }
    return last;
}

/* Every collective first runs what is queued, so ranks agree on the order. */
static tf_status flush(tf_comm *c, tf_error *err)
{
    tf_comm_request *last = c->tail;
    if (!last) return TF_OK;
    run_queue(c, NULL);
    if (last->status) {
        *err = last->err;
        return last->status;
    }
    return check_stopped(c->ctl, err);
}

/* --- the vtable ----------------------------------------------------------------- */
static tf_launch_mode shm_launch_mode(void) { return TF_LAUNCH_PROCESSES; }
static bool shm_optimizer_on_root_only(void) { return false; }

static tf_status shm_allreduce_start(tf_comm *c, void *buf, size_t count, tf_dtype dt,
                                     tf_reduce_op op, tf_comm_request **req, tf_error *err)
{
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: allreduce_start: NULL %s",
                            !c ? "communicator" : "request pointer");
    *req = NULL;
    char what[128];
    describe(what, sizeof what, "allreduce", count, dt, -1);
    tf_status st = check_reduction(c, what, buf, count, dt, op, err);
    if (!st) st = check_stopped(c->ctl, err);
    if (st) return st;
    tf_comm_request *q = calloc(1, sizeof *q);
    if (!q) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: out of memory", c->rank);
    q->buf = buf;
    q->count = count;
    q->dt = dt;
    q->op = op;
    if (c->tail) c->tail->next = q;
    else c->head = q;
    c->tail = q;
    *req = q;
    return TF_OK;
}

static tf_status shm_wait(tf_comm *c, tf_comm_request *q, tf_error *err)
{
    if (!c || !q)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: wait: NULL %s",
                            !c ? "communicator" : "request");
    if (!q->done) {
        bool queued = false;
        for (tf_comm_request *p = c->head; p && !queued; p = p->next) queued = p == q;
        if (!queued)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "comm-shm: rank %d: wait: the request is not in flight (waited "
                                "for twice, or not from allreduce_start)",
                                c->rank);
        run_queue(c, q);
    }
    tf_status st = q->status;
    if (st) *err = q->err;
    free(q);
    return st;
}

static tf_status shm_reduce(tf_comm *c, void *buf, size_t count, tf_dtype dt, tf_reduce_op op,
                            int root, tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: reduce: NULL communicator");
    char what[128];
    describe(what, sizeof what, "reduce", count, dt, root);
    if (root < 0 || root >= c->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: root %d is not in [0, %d)",
                            c->rank, what, root, c->world_size);
    tf_status st = check_reduction(c, what, buf, count, dt, op, err);
    if (!st) st = flush(c, err);
    if (!st) st = reduce_chunks(c, what, buf, count, dt, op, root, err);
    return st;
}

static tf_status shm_broadcast(tf_comm *c, void *buf, size_t count, tf_dtype dt, int root,
                               tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: broadcast: NULL communicator");
    char what[128];
    describe(what, sizeof what, "broadcast", count, dt, root);
    size_t es = tf_dtype_size(dt);
    if (es == 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: unknown dtype %d", c->rank,
                            what, (int)dt);
    if (root < 0 || root >= c->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: root %d is not in [0, %d)",
                            c->rank, what, root, c->world_size);
    if (count > SIZE_MAX / es)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: the size overflows",
                            c->rank, what);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: the buffer is NULL",
                            c->rank, what);
    tf_status st = flush(c, err);
    if (!st) st = sync_backend(c, what, err);
    size_t bytes = count * es;
    for (size_t off = 0; !st && off < bytes; off += c->slot_bytes) {
        size_t n = bytes - off < c->slot_bytes ? bytes - off : c->slot_bytes;
        unsigned char *mine = (unsigned char *)buf + off;
        if (c->rank == root) memcpy(slot(c, root), mine, n);
        if ((st = barrier_wait(c, what, err))) break;
        if (c->rank != root) memcpy(mine, slot(c, root), n);
        st = barrier_wait(c, what, err);
    }
    return st;
}

static tf_status shm_barrier(tf_comm *c, tf_error *err)
{
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: barrier: NULL communicator");
    tf_status st = flush(c, err);
    return st ? st : barrier_wait(c, "barrier", err);
}

static void shm_abort(tf_comm *c, const char *why)
{
    if (c) stop_job(c->ctl, c->rank, why);
}

/* --- init and finalize ---------------------------------------------------------- */

/* Wait until *word >= want, the job stops, or nothing moved for timeout_s. */
static tf_status wait_count(tf_comm *c, _Atomic uint32_t *word, uint32_t want, const char *waiting_for,
                            tf_error *err)
{
    double deadline = now_s() + c->timeout_s;
    uint32_t seen = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        uint32_t v = atomic_load_explicit(word, memory_order_acquire);
        if (v >= want) return TF_OK;
        tf_status st = check_stopped(c->ctl, err);
        if (st) return st;
        double t = now_s();
        if (v != seen) {
            seen = v;
            deadline = t + c->timeout_s;
        } else if (t > deadline) {
            return timed_out(c, "init", waiting_for, err);
        }
        sleep_s(0.001);
    }
}

static void shm_finalize(tf_comm *c)
{
    if (!c) return;
    while (c->head) { /* queued and never waited for: dropped */
        tf_comm_request *q = c->head;
        c->head = q->next;
        free(q);
    }
    if (c->seg) munmap(c->seg, c->seg_bytes);
    /* rank 0 unlinks as soon as everyone attached; this covers a failed init */
    if (c->name[0]) shm_unlink(c->name);
    free(c);
}

static tf_status create_segment(tf_comm *c, tf_error *err)
{
    shm_ctl *k = c->ctl;
    static _Atomic unsigned serial;
    char name[SHM_NAME_MAX];
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 16; attempt++) {
        snprintf(name, sizeof name, "/tfcore-shm-%ld-%u", (long)getpid(), atomic_fetch_add(&serial, 1));
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank 0: shm_open(%s): %s", name,
                            strerror(errno));
    if (ftruncate(fd, (off_t)c->seg_bytes) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(name);
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank 0: ftruncate(%s, %zu): %s", name,
                            c->seg_bytes, strerror(e));
    }
    void *p = mmap(NULL, c->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank 0: mmap of %s (%zu bytes): %s", name,
                            c->seg_bytes, strerror(e));
    }
    c->seg = p;
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->world_size = c->world_size;
    k->slot_bytes = c->slot_bytes;
    atomic_store_explicit(&k->name_ready, 1, memory_order_release);
    return TF_OK;
}

static tf_status attach_segment(tf_comm *c, tf_error *err)
{
    shm_ctl *k = c->ctl;
    tf_status st = wait_count(c, &k->name_ready, 1, "waiting for rank 0's shared segment", err);
    if (!st) st = check_stopped(k, err); /* rank 0 may have given up on us */
    if (st) return st;
    if (k->world_size != c->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "comm-shm: rank %d: rank 0 runs with world_size %d, this rank with %d",
                            c->rank, (int)k->world_size, c->world_size);
    c->slot_bytes = (size_t)k->slot_bytes; /* rank 0's, should the configs differ */
    c->seg_bytes = c->slot_bytes * (size_t)c->world_size;
    int fd = shm_open(k->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: shm_open(%s): %s", c->rank,
                            k->name, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != c->seg_bytes) {
        close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s is not %zu bytes", c->rank,
                            k->name, c->seg_bytes);
    }
    void *p = mmap(NULL, c->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: mmap of %s: %s", c->rank,
                            k->name, strerror(e));
    c->seg = p;
    return TF_OK;
}

static tf_status shm_init(const tf_comm_init_args *args, tf_comm **out, tf_error *err)
{
    if (!args || !out)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: init: NULL %s", !args ? "args" : "out");
    *out = NULL;
    if (args->size < offsetof(tf_comm_init_args, shared) + sizeof args->shared)
        return tf_error_set(err, TF_ERR_PLUGIN, "comm-shm: init: the core's init args are too small (%u bytes)",
                            args->size);
    if (args->world_size < 1 || args->rank < 0 || args->rank >= args->world_size)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: init: rank %d of world_size %d",
                            args->rank, args->world_size);
    if (!args->shared)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-shm needs tfcore's process launcher (no shared region: started "
                            "by mpirun or srun?)");
    const tf_backend_vtable *bvt = args->backend;
    if (!bvt || !args->be)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: init: no backend", args->rank);
    if (!TF_HAS(bvt, host_memory) || !bvt->host_memory(args->be)) {
        const char *name = bvt->device_name ? bvt->device_name(args->be) : NULL;
        return tf_error_set(err, TF_ERR_CONFIG,
                            "comm-shm needs a backend whose buffers are host memory (backend "
                            "\"%s\" has device memory)",
                            name ? name : "without a device name");
    }
    shm_options o;
    tf_status st = read_options(args->section, &o, err);
    if (st) return st;

    tf_comm *c = calloc(1, sizeof *c);
    if (!c) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: out of memory", args->rank);
    c->rank = args->rank;
    c->world_size = args->world_size;
    c->bvt = bvt;
    c->be = args->be;
    c->timeout_s = o.timeout_s;
    c->ctl = args->shared;
    c->slot_bytes = (size_t)o.slot_kb * 1024;
    c->seg_bytes = c->slot_bytes * (size_t)c->world_size;

    st = c->rank == 0 ? create_segment(c, err) : attach_segment(c, err);
    if (!st) {
        atomic_fetch_add_explicit(&c->ctl->attached, 1, memory_order_acq_rel);
        if (c->rank == 0) {
            char waiting[96];
            snprintf(waiting, sizeof waiting, "waiting for %d ranks to map the shared segment",
                     c->world_size);
            st = wait_count(c, &c->ctl->attached, (uint32_t)c->world_size, waiting, err);
            /* everyone has it mapped (or the job failed): the name can go */
            shm_unlink(c->name);
            c->name[0] = '\0';
        }
    }
    if (st) {
        /* tell the others instead of letting them wait for their timeout */
        stop_job(c->ctl, c->rank, err->msg);
        shm_finalize(c);
        return st;
    }
    *out = c;
    return TF_OK;
}

static const tf_comm_vtable shm_vtable = {
    .size = TF_VTABLE_SIZE(tf_comm_vtable),
    .check_config = shm_check_config,
    .launch_mode = shm_launch_mode,
    .optimizer_on_root_only = shm_optimizer_on_root_only,
    .init = shm_init,
    .finalize = shm_finalize,
    .allreduce_start = shm_allreduce_start,
    .wait = shm_wait,
    .reduce = shm_reduce,
    .broadcast = shm_broadcast,
    .barrier = shm_barrier,
    .abort = shm_abort,
};

TF_PLUGIN_DEFINE(TF_KIND_COMM, "shm", "1.0.0",
                 "test double of the process launcher: forked CPU workers, shared-memory "
                 "collectives (not shipped)",
                 NULL, &shm_vtable)
