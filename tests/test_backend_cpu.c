/* test_backend_cpu.c — backend-cpu, slot by slot: every op forward against a
 * naive double-precision reference on random inputs, every backward against
 * central finite differences of that reference (or analytic naive code),
 * the edge cases the header names (fully masked rows, ignore_index, rows = 1,
 * leading dimensions, strided batches, transposes, accumulate flags,
 * aliasing), bit-identical results on 1 and 2 threads where the header
 * promises determinism, and every error path.
 *
 * The plugin's sources are compiled into this program; the vtable comes
 * from tfcore_plugin_entry(), as the loader would get it. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_math.h"
#include "cpu_random.h"
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

static tf_backend *open_threads(int threads)
{
    tf_backend_open_args a = {sizeof a, 0, threads, 1234, NULL};
    tf_backend *b = NULL;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void setup(void)
{
    const tf_plugin *p = tfcore_plugin_entry();
    vt = p->vtable;
    be = open_threads(2);
    be1 = open_threads(1);
    tf_error_clear(&err);
}

static void teardown(void)
{
    vt->close(be);
    vt->close(be1);
}

/* --- helpers -------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }
static void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = frand(lo, hi);
}
static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* max over i of |got - want| / max(|want|, floor); ASSERT_CLOSE puts the
 * floor at 1% of the largest |want|, so elements that cancel to nearly 0 are
 * held to the precision of the terms they came from. */
static double rel_err(const float *got, const double *want, size_t n, double floor_)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor_);
        if (!(d <= worst)) worst = d; /* NaN propagates */
    }
    return worst;
}
static double max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}
#define ASSERT_CLOSE(got, want, n, tol)                                                       \
    do {                                                                                      \
        double e_ = rel_err((got), (want), (n), 1e-2 * max_abs((want), (n)) + 1e-30);         \
        ck_assert_msg(e_ <= (tol), "%s vs %s: relative error %.3g > %.3g", #got, #want, e_,  \
                      (double)(tol));                                                         \
    } while (0)
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

static void to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i];
}

/* --- plugin descriptor, open, close, supports ------------------------------- */

START_TEST(test_descriptor)
{
    const tf_plugin *p = tfcore_plugin_entry();
    ck_assert_uint_eq(p->magic, TF_PLUGIN_MAGIC);
    ck_assert_uint_eq(p->abi_major, TF_ABI_MAJOR);
    ck_assert_uint_eq(p->kind, TF_KIND_BACKEND);
    ck_assert_str_eq(p->name, "cpu");
    ck_assert_uint_eq(vt->size, sizeof(tf_backend_vtable));
    char why[64] = "";
    ck_assert_ptr_nonnull(p->probe);
    ck_assert_int_eq(p->probe(why, sizeof why), 1);
    /* every slot of ABI 1.0 is set */
    const void *const *slot = (const void *const *)((const char *)vt + offsetof(tf_backend_vtable, check_config));
    size_t nslots = (offsetof(tf_backend_vtable, finite_check) + sizeof(void *) -
                     offsetof(tf_backend_vtable, check_config)) / sizeof(void *);
    for (size_t i = 0; i < nslots; i++) ck_assert_msg(slot[i] != NULL, "slot %zu is NULL", i);
    /* ABI 1.1: host memory, no native streams, not limited by a device count */
    ck_assert(TF_HAS(vt, host_memory) && vt->host_memory(be));
    ck_assert(!TF_HAS(vt, native_stream));
    ck_assert(TF_HAS(vt, device_count) && vt->device_count(NULL, 0) == -1);
}
END_TEST

START_TEST(test_open_and_describe)
{
    const char *name = vt->device_name(be);
    ck_assert_ptr_nonnull(strstr(name, "2 threads"));
    ck_assert_ptr_nonnull(strstr(name, "OpenBLAS"));
    ck_assert_ptr_nonnull(strstr(vt->device_name(be1), "1 thread,"));
    ck_assert(vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_F32));
    ck_assert(!vt->supports(be, TF_MATMUL_TF32, TF_DTYPE_F32));
    ck_assert(!vt->supports(be, TF_MATMUL_F16, TF_DTYPE_F16));
    ck_assert(!vt->supports(be, TF_MATMUL_BF16, TF_DTYPE_BF16));
    ck_assert(!vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_F16));
    ck_assert(!vt->supports(be, TF_MATMUL_FP32, TF_DTYPE_BF16));
    /* threads = 0: the OpenMP default, at least one */
    tf_backend *b0 = open_threads(0);
    ck_assert_int_ge(b0->threads, 1);
    vt->close(b0);
    vt->close(NULL);
}
END_TEST

START_TEST(test_open_errors)
{
    tf_backend *b = (tf_backend *)&err;
    tf_backend_open_args a = {sizeof a, 0, 1, 0, NULL};
    ASSERT_ERR(vt->open(NULL, &b, &err), TF_ERR_RUNTIME, "args is NULL");
    ASSERT_ERR(vt->open(&a, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    a.size = 8;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_PLUGIN, "open_args.size is 8");
    ck_assert_ptr_null(b);
    a.size = sizeof a;
    a.threads = -1;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_RUNTIME, "threads must be in [0, 1024], got -1");
    a.threads = 1;
    a.device = -2;
    ASSERT_ERR(vt->open(&a, &b, &err), TF_ERR_RUNTIME, "device must be >= 0");
}
END_TEST

static tf_section *backend_section(const char *text, tf_config **cfg)
{
    ck_assert_int_eq(tf_config_load_string(cfg, text, "test.cfg", NULL, &err), TF_OK);
    return tf_config_section(*cfg, "backend");
}

START_TEST(test_config_threads)
{
    ck_assert_int_eq(vt->check_config(NULL, &err), TF_OK);
    tf_config *cfg = NULL;
    tf_section *sec = backend_section("backend = { plugin = \"cpu\"; threads = 1; };", &cfg);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_OK);
    tf_backend_open_args a = {sizeof a, 0, 0, 0, sec};
    tf_backend *b = NULL;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_int_eq(b->threads, 1);
    vt->close(b);
    a.threads = 2; /* the core's explicit count wins over the config */
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_OK);
    ck_assert_int_eq(b->threads, 2);
    vt->close(b);
    tf_config_free(cfg);

    sec = backend_section("backend = { threads = -3; };", &cfg);
    tf_error_clear(&err);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "threads"));
    a.threads = 0;
    a.section = sec;
    ck_assert_int_eq(vt->open(&a, &b, &err), TF_ERR_CONFIG);
    tf_config_free(cfg);

    sec = backend_section("backend = { threads = \"many\"; };", &cfg);
    ck_assert_int_eq(vt->check_config(sec, &err), TF_ERR_CONFIG);
    tf_config_free(cfg);
}
END_TEST

/* --- memory, streams, events -------------------------------------------------- */

