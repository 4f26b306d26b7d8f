/* gemm.c — backend-cuda GEMM through cuBLASLt.
 *
 * Row-major onto column-major: a row-major [r, c] matrix with leading
 * dimension ld is, read column-major, its transpose [c, r] with the same ld.
 * So C = op(A)·op(B) (row-major [m, n]) is computed as the column-major
 * product Cᵀ = op(B)ᵀ·op(A)ᵀ ([n, m]): cuBLASLt's first operand is our B,
 * its second our A, and each keeps its own transpose flag:
 *   B not transposed: stored [k, n] row-major = [n, k] column-major = op(B)ᵀ   -> N
 *   B transposed:     stored [n, k] row-major = [k, n] column-major           -> T
 *   A not transposed: stored [m, k] row-major = [k, m] column-major = op(A)ᵀ   -> N
 *   A transposed:     stored [k, m] row-major = [m, k] column-major           -> T
 * The bias is per column of C = per row of Cᵀ, which is what cuBLASLt's
 * BIAS epilogue broadcasts (a vector as long as D has rows).
 *
 * Compute types: FP32 -> CUBLAS_COMPUTE_32F (no TF32), TF32 ->
 * CUBLAS_COMPUTE_32F_FAST_TF32, F16 / BF16 inputs -> CUBLAS_COMPUTE_32F
 * (fp32 accumulate); alpha and beta are f32 on the host.
 *
 * Epilogues:
 *  - BIAS: cuBLASLt's BIAS epilogue. The bias is f32; with a 16-bit C the
 *    plan first asks for an f32 bias (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
 *    where cuBLASLt has no algorithm for that, the bias is rounded to C's
 *    dtype in the workspace and the plan uses the default (C-typed) bias.
 *  - BIAS_GELU: cuBLASLt's GELU epilogues use the tanh approximation, and
 *    BERT's "gelu" is the exact erf form, so by default the GEMM runs with the
 *    BIAS epilogue writing pre-activations into aux, and tfc_gelu_matrix
 *    then writes C = gelu(aux) with backend-cpu's formulas (the same bits
 *    in f32). With the key gelu_epilogue = "cublaslt", a tanh GELU on 16-bit
 *    activations uses cuBLASLt's GELU_AUX_BIAS (aux = pre-activation, the
 *    layout gelu_bwd reads), when ldc is a multiple of 8 and cuBLASLt has an
 *    algorithm; otherwise the same fallback.
 *  - k = 0: no product at all; tfc_gemm_no_k applies beta and the epilogue.
 *
 * Plans (descriptor, layouts, heuristic's algorithm) are cached per shape
 * key, pointer alignments included (the heuristic's choice depends on them),
 * so the training loop asks the heuristic once per distinct GEMM. The cache
 * is a fixed open-addressing table; when full it is emptied and refilled.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "gemm_align.h"
#include "tfcore/log.h"

#define GEMM_CACHE_SLOTS 1024 /* power of two */
#define GEMM_CACHE_MAX 512    /* entries before the cache is emptied */

typedef struct gemm_key {
    uint8_t trans_a, trans_b, ab_dtype, c_dtype, mode, lt_epilogue, bias_f32, pad0;
    int32_t m, n, k, batch;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    uint32_t align_a, align_b, align_c, align_bias, align_aux, pad1;
} gemm_key;

