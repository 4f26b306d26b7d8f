/* launch.h — starting the workers of a training job.
 *
 * One command runs every experiment (`tfcore -c conf/X.cfg`); what it starts
 * depends on the comm plugin's launch mode and on who started tfcore:
 *   no comm section            this process is the only worker
 *   TF_LAUNCH_THREADS          worker threads in this process (dp-master)
 *   TF_LAUNCH_PROCESSES        tfcore re-executes itself once per worker (as
 *                              torchrun does) and watches them (nccl)
 *   TF_LAUNCH_EXTERNAL         under mpirun/srun: this process is the rank the
 *                              environment names; otherwise tfcore re-executes
 *                              itself under mpirun with comm.world_size ranks (mpi)
 * A worker that fails or dies stops the whole job: the others are told
 * (comm abort) or terminated, and the exit status and one line name the rank
 * and the cause. */
#ifndef TFCORE_LAUNCH_H
#define TFCORE_LAUNCH_H

#include "plan.h"

/* What the caller (the CLI) decides for the launcher: the program and command
 * line each worker process runs, and the advice added to an error. */
typedef struct tf_launch_cmd {
    /* The program a worker process executes, into out[n] (the tfcore CLI:
     * its own executable); asked only when workers are started as processes
     * (comm nccl) or under mpirun (comm mpi). */
    tf_status (*program)(char *out, size_t n, tf_error *err);
    /* Its arguments: the verb's command line (argv[0] = "train" or "eval"). */
    int argc;
    char **argv;
    /* Appends advice to err, the error of a job that needs more devices than
     * this machine has (the CLI: a config of config_file's folder that runs on
     * the CPU); NULL for none. */
    void (*short_of_devices)(const char *config_file, tf_error *err);
} tf_launch_cmd;

/* Run the job, starting worker processes with cmd. On failure err says which
 * rank failed and why; err->msg is left empty when that line was already
 * printed (by a worker that printed its own error before stopping the job).
 * The workers' process catches SIGTERM, SIGINT and SIGUSR1 (stop_signal.h); a
 * launcher process passes them on to its workers. A run stopped so returns
 * TF_OK with tf_stop_was_stopped() true. */
tf_status tf_launch_train(const tf_plan *plan, const tf_launch_cmd *cmd, tf_error *err);

/* Whether the backend has a device for each worker this job starts on this
 * machine (a backend without a device_count slot, or backend-cpu, always
 * has; ranks mpirun places on other hosts are not counted); else one line
 * naming the config and the counts, with cmd's short_of_devices advice (cmd
 * may be NULL). */
tf_status tf_launch_check_devices(const tf_plan *plan, const tf_launch_cmd *cmd, tf_error *err);

#endif
