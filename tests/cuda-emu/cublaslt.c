/* cublaslt.c — the cuBLASLt stand-in of the test-only CUDA emulation.
 *
 * Written from NVIDIA's cuBLASLt documentation, in its column-major terms:
 * a layout (type, rows, cols, ld) puts element (i, j) of batch b at
 * p[b·stride + i + j·ld]; op(X) is X (N) or Xᵀ (T); D is m × n, op(A) m × k,
 * op(B) k × n, and
 *   D = epilogue(alpha · op(A) · op(B) + beta · C (+ bias))
 * with the bias a packed vector of m elements (one per row of D, broadcast
 * over the columns) and the GELU aux matrix m × n with its own ld and batch
 * stride. C is not read when beta == 0 (as in BLAS: NaNs in C do not reach
 * D). GELU is the tanh approximation.
 *
 * Numerics: inputs are read in their type (f32, f16, bf16; with
 * CUBLAS_COMPUTE_32F_FAST_TF32 the f32 inputs are first rounded to TF32,
 * 10 explicit mantissa bits, to nearest even), every product and sum is
 * formed in double in order p = 0..k-1, and each output is rounded once, to
 * nearest even, to its type. This is deterministic and close to the exact
 * result; a GPU accumulates in f32 in an order of its own choosing, which
 * this file cannot reproduce.
 *
 * Each cublasLtMatmul is validated when called (types, shapes, epilogue,
 * and every pointer against the emulated device's allocations) and then
 * enqueued on the stream (emu.h): the product runs on the stream's thread,
 * in the stream's order, from a snapshot of the descriptor and layouts.
 *
 * Refusing on request: a real cuBLASLt may have no algorithm for a request
 * that this file serves (an f32 bias with a 16-bit D, a GELU epilogue), and
 * backend-cuda has fallbacks for that. TFCORE_EMU_CUBLASLT_REFUSE, read by
 * cublasLtCreate, is a comma-separated list that makes this stand-in refuse
 * them too, so that those fallbacks run: "bias-f32" (BIAS_DATA_TYPE f32 with
 * a 16-bit D), "gelu" (the GELU epilogues), and "at-matmul" (refuse those in
 * cublasLtMatmul, with CUBLAS_STATUS_NOT_SUPPORTED before anything is
 * queued, rather than in the heuristic). An unknown word makes
 * cublasLtCreate fail with CUBLAS_STATUS_INVALID_VALUE. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cublasLt.h"
#include "emu.h"

#define MAGIC_HANDLE 0x4c74486eu /* "LtHn" */
#define MAGIC_DESC 0x4c744473u
#define MAGIC_LAYOUT 0x4c744c61u
#define MAGIC_PREF 0x4c745072u
#define MAGIC_ALGO 0x4c74416c676f3031ull

/* TFCORE_EMU_CUBLASLT_REFUSE's words */
#define REFUSE_BIAS_F32 1u
#define REFUSE_GELU 2u
#define REFUSE_AT_MATMUL 4u

struct cublasLtContext {
    uint32_t magic;
    uint32_t refuse; /* REFUSE_* */
};

typedef struct lt_desc {
    uint32_t magic;
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t transa, transb;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type; /* -1: D's type */
    void *aux;
    int64_t aux_ld, aux_stride;
    int32_t aux_type; /* -1: D's type */
} lt_desc;

struct cublasLtMatmulDescOpaque {
    lt_desc d;
};

typedef struct lt_layout {
    uint32_t magic;
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
} lt_layout;

struct cublasLtMatrixLayoutOpaque {
    lt_layout l;
};

struct cublasLtMatmulPreferenceOpaque {
    uint32_t magic;
    uint64_t max_ws;
    uint32_t align[4];
};

/* --- status ----------------------------------------------------------------- */

const char *cublasLtGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasLtGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "an error was detected when checking the current licensing";
    }
    return "unknown cuBLAS status";
}