typedef struct gemm_plan {
    bool used;
    bool ok;                  /* false: cuBLASLt had no algorithm (remembered too) */
    gemm_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

struct cuda_gemm_cache {
    gemm_plan slots[GEMM_CACHE_SLOTS];
    size_t count;
};

static void plan_destroy(gemm_plan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

static void cache_clear(cuda_gemm_cache *c)
{
    for (size_t i = 0; i < GEMM_CACHE_SLOTS; i++)
        if (c->slots[i].used) plan_destroy(&c->slots[i]);
    c->count = 0;
}

bool cuda_gemm_cache_new(tf_backend *be)
{
    be->gemm_cache = calloc(1, sizeof *be->gemm_cache);
    return be->gemm_cache != NULL;
}

void cuda_gemm_cache_free(tf_backend *be)
{
    if (!be->gemm_cache) return;
    cache_clear(be->gemm_cache);
    free(be->gemm_cache);
    be->gemm_cache = NULL;
}

static uint64_t key_hash(const gemm_key *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Largest power of two (<= 256) dividing the address: what cuBLASLt's
 * MIN_ALIGNMENT preferences describe. NULL (an unused operand) counts as 256. */
static uint32_t align_of(const void *p) { return tfc_gemm_operand_align(p, 1, 0, 1); }

static cudaDataType_t cuda_type(tf_dtype dt)
{
    switch (dt) {
    case TF_DTYPE_F16: return CUDA_R_16F;
    case TF_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

/* --- checks (the same rules as backend-cpu, plus the dtype/mode pairs) -- */

static tf_status check_ld(tf_error *err, const char *name, int64_t ld, int cols)
{
    int64_t need = cols > 1 ? cols : 1;
    if (ld < need || ld > INT_MAX)
        return cuda_fail(err, TF_ERR_RUNTIME, "gemm", "%s is %lld, must be in [%lld, %d]", name,
                         (long long)ld, (long long)need, INT_MAX);
    return TF_OK;
}

static const char *mode_name(tf_matmul_mode m)
{
    switch (m) {
    case TF_MATMUL_FP32: return "FP32";
    case TF_MATMUL_TF32: return "TF32";
    case TF_MATMUL_F16: return "F16";
    case TF_MATMUL_BF16: return "BF16";
    default: return "?";
    }
}

static tf_status check_types(const tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    tf_dtype want;
    switch (g->mode) {
    case TF_MATMUL_FP32:
    case TF_MATMUL_TF32: want = TF_DTYPE_F32; break;
    case TF_MATMUL_F16: want = TF_DTYPE_F16; break;
    case TF_MATMUL_BF16: want = TF_DTYPE_BF16; break;
    default:
        return cuda_fail(err, TF_ERR_PLUGIN, "gemm", "unknown matmul mode %d", (int)g->mode);
    }
    const char *an = tf_dtype_name(g->ab_dtype), *cn = tf_dtype_name(g->c_dtype);
    if (g->ab_dtype != want)
        return cuda_fail(err, TF_ERR_PLUGIN, "gemm",
                         "matmul mode %s takes %s inputs, got ab_dtype %s", mode_name(g->mode),
                         tf_dtype_name(want), an ? an : "?");
    if (g->c_dtype != TF_DTYPE_F32 && g->c_dtype != want)
        return cuda_fail(err, TF_ERR_PLUGIN, "gemm",
                         "matmul mode %s writes C as F32 or %s, got c_dtype %s",
                         mode_name(g->mode), tf_dtype_name(want), cn ? cn : "?");
    if (g->mode == TF_MATMUL_BF16 && be->cc_major < 8)
        return cuda_fail(err, TF_ERR_PLUGIN, "gemm", "BF16 needs compute capability 8.0, %s is %d.%d",
                         be->gpu, be->cc_major, be->cc_minor);
    return TF_OK;
}

static tf_status check_desc(const tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    tf_status st;
    if ((st = cuda_need(err, "gemm", "desc", g))) return st;
    if ((st = cuda_need_min(err, "gemm", "m", g->m, 0)) ||
        (st = cuda_need_min(err, "gemm", "n", g->n, 0)) ||
        (st = cuda_need_min(err, "gemm", "k", g->k, 0)) ||
        (st = cuda_need_min(err, "gemm", "batch", g->batch, 1)))
        return st;
    if ((st = check_types(be, g, err))) return st;
    if ((st = check_ld(err, "lda", g->lda, g->trans_a ? g->m : g->k)) ||
        (st = check_ld(err, "ldb", g->ldb, g->trans_b ? g->k : g->n)) ||
        (st = check_ld(err, "ldc", g->ldc, g->n)))
        return st;
    if (g->batch > 1 && (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0))
        return cuda_fail(err, TF_ERR_RUNTIME, "gemm",
                         "batch strides must be >= 0, got a %lld, b %lld, c %lld",
                         (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c);
    switch (g->epilogue) {
    case TF_EPILOGUE_NONE: break;
    case TF_EPILOGUE_BIAS:
        if (cuda_need(err, "gemm", "bias (BIAS epilogue)", g->bias)) return TF_ERR_RUNTIME;
        break;
    case TF_EPILOGUE_BIAS_GELU:
        if (cuda_need(err, "gemm", "bias (BIAS_GELU epilogue)", g->bias) ||
            cuda_need(err, "gemm", "aux (BIAS_GELU epilogue)", g->aux))
            return TF_ERR_RUNTIME;
        if (g->beta != 0.0f)
            return cuda_fail(err, TF_ERR_RUNTIME, "gemm",
                             "the BIAS_GELU epilogue needs beta = 0, got %g", (double)g->beta);
        if (g->gelu != TF_GELU_ERF && g->gelu != TF_GELU_TANH)
            return cuda_fail(err, TF_ERR_RUNTIME, "gemm", "unknown gelu kind %d", (int)g->gelu);
        break;
    default:
        return cuda_fail(err, TF_ERR_RUNTIME, "gemm", "unknown epilogue %d", (int)g->epilogue);
    }
    if (g->m > 0 && g->n > 0) {
        if (cuda_need(err, "gemm", "c", g->c)) return TF_ERR_RUNTIME;
        if (g->k > 0 && (cuda_need(err, "gemm", "a", g->a) || cuda_need(err, "gemm", "b", g->b)))
            return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

/* --- plans -------------------------------------------------------------------- */

#define LT_TRY(call, what)                                                            \
    do {                                                                              \
        cublasStatus_t s_ = (call);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
            *why = (what);                                                            \
            *status = s_;                                                             \
            return false;                                                             \
        }                                                                             \
    } while (0)

static bool set_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows, uint64_t cols,
                       int64_t ld, int batch, int64_t stride, const char **why,
                       cublasStatus_t *status)
{
    LT_TRY(cublasLtMatrixLayoutCreate(l, t, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
        int32_t b = batch;
        LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b,
                                                sizeof b),
               "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
        LT_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride),
               "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
    }
    return true;
}

/* Fill p for key k (pointers for the heuristic's alignment view: bias, aux).
 * false with *why / *status on a cuBLASLt error; true with p->ok = false when
 * the heuristic found no algorithm. */
static bool plan_build(tf_backend *be, gemm_plan *p, const gemm_key *k, const void *bias,
                       const void *aux, const char **why, cublasStatus_t *status)
{
    memset(p, 0, sizeof *p);
    p->used = true;
    p->key = *k;
    cublasComputeType_t ct =
        k->mode == TF_MATMUL_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t ab = cuda_type((tf_dtype)k->ab_dtype), ctype = cuda_type((tf_dtype)k->c_dtype);
    LT_TRY(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t op_first = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* our B */
    cublasOperation_t op_second = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* our A */
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                          sizeof op_first),
           "CUBLASLT_MATMUL_DESC_TRANSA");
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                          sizeof op_second),
           "CUBLASLT_MATMUL_DESC_TRANSB");
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->lt_epilogue;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
           "CUBLASLT_MATMUL_DESC_EPILOGUE");
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
        if (k->bias_f32 && ctype != CUDA_R_32F) {
            int32_t bt = CUDA_R_32F;
            LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &bt, sizeof bt),
                   "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
        }
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof bias),
               "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
    }
    if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        int64_t ld = k->ldc, stride = k->stride_c;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &aux, sizeof aux),
               "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                              sizeof ld),
               "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD");
        if (k->batch > 1)
            LT_TRY(cublasLtMatmulDescSetAttribute(p->desc,
                                                  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
                                                  &stride, sizeof stride),
                   "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE");
    }
    /* cuBLASLt A = our B: [n, k] (N) or [k, n] (T) column-major, ld = ldb */
    uint64_t n = (uint64_t)k->n, m = (uint64_t)k->m, kk = (uint64_t)k->k;
    if (!set_layout(&p->la, ab, k->trans_b ? kk : n, k->trans_b ? n : kk, k->ldb, k->batch,
                    k->stride_b, why, status) ||
        !set_layout(&p->lb, ab, k->trans_a ? m : kk, k->trans_a ? kk : m, k->lda, k->batch,
                    k->stride_a, why, status) ||
        !set_layout(&p->lc, ctype, n, m, k->ldc, k->batch, k->stride_c, why, status))
        return false;

    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    size_t ws = be->lt_ws_bytes;
    uint32_t al_first = k->align_b, al_second = k->align_a, al_c = k->align_c;
    cublasStatus_t s1 = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (s1 == CUBLAS_STATUS_SUCCESS)
        s1 = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &al_first, sizeof al_first);
    if (s1 == CUBLAS_STATUS_SUCCESS)
        s1 = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &al_second, sizeof al_second);
    if (s1 == CUBLAS_STATUS_SUCCESS)
        s1 = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &al_c, sizeof al_c);
    if (s1 == CUBLAS_STATUS_SUCCESS)
        s1 = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    if (s1 == CUBLAS_STATUS_SUCCESS)
        s1 = cublasLtMatmulAlgoGetHeuristic(be->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1,
                                            &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    /* "not supported" is cuBLASLt's way of saying no algorithm fits */
    if (s1 == CUBLAS_STATUS_NOT_SUPPORTED || s1 == CUBLAS_STATUS_INVALID_VALUE ||
        (s1 == CUBLAS_STATUS_SUCCESS && (found < 1 || res.state != CUBLAS_STATUS_SUCCESS))) {
        p->ok = false;
        return true;
    }
    if (s1 != CUBLAS_STATUS_SUCCESS) {
        *why = "cublasLtMatmulAlgoGetHeuristic";
        *status = s1;
        return false;
    }
    p->algo = res.algo;
    p->ok = true;
    return true;
}

