/* mpi_config.c — the comm-mpi keys of the `comm` section. The core owns and
 * reads plugin, world_size, bucket_mb and mpirun_args; this file reads only
 * the keys below, and timeout_s, which the core validates and this plugin
 * applies to its own waits (README.md documents each). */
#include <limits.h>

#include "comm_mpi.h"

static const char *const device_buffer_choices[] = {"auto", "cuda-aware", "staged", NULL};

tf_status cm_read_options(tf_section *section, cm_options *opt, tf_error *err)
{
    tf_status st;
    if ((st = tf_cfg_choice(section, "device_buffers", "auto", device_buffer_choices,
                            &opt->device_buffers, err)))
        return st;
    if ((st = tf_cfg_bool(section, "progress_thread", true, &opt->progress_thread, err)))
        return st;
    if ((st = tf_cfg_int(section, "progress_interval_us", 50, 1, 1000000,
                         &opt->progress_interval_us, err)))
        return st;
    /* the core's key (tfcore/comm.h), read here too: this plugin waits in its own loops */
    if ((st = tf_cfg_float(section, "timeout_s", TF_COMM_TIMEOUT_DEFAULT, TF_COMM_TIMEOUT_MIN,
                           TF_COMM_TIMEOUT_MAX, &opt->timeout_s, err)))
        return st;
    /* MPI counts are int: a buffer longer than this goes as several calls. */
    if ((st = tf_cfg_int(section, "chunk_elements", INT_MAX, 1, INT_MAX, &opt->chunk_elements,
                         err)))
        return st;
    return TF_OK;
}