size_t cublasLtGetVersion(void)
{
    return CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
}

/* --- handle ----------------------------------------------------------------- */

/* TFCORE_EMU_CUBLASLT_REFUSE as REFUSE_* bits; false on an unknown word. */
static bool refuse_words(const char *s, uint32_t *bits)
{
    static const struct {
        const char *word;
        uint32_t bit;
    } words[] = {
        {"bias-f32", REFUSE_BIAS_F32}, {"gelu", REFUSE_GELU}, {"at-matmul", REFUSE_AT_MATMUL}};
    *bits = 0;
    while (s && *s) {
        size_t n = strcspn(s, ",");
        bool known = n == 0;
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
            if (strlen(words[i].word) == n && strncmp(s, words[i].word, n) == 0) {
                *bits |= words[i].bit;
                known = true;
            }
        if (!known) return false;
        s += n + (s[n] == ',');
    }
    return true;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t refuse;
    if (!refuse_words(getenv("TFCORE_EMU_CUBLASLT_REFUSE"), &refuse))
        return CUBLAS_STATUS_INVALID_VALUE;
    *h = calloc(1, sizeof **h);
    if (!*h) return CUBLAS_STATUS_ALLOC_FAILED;
    (*h)->magic = MAGIC_HANDLE;
    (*h)->refuse = refuse;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (!h || h->magic != MAGIC_HANDLE) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

/* --- attribute values ------------------------------------------------------- */

static bool is_data_type(int32_t t)
{
    return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF;
}

static size_t type_size(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : 2;
}

static bool implemented_epilogue(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return true;
    default: return false;
    }
}

