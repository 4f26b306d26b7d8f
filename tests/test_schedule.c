/* test_schedule.c — learning-rate schedules (values from transformers'
 * lambdas), the distributed sampler's shards, and the shared RNG. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lr_schedule.h"
#include "sampler.h"
#include "tfcore/rng.h"

#define NEAR(a, b) ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fmax(1, fabs(b)), "%.17g != %.17g", (double)(a), (double)(b))

START_TEST(test_linear)
{
    tf_lr_schedule s = {TF_LR_LINEAR, 5e-5, 10, 110};
    NEAR(tf_lr_at(&s, 0), 0.0);
    NEAR(tf_lr_at(&s, 5), 2.5e-5);
    NEAR(tf_lr_at(&s, 10), 5e-5);
    NEAR(tf_lr_at(&s, 60), 2.5e-5);
    NEAR(tf_lr_at(&s, 110), 0.0);
    NEAR(tf_lr_at(&s, 200), 0.0); /* clamped at 0 past the end */
    tf_lr_schedule nowarm = {TF_LR_LINEAR, 1.0, 0, 4};
    NEAR(tf_lr_at(&nowarm, 0), 1.0);
    NEAR(tf_lr_at(&nowarm, 1), 0.75);
}
END_TEST

START_TEST(test_cosine_and_constant)
{
    tf_lr_schedule c = {TF_LR_COSINE, 1.0, 2, 12};
    NEAR(tf_lr_at(&c, 1), 0.5);
    NEAR(tf_lr_at(&c, 2), 1.0);
    NEAR(tf_lr_at(&c, 7), 0.5 * (1 + cos(M_PI * 0.5)));
    NEAR(tf_lr_at(&c, 12), 0.0);
    tf_lr_schedule k = {TF_LR_CONSTANT, 3e-4, 100, 1000};
    NEAR(tf_lr_at(&k, 0), 3e-4); /* "constant" ignores warmup, as transformers */
    tf_lr_schedule kw = {TF_LR_CONSTANT_WITH_WARMUP, 1.0, 4, 1000};
    NEAR(tf_lr_at(&kw, 1), 0.25);
    NEAR(tf_lr_at(&kw, 999), 1.0);
}
END_TEST

START_TEST(test_sampler_shards_cover_everything)
{
    /* 10 rows over 3 workers: padded to 12, each rank 4 rows, disjoint
     * except for the 2 wrapped-around rows, union = every row. */
    tf_error err = {0};
    int seen[10] = {0};
    size_t total = 0;
    for (int r = 0; r < 3; r++) {
        tf_sampler s;
        ck_assert_int_eq(tf_sampler_init(&s, 10, r, 3, 7, 1, &err), TF_OK);
        tf_sampler_set_epoch(&s, 0);
        ck_assert_uint_eq(tf_sampler_rank_rows(&s), 4);
        size_t rows[4];
        tf_sampler_rows(&s, 0, 4, rows);
        for (int i = 0; i < 4; i++) {
            ck_assert_uint_lt(rows[i], 10);
            seen[rows[i]]++;
            total++;
        }
        tf_sampler_free(&s);
    }
    ck_assert_uint_eq(total, 12);
    int twice = 0;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_ge(seen[i], 1);
        twice += seen[i] == 2;
    }
    ck_assert_int_eq(twice, 2);
}
END_TEST

START_TEST(test_sampler_one_worker_equals_global_order)
{
    /* world 1 with batch 4 visits rows in the same order as the interleaved
     * shards of world 2 with batch 2 (the global batch is the same). */
    tf_error err = {0};
    tf_sampler one, a, b;
    ck_assert_int_eq(tf_sampler_init(&one, 8, 0, 1, 3, 1, &err), TF_OK);
    ck_assert_int_eq(tf_sampler_init(&a, 8, 0, 2, 3, 1, &err), TF_OK);
    ck_assert_int_eq(tf_sampler_init(&b, 8, 1, 2, 3, 1, &err), TF_OK);
    tf_sampler_set_epoch(&one, 2);
    tf_sampler_set_epoch(&a, 2);
    tf_sampler_set_epoch(&b, 2);
    size_t g[8], ra[4], rb[4];
    tf_sampler_rows(&one, 0, 8, g);
    tf_sampler_rows(&a, 0, 4, ra);
    tf_sampler_rows(&b, 0, 4, rb);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(ra[i], g[2 * i]);
        ck_assert_uint_eq(rb[i], g[2 * i + 1]);
    }
    /* a new epoch is a different order; the same epoch is the same order */
    size_t e3[8];
    tf_sampler_set_epoch(&one, 3);
    tf_sampler_rows(&one, 0, 8, e3);
    ck_assert(memcmp(g, e3, sizeof g) != 0);
    tf_sampler_set_epoch(&one, 2);
    tf_sampler_rows(&one, 0, 8, e3);
    ck_assert(memcmp(g, e3, sizeof g) == 0);
    tf_sampler_free(&one);
    tf_sampler_free(&a);
    tf_sampler_free(&b);
}
END_TEST