/* The plan for key k, built on a miss; under gemm_lock. NULL on a cuBLASLt
 * error (err filled). */
static gemm_plan *plan_get(tf_backend *be, const gemm_key *k, const void *bias, const void *aux,
                           const tf_gemm_desc *g, tf_error *err)
{
    cuda_gemm_cache *c = be->gemm_cache;
    size_t i = (size_t)(key_hash(k) & (GEMM_CACHE_SLOTS - 1));
    for (;;) {
        gemm_plan *p = &c->slots[i];
        if (!p->used) break;
        if (memcmp(&p->key, k, sizeof *k) == 0) return p;
        i = (i + 1) & (GEMM_CACHE_SLOTS - 1);
    }
    if (c->count >= GEMM_CACHE_MAX) {
        tf_debug("backend-cuda: gemm plan cache full (%d plans): emptied", GEMM_CACHE_MAX);
        cache_clear(c);
        i = (size_t)(key_hash(k) & (GEMM_CACHE_SLOTS - 1));
    }
    gemm_plan *p = &c->slots[i];
    const char *why = "";
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    if (!plan_build(be, p, k, bias, aux, &why, &status)) {
        plan_destroy(p);
        cuda_fail(err, TF_ERR_RUNTIME, "gemm",
                  "[m %d, n %d, k %d, batch %d, %s]: %s: %s", g->m, g->n, g->k, g->batch,
                  mode_name(g->mode), why, cublasLtGetStatusString(status));
        return NULL;
    }
    c->count++;
    return p;
}

