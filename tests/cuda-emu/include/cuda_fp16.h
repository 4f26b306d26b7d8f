/* cuda_fp16.h — the test-only CUDA emulation's stand-in (see cuda_runtime.h):
 * __half and __half2 as 16-bit IEEE binary16 storage with the conversion
 * intrinsics the kernels use. Conversions from float round to nearest even,
 * overflow to infinity and keep subnormals, as CUDA's __float2half_rn does;
 * a NaN becomes the canonical 0x7fff, as CUDA's does. */
#ifndef TF_CUDA_EMU_CUDA_FP16_H
#define TF_CUDA_EMU_CUDA_FP16_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
struct __half {
    uint16_t __x;
    __half() = default;
    constexpr explicit __half(uint16_t bits, int) : __x(bits) {}
};
struct __half2 {
    __half x, y;
};
typedef __half half;
typedef __half2 half2;

static inline uint16_t tf_emu_f32_to_f16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7fffu;                      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds past 65504: inf */
    if (a < 0x38800000u) {                                    /* below 2^-14: subnormal */
        uint32_t e = a >> 23;
        if (e < 102) return (uint16_t)sign;                   /* below half the smallest: 0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                             /* m * 2^(e-150) in 2^-24 units */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float tf_emu_f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        float v = (float)m * (1.0f / 16777216.0f); /* exact */
        return sign ? -v : v;
    }
    u = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline __half __float2half_rn(float f) { return __half(tf_emu_f32_to_f16_bits(f), 0); }
static inline __half __float2half(float f) { return __float2half_rn(f); }
static inline float __half2float(__half h) { return tf_emu_f16_bits_to_f32(h.__x); }
static inline __half2 __floats2half2_rn(float lo, float hi)
{
    return __half2{__float2half_rn(lo), __float2half_rn(hi)};
}
static inline __half2 __float2half2_rn(float f) { return __floats2half2_rn(f, f); }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short u) { return __half(u, 0); }
#endif /* __cplusplus */

#endif
