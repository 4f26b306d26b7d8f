/* test_backend_cuda.c — backend-cuda against backend-cpu, op by op, for
 * every op outside the fused kernels (GEMM and its epilogues, sum_rows, sum_squares,
 * finite_check, GELU, tanh, dropout, add, scale, cast, embeddings, AdamW),
 * plus memory, streams, events, device selection and the error paths.
 *
 * Both plugins are loaded through the plugin loader from the build tree
 * ($top_builddir/plugins/{backend-cuda,backend-cpu}/.libs). Inputs are fresh
 * random numbers every run (the seed is printed; TF_TEST_SEED=N repeats a
 * run). 16-bit inputs are rounded on the host first, and backend-cpu (f32
 * only) computes on exactly those values; results are compared normwise,
 * max |gpu - cpu| / max |cpu|: fp32 <= 1e-5, tf32 <= 3e-3, fp16/bf16 <= 1e-2.
 * Dropout masks must be identical, the embedding backward bit-identical
 * across runs.
 *
 * Without a usable GPU (as on a build machine without a driver) it prints
 * "SKIP: no CUDA device (<reason>)" and exits 77, Automake's skip. With
 * TF_CUDA_TEST_PROBE set, it only answers whether a GPU is usable (exit 0 or
 * 77): tests/test_backend_cuda_sanitizer.sh asks that first.
 *
 * Check runs the tests in this process (CK_NOFORK): CUDA cannot be used in
 * a child forked after the parent initialized it, and the loader's probe
 * initializes it. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_pair.h"
#include "common.h"
#include "tfcore/backend.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

/* --- the two backends ------------------------------------------------------- */

static tf_test_pair pair; /* tests/backend_pair.h */
static const tf_backend_vtable *gv, *cv; /* cuda, cpu */
static tf_backend *gb, *cb;
static tf_error err;

#define G_OK(call) ck_assert_msg((call) == TF_OK, "%s failed: %s", #call, err.msg)

/* --- dtypes on the host ---------------------------------------------------------- */

static size_t esize(tf_dtype dt) { return tf_dtype_size(dt); }

static double tol_of(tf_dtype dt, tf_matmul_mode mode) { return tf_test_tol(dt, mode, 1e-5); }

#define ASSERT_CLOSE(...) TF_TEST_ASSERT_NORMWISE(seed0, __VA_ARGS__)

static uint64_t seed0; /* the run's TF_TEST_SEED */

/* --- device buffers ----------------------------------------------------------------- */

static void *galloc(size_t bytes)
{
    void *p = NULL;
    G_OK(gv->alloc(gb, bytes, TF_MEM_DEVICE, &p, &err));
    ck_assert_ptr_nonnull(p);
    return p;
}

static void gfree(void *p) { gv->free(gb, p, TF_MEM_DEVICE); }

static void gsync(void) { G_OK(gv->stream_sync(gb, NULL, &err)); }