START_TEST(test_memory)
{
    tf_backend_mem_info mi;
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
    ck_assert_uint_gt(mi.total, 0);
    ck_assert_uint_gt(mi.free, 0);
    void *a = NULL, *b = NULL, *z = NULL;
    ck_assert_int_eq(vt->alloc(be, 1000, TF_MEM_DEVICE, &a, &err), TF_OK);
    ck_assert_int_eq(vt->alloc(be, 3, TF_MEM_HOST_PINNED, &b, &err), TF_OK);
    ck_assert_int_eq(vt->alloc(be, 0, TF_MEM_DEVICE, &z, &err), TF_OK);
    ck_assert_ptr_nonnull(z);
    ck_assert_uint_eq((uintptr_t)a % 64, 0);
    ck_assert_uint_eq((uintptr_t)b % 64, 0);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 1003);
    ck_assert_uint_eq(mi.peak, 1003);
    memset(a, 0x5a, 1000);
    ck_assert_int_eq(vt->memset(be, a, 7, 10, NULL), TF_OK);
    ck_assert_int_eq(((unsigned char *)a)[9], 7);
    ck_assert_int_eq(((unsigned char *)a)[10], 0x5a);
    for (int k = TF_COPY_HOST_TO_DEVICE; k <= TF_COPY_HOST_TO_HOST; k++) {
        ((unsigned char *)b)[0] = 0;
        ck_assert_int_eq(vt->memcpy(be, b, a, 3, (tf_memcpy_kind)k, NULL), TF_OK);
        ck_assert_int_eq(((unsigned char *)b)[0], 7);
    }
    /* overlapping copy is a move */
    unsigned char *ua = a;
    for (int i = 0; i < 20; i++) ua[i] = (unsigned char)i;
    ck_assert_int_eq(vt->memcpy(be, ua + 1, ua, 10, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(ua[1], 0);
    ck_assert_int_eq(ua[10], 9);
    ck_assert_int_eq(vt->memcpy(be, b, a, 0, TF_COPY_HOST_TO_HOST, NULL), TF_OK);
    ck_assert_int_eq(vt->memcpy(be, b, a, 3, (tf_memcpy_kind)9, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memcpy(be, NULL, a, 3, TF_COPY_HOST_TO_HOST, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memset(be, NULL, 0, 3, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->memset(be, NULL, 0, 0, NULL), TF_OK);
    /* large copies and fills go over the team: odd sizes, overlapping moves */
    size_t big = ((size_t)3 << 20) + 13;
    unsigned char *p = malloc(big + 100), *q = malloc(big + 100);
    for (size_t i = 0; i < big + 100; i++) p[i] = (unsigned char)(i * 7 + 3);
    ck_assert_int_eq(vt->memcpy(be, q, p, big, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(memcmp(p, q, big), 0);
    ck_assert_int_eq(vt->memcpy(be, p + 100, p, big, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(memcmp(p + 100, q, big), 0);
    ck_assert_int_eq(vt->memset(be, q + 1, 0xab, big - 1, NULL), TF_OK);
    ck_assert_int_eq(q[0], p[100]);
    ASSERT_ALL(big - 1, q[i + 1] == 0xab);
    free(p), free(q);
    vt->free(be, a, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 3);
    ck_assert_uint_eq(mi.peak, 1003);
    vt->free(be, b, TF_MEM_HOST_PINNED);
    vt->free(be, z, TF_MEM_DEVICE);
    vt->free(be, NULL, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
}
END_TEST

START_TEST(test_memory_errors)
{
    void *p = &err;
    ASSERT_ERR(vt->alloc(be, SIZE_MAX / 2, TF_MEM_DEVICE, &p, &err), TF_ERR_RUNTIME,
               "out of memory allocating 9223372036854775807 bytes of device memory");
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(err.msg, "bytes free of"));
    ASSERT_ERR(vt->alloc(be, SIZE_MAX, TF_MEM_HOST_PINNED, &p, &err), TF_ERR_RUNTIME,
               "more than can be addressed");
    ASSERT_ERR(vt->alloc(be, 16, (tf_mem_kind)5, &p, &err), TF_ERR_RUNTIME,
               "unknown memory kind 5");
    ASSERT_ERR(vt->alloc(be, 16, TF_MEM_DEVICE, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->alloc(NULL, 16, TF_MEM_DEVICE, &p, &err), TF_ERR_RUNTIME, "backend is NULL");
    tf_backend_mem_info mi;
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
    ck_assert_uint_eq(mi.peak, 0);
    /* freeing something alloc did not return is refused, not a heap corruption */
    char *q = NULL;
    ck_assert_int_eq(vt->alloc(be, 64, TF_MEM_DEVICE, (void **)&q, &err), TF_OK);
    tf_log_level level = tf_log_get_level();
    tf_log_set_level(TF_LOG_QUIET); /* the refusals are logged as errors */
    vt->free(be, q + 64, TF_MEM_DEVICE); /* points into q's block; its "header" is q's data */
    memset(q, 0, 64);
    vt->free(be, q + 64, TF_MEM_DEVICE);
    tf_log_set_level(level);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 64);
    vt->free(be, q, TF_MEM_DEVICE);
    vt->mem_info(be, &mi);
    ck_assert_uint_eq(mi.current, 0);
}
END_TEST

START_TEST(test_streams_events)
{
    tf_stream *s = NULL, *s1 = NULL;
    tf_event *e = NULL;
    ck_assert_int_eq(vt->stream_create(be, &s, &err), TF_OK);
    ck_assert_int_eq(vt->stream_create(be1, &s1, &err), TF_OK);
    ck_assert_int_eq(vt->event_create(be, &e, &err), TF_OK);
    ck_assert_int_eq(vt->event_record(be, e, s), TF_OK);
    ck_assert_int_eq(vt->event_record(be, e, NULL), TF_OK);
    ck_assert_int_eq(vt->stream_wait_event(be, s, e), TF_OK);
    ck_assert_int_eq(vt->stream_wait_event(be, NULL, e), TF_OK);
    ck_assert_int_eq(vt->event_sync(be, e, &err), TF_OK);
    ck_assert_int_eq(vt->stream_sync(be, s, &err), TF_OK);
    ck_assert_int_eq(vt->stream_sync(be, NULL, &err), TF_OK);
    /* an op on a stream is done when it returns */
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(vt->scale(be, s, x, 4, 2.0f, TF_DTYPE_F32, &err), TF_OK);
    ck_assert(x[3] == 8.0f);
    /* errors */
    ck_assert_int_eq(vt->event_record(be, NULL, s), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->event_record(be, e, s1), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->event_record(be1, e, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->stream_wait_event(be, s, NULL), TF_ERR_RUNTIME);
    ck_assert_int_eq(vt->stream_wait_event(be, s1, e), TF_ERR_RUNTIME);
    ASSERT_ERR(vt->event_sync(be, NULL, &err), TF_ERR_RUNTIME, "event is NULL");
    ASSERT_ERR(vt->event_sync(be1, e, &err), TF_ERR_RUNTIME, "another backend");
    ASSERT_ERR(vt->stream_sync(be, s1, &err), TF_ERR_RUNTIME, "another backend");
    ASSERT_ERR(vt->stream_create(be, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->event_create(be, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    vt->event_destroy(be, e);
    vt->stream_destroy(be, s);
    vt->stream_destroy(be1, s1);
    vt->stream_destroy(be, NULL);
    vt->event_destroy(be, NULL);
}
END_TEST

/* --- GEMM ------------------------------------------------------------------------ */

static double gelu_erf_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
/* 0.5 x (1 + tanh u) = x / (1 + e^-2u): the second form does not cancel for u << 0 */
static double gelu_tanh_ref(double x)
{
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

/* Naive double C = alpha op(A) op(B) + beta C (+ bias, gelu), one batch item. */
static void gemm_ref(const tf_gemm_desc *g, int bi, const double *c_in, double *pre,
                     double *c_out)
{
    const float *a = (const float *)g->a + (int64_t)bi * g->stride_a;
    const float *b = (const float *)g->b + (int64_t)bi * g->stride_b;
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double s = 0.0;
            for (int l = 0; l < g->k; l++) {
                double av = g->trans_a ? a[(int64_t)l * g->lda + i] : a[(int64_t)i * g->lda + l];
                double bv = g->trans_b ? b[(int64_t)j * g->ldb + l] : b[(int64_t)l * g->ldb + j];
                s += av * bv;
            }
            double v = g->alpha * s;
            if (g->beta != 0.0f) v += g->beta * c_in[i * g->n + j];
            if (g->epilogue != TF_EPILOGUE_NONE) v += g->bias[j];
            pre[i * g->n + j] = v;
            if (g->epilogue == TF_EPILOGUE_BIAS_GELU)
                v = g->gelu == TF_GELU_TANH ? gelu_tanh_ref(v) : gelu_erf_ref(v);
            c_out[i * g->n + j] = v;
        }
}

/* Runs one GEMM shape on `b` and checks every batch item (and the untouched
 * padding between rows) against gemm_ref. */
static void check_gemm(tf_backend *b, bool ta, bool tb, int m, int n, int k, int batch,
                       float alpha, float beta, tf_gemm_epilogue ep, tf_gelu_kind gk,
                       int pad, int64_t stride_b_override)
{
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    if (lda < 1) lda = 1; /* k = 0 */
    if (ldb < 1) ldb = 1;
    int64_t sa = (int64_t)(ta ? k : m) * lda + 5, sb = (int64_t)(tb ? n : k) * ldb + 3,
            sc = (int64_t)m * ldc + 7;
    if (stride_b_override >= 0) sb = stride_b_override;
    size_t na = (size_t)(sa * batch), nb = (size_t)(sb * (batch - 1) + (tb ? n : k) * ldb + 1),
           nc = (size_t)(sc * batch);
    float *A = falloc(na), *B = falloc(nb), *C = falloc(nc), *C0 = falloc(nc), *aux = falloc(nc);
    float *bias = falloc((size_t)n);
    fill(A, na, -1, 1);
    fill(B, nb, -1, 1);
    fill(C, nc, -1, 1);
    fill(bias, (size_t)n, -1, 1);
    memcpy(C0, C, nc * sizeof *C);
    for (size_t i = 0; i < nc; i++) aux[i] = 777.0f;
    tf_gemm_desc g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                      .beta = beta, .a = A, .lda = lda, .stride_a = sa, .b = B, .ldb = ldb,
                      .stride_b = sb, .c = C, .ldc = ldc, .stride_c = sc, .batch = batch,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32,
                      .mode = TF_MATMUL_FP32, .epilogue = ep, .bias = bias, .aux = aux,
                      .gelu = gk};
    ck_assert_int_eq(vt->gemm(b, NULL, &g, &err), TF_OK);
    double *cin = dalloc((size_t)m * n), *pre = dalloc((size_t)m * n), *want = dalloc((size_t)m * n);
    float *got = falloc((size_t)m * n), *got_aux = falloc((size_t)m * n);
    for (int bi = 0; bi < batch; bi++) {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                cin[i * n + j] = C0[bi * sc + i * ldc + j];
                got[i * n + j] = C[bi * sc + i * ldc + j];
                got_aux[i * n + j] = aux[bi * sc + i * ldc + j];
            }
        gemm_ref(&g, bi, cin, pre, want);
        /* fp32 sums of k products: error grows like sqrt(k) ulps of the terms */
        double tol = 2e-6 * sqrt((double)(k + 1)) * 4;
        double e = 0.0;
        for (int i = 0; i < m * n; i++)
            e = fmax(e, fabs(got[i] - want[i]) / (fabs(want[i]) + sqrt((double)k + 1) * 0.3));
        ck_assert_msg(e <= tol, "gemm ta=%d tb=%d m=%d n=%d k=%d batch=%d ep=%d: err %.3g", ta,
                      tb, m, n, k, batch, ep, e);
        if (ep == TF_EPILOGUE_BIAS_GELU) {
            double ea = 0.0;
            for (int i = 0; i < m * n; i++)
                ea = fmax(ea, fabs(got_aux[i] - pre[i]) / (fabs(pre[i]) + sqrt((double)k + 1) * 0.3));
            ck_assert_msg(ea <= tol, "aux err %.3g", ea);
        }
        /* the padding of each row and the gap after the item are untouched */
        int64_t padw = ldc - n, at = bi * sc;
        ASSERT_ALL((size_t)(m * padw), C[at + (int64_t)i / padw * ldc + n + (int64_t)i % padw] ==
                                           C0[at + (int64_t)i / padw * ldc + n + (int64_t)i % padw]);
        ASSERT_ALL((size_t)(sc - m * ldc), C[at + m * ldc + (int64_t)i] == C0[at + m * ldc + (int64_t)i]);
    }
    free(A), free(B), free(C), free(C0), free(aux), free(bias), free(cin), free(pre), free(want);
    free(got), free(got_aux);
}

START_TEST(test_gemm_shapes)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(be, ta, tb, 7, 5, 3, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
            check_gemm(be, ta, tb, 130, 70, 90, 1, 0.5f, 0.0f, TF_EPILOGUE_NONE, 0, 3, -1);
            check_gemm(be, ta, tb, 40, 300, 64, 1, 1.0f, 1.0f, TF_EPILOGUE_NONE, 0, 1, -1);
            check_gemm(be, ta, tb, 33, 17, 129, 3, -2.0f, 0.25f, TF_EPILOGUE_NONE, 0, 2, -1);
            check_gemm(be1, ta, tb, 130, 70, 90, 2, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
        }
    /* rows = 1, cols = 1 */
    check_gemm(be, false, true, 1, 300, 200, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, false, false, 300, 1, 200, 1, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    /* batch > threads, batch with B shared (stride 0) */
    check_gemm(be, false, false, 64, 64, 64, 5, 1.0f, 0.0f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, true, false, 64, 48, 80, 4, 1.0f, 0.5f, TF_EPILOGUE_NONE, 0, 1, 0);
    /* k = 0: C = beta C */
    check_gemm(be, false, false, 9, 8, 0, 2, 1.0f, 0.5f, TF_EPILOGUE_NONE, 0, 0, -1);
    check_gemm(be, false, false, 9, 8, 0, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0, 0, -1);
}
END_TEST

START_TEST(test_gemm_epilogues)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(be, ta, tb, 150, 96, 64, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS, 0, 2, -1);
            check_gemm(be, ta, tb, 150, 96, 64, 1, 0.7f, 0.5f, TF_EPILOGUE_BIAS, 0, 0, -1);
            check_gemm(be, ta, tb, 150, 96, 64, 2, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, TF_GELU_ERF,
                       1, -1);
            check_gemm(be, ta, tb, 20, 250, 64, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU,
                       TF_GELU_TANH, 0, -1);
            check_gemm(be1, ta, tb, 9, 7, 5, 1, 1.0f, 0.0f, TF_EPILOGUE_BIAS_GELU, TF_GELU_TANH,
                       0, -1);
        }
    /* m = 0 / n = 0: nothing to do, nothing read */
    tf_gemm_desc g = {.m = 0, .n = 4, .k = 3, .alpha = 1, .lda = 3, .ldb = 4, .ldc = 4, .batch = 1,
                      .ab_dtype = TF_DTYPE_F32, .c_dtype = TF_DTYPE_F32};
    ck_assert_int_eq(vt->gemm(be, NULL, &g, &err), TF_OK);
}
END_TEST

START_TEST(test_gemm_errors)
{
    float a[16] = {0}, b[16] = {0}, c[16] = {0}, bias[4] = {0};
    tf_gemm_desc ok = {.m = 2, .n = 2, .k = 2, .alpha = 1, .a = a, .lda = 2, .b = b, .ldb = 2,
                       .c = c, .ldc = 2, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                       .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_FP32};
    ck_assert_int_eq(vt->gemm(be, NULL, &ok, &err), TF_OK);
    tf_gemm_desc g;
    ASSERT_ERR(vt->gemm(be, NULL, NULL, &err), TF_ERR_RUNTIME, "gemm: desc is NULL");
    g = ok, g.m = -1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "m must be >= 0, got -1");
    g = ok, g.batch = 0;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "batch must be >= 1");
    g = ok, g.lda = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "lda is 1, must be in [2,");
    g = ok, g.n = 3, g.ldc = 3;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "ldb is 2, must be in [3,");
    g = ok, g.ldb = 3, g.ldc = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "ldc is 1");
    g = ok, g.ab_dtype = TF_DTYPE_F16;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "ab dtype F16 is not supported");
    g = ok, g.c_dtype = TF_DTYPE_BF16;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "c dtype BF16");
    g = ok, g.c_dtype = (tf_dtype)99;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "dtype 99 is not a tf_dtype");
    g = ok, g.mode = TF_MATMUL_TF32;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_PLUGIN, "matmul mode 1 is not supported");
    g = ok, g.batch = 2, g.stride_a = -4;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "batch strides must be >= 0");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "bias (BIAS epilogue) is NULL");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "aux (BIAS_GELU epilogue) is NULL");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias, g.aux = b, g.beta = 1;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "needs beta = 0");
    g = ok, g.epilogue = TF_EPILOGUE_BIAS_GELU, g.bias = bias, g.aux = b, g.gelu = (tf_gelu_kind)3;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "unknown gelu kind 3");
    g = ok, g.epilogue = (tf_gemm_epilogue)7;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "unknown epilogue 7");
    g = ok, g.a = NULL;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "gemm: a is NULL");
    g = ok, g.c = NULL;
    ASSERT_ERR(vt->gemm(be, NULL, &g, &err), TF_ERR_RUNTIME, "gemm: c is NULL");
    ASSERT_ERR(vt->gemm(NULL, NULL, &ok, &err), TF_ERR_RUNTIME, "backend is NULL");
}
END_TEST

/* --- sum_rows, sum_squares, finite_check ------------------------------------------ */

START_TEST(test_sum_rows)
{
    int rows = 333, cols = 150;
    float *dy = falloc((size_t)rows * cols), *db = falloc(cols), *db1 = falloc(cols);
    double *want = dalloc(cols);
    fill(dy, (size_t)rows * cols, -1, 1);
    for (int j = 0; j < cols; j++) {
        db[j] = 0.5f;
        for (int r = 0; r < rows; r++) want[j] += dy[r * cols + j];
    }
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, rows, cols, db, false, &err), TF_OK);
    ASSERT_CLOSE(db, want, (size_t)cols, 1e-6);
    ck_assert_int_eq(vt->sum_rows(be1, NULL, dy, TF_DTYPE_F32, rows, cols, db1, false, &err), TF_OK);
    ck_assert_int_eq(memcmp(db, db1, cols * sizeof *db), 0); /* same bits on 1 and 2 threads */
    for (int j = 0; j < cols; j++) {
        want[j] += 0.25;
        db[j] = 0.25f;
    }
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, rows, cols, db, true, &err), TF_OK);
    ASSERT_CLOSE(db, want, (size_t)cols, 1e-6);
    /* rows = 1, rows = 0 */
    ck_assert_int_eq(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, 1, 3, db, false, &err), TF_OK);
    ck_assert(db[2] == dy[2]);
    ck_assert_int_eq(vt->sum_rows(be, NULL, NULL, TF_DTYPE_F32, 0, 3, db, false, &err), TF_OK);
    ck_assert(db[2] == 0.0f);
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_BF16, 1, 3, db, false, &err), TF_ERR_PLUGIN,
               "sum_rows: dy dtype BF16");
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, -1, 3, db, false, &err), TF_ERR_RUNTIME,
               "rows must be >= 0");
    ASSERT_ERR(vt->sum_rows(be, NULL, dy, TF_DTYPE_F32, 1, 3, NULL, false, &err), TF_ERR_RUNTIME,
               "dbias is NULL");
    ASSERT_ERR(vt->sum_rows(be, NULL, NULL, TF_DTYPE_F32, 1, 3, db, false, &err), TF_ERR_RUNTIME,
               "dy is NULL");
    free(dy), free(db), free(db1), free(want);
}
END_TEST

START_TEST(test_sum_squares)
{
    size_t n = 1000003;
    float *x = falloc(n), out = -1, out1 = -1;
    fill(x, n, -2, 2);
    double want = 0.0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, n, &out, &err), TF_OK);
    ck_assert_msg(fabs(out - want) <= 1e-7 * want, "%g vs %g", out, want);
    ck_assert_int_eq(vt->sum_squares(be1, NULL, x, n, &out1, &err), TF_OK);
    ck_assert(out == out1);
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, 3, &out, &err), TF_OK);
    ck_assert(fabs(out - (x[0] * x[0] + x[1] * x[1] + x[2] * x[2])) < 1e-6);
    ck_assert_int_eq(vt->sum_squares(be, NULL, NULL, 0, &out, &err), TF_OK);
    ck_assert(out == 0.0f);
    x[5] = NAN;
    ck_assert_int_eq(vt->sum_squares(be, NULL, x, n, &out, &err), TF_OK);
    ck_assert(isnan(out));
    ASSERT_ERR(vt->sum_squares(be, NULL, x, n, NULL, &err), TF_ERR_RUNTIME, "out is NULL");
    ASSERT_ERR(vt->sum_squares(be, NULL, NULL, 3, &out, &err), TF_ERR_RUNTIME, "x is NULL");
    free(x);
}
END_TEST

