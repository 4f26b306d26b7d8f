/* test_comm_peers.c — the ranks' heartbeat across machines (comm_peers.h),
 * two ranks in one process over 127.0.0.1: each hears where the other is;
 * when one goes silent (its heartbeat stopped, as a SIGSTOP or a cut link
 * does) while the other waits past comm.timeout_s, the report names it, its
 * host and its last phase. tests/test_multihost.sh runs it across network
 * namespaces end to end. A job of 70 ranks checks the fan-out of a large job
 * (rank 0 hears everyone, the others the 64 ranks before them). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm_peers.h"
#include "common.h"

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(test_silent_peer_named)
{
    /* the subnet form of Open MPI's interface choice picks loopback here */
    setenv("OMPI_MCA_btl_tcp_if_include", "127.0.0.0/8", 1);
    unsetenv("OMPI_MCA_oob_tcp_if_include");
    tf_comm_recorder *rec = calloc(1, tf_comm_recorder_bytes(2));
    ck_assert_ptr_nonnull(rec);
    tf_comm_recorder_init(rec, 2);
    tf_comm_peers *p[2];
    tf_error err = {0};
    double exchange[2 * TF_COMM_PEERS_SLOT] = {0};
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(tf_comm_peers_open(r, 2, &p[r], &err) == TF_OK, "%s", err.msg);
        tf_comm_peers_fill(p[r], exchange); /* each its own entries: the all-reduce's sum */
    }
    ck_assert_double_eq(exchange[0], (double)0x7f000001u);
    ck_assert(exchange[1] > 0 && exchange[TF_COMM_PEERS_SLOT + 1] > 0);
    ck_assert_double_eq(exchange[TF_COMM_PEERS_SLOT + 2], 0); /* the token is rank 0's */

    /* rank 1 computes step 17's backward; rank 0 waits in its all-reduce */
    tf_comm_rank_log *l0 = &rec->rank[0], *l1 = &rec->rank[1];
    tf_comm_rec_where(l1, TF_WHERE_FORWARD, 17, 1);
    tf_comm_rec_phase(l1, TF_WHERE_BACKWARD);
    tf_comm_rec_where(l0, TF_WHERE_COMM, 17, 0);
    uint64_t seq = tf_comm_rec_enter(l0, TF_COMM_ALLREDUCE, 1u << 20, 1, 2);
    tf_comm_rec_block(l0, seq);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(tf_comm_peers_start(p[r], exchange, &rec->rank[r], &err) == TF_OK, "%s", err.msg);
    ck_assert_str_eq(tf_comm_peers_host(p[0], 1), "127.0.0.1");

    /* a datagram that is not a heartbeat of this job is dropped */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(0x7f000001u);
    to.sin_port = htons((uint16_t)exchange[1]);
    ck_assert_int_eq(sendto(fd, "hello", 5, 0, (struct sockaddr *)&to, sizeof to), 5);
    close(fd);

    nap(0.8); /* a few beats each way */
    char out[8192];
    ck_assert(!tf_comm_peers_overdue(p[0], mono(), 600, out, sizeof out));
    tf_comm_peers_close(p[1]); /* rank 1 falls silent */
    nap(2.5);
    ck_assert(tf_comm_peers_overdue(p[0], mono(), 3, out, sizeof out));
    ck_assert_msg(strstr(out, "collective timeout (comm.timeout_s = 3): rank 1 (host 127.0.0.1) is behind: last seen at "
                              "step 17 backward (micro-batch 1) "),
                  "%s", out);
    /* (the seconds depend on the machine's load: the words around them do not) */
    ck_assert_msg(strstr(out, "; rank 0 waiting "), "%s", out);
    ck_assert_msg(strstr(out, "\nrank 0 (host 127.0.0.1): waiting "), "%s", out);
    ck_assert_msg(strstr(out, " s in all-reduce #1 (step 17, bucket 1 of 2, 1.0 MB)\n"), "%s", out);
    ck_assert_msg(strstr(out, "\nrank 1 (host 127.0.0.1) is behind: last seen at step 17 backward (micro-batch 1) "), "%s",
                  out);
    ck_assert_msg(strstr(out, "; no heartbeat from it for "), "%s", out);
    ck_assert_msg(strstr(out, " s (stopped, or its host unreachable); no collective yet\n"), "%s", out);
    tf_comm_peers_close(p[0]);
    free(rec);
}
END_TEST