static void *gput(const void *host, size_t bytes)
{
    void *p = galloc(bytes ? bytes : 1);
    if (bytes) ck_assert_int_eq(gv->memcpy(gb, p, host, bytes, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    gsync();
    return p;
}

static void gget(void *host, const void *dev, size_t bytes)
{
    if (bytes) ck_assert_int_eq(gv->memcpy(gb, host, dev, bytes, TF_COPY_DEVICE_TO_HOST, NULL), TF_OK);
    gsync();
}

/* device buffer in dt holding x[n]; x is quantized to dt in place */
static void *gput_dt(float *x, size_t n, tf_dtype dt)
{
    tf_test_quantize(x, n, dt);
    void *h = tf_test_to_dt(x, n, dt);
    void *d = gput(h, n * esize(dt));
    free(h);
    return d;
}

/* device buffer in dt -> f32 host array */
static void gget_dt(float *out, const void *dev, size_t n, tf_dtype dt)
{
    void *h = malloc(n * esize(dt) + 1);
    ck_assert_ptr_nonnull(h);
    gget(h, dev, n * esize(dt));
    tf_test_from_dt(h, n, dt, out);
    free(h);
}

static float *fnew(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const tf_dtype ACT[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16};
#define NACT (sizeof ACT / sizeof ACT[0])

static bool dt_ok(tf_dtype dt)
{
    tf_matmul_mode m = dt == TF_DTYPE_F32 ? TF_MATMUL_FP32
                       : dt == TF_DTYPE_F16 ? TF_MATMUL_F16
                                            : TF_MATMUL_BF16;
    return gv->supports(gb, m, dt);
}

/* === device, memory, streams ========================================================= */

START_TEST(test_device)
{
    const char *name = gv->device_name(gb);
    ck_assert_ptr_nonnull(name);
    ck_assert_msg(strstr(name, "sm_") && strstr(name, "CUDA"), "device name '%s'", name);
    ck_assert(gv->supports(gb, TF_MATMUL_FP32, TF_DTYPE_F32));
    ck_assert(!gv->supports(gb, TF_MATMUL_FP32, TF_DTYPE_F16));
    ck_assert(!gv->supports(gb, TF_MATMUL_F16, TF_DTYPE_F32));
    ck_assert(!gv->supports(gb, TF_MATMUL_BF16, TF_DTYPE_F16));
    ck_assert(TF_HAS(gv, host_memory) && !gv->host_memory(gb));
    ck_assert(TF_HAS(gv, native_stream) && gv->native_stream(gb, NULL) != NULL);
    tf_backend_mem_info mi;
    gv->mem_info(gb, &mi);
    ck_assert_uint_gt(mi.total, 0);
    ck_assert_uint_gt(mi.free, 0);
    ck_assert_uint_le(mi.free, mi.total);
}
END_TEST

START_TEST(test_memory)
{
    tf_backend_mem_info before, during, after;
    gv->mem_info(gb, &before);
    size_t n = (1u << 20) + 13;
    unsigned char *d1 = galloc(n), *d2 = galloc(n);
    gv->mem_info(gb, &during);
    ck_assert_uint_eq(during.current, before.current + 2 * n);
    ck_assert_uint_ge(during.peak, during.current);

    unsigned char *h = malloc(n), *back = malloc(n);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(back);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)tf_test_next();
    /* pageable host -> device -> device -> pageable host */
    ck_assert_int_eq(gv->memcpy(gb, d1, h, n, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_eq(gv->memcpy(gb, d2, d1, n, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    gget(back, d2, n);
    ck_assert(memcmp(h, back, n) == 0);
    /* memset */
    ck_assert_int_eq(gv->memset(gb, d2 + 5, 0xab, 1000, NULL), TF_OK);
    gget(back, d2, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(back[i], i >= 5 && i < 1005 ? 0xab : h[i]);
    /* pinned host memory, host to host and device to pinned */
    void *p1 = NULL, *p2 = NULL;
    G_OK(gv->alloc(gb, n, TF_MEM_HOST_PINNED, &p1, &err));
    G_OK(gv->alloc(gb, n, TF_MEM_HOST_PINNED, &p2, &err));
    memcpy(p1, h, n);
    ck_assert_int_eq(gv->memcpy(gb, p2, p1, n, TF_COPY_HOST_TO_HOST, NULL), TF_OK);
    gsync();
    ck_assert(memcmp(p2, h, n) == 0);
    memset(p2, 0, n);
    ck_assert_int_eq(gv->memcpy(gb, p2, d1, n, TF_COPY_DEVICE_TO_HOST, NULL), TF_OK);
    gsync();
    ck_assert(memcmp(p2, h, n) == 0);
    gv->free(gb, p1, TF_MEM_HOST_PINNED);
    gv->free(gb, p2, TF_MEM_HOST_PINNED);
    /* zero bytes and bad arguments */
    void *z = NULL;
    G_OK(gv->alloc(gb, 0, TF_MEM_DEVICE, &z, &err));
    ck_assert_ptr_nonnull(z);
    gfree(z);
    ck_assert_int_eq(gv->memcpy(gb, d1, h, 0, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_ne(gv->memcpy(gb, d1, NULL, 4, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    ck_assert_int_ne(gv->memcpy(gb, d1, h, 4, (tf_memcpy_kind)9, NULL), TF_OK);
    ck_assert_int_ne(gv->alloc(gb, 16, (tf_mem_kind)7, &z, &err), TF_OK);
    gv->free(gb, NULL, TF_MEM_DEVICE);
    gfree(d1);
    gfree(d2);
    gv->mem_info(gb, &after);
    ck_assert_uint_eq(after.current, before.current);
    ck_assert_uint_ge(after.peak, before.current + 2 * n);
    free(h);
    free(back);
}
END_TEST

START_TEST(test_out_of_memory)
{
    tf_backend_mem_info before, after;
    gv->mem_info(gb, &before);
    void *p = NULL;
    tf_status st = gv->alloc(gb, (size_t)1 << 50, TF_MEM_DEVICE, &p, &err); /* 1 PiB */
    ck_assert_int_eq(st, TF_ERR_RUNTIME);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.msg, "out of device memory allocating 1048576.00 GiB") &&
                      strstr(err.msg, "free ") && strstr(err.msg, " of ") &&
                      strstr(err.msg, "this backend holds"),
                  "OOM message: %s", err.msg);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "one line: %s", err.msg);
    gv->mem_info(gb, &after);
    ck_assert_uint_eq(after.current, before.current);
    /* the failure is not sticky */
    void *q = galloc(4096);
    gsync();
    gfree(q);
}
END_TEST

START_TEST(test_streams_events)
{
    tf_stream *s1 = NULL;
    tf_event *ev = NULL;
    G_OK(gv->stream_create(gb, &s1, &err));
    G_OK(gv->event_create(gb, &ev, &err));
    ck_assert_ptr_ne(gv->native_stream(gb, s1), gv->native_stream(gb, NULL));
    size_t n = 1 << 22;
    unsigned char *h = malloc(n), *back = malloc(n);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(back);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7 + 3);
    void *pin = NULL;
    G_OK(gv->alloc(gb, n, TF_MEM_HOST_PINNED, &pin, &err));
    memcpy(pin, h, n);
    void *d1 = galloc(n), *d2 = galloc(n);
    /* upload on s1; the default stream copies on after waiting for the event */
    ck_assert_int_eq(gv->memcpy(gb, d1, pin, n, TF_COPY_HOST_TO_DEVICE, s1), TF_OK);
    ck_assert_int_eq(gv->event_record(gb, ev, s1), TF_OK);
    ck_assert_int_eq(gv->stream_wait_event(gb, NULL, ev), TF_OK);
    ck_assert_int_eq(gv->memcpy(gb, d2, d1, n, TF_COPY_DEVICE_TO_DEVICE, NULL), TF_OK);
    gget(back, d2, n);
    ck_assert(memcmp(back, h, n) == 0);
    G_OK(gv->event_sync(gb, ev, &err));
    G_OK(gv->stream_sync(gb, s1, &err));

    /* a GEMM on the created stream (its own cuBLASLt workspace) */
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c[4];
    void *da = gput(a, sizeof a), *db = gput(b, sizeof b), *dc = galloc(sizeof c);
    tf_gemm_desc g = {.m = 2, .n = 2, .k = 3, .alpha = 1, .a = da, .lda = 3, .b = db, .ldb = 2,
                      .c = dc, .ldc = 2, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                      .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_FP32};
    G_OK(gv->gemm(gb, s1, &g, &err));
    G_OK(gv->stream_sync(gb, s1, &err));
    gget(c, dc, sizeof c);
    /* [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] */
    ck_assert(c[0] == 4 && c[1] == 5 && c[2] == 10 && c[3] == 11);

    /* another backend's stream and event are refused */
    tf_backend *other = NULL;
    tf_backend_open_args oa = {sizeof oa, 0, 0, 1, NULL, 1};
    G_OK(gv->open(&oa, &other, &err));
    ck_assert_int_eq(gv->stream_sync(other, s1, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "another backend"));
    ck_assert_int_ne(gv->event_record(other, ev, NULL), TF_OK);
    ck_assert_ptr_null(gv->native_stream(other, s1));
    gv->close(other);

    gfree(da);
    gfree(db);
    gfree(dc);
    gfree(d1);
    gfree(d2);
    gv->free(gb, pin, TF_MEM_HOST_PINNED);
    gv->event_destroy(gb, ev);
    gv->stream_destroy(gb, s1);
    free(h);
    free(back);
}
END_TEST

/* === configuration and device selection ================================================ */

static tf_config *config_of(const char *text)
{
    tf_config *cfg = NULL;
    G_OK(tf_config_load_string(&cfg, text, "test.cfg", NULL, &err));
    return cfg;
}

START_TEST(test_config)
{
    tf_config *cfg = config_of("backend = { device_offset = -1; };");
    ck_assert_int_eq(gv->check_config(tf_config_section(cfg, "backend"), &err), TF_ERR_CONFIG);
    tf_config_free(cfg);
    cfg = config_of("backend = { gelu_epilogue = \"cublas\"; };");
    ck_assert_int_eq(gv->check_config(tf_config_section(cfg, "backend"), &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "cublaslt") != NULL, "%s", err.msg);
    tf_config_free(cfg);
    cfg = config_of("backend = { device_offset = 0; cublaslt_workspace_mib = 8; "
                    "gelu_epilogue = \"cublaslt\"; };");
    G_OK(gv->check_config(tf_config_section(cfg, "backend"), &err));
    tf_config_free(cfg);

    /* a device index past the last one */
    cfg = config_of("backend = { device_offset = 1000; };");
    tf_backend_open_args oa = {sizeof oa, 0, 0, 1, tf_config_section(cfg, "backend"), 1};
    tf_backend *b = NULL;
    ck_assert_int_eq(gv->open(&oa, &b, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err.msg, "device 1000 requested (local rank 0 + device_offset 1000), ") &&
                      strstr(err.msg, " visible"),
                  "%s", err.msg);
    tf_config_free(cfg);
    oa.section = NULL;
    oa.device = 4096;
    ck_assert_int_eq(gv->open(&oa, &b, &err), TF_ERR_RUNTIME);
    ck_assert_msg(strstr(err.msg, "device 4096 requested, "), "%s", err.msg);
    oa.size = 4;
    ck_assert_int_eq(gv->open(&oa, &b, &err), TF_ERR_PLUGIN);
}
END_TEST

/* === GEMM ==================================================================================== */

typedef struct prec {
    tf_dtype dt;
    tf_matmul_mode mode;
    const char *name;
} prec;

static const prec PRECS[] = {{TF_DTYPE_F32, TF_MATMUL_FP32, "fp32"},
                             {TF_DTYPE_F32, TF_MATMUL_TF32, "tf32"},
                             {TF_DTYPE_F16, TF_MATMUL_F16, "fp16"},
                             {TF_DTYPE_BF16, TF_MATMUL_BF16, "bf16"}};

typedef struct gemm_case {
    int m, n, k, batch;
    bool ta, tb;
    int pad;           /* extra elements per row of every matrix */
    float alpha, beta;
    tf_gemm_epilogue ep;
    tf_gelu_kind gelu;
    bool c_f32;        /* C in f32 with 16-bit inputs */
} gemm_case;

/* Runs one GEMM on both backends and compares C (and aux). */
static void run_gemm(tf_backend *b, const prec *p, const gemm_case *t)
{
    tf_dtype cdt = t->c_f32 ? TF_DTYPE_F32 : p->dt;
    int64_t lda = (t->ta ? t->m : t->k) + t->pad, ldb = (t->tb ? t->k : t->n) + t->pad;
    int64_t ldc = t->n + t->pad;
    int64_t rows_a = t->ta ? t->k : t->m, rows_b = t->tb ? t->n : t->k;
    int64_t sa = rows_a * lda + 3, sb = rows_b * ldb + 5, sc = (int64_t)t->m * ldc + 7;
    size_t na = (size_t)(sa * t->batch), nb = (size_t)(sb * t->batch), nc = (size_t)(sc * t->batch);
    float *a = fnew(na), *bm = fnew(nb), *c = fnew(nc), *bias = fnew((size_t)t->n);
    tf_test_fill(a, na, -1, 1);
    tf_test_fill(bm, nb, -1, 1);
    tf_test_fill(c, nc, -1, 1);
    tf_test_fill(bias, (size_t)t->n, -1, 1);
    float *c0 = fnew(nc); /* C before the GEMMs, for the error bound */
    memcpy(c0, c, nc * sizeof *c);
    void *da = gput_dt(a, na, p->dt), *db = gput_dt(bm, nb, p->dt), *dc = gput_dt(c, nc, cdt);
    float *dbias = gput(bias, (size_t)t->n * sizeof(float));
    bool gelu = t->ep == TF_EPILOGUE_BIAS_GELU;
    float *aux = gelu ? fnew(nc) : NULL;
    void *daux = gelu ? gput_dt(aux, nc, cdt) : NULL;

    tf_gemm_desc g = {.trans_a = t->ta, .trans_b = t->tb, .m = t->m, .n = t->n, .k = t->k,
                      .alpha = t->alpha, .beta = t->beta, .a = da, .lda = lda, .stride_a = sa,
                      .b = db, .ldb = ldb, .stride_b = sb, .c = dc, .ldc = ldc, .stride_c = sc,
                      .batch = t->batch, .ab_dtype = p->dt, .c_dtype = cdt, .mode = p->mode,
                      .epilogue = t->ep, .bias = t->ep ? dbias : NULL, .aux = daux,
                      .gelu = t->gelu};
    ck_assert_msg(gv->gemm(b, NULL, &g, &err) == TF_OK, "%s gemm: %s", p->name, err.msg);
    G_OK(gv->stream_sync(b, NULL, &err));

    tf_gemm_desc h = g;
    h.a = a;
    h.b = bm;
    h.c = c;
    h.bias = t->ep ? bias : NULL;
    h.aux = aux;
    h.ab_dtype = h.c_dtype = TF_DTYPE_F32;
    h.mode = TF_MATMUL_FP32;
    G_OK(cv->gemm(cb, NULL, &h, &err));

    float *got = fnew(nc);
    gget_dt(got, dc, nc, cdt);
    double tol = tol_of(p->dt, p->mode);
    /* only the matrices' elements: the padding is never written by either */
    if (p->mode == TF_MATMUL_FP32) {
        ASSERT_CLOSE(got, c, nc, tol,
                     "%s gemm m %d n %d k %d batch %d ta %d tb %d pad %d beta %g ep %d gelu %d c_f32 %d",
                     p->name, t->m, t->n, t->k, t->batch, t->ta, t->tb, t->pad, (double)t->beta,
                     (int)t->ep, (int)t->gelu, (int)t->c_f32);
        if (gelu) {
            gget_dt(got, daux, nc, cdt);
            ASSERT_CLOSE(got, aux, nc, tol, "%s gemm aux m %d n %d k %d", p->name, t->m, t->n, t->k);
        }
    } else {
        /* Rounded inputs (tf32, f16, bf16): each element's error is bounded by
         * the magnitude of its terms, |alpha| sum|a||b| + |beta c| + |bias|
         * (the standard GEMM error bound), not by max|C|: with k = 1 a product
         * and a bias of opposite signs cancel, and a rounding error of the
         * inputs is then large next to the result. The magnitudes are the CPU
         * GEMM of the absolute values (no GELU: its slope is at most 1.13). */
        float *mag = fnew(nc), *aa = fnew(na), *ab = fnew(nb), *abias = fnew((size_t)t->n);
        for (size_t i = 0; i < na; i++) aa[i] = fabsf(a[i]);
        for (size_t i = 0; i < nb; i++) ab[i] = fabsf(bm[i]);
        for (size_t i = 0; i < nc; i++) mag[i] = fabsf(c0[i]);
        for (int i = 0; i < t->n; i++) abias[i] = fabsf(bias[i]);
        tf_gemm_desc hm = h;
        hm.a = aa;
        hm.b = ab;
        hm.c = mag;
        hm.alpha = fabsf(t->alpha);
        hm.beta = fabsf(t->beta);
        hm.bias = t->ep ? abias : NULL;
        hm.epilogue = t->ep ? TF_EPILOGUE_BIAS : TF_EPILOGUE_NONE;
        hm.aux = NULL;
        G_OK(cv->gemm(cb, NULL, &hm, &err));
        for (int pass = 0; pass < (gelu ? 2 : 1); pass++) {
            if (pass) gget_dt(got, daux, nc, cdt);
            const float *want = pass ? aux : c;
            double worst = 0.0;
            size_t at = 0;
            for (size_t i = 0; i < nc; i++) {
                double e = fabs((double)got[i] - want[i]) / fmax(1.13 * mag[i], 1e-30);
                if (!(e <= worst)) worst = e, at = i;
            }
            ck_assert_msg(worst <= tol,
                          "%s gemm%s m %d n %d k %d batch %d ta %d tb %d ep %d: element %zu off by "
                          "%.3g of its terms' magnitude > %.3g (seed %llu)",
                          p->name, pass ? " aux" : "", t->m, t->n, t->k, t->batch, t->ta, t->tb,
                          (int)t->ep, at, worst, tol, (unsigned long long)seed0);
        }
        free(mag);
        free(aa);
        free(ab);
        free(abias);
    }
    free(got);
    free(c0);
    gfree(da);
    gfree(db);
    gfree(dc);
    gfree(dbias);
    if (daux) gfree(daux);
    free(a);
    free(bm);
    free(c);
    free(bias);
    free(aux);
}

START_TEST(test_gemm)
{
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {64, 48, 32}, {33, 17, 65}, {128, 96, 256}};
    int ran = 0;
    for (size_t pi = 0; pi < sizeof PRECS / sizeof PRECS[0]; pi++) {
        const prec *p = &PRECS[pi];
        if (!gv->supports(gb, p->mode, p->dt)) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int tr = 0; tr < 4; tr++)
                for (int ep = 0; ep < 4; ep++)
                    for (int cf = 0; cf < (p->dt == TF_DTYPE_F32 ? 1 : 2); cf++) {
                        gemm_case t = {.m = shapes[si][0], .n = shapes[si][1],
                                       .k = shapes[si][2], .batch = 1, .ta = tr & 1,
                                       .tb = (tr >> 1) & 1, .pad = (int)(si % 2) * 3,
                                       .alpha = 1.0f, .beta = 0.0f,
                                       .ep = ep == 3 ? TF_EPILOGUE_BIAS_GELU
                                                     : (tf_gemm_epilogue)ep,
                                       .gelu = ep == 3 ? TF_GELU_TANH : TF_GELU_ERF,
                                       .c_f32 = cf};
                        run_gemm(gb, p, &t);
                        if (t.ep != TF_EPILOGUE_BIAS_GELU) { /* accumulate into C */
                            t.beta = 0.5f;
                            t.alpha = -1.25f;
                            run_gemm(gb, p, &t);
                        }
                        ran++;
                    }
        /* strided batches, with and without the epilogues */
        for (int ep = 0; ep < 3; ep++) {
            gemm_case t = {.m = 24, .n = 40, .k = 16, .batch = 3, .ta = ep == 1, .tb = ep != 1,
                           .pad = 2, .alpha = 1.0f, .beta = ep == 1 ? 1.0f : 0.0f,
                           .ep = (tf_gemm_epilogue)ep, .gelu = TF_GELU_ERF};
            run_gemm(gb, p, &t);
        }
        /* BERT-like shapes: [N, H] x [H, 3H] + bias, FFN with GELU, weight gradient */
        gemm_case qkv = {.m = 256, .n = 384, .k = 128, .batch = 1, .tb = true, .alpha = 1.0f,
                         .ep = TF_EPILOGUE_BIAS};
        run_gemm(gb, p, &qkv);
        gemm_case ffn = {.m = 256, .n = 512, .k = 128, .batch = 1, .tb = true, .alpha = 1.0f,
                         .ep = TF_EPILOGUE_BIAS_GELU, .gelu = TF_GELU_ERF};
        run_gemm(gb, p, &ffn);
        gemm_case wgrad = {.m = 128, .n = 512, .k = 256, .batch = 1, .ta = true, .alpha = 1.0f,
                           .beta = 1.0f, .c_f32 = p->dt != TF_DTYPE_F32};
        run_gemm(gb, p, &wgrad);
    }
    ck_assert_int_gt(ran, 0);
}
END_TEST

START_TEST(test_gemm_no_k)
{
    for (size_t pi = 0; pi < sizeof PRECS / sizeof PRECS[0]; pi++) {
        const prec *p = &PRECS[pi];
        if (!gv->supports(gb, p->mode, p->dt)) continue;
        for (int ep = 0; ep < 4; ep++) {
            gemm_case t = {.m = 5, .n = 9, .k = 0, .batch = 2, .pad = 1, .alpha = 1.0f,
                           .beta = ep >= 2 ? 0.0f : 0.75f,
                           .ep = ep == 3 ? TF_EPILOGUE_BIAS_GELU : (tf_gemm_epilogue)ep,
                           .gelu = TF_GELU_TANH};
            run_gemm(gb, p, &t);
        }
    }
}
END_TEST

/* The cuBLASLt tanh-GELU epilogue (gelu_epilogue = "cublaslt"; 16-bit only). */
START_TEST(test_gemm_cublaslt_gelu)
{
    tf_config *cfg = config_of("backend = { gelu_epilogue = \"cublaslt\"; };");
    tf_backend_open_args oa = {sizeof oa, 0, 0, 1, tf_config_section(cfg, "backend"), 1};
    tf_backend *b = NULL;
    G_OK(gv->open(&oa, &b, &err));
    for (size_t pi = 2; pi < sizeof PRECS / sizeof PRECS[0]; pi++) {
        if (!gv->supports(b, PRECS[pi].mode, PRECS[pi].dt)) continue;
        gemm_case t = {.m = 64, .n = 128, .k = 64, .batch = 1, .tb = true, .alpha = 1.0f,
                       .ep = TF_EPILOGUE_BIAS_GELU, .gelu = TF_GELU_TANH};
        run_gemm(b, &PRECS[pi], &t);
        t.pad = 3; /* ldc not a multiple of 8: the kernel fallback */
        run_gemm(b, &PRECS[pi], &t);
    }
    gv->close(b);
    tf_config_free(cfg);
}
END_TEST

START_TEST(test_gemm_errors)
{
    float *d = galloc(64 * sizeof(float));
    tf_gemm_desc g = {.m = 2, .n = 2, .k = 2, .alpha = 1, .a = d, .lda = 2, .b = d, .ldb = 2,
                      .c = d + 16, .ldc = 2, .batch = 1, .ab_dtype = TF_DTYPE_F32,
                      .c_dtype = TF_DTYPE_F32, .mode = TF_MATMUL_F16};
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(err.msg, "matmul mode F16 takes F16 inputs"));
    g.mode = TF_MATMUL_FP32;
    g.c_dtype = TF_DTYPE_BF16;
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_PLUGIN);
    g.c_dtype = TF_DTYPE_F32;
    g.ldc = 1;
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "ldc is 1"));
    g.ldc = 2;
    g.epilogue = TF_EPILOGUE_BIAS;
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "bias (BIAS epilogue) is NULL"));
    g.epilogue = TF_EPILOGUE_BIAS_GELU;
    g.bias = d;
    g.aux = d + 32;
    g.beta = 1;
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs beta = 0"));
    g.beta = 0;
    g.batch = 0;
    ck_assert_int_eq(gv->gemm(gb, NULL, &g, &err), TF_ERR_RUNTIME);
    g.batch = 1;
    g.m = 0; /* nothing to do */
    G_OK(gv->gemm(gb, NULL, &g, &err));
    gfree(d);
}
END_TEST