START_TEST(test_finite_check)
{
    size_t n = 100000;
    float *x = falloc(n);
    fill(x, n, -1e30f, 1e30f);
    int32_t found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    x[n - 1] = INFINITY;
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    x[n - 1] = 0;
    x[77777] = -NAN;
    found = 0;
    ck_assert_int_eq(vt->finite_check(be1, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    x[77777] = FLT_MAX;
    found = 1; /* |= : a flag already set stays set */
    ck_assert_int_eq(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    uint16_t h[4] = {tf_f32_to_f16(1.0f), tf_f32_to_f16(65504.0f), 0, 0};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, h, 4, TF_DTYPE_F16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    h[3] = tf_f32_to_f16(1e6f); /* overflows to inf */
    ck_assert_int_eq(vt->finite_check(be, NULL, h, 4, TF_DTYPE_F16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    uint16_t bf[3] = {tf_f32_to_bf16(3e38f), tf_f32_to_bf16(-1.0f), 0};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, bf, 3, TF_DTYPE_BF16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    bf[2] = tf_f32_to_bf16(NAN);
    ck_assert_int_eq(vt->finite_check(be, NULL, bf, 3, TF_DTYPE_BF16, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    double d[2] = {DBL_MAX, -HUGE_VAL};
    found = 0;
    ck_assert_int_eq(vt->finite_check(be, NULL, d, 1, TF_DTYPE_F64, &found, &err), TF_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_int_eq(vt->finite_check(be, NULL, d, 2, TF_DTYPE_F64, &found, &err), TF_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(vt->finite_check(be, NULL, NULL, 0, TF_DTYPE_F32, &found, &err), TF_OK);
    ASSERT_ERR(vt->finite_check(be, NULL, x, n, TF_DTYPE_I32, &found, &err), TF_ERR_PLUGIN,
               "x dtype I32 is not supported");
    ASSERT_ERR(vt->finite_check(be, NULL, x, n, TF_DTYPE_F32, NULL, &err), TF_ERR_RUNTIME,
               "found is NULL");
    ASSERT_ERR(vt->finite_check(be, NULL, NULL, n, TF_DTYPE_F32, &found, &err), TF_ERR_RUNTIME,
               "x is NULL");
    free(x);
}
END_TEST

/* --- layernorm ------------------------------------------------------------------ */

/* y = LN(x + res) in double; returns sum(y * w) (for finite differences). */
static double ln_ref(const double *x, const double *res, const double *gamma,
                     const double *beta, int rows, int cols, double eps, double *y,
                     const double *w)
{
    double obj = 0.0;
    for (int r = 0; r < rows; r++) {
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < cols; j++) mean += x[r * cols + j] + (res ? res[r * cols + j] : 0);
        mean /= cols;
        for (int j = 0; j < cols; j++) {
            double d = x[r * cols + j] + (res ? res[r * cols + j] : 0) - mean;
            var += d * d;
        }
        var /= cols;
        for (int j = 0; j < cols; j++) {
            double in = x[r * cols + j] + (res ? res[r * cols + j] : 0);
            double v = (in - mean) / sqrt(var + eps) * gamma[j] + beta[j];
            if (y) y[r * cols + j] = v;
            if (w) obj += v * w[r * cols + j];
        }
    }
    return obj;
}

START_TEST(test_layernorm_fwd)
{
    int rows = 70, cols = 384;
    size_t n = (size_t)rows * cols;
    float *x = falloc(n), *res = falloc(n), *in = falloc(n), *y = falloc(n), *y1 = falloc(n);
    float *g = falloc(cols), *bt = falloc(cols), *mean = falloc(rows), *rstd = falloc(rows);
    double *xd = dalloc(n), *rd = dalloc(n), *gd = dalloc(cols), *bd = dalloc(cols), *want = dalloc(n);
    fill(x, n, -3, 5);
    fill(res, n, -1, 1);
    fill(g, cols, 0.5f, 1.5f);
    fill(bt, cols, -0.5f, 0.5f);
    to_double(x, xd, n), to_double(res, rd, n), to_double(g, gd, cols), to_double(bt, bd, cols);
    ln_ref(xd, rd, gd, bd, rows, cols, 1e-12, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, res, in, y, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    ASSERT_ALL(n, in[i] == x[i] + res[i]);
    for (int r = 0; r < rows; r++) {
        double m = 0.0;
        for (int j = 0; j < cols; j++) m += (double)in[r * cols + j];
        m /= cols;
        ck_assert(fabs(mean[r] - m) <= 1e-6 * fmax(1.0, fabs(m)));
    }
    /* 1 thread: same bits */
    ck_assert_int_eq(vt->layernorm_fwd(be1, NULL, x, res, in, y1, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* no residual, in_out NULL; then y aliasing x */
    ln_ref(xd, NULL, gd, bd, rows, cols, 1e-5, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, rows, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, x, g, bt, mean, rstd, rows, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(x, want, n, 5e-6);
    ASSERT_ALL(n, in[i] == (float)xd[i]); /* in_out got x */
    /* a large mean and a small spread: no cancellation (stats in double) */
    for (size_t i = 0; i < n; i++) x[i] = 1000.0f + frand(-0.01f, 0.01f);
    to_double(x, xd, n);
    ln_ref(xd, NULL, gd, bd, rows, cols, 1e-12, want, NULL);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, rows, cols,
                                       1e-12f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(y, want, n, 5e-6);
    /* rows = 1, a constant row: var = 0, y = beta exactly (eps keeps rstd finite) */
    for (int j = 0; j < cols; j++) x[j] = 2.5f;
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, cols,
                                       1e-5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL((size_t)cols, y[i] == bt[i]);
    ck_assert(fabsf(rstd[0] - 1.0f / sqrtf(1e-5f)) < 1e-3f * rstd[0]);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                       0, cols, 1e-5f, TF_DTYPE_F32, &err), TF_OK);
    /* errors */
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, res, NULL, y, g, bt, mean, rstd, 1, cols, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "in_out is NULL but residual");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 0, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "cols must be >= 1, got 0");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, NULL, bt, mean, rstd, 1, 4, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "gamma is NULL");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, NULL, 1, 4, 1e-5f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "rstd is NULL");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 4, -1.0f,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "eps must be finite and >= 0");
    ASSERT_ERR(vt->layernorm_fwd(be, NULL, x, NULL, NULL, y, g, bt, mean, rstd, 1, 4, 1e-5f,
                                 TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "x dtype F16");
    free(x), free(res), free(in), free(y), free(y1), free(g), free(bt), free(mean), free(rstd);
    free(xd), free(rd), free(gd), free(bd), free(want);
}
END_TEST

START_TEST(test_layernorm_bwd)
{
    int rows = 37, cols = 96;
    size_t n = (size_t)rows * cols;
    double eps = 1e-5;
    float *x = falloc(n), *in = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
    float *g = falloc(cols), *bt = falloc(cols), *mean = falloc(rows), *rstd = falloc(rows);
    float *dg = falloc(cols), *db = falloc(cols), *dg1 = falloc(cols), *db1 = falloc(cols);
    double *xd = dalloc(n), *gd = dalloc(cols), *bd = dalloc(cols), *w = dalloc(n);
    double *dx_fd = dalloc(n), *dg_fd = dalloc(cols), *db_fd = dalloc(cols);
    fill(x, n, -2, 3);
    fill(g, cols, 0.5f, 1.5f);
    fill(bt, cols, -0.5f, 0.5f);
    fill(dy, n, -1, 1);
    to_double(x, xd, n), to_double(g, gd, cols), to_double(bt, bd, cols), to_double(dy, w, n);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, y, g, bt, mean, rstd, rows, cols,
                                       (float)eps, TF_DTYPE_F32, &err), TF_OK);
    /* central differences of sum(LN(x) * dy) in double */
    double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = xd[i];
        xd[i] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep;
        dx_fd[i] = (fp - fm) / (2 * h);
    }
    for (int j = 0; j < cols; j++) {
        double keep = gd[j];
        gd[j] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        gd[j] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        gd[j] = keep;
        dg_fd[j] = (fp - fm) / (2 * h) + 0.5; /* + what dgamma held before */
        for (int r = 0; r < rows; r++) db_fd[j] += w[r * cols + j];
        db_fd[j] += 0.25;
        dg[j] = dg1[j] = 0.5f;
        db[j] = db1[j] = 0.25f;
    }
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows,
                                       cols, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_CLOSE(dx, dx_fd, n, 2e-5);
    ASSERT_CLOSE(dg, dg_fd, (size_t)cols, 2e-5);
    ASSERT_CLOSE(db, db_fd, (size_t)cols, 1e-6);
    /* 1 thread: the same bits */
    float *dx1 = falloc(n);
    ck_assert_int_eq(vt->layernorm_bwd(be1, NULL, dy, in, g, mean, rstd, dx1, false, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dx, dx1, n * sizeof *dx), 0);
    ck_assert_int_eq(memcmp(dg, dg1, cols * sizeof *dg), 0);
    ck_assert_int_eq(memcmp(db, db1, cols * sizeof *db), 0);
    /* dx_accumulate adds; dx aliasing dy gives the same */
    for (size_t i = 0; i < n; i++) dx1[i] = 1.0f;
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx1, true, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, fabsf(dx1[i] - (1.0f + dx[i])) <= 1e-6f);
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dy, false, dg1, db1,
                                       rows, cols, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dy, dx, n * sizeof *dx), 0);
    /* rows whose mean is 1e5 times their spread: the backward stays accurate */
    for (size_t i = 0; i < n; i++) x[i] = 1000.0f + frand(-0.01f, 0.01f);
    to_double(x, xd, n);
    ck_assert_int_eq(vt->layernorm_fwd(be, NULL, x, NULL, in, y, g, bt, mean, rstd, rows, cols,
                                       (float)eps, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i += 7) {
        double keep = xd[i];
        xd[i] = keep + h;
        double fp = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep - h;
        double fm = ln_ref(xd, NULL, gd, bd, rows, cols, eps, NULL, w);
        xd[i] = keep;
        dx_fd[i / 7] = (fp - fm) / (2 * h);
    }
    for (int j = 0; j < cols; j++) dg[j] = db[j] = 0.0f;
    for (size_t i = 0; i < n; i++) dy[i] = (float)w[i]; /* dy was overwritten above */
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows,
                                       cols, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i += 7) dx1[i / 7] = dx[i];
    ASSERT_CLOSE(dx1, dx_fd, (n + 6) / 7, 1e-4);
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, NULL, db, rows,
                                 cols, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "dgamma is NULL");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, NULL, g, mean, rstd, dx, false, dg, db, rows,
                                 cols, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "in is NULL");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, -1, cols,
                                 TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "rows must be >= 0");
    ASSERT_ERR(vt->layernorm_bwd(be, NULL, dy, in, g, mean, rstd, dx, false, dg, db, rows, cols,
                                 TF_DTYPE_BF16, &err), TF_ERR_PLUGIN, "BF16");
    ck_assert_int_eq(vt->layernorm_bwd(be, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, NULL,
                                       NULL, 0, cols, TF_DTYPE_F32, &err), TF_OK);
    free(x), free(in), free(y), free(dy), free(dx), free(dx1), free(g), free(bt), free(mean);
    free(rstd), free(dg), free(db), free(dg1), free(db1), free(xd), free(gd), free(bd), free(w);
    free(dx_fd), free(dg_fd), free(db_fd);
}
END_TEST

/* --- attention -------------------------------------------------------------------- */

/* HF BertSelfAttention in double, dropout 0; returns sum(out * w). */
static double attn_ref(const double *qkv, const int32_t *mask, int B, int S, int nh, int hd,
                       double scale, double *out, const double *w)
{
    int H = nh * hd;
    double obj = 0.0;
    double *sc = dalloc((size_t)S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++) {
                const double *q = qkv + ((size_t)b * S + i) * 3 * H + h * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < S; j++) {
                    const double *k = qkv + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    double s = 0.0;
                    for (int t = 0; t < hd; t++) s += q[t] * k[t];
                    s = s * scale;
                    if (mask) s += (1.0 - mask[b * S + j]) * -(double)FLT_MAX;
                    sc[j] = s;
                    mx = fmax(mx, s);
                }
                for (int j = 0; j < S; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int t = 0; t < hd; t++) {
                    double o = 0.0;
                    for (int j = 0; j < S; j++)
                        o += sc[j] / sum * qkv[((size_t)b * S + j) * 3 * H + 2 * H + h * hd + t];
                    size_t oi = ((size_t)b * S + i) * H + h * hd + t;
                    if (out) out[oi] = o;
                    if (w) obj += o * w[oi];
                }
            }
    free(sc);
    return obj;
}

/* Attention backward in double from the probabilities the forward saved
 * (and its keep mask, when dropout was on): the chain rule as autograd runs
 * it, so it also covers fully masked rows, whose scores are constant in
 * floating point (finite differences see 0 there; autograd does not).
 * dd [B, S, 3H] is overwritten. */
static void attn_bwd_ref(const double *qd, const float *P, const uint8_t *keep, float dscale,
                         const float *dout, int B, int S, int nh, int hd, double scale,
                         double *dd)
{
    int H = nh * hd;
    memset(dd, 0, sizeof(double) * (size_t)B * S * 3 * H);
    double *dp = dalloc((size_t)S), *pd = dalloc((size_t)S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++) {
                size_t row = (((size_t)b * nh + h) * S + i) * S;
                const float *go = dout + ((size_t)b * S + i) * H + h * hd;
                const double *q = qd + ((size_t)b * S + i) * 3 * H + h * hd;
                double dot = 0.0;
                for (int j = 0; j < S; j++) {
                    double m = keep ? (keep[row + j] ? dscale : 0.0) : 1.0;
                    const double *v = qd + ((size_t)b * S + j) * 3 * H + 2 * H + h * hd;
                    double s = 0.0;
                    for (int t = 0; t < hd; t++) s += go[t] * v[t];
                    dp[j] = s * m;
                    pd[j] = P[row + j] * m;
                    dot += dp[j] * P[row + j];
                }
                for (int j = 0; j < S; j++) {
                    double ds = P[row + j] * (dp[j] - dot) * scale;
                    double *dq = dd + ((size_t)b * S + i) * 3 * H + h * hd;
                    double *dk = dd + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    double *dv = dk + H;
                    const double *k = qd + ((size_t)b * S + j) * 3 * H + H + h * hd;
                    for (int t = 0; t < hd; t++) {
                        dq[t] += ds * k[t];
                        dk[t] += ds * q[t];
                        dv[t] += pd[j] * go[t];
                    }
                }
            }
    free(dp), free(pd);
}

