/* config.c — dp-master's own keys in the `comm` section. The core reads and
 * owns plugin, world_size, bucket_mb and mpirun_args; these two are ours
 * (see README.md):
 *   force_staging = false;       testing/diagnostics: copy through the root's
 *                                staging buffer even when replicas hold host memory
 *   allreduce = "slices";        host-memory allreduce: "slices" or "reduce-broadcast"
 */
#include "dp_master.h"

static const char *const algo_names[] = {"slices", "reduce-broadcast", NULL};

tf_status dp_read_config(tf_section *section, dp_config *out, tf_error *err)
{
    out->force_staging = false;
    out->algo = DP_ALLREDUCE_SLICES;
    if (!section) return TF_OK;
    tf_status st = tf_cfg_bool(section, "force_staging", false, &out->force_staging, err);
    if (st) return st;
    const char *algo = NULL;
    st = tf_cfg_choice(section, "allreduce", algo_names[0], algo_names, &algo, err);
    if (st) return st;
    out->algo = algo[0] == 's' ? DP_ALLREDUCE_SLICES : DP_ALLREDUCE_REDUCE_BROADCAST;
    return TF_OK;
}
