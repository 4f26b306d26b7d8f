/* stop_signal.h — an orderly stop on SIGTERM, SIGINT or SIGUSR1 (what a
 * cluster sends before preempting a job or at its time limit): the workers
 * finish the optimizer step they are in, agree on it, save a checkpoint and
 * the process exits with TF_EXIT_STOPPED. A second signal (more than a second
 * after the first: closer ones are the same request reaching the process
 * twice, from a launcher and from the cluster) ends the process at once (the checkpoint being written is a temporary folder until renamed, so
 * the last complete one stays loadable). */
#ifndef TFCORE_STOP_SIGNAL_H
#define TFCORE_STOP_SIGNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Exit status of a run stopped by a signal after saving a checkpoint:
 * EX_TEMPFAIL ("try again"): a job script requeues on it. */
#define TF_EXIT_STOPPED 75

/* Catch SIGTERM, SIGINT and SIGUSR1 in this (worker) process. */
void tf_stop_install(void);
/* The first stop signal this process got, or 0. Async-signal safe. */
int tf_stop_requested(void);
/* "SIGTERM", "SIGINT", "SIGUSR1", else "signal N" (static storage). */
const char *tf_stop_signal_name(int sig);

/* The run stopped early on a signal after saving its checkpoint: the CLI
 * exits with TF_EXIT_STOPPED. Set by the trainer (every worker) or by a
 * launcher whose workers all stopped so. */
void tf_stop_mark_stopped(void);
bool tf_stop_was_stopped(void);

/* Test hook: TFCORE_TEST_SIGNAL_AT_STEP=N makes rank 0 raise
 * TFCORE_TEST_SIGNAL (TERM, INT or USR1; default TERM) at itself during
 * optimizer step N, after its micro-batches and before the step's
 * all-reduce. */
void tf_stop_test_step(int rank, int64_t step);
/* Test hook, the same pinned to a phase: with TFCORE_TEST_SIGNAL_PHASE =
 * forward | backward | allreduce | optimizer | eval as well, rank 0 raises
 * the signal when it enters that phase of step TFCORE_TEST_SIGNAL_AT_STEP
 * (the first micro-batch's forward or backward; allreduce: after the
 * micro-batches, with the gradient buckets in flight; eval: the evaluation
 * after that step) instead of at tf_stop_test_step's point. */
void tf_stop_test_phase(int rank, int64_t step, const char *phase);
/* Test hook: with TFCORE_TEST_SIGNAL_IN_SAVE=1, a process that is stopping
 * raises its stop signal again while writing the stop's checkpoint (the
 * model is written into checkpoint-N.tmp, the folder is not in place yet). */
void tf_stop_test_in_save(void);

#endif
