/* dtype.c — element types: sizes, safetensors names, f16/bf16 conversion. */
#include <stdint.h>
#include <string.h>

#include "tfcore/dtype.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[TF_DTYPE_COUNT] = {
    [TF_DTYPE_F32] = {"F32", 4},  [TF_DTYPE_F16] = {"F16", 2},
    [TF_DTYPE_BF16] = {"BF16", 2}, [TF_DTYPE_F64] = {"F64", 8},
    [TF_DTYPE_I32] = {"I32", 4},  [TF_DTYPE_I64] = {"I64", 8},
    [TF_DTYPE_U8] = {"U8", 1},    [TF_DTYPE_BOOL] = {"BOOL", 1},
    [TF_DTYPE_I8] = {"I8", 1},    [TF_DTYPE_I16] = {"I16", 2},
    [TF_DTYPE_U16] = {"U16", 2},  [TF_DTYPE_U32] = {"U32", 4},
    [TF_DTYPE_U64] = {"U64", 8},  [TF_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [TF_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
};

size_t tf_dtype_size(tf_dtype dt)
{
    return (unsigned)dt < TF_DTYPE_COUNT ? dtypes[dt].size : 0;
}

const char *tf_dtype_name(tf_dtype dt)
{
    return (unsigned)dt < TF_DTYPE_COUNT ? dtypes[dt].name : NULL;
}

int tf_dtype_from_name(const char *name)
{
    for (int i = 0; name && i < TF_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float tf_bf16_to_f32(unsigned short b) { return bits_f32((uint32_t)b << 16); }

unsigned short tf_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (unsigned short)(u >> 16);
}

float tf_f16_to_f32(unsigned short h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

unsigned short tf_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);        /* NaN */
    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);       /* overflow -> inf */
    if (a < 0x38800000u) {                                               /* subnormal or zero */
        /* f * 2^24 rounded to nearest even gives the subnormal mantissa */
        float v = bits_f32(a) * 16777216.0f;
        uint32_t m = (uint32_t)v;
        float frac = v - (float)m;
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return (unsigned short)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round mantissa to 10 bits, nearest even */
    return (unsigned short)(sign | ((r - 0x38000000u) >> 13));
}