static void *alloc_save(tf_backend *b, const tf_attention_desc *d)
{
    size_t bytes = vt->attention_save_bytes(b, d);
    ck_assert_uint_gt(bytes, 0);
    void *p = NULL;
    ck_assert_int_eq(vt->alloc(b, bytes, TF_MEM_DEVICE, &p, &err), TF_OK);
    return p;
}

START_TEST(test_attention_fwd)
{
    int B = 3, S = 37, nh = 4, hd = 16, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no), *out2 = falloc(no);
    double *qd = dalloc(nq), *want = dalloc(no);
    int32_t *mask = calloc((size_t)B * S, sizeof *mask);
    fill(qkv, nq, -2, 2);
    to_double(qkv, qd, nq);
    for (int j = 0; j < S; j++) {
        mask[0 * S + j] = 1;               /* no padding */
        mask[1 * S + j] = j < 20;          /* padded */
        mask[2 * S + j] = 0;               /* fully masked: uniform, as HF */
    }
    tf_attention_desc d = {B, S, nh, hd, 1.0f / sqrtf((float)hd), 0.0f, 1, 2,
                           TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    attn_ref(qd, mask, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out, save, true, &err), TF_OK);
    ASSERT_CLOSE(out, want, no, 2e-5);
    /* the fully masked batch item: every row is the mean of v */
    for (int t = 0; t < H; t++) {
        double m = 0.0;
        for (int j = 0; j < S; j++) m += qd[((size_t)2 * S + j) * 3 * H + 2 * H + t];
        ck_assert(fabs(out[((size_t)2 * S + 5) * H + t] - m / S) < 1e-5);
    }
    /* saved probabilities: rows sum to 1, padded keys exactly 0 */
    const float *P = save;
    for (int h = 0; h < nh; h++)
        for (int qi = 0; qi < S; qi++) {
            const float *row = P + (((size_t)1 * nh + h) * S + qi) * S;
            double sum = 0.0;
            for (int j = 0; j < S; j++) sum += row[j];
            ck_assert(fabs(sum - 1.0) < 1e-5);
            ASSERT_ALL((size_t)(S - 20), row[20 + i] == 0.0f);
        }
    /* eval without save, on 1 thread: same bits */
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, mask, out1, NULL, false, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out1, no * sizeof *out), 0);
    /* no mask = all ones */
    for (int j = 0; j < B * S; j++) mask[j] = 1;
    attn_ref(qd, NULL, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, save, false, &err), TF_OK);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out2, save, false, &err), TF_OK);
    ASSERT_CLOSE(out, want, no, 2e-5);
    ck_assert_int_eq(memcmp(out, out2, no * sizeof *out), 0);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(out1), free(out2), free(qd), free(want), free(mask);
}
END_TEST

/* Long sequences go through the scratch in row blocks (S > 512 here). */
START_TEST(test_attention_row_blocks)
{
    int B = 1, S = 600, nh = 2, hd = 4, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *out2 = falloc(no), *dout = falloc(no);
    float *dq = falloc(nq), *dq2 = falloc(nq);
    double *qd = dalloc(nq), *want = dalloc(no);
    fill(qkv, nq, -1, 1);
    fill(dout, no, -1, 1);
    to_double(qkv, qd, nq);
    tf_attention_desc d = {B, S, nh, hd, 0.5f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    attn_ref(qd, NULL, B, S, nh, hd, d.scale, want, NULL);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, NULL, false, &err), TF_OK);
    ASSERT_CLOSE(out, want, no, 5e-5); /* sums of 600 terms */
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out2, save, true, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out2, no * sizeof *out), 0);
    /* backward in blocks of 436 rows = backward in one block (the block size
     * only changes how dk, dv are summed: same values to rounding) */
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out2, save, dout, dq, &err), TF_OK);
    double *dd = dalloc(nq);
    attn_bwd_ref(qd, save, NULL, 1.0f, dout, B, S, nh, hd, d.scale, dd);
    ASSERT_CLOSE(dq, dd, nq, 5e-5);
    ck_assert_int_eq(vt->attention_bwd(be1, NULL, &d, qkv, NULL, out2, save, dout, dq2, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq2, nq * sizeof *dq), 0);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(out2), free(dout), free(dq), free(dq2), free(qd), free(want), free(dd);
}
END_TEST

START_TEST(test_attention_bwd_fd)
{
    int B = 2, S = 6, nh = 2, hd = 3, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H;
    float *qkv = falloc(nq), *out = falloc(no), *dout = falloc(no), *dqkv = falloc(nq);
    double *qd = dalloc(nq), *w = dalloc(no), *fd = dalloc(nq);
    int32_t mask[12] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}; /* item 1 fully masked */
    fill(qkv, nq, -1.5f, 1.5f);
    fill(dout, no, -1, 1);
    to_double(qkv, qd, nq);
    to_double(dout, w, no);
    tf_attention_desc d = {B, S, nh, hd, 0.577f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, mask, out, save, true, &err), TF_OK);
    for (size_t i = 0; i < nq; i++) dqkv[i] = NAN; /* overwritten, not accumulated */
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, mask, out, save, dout, dqkv, &err), TF_OK);
    /* the padded keys' work was skipped; without the mask the backward does
     * it all, and gets the same bits (their probabilities are exactly 0) */
    float *dq_full = falloc(nq);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq_full, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq_full, dqkv, nq * sizeof *dqkv), 0);
    /* dk, dv rows of item 0's padded keys (4, 5): 0 */
    ASSERT_ALL((size_t)2 * 2 * H, dqkv[(4 + i / (2 * H)) * 3 * H + H + i % (2 * H)] == 0.0f);
    free(dq_full);
    double *an = dalloc(nq);
    attn_bwd_ref(qd, save, NULL, 1.0f, dout, B, S, nh, hd, d.scale, an);
    ASSERT_CLOSE(dqkv, an, nq, 1e-5);
    /* the reference against central differences, on item 0 (item 1 is fully
     * masked: constant in floating point, see attn_bwd_ref) */
    double h = 1e-6, worst = 0.0;
    size_t n0 = nq / B;
    for (size_t i = 0; i < n0; i++) {
        double keep = qd[i];
        qd[i] = keep + h;
        double fp = attn_ref(qd, mask, B, S, nh, hd, d.scale, NULL, w);
        qd[i] = keep - h;
        double fm = attn_ref(qd, mask, B, S, nh, hd, d.scale, NULL, w);
        qd[i] = keep;
        fd[i] = (fp - fm) / (2 * h);
        worst = fmax(worst, fabs(fd[i] - an[i]));
    }
    /* the reference works from the saved f32 probabilities: ~1e-7 relative */
    ck_assert_msg(worst < 1e-6 * fmax(1.0, max_abs(an, n0)), "fd vs analytic: %g", worst);
    ASSERT_CLOSE(dqkv, fd, n0, 1e-5);
    /* fully masked rows: probabilities uniform, gradients still flow to q, k, v */
    double g1 = 0.0;
    for (size_t i = n0; i < nq; i++) g1 += fabs(dqkv[i]);
    ck_assert(g1 > 0.0);
    free(an);
    vt->free(be, save, TF_MEM_DEVICE);
    free(qkv), free(out), free(dout), free(dqkv), free(qd), free(w), free(fd);
}
END_TEST

START_TEST(test_attention_dropout)
{
    int B = 2, S = 64, nh = 3, hd = 8, H = nh * hd;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H, np = (size_t)B * nh * S * S;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no), *dout = falloc(no);
    float *dq = falloc(nq), *dq1 = falloc(nq);
    fill(qkv, nq, -1, 1);
    fill(dout, no, -1, 1);
    tf_attention_desc d = {B, S, nh, hd, 0.35f, 0.25f, 42, 7, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d), *save1 = alloc_save(be1, &d);
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d, qkv, NULL, out, save, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, out1, no * sizeof *out), 0);
    ck_assert_int_eq(memcmp(save, save1, np * 5), 0);
    const float *P = save;
    const uint8_t *keep = (const uint8_t *)(P + np);
    /* the mask of (b, h, i, j) is element (h * 2^16 + i) * 2^16 + j of stream
     * (seed, offset + b): global row b, tfcore/backend.h "Dropout masks" */
    uint8_t *want_keep = malloc(np);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i++)
                cpu_dropout_mask(42, 7 + (uint64_t)b, (((uint64_t)h << 16) + (uint64_t)i) << 16, (size_t)S,
                                 0.25f, want_keep + (((size_t)b * nh + h) * S + i) * S);
    ck_assert_int_eq(memcmp(keep, want_keep, np), 0);
    size_t kept = 0;
    for (size_t i = 0; i < np; i++) kept += keep[i];
    double rate = (double)kept / np; /* 24576 draws: sigma 0.0028 */
    ck_assert_msg(fabs(rate - 0.75) < 0.015, "keep rate %g", rate);
    /* out = (P * keep / 0.75) v, from the saved probabilities */
    float sc = 1.0f / 0.75f;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < S; i += 7)
                for (int t = 0; t < hd; t++) {
                    double o = 0.0;
                    size_t row = (((size_t)b * nh + h) * S + i) * S;
                    for (int j = 0; j < S; j++)
                        o += (double)(P[row + j] * (keep[row + j] ? sc : 0.0f)) *
                             qkv[((size_t)b * S + j) * 3 * H + 2 * H + h * hd + t];
                    ck_assert(fabs(out[((size_t)b * S + i) * H + h * hd + t] - o) < 1e-5);
                }
    /* another offset, another mask; eval ignores dropout */
    tf_attention_desc d2 = d;
    d2.offset = 8;
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &d2, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, (const uint8_t *)((float *)save1 + np), np), 0);
    /* backward with dropout: 1 and 2 threads agree bit for bit, and match an
     * analytic double backward through the saved mask (spot checked on dv) */
    ck_assert_int_eq(vt->attention_fwd(be1, NULL, &d, qkv, NULL, out1, save1, true, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be1, NULL, &d, qkv, NULL, out1, save1, dout, dq1, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq1, nq * sizeof *dq), 0);
    double *qd = dalloc(nq), *dd = dalloc(nq);
    to_double(qkv, qd, nq);
    attn_bwd_ref(qd, P, keep, sc, dout, B, S, nh, hd, d.scale, dd);
    ASSERT_CLOSE(dq, dd, nq, 2e-5);
    free(qd), free(dd);
    vt->free(be, save, TF_MEM_DEVICE);
    vt->free(be1, save1, TF_MEM_DEVICE);
    free(qkv), free(out), free(out1), free(dout), free(dq), free(dq1), free(want_keep);
}
END_TEST

START_TEST(test_attention_errors)
{
    float buf[64] = {0};
    tf_attention_desc ok = {1, 2, 1, 2, 1.0f, 0.0f, 0, 0, TF_DTYPE_F32, TF_MATMUL_FP32};
    tf_attention_desc d;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &ok), 64); /* 4 probs * 5 bytes, rounded */
    ck_assert_int_eq(vt->attention_fwd(be, NULL, &ok, buf, NULL, buf + 12, buf + 40, true, &err), TF_OK);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &ok, buf, NULL, buf + 12, NULL, true, &err),
               TF_ERR_RUNTIME, "save is NULL in training");
    ASSERT_ERR(vt->attention_fwd(be, NULL, NULL, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "desc is NULL");
    d = ok, d.seq = 0;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &d), 0);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "seq must be >= 1, got 0");
    d = ok, d.dropout = 1.0f;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "dropout must be in [0, 1), got 1");
    d = ok, d.scale = INFINITY;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "scale must be finite");
    d = ok, d.mode = TF_MATMUL_TF32;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_PLUGIN, "matmul mode 1 is not supported");
    d = ok, d.dtype = TF_DTYPE_F16;
    ASSERT_ERR(vt->attention_bwd(be, NULL, &d, buf, NULL, buf, buf, buf, buf, &err),
               TF_ERR_PLUGIN, "qkv dtype F16");
    d = ok, d.seq = 300000;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "seq 300000 is longer than");
    d = ok, d.heads = 1 << 20, d.head_dim = 1 << 20;
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "is too large");
    d = ok, d.batch = 1 << 30, d.heads = 1 << 12, d.seq = 1 << 17;
    ck_assert_uint_eq(vt->attention_save_bytes(be, &d), SIZE_MAX);
    ASSERT_ERR(vt->attention_fwd(be, NULL, &d, buf, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "overflows");
    ASSERT_ERR(vt->attention_bwd(be, NULL, &ok, buf, NULL, buf, NULL, buf, buf, &err),
               TF_ERR_RUNTIME, "save is NULL");
    ASSERT_ERR(vt->attention_bwd(be, NULL, &ok, buf, NULL, buf, buf, NULL, buf, &err),
               TF_ERR_RUNTIME, "dout is NULL");
    ASSERT_ERR(vt->attention_fwd(be, NULL, &ok, NULL, NULL, buf, NULL, false, &err),
               TF_ERR_RUNTIME, "qkv is NULL");
}
END_TEST

/* --- activations ------------------------------------------------------------------- */

/* The vectorizable math against double libm over dense grids. */
static double ulps(float got, double want)
{
    float w = (float)want;
    double u = (double)nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs((double)got - want) / u;
}

