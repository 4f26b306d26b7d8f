/* comm_peers.c — the ranks' heartbeat across machines (comm_peers.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm_peers.h"

#define BEAT_MAGIC 0x74666862u /* "tfhb" */
#define BEAT_VERSION 1u

/* One datagram: where the sender is. Ages are seconds before the send (the
 * machines' clocks differ; the receiver adds its own time of arrival).
 * Native byte order: a job's machines share one (a foreign one fails the magic). */
typedef struct beat_msg {
    uint32_t magic, version;
    uint32_t token;          /* the job's (rank 0's random number) */
    int32_t rank, world;
    int32_t where, micro;
    int32_t blocked_kind;    /* the collective it is inside, if blocked */
    int32_t last_kind, last_done;
    int32_t bucket, nbuckets; /* of the blocked collective, else of the last */
    int64_t step;
    uint64_t entered, blocked;
    uint64_t bytes;
    double where_age, blocked_age, last_age;
} beat_msg;

/* What this rank knows of one peer. */
typedef struct peer {
    struct sockaddr_in addr;
    char host[INET_ADDRSTRLEN];
    bool reachable;          /* it gave an address */
    bool heard;
    double at;               /* tf_now() when its last datagram came */
    beat_msg last;
} peer;

struct tf_comm_peers {
    int rank, world;
    int fd;
    uint32_t ip;             /* network order */
    uint16_t port;           /* host order */
    uint32_t token;
    const tf_comm_rank_log *own;
    peer *peers;             /* [world]; guarded by mu once the thread runs */
    pthread_mutex_t mu;
    bool mu_ready;
    pthread_t th;
    bool running;
    int stop_pipe[2];
};

/* --- the address this rank is reached at --------------------------------------- */

/* The first item of an Open MPI *_if_include value: an interface name or a
 * subnet "a.b.c.d/n"; whether interface address `a` (network order) matches. */
static bool if_matches(const char *spec, const char *name, uint32_t a)
{
    char item[64];
    size_t len = strcspn(spec, ",");
    if (len == 0 || len >= sizeof item) return false;
    memcpy(item, spec, len);
    item[len] = '\0';
    char *slash = strchr(item, '/');
    if (!slash) return strcmp(item, name) == 0;
    *slash = '\0';
    struct in_addr net;
    int bits = atoi(slash + 1);
    if (inet_pton(AF_INET, item, &net) != 1 || bits < 0 || bits > 32) return false;
    uint32_t mask = bits == 0 ? 0 : htonl(~0u << (32 - bits));
    return (a & mask) == (net.s_addr & mask);
}

static uint32_t pick_address(void)
{
    const char *spec = getenv("OMPI_MCA_btl_tcp_if_include");
    if (!spec || !*spec) spec = getenv("OMPI_MCA_oob_tcp_if_include");
    struct ifaddrs *ifs = NULL;
    uint32_t first = 0, chosen = 0;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && !chosen; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
            uint32_t a = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr;
            if (spec && *spec) {
                if (if_matches(spec, i->ifa_name, a)) chosen = a;
            } else if (!(i->ifa_flags & IFF_LOOPBACK) && !first) {
                first = a;
            }
        }
        freeifaddrs(ifs);
    }
    if (!chosen) chosen = first;
    return chosen ? chosen : htonl(INADDR_LOOPBACK);
}

/* --- setting up ------------------------------------------------------------------- */

tf_status tf_comm_peers_open(int rank, int world, tf_comm_peers **out, tf_error *err)
{
    *out = NULL;
    tf_comm_peers *p = calloc(1, sizeof *p);
    if (p) p->peers = calloc((size_t)world, sizeof *p->peers);
    if (!p || !p->peers) {
        if (p) free(p);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for the heartbeat of %d ranks", world);
    }
    p->rank = rank;
    p->world = world;
    p->stop_pipe[0] = p->stop_pipe[1] = -1;
    p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in any = {0};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof any;
    if (p->fd < 0 || bind(p->fd, (struct sockaddr *)&any, sizeof any) != 0 ||
        getsockname(p->fd, (struct sockaddr *)&any, &len) != 0 || pipe2(p->stop_pipe, O_CLOEXEC) != 0) {
        tf_status st = tf_error_set(err, TF_ERR_RUNTIME, "rank %d: cannot open the heartbeat's UDP socket: %s", rank,
                                    strerror(errno));
        tf_comm_peers_close(p);
        return st;
    }
    p->ip = pick_address();
    p->port = ntohs(any.sin_port);
    pthread_mutex_init(&p->mu, NULL);
    p->mu_ready = true;
    if (rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        p->token = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec ^ ((uint32_t)getpid() << 16);
        if (p->token == 0) p->token = 1;
    }
    *out = p;
    return TF_OK;
}