/* === reductions ================================================================================ */

START_TEST(test_sum_rows)
{
    static const int shapes[][2] = {{0, 5}, {1, 1}, {37, 3}, {1000, 773}, {5000, 64}, {300, 2}};
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int acc = 0; acc < 2; acc++) {
                int rows = shapes[si][0], cols = shapes[si][1];
                size_t n = (size_t)rows * cols;
                float *dy = fnew(n), *db = fnew((size_t)cols), *got = fnew((size_t)cols);
                tf_test_fill(dy, n, -2, 2);
                tf_test_fill(db, (size_t)cols, -1, 1);
                void *ddy = gput_dt(dy, n, dt);
                float *ddb = gput(db, (size_t)cols * sizeof(float));
                G_OK(gv->sum_rows(gb, NULL, rows ? ddy : NULL, dt, rows, cols, ddb, acc, &err));
                gget(got, ddb, (size_t)cols * sizeof(float));
                G_OK(cv->sum_rows(cb, NULL, dy, TF_DTYPE_F32, rows, cols, db, acc, &err));
                ASSERT_CLOSE(got, db, (size_t)cols, 1e-5, "sum_rows %s [%d, %d] acc %d",
                             tf_dtype_name(dt), rows, cols, acc);
                /* the same bits a second time */
                float *again = fnew((size_t)cols);
                if (!acc) {
                    G_OK(gv->sum_rows(gb, NULL, ddy, dt, rows, cols, ddb, false, &err));
                    gget(again, ddb, (size_t)cols * sizeof(float));
                    ck_assert(memcmp(again, got, (size_t)cols * sizeof(float)) == 0);
                }
                free(again);
                gfree(ddy);
                gfree(ddb);
                free(dy);
                free(db);
                free(got);
            }
    }
    ck_assert_int_eq(gv->sum_rows(gb, NULL, NULL, TF_DTYPE_I32, 1, 1, NULL, false, &err),
                     TF_ERR_PLUGIN);
}
END_TEST