START_TEST(test_never_heard)
{
    /* a peer whose heartbeat never arrives (a firewall) is said to be so */
    setenv("OMPI_MCA_btl_tcp_if_include", "lo", 1);
    tf_comm_recorder *rec = calloc(1, tf_comm_recorder_bytes(2));
    ck_assert_ptr_nonnull(rec);
    tf_comm_recorder_init(rec, 2);
    tf_comm_peers *p;
    tf_error err = {0};
    double exchange[2 * TF_COMM_PEERS_SLOT] = {0};
    ck_assert(tf_comm_peers_open(0, 2, &p, &err) == TF_OK);
    tf_comm_peers_fill(p, exchange);
    exchange[TF_COMM_PEERS_SLOT] = (double)0x7f000001u;
    exchange[TF_COMM_PEERS_SLOT + 1] = 9; /* discard: nobody answers */
    tf_comm_rec_where(&rec->rank[0], TF_WHERE_COMM, 2, 0);
    tf_comm_rec_block(&rec->rank[0], tf_comm_rec_enter(&rec->rank[0], TF_COMM_ALLREDUCE, 16, 0, 0));
    ck_assert(tf_comm_peers_start(p, exchange, &rec->rank[0], &err) == TF_OK);
    char out[8192];
    nap(0.3);
    ck_assert(tf_comm_peers_overdue(p, mono() + 10, 5, out, sizeof out));
    ck_assert_msg(strstr(out, "rank 1 (host 127.0.0.1) is behind: last seen at step 0 setup; never heard from"), "%s", out);
    tf_comm_peers_close(p);
    free(rec);
}
END_TEST

START_TEST(test_large_job_fanout)
{
    /* 70 ranks: each beats to rank 0 and the 64 ranks after it, so rank 0
     * hears all 69 others and rank 5 hears 64 (ranks 6..10 beat past it) */
    enum { W = 70 };
    setenv("OMPI_MCA_btl_tcp_if_include", "lo", 1);
    tf_comm_recorder *rec = calloc(1, tf_comm_recorder_bytes(W));
    ck_assert_ptr_nonnull(rec);
    tf_comm_recorder_init(rec, W);
    static tf_comm_peers *p[W];
    static double exchange[W * TF_COMM_PEERS_SLOT];
    memset(exchange, 0, sizeof exchange);
    tf_error err = {0};
    for (int r = 0; r < W; r++) {
        ck_assert_msg(tf_comm_peers_open(r, W, &p[r], &err) == TF_OK, "%s", err.msg);
        tf_comm_peers_fill(p[r], exchange);
    }
    for (int r = 0; r < W; r++) { /* every rank waits in all-reduce #1 */
        tf_comm_rec_where(&rec->rank[r], TF_WHERE_COMM, 3, 0);
        tf_comm_rec_block(&rec->rank[r], tf_comm_rec_enter(&rec->rank[r], TF_COMM_ALLREDUCE, 64, 0, 0));
    }
    for (int r = 0; r < W; r++) ck_assert(tf_comm_peers_start(p[r], exchange, &rec->rank[r], &err) == TF_OK);
    nap(1.0);
    static char out[1 << 16];
    ck_assert(tf_comm_peers_overdue(p[0], mono(), 0.5, out, sizeof out));
    ck_assert_msg(strstr(out, "no rank is behind: every rank has waited"), "%.300s", out);
    ck_assert_msg(strstr(out, "\nrank 69 (host 127.0.0.1): waiting "), "%.300s", out);
    ck_assert_msg(!strstr(out, "not heard from here"), "%.300s", out);
    ck_assert(tf_comm_peers_overdue(p[5], mono(), 0.5, out, sizeof out));
    ck_assert_msg(strstr(out, "\n(5 ranks not heard from here: rank 0's report lists every rank)\n"), "%.300s", out);
    ck_assert_msg(!strstr(out, "\nrank 6 ") && strstr(out, "\nrank 11 (host 127.0.0.1): waiting "), "%.300s", out);
    for (int r = 0; r < W; r++) tf_comm_peers_close(p[r]);
    free(rec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_peers");
    TCase *tc = tcase_create("heartbeat");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_silent_peer_named);
    tcase_add_test(tc, test_never_heard);
    tcase_add_test(tc, test_large_job_fanout);
    suite_add_tcase(s, tc);
    int failed = tf_test_run(s, false);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