void tf_comm_peers_fill(const tf_comm_peers *p, double *exchange)
{
    double *e = exchange + (size_t)p->rank * TF_COMM_PEERS_SLOT;
    e[0] = (double)ntohl(p->ip); /* integers below 2^53: exact through a sum of zeros */
    e[1] = (double)p->port;
    e[2] = (double)p->token;
}

/* Whether rank `from` beats to rank `to` (see comm_peers.h). */
static bool beats(int from, int to, int world)
{
    if (from == to) return false;
    if (world <= TF_COMM_PEERS_FANOUT + 1 || to == 0) return true;
    int ahead = (to - from + world) % world;
    return ahead >= 1 && ahead <= TF_COMM_PEERS_FANOUT;
}

static bool beats_to(const tf_comm_peers *p, int k) { return beats(p->rank, k, p->world); }

/* This rank's slot, as a datagram. */
static void compose(const tf_comm_peers *p, beat_msg *m, double now)
{
    const tf_comm_rank_log *l = p->own;
    memset(m, 0, sizeof *m);
    m->magic = BEAT_MAGIC;
    m->version = BEAT_VERSION;
    m->token = p->token;
    m->rank = p->rank;
    m->world = p->world;
    m->entered = __atomic_load_n(&l->entered, __ATOMIC_ACQUIRE);
    m->blocked = __atomic_load_n(&l->blocked, __ATOMIC_ACQUIRE);
    m->where = __atomic_load_n(&l->where, __ATOMIC_ACQUIRE);
    int64_t step;
    int32_t micro;
    double where_since;
    tf_comm_rec_position(l, &step, &micro, &where_since);
    m->micro = micro;
    m->step = step;
    m->where_age = where_since > 0 ? now - where_since : 0;
    tf_comm_event e;
    if (m->entered) {
        if (tf_comm_rec_event(l, m->entered, &e)) {
            m->last_kind = e.kind;
            m->last_done = e.t_exit > 0;
            m->last_age = now - e.t_enter;
            m->bucket = e.bucket;
            m->nbuckets = e.nbuckets;
            m->bytes = e.bytes;
        }
    }
    if (m->blocked) {
        if (tf_comm_rec_event(l, m->blocked, &e)) {
            m->blocked_kind = e.kind;
            m->blocked_age = now - e.t_enter;
            m->bucket = e.bucket;
            m->nbuckets = e.nbuckets;
            m->bytes = e.bytes;
        } else {
            m->blocked = 0; /* being rewritten: the next beat has it */
        }
    }
}

static void receive(tf_comm_peers *p)
{
    beat_msg m;
    for (;;) {
        ssize_t got = recv(p->fd, &m, sizeof m, 0);
        if (got < 0) return; /* EAGAIN: nothing more */
        if ((size_t)got != sizeof m || m.magic != BEAT_MAGIC || m.version != BEAT_VERSION || m.token != p->token ||
            m.world != p->world || m.rank < 0 || m.rank >= p->world || m.rank == p->rank)
            continue; /* not this job's */
        pthread_mutex_lock(&p->mu);
        peer *q = &p->peers[m.rank];
        q->last = m;
        q->at = tf_now();
        q->heard = true;
        pthread_mutex_unlock(&p->mu);
    }
}

static void *beat_main(void *arg)
{
    tf_comm_peers *p = arg;
    struct pollfd fds[2] = {{p->fd, POLLIN, 0}, {p->stop_pipe[0], POLLIN, 0}};
    double next = 0;
    for (;;) {
        double now = tf_now();
        if (now >= next) {
            beat_msg m;
            compose(p, &m, now);
            for (int k = 0; k < p->world; k++)
                if (beats_to(p, k) && p->peers[k].reachable) /* a cut link fails here or nowhere: nothing to do */
                    (void)sendto(p->fd, &m, sizeof m, MSG_DONTWAIT, (const struct sockaddr *)&p->peers[k].addr,
                                 sizeof p->peers[k].addr);
            next = now + TF_COMM_PEERS_BEAT_S;
        }
        int ms = (int)((next - now) * 1000.0) + 1;
        if (poll(fds, 2, ms) < 0 && errno != EINTR) break;
        if (fds[1].revents) break;
        if (fds[0].revents & POLLIN) receive(p);
    }
    return NULL;
}