static void fill_key(gemm_key *k, const tf_gemm_desc *g, cublasLtEpilogue_t epi, bool bias_f32,
                     const void *a, const void *b, const void *c, const void *bias,
                     const void *aux)
{
    memset(k, 0, sizeof *k);
    k->trans_a = g->trans_a;
    k->trans_b = g->trans_b;
    k->ab_dtype = (uint8_t)g->ab_dtype;
    k->c_dtype = (uint8_t)g->c_dtype;
    k->mode = (uint8_t)g->mode;
    k->lt_epilogue = (uint8_t)epi;
    k->bias_f32 = bias_f32;
    k->m = g->m;
    k->n = g->n;
    k->k = g->k;
    k->batch = g->batch;
    k->lda = g->lda;
    k->ldb = g->ldb;
    k->ldc = g->ldc;
    /* strides matter only with batches (cuBLASLt ignores them otherwise) */
    k->stride_a = g->batch > 1 ? g->stride_a : 0;
    k->stride_b = g->batch > 1 ? g->stride_b : 0;
    k->stride_c = g->batch > 1 ? g->stride_c : 0;
    /* every matrix of a strided batch, not only the first, must have the
     * alignment the heuristic is told */
    size_t ab = tf_dtype_size(g->ab_dtype), cb = tf_dtype_size(g->c_dtype);
    k->align_a = tfc_gemm_operand_align(a, g->batch, k->stride_a, ab);
    k->align_b = tfc_gemm_operand_align(b, g->batch, k->stride_b, ab);
    k->align_c = tfc_gemm_operand_align(c, g->batch, k->stride_c, cb);
    k->align_bias = bias ? align_of(bias) : 0;
    k->align_aux = aux ? tfc_gemm_operand_align(aux, g->batch, k->stride_c, cb) : 0;
}

