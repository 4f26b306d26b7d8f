/* comm_recorder.c — the collectives' flight recorder (comm_recorder.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_recorder.h"

size_t tf_comm_recorder_bytes(int world)
{
    return sizeof(tf_comm_recorder) + (size_t)(world > 0 ? world : 0) * sizeof(tf_comm_rank_log);
}

void tf_comm_recorder_init(tf_comm_recorder *r, int world)
{
    r->slot_bytes = (uint32_t)sizeof(tf_comm_rank_log);
    r->world = world;
    __atomic_store_n(&r->magic, TF_COMM_RECORDER_MAGIC, __ATOMIC_RELEASE);
}

bool tf_comm_recorder_valid(const tf_comm_recorder *r, size_t bytes, int world)
{
    return r && bytes >= tf_comm_recorder_bytes(world) &&
           __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == TF_COMM_RECORDER_MAGIC &&
           r->slot_bytes == sizeof(tf_comm_rank_log) && r->world == world;
}

const char *tf_comm_kind_name(int kind)
{
    switch (kind) {
    case TF_COMM_ALLREDUCE: return "all-reduce";
    case TF_COMM_REDUCE: return "reduce";
    case TF_COMM_BROADCAST: return "broadcast";
    case TF_COMM_BARRIER: return "barrier";
    case TF_COMM_REDUCE_SCATTER: return "reduce-scatter";
    case TF_COMM_ALL_GATHER: return "all-gather";
    case TF_COMM_SEND: return "send";
    case TF_COMM_RECV: return "recv";
    }
    return "collective";
}

static const char *where_name(int where)
{
    static const char *const names[] = {"setup", "data loading", "forward", "backward", "communication",
                                        "optimizer", "evaluation", "checkpoint save", "the end"};
    return where >= 0 && where <= TF_WHERE_DONE ? names[where] : "?";
}

/* --- the rank's side ------------------------------------------------------------- */

/* The log is read while its rank writes it (the launcher's watchdog thread, or
 * another process through shared memory): every field another thread may
 * read is stored and loaded atomically (relaxed: seq, entered, where and
 * blocked order them with release and acquire), so a reader sees an old or a
 * new value, never a torn one, and no access is a data race (ThreadSanitizer
 * reported the plain ones with comm dp-master, whose ranks are threads). */
#define REL_STORE(field, value)                                                                   \
    do {                                                                                         \
        __typeof__(field) v_ = (value);                                                          \
        __atomic_store(&(field), &v_, __ATOMIC_RELAXED);                                         \
    } while (0)
#define REL_LOAD(field)                                                                           \
    __extension__({                                                                              \
        __typeof__((field) + 0) v_; /* not const: the field's arithmetic type */                 \
        __atomic_load(&(field), &v_, __ATOMIC_RELAXED);                                          \
        v_;                                                                                      \
    })

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the machine */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tf_comm_rec_where(tf_comm_rank_log *l, tf_comm_where where, int64_t step, int micro)
{
    if (!l) return;
    REL_STORE(l->step, step);
    REL_STORE(l->micro, (int32_t)micro);
    REL_STORE(l->where_since, now_s());
    __atomic_store_n(&l->where, (int32_t)where, __ATOMIC_RELEASE);
}

void tf_comm_rec_phase(tf_comm_rank_log *l, tf_comm_where where)
{
    if (l) tf_comm_rec_where(l, where, l->step, l->micro);
}

uint64_t tf_comm_rec_enter(tf_comm_rank_log *l, tf_comm_kind kind, uint64_t bytes, int bucket, int nbuckets)
{
    if (!l) return 0;
    uint64_t seq = l->entered + 1;
    tf_comm_event *e = &l->ring[seq % TF_COMM_RECORDER_DEPTH];
    REL_STORE(e->t_exit, 0.0);
    REL_STORE(e->kind, (int32_t)kind);
    REL_STORE(e->bucket, (int32_t)bucket);
    REL_STORE(e->nbuckets, (int32_t)nbuckets);
    REL_STORE(e->micro, l->micro);
    REL_STORE(e->step, l->step);
    REL_STORE(e->bytes, (uint64_t)bytes);
    REL_STORE(e->t_enter, now_s());
    __atomic_store_n(&e->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&l->entered, seq, __ATOMIC_RELEASE);
    return seq;
}

void tf_comm_rec_exit(tf_comm_rank_log *l, uint64_t seq)
{
    if (!l || !seq) return;
    tf_comm_event *e = &l->ring[seq % TF_COMM_RECORDER_DEPTH];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == seq) REL_STORE(e->t_exit, now_s());
}

