/* config.c — dp-master's own keys in the `comm` section, as one table
 * (tfcore/config_keys.h; README.md's key section is generated from it). The
 * core reads and owns plugin, world_size, bucket_mb, zero_stage, mpirun_args and
 * timeout_s: they are not in the table and this plugin does not read them. */
#include "dp_master.h"
#include "tfcore/config_keys.h"

static const char *const algo_names[] = {"slices", "reduce-broadcast", NULL};

static const tf_cfg_key keys[] = {
    {"force_staging", TF_CFG_KEY_BOOL, .bool_def = false,
     .doc = "testing/diagnostics: take the device-memory path (staging buffer, device-to-device copies) even when "
            "the replicas hold host memory; used by the tests to run the GPU path on backend-cpu"},
    {"allreduce", TF_CFG_KEY_CHOICE, .string_def = "slices", .choices = algo_names,
     .doc = "the host-memory allreduce algorithm (see \"What each call does\"); device memory always uses reduce + "
            "broadcast"},
    {0},
};
TF_PLUGIN_KEYS(keys);

tf_status dp_read_config(tf_section *section, dp_config *out, tf_error *err)
{
    out->force_staging = false;
    out->algo = DP_ALLREDUCE_SLICES;
    if (!section) return TF_OK;
    tf_status st = tf_cfg_key_bool(section, keys, "force_staging", &out->force_staging, err);
    if (st) return st;
    const char *algo = NULL;
    st = tf_cfg_key_string(section, keys, "allreduce", &algo, err);
    if (st) return st;
    out->algo = algo[0] == 's' ? DP_ALLREDUCE_SLICES : DP_ALLREDUCE_REDUCE_BROADCAST;
    return TF_OK;
}