START_TEST(test_sum_squares)
{
    static const size_t sizes[] = {0, 1, 1000, 3000001};
    float *out = galloc(sizeof(float));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        float *x = fnew(n);
        tf_test_fill(x, n, -3, 3);
        float *dx = gput(x, n * sizeof(float));
        float got = -1, again = -2, want = 0;
        G_OK(gv->sum_squares(gb, NULL, n ? dx : NULL, n, out, &err));
        gget(&got, out, sizeof got);
        G_OK(gv->sum_squares(gb, NULL, n ? dx : NULL, n, out, &err));
        gget(&again, out, sizeof again);
        G_OK(cv->sum_squares(cb, NULL, x, n, &want, &err));
        ASSERT_CLOSE(&got, &want, 1, 1e-6, "sum_squares n %zu", n);
        ck_assert(memcmp(&got, &again, sizeof got) == 0);
        gfree(dx);
        free(x);
    }
    gfree(out);
}
END_TEST

START_TEST(test_finite_check)
{
    static const tf_dtype dts[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_F64};
    int32_t *found = galloc(sizeof(int32_t));
    size_t n = 100003;
    for (size_t di = 0; di < 4; di++) {
        tf_dtype dt = dts[di];
        size_t es = esize(dt);
        unsigned char *h = calloc(n, es);
        ck_assert_ptr_nonnull(h);
        for (size_t i = 0; i < n; i++) {
            float v = tf_test_frand(-1e4f, 1e4f);
            if (dt == TF_DTYPE_F32) ((float *)h)[i] = v;
            else if (dt == TF_DTYPE_F16) ((uint16_t *)h)[i] = tf_f32_to_f16(v * 0.5f);
            else if (dt == TF_DTYPE_BF16) ((uint16_t *)h)[i] = tf_f32_to_bf16(v);
            else ((double *)h)[i] = v;
        }
        void *dx = gput(h, n * es);
        for (int round = 0; round < 3; round++) {
            int32_t start = round == 1 ? 2 : 0, got = -1;
            ck_assert_int_eq(gv->memcpy(gb, found, &start, sizeof start, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
            size_t at = (size_t)tf_test_irand((int)n);
            if (round == 2) { /* plant an inf (f16: 65504 * 2 overflows; NaN for f64) */
                unsigned char bad[8];
                if (dt == TF_DTYPE_F32) { float v = INFINITY; memcpy(bad, &v, 4); }
                else if (dt == TF_DTYPE_F16) { uint16_t v = 0x7c00; memcpy(bad, &v, 2); }
                else if (dt == TF_DTYPE_BF16) { uint16_t v = 0xffc1; memcpy(bad, &v, 2); }
                else { double v = NAN; memcpy(bad, &v, 8); }
                ck_assert_int_eq(gv->memcpy(gb, (unsigned char *)dx + at * es, bad, es, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
            }
            G_OK(gv->finite_check(gb, NULL, dx, n, dt, found, &err));
            gget(&got, found, sizeof got);
            int32_t want = start | (round == 2 ? 1 : 0);
            ck_assert_msg(got == want, "finite_check %s round %d: found %d, want %d",
                          tf_dtype_name(dt), round, got, want);
        }
        gfree(dx);
        free(h);
    }
    ck_assert_int_eq(gv->finite_check(gb, NULL, found, 1, TF_DTYPE_I32, found, &err), TF_ERR_PLUGIN);
    gfree(found);
}
END_TEST

/* === elementwise ================================================================================= */

/* Inputs for the activations: a spread of values plus the edges. */
static void activation_inputs(float *x, size_t n, float range)
{
    tf_test_fill(x, n, -range, range);
    static const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 0.7071f, -0.7071f, 5.0f,
                                  -5.0f, 14.9f, -14.9f, 30.0f, -30.0f, 100.0f, -100.0f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] && i < n; i++) x[i] = edges[i];
}

START_TEST(test_gelu_tanh)
{
    size_t n = 100003;
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        double tol = tol_of(dt, TF_MATMUL_FP32);
        float *x = fnew(n), *dy = fnew(n), *want = fnew(n), *got = fnew(n);
        activation_inputs(x, n, 8.0f);
        tf_test_fill(dy, n, -1, 1);
        void *dx = gput_dt(x, n, dt), *ddy = gput_dt(dy, n, dt), *dout = galloc(n * esize(dt));
        for (int kind = 0; kind < 2; kind++) {
            G_OK(gv->gelu_fwd(gb, NULL, dx, dout, n, (tf_gelu_kind)kind, dt, &err));
            gget_dt(got, dout, n, dt);
            G_OK(cv->gelu_fwd(cb, NULL, x, want, n, (tf_gelu_kind)kind, TF_DTYPE_F32, &err));
            ASSERT_CLOSE(got, want, n, tol, "gelu_fwd %s kind %d", tf_dtype_name(dt), kind);
            G_OK(gv->gelu_bwd(gb, NULL, ddy, dx, dout, n, (tf_gelu_kind)kind, dt, &err));
            gget_dt(got, dout, n, dt);
            G_OK(cv->gelu_bwd(cb, NULL, dy, x, want, n, (tf_gelu_kind)kind, TF_DTYPE_F32, &err));
            ASSERT_CLOSE(got, want, n, tol, "gelu_bwd %s kind %d", tf_dtype_name(dt), kind);
        }
        /* tanh, and its backward in place (dx aliases dy) */
        G_OK(gv->tanh_fwd(gb, NULL, dx, dout, n, dt, &err));
        gget_dt(got, dout, n, dt);
        G_OK(cv->tanh_fwd(cb, NULL, x, want, n, TF_DTYPE_F32, &err));
        ASSERT_CLOSE(got, want, n, tol, "tanh_fwd %s", tf_dtype_name(dt));
        float *y = fnew(n);
        memcpy(y, got, n * sizeof(float)); /* backward takes the (rounded) output */
        G_OK(gv->tanh_bwd(gb, NULL, ddy, dout, ddy, n, dt, &err));
        gget_dt(got, ddy, n, dt);
        G_OK(cv->tanh_bwd(cb, NULL, dy, y, want, n, TF_DTYPE_F32, &err));
        ASSERT_CLOSE(got, want, n, tol, "tanh_bwd %s", tf_dtype_name(dt));
        free(y);
        gfree(dx);
        gfree(ddy);
        gfree(dout);
        free(x);
        free(dy);
        free(want);
        free(got);
    }
    ck_assert_int_eq(gv->gelu_fwd(gb, NULL, &err, &err, 1, (tf_gelu_kind)7, TF_DTYPE_F32, &err),
                     TF_ERR_RUNTIME);
    ck_assert_int_eq(gv->tanh_fwd(gb, NULL, &err, &err, 1, TF_DTYPE_F64, &err), TF_ERR_PLUGIN);
}
END_TEST

/* ABI 1.3: dropout by global row, the same bits as backend-cpu for rows
 * whose length is not a multiple of 4 (counters restart at each row). */
START_TEST(test_dropout_rows)
{
    static const size_t row_lens[] = {1, 5, 1001};
    static const size_t row_counts[] = {1, 3, 7};
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        for (size_t li = 0; li < 3; li++)
            for (size_t ci = 0; ci < 3; ci++) {
                size_t R = row_lens[li], rows = row_counts[ci], n = R * rows;
                float *x = fnew(n), *want = fnew(n), *got = fnew(n);
                uint8_t *keep = malloc(n), *gkeep = malloc(n);
                ck_assert_ptr_nonnull(keep);
                ck_assert_ptr_nonnull(gkeep);
                tf_test_fill(x, n, -2, 2);
                void *dx = gput_dt(x, n, dt), *dy = galloc(n * esize(dt));
                uint8_t *dk = galloc(n);
                tf_dropout_desc d = {.size = sizeof d, .x = dx, .y = dy, .keep = dk, .rows = rows,
                                     .row_elems = R, .p = 0.3f, .dt = dt, .seed = tf_test_next(),
                                     .offset = (uint64_t)(ci + 1) << 32, .row_first = tf_test_next() >> 40,
                                     .row_stride = 1 + li};
                G_OK(gv->dropout_fwd_ex(gb, NULL, &d, &err));
                tf_dropout_desc c = d;
                c.x = x, c.y = want, c.keep = keep, c.dt = TF_DTYPE_F32;
                G_OK(cv->dropout_fwd_ex(cb, NULL, &c, &err));
                gget(gkeep, dk, n);
                ck_assert_msg(memcmp(gkeep, keep, n) == 0, "dropout mask %s rows %zu x %zu differs",
                              tf_dtype_name(dt), rows, R);
                gget_dt(got, dy, n, dt);
                ASSERT_CLOSE(got, want, n, tol_of(dt, TF_MATMUL_FP32), "dropout_fwd_ex %s %zu x %zu",
                             tf_dtype_name(dt), rows, R);
                gfree(dx);
                gfree(dy);
                gfree(dk);
                free(x);
                free(want);
                free(got);
                free(keep);
                free(gkeep);
            }
    }
    tf_dropout_desc old = {.size = 8};
    ck_assert_int_eq(gv->dropout_fwd_ex(gb, NULL, &old, &err), TF_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(err.msg, "older than this backend"));
}
END_TEST

