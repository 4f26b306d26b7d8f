/* tfcore/dtype.h — element types of tensors, checkpoints and buffers. */
#ifndef TFCORE_DTYPE_H
#define TFCORE_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values are part of the ABI. */
typedef enum tf_dtype {
    TF_DTYPE_F32 = 0,
    TF_DTYPE_F16 = 1,
    TF_DTYPE_BF16 = 2,
    TF_DTYPE_F64 = 3,
    TF_DTYPE_I32 = 4,
    TF_DTYPE_I64 = 5,
    TF_DTYPE_U8 = 6,
    TF_DTYPE_BOOL = 7,
    TF_DTYPE_I8 = 8,
    TF_DTYPE_I16 = 9,
    TF_DTYPE_U16 = 10,
    TF_DTYPE_U32 = 11,
    TF_DTYPE_U64 = 12,
    TF_DTYPE_F8_E4M3 = 13,
    TF_DTYPE_F8_E5M2 = 14
} tf_dtype;

#define TF_DTYPE_COUNT 15

/* Bytes per element (0 for an unknown value). */
size_t tf_dtype_size(tf_dtype dt);
/* safetensors spelling: "F32", "F16", "BF16", "F64", "I32", "I64", "U8", "BOOL", ...
 * NULL for an unknown value. */
const char *tf_dtype_name(tf_dtype dt);
/* Inverse of tf_dtype_name; returns -1 when the name is unknown. */
int tf_dtype_from_name(const char *name);

/* Scalar conversions (round to nearest even), shared by every plugin. */
float tf_f16_to_f32(unsigned short h);
unsigned short tf_f32_to_f16(float f);
float tf_bf16_to_f32(unsigned short b);
unsigned short tf_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