START_TEST(test_math_accuracy)
{
    double worst_exp = 0, worst_tanh = 0, worst_cdf = 0, worst_pdf = 0;
    for (double v = -87.0; v <= 88.5; v += 1.7e-4) {
        float x = (float)v;
        worst_exp = fmax(worst_exp, ulps(cpu_expf(x), exp((double)x)));
    }
    for (double v = -12.0; v <= 12.0; v += 3e-5) {
        float x = (float)v;
        worst_tanh = fmax(worst_tanh, ulps(cpu_tanhf(x), tanh((double)x)));
        worst_cdf = fmax(worst_cdf, ulps(cpu_normal_cdf(x), 0.5 * erfc(-(double)x / sqrt(2.0))));
        worst_pdf = fmax(worst_pdf, ulps(cpu_normal_pdf(x), exp(-(double)x * x / 2) / sqrt(2 * M_PI)));
    }
    ck_assert_msg(worst_exp <= 2, "exp: %g ulp", worst_exp);
    ck_assert_msg(worst_tanh <= 2, "tanh: %g ulp", worst_tanh);
    ck_assert_msg(worst_cdf <= 8, "Phi: %g ulp", worst_cdf);
    ck_assert_msg(worst_pdf <= 5, "phi: %g ulp", worst_pdf);
    /* special values */
    ck_assert(isnan(cpu_expf(NAN)) && isinf(cpu_expf(INFINITY)) && cpu_expf(-INFINITY) == 0.0f);
    ck_assert(cpu_expf(88.8f) == INFINITY && cpu_expf(-105.0f) == 0.0f);
    ck_assert(cpu_expf(-100.0f) > 0.0f); /* subnormal results are kept */
    ck_assert(fabs(cpu_expf(-100.0f) - exp(-100.0)) <= 0x1p-149); /* one subnormal ulp */
    ck_assert(isnan(cpu_tanhf(NAN)) && cpu_tanhf(INFINITY) == 1.0f && cpu_tanhf(-INFINITY) == -1.0f);
    ck_assert(isnan(cpu_normal_cdf(NAN)) && cpu_normal_cdf(INFINITY) == 1.0f &&
              cpu_normal_cdf(-INFINITY) == 0.0f);
    ck_assert(cpu_tanhf(-0.0f) == 0.0f && signbit(cpu_tanhf(-0.0f)));
}
END_TEST

/* dgelu/dx in double */
static double gelu_grad_ref(double x, tf_gelu_kind k)
{
    if (k == TF_GELU_ERF) return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
    double b = sqrt(2.0 / M_PI), u = b * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * b * (1 + 3 * 0.044715 * x * x);
}

START_TEST(test_gelu_tanh_ops)
{
    size_t n = 200001;
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
    double *want = dalloc(n);
    for (size_t i = 0; i < n; i++) x[i] = -10.0f + 20.0f * (float)i / (float)(n - 1);
    fill(dy, n, -1, 1);
    for (int k = 0; k < 2; k++) {
        tf_gelu_kind kind = (tf_gelu_kind)k;
        ck_assert_int_eq(vt->gelu_fwd(be, NULL, x, y, n, kind, TF_DTYPE_F32, &err), TF_OK);
        for (size_t i = 0; i < n; i++) want[i] = kind == TF_GELU_ERF ? gelu_erf_ref(x[i]) : gelu_tanh_ref(x[i]);
        /* relative to the value, even in the left tail (down to 1e-20 for erf) */
        double e = 0.0;
        for (size_t i = 0; i < n; i++)
            if (fabs(want[i]) > 1e-20) e = fmax(e, fabs(y[i] - want[i]) / fabs(want[i]));
        ck_assert_msg(e < (kind == TF_GELU_ERF ? 2e-6 : 2e-5), "gelu %d: %g", k, e);
        ck_assert_int_eq(vt->gelu_bwd(be, NULL, dy, x, dx, n, kind, TF_DTYPE_F32, &err), TF_OK);
        for (size_t i = 0; i < n; i++) want[i] = dy[i] * gelu_grad_ref(x[i], kind);
        /* gelu' crosses 0 near x = -0.75: compare against |dy| there */
        e = 0.0;
        for (size_t i = 0; i < n; i++)
            e = fmax(e, fabs(dx[i] - want[i]) / fmax(fabs(want[i]), 1e-2 * fabs(dy[i])));
        ck_assert_msg(e < 1e-5, "gelu_bwd %d: %g", k, e);
        /* finite differences of the double reference at a few points */
        for (double v = -4.0; v <= 4.0; v += 0.37) {
            double hh = 1e-6;
            double f1 = kind == TF_GELU_ERF ? gelu_erf_ref(v + hh) - gelu_erf_ref(v - hh)
                                            : gelu_tanh_ref(v + hh) - gelu_tanh_ref(v - hh);
            ck_assert(fabs(f1 / (2 * hh) - gelu_grad_ref(v, kind)) < 1e-8);
        }
        /* dx aliasing dy */
        float *dy2 = falloc(n);
        memcpy(dy2, dy, n * sizeof *dy);
        ck_assert_int_eq(vt->gelu_bwd(be, NULL, dy2, x, dy2, n, kind, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(memcmp(dy2, dx, n * sizeof *dx), 0);
        free(dy2);
    }
    /* tanh */
    ck_assert_int_eq(vt->tanh_fwd(be, NULL, x, y, n, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i++) want[i] = tanh((double)x[i]);
    ASSERT_CLOSE(y, want, n, 3e-7);
    ck_assert_int_eq(vt->tanh_bwd(be, NULL, dy, y, dx, n, TF_DTYPE_F32, &err), TF_OK);
    for (size_t i = 0; i < n; i++) want[i] = dy[i] * (1.0 - (double)y[i] * y[i]);
    ASSERT_CLOSE(dx, want, n, 5e-6); /* 1 - y*y in float, as torch: cancels near |y| = 1 */
    float *dy3 = falloc(n); /* dx aliasing dy */
    memcpy(dy3, dy, n * sizeof *dy);
    ck_assert_int_eq(vt->tanh_bwd(be, NULL, dy3, y, dy3, n, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dy3, dx, n * sizeof *dx), 0);
    free(dy3);
    for (double v = -3.0; v <= 3.0; v += 0.41) /* 1 - tanh^2 is tanh' */
        ck_assert(fabs((tanh(v + 1e-6) - tanh(v - 1e-6)) / 2e-6 - (1 - tanh(v) * tanh(v))) < 1e-8);
    ck_assert_int_eq(vt->tanh_fwd(be, NULL, x, x, n, TF_DTYPE_F32, &err), TF_OK); /* in place */
    ck_assert_int_eq(memcmp(x, y, n * sizeof *x), 0);
    /* tiny n stays on the calling thread; n = 0 is fine */
    ck_assert_int_eq(vt->gelu_fwd(be, NULL, x, y, 3, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->gelu_fwd(be, NULL, NULL, NULL, 0, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->gelu_fwd(be, NULL, x, y, n, (tf_gelu_kind)2, TF_DTYPE_F32, &err), TF_ERR_RUNTIME,
               "unknown gelu kind 2");
    ASSERT_ERR(vt->gelu_bwd(be, NULL, dy, x, dx, n, (tf_gelu_kind)-1, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "unknown gelu kind -1");
    ASSERT_ERR(vt->gelu_fwd(be, NULL, x, y, n, TF_GELU_ERF, TF_DTYPE_BF16, &err), TF_ERR_PLUGIN,
               "gelu_fwd: x dtype BF16");
    ASSERT_ERR(vt->gelu_bwd(be, NULL, dy, NULL, dx, n, TF_GELU_ERF, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "x is NULL");
    ASSERT_ERR(vt->tanh_fwd(be, NULL, x, NULL, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "y is NULL");
    ASSERT_ERR(vt->tanh_bwd(be, NULL, dy, y, NULL, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME,
               "dx is NULL");
    ASSERT_ERR(vt->tanh_bwd(be, NULL, dy, y, dx, n, TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "F16");
    free(x), free(y), free(dy), free(dx), free(want);
}
END_TEST

/* --- dropout ------------------------------------------------------------------------ */

START_TEST(test_philox_known_answers)
{
    /* the Random123 known-answer vectors for philox4x32-10 */
    uint32_t c[4] = {0, 0, 0, 0}, k[2] = {0, 0};
    cpu_philox4x32_10(c, k);
    ck_assert(c[0] == 0x6627e8d5u && c[1] == 0xe169c58du && c[2] == 0xbc57ac4cu && c[3] == 0x9b00dbd8u);
    uint32_t c2[4] = {~0u, ~0u, ~0u, ~0u}, k2[2] = {~0u, ~0u};
    cpu_philox4x32_10(c2, k2);
    ck_assert(c2[0] == 0x408f276du && c2[1] == 0x41c83b0eu && c2[2] == 0xa20bc7c6u && c2[3] == 0x6d5451fdu);
    uint32_t c3[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
             k3[2] = {0xa4093822u, 0x299f31d0u};
    cpu_philox4x32_10(c3, k3);
    ck_assert(c3[0] == 0xd16cfe09u && c3[1] == 0x94fdccebu && c3[2] == 0x5001e420u && c3[3] == 0x24126ea1u);
    /* the mask recipe: element i is word i%4 of counter (i/4, offset), key seed */
    uint64_t seed = 0x0123456789abcdefull, offset = 0xfedcba9876543210ull;
    uint8_t keep[11];
    cpu_dropout_mask(seed, offset, 5, 11, 0.5f, keep);
    for (int j = 0; j < 11; j++) {
        uint64_t i = 5 + (uint64_t)j;
        uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)((i / 4) >> 32), (uint32_t)offset,
                           (uint32_t)(offset >> 32)};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        cpu_philox4x32_10(ctr, key);
        ck_assert_int_eq(keep[j], (ctr[i % 4] >> 8) >= (1u << 23));
    }
}
END_TEST

START_TEST(test_dropout)
{
    size_t n = 1000003;
    float *x = falloc(n), *y = falloc(n), *y1 = falloc(n), *dx = falloc(n);
    uint8_t *keep = malloc(n), *keep1 = malloc(n), *part = malloc(n);
    fill(x, n, -1, 1);
    float p = 0.1f;
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->dropout_fwd(be1, NULL, x, y1, keep1, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(keep, keep1, n), 0); /* any thread count, the same mask */
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* a pure function of the index: computed in odd pieces, the same */
    for (size_t at = 0; at < n;) {
        size_t len = 1 + (size_t)(urand() * 5000);
        if (len > n - at) len = n - at;
        cpu_dropout_mask(7, 99, at, len, p, part + at);
        at += len;
    }
    ck_assert_int_eq(memcmp(keep, part, n), 0);
    size_t kept = 0;
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) kept += keep[i];
    ASSERT_ALL(n, keep[i] <= 1 && y[i] == (keep[i] ? x[i] * scale : 0.0f));
    ck_assert_msg(fabs((double)kept / n - 0.9) < 0.002, "keep rate %g", (double)kept / n);
    /* another offset or seed: another mask */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, n, p, 7, 100, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, n, p, 8, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    /* backward: dx = dy * keep / (1-p), dx may alias dy */
    ck_assert_int_eq(vt->dropout_bwd(be, NULL, x, keep, dx, n, p, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(dx, y, n * sizeof *dx), 0);
    memcpy(y1, x, n * sizeof *x);
    ck_assert_int_eq(vt->dropout_bwd(be, NULL, y1, keep, y1, n, p, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y1, y, n * sizeof *y), 0);
    /* y aliasing x */
    memcpy(y1, x, n * sizeof *x);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, y1, y1, keep1, n, p, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(y1, y, n * sizeof *y), 0);
    /* p = 0 keeps everything unchanged; p = 1 drops everything */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, 0.0f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, keep[i] == 1 && y[i] == x[i]);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y, keep, n, 1.0f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, keep[i] == 0 && y[i] == 0.0f);
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, NULL, NULL, NULL, 0, 0.5f, 7, 99, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, -0.1f, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1], got -0.1");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, NAN, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1]");
    ASSERT_ERR(vt->dropout_bwd(be, NULL, x, keep, dx, n, 1.5f, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "p must be in [0, 1], got 1.5");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, NULL, n, 0.1f, 7, 99, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "keep is NULL");
    ASSERT_ERR(vt->dropout_bwd(be, NULL, x, NULL, dx, n, 0.1f, TF_DTYPE_F32, &err),
               TF_ERR_RUNTIME, "keep is NULL");
    ASSERT_ERR(vt->dropout_fwd(be, NULL, x, y, keep, n, 0.1f, 7, 99, TF_DTYPE_F16, &err),
               TF_ERR_PLUGIN, "F16");
    free(x), free(y), free(y1), free(dx), free(keep), free(keep1), free(part);
}
END_TEST

/* ABI 1.3: dropout by global row. Row b of a call is global row
 * row_first + b * row_stride, so a batch split into calls (strided rows, as
 * DDP ranks take them, or contiguous ones, as DataParallel's chunks) draws
 * the masks of the whole batch. */
START_TEST(test_dropout_rows)
{
    size_t rows = 6, R = 1001, n = rows * R; /* R % 4 != 0: counters straddle rows */
    float *x = falloc(n), *y = falloc(n), *y1 = falloc(n);
    uint8_t *keep = malloc(n), *keep1 = malloc(n), *want = malloc(R);
    fill(x, n, -1, 1);
    float p = 0.3f;
    tf_dropout_desc d = {.size = sizeof d, .x = x, .y = y, .keep = keep, .rows = rows, .row_elems = R,
                         .p = p, .dt = TF_DTYPE_F32, .seed = 5, .offset = 3ull << 32, .row_first = 10,
                         .row_stride = 1};
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d, &err), TF_OK);
    for (size_t b = 0; b < rows; b++) { /* the contract's formula, row by row */
        cpu_dropout_mask(5, (3ull << 32) + 10 + b, 0, R, p, want);
        ck_assert_int_eq(memcmp(keep + b * R, want, R), 0);
        for (size_t j = 0; j < R; j++)
            ck_assert(y[b * R + j] == x[b * R + j] * (want[j] ? 1.0f / (1.0f - p) : 0.0f));
    }
    /* one thread draws the same */
    tf_dropout_desc d1 = d;
    d1.y = y1, d1.keep = keep1;
    ck_assert_int_eq(vt->dropout_fwd_ex(be1, NULL, &d1, &err), TF_OK);
    ck_assert_int_eq(memcmp(keep, keep1, n), 0);
    /* rank r of 2 takes rows r, r+2, r+4 (first 10 + r, stride 2) */
    for (int r = 0; r < 2; r++) {
        float xs[3 * 1001], ys[3 * 1001];
        uint8_t ks[3 * 1001];
        for (size_t k = 0; k < 3; k++) memcpy(xs + k * R, x + (2 * k + r) * R, R * sizeof *x);
        tf_dropout_desc dr = {.size = sizeof dr, .x = xs, .y = ys, .keep = ks, .rows = 3, .row_elems = R,
                              .p = p, .dt = TF_DTYPE_F32, .seed = 5, .offset = 3ull << 32,
                              .row_first = 10 + (uint64_t)r, .row_stride = 2};
        ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &dr, &err), TF_OK);
        for (size_t k = 0; k < 3; k++) {
            ck_assert_int_eq(memcmp(ks + k * R, keep + (2 * k + r) * R, R), 0);
            ck_assert_int_eq(memcmp(ys + k * R, y + (2 * k + r) * R, R * sizeof *y), 0);
        }
    }
    /* the 1.0 slot is one row, global row 0 */
    ck_assert_int_eq(vt->dropout_fwd(be, NULL, x, y1, keep1, R, p, 5, 3ull << 32, TF_DTYPE_F32, &err), TF_OK);
    cpu_dropout_mask(5, 3ull << 32, 0, R, p, want);
    ck_assert_int_eq(memcmp(keep1, want, R), 0);
    /* another epoch (offset), another mask; in place */
    d1.offset = 4ull << 32;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    ck_assert_int_ne(memcmp(keep, keep1, n), 0);
    memcpy(y1, x, n * sizeof *x);
    d1 = d, d1.x = y1, d1.y = y1, d1.keep = keep1;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    ck_assert_int_eq(memcmp(y, y1, n * sizeof *y), 0);
    /* a descriptor older than the backend's, and bad arguments */
    d1 = d, d1.size = 8;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_PLUGIN, "older than this backend");
    d1 = d, d1.p = 1.5f;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_RUNTIME, "p must be in [0, 1]");
    d1 = d, d1.keep = NULL;
    ASSERT_ERR(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_ERR_RUNTIME, "keep");
    d1 = d, d1.rows = 0;
    ck_assert_int_eq(vt->dropout_fwd_ex(be, NULL, &d1, &err), TF_OK);
    free(x), free(y), free(y1), free(keep), free(keep1), free(want);
}
END_TEST

