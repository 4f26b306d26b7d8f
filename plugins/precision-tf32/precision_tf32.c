/* precision_tf32.c — the "tf32" precision plugin: f32 activations and
 * storage, GEMMs on TF32 tensor cores (10-bit mantissa inputs, fp32
 * accumulate: torch.backends.cuda.matmul.allow_tf32 = True), no loss
 * scaling. It has no config keys of its own; gradients are treated exactly
 * as precision-fp32 treats them (plugins/precision-fp32/unscaled_precision.h). */
#define UNSCALED_NAME "tf32"
#define UNSCALED_DTYPE TF_DTYPE_F32
#define UNSCALED_MATMUL TF_MATMUL_TF32
#define UNSCALED_DESCRIPTION "tf32: f32 activations, TF32 tensor-core GEMMs (fp32 accumulate), no loss scaling"
#include "unscaled_precision.h"