static tf_status lt_fail(tf_error *err, const tf_gemm_desc *g, const char *what, cublasStatus_t s)
{
    return cuda_fail(err, TF_ERR_RUNTIME, "gemm", "[m %d, n %d, k %d, batch %d, %s]: %s: %s",
                     g->m, g->n, g->k, g->batch, mode_name(g->mode), what,
                     cublasLtGetStatusString(s));
}

/* One cublasLtMatmul with plan p; d is where D goes (C or aux). *what
 * names the call that failed. */
static cublasStatus_t run_plan(tf_backend *be, tf_stream *st, gemm_plan *p, const tf_gemm_desc *g,
                               const void *bias, void *d, void *ws, const char **what)
{
    cublasStatus_t s;
    if (p->key.lt_epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        *what = "CUBLASLT_MATMUL_DESC_BIAS_POINTER";
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof bias);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    if (p->key.lt_epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        void *aux = g->aux;
        *what = "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER";
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                           sizeof aux);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    float alpha = g->alpha, beta = g->beta;
    /* C and D are the same matrix: C itself, or aux when beta is 0 (BIAS_GELU)
     * and C is not read */
    *what = "cublasLtMatmul";
    return cublasLtMatmul(be->lt, p->desc, &alpha, g->b, p->la, g->a, p->lb, &beta, d, p->lc, d,
                          p->lc, &p->algo, ws, st->lt_ws_bytes, st->s);
}