/* ABI 1.3: attention's mask by global row, and independent of the padded
 * length: a sequence alone at global row 7 draws what it draws as row 1 of a
 * batch starting at row 6, and the same keys at seq 40 as at seq 64. */
START_TEST(test_attention_rows)
{
    int B = 2, S = 64, nh = 2, hd = 8, H = nh * hd, S2 = 40;
    size_t nq = (size_t)B * S * 3 * H, no = (size_t)B * S * H, np = (size_t)B * nh * S * S;
    float *qkv = falloc(nq), *out = falloc(no), *out1 = falloc(no);
    fill(qkv, nq, -1, 1);
    tf_attention_desc d = {B, S, nh, hd, 0.35f, 0.25f, 42, 9ull << 32, TF_DTYPE_F32, TF_MATMUL_FP32};
    void *save = alloc_save(be, &d);
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d, 6, 1, qkv, NULL, out, save, true, &err), TF_OK);
    const uint8_t *keep = (const uint8_t *)((const float *)save + np);
    tf_attention_desc d1 = d;
    d1.batch = 1;
    void *save1 = alloc_save(be, &d1);
    size_t np1 = (size_t)nh * S * S;
    /* sequence 1 alone (its qkv rows), as global row 7 */
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d1, 7, 5, qkv + (size_t)S * 3 * H, NULL, out1, save1, true,
                                          &err),
                     TF_OK);
    ck_assert_int_eq(memcmp((const uint8_t *)((const float *)save1 + np1), keep + np1, np1), 0);
    ck_assert_int_eq(memcmp(out1, out + (size_t)S * H, (size_t)S * H * sizeof *out), 0);
    /* the backward of either agrees with the saved masks (backend-cpu ignores the rows) */
    float *dout = falloc(no), *dq = falloc(nq), *dq1 = falloc(nq);
    fill(dout, no, -1, 1);
    ck_assert_int_eq(vt->attention_bwd_ex(be, NULL, &d, 6, 1, qkv, NULL, out, save, dout, dq, &err), TF_OK);
    ck_assert_int_eq(vt->attention_bwd(be, NULL, &d, qkv, NULL, out, save, dout, dq1, &err), TF_OK);
    ck_assert_int_eq(memcmp(dq, dq1, nq * sizeof *dq), 0);
    /* seq 40: query i, key j < 40 keep what they kept at seq 64 */
    tf_attention_desc d2 = d1;
    d2.seq = S2;
    void *save2 = alloc_save(be, &d2);
    size_t np2 = (size_t)nh * S2 * S2;
    float *qkv2 = falloc((size_t)S2 * 3 * H);
    memcpy(qkv2, qkv, (size_t)S2 * 3 * H * sizeof *qkv2);
    ck_assert_int_eq(vt->attention_fwd_ex(be, NULL, &d2, 6, 1, qkv2, NULL, out1, save2, true, &err), TF_OK);
    const uint8_t *keep2 = (const uint8_t *)((const float *)save2 + np2);
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < S2; i++)
            ck_assert_int_eq(memcmp(keep2 + ((size_t)h * S2 + i) * S2, keep + ((size_t)h * S + i) * S, (size_t)S2), 0);
    /* a row past what the mask indexes */
    tf_attention_desc d3 = d1;
    d3.seq = 65537;
    ASSERT_ERR(vt->attention_fwd_ex(be, NULL, &d3, 0, 1, qkv, NULL, out1, save1, true, &err), TF_ERR_RUNTIME,
               "the dropout masks index at most 65536 positions");
    free(qkv), free(out), free(out1), free(dout), free(dq), free(dq1), free(qkv2);
    vt->free(be, save, TF_MEM_DEVICE), vt->free(be, save1, TF_MEM_DEVICE), vt->free(be, save2, TF_MEM_DEVICE);
}
END_TEST

/* --- add, scale, cast ------------------------------------------------------------------ */

START_TEST(test_add_scale_cast)
{
    size_t n = 100003;
    float *a = falloc(n), *b = falloc(n), *y = falloc(n), *c = falloc(n);
    fill(a, n, -1, 1);
    fill(b, n, -1, 1);
    ck_assert_int_eq(vt->add(be, NULL, a, b, y, n, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, y[i] == a[i] + b[i]);
    memcpy(c, a, n * sizeof *a);
    ck_assert_int_eq(vt->add(be, NULL, c, b, c, n, TF_DTYPE_F32, &err), TF_OK); /* y = a */
    ck_assert_int_eq(memcmp(c, y, n * sizeof *c), 0);
    memcpy(c, b, n * sizeof *b);
    ck_assert_int_eq(vt->add(be, NULL, a, c, c, n, TF_DTYPE_F32, &err), TF_OK); /* y = b */
    ck_assert_int_eq(memcmp(c, y, n * sizeof *c), 0);
    ck_assert_int_eq(vt->scale(be, NULL, y, n, -0.5f, TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL(n, y[i] == c[i] * -0.5f);
    /* casts: f32 -> f16/bf16 -> f32 equals libtfcore's rounding; f64 both ways */
    uint16_t *h = malloc(n * 2);
    double *d = dalloc(n);
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_F16, n, &err), TF_OK);
    ASSERT_ALL(n, (h[i]) == (tf_f32_to_f16(a[i])));
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_F16, c, TF_DTYPE_F32, n, &err), TF_OK);
    ASSERT_ALL(n, c[i] == tf_f16_to_f32(h[i]));
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_BF16, n, &err), TF_OK);
    ASSERT_ALL(n, (h[i]) == (tf_f32_to_bf16(a[i])));
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_BF16, c, TF_DTYPE_F32, n, &err), TF_OK);
    ASSERT_ALL(n, c[i] == tf_bf16_to_f32(h[i]));
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, d, TF_DTYPE_F64, n, &err), TF_OK);
    ck_assert_int_eq(vt->cast(be, NULL, d, TF_DTYPE_F64, c, TF_DTYPE_F32, n, &err), TF_OK);
    ck_assert_int_eq(memcmp(a, c, n * sizeof *a), 0);
    ck_assert_int_eq(vt->cast(be, NULL, a, TF_DTYPE_F32, c, TF_DTYPE_F32, n, &err), TF_OK);
    ck_assert_int_eq(memcmp(a, c, n * sizeof *a), 0);
    ck_assert_int_eq(vt->cast(be, NULL, h, TF_DTYPE_BF16, h, TF_DTYPE_BF16, n, &err), TF_OK);
    ASSERT_ERR(vt->cast(be, NULL, a, TF_DTYPE_F32, h, TF_DTYPE_I32, n, &err), TF_ERR_PLUGIN,
               "cast from F32 to I32 is not supported");
    ASSERT_ERR(vt->cast(be, NULL, a, (tf_dtype)77, h, TF_DTYPE_F32, n, &err), TF_ERR_PLUGIN,
               "cast from ? to F32");
    ASSERT_ERR(vt->cast(be, NULL, NULL, TF_DTYPE_F32, h, TF_DTYPE_F16, n, &err), TF_ERR_RUNTIME,
               "src is NULL");
    ASSERT_ERR(vt->add(be, NULL, a, NULL, y, n, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "b is NULL");
    ASSERT_ERR(vt->add(be, NULL, a, b, y, n, TF_DTYPE_F16, &err), TF_ERR_PLUGIN, "a dtype F16");
    ASSERT_ERR(vt->scale(be, NULL, NULL, n, 2, TF_DTYPE_F32, &err), TF_ERR_RUNTIME, "x is NULL");
    ASSERT_ERR(vt->scale(be, NULL, y, n, 2, TF_DTYPE_BF16, &err), TF_ERR_PLUGIN, "BF16");
    ck_assert_int_eq(vt->scale(be, NULL, NULL, 0, 2, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->add(be, NULL, NULL, NULL, NULL, 0, TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(vt->cast(be, NULL, NULL, TF_DTYPE_F32, NULL, TF_DTYPE_F16, 0, &err), TF_OK);
    free(a), free(b), free(y), free(c), free(h), free(d);
}
END_TEST

/* --- embeddings ------------------------------------------------------------------------ */

START_TEST(test_embedding)
{
    int vocab = 50, dim = 96, rows = 3000;
    float *table = falloc((size_t)vocab * dim), *out = falloc((size_t)rows * dim);
    float *dout = falloc((size_t)rows * dim), *dt = falloc((size_t)vocab * dim),
          *dt1 = falloc((size_t)vocab * dim), *want = falloc((size_t)vocab * dim);
    int32_t *ids = malloc(sizeof(int32_t) * rows);
    fill(table, (size_t)vocab * dim, -1, 1);
    fill(dout, (size_t)rows * dim, -1, 1);
    for (int i = 0; i < rows; i++) ids[i] = (int32_t)(urand() * vocab);
    ids[0] = 0, ids[1] = vocab - 1;
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    for (int i = 0; i < rows; i++)
        ck_assert_int_eq(memcmp(out + (size_t)i * dim, table + (size_t)ids[i] * dim, dim * 4), 0);
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, true,
                                       TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ALL((size_t)rows * dim, out[i] == 2.0f * table[(size_t)ids[i / dim] * dim + i % dim]);
    /* backward: the serial float sum in row order, bit for bit, on 1 and 2 threads */
    for (size_t i = 0; i < (size_t)vocab * dim; i++) dt[i] = dt1[i] = want[i] = 0.125f;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < dim; j++) want[(size_t)ids[i] * dim + j] += dout[(size_t)i * dim + j];
    ck_assert_int_eq(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, vocab, dim,
                                       &err), TF_OK);
    ck_assert_int_eq(vt->embedding_bwd(be1, NULL, ids, rows, dout, TF_DTYPE_F32, dt1, vocab, dim,
                                       &err), TF_OK);
    ck_assert_int_eq(memcmp(dt, want, (size_t)vocab * dim * 4), 0);
    ck_assert_int_eq(memcmp(dt1, want, (size_t)vocab * dim * 4), 0);
    /* a bad id: TF_ERR_DATA naming it and its row, nothing written */
    float *before = falloc((size_t)rows * dim);
    memcpy(before, out, (size_t)rows * dim * 4);
    ids[1234] = vocab;
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, dim, out, false,
                                 TF_DTYPE_F32, &err), TF_ERR_DATA, "id 50 at row 1234 is outside [0, 50)");
    ck_assert_int_eq(memcmp(before, out, (size_t)rows * dim * 4), 0);
    ids[1234] = -3;
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, vocab, dim, &err),
               TF_ERR_DATA, "embedding_bwd: id -3 at row 1234");
    ck_assert_int_eq(memcmp(dt1, dt, (size_t)vocab * dim * 4), 0);
    ids[1234] = 1;
    /* rows = 1; rows = 0 */
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, ids + 7, 1, table, vocab, dim, out, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    ck_assert_int_eq(memcmp(out, table + (size_t)ids[7] * dim, dim * 4), 0);
    ck_assert_int_eq(vt->embedding_fwd(be, NULL, NULL, 0, NULL, vocab, dim, NULL, false,
                                       TF_DTYPE_F32, &err), TF_OK);
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, table, vocab, 0, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "dim must be >= 1");
    ASSERT_ERR(vt->embedding_fwd(be, NULL, ids, rows, NULL, vocab, dim, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "table is NULL");
    ASSERT_ERR(vt->embedding_fwd(be, NULL, NULL, rows, table, vocab, dim, out, false, TF_DTYPE_F32,
                                 &err), TF_ERR_RUNTIME, "ids is NULL");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_BF16, dt, vocab, dim, &err),
               TF_ERR_PLUGIN, "BF16");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, NULL, vocab, dim, &err),
               TF_ERR_RUNTIME, "dtable is NULL");
    ASSERT_ERR(vt->embedding_bwd(be, NULL, ids, rows, dout, TF_DTYPE_F32, dt, 0, dim, &err),
               TF_ERR_RUNTIME, "vocab must be >= 1");
    free(table), free(out), free(dout), free(dt), free(dt1), free(want), free(ids), free(before);
}
END_TEST

