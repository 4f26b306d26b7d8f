/* cli_launch.h — the tfcore command's part of running a job (cli_launch.c):
 * the command line worker processes re-execute and the advice for a machine
 * that cannot run the config. */
#ifndef TFCORE_CLI_LAUNCH_H
#define TFCORE_CLI_LAUNCH_H

#include "launch.h"
#include "tfcore/error.h"

/* The launcher's command for the verb's argv (argv[0] = "train" or "eval"):
 * workers re-execute this executable (/proc/self/exe) with argv, and a job
 * short of devices gets tf_cli_hint_cpu_config's advice. argv must outlive
 * the job. */
tf_launch_cmd tf_cli_launch_cmd(int argc, char **argv);

/* Append "; on this machine run conf/cpu_dp2.cfg instead" to err when a
 * config of config_file's folder runs on the CPU (cpu_*.cfg first, else
 * quickstart.cfg) and is not config_file. */
void tf_cli_hint_cpu_config(const char *config_file, tf_error *err);

#endif
