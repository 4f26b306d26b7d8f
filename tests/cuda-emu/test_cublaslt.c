/* test_cublaslt.c — the cuBLASLt stand-in (cublaslt.c) against a plain
 * row-major reference written here, independently of it.
 *
 * Every GEMM is described the way backend-cpu and backend-cuda describe
 * theirs: row-major, C[M, N] = op(A)·op(B) with op(A) [M, K], op(B) [K, N],
 * leading dimensions lda, ldb, ldc, batch strides, and a bias of N elements
 * (one per column of C). lt_rowmajor_gemm() then asks cuBLASLt for it in
 * cuBLASLt's column-major terms, by the rule NVIDIA's documentation gives
 * (a layout (rows, cols, ld) puts element (i, j) at i + j·ld): a row-major
 * [r, c] buffer with ld is the column-major [c, r] matrix, its transpose,
 * with the same ld, so
 *     Cᵀ (column-major N × M) = op(B)ᵀ · op(A)ᵀ
 * — cuBLASLt's A is our B (N when B is not transposed), its B is our A, and
 * the bias, one per row of D = Cᵀ, is one per column of C. This is the
 * mapping plugins/backend-cuda/gemm.c (plan_build, run_plan) uses; reading
 * it line by line against lt_rowmajor_gemm() is part of this test's job
 * (see tests/cuda-emu/README.md). The reference below never goes through
 * the column-major view: it loops over the row-major buffers directly.
 *
 * Also: a product worked by hand in column-major terms, round-to-nearest-even
 * of the 16-bit outputs and of TF32 inputs, the descriptor being read at
 * call time (the product runs later, on the stream), and the refusals.
 *
 * Prints failures to stderr and ends with "N passed, N failed"; exit status
 * 0 only when nothing failed. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublasLt.h"
#include "cuda_runtime.h"

/* IEEE binary16 as the compiler implements it (GCC, Clang on x86-64 and
 * AArch64): the test's own f16 conversions, independent of the stand-in's. */
__extension__ typedef _Float16 f16_t;