/* --- cross-entropy ------------------------------------------------------------------------ */

static double ce_ref(const double *x, int64_t ld, int rows, int classes, const int32_t *labels,
                     int ignore, double *grad, double gscale)
{
    double sum = 0.0;
    int count = 0;
    for (int r = 0; r < rows; r++) count += labels[r] != ignore;
    for (int r = 0; r < rows; r++) {
        const double *xr = x + r * ld;
        if (labels[r] == ignore) {
            if (grad)
                for (int j = 0; j < classes; j++) grad[r * ld + j] = 0.0;
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int j = 0; j < classes; j++) mx = fmax(mx, xr[j]);
        for (int j = 0; j < classes; j++) s += exp(xr[j] - mx);
        double lse = mx + log(s);
        sum += lse - xr[labels[r]];
        if (grad)
            for (int j = 0; j < classes; j++)
                grad[r * ld + j] = gscale * (exp(xr[j] - lse) - (j == labels[r])) / count;
    }
    return count ? sum / count : 0.0;
}

START_TEST(test_cross_entropy)
{
    int rows = 67, classes = 130;
    int64_t ld = 133;
    size_t n = (size_t)rows * ld;
    float *x = falloc(n), *dx = falloc(n), *dx1 = falloc(n), loss = -1, loss1 = -2;
    double *xd = dalloc(n), *want = dalloc(n), *fd = dalloc(n);
    int32_t *lab = malloc(sizeof(int32_t) * rows);
    fill(x, n, -6, 6);
    to_double(x, xd, n);
    for (int r = 0; r < rows; r++) lab[r] = r % 5 == 3 ? -100 : (int32_t)(urand() * classes);
    for (size_t i = 0; i < n; i++) dx[i] = 5.0f; /* the padding must stay untouched */
    double wl = ce_ref(xd, ld, rows, classes, lab, -100, want, 2.0);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss, dx, 2.0f, &err), TF_OK);
    ck_assert_msg(fabs(loss - wl) <= 1e-6 * wl, "loss %g vs %g", loss, wl);
    ASSERT_ALL(n, (int64_t)i % ld < classes ? fabs(dx[i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-9
                                            : dx[i] == 5.0f);
    /* the gradient is d(loss)/d(logits): central differences in double */
    double h = 1e-6;
    for (int r = 0; r < rows; r += 9)
        for (int j = 0; j < classes; j += 13) {
            double keep = xd[r * ld + j];
            xd[r * ld + j] = keep + h;
            double fp = ce_ref(xd, ld, rows, classes, lab, -100, NULL, 1);
            xd[r * ld + j] = keep - h;
            double fm = ce_ref(xd, ld, rows, classes, lab, -100, NULL, 1);
            xd[r * ld + j] = keep;
            ck_assert(fabs(2.0 * (fp - fm) / (2 * h) - dx[r * ld + j]) < 1e-7);
        }
    /* 1 thread: same bits; dlogits NULL: loss only; dlogits aliasing logits */
    ck_assert_int_eq(vt->cross_entropy(be1, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, dx1, 2.0f, &err), TF_OK);
    ck_assert(loss == loss1);
    for (int r = 0; r < rows; r++) ck_assert_int_eq(memcmp(dx + r * ld, dx1 + r * ld, classes * 4), 0);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, NULL, 1.0f, &err), TF_OK);
    ck_assert(loss == loss1);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss1, x, 2.0f, &err), TF_OK);
    for (int r = 0; r < rows; r++) ck_assert_int_eq(memcmp(dx + r * ld, x + r * ld, classes * 4), 0);
    /* every row ignored: loss 0, gradient 0 */
    for (int r = 0; r < rows; r++) lab[r] = 7;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, 7,
                                       &loss, dx, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f);
    ASSERT_ALL(n, (int64_t)i % ld >= classes || dx[i] == 0.0f);
    /* rows = 1, classes = 1: loss 0, gradient 0 */
    float one = 3.0f, g1 = 9;
    int32_t l0 = 0;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, &one, 1, TF_DTYPE_F32, 1, 1, &l0, -100, &loss,
                                       &g1, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f && g1 == 0.0f);
    /* large logits do not overflow (max subtracted) */
    float big[3] = {1000.0f, 999.0f, -1000.0f};
    int32_t l1 = 1;
    ck_assert_int_eq(vt->cross_entropy(be, NULL, big, 3, TF_DTYPE_F32, 1, 3, &l1, -100, &loss,
                                       NULL, 1.0f, &err), TF_OK);
    ck_assert(fabs(loss - (1.0 + log1p(exp(-1.0)))) < 1e-6);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, NULL, 3, TF_DTYPE_F32, 0, 3, NULL, -100, &loss,
                                       NULL, 1.0f, &err), TF_OK);
    ck_assert(loss == 0.0f);
    /* errors */
    for (int r = 0; r < rows; r++) lab[r] = 1;
    lab[40] = classes;
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_DATA,
               "label 130 at row 40 is outside [0, 130) and is not ignore_index -100");
    lab[40] = -1;
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_DATA, "label -1 at row 40");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, 3, TF_DTYPE_F32, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "ld_logits 3 is less than classes 130");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, lab, -100, NULL,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "loss is NULL");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, classes, NULL, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_RUNTIME, "labels is NULL");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F32, rows, 0, lab, -100, &loss, dx,
                                 1.0f, &err), TF_ERR_RUNTIME, "classes must be >= 1");
    ASSERT_ERR(vt->cross_entropy(be, NULL, x, ld, TF_DTYPE_F16, rows, classes, lab, -100, &loss,
                                 dx, 1.0f, &err), TF_ERR_PLUGIN, "logits dtype F16");
    free(x), free(dx), free(dx1), free(xd), free(want), free(fd), free(lab);
}
END_TEST

/* cross_entropy_ex: ε = 0 is the cross_entropy slot bit for bit; ε > 0 is
 * transformers' LabelSmoother (checked here against its formula in double;
 * tests/ref/backend_cpu_vs_torch.py compares with LabelSmoother itself);
 * dlogits may alias logits; short descriptors and ε outside [0, 1] refused. */
START_TEST(test_cross_entropy_smoothed)
{
    int rows = 23, classes = 17;
    size_t n = (size_t)rows * classes;
    float *x = falloc(n), *dx = falloc(n), *dx0 = falloc(n), *xa = falloc(n), loss = -1, loss0 = -2;
    int32_t *lab = malloc(sizeof(int32_t) * rows);
    fill(x, n, -6, 6);
    for (int r = 0; r < rows; r++) lab[r] = r % 4 == 1 ? -100 : (int32_t)(urand() * classes);
    tf_cross_entropy_desc d = {sizeof d, x, classes, TF_DTYPE_F32, rows, classes, lab, -100, 0.0f,
                               &loss, dx, 0.5f};
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    ck_assert_int_eq(vt->cross_entropy(be, NULL, x, classes, TF_DTYPE_F32, rows, classes, lab, -100,
                                       &loss0, dx0, 0.5f, &err), TF_OK);
    ck_assert(loss == loss0);
    ck_assert(memcmp(dx, dx0, n * sizeof *dx) == 0);
    const double eps = 0.2;
    d.label_smoothing = (float)eps;
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    double sum = 0;
    int count = 0;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * classes;
        double mx = -INFINITY, se = 0, sx = 0;
        for (int j = 0; j < classes; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int j = 0; j < classes; j++) se += exp(xr[j] - mx), sx += xr[j] - mx;
        double lse = log(se);
        if (lab[r] == -100) {
            for (int j = 0; j < classes; j++) ck_assert(dx[(size_t)r * classes + j] == 0.0f);
            continue;
        }
        count++;
        sum += (1 - eps) * (lse - (xr[lab[r]] - mx)) + eps * (classes * lse - sx) / classes;
    }
    for (int r = 0; r < rows; r++) {
        if (lab[r] == -100) continue;
        const float *xr = x + (size_t)r * classes;
        double mx = -INFINITY, se = 0;
        for (int j = 0; j < classes; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int j = 0; j < classes; j++) se += exp(xr[j] - mx);
        for (int j = 0; j < classes; j++) {
            double want = 0.5 / count * (exp(xr[j] - mx) / se - (1 - eps) * (j == lab[r]) - eps / classes);
            ck_assert_msg(fabs(dx[(size_t)r * classes + j] - want) <= 1e-6 * fabs(want) + 1e-8,
                          "dlogits[%d, %d] %g vs %g", r, j, dx[(size_t)r * classes + j], want);
        }
    }
    double want_loss = sum / count;
    ck_assert_msg(fabs(loss - want_loss) <= 1e-6 * want_loss, "loss %g vs %g", loss, want_loss);
    /* aliased: the same loss and gradient */
    memcpy(xa, x, n * sizeof *x);
    d.logits = xa;
    d.dlogits = xa;
    ck_assert_int_eq(vt->cross_entropy_ex(be, NULL, &d, &err), TF_OK);
    ck_assert(memcmp(xa, dx, n * sizeof *dx) == 0);
    d.logits = x;
    d.dlogits = dx;
    d.label_smoothing = 1.5f;
    ASSERT_ERR(vt->cross_entropy_ex(be, NULL, &d, &err), TF_ERR_RUNTIME, "label_smoothing must be in [0, 1]");
    d.label_smoothing = 0.1f;
    d.size = 8;
    ASSERT_ERR(vt->cross_entropy_ex(be, NULL, &d, &err), TF_ERR_RUNTIME, "descriptor size 8");
    free(x), free(dx), free(dx0), free(xa), free(lab);
}
END_TEST

/* --- AdamW ---------------------------------------------------------------------------- */

START_TEST(test_adamw)
{
    size_t n = 70001;
    float *p = falloc(n), *g = falloc(n), *m = falloc(n), *v = falloc(n);
    double *pd = dalloc(n), *md = dalloc(n), *vd = dalloc(n);
    fill(p, n, -1, 1);
    to_double(p, pd, n);
    /* out of order, with a gap (elements 60000..60009 belong to nobody) */
    tf_adamw_segment segs[3] = {{60010, n - 60010, 0.0f}, {0, 50000, 0.01f}, {50000, 10000, 0.1f}};
    tf_adamw_hyper hy = {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0.5f};
    for (int step = 1; step <= 10; step++) {
        fill(g, n, -2, 2);
        hy.step = step;
        ck_assert_int_eq(vt->adamw(be, NULL, p, g, m, v, segs, 3, &hy, &err), TF_OK);
        double b1 = hy.beta1, b2 = hy.beta2, lr = hy.lr;
        for (int s = 0; s < 3; s++)
            for (size_t i = segs[s].offset; i < segs[s].offset + segs[s].count; i++) {
                double gi = (double)g[i] * hy.grad_scale;
                pd[i] *= 1.0 - lr * segs[s].weight_decay;
                md[i] = b1 * md[i] + (1 - b1) * gi;
                vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
                double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
                pd[i] -= lr * mh / (sqrt(vh) + hy.eps);
            }
    }
    /* parameters move by ~1e-2 from values ~1: compare to 1e-6 relative */
    ASSERT_CLOSE(p, pd, n, 1e-6);
    ASSERT_CLOSE(m, md, n, 1e-5);
    ASSERT_CLOSE(v, vd, n, 1e-5);
    ASSERT_ALL(10, m[60000 + i] == 0.0f && p[60000 + i] == (float)pd[60000 + i]);
    /* same on 1 thread, bit for bit */
    float *p1 = falloc(n), *m1 = falloc(n), *v1 = falloc(n), *p2 = falloc(n), *m2 = falloc(n), *v2 = falloc(n);
    memcpy(p1, p, n * 4), memcpy(m1, m, n * 4), memcpy(v1, v, n * 4);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    hy.step = 11;
    ck_assert_int_eq(vt->adamw(be, NULL, p1, g, m1, v1, segs, 3, &hy, &err), TF_OK);
    ck_assert_int_eq(vt->adamw(be1, NULL, p2, g, m2, v2, segs, 3, &hy, &err), TF_OK);
    ck_assert_int_eq(memcmp(p1, p2, n * 4), 0);
    ck_assert_int_eq(memcmp(v1, v2, n * 4), 0);
    ck_assert_int_eq(vt->adamw(be, NULL, p1, g, m1, v1, segs, 0, &hy, &err), TF_OK);
    /* errors */
    tf_adamw_segment overlap[2] = {{10, 10, 0}, {0, 11, 0}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, overlap, 2, &hy, &err), TF_ERR_RUNTIME,
               "segments 0 [10, 20) and 1 [0, 11) overlap");
    tf_adamw_segment wrap[1] = {{SIZE_MAX - 1, 5, 0}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, wrap, 1, &hy, &err), TF_ERR_RUNTIME, "overflows");
    tf_adamw_segment nanwd[1] = {{0, 5, NAN}};
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, nanwd, 1, &hy, &err), TF_ERR_RUNTIME,
               "segment 0: weight_decay is nan");
    tf_adamw_hyper bad = hy;
    bad.step = 0;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME,
               "step is 1-based, got 0");
    bad = hy, bad.beta2 = 1.0f;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "betas");
    bad = hy, bad.lr = -1;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "lr must be");
    bad = hy, bad.eps = NAN;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "eps must be");
    bad = hy, bad.grad_scale = INFINITY;
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, &bad, &err), TF_ERR_RUNTIME, "grad_scale");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, segs, 3, NULL, &err), TF_ERR_RUNTIME, "hyper is NULL");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, m, v, NULL, 3, &hy, &err), TF_ERR_RUNTIME,
               "segments is NULL");
    ASSERT_ERR(vt->adamw(be, NULL, p, g, NULL, v, segs, 3, &hy, &err), TF_ERR_RUNTIME, "m is NULL");
    free(p), free(g), free(m), free(v), free(pd), free(md), free(vd);
    free(p1), free(m1), free(v1), free(p2), free(m2), free(v2);
}
END_TEST

