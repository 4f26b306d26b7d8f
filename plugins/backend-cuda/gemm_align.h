/* gemm_align.h — the pointer alignment backend-cuda tells cuBLASLt an
 * operand has (the CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES preferences,
 * which decide which algorithms the heuristic may pick).
 *
 * Pure functions without CUDA types, so tests/test_gemm_align.c checks them
 * on any machine.
 */
#ifndef TFCORE_BACKEND_CUDA_GEMM_ALIGN_H
#define TFCORE_BACKEND_CUDA_GEMM_ALIGN_H

#include <stddef.h>
#include <stdint.h>

/* cuBLASLt's preferences go up to 256 bytes; more says nothing new. */
#define TFC_GEMM_MAX_ALIGN 256u

/* The largest power of two (<= 256) dividing v; 0 is divided by all (256). */
static inline uint32_t tfc_pow2_divisor(uint64_t v)
{
    uint32_t r = 1;
    while (r < TFC_GEMM_MAX_ALIGN && !(v & r)) r <<= 1;
    return r;
}

/* The alignment every matrix of a strided batch starts on: matrix i is at
 * base + i * stride_elems * elem_bytes, so the guarantee is the base's
 * alignment folded with the stride's in bytes (a 256-byte aligned base with
 * a stride of 5 f16 elements puts matrix 1 on a 2-byte boundary). NULL (an
 * operand the call does not read) counts as 256. With batch <= 1 the stride
 * is never applied; a stride of 0 (every batch reads the same matrix)
 * changes nothing. */
static inline uint32_t tfc_gemm_operand_align(const void *base, int batch, int64_t stride_elems,
                                              size_t elem_bytes)
{
    uint32_t a = base ? tfc_pow2_divisor((uint64_t)(uintptr_t)base) : TFC_GEMM_MAX_ALIGN;
    if (batch > 1 && stride_elems != 0) {
        uint64_t s = stride_elems < 0 ? (uint64_t)0 - (uint64_t)stride_elems : (uint64_t)stride_elems;
        uint32_t sa = tfc_pow2_divisor(s * (uint64_t)elem_bytes);
        if (sa < a) a = sa;
    }
    return a;
}

#endif