static int n_pass, n_fail;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            n_pass++;                                                                              \
        } else {                                                                                   \
            n_fail++;                                                                              \
            if (n_fail <= 40) {                                                                    \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define MUST(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (int)(call);                                                                     \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "FATAL %s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* --- host-side numbers, written independently of the stand-in ------------------- */

static size_t tsize(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : 2;
}

static double get(cudaDataType_t t, const void *buf, size_t i)
{
    if (t == CUDA_R_32F) return ((const float *)buf)[i];
    uint16_t bits = ((const uint16_t *)buf)[i];
    if (t == CUDA_R_16F) {
        f16_t h;
        memcpy(&h, &bits, sizeof h);
        return (double)h;
    }
    uint32_t u = (uint32_t)bits << 16; /* bf16 is the top half of an f32 */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put(cudaDataType_t t, void *buf, size_t i, double v)
{
    if (t == CUDA_R_32F) {
        ((float *)buf)[i] = (float)v;
    } else if (t == CUDA_R_16F) {
        f16_t h = (f16_t)v;
        memcpy((uint16_t *)buf + i, &h, sizeof h);
    } else {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        u += 0x7fffu + ((u >> 16) & 1u); /* nearest even on the low 16 bits */
        ((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
    }
}

/* f32 -> TF32 (10 explicit mantissa bits), nearest even, on the bits. */
static double tf32_of(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0xfffu + ((u >> 13) & 1u);
    u &= 0xffffe000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One unit in the last place of type t at |r|. */
static double ulp_of(cudaDataType_t t, double r)
{
    int mant = t == CUDA_R_32F ? 23 : t == CUDA_R_16F ? 10 : 7;
    int emin = t == CUDA_R_16F ? -14 : -126;
    int e = r == 0.0 ? emin : ilogb(r);
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

/* got is what the stand-in stored; ref the exact value; scale bounds the
 * magnitudes that went into it. Output rounding is one rounding to nearest. */
static bool close_to(cudaDataType_t t, double got, double ref, double scale)
{
    if (isnan(ref)) return isnan(got);
    if (isnan(got)) return false;
    double tol = 0.5 * ulp_of(t, ref) * (1 + 1e-6) + 1e-9 * scale;
    if (t == CUDA_R_32F) tol = 2 * ulp_of(t, ref) + 1e-7 * scale;
    return fabs(got - ref) <= tol;
}

#define SQRT_2_OVER_PI 0.79788456080286535588
static double gelu_ref(double x)
{
    double u = SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x);
    return x * 0.5 * (1.0 + tanh(u));
}

static double gelu_grad_ref(double x)
{
    double u = SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x);
    double du = SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x);
    double sech = 1.0 / cosh(u);
    return 0.5 * (1.0 + tanh(u)) + 0.5 * x * sech * sech * du;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* --- device buffers --------------------------------------------------------------- */

static cudaStream_t stream;
static void *workspace;
#define WS_BYTES 4096

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    MUST(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void upload(void *d, const void *h, size_t bytes)
{
    if (bytes) MUST(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}

static void download(void *h, const void *d, size_t bytes)
{
    MUST(cudaStreamSynchronize(stream));
    if (bytes) MUST(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* --- the row-major GEMM, and its cuBLASLt call ------------------------------------ */

typedef struct rm_gemm {
    int M, N, K, batch;
    bool ta, tb;           /* A stored [K, M] / B stored [N, K] */
    int64_t lda, ldb, ldc; /* row-major leading dimensions */
    int64_t sa, sb, sc;    /* batch strides (elements) */
    cudaDataType_t ab, c;  /* A and B, C (= D) storage types */
    bool tf32;             /* CUBLAS_COMPUTE_32F_FAST_TF32 */
    uint32_t epi;          /* cublasLtEpilogue_t */
    cudaDataType_t bias_t; /* bias / bias-gradient storage type */
    float alpha, beta;
    bool in_place; /* D is C (as gemm.c) or a separate buffer */
} rm_gemm;

static bool has_bias(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool has_bgrad(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool has_gelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool aux_out(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool aux_in(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

/* Elements a batch of row-major [rows, ·] matrices with ld and stride spans. */
static size_t rm_elems(int rows, int64_t ld, int batch, int64_t stride)
{
    return (size_t)((batch - 1) * stride + rows * ld);
}

static cublasStatus_t set_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows,
                                 uint64_t cols, int64_t ld, int batch, int64_t stride)
{
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, rows, cols, ld);
    if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
        int32_t b = batch;
        s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &stride, sizeof stride);
    }
    return s;
}

/* The row-major GEMM g as one cublasLtMatmul (see the top of this file):
 * cuBLASLt's A is our B ([N, K] column-major, N, when B is stored [K, N];
 * [K, N], T, when stored [N, K]), its B is our A likewise, D = C is N × M
 * with ld ldc, the bias has N elements, aux is laid out as C. */
static cublasStatus_t lt_rowmajor_gemm(cublasLtHandle_t lt, const rm_gemm *g, const void *a,
                                       const void *b, const void *c, void *d, const void *bias,
                                       void *aux)
{
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulDescCreate(
        &desc, g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s) goto out;
    int32_t opa = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epi = g->epi;
    if ((s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa)) ||
        (s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb)) ||
        (s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)))
        goto out;
    if (has_bias(epi) || has_bgrad(epi)) {
        if (g->bias_t != g->c) { /* else the documented default: D's type */
            int32_t bt = g->bias_t;
            if ((s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                    sizeof bt)))
                goto out;
        }
        if ((s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias)))
            goto out;
    }
    if (aux_out(epi) || aux_in(epi)) {
        int64_t ld = g->ldc, stride = g->sc;
        if ((s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                &aux, sizeof aux)) ||
            (s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                                sizeof ld)) ||
            (g->batch > 1 &&
             (s = cublasLtMatmulDescSetAttribute(
                  desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride, sizeof stride))))
            goto out;
    }
    if ((s = set_layout(&la, g->ab, g->tb ? g->K : g->N, g->tb ? g->N : g->K, g->ldb, g->batch,
                        g->sb)) ||
        (s = set_layout(&lb, g->ab, g->ta ? g->M : g->K, g->ta ? g->K : g->M, g->lda, g->batch,
                        g->sa)) ||
        (s = set_layout(&lc, g->c, g->N, g->M, g->ldc, g->batch, g->sc)))
        goto out;
    uint64_t ws = WS_BYTES;
    if ((s = cublasLtMatmulPreferenceCreate(&pref)) ||
        (s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws)))
        goto out;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if ((s = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found)))
        goto out;
    if (found != 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > WS_BYTES) {
        s = CUBLAS_STATUS_INTERNAL_ERROR; /* the test's own marker: a bad heuristic answer */
        goto out;
    }
    s = cublasLtMatmul(lt, desc, &g->alpha, b, la, a, lb, &g->beta, c, lc, d, lc, &res.algo,
                       workspace, WS_BYTES, stream);
out:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
    return s;
}

/* Run g on random data; compare D (and aux, bias gradient) with the row-major
 * reference, and check that nothing outside the matrices was written. */
static void run_case(cublasLtHandle_t lt, const rm_gemm *g, const char *name)
{
    int ar = g->ta ? g->K : g->M, br = g->tb ? g->N : g->K; /* stored rows */
    size_t na = rm_elems(ar, g->lda, g->batch, g->sa), nb = rm_elems(br, g->ldb, g->batch, g->sb),
           nc = rm_elems(g->M, g->ldc, g->batch, g->sc), nbias = (size_t)g->N;
    unsigned char *ha = malloc(na * tsize(g->ab)), *hb = malloc(nb * tsize(g->ab)),
                  *hc = malloc(nc * tsize(g->c)), *hd = malloc(nc * tsize(g->c)),
                  *hx = malloc(nc * tsize(g->c)), *hbias = malloc(nbias * tsize(g->bias_t)),
                  *od = malloc(nc * tsize(g->c)), *ox = malloc(nc * tsize(g->c)),
                  *obias = malloc(nbias * tsize(g->bias_t));
    for (size_t i = 0; i < na; i++) put(g->ab, ha, i, urand());
    for (size_t i = 0; i < nb; i++) put(g->ab, hb, i, urand());
    for (size_t i = 0; i < nc; i++) {
        put(g->c, hc, i, g->beta == 0.0f ? NAN : 2 * urand()); /* NaN: beta = 0 must not read C */
        put(g->c, hd, i, -777.0);                              /* D's padding must survive */
        put(g->c, hx, i, aux_in(g->epi) ? 3 * urand() : 555.0);
    }
    for (size_t i = 0; i < nbias; i++) put(g->bias_t, hbias, i, has_bgrad(g->epi) ? NAN : urand());

    void *da = dev_alloc(na * tsize(g->ab)), *db = dev_alloc(nb * tsize(g->ab)),
         *dc = dev_alloc(nc * tsize(g->c)), *dd = g->in_place ? dc : dev_alloc(nc * tsize(g->c)),
         *dx = dev_alloc(nc * tsize(g->c)), *dbias = dev_alloc(nbias * tsize(g->bias_t));
    upload(da, ha, na * tsize(g->ab));
    upload(db, hb, nb * tsize(g->ab));
    upload(dc, hc, nc * tsize(g->c));
    if (!g->in_place) upload(dd, hd, nc * tsize(g->c));
    upload(dx, hx, nc * tsize(g->c));
    upload(dbias, hbias, nbias * tsize(g->bias_t));

    cublasStatus_t s = lt_rowmajor_gemm(lt, g, da, db, dc, dd, dbias, dx);
    CHECK(s == CUBLAS_STATUS_SUCCESS, "%s: %s", name, cublasLtGetStatusName(s));
    if (s == CUBLAS_STATUS_SUCCESS) {
        download(od, dd, nc * tsize(g->c));
        download(ox, dx, nc * tsize(g->c));
        download(obias, dbias, nbias * tsize(g->bias_t));
        const unsigned char *before_d = g->in_place ? hc : hd;
        bool ok = true;
        char why[256] = "";
        double *bgrad = calloc((size_t)g->N, sizeof(double)),
               *bscale = calloc((size_t)g->N, sizeof(double));
        for (int bt = 0; bt < g->batch && ok; bt++)
            for (int i = 0; i < g->M && ok; i++)
                for (int j = 0; j < g->N && ok; j++) {
                    double acc = 0, scale = 0;
                    for (int p = 0; p < g->K; p++) {
                        size_t ia =
                            (size_t)(bt * g->sa + (g->ta ? p * g->lda + i : i * g->lda + p));
                        size_t ib =
                            (size_t)(bt * g->sb + (g->tb ? j * g->ldb + p : p * g->ldb + j));
                        double x = get(g->ab, ha, ia), y = get(g->ab, hb, ib);
                        if (g->tf32) {
                            x = tf32_of(x);
                            y = tf32_of(y);
                        }
                        acc += x * y;
                        scale += fabs(x * y);
                    }
                    size_t ic = (size_t)(bt * g->sc + i * g->ldc + j);
                    double v = g->alpha * acc;
                    scale *= fabs(g->alpha);
                    if (g->beta != 0.0f) {
                        v += g->beta * get(g->c, hc, ic);
                        scale += fabs(g->beta * get(g->c, hc, ic));
                    }
                    if (aux_in(g->epi)) {
                        double gg = gelu_grad_ref(get(g->c, hx, ic));
                        v *= gg;
                        scale *= fabs(gg);
                        bgrad[j] += v;
                        bscale[j] += scale;
                    }
                    if (has_bias(g->epi)) {
                        v += get(g->bias_t, hbias, (size_t)j);
                        scale += fabs(get(g->bias_t, hbias, (size_t)j));
                    }
                    if (aux_out(g->epi) && !close_to(g->c, get(g->c, ox, ic), v, scale)) {
                        snprintf(why, sizeof why, "aux[%d][%d][%d] = %.9g, want %.9g", bt, i, j,
                                 get(g->c, ox, ic), v);
                        ok = false;
                    }
                    if (has_gelu(g->epi)) v = gelu_ref(v);
                    if (ok && !close_to(g->c, get(g->c, od, ic), v, scale)) {
                        snprintf(why, sizeof why, "C[%d][%d][%d] = %.9g, want %.9g", bt, i, j,
                                 get(g->c, od, ic), v);
                        ok = false;
                    }
                }
        for (int j = 0; j < g->N && ok && has_bgrad(g->epi); j++)
            if (!close_to(g->bias_t, get(g->bias_t, obias, (size_t)j), bgrad[j], bscale[j])) {
                snprintf(why, sizeof why, "bias gradient[%d] = %.9g, want %.9g", j,
                         get(g->bias_t, obias, (size_t)j), bgrad[j]);
                ok = false;
            }
        /* outside the matrices (padding past N, gaps between batches): untouched */
        for (size_t e = 0; e < nc && ok; e++) {
            int64_t in_batch = g->sc ? (int64_t)e % g->sc : (int64_t)e;
            int64_t bt = g->sc ? (int64_t)e / g->sc : 0;
            bool inside =
                bt < g->batch && in_batch < (int64_t)g->M * g->ldc && in_batch % g->ldc < g->N;
            if (inside) continue;
            size_t sz = tsize(g->c);
            if (memcmp(od + e * sz, before_d + e * sz, sz) != 0 ||
                memcmp(ox + e * sz, hx + e * sz, sz) != 0) {
                snprintf(why, sizeof why, "element %zu outside the matrices was written", e);
                ok = false;
            }
        }
        if (!has_bgrad(g->epi) && memcmp(obias, hbias, nbias * tsize(g->bias_t)) != 0) {
            snprintf(why, sizeof why, "the bias was written");
            ok = false;
        }
        if (!aux_out(g->epi) && memcmp(ox, hx, nc * tsize(g->c)) != 0) {
            snprintf(why, sizeof why, "aux was written without an aux epilogue");
            ok = false;
        }
        CHECK(ok, "%s: %s", name, why);
        free(bgrad);
        free(bscale);
    }
    MUST(cudaStreamSynchronize(stream));
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    if (!g->in_place) cudaFree(dd);
    cudaFree(dx);
    cudaFree(dbias);
    free(ha);
    free(hb);
    free(hc);
    free(hd);
    free(hx);
    free(hbias);
    free(od);
    free(ox);
    free(obias);
}

static const char *type_name(cudaDataType_t t)
{
    return t == CUDA_R_32F ? "f32" : t == CUDA_R_16F ? "f16" : "bf16";
}

static const char *epi_name(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    }
    return "?";
}

