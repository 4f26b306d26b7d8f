/* test_pipeline.c — the pure parts of pipeline parallelism (pipeline.h):
 * the GPipe and 1F1B schedules (every micro-batch forward then backward on
 * every stage, in the documented order), their simulation (no deadlock, the
 * bubble (S-1)/(M+S-1) with equal stages, 1F1B's bounded activations), the
 * balanced split of the layers, and the pipeline section's checks.
 * tests/test_pipeline_mpi.sh runs pipelines end to end. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "training_args.h"

static void check_schedule(tf_pipeline_schedule_kind kind, int S, int M)
{
    for (int s = 0; s < S; s++) {
        tf_pipe_op ops[2 * 64];
        tf_pipeline_schedule(kind, s, S, M, ops);
        int fwd_at[64], bwd_at[64], live = 0, peak = 0;
        for (int j = 0; j < M; j++) fwd_at[j] = bwd_at[j] = -1;
        for (int i = 0; i < 2 * M; i++) {
            ck_assert_int_ge(ops[i].micro, 0);
            ck_assert_int_lt(ops[i].micro, M);
            int *at = ops[i].kind == TF_PIPE_FORWARD ? fwd_at : bwd_at;
            ck_assert_msg(at[ops[i].micro] < 0, "stage %d runs op %d twice", s, i);
            at[ops[i].micro] = i;
            live += ops[i].kind == TF_PIPE_FORWARD ? 1 : -1;
            if (live > peak) peak = live;
        }
        for (int j = 0; j < M; j++) {
            ck_assert_msg(fwd_at[j] >= 0 && bwd_at[j] > fwd_at[j], "%s S=%d M=%d stage %d micro %d",
                          tf_pipeline_schedule_name(kind), S, M, s, j);
            if (j) ck_assert_int_lt(fwd_at[j - 1], fwd_at[j]); /* forwards in order on every stage */
        }
        if (kind == TF_PIPE_GPIPE) {
            ck_assert_int_eq(peak, M);
        } else {
            ck_assert_int_eq(peak, S - s < M ? S - s : M); /* 1F1B: at most S - stage in flight */
            for (int j = 1; j < M; j++) ck_assert_int_lt(bwd_at[j - 1], bwd_at[j]);
        }
    }
}

START_TEST(schedules)
{
    for (int k = 0; k < 2; k++)
        for (int S = 1; S <= 8; S++)
            for (int M = 1; M <= 16; M++) check_schedule((tf_pipeline_schedule_kind)k, S, M);
    /* the orders themselves, for 4 stages x 4 micro-batches */
    tf_pipe_op ops[8];
    tf_pipeline_schedule(TF_PIPE_1F1B, 1, 4, 4, ops); /* 2 warm-up forwards, then F/B pairs */
    const int kinds[8] = {0, 0, 0, 1, 0, 1, 1, 1}, micro[8] = {0, 1, 2, 0, 3, 1, 2, 3};
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(ops[i].kind, kinds[i]);
        ck_assert_int_eq(ops[i].micro, micro[i]);
    }
    tf_pipeline_schedule(TF_PIPE_GPIPE, 3, 4, 4, ops);
    const int gm[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(ops[i].micro, gm[i]);
}
END_TEST

START_TEST(simulation_bubble)
{
    tf_error err = {0};
    for (int k = 0; k < 2; k++)
        for (int S = 1; S <= 8; S++)
            for (int M = 1; M <= 32; M *= 2) {
                tf_pipeline_sim sim;
                /* a backward costs twice a forward, as in BERT */
                ck_assert_msg(tf_pipeline_simulate((tf_pipeline_schedule_kind)k, S, M, 1.0, 2.0, &sim, &err) == TF_OK,
                              "%s", err.msg);
                ck_assert_msg(fabs(sim.makespan - 3.0 * (M + S - 1)) < 1e-9, "%s S=%d M=%d: makespan %g",
                              tf_pipeline_schedule_name((tf_pipeline_schedule_kind)k), S, M, sim.makespan);
                ck_assert(fabs(sim.bubble - tf_pipeline_bubble(S, M)) < 1e-12);
                ck_assert_int_eq(sim.peak_in_flight, k == TF_PIPE_GPIPE ? M : (S < M ? S : M));
            }
    ck_assert(fabs(tf_pipeline_bubble(4, 4) - 3.0 / 7.0) < 1e-15);
    ck_assert(tf_pipeline_bubble(1, 8) == 0);
    tf_pipeline_sim sim;
    ck_assert_int_eq(tf_pipeline_simulate(TF_PIPE_GPIPE, 0, 4, 1, 2, &sim, &err), TF_ERR_CONFIG);
}
END_TEST