START_TEST(test_dropout)
{
    static const size_t sizes[] = {1, 2, 3, 4, 5, 7, 1000003};
    static const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
    const uint64_t seed = 0x123456789abcdef0ull ^ tf_test_next(), offset = ((uint64_t)3 << 32) + 7;
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                size_t n = sizes[si];
                float p = ps[pi];
                float *x = fnew(n), *want = fnew(n), *got = fnew(n), *dwant = fnew(n);
                uint8_t *keep = malloc(n), *gkeep = malloc(n);
                ck_assert_ptr_nonnull(keep);
                ck_assert_ptr_nonnull(gkeep);
                tf_test_fill(x, n, -2, 2);
                void *dx = gput_dt(x, n, dt), *dy = galloc(n * esize(dt));
                uint8_t *dk = galloc(n);
                G_OK(gv->dropout_fwd(gb, NULL, dx, dy, dk, n, p, seed, offset, dt, &err));
                G_OK(cv->dropout_fwd(cb, NULL, x, want, keep, n, p, seed, offset, TF_DTYPE_F32,
                                     &err));
                gget(gkeep, dk, n);
                ck_assert_msg(memcmp(gkeep, keep, n) == 0, "dropout mask %s n %zu p %g differs",
                              tf_dtype_name(dt), n, (double)p);
                gget_dt(got, dy, n, dt);
                ASSERT_CLOSE(got, want, n, tol_of(dt, TF_MATMUL_FP32), "dropout_fwd %s n %zu p %g",
                             tf_dtype_name(dt), n, (double)p);
                /* backward of x (as if it were dy) through the same mask */
                G_OK(gv->dropout_bwd(gb, NULL, dx, dk, dy, n, p, dt, &err));
                G_OK(cv->dropout_bwd(cb, NULL, x, keep, dwant, n, p, TF_DTYPE_F32, &err));
                gget_dt(got, dy, n, dt);
                ASSERT_CLOSE(got, dwant, n, tol_of(dt, TF_MATMUL_FP32), "dropout_bwd %s n %zu",
                             tf_dtype_name(dt), n);
                /* y aliasing x */
                G_OK(gv->dropout_fwd(gb, NULL, dx, dx, dk, n, p, seed, offset, dt, &err));
                gget_dt(got, dx, n, dt);
                ASSERT_CLOSE(got, want, n, tol_of(dt, TF_MATMUL_FP32), "dropout_fwd in place");
                gfree(dx);
                gfree(dy);
                gfree(dk);
                free(x);
                free(want);
                free(got);
                free(dwant);
                free(keep);
                free(gkeep);
            }
    }
    ck_assert_int_eq(gv->dropout_fwd(gb, NULL, &err, &err, (uint8_t *)&err, 1, 1.5f, 0, 0,
                                     TF_DTYPE_F32, &err),
                     TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "p must be in [0, 1]"));
}
END_TEST