/* Every transpose × layout × epilogue × dtype × alpha/beta × in-place
 * combination, on odd sizes. */
static void test_all_combinations(cublasLtHandle_t lt)
{
    static const int shapes[][3] = {{1, 1, 1}, {7, 33, 1}, {33, 7, 7}, {7, 7, 33}, {1, 33, 7}};
    static const uint32_t epis[] = {CUBLASLT_EPILOGUE_DEFAULT,  CUBLASLT_EPILOGUE_BIAS,
                                    CUBLASLT_EPILOGUE_GELU,     CUBLASLT_EPILOGUE_GELU_BIAS,
                                    CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                                    CUBLASLT_EPILOGUE_DGELU,    CUBLASLT_EPILOGUE_DGELU_BGRAD};
    static const struct {
        cudaDataType_t ab, c;
        bool tf32;
    } types[] = {{CUDA_R_32F, CUDA_R_32F, false},   {CUDA_R_32F, CUDA_R_32F, true},
                 {CUDA_R_16F, CUDA_R_16F, false},   {CUDA_R_16F, CUDA_R_32F, false},
                 {CUDA_R_16BF, CUDA_R_16BF, false}, {CUDA_R_16BF, CUDA_R_32F, false}};
    static const float ab_pairs[][2] = {{1.0f, 0.0f}, {0.75f, -1.5f}};
    int cases = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int tr = 0; tr < 4; tr++)
            /* tight; padded; padded, 3 batches; 2 batches sharing one A and one B (stride 0) */
            for (int lay = 0; lay < 4; lay++)
                for (size_t ei = 0; ei < sizeof epis / sizeof epis[0]; ei++)
                    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                        for (int bias32 = 0; bias32 < 2; bias32++)
                            for (size_t ab = 0; ab < 2; ab++)
                                for (int inpl = 0; inpl < 2; inpl++) {
                                    uint32_t e = epis[ei];
                                    bool uses_bias = has_bias(e) || has_bgrad(e);
                                    /* an f32 bias is a separate case only for a 16-bit C */
                                    if (bias32 && (!uses_bias || types[ti].c == CUDA_R_32F))
                                        continue;
                                    /* the bias gradient is not batched in cuBLASLt */
                                    if (has_bgrad(e) && lay >= 2) continue;
                                    rm_gemm g = {0};
                                    g.M = shapes[sh][0];
                                    g.N = shapes[sh][1];
                                    g.K = shapes[sh][2];
                                    g.ta = tr & 1;
                                    g.tb = tr >> 1;
                                    g.batch = lay == 2 ? 3 : lay == 3 ? 2 : 1;
                                    int pad = lay == 0 ? 0 : 3;
                                    g.lda = (g.ta ? g.M : g.K) + pad;
                                    g.ldb = (g.tb ? g.K : g.N) + pad;
                                    g.ldc = g.N + pad;
                                    bool aux = aux_out(e) || aux_in(e);
                                    if (aux)
                                        g.ldc = (g.ldc + 7) / 8 * 8; /* AUX_LD: multiple of 8 */
                                    g.sa = (g.ta ? g.K : g.M) * g.lda + 5;
                                    g.sb = (g.tb ? g.N : g.K) * g.ldb + 2;
                                    if (lay == 3) g.sa = g.sb = 0;
                                    g.sc = g.M * g.ldc + 11;
                                    if (aux) g.sc = (g.sc + 7) / 8 * 8;
                                    g.ab = types[ti].ab;
                                    g.c = types[ti].c;
                                    g.tf32 = types[ti].tf32;
                                    g.epi = e;
                                    g.bias_t = bias32 ? CUDA_R_32F : g.c;
                                    g.alpha = ab_pairs[ab][0];
                                    g.beta = ab_pairs[ab][1];
                                    g.in_place = inpl;
                                    char name[200];
                                    snprintf(name, sizeof name,
                                             "[M %d N %d K %d batch %d ta %d tb %d lda %lld ldb "
                                             "%lld ldc %lld %s x %s -> %s%s %s bias %s alpha %g "
                                             "beta %g %s]",
                                             g.M, g.N, g.K, g.batch, g.ta, g.tb, (long long)g.lda,
                                             (long long)g.ldb, (long long)g.ldc, type_name(g.ab),
                                             type_name(g.ab), type_name(g.c), g.tf32 ? " tf32" : "",
                                             epi_name(e), type_name(g.bias_t), (double)g.alpha,
                                             (double)g.beta, inpl ? "in place" : "D apart");
                                    run_case(lt, &g, name);
                                    cases++;
                                }
    printf("all combinations: %d GEMMs\n", cases);
}