void tf_comm_rec_block(tf_comm_rank_log *l, uint64_t seq)
{
    if (l) __atomic_store_n(&l->blocked, seq, __ATOMIC_RELEASE);
}

bool tf_comm_rec_event(const tf_comm_rank_log *l, uint64_t seq, tf_comm_event *out)
{
    const tf_comm_event *src = &l->ring[seq % TF_COMM_RECORDER_DEPTH];
    *out = (tf_comm_event){
        .seq = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE),
        .kind = REL_LOAD(src->kind),
        .bucket = REL_LOAD(src->bucket),
        .nbuckets = REL_LOAD(src->nbuckets),
        .micro = REL_LOAD(src->micro),
        .step = REL_LOAD(src->step),
        .bytes = REL_LOAD(src->bytes),
        .t_enter = REL_LOAD(src->t_enter),
        .t_exit = REL_LOAD(src->t_exit),
    };
    return out->seq == seq;
}

void tf_comm_rec_position(const tf_comm_rank_log *l, int64_t *step, int32_t *micro, double *where_since)
{
    *step = REL_LOAD(l->step);
    *micro = REL_LOAD(l->micro);
    *where_since = REL_LOAD(l->where_since);
}

struct tf_comm_heartbeat {
    tf_comm_rank_log *l;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static void *beat(void *arg)
{
    tf_comm_heartbeat *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        REL_STORE(h->l->heartbeat, now_s());
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(TF_COMM_HEARTBEAT_S * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&h->cv, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

tf_comm_heartbeat *tf_comm_heartbeat_start(tf_comm_rank_log *l)
{
    tf_comm_heartbeat *h = l ? calloc(1, sizeof *h) : NULL;
    if (!h) return NULL;
    h->l = l;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    REL_STORE(l->heartbeat, now_s());
    if (pthread_create(&h->th, NULL, beat, h) != 0) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        REL_STORE(l->heartbeat, 0.0);
        free(h);
        return NULL;
    }
    return h;
}

void tf_comm_heartbeat_stop(tf_comm_heartbeat *h)
{
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    REL_STORE(h->l->heartbeat, 0.0);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void tf_comm_test_stall(int rank, int64_t step)
{
    const char *r = getenv("TFCORE_TEST_STALL_RANK"), *s = getenv("TFCORE_TEST_STALL_AT_STEP");
    if (!r || !*r || !s || !*s || atoi(r) != rank || strtoll(s, NULL, 10) != step) return;
    for (;;) sleep(3600);
}

/* --- the watcher's side ------------------------------------------------------------- */

/* A consistent copy of rank k's slot's summary. */
typedef struct rank_view {
    uint64_t entered;
    int where, micro;
    int64_t step;
    double where_since;
    bool has_last;
    tf_comm_event last;  /* the last collective entered */
    bool has_open;
    tf_comm_event open;  /* the oldest still open */
    bool has_blocked;
    tf_comm_event blocked; /* the one it is inside a blocking call of */
    double heartbeat;
    bool remote, unknown;
} rank_view;

static void view(const tf_comm_rank_log *l, rank_view *v)
{
    memset(v, 0, sizeof *v);
    v->entered = __atomic_load_n(&l->entered, __ATOMIC_ACQUIRE);
    v->where = __atomic_load_n(&l->where, __ATOMIC_ACQUIRE);
    int32_t micro;
    tf_comm_rec_position(l, &v->step, &micro, &v->where_since);
    v->micro = micro;
    v->heartbeat = REL_LOAD(l->heartbeat);
    int32_t remote = REL_LOAD(l->remote);
    v->remote = remote != 0;
    v->unknown = remote == 2;
    uint64_t blocked = __atomic_load_n(&l->blocked, __ATOMIC_ACQUIRE);
    uint64_t lo = v->entered > TF_COMM_RECORDER_DEPTH ? v->entered - TF_COMM_RECORDER_DEPTH + 1 : 1;
    for (uint64_t s = lo; s <= v->entered && s; s++) {
        tf_comm_event e;
        if (!tf_comm_rec_event(l, s, &e)) continue; /* being rewritten */
        if (s == v->entered) {
            v->last = e;
            v->has_last = true;
        }
        if (s == blocked) {
            v->blocked = e;
            v->has_blocked = true;
        }
        if (!v->has_open && e.t_exit == 0 && e.t_enter > 0) {
            v->open = e;
            v->has_open = true;
        }
    }
}

/* Seconds rank v has waited in the collective it is blocked in (0: not blocked). */
static double waited(const rank_view *v, double now)
{
    return v->has_blocked && v->blocked.t_enter > 0 ? now - v->blocked.t_enter : 0;
}

/* Its process has not beaten for a while: stopped (SIGSTOP, a debugger) or gone. */
static bool silent(const rank_view *v, double now)
{
    return v->heartbeat > 0 && now - v->heartbeat > TF_COMM_HEARTBEAT_STALE_S;
}

double tf_comm_recorder_oldest(const tf_comm_recorder *r, double now)
{
    double oldest = 0;
    for (int k = 0; k < r->world; k++) {
        rank_view v;
        view(&r->rank[k], &v);
        if (waited(&v, now) > oldest) oldest = waited(&v, now);
    }
    return oldest;
}

typedef struct text {
    char *p;
    size_t n, len;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t, const char *fmt, ...)
{
    if (t->len >= t->n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->p + t->len, t->n - t->len, fmt, ap);
    va_end(ap);
    if (w > 0) t->len += (size_t)w < t->n - t->len ? (size_t)w : t->n - t->len - 1;
}

/* " (step 3, micro-batch 1, bucket 2 of 5, 4.2 MB)" for an event. */
static void put_event_detail(text *t, const tf_comm_event *e)
{
    put(t, " (step %lld", (long long)e->step);
    if (e->micro > 0) put(t, ", micro-batch %d", e->micro);
    if (e->bucket > 0 && e->nbuckets > 0) put(t, ", bucket %d of %d", e->bucket, e->nbuckets);
    else if (e->bucket > 0) put(t, ", bucket %d", e->bucket);
    if (e->bytes >= 1048576) put(t, ", %.1f MB", (double)e->bytes / 1048576.0);
    else put(t, ", %llu bytes", (unsigned long long)e->bytes);
    put(t, ")");
}

/* "step 17 backward (micro-batch 2, bucket 3 of 5)": where a rank computes. */
static void put_where(text *t, const rank_view *v)
{
    put(t, "step %lld %s", (long long)v->step, where_name(v->where));
    bool bucket = v->has_last && v->last.bucket > 0 && v->last.step == v->step && v->where == TF_WHERE_BACKWARD;
    if (v->micro > 0 || bucket) {
        put(t, " (");
        if (v->micro > 0) put(t, "micro-batch %d%s", v->micro, bucket ? ", " : "");
        if (bucket && v->last.nbuckets > 0) put(t, "bucket %d of %d", v->last.bucket, v->last.nbuckets);
        else if (bucket) put(t, "bucket %d", v->last.bucket);
        put(t, ")");
    }
}

/* "rank 3" or "rank 3 (host 10.0.0.4)". */
static void put_rank(text *t, int k, const char *const *hosts)
{
    put(t, "rank %d", k);
    if (hosts && hosts[k] && hosts[k][0]) put(t, " (host %s)", hosts[k]);
}

static void put_rank_line(text *t, int k, const char *const *hosts, const rank_view *v, double now, bool behind)
{
    put_rank(t, k, hosts);
    if (!behind && v->has_blocked) {
        put(t, ": waiting %.0f s in %s #%llu", waited(v, now), tf_comm_kind_name(v->blocked.kind),
            (unsigned long long)v->blocked.seq);
        put_event_detail(t, &v->blocked);
    } else {
        put(t, "%s: last seen at ", behind ? " is behind" : "");
        put_where(t, v);
        if (v->where_since > 0) put(t, " %.0f s ago", now - v->where_since);
        if (v->remote && v->heartbeat <= 0)
            put(t, "; never heard from (its heartbeat does not reach this host: a firewall?)");
        else if (silent(v, now) && v->remote)
            put(t, "; no heartbeat from it for %.0f s (stopped, or its host unreachable)", now - v->heartbeat);
        else if (silent(v, now))
            put(t, "; its process has not run for %.0f s (stopped?)", now - v->heartbeat);
        if (v->has_blocked)
            put(t, "; inside %s #%llu", tf_comm_kind_name(v->blocked.kind), (unsigned long long)v->blocked.seq);
        else if (v->has_last)
            put(t, "; its last collective: %s #%llu%s", tf_comm_kind_name(v->last.kind),
                (unsigned long long)v->last.seq, v->last.t_exit > 0 ? ", done" : ", in flight");
        else
            put(t, "; no collective yet");
    }
    put(t, "\n");
}

void tf_comm_recorder_rank_line(const tf_comm_recorder *r, int rank, double now, char *out, size_t n)
{
    text t = {out, n, 0};
    if (n) out[0] = '\0';
    rank_view v;
    view(&r->rank[rank], &v);
    put_rank_line(&t, rank, NULL, &v, now, false);
    if (t.len && out[t.len - 1] == '\n') out[--t.len] = '\0';
}

/* "0,2,3" of the ranks whose flag is set, into t. */
static void put_ranks(text *t, const bool *flag, int world)
{
    bool first = true;
    for (int k = 0; k < world; k++)
        if (flag[k]) {
            put(t, "%s%d", first ? "" : ",", k);
            first = false;
        }
}

bool tf_comm_recorder_overdue(const tf_comm_recorder *r, double now, double timeout_s, char *out, size_t n)
{
    return tf_comm_recorder_overdue_on(r, NULL, now, timeout_s, out, n);
}

bool tf_comm_recorder_overdue_on(const tf_comm_recorder *r, const char *const *hosts, double now, double timeout_s,
                                 char *out, size_t n)
{
    enum { MAX_LISTED = 4096 };
    int world = r->world < MAX_LISTED ? r->world : MAX_LISTED;
    bool behind[MAX_LISTED], waiting[MAX_LISTED];
    rank_view v, front_view = {0};
    double oldest = 0;
    uint64_t front = 0;
    for (int k = 0; k < world; k++) {
        view(&r->rank[k], &v);
        if (v.entered > front) front = v.entered;
        if (waited(&v, now) > oldest) {
            oldest = waited(&v, now);
            front_view = v;
        }
    }
    if (oldest <= 0 || oldest < timeout_s) return false;
    /* Behind: a rank that is not inside a collective while another waits
     * (it computes, or is stuck), that has not entered the collectives the
     * front has, or whose process does not run. The ranks are read again:
     * a line shows what the rank did last, even if it moved meanwhile. */
    int nbehind = 0, nwaiting = 0;
    for (int k = 0; k < world; k++) {
        view(&r->rank[k], &v);
        behind[k] = !v.unknown && (!v.has_blocked || v.entered < front || silent(&v, now));
        waiting[k] = !behind[k] && !v.unknown;
        nbehind += behind[k];
        nwaiting += waiting[k];
    }
    /* the headline's wait: the longest of the ranks that wait (what a silent
     * rank said last is not a wait anyone sees) */
    for (int k = 0, first = 1; k < world && nwaiting > 0 && nbehind > 0; k++) {
        view(&r->rank[k], &v);
        if (waiting[k] && (first || waited(&v, now) > oldest)) {
            oldest = waited(&v, now);
            front_view = v;
            first = 0;
        }
    }
    text t = {out, n, 0};
    if (n) out[0] = '\0';
    put(&t, "collective timeout (comm.timeout_s = %g): ", timeout_s);
    if (nbehind == 0) {
        put(&t, "no rank is behind: every rank has waited %.0f s or more in %s #%llu (the transport is stuck)\n",
            oldest, tf_comm_kind_name(front_view.blocked.kind), (unsigned long long)front_view.blocked.seq);
    } else {
        if (nbehind == 1) {
            for (int k = 0; k < world; k++)
                if (behind[k]) {
                    view(&r->rank[k], &v);
                    put_rank(&t, k, hosts);
                    put(&t, " is behind: last seen at ");
                    put_where(&t, &v);
                    if (v.where_since > 0 && v.remote) put(&t, " %.0f s ago", now - v.where_since);
                    if (silent(&v, now) && v.remote) put(&t, ", no heartbeat from it for %.0f s", now - v.heartbeat);
                    else if (silent(&v, now)) put(&t, ", its process not running (stopped?)");
                }
        } else {
            put(&t, "ranks ");
            put_ranks(&t, behind, world);
            put(&t, " are behind");
        }
        if (nwaiting > 0) {
            put(&t, "; rank%s ", nwaiting > 1 ? "s" : "");
            put_ranks(&t, waiting, world);
            put(&t, " waiting %.0f s in %s #%llu", oldest, tf_comm_kind_name(front_view.blocked.kind),
                (unsigned long long)front_view.blocked.seq);
        }
        put(&t, "\n");
    }
    int unknown = 0;
    for (int k = 0; k < world; k++) {
        view(&r->rank[k], &v);
        if (v.unknown) unknown++;
        else put_rank_line(&t, k, hosts, &v, now, behind[k]);
    }
    if (unknown) put(&t, "(%d ranks not heard from here: rank 0's report lists every rank)\n", unknown);
    if (r->world > world) put(&t, "(%d more ranks not listed)\n", r->world - world);
    return true;
}