START_TEST(test_add_scale)
{
    size_t n = 70001;
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        double tol = tol_of(dt, TF_MATMUL_FP32);
        float *a = fnew(n), *b = fnew(n), *want = fnew(n), *got = fnew(n);
        tf_test_fill(a, n, -3, 3);
        tf_test_fill(b, n, -3, 3);
        void *da = gput_dt(a, n, dt), *db = gput_dt(b, n, dt);
        G_OK(gv->add(gb, NULL, da, db, da, n, dt, &err)); /* y aliases a */
        gget_dt(got, da, n, dt);
        G_OK(cv->add(cb, NULL, a, b, want, n, TF_DTYPE_F32, &err));
        ASSERT_CLOSE(got, want, n, tol, "add %s", tf_dtype_name(dt));
        tf_test_quantize(want, n, dt);
        G_OK(gv->scale(gb, NULL, da, n, -0.37f, dt, &err));
        gget_dt(got, da, n, dt);
        G_OK(cv->scale(cb, NULL, want, n, -0.37f, TF_DTYPE_F32, &err));
        ASSERT_CLOSE(got, want, n, tol, "scale %s", tf_dtype_name(dt));
        gfree(da);
        gfree(db);
        free(a);
        free(b);
        free(want);
        free(got);
    }
}
END_TEST

START_TEST(test_cast)
{
    static const tf_dtype dts[] = {TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16, TF_DTYPE_F64};
    size_t n = 50000;
    /* f64 source values: random magnitudes over the whole f16/bf16/f32 range,
     * with the specials */
    double *src64 = malloc(n * sizeof(double));
    ck_assert_ptr_nonnull(src64);
    for (size_t i = 0; i < n; i++) src64[i] = tf_test_frand(-1, 1) * pow(2.0, tf_test_irand(80) - 40);
    static const double specials[] = {0.0, -0.0, 65504.0, 65520.0, 1e-8, 5.96e-8, 2.98e-8,
                                      1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048, 3.4e38, 1e300};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) src64[i] = specials[i];
    src64[20] = INFINITY;
    src64[21] = -INFINITY;
    src64[22] = NAN;
    for (size_t si = 0; si < 4; si++)
        for (size_t di = 0; di < 4; di++) {
            tf_dtype sdt = dts[si], ddt = dts[di];
            if ((sdt == TF_DTYPE_BF16 || ddt == TF_DTYPE_BF16) && !dt_ok(TF_DTYPE_BF16)) continue;
            size_t ss = esize(sdt), ds = esize(ddt);
            /* the source in sdt, made by backend-cpu from the f64 values */
            void *hs = malloc(n * ss), *want = malloc(n * ds), *got = malloc(n * ds);
            ck_assert(hs && want && got);
            G_OK(cv->cast(cb, NULL, src64, TF_DTYPE_F64, hs, sdt, n, &err));
            G_OK(cv->cast(cb, NULL, hs, sdt, want, ddt, n, &err));
            void *dsrc = gput(hs, n * ss), *ddst = galloc(n * ds);
            G_OK(gv->cast(gb, NULL, dsrc, sdt, ddst, ddt, n, &err));
            gget(got, ddst, n * ds);
            /* the same bits, except that NaN payloads may differ */
            for (size_t i = 0; i < n; i++) {
                const unsigned char *g = (const unsigned char *)got + i * ds;
                const unsigned char *w = (const unsigned char *)want + i * ds;
                if (memcmp(g, w, ds) == 0) continue;
                double gv_ = 0, wv = 0;
                if (ddt == TF_DTYPE_F32) { gv_ = *(const float *)g; wv = *(const float *)w; }
                else if (ddt == TF_DTYPE_F64) { gv_ = *(const double *)g; wv = *(const double *)w; }
                else if (ddt == TF_DTYPE_F16) { gv_ = tf_f16_to_f32(*(const uint16_t *)g); wv = tf_f16_to_f32(*(const uint16_t *)w); }
                else { gv_ = tf_bf16_to_f32(*(const uint16_t *)g); wv = tf_bf16_to_f32(*(const uint16_t *)w); }
                ck_assert_msg(isnan(gv_) && isnan(wv), "cast %s -> %s element %zu: %.9g, want %.9g",
                              tf_dtype_name(sdt), tf_dtype_name(ddt), i, gv_, wv);
            }
            gfree(dsrc);
            gfree(ddst);
            free(hs);
            free(want);
            free(got);
        }
    free(src64);
    ck_assert_int_eq(gv->cast(gb, NULL, &err, TF_DTYPE_I32, &err, TF_DTYPE_F32, 1, &err),
                     TF_ERR_PLUGIN);
}
END_TEST

/* === embeddings ===================================================================================== */

START_TEST(test_embedding_fwd)
{
    const int vocab = 1000, rows = 517;
    static const int dims[] = {96, 768, 1};
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
            for (int acc = 0; acc < 2; acc++) {
                int dim = dims[k];
                size_t n = (size_t)rows * dim;
                int32_t *ids = malloc(rows * sizeof *ids);
                ck_assert_ptr_nonnull(ids);
                for (int i = 0; i < rows; i++) ids[i] = i < 5 ? vocab - 1 - i : tf_test_irand(vocab);
                float *table = fnew((size_t)vocab * dim), *out = fnew(n), *got = fnew(n);
                tf_test_fill(table, (size_t)vocab * dim, -1, 1);
                tf_test_fill(out, n, -1, 1);
                int32_t *dids = gput(ids, rows * sizeof *ids);
                float *dtab = gput(table, (size_t)vocab * dim * sizeof(float));
                void *dout = gput_dt(out, n, dt);
                G_OK(gv->embedding_fwd(gb, NULL, dids, rows, dtab, vocab, dim, dout, acc, dt, &err));
                gget_dt(got, dout, n, dt);
                G_OK(cv->embedding_fwd(cb, NULL, ids, rows, table, vocab, dim, out, acc,
                                       TF_DTYPE_F32, &err));
                ASSERT_CLOSE(got, out, n, tol_of(dt, TF_MATMUL_FP32),
                             "embedding_fwd %s dim %d acc %d", tf_dtype_name(dt), dim, acc);
                gfree(dids);
                gfree(dtab);
                gfree(dout);
                free(ids);
                free(table);
                free(out);
                free(got);
            }
    }
}
END_TEST

