/* test_pipeline_nccl_groups.c — the pipeline's messages under NCCL's
 * point-to-point rules, as comm-nccl issues them (plugins/comm-nccl/
 * nccl_p2p.c, README.md "Point to point"), for every schedule of 2 to 8
 * stages and 1 to 16 micro-batches: no deadlock.
 *
 * The model. Each stage runs trainer_pipeline.c's order of calls for its
 * schedule (tf_pipeline_schedule): a forward receives its activation from
 * the stage before and waits for it, then sends its output to the stage
 * after; a backward receives its gradient from the stage after and waits,
 * then sends its input's gradient back; the step ends waiting for its
 * sends. comm-nccl holds sends and receives until a wait, then issues all
 * held ones as one group, and the host waits until the whole group is done
 * (at most one group of a rank in flight). A call completes when its
 * partner (the k-th message of that pair and direction) is in the peer's
 * group in flight and the pair's message k-1 is done (NCCL's order within a
 * group). A deadlock is a state where no rank can move.
 *
 * The same model with every call issued alone (no groups) must deadlock for
 * 1F1B, which is why comm-nccl groups: the check is able to fail. */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "pipeline.h"

enum { MAX_S = 8, MAX_M = 16, MAX_EV = 4 * MAX_M + 1 };

typedef struct call {
    bool send;
    int src, dst, n; /* the n-th message from src to dst (1-based) */
} call;

typedef struct rank_state {
    call ev[MAX_EV];   /* the program: sends and receives (a receive is waited for at once); then the end */
    int nev, pc;
    call held[MAX_EV], group[MAX_EV];
    bool group_done[MAX_EV];
    int nheld, ngroup; /* ngroup > 0: a group in flight, the host waits */
    bool finished;
} rank_state;

static void program(tf_pipeline_schedule_kind kind, int s, int S, int M, rank_state *r, int snd[MAX_S][MAX_S],
                    int rcv[MAX_S][MAX_S])
{
    tf_pipe_op ops[2 * MAX_M];
    tf_pipeline_schedule(kind, s, S, M, ops);
    r->nev = 0;
    for (int i = 0; i < 2 * M; i++) {
        bool fwd = ops[i].kind == TF_PIPE_FORWARD;
        int from = fwd ? s - 1 : s + 1, to = fwd ? s + 1 : s - 1;
        if (from >= 0 && from < S) r->ev[r->nev++] = (call){false, from, s, 0};
        if (to >= 0 && to < S) r->ev[r->nev++] = (call){true, s, to, 0};
    }
    /* number each pair's messages in program order: the receiver's k-th from a
     * rank meets that rank's k-th send to it */
    for (int i = 0; i < r->nev; i++) {
        call *c = &r->ev[i];
        c->n = c->send ? ++snd[c->src][c->dst] : ++rcv[c->src][c->dst];
    }
}

/* Issue every held call as one group (the host then waits for all of it). */
static void issue(rank_state *r)
{
    memcpy(r->group, r->held, sizeof(call) * (size_t)r->nheld);
    memset(r->group_done, 0, sizeof r->group_done);
    r->ngroup = r->nheld;
    r->nheld = 0;
}

/* Run the S programs; grouped: comm-nccl's held groups, else every call
 * issued alone as soon as it is made. True when every rank finished. */
static bool run(tf_pipeline_schedule_kind kind, int S, int M, bool grouped)
{
    static rank_state st[MAX_S];
    int snd[MAX_S][MAX_S], rcv[MAX_S][MAX_S], done[MAX_S][MAX_S]; /* per pair src -> dst */
    memset(st, 0, sizeof st);
    memset(snd, 0, sizeof snd);
    memset(rcv, 0, sizeof rcv);
    memset(done, 0, sizeof done);
    for (int s = 0; s < S; s++) program(kind, s, S, M, &st[s], snd, rcv);
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++) ck_assert_int_eq(snd[a][b], rcv[a][b]); /* every message has a receiver */
    for (;;) {
        bool moved = false;
        for (int s = 0; s < S; s++) {
            rank_state *r = &st[s];
            if (r->finished || r->ngroup) continue;
            if (r->pc == r->nev) { /* the step's end: wait for what is held */
                if (r->nheld) issue(r);
                else r->finished = true;
                moved = true;
                continue;
            }
            call c = r->ev[r->pc++];
            moved = true;
            r->held[r->nheld++] = c;
            /* a wait issues what is held; ungrouped, every call goes alone at once */
            if (!grouped || !c.send) issue(r);
        }
        /* match the calls of the groups in flight */
        for (int s = 0; s < S; s++) {
            rank_state *r = &st[s];
            for (int i = 0; i < r->ngroup; i++) {
                call c = r->group[i];
                if (r->group_done[i] || !c.send || done[c.src][c.dst] != c.n - 1) continue;
                rank_state *p = &st[c.dst];
                for (int k = 0; k < p->ngroup; k++) {
                    call o = p->group[k];
                    if (!p->group_done[k] && !o.send && o.src == c.src && o.n == c.n) {
                        r->group_done[i] = p->group_done[k] = true;
                        done[c.src][c.dst] = c.n;
                        moved = true;
                        break;
                    }
                }
            }
        }
        bool all = true;
        for (int s = 0; s < S; s++) {
            rank_state *r = &st[s];
            bool group_done = r->ngroup > 0;
            for (int i = 0; i < r->ngroup; i++) group_done = group_done && r->group_done[i];
            if (group_done) {
                r->ngroup = 0;
                moved = true;
            }
            all = all && r->finished;
        }
        if (all) return true;
        if (!moved) return false;
    }
}

START_TEST(test_grouped_never_deadlocks)
{
    for (int k = 0; k < 2; k++) {
        tf_pipeline_schedule_kind kind = k ? TF_PIPE_1F1B : TF_PIPE_GPIPE;
        for (int S = 2; S <= MAX_S; S++)
            for (int M = 1; M <= MAX_M; M++)
                ck_assert_msg(run(kind, S, M, true), "%s, %d stages x %d micro-batches deadlock in NCCL groups",
                              tf_pipeline_schedule_name(kind), S, M);
    }
}
END_TEST

/* The model can fail: calls issued alone deadlock 1F1B (GPipe survives). */
START_TEST(test_lone_calls_deadlock_1f1b)
{
    ck_assert(!run(TF_PIPE_1F1B, 2, 4, false));
    ck_assert(!run(TF_PIPE_1F1B, 4, 8, false));
    ck_assert(run(TF_PIPE_GPIPE, 2, 4, false));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline-nccl-groups");
    TCase *tc = tcase_create("schedules");
    tcase_add_test(tc, test_grouped_never_deadlocks);
    tcase_add_test(tc, test_lone_calls_deadlock_1f1b);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
