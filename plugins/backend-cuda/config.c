/* config.c — the "backend" section, keys this plugin reads:
 *   device_offset          int >= 0, default 0: added to the worker's local
 *                          rank to pick the device (e.g. 2 to use GPUs 2, 3)
 *   cublaslt_workspace_mib int in [0, 1024], default 32: cuBLASLt workspace
 *                          per stream that runs GEMMs
 *   gelu_epilogue          "kernel" (default) or "cublaslt": see gemm.c
 */
#include <string.h>

#include "backend_cuda.h"
#include "tfcore/config.h"

#define CUDA_MAX_DEVICE_OFFSET 1023

tf_status cuda_read_config(tf_section *section, cuda_config *c, tf_error *err)
{
    static const char *const gelu_choices[] = {"kernel", "cublaslt", NULL};
    c->device_offset = 0;
    c->lt_ws_mib = CUDA_LT_WORKSPACE_MIB_DEFAULT;
    c->lt_gelu = false;
    if (!section) return TF_OK;
    const char *gelu = NULL;
    tf_status st;
    if ((st = tf_cfg_int(section, "device_offset", 0, 0, CUDA_MAX_DEVICE_OFFSET,
                         &c->device_offset, err)) ||
        (st = tf_cfg_int(section, "cublaslt_workspace_mib", CUDA_LT_WORKSPACE_MIB_DEFAULT, 0, 1024,
                         &c->lt_ws_mib, err)) ||
        (st = tf_cfg_choice(section, "gelu_epilogue", "kernel", gelu_choices, &gelu, err)))
        return st;
    c->lt_gelu = gelu && strcmp(gelu, "cublaslt") == 0;
    return TF_OK;
}

tf_status cuda_check_config(tf_section *section, tf_error *err)
{
    cuda_config c;
    return cuda_read_config(section, &c, err);
}
