/* mpi_config.c — the comm-mpi keys of the `comm` section, as one table
 * (tfcore/config_keys.h; README.md's key section is generated from it). The
 * core owns and reads plugin, world_size, bucket_mb, zero_stage, mpirun_args
 * and timeout_s: they are not in the table, and this plugin never reads them
 * (timeout_s comes in tf_comm_init_args). */
#include <limits.h>

#include "comm_mpi.h"
#include "tfcore/config_keys.h"

static const char *const device_buffer_choices[] = {"auto", "cuda-aware", "staged", NULL};

static const tf_cfg_key keys[] = {
    {"device_buffers", TF_CFG_KEY_CHOICE, .string_def = "auto", .choices = device_buffer_choices,
     .doc = "how device memory reaches MPI: by the rule of \"Buffers\" (auto), as device pointers (cuda-aware: init fails "
            "where the library is not), or through pinned host buffers (staged, even for host memory)"},
    {"progress_thread", TF_CFG_KEY_BOOL, .bool_def = true,
     .doc = "run a thread that moves reductions forward while backward computes (see Progress)"},
    {"progress_interval_us", TF_CFG_KEY_INT, .int_def = 50, .int_min = 1, .int_max = 1000000,
     .doc = "how long, in µs, the progress thread sleeps between two rounds of `MPI_Testall`"},
    /* MPI counts are int: a buffer longer than this goes as several calls. */
    {"chunk_elements", TF_CFG_KEY_INT, .int_def = INT_MAX, .int_min = 1, .int_max = INT_MAX,
     .doc = "the most elements one MPI call gets (MPI counts are `int`); a longer buffer is split into several calls"},
    {0},
};
TF_PLUGIN_KEYS(keys);

tf_status cm_read_options(tf_section *section, cm_options *opt, tf_error *err)
{
    tf_status st;
    if ((st = tf_cfg_key_string(section, keys, "device_buffers", &opt->device_buffers, err)))
        return st;
    if ((st = tf_cfg_key_bool(section, keys, "progress_thread", &opt->progress_thread, err)))
        return st;
    if ((st = tf_cfg_key_int(section, keys, "progress_interval_us", &opt->progress_interval_us, err)))
        return st;
    if ((st = tf_cfg_key_int(section, keys, "chunk_elements", &opt->chunk_elements, err)))
        return st;
    return TF_OK;
}