/* --- worked examples, in cuBLASLt's own column-major terms ---------------------------- */

/* A 2 × 3 stored column-major {1,2,3,4,5,6} is [[1,3,5],[2,4,6]]; B 3 × 2
 * {1,0,2, 0,1,1} is [[1,0],[0,1],[2,1]]; A·B = [[11,8],[14,10]], stored
 * {11,14,8,10}; with the BIAS epilogue and bias {100,200} (one per row of D):
 * {111,214,108,210}. The same with A given transposed (3 × 2, {1,3,5,2,4,6},
 * op T). */
static void test_column_major_by_hand(cublasLtHandle_t lt)
{
    const float a[6] = {1, 2, 3, 4, 5, 6}, at[6] = {1, 3, 5, 2, 4, 6}, b[6] = {1, 0, 2, 0, 1, 1};
    const float bias[2] = {100, 200}, want[4] = {11, 14, 8, 10},
                want_bias[4] = {111, 214, 108, 210};
    float *da = dev_alloc(sizeof a), *dat = dev_alloc(sizeof at), *db = dev_alloc(sizeof b),
          *dbias = dev_alloc(sizeof bias), *dd = dev_alloc(4 * sizeof(float));
    upload(da, a, sizeof a);
    upload(dat, at, sizeof at);
    upload(db, b, sizeof b);
    upload(dbias, bias, sizeof bias);
    for (int variant = 0; variant < 4; variant++) {
        bool trans = variant & 1, with_bias = variant >> 1;
        cublasLtMatmulDesc_t desc;
        cublasLtMatrixLayout_t la, lb, ld;
        MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        int32_t op = trans ? CUBLAS_OP_T : CUBLAS_OP_N;
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op));
        if (with_bias) {
            uint32_t e = CUBLASLT_EPILOGUE_BIAS;
            const void *p = dbias;
            MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
            MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p,
                                                sizeof p));
        }
        MUST(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, trans ? 3 : 2, trans ? 2 : 3,
                                        trans ? 3 : 2));
        MUST(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3));
        MUST(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 2, 2, 2));
        float alpha = 1, beta = 0, got[4];
        MUST(cublasLtMatmul(lt, desc, &alpha, trans ? dat : da, la, db, lb, &beta, dd, ld, dd, ld,
                            NULL, NULL, 0, stream));
        download(got, dd, sizeof got);
        CHECK(memcmp(got, with_bias ? want_bias : want, sizeof got) == 0,
              "by hand (op %s, bias %d): got {%g,%g,%g,%g}", trans ? "T" : "N", with_bias,
              (double)got[0], (double)got[1], (double)got[2], (double)got[3]);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
    }
    cudaFree(da);
    cudaFree(dat);
    cudaFree(db);
    cudaFree(dbias);
    cudaFree(dd);
}