tf_status cuda_gemm(tf_backend *be, tf_stream *s, const tf_gemm_desc *g, tf_error *err)
{
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, "gemm", &st, err))) return rc;
    if ((rc = check_desc(be, g, err))) return rc;
    if (g->m == 0 || g->n == 0) return TF_OK;

    bool gelu = g->epilogue == TF_EPILOGUE_BIAS_GELU;
    if (g->k == 0) { /* no products: C = beta C (+ bias), cuBLASLt is not asked */
        cudaError_t e = tfc_gemm_no_k(st->s, g->c, gelu ? g->aux : NULL,
                                      g->epilogue == TF_EPILOGUE_NONE ? NULL : g->bias, gelu,
                                      g->gelu, g->beta, g->batch, g->m, g->n, g->ldc,
                                      g->batch > 1 ? g->stride_c : 0, g->c_dtype);
        if (e != cudaSuccess)
            return cuda_fail_rt(err, "gemm", e, "k = 0 epilogue [m %d, n %d, batch %d]", g->m,
                                g->n, g->batch);
        return TF_OK;
    }

    void *lt_ws;
    if ((rc = cuda_lt_workspace(be, st, &lt_ws, err))) return rc;

    bool c16 = g->c_dtype != TF_DTYPE_F32;
    bool want_lt_gelu = gelu && be->lt_gelu && g->gelu == TF_GELU_TANH && c16 &&
                        g->ldc % 8 == 0 && (g->batch == 1 || g->stride_c % 8 == 0);
    cublasLtEpilogue_t first = g->epilogue == TF_EPILOGUE_NONE ? CUBLASLT_EPILOGUE_DEFAULT
                               : want_lt_gelu                  ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                               : CUBLASLT_EPILOGUE_BIAS;
    /* What to ask cuBLASLt for, in order: the epilogue as chosen with an f32
     * bias; with a 16-bit C, the same with a C-typed bias; and when cuBLASLt's
     * GELU was wanted, a BIAS epilogue (both bias types) and our GELU after.
     * A try fails when the heuristic has no algorithm, or when cublasLtMatmul
     * refuses the combination (NOT_SUPPORTED / INVALID_VALUE, before any work
     * is queued); the plan remembers that, and the next try is asked. */
    struct {
        cublasLtEpilogue_t epi;
        bool bias_f32;
    } tries[4];
    int ntries = 0;
    tries[ntries].epi = first;
    tries[ntries++].bias_f32 = true;
    if (first != CUBLASLT_EPILOGUE_DEFAULT && c16) {
        tries[ntries].epi = first;
        tries[ntries++].bias_f32 = false;
    }
    if (want_lt_gelu)
        for (int b = 1; b >= 0; b--) {
            tries[ntries].epi = CUBLASLT_EPILOGUE_BIAS;
            tries[ntries++].bias_f32 = b;
        }

    /* The bias goes to cuBLASLt as it is when it is an f32 bias that is
     * 16-byte aligned; otherwise a copy in the op workspace (256-byte aligned)
     * is used: rounded to C's dtype for a C-typed bias, or as it is when the
     * caller's pointer is less aligned than cuBLASLt's bias loads want. */
    bool misaligned = g->epilogue != TF_EPILOGUE_NONE && align_of(g->bias) < 16;
    void *stage = NULL;
    if (g->epilogue != TF_EPILOGUE_NONE && (c16 || misaligned) &&
        (rc = cuda_workspace(be, st, (size_t)g->n * sizeof(float), "gemm", &stage, err)))
        return rc;

    pthread_mutex_lock(&be->gemm_lock);
    bool done = false, lt_gelu = false;
    for (int t = 0; t < ntries && !done; t++) {
        cublasLtEpilogue_t epi = tries[t].epi;
        bool bias_f32 = tries[t].bias_f32;
        lt_gelu = epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        void *d = gelu && !lt_gelu ? g->aux : g->c; /* where D goes */
        const void *bias = epi == CUBLASLT_EPILOGUE_DEFAULT ? NULL
                           : bias_f32 && !misaligned      ? (const void *)g->bias
                                                          : (const void *)stage;
        const void *aux_key = lt_gelu ? g->aux : NULL;
        gemm_key key;
        fill_key(&key, g, epi, bias_f32, g->a, g->b, d, bias, aux_key);
        gemm_plan *p = plan_get(be, &key, bias, aux_key, g, err);
        if (!p) {
            pthread_mutex_unlock(&be->gemm_lock);
            return TF_ERR_RUNTIME;
        }
        if (!p->ok) continue;
        if (bias && bias == stage) {
            cudaError_t e = bias_f32 ? cudaMemcpyAsync(stage, g->bias, (size_t)g->n * sizeof(float),
                                                       cudaMemcpyDeviceToDevice, st->s)
                                     : tfc_cast(st->s, g->bias, TF_DTYPE_F32, stage, g->c_dtype,
                                                (size_t)g->n);
            if (e != cudaSuccess) {
                pthread_mutex_unlock(&be->gemm_lock);
                return cuda_fail_rt(err, "gemm", e, "staging the bias [%d]", g->n);
            }
        }
        const char *what = "";
        cublasStatus_t ls = run_plan(be, st, p, g, bias, d, lt_ws, &what);
        if (ls == CUBLAS_STATUS_SUCCESS) {
            done = true;
        } else if (ls == CUBLAS_STATUS_NOT_SUPPORTED || ls == CUBLAS_STATUS_INVALID_VALUE) {
            tf_debug("backend-cuda: gemm: %s refused epilogue %d (f32 bias %d): %s", what,
                     (int)epi, (int)bias_f32, cublasLtGetStatusString(ls));
            p->ok = false;
        } else {
            pthread_mutex_unlock(&be->gemm_lock);
            return lt_fail(err, g, what, ls);
        }
    }
    pthread_mutex_unlock(&be->gemm_lock);
    if (!done) {
        const char *an = tf_dtype_name(g->ab_dtype), *cn = tf_dtype_name(g->c_dtype);
        return cuda_fail(err, TF_ERR_RUNTIME, "gemm",
                         "cuBLASLt has no algorithm for [m %d, n %d, k %d, batch %d, trans_a %d, "
                         "trans_b %d, lda %lld, ldb %lld, ldc %lld, %s x %s -> %s, epilogue %d]",
                         g->m, g->n, g->k, g->batch, (int)g->trans_a, (int)g->trans_b,
                         (long long)g->lda, (long long)g->ldb, (long long)g->ldc,
                         mode_name(g->mode), an ? an : "?", cn ? cn : "?", (int)g->epilogue);
    }

    if (gelu && !lt_gelu) {
        cudaError_t e = tfc_gelu_matrix(st->s, g->aux, g->c, g->batch, g->m, g->n, g->ldc,
                                        g->batch > 1 ? g->stride_c : 0, g->gelu, g->c_dtype);
        if (e != cudaSuccess)
            return cuda_fail_rt(err, "gemm", e, "GELU epilogue [m %d, n %d, batch %d]", g->m, g->n,
                                g->batch);
    }
    return TF_OK;
}