START_TEST(test_sampler_micro_batches)
{
    /* the step arithmetic: 10 rows, 2 per device. DDP over 3 ranks: shards of
     * 4, 2 micro-batches of 2 rows; DataParallel over 3 replicas: one stream,
     * micro-batches of 6 rows scattered as 2/2/2, then 4 rows as 2/2/0. */
    tf_error err = {0};
    tf_sampler d, g;
    ck_assert_int_eq(tf_sampler_init(&d, 10, 1, 3, 7, 1, &err), TF_OK);
    tf_sampler_set_batch(&d, 2, 1, 0);
    ck_assert_int_eq(tf_sampler_batches_per_epoch(&d), 2);
    tf_micro_batch mb = tf_sampler_micro_batch(&d, 1);
    ck_assert_uint_eq(mb.first, 2);
    ck_assert_uint_eq(mb.n, 2);
    ck_assert_uint_eq(mb.replicas, 1);
    ck_assert_int_eq(tf_sampler_init(&g, 10, 0, 1, 7, 1, &err), TF_OK);
    size_t want[2][3][2] = {{{0, 2}, {2, 2}, {4, 2}}, {{6, 2}, {8, 2}, {10, 0}}};
    for (int r = 0; r < 3; r++) {
        tf_sampler_set_batch(&g, 2, 3, r);
        ck_assert_int_eq(tf_sampler_batches_per_epoch(&g), 2);
        for (int b = 0; b < 2; b++) {
            mb = tf_sampler_micro_batch(&g, b);
            ck_assert_uint_eq(mb.first, want[b][r][0]);
            ck_assert_uint_eq(mb.n, want[b][r][1]);
            ck_assert_uint_eq(mb.replicas, b == 0 ? 3 : 2);
        }
    }
    /* the plan counts the same batches per epoch */
    ck_assert_int_eq(tf_batches_per_epoch(10, 2, 3), 2);
    ck_assert_int_eq(tf_batches_per_epoch(12, 2, 3), 2);
    ck_assert_int_eq(tf_batches_per_epoch(13, 2, 3), 3);
    tf_sampler_free(&d);
    tf_sampler_free(&g);
}
END_TEST

START_TEST(test_sampler_errors_and_no_shuffle)
{
    tf_error err = {0};
    tf_sampler s;
    ck_assert_int_eq(tf_sampler_init(&s, 0, 0, 1, 1, 1, &err), TF_ERR_DATA);
    ck_assert_str_eq(err.msg, "the split has no rows to sample");
    ck_assert_int_eq(tf_sampler_init(&s, 5, 2, 2, 1, 1, &err), TF_ERR_RUNTIME);
    ck_assert_int_eq(tf_sampler_init(&s, 5, 0, 1, 1, 0, &err), TF_OK);
    tf_sampler_set_epoch(&s, 4);
    size_t r[5];
    tf_sampler_rows(&s, 0, 5, r);
    for (size_t i = 0; i < 5; i++) ck_assert_uint_eq(r[i], i);
    tf_sampler_free(&s);
}
END_TEST

START_TEST(test_rng)
{
    tf_rng a = tf_rng_init(42, 1), b = tf_rng_init(42, 1), c = tf_rng_init(42, 2);
    uint64_t x = tf_rng_u64(&a);
    ck_assert_uint_eq(x, tf_rng_u64(&b));
    ck_assert_uint_ne(x, tf_rng_u64(&c));
    /* uniform and normal moments over many draws */
    tf_rng r = tf_rng_init(1, 0);
    double sum = 0, sq = 0;
    int n = 200000, counts[7] = {0};
    for (int i = 0; i < n; i++) {
        double v = tf_rng_normal(&r);
        sum += v;
        sq += v * v;
        counts[tf_rng_below(&r, 7)]++;
        double u = tf_rng_uniform(&r);
        ck_assert(u >= 0 && u < 1);
    }
    ck_assert_msg(fabs(sum / n) < 0.01, "normal mean %g", sum / n);
    ck_assert_msg(fabs(sq / n - 1) < 0.02, "normal variance %g", sq / n);
    for (int k = 0; k < 7; k++) ck_assert_msg(abs(counts[k] - n / 7) < n / 70, "bucket %d: %d", k, counts[k]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_cosine_and_constant);
    tcase_add_test(tc, test_sampler_shards_cover_everything);
    tcase_add_test(tc, test_sampler_one_worker_equals_global_order);
    tcase_add_test(tc, test_sampler_micro_batches);
    tcase_add_test(tc, test_sampler_errors_and_no_shuffle);
    tcase_add_test(tc, test_rng);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