/* A 1 × 1 × 1 product in the given types: D = alpha · a · b. */
static double one_product(cublasLtHandle_t lt, cublasComputeType_t ct, cudaDataType_t ab,
                          cudaDataType_t cd, double a, double b, float alpha)
{
    unsigned char ha[4], hb[4], hd[4];
    put(ab, ha, 0, a);
    put(ab, hb, 0, b);
    void *da = dev_alloc(4), *db = dev_alloc(4), *dd = dev_alloc(4);
    upload(da, ha, tsize(ab));
    upload(db, hb, tsize(ab));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lab, lcd;
    MUST(cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F));
    MUST(cublasLtMatrixLayoutCreate(&lab, ab, 1, 1, 1));
    MUST(cublasLtMatrixLayoutCreate(&lcd, cd, 1, 1, 1));
    float beta = 0;
    MUST(cublasLtMatmul(lt, desc, &alpha, da, lab, db, lab, &beta, dd, lcd, dd, lcd, NULL, NULL, 0,
                        stream));
    download(hd, dd, tsize(cd));
    cublasLtMatrixLayoutDestroy(lab);
    cublasLtMatrixLayoutDestroy(lcd);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
    return get(cd, hd, 0);
}

/* Output rounding is to nearest, ties to even; TF32 rounds the inputs. */
static void test_rounding(cublasLtHandle_t lt)
{
    /* f16: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 -> 1 (even);
     * 1 + 3·2^-11 halfway between 1 + 2^-10 and 1 + 2^-9 -> 1 + 2^-9 */
    double r1 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1, 1, 1 + 0x1p-11f);
    double r2 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1, 1, 1 + 0x3p-11f);
    CHECK(r1 == 1.0 && r2 == 1 + 0x1p-9, "f16 ties: %.10g %.10g", r1, r2);
    /* bf16: the same with 8 significant bits */
    r1 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 1, 1, 1 + 0x1p-8f);
    r2 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16BF, CUDA_R_16BF, 1, 1, 1 + 0x3p-8f);
    CHECK(r1 == 1.0 && r2 == 1 + 0x1p-6, "bf16 ties: %.10g %.10g", r1, r2);
    /* f16 overflow: 65520 is halfway to 2^16 -> inf; 65519 -> 65504 */
    r1 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1, 1, 65520.0f);
    r2 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1, 1, 65519.0f);
    CHECK(isinf(r1) && r2 == 65504.0, "f16 overflow: %.10g %.10g", r1, r2);
    /* f16 subnormal: 3·2^-26 is 0.75 of the smallest subnormal 2^-24 -> 2^-24 */
    r1 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_16F, CUDA_R_16F, 1, 1, 0x3p-26f);
    CHECK(r1 == 0x1p-24, "f16 subnormal: %.10g", r1);
    /* TF32: a = 1 + 2^-11 is a tie -> 1; 1 + 3·2^-11 -> 1 + 2^-9; FP32 keeps both */
    r1 = one_product(lt, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, 1 + 0x1p-11, 1, 1);
    r2 = one_product(lt, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, 1 + 0x3p-11, 1, 1);
    double r3 = one_product(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, 1 + 0x1p-11, 1, 1);
    CHECK(r1 == 1.0 && r2 == 1 + 0x1p-9 && r3 == 1 + 0x1p-11, "tf32: %.10g %.10g, fp32 %.10g", r1,
          r2, r3);
    /* GELU is the tanh form: gelu(1) = 0.8411920 (erf: 0.8413447) */
    const float one = 1;
    float *d1 = dev_alloc(4), *dd = dev_alloc(4), got = 0;
    upload(d1, &one, 4);
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l;
    MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    uint32_t e = CUBLASLT_EPILOGUE_GELU;
    MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    MUST(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 1, 1, 1));
    float alpha = 1, beta = 0;
    MUST(
        cublasLtMatmul(lt, desc, &alpha, d1, l, d1, l, &beta, dd, l, dd, l, NULL, NULL, 0, stream));
    download(&got, dd, 4);
    CHECK(fabs(got - 0.84119199) < 1e-6, "gelu(1) = %.8f, want the tanh form 0.84119199",
          (double)got);
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(d1);
    cudaFree(dd);
}

