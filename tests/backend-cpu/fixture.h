/* tests/backend-cpu/fixture.h — what every backend-cpu test program shares
 * (one program per op family, tests/backend-cpu/test_*.c): the fixture (one
 * backend on 2 threads, one on 1), its assertions, and the references more
 * than one family uses.
 *
 * backend-cpu, slot by slot: every op forward against a naive
 * double-precision reference on random inputs, every backward against
 * central finite differences of that reference (or analytic naive code), the
 * edge cases the header names (fully masked rows, ignore_index, rows = 1,
 * leading dimensions, strided batches, transposes, accumulate flags,
 * aliasing), bit-identical results on 1 and 2 threads where the header
 * promises determinism, and every error path.
 *
 * The plugin's sources are compiled into each program; the vtable comes from
 * tfcore_plugin_entry(), as the loader would get it. The inputs are
 * tests/common.h's stream from its fixed seed: every test (in its own
 * process) draws the same numbers each run. */
#ifndef TFCORE_TESTS_BACKEND_CPU_FIXTURE_H
#define TFCORE_TESTS_BACKEND_CPU_FIXTURE_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "cpu.h"
#include "cpu_math.h"
#include "cpu_random.h"
#include "host_blas.h"
#include "tfcore/backend.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

/* --- fixture: one backend on 2 threads, one on 1 ------------------------ */

/* Defined by TF_PLUGIN_DEFINE in backend.c, compiled into this program. */
const tf_plugin *tfcore_plugin_entry(void);

static const tf_backend_vtable *vt;
static tf_backend *be, *be1; /* 2 threads, 1 thread */
static tf_error err;

static inline tf_backend *open_threads(int threads)
{
    tf_backend_open_args a = {sizeof a, 0, threads, 1234, NULL, 1};
    tf_backend *b = NULL;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_ptr_nonnull(b);
    return b;
}

static inline void setup(void)
{
    const tf_plugin *p = tfcore_plugin_entry();
    vt = p->vtable;
    be = open_threads(2);
    be1 = open_threads(1);
    tf_error_clear(&err);
}

static inline void teardown(void)
{
    vt->close(be);
    vt->close(be1);
}

/* The program's main: each case its own tcase (CK_RUN_CASE=name), run in
 * the fixture, 120 s each. */
static inline int backend_cpu_main(const char *suite, const tf_test_case *cases, size_t n)
{
    tf_host_blas_reexec(NULL); /* OpenBLAS's kernels as tfcore's own processes get them */
    Suite *s = suite_create(suite);
    tf_test_add_cases(s, cases, n, setup, teardown, 120);
    return tf_test_run(s, false) ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* --- helpers -------------------------------------------------------------- */

static inline float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static inline double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* max over i of |got - want| / max(|want|, floor) with the floor at 1% of
 * the largest |want| (tests/common.h) */
#define ASSERT_CLOSE(got, want, n, tol) TF_TEST_ASSERT_REL(got, want, n, tol)
#define ASSERT_ERR(call, want_code, needle)                                                   \
    do {                                                                                      \
        tf_error_clear(&err);                                                                 \
        tf_status st_ = (call);                                                               \
        ck_assert_int_eq(st_, (want_code));                                                   \
        ck_assert_int_eq(err.code, (want_code));                                              \
        ck_assert_msg(strstr(err.msg, (needle)) != NULL, "message '%s' lacks '%s'", err.msg, \
                      (needle));                                                              \
        ck_assert_msg(strncmp(err.msg, "backend-cpu: ", 13) == 0, "message '%s'", err.msg);  \
    } while (0)

/* COND (in terms of i) for every i < N, checked in plain C and asserted once:
 * a Check assertion per element costs a system call each. */
#define ASSERT_ALL(N, COND)                                                                   \
    do {                                                                                      \
        size_t bad_ = 0, first_ = 0, n_ = (N);                                                \
        for (size_t i = 0; i < n_; i++)                                                       \
            if (!(COND) && bad_++ == 0) first_ = i;                                           \
        ck_assert_msg(bad_ == 0, "%zu of %zu elements fail %s, the first at %zu", bad_, n_,  \
                      #COND, first_);                                                         \
    } while (0)

static inline void to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i];
}

/* --- references shared by families ------------------------------------------ */

static inline double gelu_erf_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
/* 0.5 x (1 + tanh u) = x / (1 + e^-2u): the second form does not cancel for u << 0 */
static inline double gelu_tanh_ref(double x)
{
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

/* attention's save buffer for d on b (attention, dropout rows, threads) */
static inline void *alloc_save(tf_backend *b, const tf_attention_desc *d)
{
    size_t bytes = vt->attention_save_bytes(b, d);
    ck_assert_uint_gt(bytes, 0);
    void *p = NULL;
    ck_assert_int_eq(vt->alloc(b, bytes, TF_MEM_DEVICE, &p, &err), TF_OK);
    return p;
}

#endif
