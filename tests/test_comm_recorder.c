/* test_comm_recorder.c — the collectives' flight recorder (comm_recorder.h):
 * what the rank side records, and the report of an overdue collective that
 * names the rank(s) behind (tests/test_comm_timeout.sh runs it end to end). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_recorder.h"
#include "common.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tf_comm_recorder *make(int world)
{
    tf_comm_recorder *r = calloc(1, tf_comm_recorder_bytes(world));
    ck_assert_ptr_nonnull(r);
    tf_comm_recorder_init(r, world);
    return r;
}

/* Step 17's last backward: every rank started buckets 1..3 of 5; ranks
 * other than `late` also started 4 and 5 and wait for bucket 1 (#1). */
static void step17(tf_comm_recorder *r, int late)
{
    for (int k = 0; k < r->world; k++) {
        tf_comm_rank_log *l = &r->rank[k];
        tf_comm_rec_where(l, TF_WHERE_FORWARD, 17, 1);
        tf_comm_rec_phase(l, TF_WHERE_BACKWARD);
        int n = k == late ? 3 : 5;
        for (int b = 1; b <= n; b++) tf_comm_rec_enter(l, TF_COMM_ALLREDUCE, 4u << 20, b, 5);
        if (k != late) {
            tf_comm_rec_where(l, TF_WHERE_COMM, 17, 0);
            tf_comm_rec_block(l, 1);
        }
    }
}

