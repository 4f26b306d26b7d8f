/* config.c — the "backend" section: the keys this plugin reads, as one table
 * (tfcore/config_keys.h; README.md's key section is generated from it). */
#include <string.h>

#include "backend_cuda.h"
#include "tfcore/config.h"
#include "tfcore/config_keys.h"

#define CUDA_MAX_DEVICE_OFFSET 1023

static const char *const gelu_choices[] = {"kernel", "cublaslt", NULL};
static const tf_cfg_key keys[] = {
    {"device_offset", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = CUDA_MAX_DEVICE_OFFSET,
     .doc = "added to the worker's local rank to pick the device (`2` uses GPUs 2, 3 for two ranks)"},
    {"cublaslt_workspace_mib", TF_CFG_KEY_INT, .int_def = CUDA_LT_WORKSPACE_MIB_DEFAULT, .int_min = 0,
     .int_max = 1024, .doc = "cuBLASLt workspace per stream that runs GEMMs, in MiB"},
    {"gelu_epilogue", TF_CFG_KEY_CHOICE, .string_def = "kernel", .choices = gelu_choices,
     .doc = "`cublaslt`: a tanh GELU on 16-bit activations uses cuBLASLt's `GELU_AUX_BIAS` epilogue (see GEMM "
            "below); `kernel`: GELU by our kernel after the BIAS epilogue"},
    {0},
};
TF_PLUGIN_KEYS(keys);

tf_status cuda_read_config(tf_section *section, cuda_config *c, tf_error *err)
{
    c->device_offset = 0;
    c->lt_ws_mib = CUDA_LT_WORKSPACE_MIB_DEFAULT;
    c->lt_gelu = false;
    if (!section) return TF_OK;
    const char *gelu = NULL;
    tf_status st;
    if ((st = tf_cfg_key_int(section, keys, "device_offset", &c->device_offset, err)) ||
        (st = tf_cfg_key_int(section, keys, "cublaslt_workspace_mib", &c->lt_ws_mib, err)) ||
        (st = tf_cfg_key_string(section, keys, "gelu_epilogue", &gelu, err)))
        return st;
    c->lt_gelu = gelu && strcmp(gelu, "cublaslt") == 0;
    return TF_OK;
}

tf_status cuda_check_config(tf_section *section, tf_error *err)
{
    cuda_config c;
    return cuda_read_config(section, &c, err);
}
