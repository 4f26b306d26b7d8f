/* precision_bf16.c — the "bf16" precision plugin: bf16 activations and
 * GEMM inputs with fp32 accumulation, fp32 master weights, gradients and
 * optimizer state (torch.autocast(dtype=torch.bfloat16)). bf16 has fp32's
 * exponent range, so there is no loss scaling, as in PyTorch; gradients are
 * treated exactly as precision-fp32 treats them
 * (plugins/precision-fp32/unscaled_precision.h). No config keys of its own. */
#define UNSCALED_NAME "bf16"
#define UNSCALED_DTYPE TF_DTYPE_BF16
#define UNSCALED_MATMUL TF_MATMUL_BF16
#define UNSCALED_DESCRIPTION \
    "mixed bf16: bf16 activations and GEMMs (fp32 accumulate), fp32 master weights, no loss scaling"
#include "unscaled_precision.h"