/* cublasLtMatmul reads the descriptor when called: gemm.c changes
 * BIAS_POINTER between calls while earlier products are still queued. */
static void test_descriptor_read_at_call(cublasLtHandle_t lt)
{
    const float one = 1, bias1 = 10, bias2 = 20;
    float *d1 = dev_alloc(4), *db1 = dev_alloc(4), *db2 = dev_alloc(4), *dd1 = dev_alloc(4),
          *dd2 = dev_alloc(4);
    upload(d1, &one, 4);
    upload(db1, &bias1, 4);
    upload(db2, &bias2, 4);
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l;
    MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    uint32_t e = CUBLASLT_EPILOGUE_BIAS;
    MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    MUST(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 1, 1, 1));
    float alpha = 1, beta = 0, g1 = 0, g2 = 0;
    const void *p = db1;
    MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p));
    MUST(cublasLtMatmul(lt, desc, &alpha, d1, l, d1, l, &beta, dd1, l, dd1, l, NULL, NULL, 0,
                        stream));
    p = db2;
    MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p));
    MUST(cublasLtMatmul(lt, desc, &alpha, d1, l, d1, l, &beta, dd2, l, dd2, l, NULL, NULL, 0,
                        stream));
    cublasLtMatmulDescDestroy(desc); /* the queued products must not need it */
    cublasLtMatrixLayoutDestroy(l);
    download(&g1, dd1, 4);
    download(&g2, dd2, 4);
    CHECK(g1 == 11 && g2 == 21, "queued products saw bias %g and %g, want 11 and 21", (double)g1,
          (double)g2);
    cudaFree(d1);
    cudaFree(db1);
    cudaFree(db2);
    cudaFree(dd1);
    cudaFree(dd2);
}

/* --- refusals ---------------------------------------------------------------------- */