START_TEST(test_rank_behind)
{
    tf_comm_recorder *r = make(4);
    step17(r, 1);
    char out[4096];
    double now = mono();
    ck_assert(!tf_comm_recorder_overdue(r, now + 10, 600, out, sizeof out));
    ck_assert(tf_comm_recorder_oldest(r, now + 10) >= 10);
    ck_assert(tf_comm_recorder_overdue(r, now + 700, 600, out, sizeof out));
    ck_assert_msg(strstr(out, "collective timeout (comm.timeout_s = 600): rank 1 is behind: last seen at step 17 "
                              "backward (micro-batch 1, bucket 3 of 5); ranks 0,2,3 waiting 700 s in all-reduce #1\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "\nrank 0: waiting 700 s in all-reduce #1 (step 17, micro-batch 1, bucket 1 of 5, 4.0 MB)\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "\nrank 1 is behind: last seen at step 17 backward (micro-batch 1, bucket 3 of 5) 700 s "
                              "ago; its last collective: all-reduce #3, in flight\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "\nrank 3: waiting 700 s in all-reduce #1"), "%s", out);
    free(r);
}
END_TEST

/* Every rank blocked in the same collective, but one process does not beat. */
START_TEST(test_stopped_process)
{
    tf_comm_recorder *r = make(2);
    step17(r, -1);
    double now = mono();
    r->rank[0].heartbeat = now + 5; /* beating */
    r->rank[1].heartbeat = now - 10; /* silent for 15 s at now + 5 */
    char out[4096];
    ck_assert(tf_comm_recorder_overdue(r, now + 5, 5, out, sizeof out));
    ck_assert_msg(strstr(out, "rank 1 is behind: last seen at step 17 communication, its process not running "
                              "(stopped?); rank 0 waiting 5 s in all-reduce #1\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "its process has not run for 15 s (stopped?); inside all-reduce #1"), "%s", out);
    /* both beating: nobody is behind, the transport is stuck */
    r->rank[1].heartbeat = now + 5;
    ck_assert(tf_comm_recorder_overdue(r, now + 5, 5, out, sizeof out));
    ck_assert_msg(strstr(out, "no rank is behind: every rank has waited 5 s or more in all-reduce #1"), "%s", out);
    free(r);
}
END_TEST

/* A pipeline (ABI 1.4 send / recv): stage 1 waits to receive micro-batch
 * 2's activations while stage 0 is still in its forward; the report names
 * the receive and the stage behind. */
START_TEST(test_pipeline_recv)
{
    tf_comm_recorder *r = make(2);
    tf_comm_rank_log *s0 = &r->rank[0], *s1 = &r->rank[1];
    tf_comm_rec_where(s0, TF_WHERE_FORWARD, 5, 1);
    uint64_t a = tf_comm_rec_enter(s0, TF_COMM_SEND, 1u << 20, 0, 0);
    tf_comm_rec_where(s0, TF_WHERE_FORWARD, 5, 2); /* computing micro-batch 2, its send not yet started */
    tf_comm_rec_where(s1, TF_WHERE_FORWARD, 5, 1);
    uint64_t b = tf_comm_rec_enter(s1, TF_COMM_RECV, 1u << 20, 0, 0);
    tf_comm_rec_exit(s1, b);
    tf_comm_rec_where(s1, TF_WHERE_FORWARD, 5, 2);
    uint64_t c = tf_comm_rec_enter(s1, TF_COMM_RECV, 1u << 20, 0, 0);
    tf_comm_rec_block(s1, c);
    (void)a;
    char out[4096];
    double now = mono();
    ck_assert(tf_comm_recorder_overdue(r, now + 700, 600, out, sizeof out));
    ck_assert_msg(strstr(out, "rank 0 is behind: last seen at step 5 forward (micro-batch 2)"), "%s", out);
    ck_assert_msg(strstr(out, "rank 1: waiting 700 s in recv #2 (step 5, micro-batch 2, 1.0 MB)"), "%s", out);
    ck_assert_str_eq(tf_comm_kind_name(TF_COMM_SEND), "send");
    ck_assert_str_eq(tf_comm_kind_name(TF_COMM_RECV), "recv");
    free(r);
}
END_TEST

START_TEST(test_exit_and_layout)
{
    tf_comm_recorder *r = make(2);
    ck_assert(tf_comm_recorder_valid(r, tf_comm_recorder_bytes(2), 2));
    ck_assert(!tf_comm_recorder_valid(r, tf_comm_recorder_bytes(2), 3));
    ck_assert(!tf_comm_recorder_valid(r, tf_comm_recorder_bytes(1), 2));
    tf_comm_rank_log *l = &r->rank[0];
    /* more collectives than the ring holds: the last ones are kept */
    for (int i = 0; i < 3 * TF_COMM_RECORDER_DEPTH; i++) {
        uint64_t seq = tf_comm_rec_enter(l, TF_COMM_BROADCAST, 8, 0, 0);
        ck_assert_uint_eq(seq, (uint64_t)i + 1);
        tf_comm_rec_block(l, seq);
        tf_comm_rec_exit(l, seq);
        tf_comm_rec_block(l, 0);
    }
    ck_assert_uint_eq(l->entered, 3 * TF_COMM_RECORDER_DEPTH);
    ck_assert(tf_comm_recorder_oldest(r, mono() + 1000) == 0);
    char line[512];
    tf_comm_recorder_rank_line(r, 0, mono(), line, sizeof line);
    ck_assert_msg(strstr(line, "its last collective: broadcast #192, done"), "%s", line);
    /* a NULL log records nothing and does not crash */
    ck_assert_uint_eq(tf_comm_rec_enter(NULL, TF_COMM_BARRIER, 0, 0, 0), 0);
    tf_comm_rec_exit(NULL, 1);
    tf_comm_rec_block(NULL, 1);
    tf_comm_rec_where(NULL, TF_WHERE_DONE, 0, 0);
    free(r);
}
END_TEST

START_TEST(test_heartbeat)
{
    tf_comm_recorder *r = make(1);
    tf_comm_heartbeat *h = tf_comm_heartbeat_start(&r->rank[0]);
    ck_assert_ptr_nonnull(h);
    /* the beat thread stores it while this one reads: atomically, as the
     * recorder's readers do */
    double first, later;
    __atomic_load(&r->rank[0].heartbeat, &first, __ATOMIC_RELAXED);
    ck_assert(first > 0);
    struct timespec nap = {0, 600 * 1000 * 1000};
    nanosleep(&nap, NULL);
    __atomic_load(&r->rank[0].heartbeat, &later, __ATOMIC_RELAXED);
    ck_assert(later > first);
    tf_comm_heartbeat_stop(h);
    ck_assert(r->rank[0].heartbeat == 0);
    free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_recorder");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rank_behind);
    tcase_add_test(tc, test_stopped_process);
    tcase_add_test(tc, test_pipeline_recv);
    tcase_add_test(tc, test_exit_and_layout);
    tcase_add_test(tc, test_heartbeat);
    suite_add_tcase(s, tc);
    int failed = tf_test_run(s, false);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
