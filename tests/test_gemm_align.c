/* test_gemm_align.c — the operand alignment backend-cuda tells cuBLASLt
 * (plugins/backend-cuda/gemm_align.h): the base pointer's alignment folded
 * with the batch stride's, in bytes. Pure arithmetic, so it runs without CUDA. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "gemm_align.h"

static const void *at(uintptr_t a) { return (const void *)a; }

START_TEST(pointer_alone)
{
    ck_assert_uint_eq(tfc_gemm_operand_align(NULL, 1, 0, 4), 256); /* unused operand */
    ck_assert_uint_eq(tfc_gemm_operand_align(at(0x10000), 1, 0, 4), 256); /* capped */
    ck_assert_uint_eq(tfc_gemm_operand_align(at(0x10040), 1, 0, 4), 64);
    ck_assert_uint_eq(tfc_gemm_operand_align(at(0x10008), 1, 0, 2), 8);
    ck_assert_uint_eq(tfc_gemm_operand_align(at(0x10001), 1, 0, 1), 1);
}
END_TEST

START_TEST(batch_stride_folded_in)
{
    const void *base = at(0x7f0000000000u); /* 256-byte aligned */
    /* f16, stride 5 elements: matrix 1 starts 10 bytes on, 2-byte aligned */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 4, 5, 2), 2);
    /* f32, stride 12: 48 bytes, so every matrix is 16-byte aligned */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 3, 12, 4), 16);
    /* bf16 [seq 128, head_dim 64] per head: 16 KiB strides keep 256 */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 12, 128 * 64, 2), 256);
    /* the base limits too: 32-byte base, 256-byte stride */
    ck_assert_uint_eq(tfc_gemm_operand_align(at(0x1020), 8, 64, 4), 32);
    /* a negative stride is as aligned as its magnitude */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 2, -6, 4), 8);
}
END_TEST

START_TEST(stride_ignored_when_unused)
{
    const void *base = at(0x4000);
    /* one matrix: the stride is never applied */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 1, 3, 2), 256);
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 0, 3, 2), 256);
    /* stride 0: every batch reads the same matrix */
    ck_assert_uint_eq(tfc_gemm_operand_align(base, 16, 0, 2), 256);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_align");
    TCase *c = tcase_create("align");
    tcase_add_test(c, pointer_alone);
    tcase_add_test(c, batch_stride_folded_in);
    tcase_add_test(c, stride_ignored_when_unused);
    suite_add_tcase(s, c);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