static void test_refusals(cublasLtHandle_t lt)
{
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l4, l4h, l4b, lbad;
    cublasStatus_t s;

    /* compute types and epilogues not implemented */
    s = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_16F, CUDA_R_16F);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "COMPUTE_16F: %s", cublasLtGetStatusName(s));
    s = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_16F);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "scale type f16: %s", cublasLtGetStatusName(s));
    MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    static const uint32_t refused[] = {CUBLASLT_EPILOGUE_RELU,
                                       CUBLASLT_EPILOGUE_RELU_BIAS,
                                       CUBLASLT_EPILOGUE_DRELU_BGRAD,
                                       CUBLASLT_EPILOGUE_BGRADA,
                                       CUBLASLT_EPILOGUE_BGRADB,
                                       0,
                                       1000};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &refused[i],
                                           sizeof refused[i]);
        CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u: %s", refused[i],
              cublasLtGetStatusName(s));
    }
    int32_t devmode = CUBLASLT_POINTER_MODE_DEVICE, opc = CUBLAS_OP_C;
    s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &devmode,
                                       sizeof devmode);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "device pointer mode: %s", cublasLtGetStatusName(s));
    s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opc, sizeof opc);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "op C: %s", cublasLtGetStatusName(s));
    int64_t wrong_size = CUBLAS_OP_T;
    s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wrong_size,
                                       sizeof wrong_size);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "attribute of the wrong size: %s",
          cublasLtGetStatusName(s));

    /* ORDER_ROW, ld < rows */
    MUST(cublasLtMatrixLayoutCreate(&l4, CUDA_R_32F, 4, 4, 4));
    int32_t row = CUBLASLT_ORDER_ROW, col = CUBLASLT_ORDER_COL;
    s = cublasLtMatrixLayoutSetAttribute(l4, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "ORDER_ROW: %s", cublasLtGetStatusName(s));
    s = cublasLtMatrixLayoutSetAttribute(l4, CUBLASLT_MATRIX_LAYOUT_ORDER, &col, sizeof col);
    CHECK(s == CUBLAS_STATUS_SUCCESS, "ORDER_COL: %s", cublasLtGetStatusName(s));

    /* the heuristic: mismatched types and shapes */
    cublasLtMatmulPreference_t pref;
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res;
    int found = 7;
    MUST(cublasLtMatrixLayoutCreate(&l4h, CUDA_R_16F, 4, 4, 4));
    MUST(cublasLtMatrixLayoutCreate(&l4b, CUDA_R_16BF, 4, 4, 4));
    struct {
        cublasLtMatrixLayout_t a, b, cd;
        cublasStatus_t want;
        const char *what;
    } combos[] = {
        {l4, l4, l4, CUBLAS_STATUS_SUCCESS, "f32 x f32 -> f32"},
        {l4h, l4h, l4, CUBLAS_STATUS_SUCCESS, "f16 x f16 -> f32"},
        {l4h, l4, l4, CUBLAS_STATUS_NOT_SUPPORTED, "f16 x f32"},
        {l4, l4, l4h, CUBLAS_STATUS_NOT_SUPPORTED, "f32 x f32 -> f16"},
        {l4h, l4h, l4b, CUBLAS_STATUS_NOT_SUPPORTED, "f16 x f16 -> bf16"},
        {l4b, l4b, l4h, CUBLAS_STATUS_NOT_SUPPORTED, "bf16 x bf16 -> f16"},
    };
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        found = 7;
        s = cublasLtMatmulAlgoGetHeuristic(lt, desc, combos[i].a, combos[i].b, combos[i].cd,
                                           combos[i].cd, pref, 1, &res, &found);
        CHECK(s == combos[i].want && found == (s == CUBLAS_STATUS_SUCCESS),
              "heuristic %s: %s, %d found", combos[i].what, cublasLtGetStatusName(s), found);
    }
    MUST(cublasLtMatrixLayoutCreate(&lbad, CUDA_R_32F, 4, 5, 4));
    s = cublasLtMatmulAlgoGetHeuristic(lt, desc, l4, lbad, l4, l4, pref, 1, &res, &found);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE && found == 0, "4x4 · 4x5 -> 4x4: %s",
          cublasLtGetStatusName(s));
    cublasLtMatmulDesc_t dtf;
    MUST(cublasLtMatmulDescCreate(&dtf, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
    s = cublasLtMatmulAlgoGetHeuristic(lt, dtf, l4h, l4h, l4, l4, pref, 1, &res, &found);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "TF32 with f16 inputs: %s",
          cublasLtGetStatusName(s));
    cublasLtMatmulDescDestroy(dtf);

    /* bias of f16 for an f32 D; GELU aux with ld not a multiple of 8 */
    cublasLtMatmulDesc_t db;
    MUST(cublasLtMatmulDescCreate(&db, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    uint32_t e = CUBLASLT_EPILOGUE_BIAS;
    int32_t bt = CUDA_R_16F;
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    s = cublasLtMatmulAlgoGetHeuristic(lt, db, l4, l4, l4, l4, pref, 1, &res, &found);
    CHECK(s == CUBLAS_STATUS_NOT_SUPPORTED, "f16 bias, f32 D: %s", cublasLtGetStatusName(s));
    e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bt = -1;
    int64_t aux_ld = 4;
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                        sizeof aux_ld));
    s = cublasLtMatmulAlgoGetHeuristic(lt, db, l4, l4, l4, l4, pref, 1, &res, &found);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "aux ld 4: %s", cublasLtGetStatusName(s));
    aux_ld = 8;
    MUST(cublasLtMatmulDescSetAttribute(db, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                        sizeof aux_ld));
    s = cublasLtMatmulAlgoGetHeuristic(lt, db, l4, l4, l4, l4, pref, 1, &res, &found);
    CHECK(s == CUBLAS_STATUS_SUCCESS, "aux ld 8: %s", cublasLtGetStatusName(s));
    cublasLtMatmulDescDestroy(db);

    /* cublasLtMatmul: host pointers, short buffers, in place with two layouts;
     * D must be left as it was */
    float host[16] = {0}, fill[16], got[16], alpha = 1, beta = 1;
    for (int i = 0; i < 16; i++) fill[i] = (float)i;
    float *da = dev_alloc(sizeof host), *dd = dev_alloc(sizeof host),
          *dshort = dev_alloc(15 * sizeof(float));
    upload(da, fill, sizeof fill);
    upload(dd, fill, sizeof fill);
    s = cublasLtMatmul(lt, desc, &alpha, host, l4, da, l4, &beta, dd, l4, dd, l4, NULL, NULL, 0,
                       stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "host A: %s", cublasLtGetStatusName(s));
    s = cublasLtMatmul(lt, desc, &alpha, da, l4, da, l4, &beta, dd, l4, host, l4, NULL, NULL, 0,
                       stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "host D: %s", cublasLtGetStatusName(s));
    s = cublasLtMatmul(lt, desc, &alpha, da, l4, dshort, l4, &beta, dd, l4, dd, l4, NULL, NULL, 0,
                       stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "B one element short: %s", cublasLtGetStatusName(s));
    s = cublasLtMatmul(lt, desc, &alpha, da, l4, da, l4, &beta, dd, l4, dd, l4, NULL, host,
                       sizeof host, stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "host workspace: %s", cublasLtGetStatusName(s));
    cublasLtMatrixLayout_t l4ld5;
    MUST(cublasLtMatrixLayoutCreate(&l4ld5, CUDA_R_32F, 3, 4, 4));
    cublasLtMatrixLayout_t l34;
    MUST(cublasLtMatrixLayoutCreate(&l34, CUDA_R_32F, 3, 4, 3));
    cublasLtMatrixLayout_t l3x4;
    MUST(cublasLtMatrixLayoutCreate(&l3x4, CUDA_R_32F, 3, 4, 3));
    s = cublasLtMatmul(lt, desc, &alpha, da, l3x4, da, l4, &beta, dd, l4ld5, dd, l34, NULL, NULL, 0,
                       stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "in place with ldc 4, ldd 3: %s",
          cublasLtGetStatusName(s));
    cublasLtMatmulAlgo_t junk = {{1, 2, 3}};
    s = cublasLtMatmul(lt, desc, &alpha, da, l4, da, l4, &beta, dd, l4, dd, l4, &junk, NULL, 0,
                       stream);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "an algorithm the heuristic did not give: %s",
          cublasLtGetStatusName(s));
    download(got, dd, sizeof got);
    CHECK(memcmp(got, fill, sizeof got) == 0, "a refused matmul wrote D");

    cublasLtMatrixLayoutDestroy(l4ld5);
    cublasLtMatrixLayoutDestroy(l34);
    cublasLtMatrixLayoutDestroy(l3x4);
    cublasLtMatrixLayoutDestroy(lbad);
    cublasLtMatrixLayoutDestroy(l4);
    cublasLtMatrixLayoutDestroy(l4h);
    cublasLtMatrixLayoutDestroy(l4b);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(da);
    cudaFree(dd);
    cudaFree(dshort);
    CHECK(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
                 "CUBLAS_STATUS_NOT_SUPPORTED") == 0 &&
              cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)[0] != '\0',
          "status names");
}