/* A bad id is reported by the next synchronization, naming the id and its row. */
START_TEST(test_embedding_bad_id)
{
    const int vocab = 50, rows = 40, dim = 8;
    int32_t ids[40];
    for (int i = 0; i < rows; i++) ids[i] = i % vocab;
    ids[17] = 50;
    int32_t *dids = gput(ids, sizeof ids);
    float *dtab = galloc((size_t)vocab * dim * sizeof(float));
    float *dout = galloc((size_t)rows * dim * sizeof(float));
    ck_assert_int_eq(gv->memset(gb, dtab, 0, (size_t)vocab * dim * sizeof(float), NULL), TF_OK);
    G_OK(gv->embedding_fwd(gb, NULL, dids, rows, dtab, vocab, dim, dout, false, TF_DTYPE_F32, &err));
    ck_assert_int_eq(gv->stream_sync(gb, NULL, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "embedding_fwd: id 50 at row 17 is outside [0, 50)"), "%s", err.msg);
    gsync(); /* reported once */
    /* again, after the first was taken: a new generation can report */
    ids[17] = 3;
    ids[31] = -4;
    ck_assert_int_eq(gv->memcpy(gb, dids, ids, sizeof ids, TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
    G_OK(gv->embedding_bwd(gb, NULL, dids, rows, dout, TF_DTYPE_F32, dtab, vocab, dim, &err));
    tf_event *ev = NULL;
    G_OK(gv->event_create(gb, &ev, &err));
    ck_assert_int_eq(gv->event_record(gb, ev, NULL), TF_OK);
    ck_assert_int_eq(gv->event_sync(gb, ev, &err), TF_ERR_DATA);
    ck_assert_msg(strstr(err.msg, "embedding_bwd: id -4 at row 31 is outside [0, 50)"), "%s", err.msg);
    gv->event_destroy(gb, ev);
    gsync();
    gfree(dids);
    gfree(dtab);
    gfree(dout);
    ck_assert_int_eq(gv->embedding_fwd(gb, NULL, NULL, 3, NULL, 5, 2, NULL, false, TF_DTYPE_F32, &err),
                     TF_ERR_RUNTIME);
    ck_assert_int_eq(gv->embedding_fwd(gb, NULL, NULL, 0, NULL, 0, 2, NULL, false, TF_DTYPE_F32, &err),
                     TF_ERR_RUNTIME);
}
END_TEST

START_TEST(test_embedding_bwd)
{
    static const int cases[][3] = {/* rows, vocab, dim */ {1, 3, 5},     {1000, 50, 130},
                                   {2048, 2, 768},     {700, 30522, 64}, {33, 1, 1}};
    for (size_t di = 0; di < NACT; di++) {
        tf_dtype dt = ACT[di];
        if (!dt_ok(dt)) continue;
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int rows = cases[ci][0], vocab = cases[ci][1], dim = cases[ci][2];
            size_t n = (size_t)rows * dim, tn = (size_t)vocab * dim;
            int32_t *ids = malloc(rows * sizeof *ids);
            ck_assert_ptr_nonnull(ids);
            /* mostly one id (a run across many tiles, as [PAD]), some others */
            for (int i = 0; i < rows; i++) ids[i] = tf_test_irand(3) ? 0 : tf_test_irand(vocab);
            float *dout = fnew(n), *tab = fnew(tn), *got = fnew(tn), *got2 = fnew(tn);
            tf_test_fill(dout, n, -1, 1);
            tf_test_fill(tab, tn, -1, 1);
            int32_t *dids = gput(ids, rows * sizeof *ids);
            void *ddout = gput_dt(dout, n, dt);
            float *dtab = gput(tab, tn * sizeof(float));
            G_OK(gv->embedding_bwd(gb, NULL, dids, rows, ddout, dt, dtab, vocab, dim, &err));
            gget(got, dtab, tn * sizeof(float));
            ck_assert_int_eq(gv->memcpy(gb, dtab, tab, tn * sizeof(float), TF_COPY_HOST_TO_DEVICE, NULL), TF_OK);
            G_OK(gv->embedding_bwd(gb, NULL, dids, rows, ddout, dt, dtab, vocab, dim, &err));
            gget(got2, dtab, tn * sizeof(float));
            ck_assert_msg(memcmp(got, got2, tn * sizeof(float)) == 0,
                          "embedding_bwd %s rows %d: two runs differ", tf_dtype_name(dt), rows);
            /* Each table element is a sum in another (fixed) order on each
             * backend: its error is bounded by the magnitude of its terms,
             * |initial value| + sum |dout| over its rows, not by max|table|
             * (vocab 1 sums 33 rows of both signs into one element). */
            double *mag = malloc(tn * sizeof *mag);
            ck_assert_ptr_nonnull(mag);
            for (size_t i = 0; i < tn; i++) mag[i] = fabs((double)tab[i]);
            for (int r = 0; r < rows; r++)
                for (int d = 0; d < dim; d++) mag[(size_t)ids[r] * dim + d] += fabs((double)dout[(size_t)r * dim + d]);
            G_OK(cv->embedding_bwd(cb, NULL, ids, rows, dout, TF_DTYPE_F32, tab, vocab, dim, &err));
            double worst = 0.0;
            for (size_t i = 0; i < tn; i++) {
                double e = fabs((double)got[i] - tab[i]) / fmax(mag[i], 1e-30);
                if (!(e <= worst)) worst = e;
            }
            ck_assert_msg(worst <= 1e-5,
                          "embedding_bwd %s rows %d vocab %d dim %d: off by %.3g of its terms' magnitude "
                          "> 1e-05 (seed %llu)",
                          tf_dtype_name(dt), rows, vocab, dim, worst, (unsigned long long)seed0);
            free(mag);
            gfree(dids);
            gfree(ddout);
            gfree(dtab);
            free(ids);
            free(dout);
            free(tab);
            free(got);
            free(got2);
        }
    }
}
END_TEST

/* === AdamW ============================================================================================ */

START_TEST(test_adamw)
{
    const size_t n = 200003;
    /* out of order, one empty, different decays, a gap (elements 5000..5999 untouched) */
    tf_adamw_segment segs[] = {{100000, 100003, 0.0f}, {0, 5000, 0.01f},
                               {6000, 94000, 0.1f},   {5000, 0, 0.5f}};
    float *p = fnew(n), *g = fnew(n), *m = fnew(n), *v = fnew(n);
    tf_test_fill(p, n, -1, 1);
    tf_test_fill(g, n, -1e-2f, 1e-2f);
    tf_test_fill(m, n, -1e-3f, 1e-3f);
    for (size_t i = 0; i < n; i++) v[i] = tf_test_frand(0, 1e-4f);
    float *dp = gput(p, n * 4), *dg = gput(g, n * 4), *dm = gput(m, n * 4), *dv = gput(v, n * 4);
    for (int step = 1; step <= 3; step++) {
        tf_adamw_hyper h = {1e-3f * (float)step, 0.9f, 0.999f, 1e-8f, step, step == 2 ? 0.5f : 1.0f};
        /* the third step uses a different segment list: the work list is rebuilt */
        size_t ns = step == 3 ? 3 : 4;
        G_OK(gv->adamw(gb, NULL, dp, dg, dm, dv, segs, ns, &h, &err));
        G_OK(cv->adamw(cb, NULL, p, g, m, v, segs, ns, &h, &err));
    }
    float *got = fnew(n);
    gget(got, dp, n * 4);
    ASSERT_CLOSE(got, p, n, 1e-5, "adamw params");
    gget(got, dm, n * 4);
    ASSERT_CLOSE(got, m, n, 1e-5, "adamw m");
    gget(got, dv, n * 4);
    ASSERT_CLOSE(got, v, n, 1e-5, "adamw v");
    /* errors: overlapping segments, bad hyperparameters */
    tf_adamw_segment bad[] = {{0, 10, 0.0f}, {5, 10, 0.0f}};
    tf_adamw_hyper h = {1e-3f, 0.9f, 0.999f, 1e-8f, 1, 1.0f};
    ck_assert_int_eq(gv->adamw(gb, NULL, dp, dg, dm, dv, bad, 2, &h, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "overlap"));
    h.step = 0;
    ck_assert_int_eq(gv->adamw(gb, NULL, dp, dg, dm, dv, segs, 1, &h, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "1-based"));
    gfree(dp);
    gfree(dg);
    gfree(dm);
    gfree(dv);
    free(p);
    free(g);
    free(m);
    free(v);
    free(got);
}
END_TEST

/* adamw_ex with TF_ADAMW_HF (transformers' AdamW) against backend-cpu's */
START_TEST(test_adamw_hf)
{
    const size_t n = 100003;
    tf_adamw_segment segs[] = {{0, 5000, 0.01f}, {5000, 95003, 0.0f}};
    float *p = fnew(n), *g = fnew(n), *m = fnew(n), *v = fnew(n);
    tf_test_fill(p, n, -1, 1);
    tf_test_fill(g, n, -1e-2f, 1e-2f);
    for (size_t i = 0; i < n; i++) m[i] = v[i] = 0.0f;
    float *dp = gput(p, n * 4), *dg = gput(g, n * 4), *dm = gput(m, n * 4), *dv = gput(v, n * 4);
    ck_assert(TF_HAS(gv, adamw_ex) && TF_HAS(cv, adamw_ex));
    for (int step = 1; step <= 3; step++) {
        tf_adamw_desc d = {sizeof d, {1e-3f, 0.9f, 0.999f, 1e-6f, step, 1.0f}, TF_ADAMW_HF};
        G_OK(gv->adamw_ex(gb, NULL, dp, dg, dm, dv, segs, 2, &d, &err));
        G_OK(cv->adamw_ex(cb, NULL, p, g, m, v, segs, 2, &d, &err));
    }
    float *got = fnew(n);
    gget(got, dp, n * 4);
    ASSERT_CLOSE(got, p, n, 1e-6, "adamw_hf params");
    tf_adamw_desc shortd = {8, {1e-3f, 0.9f, 0.999f, 1e-6f, 1, 1.0f}, TF_ADAMW_HF};
    ck_assert_int_eq(gv->adamw_ex(gb, NULL, dp, dg, dm, dv, segs, 2, &shortd, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "descriptor size"));
    gfree(dp);
    gfree(dg);
    gfree(dm);
    gfree(dv);
    free(p), free(g), free(m), free(v), free(got);
}
END_TEST

/* adafactor (transformers' Adafactor) against backend-cpu's: a factored
 * [2, 300, 129] tensor, a gap, a [1000, 77] matrix, an unfactored vector */
START_TEST(test_adafactor)
{
    tf_adafactor_tensor ts[3] = {{0, 2, 300, 129, true, 0, 0.01f},
                                 {77500, 1, 1000, 77, true, 0, 0.0f},
                                 {154500, 1, 1, 5003, false, 0, 0.1f}};
    size_t n = 154500 + 5003, ns = 0;
    for (int i = 0; i < 3; i++) ts[i].state_offset = ns, ns += tf_adafactor_state_count(&ts[i]);
    size_t wsb = tf_adafactor_workspace_bytes(ts, 3);
    float *p = fnew(n), *g = fnew(n), *s = fnew(ns), *ws = fnew(wsb / 4);
    tf_test_fill(p, n, -1, 1);
    tf_test_fill(g, n, -1e-2f, 1e-2f);
    for (size_t i = 0; i < ns; i++) s[i] = 0.0f;
    float *dp = gput(p, n * 4), *dg = gput(g, n * 4), *ds = gput(s, ns * 4), *dws = gput(ws, wsb);
    ck_assert(TF_HAS(gv, adafactor) && TF_HAS(cv, adafactor));
    for (int step = 1; step <= 3; step++) {
        tf_adafactor_desc d = {sizeof d, 1e-2, 1e-30f, 1.0f, -0.8f, step == 2 ? 0.5f : 1.0f, step, ts, 3, NULL, wsb};
        d.workspace = dws;
        G_OK(gv->adafactor(gb, NULL, dp, dg, ds, &d, &err));
        d.workspace = ws;
        G_OK(cv->adafactor(cb, NULL, p, g, s, &d, &err));
    }
    float *got = fnew(n > ns ? n : ns);
    gget(got, dp, n * 4);
    ASSERT_CLOSE(got, p, n, 1e-6, "adafactor params");
    gget(got, ds, ns * 4);
    ASSERT_CLOSE(got, s, ns, 1e-6, "adafactor state");
    tf_adafactor_desc shortd = {8, 1e-2, 1e-30f, 1.0f, -0.8f, 1.0f, 1, ts, 3, dws, wsb};
    ck_assert_int_eq(gv->adafactor(gb, NULL, dp, dg, ds, &shortd, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "descriptor size"));
    tf_adafactor_desc small = {sizeof small, 1e-2, 1e-30f, 1.0f, -0.8f, 1.0f, 1, ts, 3, dws, 16};
    ck_assert_int_eq(gv->adafactor(gb, NULL, dp, dg, ds, &small, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "backend-cuda: adafactor: workspace"));
    gfree(dp);
    gfree(dg);
    gfree(ds);
    gfree(dws);
    free(p), free(g), free(s), free(ws), free(got);
}
END_TEST

/* === the runner ========================================================================================== */

static Suite *cuda_suite(void)
{
    Suite *s = suite_create("backend_cuda");
    /* two cases, so CK_RUN_CASE=runtime runs the stream and memory checks
     * alone (the emulated suite does, under ThreadSanitizer) */
    const TTest *const runtime[] = {
        test_device, test_memory, test_out_of_memory, test_streams_events, test_config,
    };
    const TTest *const ops[] = {
        test_gemm, test_gemm_no_k, test_gemm_cublaslt_gelu, test_gemm_errors, test_sum_rows,
        test_sum_squares, test_finite_check, test_gelu_tanh, test_dropout, test_dropout_rows,
        test_add_scale, test_cast, test_embedding_fwd, test_embedding_bad_id, test_embedding_bwd,
        test_adamw, test_adamw_hf, test_adafactor,
    };
    tf_test_add_group(s, "runtime", runtime, TF_TEST_COUNT(runtime), 600);
    tf_test_add_group(s, "ops", ops, TF_TEST_COUNT(ops), 600);
    return s;
}

/* Without a device: open fails with TF_ERR_PLUGIN and one line that carries
 * the probe's reason ("no CUDA device visible (cudaGetDeviceCount: ...)" or
 * the driver-version message), creating nothing; check_config still reads
 * and checks the keys. Returns the number of failures (each printed). */
static int no_device_checks(const tf_backend_vtable *vt, const char *probe_why)
{
    int bad = 0;
    tf_backend *b = (tf_backend *)&bad; /* must come back NULL */
    tf_backend_open_args oa = {sizeof oa, 0, 0, 1, NULL, 1};
    tf_error e = {0};
    tf_status st = vt->open(&oa, &b, &e);
    const char *reason = strncmp(probe_why, "no CUDA device: ", 16) == 0 ? probe_why + 16 : probe_why;
    bool says_why = strncmp(probe_why, "no CUDA device: ", 16) == 0
                        ? strstr(e.msg, "backend-cuda: no CUDA device visible (cudaGetDeviceCount: ") &&
                              strstr(e.msg, reason)
                        : strstr(e.msg, reason) != NULL;
    if (st != TF_ERR_PLUGIN || b != NULL || !says_why || strchr(e.msg, '\n')) {
        fprintf(stderr, "FAIL: open without a device: status %d, backend %p, message '%s' (probe: '%s')\n",
                (int)st, (void *)b, e.msg, probe_why);
        bad++;
    }
    tf_config *cfg = NULL;
    if (tf_config_load_string(&cfg, "backend = { gelu_epilogue = \"fast\"; };", "nodev.cfg", NULL,
                              &e) != TF_OK ||
        vt->check_config(tf_config_section(cfg, "backend"), &e) != TF_ERR_CONFIG ||
        !strstr(e.msg, "gelu_epilogue")) {
        fprintf(stderr, "FAIL: check_config without a device: '%s'\n", e.msg);
        bad++;
    }
    tf_config_free(cfg);
    if (vt->supports(NULL, TF_MATMUL_FP32, TF_DTYPE_F32)) {
        fprintf(stderr, "FAIL: supports() without a backend said yes\n");
        bad++;
    }
    return bad;
}

int main(void)
{
    tf_test_pair_opts o = {.no_device = no_device_checks, .answer_probe = true};
    int rc = tf_test_pair_open(&pair, "test_backend_cuda", &o);
    if (rc >= 0) return rc;
    gv = pair.gv, cv = pair.cv, gb = pair.gb, cb = pair.cb;
    seed0 = pair.seed;
    int failed = tf_test_run(cuda_suite(), true);
    tf_test_pair_close(&pair);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
