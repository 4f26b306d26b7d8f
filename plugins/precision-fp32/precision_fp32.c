/* precision_fp32.c — the "fp32" precision plugin: f32 activations, strict
 * IEEE fp32 GEMMs (no TF32), no loss scaling. The reference every other mode
 * is compared with. It has no config keys of its own. */
#define UNSCALED_NAME "fp32"
#define UNSCALED_DTYPE TF_DTYPE_F32
#define UNSCALED_MATMUL TF_MATMUL_FP32
#define UNSCALED_DESCRIPTION "strict fp32: f32 activations and IEEE fp32 GEMMs, no loss scaling"
#include "unscaled_precision.h"