/* The flag bits of the implemented epilogues (cublasLtEpilogue_t's values). */
static bool epi_bias(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_gelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_aux_out(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
static bool epi_dgelu(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool epi_bgrad(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

/* Read an attribute value of exactly `size` bytes. */
#define GET_VALUE(var)                                                                             \
    do {                                                                                           \
        if (size != sizeof(var)) return CUBLAS_STATUS_INVALID_VALUE;                               \
        memcpy(&(var), buf, sizeof(var));                                                          \
    } while (0)

/* --- matmul descriptor ------------------------------------------------------ */

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    if ((compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) ||
        scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *desc = calloc(1, sizeof **desc);
    if (!*desc) return CUBLAS_STATUS_ALLOC_FAILED;
    lt_desc *d = &(*desc)->d;
    d->magic = MAGIC_DESC;
    d->compute = compute;
    d->scale = scale;
    d->transa = d->transb = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = d->aux_type = -1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    if (!desc || desc->d.magic != MAGIC_DESC) return CUBLAS_STATUS_INVALID_VALUE;
    desc->d.magic = 0;
    free(desc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    if (!desc || desc->d.magic != MAGIC_DESC || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc *d = &desc->d;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    void *ptr;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        GET_VALUE(i32);
        return i32 == CUBLASLT_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS
                                                 : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        GET_VALUE(i32);
        if (i32 == CUBLAS_OP_C) return CUBLAS_STATUS_NOT_SUPPORTED; /* real types only */
        if (i32 != CUBLAS_OP_N && i32 != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
        *(attr == CUBLASLT_MATMUL_DESC_TRANSA ? &d->transa : &d->transb) = i32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSC:
        GET_VALUE(i32);
        return i32 == CUBLAS_OP_N ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        GET_VALUE(u32);
        if (!implemented_epilogue(u32)) return CUBLAS_STATUS_NOT_SUPPORTED;
        d->epilogue = u32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        GET_VALUE(ptr);
        d->bias = ptr;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
        GET_VALUE(i64);
        return i64 == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        GET_VALUE(ptr);
        d->aux = ptr;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        GET_VALUE(i64);
        if (i64 < 0) return CUBLAS_STATUS_INVALID_VALUE;
        d->aux_ld = i64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
        GET_VALUE(i64);
        if (i64 < 0) return CUBLAS_STATUS_INVALID_VALUE;
        d->aux_stride = i64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        GET_VALUE(i32);
        if (i32 != -1 && !is_data_type(i32)) return CUBLAS_STATUS_NOT_SUPPORTED;
        *(attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE ? &d->bias_type : &d->aux_type) = i32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        return CUBLAS_STATUS_NOT_SUPPORTED; /* fixed at create here */
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* --- matrix layouts --------------------------------------------------------- */

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *lay, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!lay) return CUBLAS_STATUS_INVALID_VALUE;
    if (!is_data_type(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (rows > INT32_MAX || cols > INT32_MAX || ld < 0) return CUBLAS_STATUS_INVALID_VALUE;
    *lay = calloc(1, sizeof **lay);
    if (!*lay) return CUBLAS_STATUS_ALLOC_FAILED;
    lt_layout *l = &(*lay)->l;
    l->magic = MAGIC_LAYOUT;
    l->type = type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->batch = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t lay)
{
    if (!lay || lay->l.magic != MAGIC_LAYOUT) return CUBLAS_STATUS_INVALID_VALUE;
    lay->l.magic = 0;
    free(lay);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t lay,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    if (!lay || lay->l.magic != MAGIC_LAYOUT || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *l = &lay->l;
    int32_t i32;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
        GET_VALUE(u32);
        if (!is_data_type((int32_t)u32)) return CUBLAS_STATUS_NOT_SUPPORTED;
        l->type = (cudaDataType_t)u32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        GET_VALUE(i32);
        return i32 == CUBLASLT_ORDER_COL ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
    case CUBLASLT_MATRIX_LAYOUT_COLS:
        GET_VALUE(u64);
        if (u64 > INT32_MAX) return CUBLAS_STATUS_INVALID_VALUE;
        *(attr == CUBLASLT_MATRIX_LAYOUT_ROWS ? &l->rows : &l->cols) = u64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_LD:
        GET_VALUE(i64);
        if (i64 < 0) return CUBLAS_STATUS_INVALID_VALUE;
        l->ld = i64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        GET_VALUE(i32);
        if (i32 < 1) return CUBLAS_STATUS_INVALID_VALUE;
        l->batch = i32;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        GET_VALUE(i64);
        if (i64 < 0) return CUBLAS_STATUS_NOT_SUPPORTED; /* negative strides: not emulated */
        l->stride = i64;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* --- preferences -------------------------------------------------------------- */

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    *pref = calloc(1, sizeof **pref);
    if (!*pref) return CUBLAS_STATUS_ALLOC_FAILED;
    (*pref)->magic = MAGIC_PREF;
    for (int i = 0; i < 4; i++) (*pref)->align[i] = 256;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    if (!pref || pref->magic != MAGIC_PREF) return CUBLAS_STATUS_INVALID_VALUE;
    pref->magic = 0;
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    if (!pref || pref->magic != MAGIC_PREF || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t u32;
    uint64_t u64;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
        GET_VALUE(u32);
        return u32 == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        GET_VALUE(u64);
        pref->max_ws = u64;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        GET_VALUE(u32);
        if (u32 == 0 || (u32 & (u32 - 1))) return CUBLAS_STATUS_INVALID_VALUE;
        pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = u32;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* --- the problem: one checked snapshot of descriptor and layouts --------------- */

typedef struct problem {
    lt_desc d;
    lt_layout a, b, c, dl;
    int64_t m, n, k;
    int32_t batch;
    cudaDataType_t bias_type, aux_type; /* resolved (-1 -> D's type) */
    bool tf32;
} problem;

static bool layout_ok(const lt_layout *l)
{
    return l && l->magic == MAGIC_LAYOUT;
}

/* Everything about the problem that does not need the pointers. */
static cublasStatus_t check_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A,
                                    cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                    cublasLtMatrixLayout_t D, problem *pr)
{
    if (!desc || desc->d.magic != MAGIC_DESC || !A || !B || !C || !D || !layout_ok(&A->l) ||
        !layout_ok(&B->l) || !layout_ok(&C->l) || !layout_ok(&D->l))
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(pr, 0, sizeof *pr);
    pr->d = desc->d;
    pr->a = A->l;
    pr->b = B->l;
    pr->c = C->l;
    pr->dl = D->l;
    const lt_desc *d = &pr->d;

    /* types: f32 x f32 -> f32; f16 x f16 -> f16 | f32; bf16 x bf16 -> bf16 | f32 */
    cudaDataType_t ab = pr->a.type, cd = pr->dl.type;
    if (pr->b.type != ab || pr->c.type != cd) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (cd != CUDA_R_32F && cd != ab) return CUBLAS_STATUS_NOT_SUPPORTED;
    pr->tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    if (pr->tf32 && ab != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;

    /* shapes: D m x n, op(A) m x k, op(B) k x n, C as D, ld >= rows */
    pr->m = (int64_t)pr->dl.rows;
    pr->n = (int64_t)pr->dl.cols;
    uint64_t a_rows = d->transa == CUBLAS_OP_N ? pr->a.rows : pr->a.cols;
    uint64_t a_cols = d->transa == CUBLAS_OP_N ? pr->a.cols : pr->a.rows;
    uint64_t b_rows = d->transb == CUBLAS_OP_N ? pr->b.rows : pr->b.cols;
    uint64_t b_cols = d->transb == CUBLAS_OP_N ? pr->b.cols : pr->b.rows;
    pr->k = (int64_t)a_cols;
    if (a_rows != pr->dl.rows || b_cols != pr->dl.cols || b_rows != a_cols ||
        pr->c.rows != pr->dl.rows || pr->c.cols != pr->dl.cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    const lt_layout *ls[4] = {&pr->a, &pr->b, &pr->c, &pr->dl};
    for (int i = 0; i < 4; i++)
        if (ls[i]->ld < (int64_t)(ls[i]->rows > 1 ? ls[i]->rows : 1))
            return CUBLAS_STATUS_INVALID_VALUE;
    pr->batch = pr->dl.batch;
    if (pr->a.batch != pr->batch || pr->b.batch != pr->batch || pr->c.batch != pr->batch)
        return CUBLAS_STATUS_INVALID_VALUE;

    /* the epilogue's vectors and matrices */
    uint32_t e = d->epilogue;
    pr->bias_type = d->bias_type < 0 ? cd : (cudaDataType_t)d->bias_type;
    if ((epi_bias(e) || epi_bgrad(e)) && pr->bias_type != cd && pr->bias_type != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (epi_bgrad(e) && pr->batch > 1) return CUBLAS_STATUS_NOT_SUPPORTED;
    pr->aux_type = d->aux_type < 0 ? cd : (cudaDataType_t)d->aux_type;
    if (epi_aux_out(e) || epi_dgelu(e)) {
        if (pr->aux_type != cd) return CUBLAS_STATUS_NOT_SUPPORTED;
        /* "must be divisible by 8 and be no less than the number of rows" */
        if (d->aux_ld < (pr->m > 1 ? pr->m : 1) || d->aux_ld % 8 != 0)
            return CUBLAS_STATUS_INVALID_VALUE;
        if (pr->batch > 1 && d->aux_stride % 8 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* Whether TFCORE_EMU_CUBLASLT_REFUSE asks to refuse this problem. */
static bool refused_on_request(cublasLtHandle_t h, const problem *pr)
{
    return ((h->refuse & REFUSE_BIAS_F32) &&
            (epi_bias(pr->d.epilogue) || epi_bgrad(pr->d.epilogue)) &&
            pr->bias_type == CUDA_R_32F && pr->dl.type != CUDA_R_32F) ||
           ((h->refuse & REFUSE_GELU) && (epi_gelu(pr->d.epilogue) || epi_dgelu(pr->d.epilogue)));
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    if (!h || h->magic != MAGIC_HANDLE) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pref || pref->magic != MAGIC_PREF || requested < 1 || !results || !returned)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    problem pr;
    cublasStatus_t s = check_problem(desc, A, B, C, D, &pr);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (!(h->refuse & REFUSE_AT_MATMUL) && refused_on_request(h, &pr))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = MAGIC_ALGO;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* --- number formats ----------------------------------------------------------- */

/* x rounded to nearest even with `bits` significant bits, no exponent
 * below `emin_q` for the last bit (the subnormal quantum), overflowing to
 * infinity at `max_half` (the midpoint between the largest finite value and
 * the next power of two) and beyond. */
static double round_format(double x, int bits, int emin_q, double max_half)
{
    if (isnan(x) || isinf(x) || x == 0.0) return x;
    if (fabs(x) >= max_half) return copysign(INFINITY, x);
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int q = e - bits;
    if (q < emin_q) q = emin_q;
    double r = ldexp(nearbyint(ldexp(x, -q)), q); /* nearbyint: ties to even */
    if (fabs(r) >= max_half) return copysign(INFINITY, x);
    return r;
}

#define F16_MAX_HALF 65520.0                /* (2 - 2^-11) · 2^15 */
#define BF16_MAX_HALF 3.3961514845176846e38 /* (2 - 2^-8) · 2^127 */
#define F32_MAX_HALF 3.4028235677973366e38  /* (2 - 2^-24) · 2^127 */

static uint16_t f16_bits(double x)
{
    double r = round_format(x, 11, -24, F16_MAX_HALF);
    uint16_t sign = signbit(r) ? 0x8000u : 0;
    if (isnan(r)) return 0x7e00u;
    if (isinf(r)) return sign | 0x7c00u;
    double a = fabs(r);
    if (a < ldexp(1.0, -14)) return sign | (uint16_t)ldexp(a, 24); /* subnormal or 0 */
    int e;
    double m = frexp(a, &e); /* a = m·2^e, m in [0.5, 1) */
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(m, 11) - 1024.0);
}

static double f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (exp == 0x1f) return man ? NAN : s * INFINITY;
    if (exp == 0) return s * ldexp(man, -24);
    return s * ldexp(1024 + man, exp - 25);
}

static uint16_t bf16_bits(double x)
{
    if (isnan(x)) return 0x7fc0u;
    float f = (float)round_format(x, 8, -133, BF16_MAX_HALF); /* exact in f32 */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double load(cudaDataType_t t, const void *p, int64_t i)
{
    switch (t) {
    case CUDA_R_16F: return f16_value(((const uint16_t *)p)[i]);
    case CUDA_R_16BF: return bf16_value(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static void store(cudaDataType_t t, void *p, int64_t i, double x)
{
    switch (t) {
    case CUDA_R_16F: ((uint16_t *)p)[i] = f16_bits(x); break;
    case CUDA_R_16BF: ((uint16_t *)p)[i] = bf16_bits(x); break;
    default: ((float *)p)[i] = (float)x; break; /* one rounding, to nearest even */
    }
}

/* TF32: 10 explicit mantissa bits, f32's exponent range. */
static double tf32(double x)
{
    return round_format(x, 11, -149, F32_MAX_HALF);
}

/* GELU, tanh approximation, and its derivative. */
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x)
{
    double t = tanh(GELU_C * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
}

/* --- the product, on the stream's thread --------------------------------------- */

typedef struct matmul_task {
    problem pr;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
} matmul_task;

/* dots[c * m + i] = sum over p in order of opa[i, p] * opb[j0 + c, p], for
 * c < nc (<= 4): op(A) is m rows of k, op(B) columns of k. The columns go
 * together so that four chains of additions overlap; each one is the plain
 * in-order sum. Not ThreadSanitizer-instrumented: it reads only the task's
 * own copies (matmul_run's opa, opb), which no other thread sees, and its two
 * reads per multiply-add were most of a ThreadSanitizer run's time; the
 * reads of A and B in device memory, which can race, stay instrumented. */
__attribute__((no_sanitize("thread"))) static void dot_columns(const double *opa,
                                                              const double *opb, int64_t m,
                                                              int64_t k, int64_t j0, int64_t nc,
                                                              double *dots)
{
    const double *b0 = opb + j0 * k;
    const double *b1 = nc > 1 ? b0 + k : b0, *b2 = nc > 2 ? b0 + 2 * k : b0,
                 *b3 = nc > 3 ? b0 + 3 * k : b0;
    for (int64_t i = 0; i < m; i++) {
        const double *a = opa + i * k;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int64_t p = 0; p < k; p++) {
            s0 += a[p] * b0[p];
            s1 += a[p] * b1[p];
            s2 += a[p] * b2[p];
            s3 += a[p] * b3[p];
        }
        dots[i] = s0;
        dots[m + i] = s1;
        dots[2 * m + i] = s2;
        dots[3 * m + i] = s3;
    }
}

static cudaError_t matmul_run(void *arg)
{
    const matmul_task *t = arg;
    const problem *pr = &t->pr;
    const lt_desc *d = &pr->d;
    int64_t m = pr->m, n = pr->n, k = pr->k;
    uint32_t e = d->epilogue;
    /* op(A) as m rows of k, op(B) as n columns of k (doubles, contiguous in p) */
    double *opa = malloc(sizeof(double) * (size_t)(m * k > 0 ? m * k : 1));
    double *opb = malloc(sizeof(double) * (size_t)(n * k > 0 ? n * k : 1));
    double *bgrad = epi_bgrad(e) ? calloc((size_t)(m > 0 ? m : 1), sizeof(double)) : NULL;
    double *dots = malloc(sizeof(double) * (size_t)(m > 0 ? 4 * m : 1)); /* [4][m] */
    if (!opa || !opb || !dots || (epi_bgrad(e) && !bgrad)) {
        free(opa);
        free(opb);
        free(bgrad);
        free(dots);
        return cudaErrorMemoryAllocation;
    }
    for (int32_t bt = 0; bt < pr->batch; bt++) {
        int64_t oa = bt * pr->a.stride, ob = bt * pr->b.stride, oc = bt * pr->c.stride,
                od = bt * pr->dl.stride, ox = bt * d->aux_stride;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) {
                int64_t at = d->transa == CUBLAS_OP_N ? i + p * pr->a.ld : p + i * pr->a.ld;
                double v = load(pr->a.type, t->A, oa + at);
                opa[i * k + p] = pr->tf32 ? tf32(v) : v;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++) {
                int64_t at = d->transb == CUBLAS_OP_N ? p + j * pr->b.ld : j + p * pr->b.ld;
                double v = load(pr->b.type, t->B, ob + at);
                opb[j * k + p] = pr->tf32 ? tf32(v) : v;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                /* the sums of four output columns at once (dot_columns) */
                if (j % 4 == 0 && i == 0) dot_columns(opa, opb, m, k, j, n - j < 4 ? n - j : 4, dots);
                double x = (double)t->alpha * dots[(j % 4) * m + i];
                if (t->beta != 0.0f)
                    x += (double)t->beta * load(pr->c.type, t->C, oc + i + j * pr->c.ld);
                int64_t ax = ox + i + j * d->aux_ld;
                if (epi_dgelu(e)) x *= gelu_grad(load(pr->aux_type, d->aux, ax));
                if (bgrad) bgrad[i] += x;
                if (epi_bias(e)) x += load(pr->bias_type, d->bias, i);
                if (epi_aux_out(e)) store(pr->aux_type, d->aux, ax, x);
                if (epi_gelu(e)) x = gelu(x);
                store(pr->dl.type, t->D, od + i + j * pr->dl.ld, x);
            }
    }
    if (bgrad)
        for (int64_t i = 0; i < m; i++) store(pr->bias_type, (void *)d->bias, i, bgrad[i]);
    free(opa);
    free(opb);
    free(bgrad);
    free(dots);
    return cudaSuccess;
}

/* Elements spanned by `batch` matrices rows x cols with ld and stride. */
static size_t span_elems(uint64_t rows, uint64_t cols, int64_t ld, int32_t batch, int64_t stride)
{
    if (rows == 0 || cols == 0) return 0;
    return (size_t)((batch - 1) * stride + (int64_t)(cols - 1) * ld + (int64_t)rows);
}

/* p must be device memory of device dev, aligned to its element, covering
 * `elems` elements of type t. */
static bool device_span_ok(const void *p, size_t elems, cudaDataType_t t, int dev)
{
    if (elems == 0) return true;
    if (!p || (uintptr_t)p % type_size(t) != 0) return false;
    return emu_is_device_span(p, elems * type_size(t), dev) != 0;
}

static bool layout_span_ok(const void *p, const lt_layout *l, int dev)
{
    return device_span_ok(p, span_elems(l->rows, l->cols, l->ld, l->batch, l->stride), l->type,
                          dev);
}

static bool same_layout(const lt_layout *x, const lt_layout *y)
{
    return x->type == y->type && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld &&
           x->batch == y->batch && (x->batch == 1 || x->stride == y->stride);
}

static void task_free(void *arg)
{
    free(arg);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t ws_bytes,
                              cudaStream_t stream)
{
    if (!h || h->magic != MAGIC_HANDLE) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (algo && algo->data[0] != MAGIC_ALGO) return CUBLAS_STATUS_INVALID_VALUE;
    matmul_task *t = calloc(1, sizeof *t);
    if (!t) return CUBLAS_STATUS_ALLOC_FAILED;
    cublasStatus_t s = check_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &t->pr);
    if (s == CUBLAS_STATUS_SUCCESS && refused_on_request(h, &t->pr))
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(t);
        return s;
    }
    const problem *pr = &t->pr;
    memcpy(&t->alpha, alpha, sizeof t->alpha); /* scale type CUDA_R_32F, host pointer mode */
    memcpy(&t->beta, beta, sizeof t->beta);
    t->A = A;
    t->B = B;
    t->C = C;
    t->D = D;

    /* every pointer: device memory of the stream's device, as long as its layout */
    int dev = emu_stream_device(stream);
    uint32_t e = pr->d.epilogue;
    bool product = pr->m > 0 && pr->n > 0 && pr->k > 0;
    bool ok = dev >= 0 && layout_span_ok(D, &pr->dl, dev) &&
              (!product || (layout_span_ok(A, &pr->a, dev) && layout_span_ok(B, &pr->b, dev))) &&
              (t->beta == 0.0f || layout_span_ok(C, &pr->c, dev));
    if (ok && (epi_bias(e) || epi_bgrad(e)))
        ok = pr->m == 0 || device_span_ok(pr->d.bias, (size_t)pr->m, pr->bias_type, dev);
    if (ok && (epi_aux_out(e) || epi_dgelu(e)))
        ok = device_span_ok(
            pr->d.aux,
            span_elems(pr->dl.rows, pr->dl.cols, pr->d.aux_ld, pr->batch, pr->d.aux_stride),
            pr->aux_type, dev);
    if (ok && ws_bytes > 0) ok = workspace && emu_is_device_span(workspace, ws_bytes, dev);
    /* in place: "C == D" needs the same layout */
    if (ok && C == D && t->beta != 0.0f && !same_layout(&pr->c, &pr->dl)) ok = false;
    if (!ok) {
        free(t);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (pr->m == 0 || pr->n == 0) {
        free(t);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (emu_enqueue(stream, matmul_run, t, task_free) != cudaSuccess) {
        free(t);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
