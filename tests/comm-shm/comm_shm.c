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
 *
 * send / recv (ABI 1.4, a pipeline's messages) go through one ring per
 * ordered pair of ranks after the slots (a byte stream: a header naming the
 * message's number, count and dtype, then its bytes). A rank moves the
 * bytes of all its started sends and receives whenever it waits for one of
 * them (calls to one peer in one direction in start order), so a send
 * started before a wait in a receive never deadlocks. A send is done when
 * the peer has taken all its bytes; a receiver that finds another count or
 * dtype than it expects stops the job with both. Every collective first
 * finishes the sends and receives started before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
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

typedef enum shm_req_kind { REQ_ALLREDUCE = 0, REQ_SEND = 1, REQ_RECV = 2 } shm_req_kind;

struct tf_comm_request {
    struct tf_comm_request *next; /* the queue (all-reduces) or the p2p list, in start order */
    shm_req_kind kind;
    void *buf;
    size_t count;
    tf_dtype dt;
    tf_reduce_op op;
    bool done;                    /* ran (during an earlier wait or collective) */
    tf_status status;             /* its result then */
    tf_error err;
    /* send / recv */
    int peer;
    int state;                    /* 0: header, 1: bytes, 2: (send) until the peer took them all */
    size_t bytes, pos;            /* the message's bytes, and those moved */
    uint64_t end;                 /* (send) the stream position after the message */
};

/* One ordered pair's ring (in the segment, after the slots): only the
 * sender writes `written`, only the receiver `consumed`. */
typedef struct shm_pair {
    _Atomic uint64_t written;
    _Atomic uint64_t consumed;
    uint64_t sent;     /* messages the sender started into it (the sender's own count) */
    uint64_t received; /* messages the receiver took out (the receiver's own count) */
    char pad[32];
} shm_pair;

typedef struct shm_msg_header {
    uint64_t magic, seq, count;
    int32_t dt, unused;
} shm_msg_header;
#define SHM_MSG_MAGIC 0x5032506d68732d74ull

struct tf_comm {
    int rank, world_size;
    const tf_backend_vtable *bvt;
    tf_backend *be;
    double timeout_s;
    shm_ctl *ctl;
    unsigned char *seg;           /* [world_size][slot_bytes], [world_size^2] shm_pair, [world_size^2][slot_bytes] rings */
    size_t slot_bytes, seg_bytes;
    tf_comm_request *head, *tail; /* queued all-reduces */
    tf_comm_request *p2p_head, *p2p_tail; /* started sends and receives, not yet done */
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

static size_t pairs_bytes(int world) { return ((size_t)world * (size_t)world * sizeof(shm_pair) + 4095) & ~(size_t)4095; }

/* The segment: the slots, the pairs' counters, a ring of slot_bytes per ordered pair. */
static size_t segment_size(size_t slot_bytes, int world)
{
    return slot_bytes * (size_t)world + pairs_bytes(world) + (size_t)world * (size_t)world * slot_bytes;
}

static shm_pair *pair_of(tf_comm *c, int src, int dst)
{
    shm_pair *p = (shm_pair *)(c->seg + c->slot_bytes * (size_t)c->world_size);
    return p + (size_t)src * (size_t)c->world_size + (size_t)dst;
}

static unsigned char *ring_of(tf_comm *c, int src, int dst)
{
    return c->seg + c->slot_bytes * (size_t)c->world_size + pairs_bytes(c->world_size) +
           ((size_t)src * (size_t)c->world_size + (size_t)dst) * c->slot_bytes;
}

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


/* --- send / recv through the pairs' rings ------------------------------------ */
static void ring_put(tf_comm *c, unsigned char *ring, uint64_t at, const void *src, size_t n)
{
    size_t off = (size_t)(at % c->slot_bytes), first = c->slot_bytes - off < n ? c->slot_bytes - off : n;
    memcpy(ring + off, src, first);
    memcpy(ring, (const unsigned char *)src + first, n - first);
}

static void ring_get(tf_comm *c, const unsigned char *ring, uint64_t at, void *dst, size_t n)
{
    size_t off = (size_t)(at % c->slot_bytes), first = c->slot_bytes - off < n ? c->slot_bytes - off : n;
    memcpy(dst, ring + off, first);
    memcpy((unsigned char *)dst + first, ring, n - first);
}

static void describe_p2p(char *out, size_t n, const tf_comm_request *q)
{
    const char *name = tf_dtype_name(q->dt);
    snprintf(out, n, "%s of %zu %s elements %s rank %d", q->kind == REQ_SEND ? "send" : "recv", q->count,
             name ? name : "?", q->kind == REQ_SEND ? "to" : "from", q->peer);
}

/* One step of q; true when it moved bytes or finished. A mismatch stops the job. */
static bool p2p_step(tf_comm *c, tf_comm_request *q)
{
    uint64_t room = c->slot_bytes;
    if (q->kind == REQ_SEND) {
        shm_pair *pr = pair_of(c, c->rank, q->peer);
        unsigned char *ring = ring_of(c, c->rank, q->peer);
        uint64_t w = atomic_load_explicit(&pr->written, memory_order_relaxed);
        uint64_t space = room - (w - atomic_load_explicit(&pr->consumed, memory_order_acquire));
        if (q->state == 0 && space >= sizeof(shm_msg_header)) {
            shm_msg_header h = {.magic = SHM_MSG_MAGIC, .seq = ++pr->sent, .count = q->count, .dt = (int32_t)q->dt};
            ring_put(c, ring, w, &h, sizeof h);
            atomic_store_explicit(&pr->written, w + sizeof h, memory_order_release);
            q->state = 1;
            return true;
        }
        if (q->state == 1 && (space > 0 || q->pos == q->bytes)) {
            size_t n = q->bytes - q->pos < space ? q->bytes - q->pos : (size_t)space;
            ring_put(c, ring, w, (const unsigned char *)q->buf + q->pos, n);
            atomic_store_explicit(&pr->written, w + n, memory_order_release);
            q->pos += n;
            if (q->pos == q->bytes) {
                q->end = w + n;
                q->state = 2;
            }
            return true;
        }
        if (q->state == 2 && atomic_load_explicit(&pr->consumed, memory_order_acquire) >= q->end) {
            q->done = true;
            return true;
        }
        return false;
    }
    shm_pair *pr = pair_of(c, q->peer, c->rank);
    const unsigned char *ring = ring_of(c, q->peer, c->rank);
    uint64_t r = atomic_load_explicit(&pr->consumed, memory_order_relaxed);
    uint64_t avail = atomic_load_explicit(&pr->written, memory_order_acquire) - r;
    if (q->state == 0 && avail >= sizeof(shm_msg_header)) {
        shm_msg_header h;
        ring_get(c, ring, r, &h, sizeof h);
        uint64_t seq = ++pr->received;
        if (h.magic != SHM_MSG_MAGIC || h.seq != seq || h.count != q->count || h.dt != (int32_t)q->dt) {
            char mine[128], why[TF_ERROR_MSG_MAX];
            describe_p2p(mine, sizeof mine, q);
            const char *theirs = tf_dtype_name((tf_dtype)h.dt);
            snprintf(why, sizeof why, "rank %d's message #%llu to rank %d is %llu %s elements; rank %d's %s expected it",
                     q->peer, (unsigned long long)h.seq, c->rank, (unsigned long long)h.count, theirs ? theirs : "?",
                     c->rank, mine);
            stop_job(c->ctl, c->rank, why);
            q->status = tf_error_set(&q->err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s", c->rank, why);
            q->done = true;
            return true;
        }
        atomic_store_explicit(&pr->consumed, r + sizeof h, memory_order_release);
        q->state = 1;
        return true;
    }
    if (q->state == 1 && (avail > 0 || q->pos == q->bytes)) {
        size_t n = q->bytes - q->pos < avail ? q->bytes - q->pos : (size_t)avail;
        ring_get(c, ring, r, (unsigned char *)q->buf + q->pos, n);
        atomic_store_explicit(&pr->consumed, r + n, memory_order_release);
        q->pos += n;
        if (q->pos == q->bytes) q->done = true;
        return true;
    }
    return false;
}

/* Move every started send and receive as far as it goes (those to one peer
 * in one direction in start order); done ones leave the list. True when
 * something moved. */
static bool p2p_progress(tf_comm *c)
{
    bool moved = false;
    for (tf_comm_request *q = c->p2p_head; q; q = q->next) {
        bool blocked = false;
        for (tf_comm_request *e = c->p2p_head; e != q && !blocked; e = e->next)
            blocked = !e->done && e->peer == q->peer && e->kind == q->kind;
        while (!blocked && !q->done && p2p_step(c, q)) moved = true;
    }
    tf_comm_request **at = &c->p2p_head;
    c->p2p_tail = NULL;
    while (*at) {
        if ((*at)->done) *at = (*at)->next;
        else {
            c->p2p_tail = *at;
            at = &(*at)->next;
        }
    }
    return moved;
}

/* Until q is done (NULL: every started send and receive), the job stops, or
 * nothing moved for timeout_s. */
static tf_status p2p_finish(tf_comm *c, tf_comm_request *q, tf_error *err)
{
    double deadline = now_s() + c->timeout_s, pause = 0;
    for (;;) {
        bool moved = p2p_progress(c);
        if (q ? q->done : !c->p2p_head) return TF_OK;
        tf_status st = check_stopped(c->ctl, err);
        if (st) return st;
        double t = now_s();
        if (moved) {
            deadline = t + c->timeout_s;
            pause = 0;
            continue;
        }
        if (t > deadline) {
            char what[128];
            describe_p2p(what, sizeof what, q ? q : c->p2p_head);
            return timed_out(c, what, "the peer neither sent nor took a byte", err);
        }
        if (pause == 0) {
            sched_yield();
            pause = 1e-6;
        } else {
            sleep_s(pause);
            if (pause < 1e-3) pause *= 2;
        }
    }
}

static tf_status p2p_start(tf_comm *c, shm_req_kind kind, void *buf, size_t count, tf_dtype dt, int peer,
                           tf_comm_request **req, tf_error *err)
{
    const char *op = kind == REQ_SEND ? "send" : "recv";
    if (!c || !req)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: %s: NULL %s", op, !c ? "communicator" : "request pointer");
    *req = NULL;
    size_t es = tf_dtype_size(dt);
    if (es == 0) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: unknown dtype %d", c->rank, op, (int)dt);
    if (peer < 0 || peer >= c->world_size || peer == c->rank)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: peer %d is not another rank in [0, %d)",
                            c->rank, op, peer, c->world_size);
    if (count > SIZE_MAX / es)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: the size overflows", c->rank, op);
    if (count > 0 && !buf)
        return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: %s: the buffer is NULL", c->rank, op);
    tf_status st = check_stopped(c->ctl, err);
    /* the backend's writes to a send buffer (reads of a receive buffer) are done */
    if (!st) st = sync_backend(c, op, err);
    if (st) return st;
    tf_comm_request *q = calloc(1, sizeof *q);
    if (!q) return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: out of memory", c->rank);
    q->kind = kind;
    q->buf = buf;
    q->count = count;
    q->dt = dt;
    q->peer = peer;
    q->bytes = count * es;
    if (c->p2p_tail) c->p2p_tail->next = q;
    else c->p2p_head = q;
    c->p2p_tail = q;
    p2p_progress(c); /* what can move now, moves (never waits) */
    *req = q;
    return TF_OK;
}

static tf_status shm_send(tf_comm *c, const void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                          tf_error *err)
{
    /* a send only reads its buffer; the request keeps one pointer type */
    return p2p_start(c, REQ_SEND, (void *)(uintptr_t)buf, count, dt, peer, req, err);
}

static tf_status shm_recv(tf_comm *c, void *buf, size_t count, tf_dtype dt, int peer, tf_comm_request **req,
                          tf_error *err)
{
    return p2p_start(c, REQ_RECV, buf, count, dt, peer, req, err);
}

/* Every collective first finishes the started sends and receives and runs
 * what is queued, so ranks agree on the order. */
static tf_status flush(tf_comm *c, tf_error *err)
{
    if (c->p2p_head) {
        tf_status st = p2p_finish(c, NULL, err);
        if (st) return st;
    }
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
    if (q->kind != REQ_ALLREDUCE) {
        bool started = false;
        for (tf_comm_request *p = c->p2p_head; p && !started; p = p->next) started = p == q;
        if (!started && !q->done)
            return tf_error_set(err, TF_ERR_RUNTIME, "comm-shm: rank %d: wait: the request is not in flight", c->rank);
        tf_status st = started ? p2p_finish(c, q, err) : TF_OK;
        if (!st && q->status) {
            *err = q->err;
            st = q->status;
        }
        /* a request the job's stop left unfinished stays on the list until finalize */
        if (q->done) free(q);
        return st;
    }
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
    while (c->p2p_head) { /* started and never finished: dropped */
        tf_comm_request *q = c->p2p_head;
        c->p2p_head = q->next;
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
    c->seg_bytes = segment_size(c->slot_bytes, c->world_size);
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
    c->seg_bytes = segment_size(c->slot_bytes, c->world_size);

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
    .send = shm_send,
    .recv = shm_recv,
};

TF_PLUGIN_DEFINE(TF_KIND_COMM, "shm", "1.0.0",
                 "test double of the process launcher: forked CPU workers, shared-memory "
                 "collectives (not shipped)",
                 NULL, &shm_vtable)