START_TEST(partition)
{
    tf_error err = {0};
    int first[9];
    /* BERT-like: the embeddings (layer 0) and head (last) make their stages heavier */
    size_t cost[12];
    for (int l = 0; l < 12; l++) cost[l] = 7;
    cost[0] += 24; /* embeddings worth 3.4 layers */
    ck_assert_int_eq(tf_pipeline_partition(cost, 12, 2, first, &err), TF_OK);
    ck_assert_int_eq(first[0], 0);
    ck_assert_int_eq(first[2], 12);
    ck_assert_int_eq(first[1], 4); /* [0,4) = 52, [4,12) = 56: the best cut */
    ck_assert_int_eq(tf_pipeline_partition(cost, 12, 4, first, &err), TF_OK);
    /* the embeddings' stage alone (31) is the largest any split can have */
    size_t worst = 0;
    for (int k = 0; k < 4; k++) {
        size_t c = 0;
        for (int l = first[k]; l < first[k + 1]; l++) c += cost[l];
        ck_assert_int_gt(first[k + 1], first[k]);
        if (c > worst) worst = c;
    }
    ck_assert_uint_eq(worst, 31);
    ck_assert(first[0] == 0 && first[1] == 1 && first[4] == 12);
    /* equal layers: equal stages */
    for (int l = 0; l < 12; l++) cost[l] = 5;
    ck_assert_int_eq(tf_pipeline_partition(cost, 12, 3, first, &err), TF_OK);
    ck_assert(first[1] == 4 && first[2] == 8 && first[3] == 12);
    ck_assert_int_eq(tf_pipeline_partition(cost, 2, 3, first, &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "every stage needs at least one"), "%s", err.msg);
}
END_TEST

static tf_status read_text(const char *text, bool comm, int world, long long accum, tf_pipeline_settings *out,
                           tf_error *err)
{
    tf_config *cfg;
    ck_assert_int_eq(tf_config_load_string(&cfg, text, "p.cfg", NULL, err), TF_OK);
    tf_training_args a = {0};
    a.per_device_train_batch_size = 8;
    a.gradient_accumulation_steps = accum;
    tf_status st = tf_pipeline_settings_read(cfg, comm, world, &a, out, err);
    tf_config_free(cfg);
    return st;
}

START_TEST(settings)
{
    tf_error err = {0};
    tf_pipeline_settings p;
    ck_assert_int_eq(read_text("training = {};", false, 1, 1, &p, &err), TF_OK);
    ck_assert_int_eq(p.stages, 1);
    ck_assert_int_eq(read_text("pipeline = { stages = 4; };", true, 4, 1, &p, &err), TF_OK);
    ck_assert(p.stages == 4 && p.micro_batches == 4 && p.schedule == TF_PIPE_1F1B && p.layers[0] == 0);
    ck_assert_int_eq(read_text("pipeline = { stages = 2; };", true, 6, 1, &p, &err), TF_OK); /* 3 replicas */
    ck_assert_int_eq(read_text("pipeline = { stages = 2; micro_batches = 8; schedule = \"gpipe\"; layers = [5, 7]; };",
                               true, 2, 1, &p, &err),
                     TF_OK);
    ck_assert(p.micro_batches == 8 && p.schedule == TF_PIPE_GPIPE && p.layers[0] == 5 && p.layers[1] == 7);
    struct {
        const char *text;
        bool comm;
        int world;
        long long accum;
        const char *says;
    } bad[] = {
        {"pipeline = { micro_batches = 2; };", true, 2, 1, "missing required key"},
        {"pipeline = { stages = 1; };", true, 1, 1, "stages"},
        {"pipeline = { stages = 2; schedule = \"zigzag\"; };", true, 2, 1, "must be one of 1f1b, gpipe"},
        {"pipeline = { stages = 2; layers = [3]; };", true, 2, 1, "has 1 entries"},
        {"pipeline = { stages = 2; layers = [3, 0]; };", true, 2, 1, "pipeline.layers[1] = 0"},
        {"pipeline = { stages = 2; };", false, 1, 1, "no comm section"},
        {"pipeline = { stages = 2; };", true, 3, 1, "world_size is a multiple of 2"},
        {"pipeline = { stages = 2; micro_batches = 2; };", true, 2, 4, "below training.gradient_accumulation_steps"},
        {"pipeline = { stages = 2; micro_batches = 0; };", true, 2, 1, "micro_batches"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tf_status st = read_text(bad[i].text, bad[i].comm, bad[i].world, bad[i].accum, &p, &err);
        ck_assert_msg(st == TF_ERR_CONFIG && strstr(err.msg, bad[i].says), "%s: %d %s", bad[i].text, st, err.msg);
        ck_assert_msg(!strchr(err.msg, '\n'), "%s", err.msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *c = tcase_create("pure");
    tcase_add_test(c, schedules);
    tcase_add_test(c, simulation_bubble);
    tcase_add_test(c, partition);
    tcase_add_test(c, settings);
    suite_add_tcase(s, c);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