tf_status tf_comm_peers_start(tf_comm_peers *p, const double *exchange, const tf_comm_rank_log *own, tf_error *err)
{
    p->own = own;
    p->token = (uint32_t)exchange[2]; /* rank 0's */
    for (int k = 0; k < p->world; k++) {
        const double *e = exchange + (size_t)k * TF_COMM_PEERS_SLOT;
        peer *q = &p->peers[k];
        q->addr.sin_family = AF_INET;
        q->addr.sin_addr.s_addr = htonl((uint32_t)e[0]);
        q->addr.sin_port = htons((uint16_t)e[1]);
        q->reachable = e[0] > 0 && e[1] > 0; /* 0: that rank could not open its socket */
        if (!q->reachable || !inet_ntop(AF_INET, &q->addr.sin_addr, q->host, sizeof q->host))
            snprintf(q->host, sizeof q->host, "?");
    }
    int rc = pthread_create(&p->th, NULL, beat_main, p);
    if (rc) return tf_error_set(err, TF_ERR_RUNTIME, "rank %d: cannot start the heartbeat thread: %s", p->rank, strerror(rc));
    p->running = true;
    return TF_OK;
}

void tf_comm_peers_close(tf_comm_peers *p)
{
    if (!p) return;
    if (p->running) {
        char c = 1;
        if (write(p->stop_pipe[1], &c, 1) == 1) pthread_join(p->th, NULL);
        else pthread_detach(p->th); /* cannot happen with an empty pipe; never free what it uses */
        p->running = false;
    }
    if (p->fd >= 0) close(p->fd);
    if (p->stop_pipe[0] >= 0) close(p->stop_pipe[0]);
    if (p->stop_pipe[1] >= 0) close(p->stop_pipe[1]);
    if (p->mu_ready) pthread_mutex_destroy(&p->mu);
    free(p->peers);
    free(p);
}

const char *tf_comm_peers_host(const tf_comm_peers *p, int rank)
{
    return p && rank >= 0 && rank < p->world ? p->peers[rank].host : "?";
}

/* --- the report ------------------------------------------------------------------- */

/* Rank k's slot of a recorder, as peer q last told it (local clock). */
static void slot_of(const peer *q, tf_comm_rank_log *l)
{
    const beat_msg *m = &q->last;
    l->remote = 1;
    if (!q->heard) return; /* never heard: step 0 setup, no beat, no collective */
    l->heartbeat = q->at;
    l->where = m->where;
    l->step = m->step;
    l->micro = m->micro;
    l->where_since = q->at - m->where_age;
    l->entered = m->entered;
    l->blocked = m->blocked;
    if (m->entered) {
        tf_comm_event *e = &l->ring[m->entered % TF_COMM_RECORDER_DEPTH];
        e->seq = m->entered;
        e->kind = m->last_kind;
        e->step = m->step;
        e->t_enter = q->at - m->last_age;
        e->t_exit = m->last_done ? q->at : 0;
        e->bucket = m->blocked ? 0 : m->bucket;
        e->nbuckets = m->blocked ? 0 : m->nbuckets;
    }
    if (m->blocked) {
        tf_comm_event *e = &l->ring[m->blocked % TF_COMM_RECORDER_DEPTH];
        e->seq = m->blocked;
        e->kind = m->blocked_kind;
        e->step = m->step;
        e->micro = m->micro;
        e->bucket = m->bucket;
        e->nbuckets = m->nbuckets;
        e->bytes = m->bytes;
        e->t_enter = q->at - m->blocked_age;
        e->t_exit = 0;
    }
}

bool tf_comm_peers_overdue(tf_comm_peers *p, double now, double timeout_s, char *out, size_t n)
{
    if (!p || !p->own) return false;
    tf_comm_recorder *r = calloc(1, tf_comm_recorder_bytes(p->world));
    const char **hosts = calloc((size_t)p->world, sizeof *hosts);
    bool overdue = false;
    if (r && hosts) {
        tf_comm_recorder_init(r, p->world);
        pthread_mutex_lock(&p->mu);
        for (int k = 0; k < p->world; k++) {
            hosts[k] = p->peers[k].host;
            if (k == p->rank) r->rank[k] = *p->own;
            else if (!beats(k, p->rank, p->world)) r->rank[k].remote = 2; /* not watched from here */
            else slot_of(&p->peers[k], &r->rank[k]);
        }
        pthread_mutex_unlock(&p->mu);
        r->rank[p->rank].heartbeat = now; /* this process runs: it is the one asking */
        overdue = tf_comm_recorder_overdue_on(r, hosts, now, timeout_s, out, n);
    }
    free(hosts);
    free(r);
    return overdue;
}
