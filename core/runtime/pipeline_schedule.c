/* pipeline_schedule.c — the order a pipeline stage runs its micro-batches'
 * forwards and backwards (GPipe, 1F1B), the expected bubble, and a
 * simulation of the stages running their schedules against each other
 * (pipeline.h). No I/O, no state: tests/test_pipeline.c checks them. */
#include <stdlib.h>

#include "pipeline.h"

const char *tf_pipeline_schedule_name(tf_pipeline_schedule_kind kind)
{
    return kind == TF_PIPE_GPIPE ? "gpipe" : "1f1b";
}

void tf_pipeline_schedule(tf_pipeline_schedule_kind kind, int stage, int stages, int micro, tf_pipe_op *ops)
{
    int n = 0;
    if (kind == TF_PIPE_GPIPE) {
        for (int j = 0; j < micro; j++) ops[n++] = (tf_pipe_op){TF_PIPE_FORWARD, j};
        for (int j = micro - 1; j >= 0; j--) ops[n++] = (tf_pipe_op){TF_PIPE_BACKWARD, j};
        return;
    }
    int warm = stages - 1 - stage;
    if (warm > micro) warm = micro;
    int f = 0, b = 0;
    for (; f < warm; f++) ops[n++] = (tf_pipe_op){TF_PIPE_FORWARD, f};
    for (; f < micro; f++, b++) {
        ops[n++] = (tf_pipe_op){TF_PIPE_FORWARD, f};
        ops[n++] = (tf_pipe_op){TF_PIPE_BACKWARD, b};
    }
    for (; b < micro; b++) ops[n++] = (tf_pipe_op){TF_PIPE_BACKWARD, b};
}

double tf_pipeline_bubble(int stages, int micro)
{
    return (double)(stages - 1) / (double)(micro + stages - 1);
}

tf_status tf_pipeline_simulate(tf_pipeline_schedule_kind kind, int stages, int micro, double t_fwd, double t_bwd,
                               tf_pipeline_sim *out, tf_error *err)
{
    if (stages < 1 || micro < 1 || stages > TF_PIPELINE_MAX_STAGES || micro > TF_PIPELINE_MAX_MICRO)
        return tf_error_set(err, TF_ERR_CONFIG, "pipeline simulation: %d stages x %d micro-batches is out of range",
                            stages, micro);
    size_t S = (size_t)stages, M = (size_t)micro;
    tf_pipe_op *ops = malloc(S * 2 * M * sizeof *ops);
    /* done[kind][s][j]: when op (kind, j) finished on stage s, < 0 not yet */
    double *done = malloc(2 * S * M * sizeof *done);
    int *next = calloc(S, sizeof *next);
    double *clock = calloc(S, sizeof *clock);
    int *live = calloc(S, sizeof *live);
    tf_status st = TF_OK;
    if (!ops || !done || !next || !clock || !live) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory simulating a pipeline");
        goto out;
    }
    for (size_t i = 0; i < 2 * S * M; i++) done[i] = -1;
#define DONE(k, s, j) done[((size_t)(k) * S + (size_t)(s)) * M + (size_t)(j)]
    for (int s = 0; s < stages; s++) tf_pipeline_schedule(kind, s, stages, micro, ops + (size_t)s * 2 * M);
    int peak = 0;
    size_t left = 2 * S * M;
    while (left) {
        bool moved = false;
        for (int s = 0; s < stages; s++) {
            if ((size_t)next[s] == 2 * M) continue;
            tf_pipe_op op = ops[(size_t)s * 2 * M + (size_t)next[s]];
            /* what the op waits for: the previous stage's forward, or the next stage's backward */
            double ready = clock[s];
            if (op.kind == TF_PIPE_FORWARD && s > 0) {
                if (DONE(TF_PIPE_FORWARD, s - 1, op.micro) < 0) continue;
                if (DONE(TF_PIPE_FORWARD, s - 1, op.micro) > ready) ready = DONE(TF_PIPE_FORWARD, s - 1, op.micro);
            }
            if (op.kind == TF_PIPE_BACKWARD) {
                if (DONE(TF_PIPE_FORWARD, s, op.micro) < 0) continue; /* a schedule error: caught below */
                if (s + 1 < stages) {
                    if (DONE(TF_PIPE_BACKWARD, s + 1, op.micro) < 0) continue;
                    if (DONE(TF_PIPE_BACKWARD, s + 1, op.micro) > ready)
                        ready = DONE(TF_PIPE_BACKWARD, s + 1, op.micro);
                }
            }
            clock[s] = ready + (op.kind == TF_PIPE_FORWARD ? t_fwd : t_bwd);
            DONE(op.kind, s, op.micro) = clock[s];
            live[s] += op.kind == TF_PIPE_FORWARD ? 1 : -1;
            if (live[s] > peak) peak = live[s];
            next[s]++;
            left--;
            moved = true;
        }
        if (!moved) {
            st = tf_error_set(err, TF_ERR_RUNTIME,
                              "pipeline simulation: the %s schedules of %d stages x %d micro-batches deadlock",
                              tf_pipeline_schedule_name(kind), stages, micro);
            goto out;
        }
    }
#undef DONE
    double makespan = 0;
    for (int s = 0; s < stages; s++)
        if (clock[s] > makespan) makespan = clock[s];
    out->makespan = makespan;
    out->bubble = makespan > 0 ? 1.0 - (double)micro * (t_fwd + t_bwd) / makespan : 0;
    out->peak_in_flight = peak;
out:
    free(ops);
    free(done);
    free(next);
    free(clock);
    free(live);
    return st;
}
