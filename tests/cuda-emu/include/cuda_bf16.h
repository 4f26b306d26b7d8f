/* cuda_bf16.h — the test-only CUDA emulation's stand-in (see cuda_runtime.h):
 * __nv_bfloat16 and __nv_bfloat162 (the top 16 bits of an IEEE binary32)
 * with the conversion intrinsics the kernels use. Conversions from float
 * round to nearest even, as CUDA's __float2bfloat16_rn does; a NaN becomes
 * the canonical 0x7fff, as CUDA's does. */
#ifndef TF_CUDA_EMU_CUDA_BF16_H
#define TF_CUDA_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_fp16.h"

#ifdef __cplusplus
struct __nv_bfloat16 {
    uint16_t __x;
    __nv_bfloat16() = default;
    constexpr explicit __nv_bfloat16(uint16_t bits, int) : __x(bits) {}
};
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16(0x7fffu, 0);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16((uint16_t)(u >> 16), 0);
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline float __bfloat162float(__nv_bfloat16 b)
{
    uint32_t u = (uint32_t)b.__x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi)
{
    return __nv_bfloat162{__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}
static inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __floats2bfloat162_rn(f, f); }
static inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
#endif /* __cplusplus */

#endif