/* --- Adafactor (transformers' arithmetic; tests/ref compares with transformers itself) --- */

/* One tensor's step in double, as tf_adafactor_desc states it. */
static void adafactor_ref(double *p, const float *g, double *st, const tf_adafactor_tensor *t, double lr, double eps,
                          double gs, int step)
{
    size_t B = (size_t)t->batch, R = (size_t)t->rows, C = (size_t)t->cols, n = B * R * C;
    double b2 = 1.0 - pow(step, -0.8), ss = 0;
    double *u = malloc(n * sizeof *u);
    for (size_t b = 0; b < B; b++) {
        double *row = st + b * R, *col = st + B * R + b * C, rmean = 0;
        const float *gb = g + b * R * C;
        if (t->factored) {
            for (size_t r = 0; r < R; r++) {
                double s = 0;
                for (size_t c = 0; c < C; c++) s += gb[r * C + c] * gs * gb[r * C + c] * gs + eps;
                row[r] = row[r] * b2 + (1 - b2) * s / (double)C;
            }
            for (size_t c = 0; c < C; c++) {
                double s = 0;
                for (size_t r = 0; r < R; r++) s += gb[r * C + c] * gs * gb[r * C + c] * gs + eps;
                col[c] = col[c] * b2 + (1 - b2) * s / (double)R;
            }
            for (size_t r = 0; r < R; r++) rmean += row[r] / (double)R;
        }
        for (size_t i = 0; i < R * C; i++) {
            double gi = gb[i] * gs, *v = st + b * R * C;
            if (t->factored) {
                u[b * R * C + i] = gi / sqrt(row[i / C] / rmean) / sqrt(col[i % C]);
            } else {
                v[i] = v[i] * b2 + (1 - b2) * (gi * gi + eps);
                u[b * R * C + i] = gi / sqrt(v[i]);
            }
            ss += u[b * R * C + i] * u[b * R * C + i];
        }
    }
    double div = fmax(sqrt(ss / (double)n), 1.0);
    for (size_t i = 0; i < n; i++) p[i] = p[i] * (1 - t->weight_decay * lr) - lr * u[i] / div;
    free(u);
}

START_TEST(test_adafactor)
{
    /* a [3, 40, 50] factored tensor, a gap, a [300, 129] matrix (above the
     * threshold where the team splits rows and columns), an unfactored vector */
    tf_adafactor_tensor ts[3] = {{0, 3, 40, 50, true, 0, 0.01f},
                                 {6010, 1, 300, 129, true, 0, 0.0f},
                                 {44710, 1, 1, 999, false, 0, 0.1f}};
    size_t n = 44710 + 999, ns = 0;
    for (int i = 0; i < 3; i++) ts[i].state_offset = ns, ns += tf_adafactor_state_count(&ts[i]);
    ck_assert_uint_eq(ns, 3 * 90 + 429 + 999);
    size_t wsb = tf_adafactor_workspace_bytes(ts, 3);
    ck_assert_uint_eq(wsb, (1024 + 2) * sizeof(double));
    tf_adafactor_tensor wide = {0, 1, 2, 3000, true, 0, 0};
    ck_assert_uint_eq(tf_adafactor_workspace_bytes(&wide, 1), (3000 + 2) * sizeof(double));
    float *p = falloc(n), *g = falloc(n), *st = falloc(ns), *ws = falloc(wsb / 4);
    double *pd = dalloc(n), *sd = dalloc(ns);
    fill(p, n, -1, 1);
    to_double(p, pd, n);
    tf_adafactor_desc d = {sizeof d, 3e-3, 1e-30f, 1.0f, -0.8f, 0.5f, 0, ts, 3, ws, wsb};
    for (int step = 1; step <= 10; step++) {
        fill(g, n, -2, 2);
        for (size_t i = 6000; i < 6010; i++) g[i] = 1e9f; /* the gap belongs to nobody */
        d.step = step;
        ck_assert_int_eq(vt->adafactor(be, NULL, p, g, st, &d, &err), TF_OK);
        for (int i = 0; i < 3; i++)
            adafactor_ref(pd + ts[i].offset, g + ts[i].offset, sd + ts[i].state_offset, &ts[i], d.lr, 1e-30, 0.5,
                          step);
    }
    ASSERT_CLOSE(p, pd, n, 1e-6);
    ASSERT_CLOSE(st, sd, ns, 1e-5);
    ASSERT_ALL(10, p[6000 + i] == (float)pd[6000 + i]);
    /* one thread and three give the same bits (resume is exact whatever the team) */
    float *p1 = falloc(n), *s1 = falloc(ns);
    memcpy(p1, p, n * 4), memcpy(s1, st, ns * 4);
    d.step = 11;
    ck_assert_int_eq(vt->adafactor(be, NULL, p, g, st, &d, &err), TF_OK);
    ck_assert_int_eq(vt->adafactor(be1, NULL, p1, g, s1, &d, &err), TF_OK);
    ck_assert_int_eq(memcmp(p, p1, n * 4), 0);
    ck_assert_int_eq(memcmp(st, s1, ns * 4), 0);
    tf_backend *b3 = open_threads(3);
    d.step = 12;
    ck_assert_int_eq(vt->adafactor(b3, NULL, p, g, st, &d, &err), TF_OK);
    ck_assert_int_eq(vt->adafactor(be1, NULL, p1, g, s1, &d, &err), TF_OK);
    ck_assert_int_eq(memcmp(p, p1, n * 4), 0);
    ck_assert_int_eq(memcmp(st, s1, ns * 4), 0);
    vt->close(b3);
    /* errors */
    tf_adafactor_desc bad = d;
    bad.size = 8;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "descriptor size 8");
    bad = d, bad.step = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "step is 1-based, got 0");
    bad = d, bad.lr = NAN;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "lr must be");
    bad = d, bad.clip_threshold = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "clip_threshold must be");
    bad = d, bad.decay_rate = 0.8f;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "decay_rate must be");
    bad = d, bad.workspace_bytes = 8;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME,
               "workspace of 8 bytes, these tensors need 8208");
    tf_adafactor_tensor two[2] = {ts[0], ts[1]};
    two[1].offset = 5999;
    bad = d, bad.tensors = two, bad.ntensors = 2;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensors 0 and 1 overlap in params");
    two[1] = ts[1], two[1].state_offset = 100;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensors 0 and 1 overlap in state");
    two[1] = ts[1], two[1].rows = 0;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "tensor 1: shape [1, 0, 129]");
    two[1] = ts[1], two[1].offset = SIZE_MAX - 10;
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, &bad, &err), TF_ERR_RUNTIME, "overflow");
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, NULL, &d, &err), TF_ERR_RUNTIME, "state is NULL");
    ASSERT_ERR(vt->adafactor(be, NULL, p, g, st, NULL, &err), TF_ERR_RUNTIME, "descriptor is NULL");
    free(p), free(g), free(st), free(ws), free(pd), free(sd), free(p1), free(s1);
}
END_TEST

/* --- the same bits on 1 and 3 threads ----------------------------------------- */

START_TEST(test_thread_counts)
{
    tf_backend *b3 = open_threads(3), *bs[2] = {be1, b3};
    int T = 515, H = 300, V = 97; /* every op above its parallel threshold */
    size_t n = (size_t)T * H;
    float *x = falloc(n), *r = falloc(n), *g = falloc(H), *bt = falloc(H), *dy = falloc(n);
    fill(x, n, -2, 2), fill(r, n, -1, 1), fill(g, H, 0.5f, 1.5f), fill(bt, H, -1, 1);
    fill(dy, n, -1, 1);
    int32_t *ids = malloc(sizeof(int32_t) * T), *lab = malloc(sizeof(int32_t) * T);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)(urand() * V), lab[i] = i % 7 ? (int32_t)(urand() * H) : -1;
    float *out[2][12];
    uint8_t *keep[2];
    float loss[2], ss[2];
    tf_attention_desc d = {5, 103, 4, 50, 0.2f, 0.1f, 3, 4, TF_DTYPE_F32, TF_MATMUL_FP32};
    size_t nq = (size_t)5 * 103 * 600, no = (size_t)5 * 103 * 200;
    for (int k = 0; k < 2; k++) {
        tf_backend *b = bs[k];
        for (int j = 0; j < 12; j++) out[k][j] = falloc(nq);
        keep[k] = malloc(n);
        float *mean = out[k][9], *rstd = out[k][9] + T;
        ck_assert_int_eq(vt->layernorm_fwd(b, NULL, x, r, out[k][0], out[k][1], g, bt, mean, rstd,
                                           T, H, 1e-12f, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->layernorm_bwd(b, NULL, dy, out[k][0], g, mean, rstd, out[k][2], false,
                                           out[k][3], out[k][3] + H, T, H, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->sum_rows(b, NULL, dy, TF_DTYPE_F32, T, H, out[k][4], false, &err), TF_OK);
        ck_assert_int_eq(vt->embedding_bwd(b, NULL, ids, T, dy, TF_DTYPE_F32, out[k][5], V, H, &err), TF_OK);
        ck_assert_int_eq(vt->dropout_fwd(b, NULL, x, out[k][6], keep[k], n, 0.3f, 9, 9, TF_DTYPE_F32, &err), TF_OK);
        ck_assert_int_eq(vt->cross_entropy(b, NULL, x, H, TF_DTYPE_F32, T, H, lab, -1, &loss[k],
                                           out[k][7], 1.0f, &err), TF_OK);
        ck_assert_int_eq(vt->sum_squares(b, NULL, x, n, &ss[k], &err), TF_OK);
        ck_assert_int_eq(vt->gelu_bwd(b, NULL, dy, x, out[k][8], n, TF_GELU_ERF, TF_DTYPE_F32, &err), TF_OK);
        void *sv = alloc_save(b, &d);
        float *qkv = out[k][10], *dq = out[k][11];
        for (size_t i = 0; i < nq; i++) qkv[i] = (float)((i * 2654435761u) % 1000) * 2e-3f - 1.0f;
        ck_assert_int_eq(vt->attention_fwd(b, NULL, &d, qkv, NULL, out[k][6] + n, sv, true, &err), TF_OK);
        ck_assert_int_eq(vt->attention_bwd(b, NULL, &d, qkv, NULL, out[k][6] + n, sv, qkv, dq, &err), TF_OK);
        vt->free(b, sv, TF_MEM_DEVICE);
    }
    ck_assert_int_eq(memcmp(out[0][0], out[1][0], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][1], out[1][1], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][2], out[1][2], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][3], out[1][3], 2 * (size_t)H * 4), 0);
    ck_assert_int_eq(memcmp(out[0][9], out[1][9], 2 * (size_t)T * 4), 0);
    ck_assert_int_eq(memcmp(out[0][4], out[1][4], (size_t)H * 4), 0);
    ck_assert_int_eq(memcmp(out[0][5], out[1][5], (size_t)V * H * 4), 0);
    ck_assert_int_eq(memcmp(keep[0], keep[1], n), 0);
    ck_assert_int_eq(memcmp(out[0][6], out[1][6], (n + no) * 4), 0);
    ck_assert_int_eq(memcmp(out[0][7], out[1][7], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][8], out[1][8], n * 4), 0);
    ck_assert_int_eq(memcmp(out[0][11], out[1][11], nq * 4), 0);
    ck_assert(loss[0] == loss[1] && ss[0] == ss[1]);
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 12; j++) free(out[k][j]);
        free(keep[k]);
    }
    vt->close(b3);
    free(x), free(r), free(g), free(bt), free(dy), free(ids), free(lab);
}
END_TEST

static Suite *backend_cpu_suite(void)
{
    Suite *s = suite_create("backend_cpu");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"descriptor", test_descriptor},
        {"open", test_open_and_describe},
        {"open_errors", test_open_errors},
        {"config", test_config_threads},
        {"memory", test_memory},
        {"memory_errors", test_memory_errors},
        {"streams", test_streams_events},
        {"gemm_shapes", test_gemm_shapes},
        {"gemm_epilogues", test_gemm_epilogues},
        {"gemm_errors", test_gemm_errors},
        {"sum_rows", test_sum_rows},
        {"sum_squares", test_sum_squares},
        {"finite_check", test_finite_check},
        {"layernorm_fwd", test_layernorm_fwd},
        {"layernorm_bwd", test_layernorm_bwd},
        {"attention_fwd", test_attention_fwd},
        {"attention_row_blocks", test_attention_row_blocks},
        {"attention_bwd", test_attention_bwd_fd},
        {"attention_dropout", test_attention_dropout},
        {"attention_errors", test_attention_errors},
        {"math", test_math_accuracy},
        {"gelu_tanh", test_gelu_tanh_ops},
        {"philox", test_philox_known_answers},
        {"dropout", test_dropout},
        {"dropout_rows", test_dropout_rows},
        {"attention_rows", test_attention_rows},
        {"add_scale_cast", test_add_scale_cast},
        {"embedding", test_embedding},
        {"cross_entropy", test_cross_entropy},
        {"cross_entropy_smoothed", test_cross_entropy_smoothed},
        {"adamw", test_adamw},
        {"adafactor", test_adafactor},
        {"thread_counts", test_thread_counts},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(backend_cpu_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