/* TFCORE_EMU_CUBLASLT_REFUSE: the stand-in refuses, on request, what a real
 * cuBLASLt may have no algorithm for, so that backend-cuda's fallbacks run. */
static void test_refuse_on_request(void)
{
    cublasLtHandle_t h;
    setenv("TFCORE_EMU_CUBLASLT_REFUSE", "gelu,bias-f3", 1);
    cublasStatus_t s = cublasLtCreate(&h);
    CHECK(s == CUBLAS_STATUS_INVALID_VALUE, "unknown word: %s", cublasLtGetStatusName(s));

    cublasLtMatrixLayout_t l16;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    int found;
    MUST(cublasLtMatrixLayoutCreate(&l16, CUDA_R_16F, 8, 8, 8));
    MUST(cublasLtMatmulPreferenceCreate(&pref));
    uint16_t *dx = dev_alloc(64 * 2), *dd = dev_alloc(64 * 2), *daux = dev_alloc(64 * 2), got[64],
             fill[64];
    float *dbias = dev_alloc(8 * 4);
    for (int i = 0; i < 64; i++) fill[i] = 0x3c00; /* 1.0 */
    upload(dx, fill, sizeof fill);
    upload(dd, fill, sizeof fill);
    static const struct {
        const char *env;
        uint32_t epi;
        int32_t bias_type;
        cublasStatus_t heuristic, matmul;
    } cases[] = {
        {"bias-f32,gelu", CUBLASLT_EPILOGUE_BIAS, CUDA_R_32F, CUBLAS_STATUS_NOT_SUPPORTED,
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"bias-f32,gelu", CUBLASLT_EPILOGUE_BIAS, CUDA_R_16F, CUBLAS_STATUS_SUCCESS,
         CUBLAS_STATUS_SUCCESS},
        {"bias-f32,gelu", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16F, CUBLAS_STATUS_NOT_SUPPORTED,
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"bias-f32,gelu", CUBLASLT_EPILOGUE_DEFAULT, -1, CUBLAS_STATUS_SUCCESS,
         CUBLAS_STATUS_SUCCESS},
        {"gelu,at-matmul", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_32F, CUBLAS_STATUS_SUCCESS,
         CUBLAS_STATUS_NOT_SUPPORTED},
        {"", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_32F, CUBLAS_STATUS_SUCCESS,
         CUBLAS_STATUS_SUCCESS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("TFCORE_EMU_CUBLASLT_REFUSE", cases[i].env, 1);
        MUST(cublasLtCreate(&h));
        cublasLtMatmulDesc_t desc;
        MUST(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        uint32_t e = cases[i].epi;
        int32_t bt = cases[i].bias_type;
        int64_t ld = 8;
        const void *bias = dbias;
        void *aux = daux;
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                            sizeof bt));
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias));
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                            sizeof aux));
        MUST(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                            sizeof ld));
        found = 7;
        s = cublasLtMatmulAlgoGetHeuristic(h, desc, l16, l16, l16, l16, pref, 1, &res, &found);
        CHECK(s == cases[i].heuristic && found == (s == CUBLAS_STATUS_SUCCESS),
              "REFUSE=%s epilogue %u bias type %d: heuristic %s, %d found", cases[i].env,
              cases[i].epi, cases[i].bias_type, cublasLtGetStatusName(s), found);
        float alpha = 1, beta = 0;
        s = cublasLtMatmul(h, desc, &alpha, dx, l16, dx, l16, &beta, dd, l16, dd, l16, NULL, NULL,
                           0, stream);
        download(got, dd, sizeof got);
        CHECK(s == cases[i].matmul &&
                  (s == CUBLAS_STATUS_SUCCESS || memcmp(got, fill, sizeof got) == 0),
              "REFUSE=%s epilogue %u bias type %d: matmul %s", cases[i].env, cases[i].epi,
              cases[i].bias_type, cublasLtGetStatusName(s));
        upload(dd, fill, sizeof fill);
        cublasLtMatmulDescDestroy(desc);
        MUST(cublasLtDestroy(h));
    }
    unsetenv("TFCORE_EMU_CUBLASLT_REFUSE");
    cublasLtMatrixLayoutDestroy(l16);
    cublasLtMatmulPreferenceDestroy(pref);
    cudaFree(dx);
    cudaFree(dd);
    cudaFree(daux);
    cudaFree(dbias);
}

int main(void)
{
    cublasLtHandle_t lt;
    MUST(cudaStreamCreate(&stream));
    workspace = dev_alloc(WS_BYTES);
    MUST(cublasLtCreate(&lt));
    test_column_major_by_hand(lt);
    test_rounding(lt);
    test_descriptor_read_at_call(lt);
    test_refusals(lt);
    test_refuse_on_request();
    test_all_combinations(lt);
    MUST(cublasLtDestroy(lt));
    cudaFree(workspace);
    MUST(cudaStreamDestroy(stream));
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
