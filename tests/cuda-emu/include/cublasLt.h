/* cublasLt.h — the test-only cuBLASLt stand-in of the CUDA emulation
 * (tests/cuda-emu/, implemented in tests/cuda-emu/cublaslt.c).
 *
 * The subset of cuBLASLt that plugins/backend-cuda calls, with NVIDIA's
 * names, numeric values and column-major semantics:
 *   D = epilogue(alpha · op(A) · op(B) + beta · C (+ bias))
 * for A/B/C/D in column-major order, op() = N or T, alpha and beta f32 on
 * the host, strided batches. Each cublasLtMatmul is checked when called and
 * then runs as one task on the given stream's host thread (emu.h).
 *
 * Implemented: compute types CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_FAST_TF32
 * (scale type CUDA_R_32F); A/B f32 with C/D f32, A/B f16 or bf16 with C/D of
 * the same type or f32; epilogues DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX,
 * GELU_AUX_BIAS, DGELU, DGELU_BGRAD (GELU = the tanh approximation).
 * Anything else declared here (ReLU and BGRADA/B epilogues, ORDER_ROW, other
 * compute types, device pointer mode, TRANSC = T, op C) is refused with
 * CUBLAS_STATUS_NOT_SUPPORTED; attributes not declared here do not compile.
 * TFCORE_EMU_CUBLASLT_REFUSE (cublaslt.c) makes it refuse more on request.
 * See tests/cuda-emu/README.md, "cuBLASLt stand-in". */
#ifndef TF_CUDA_EMU_CUBLASLT_H
#define TF_CUDA_EMU_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_runtime.h" /* the stand-in's: cudaStream_t */
#include "library_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
#define CUBLAS_VER_PATCH 0

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;

/* An algorithm the heuristic returned; opaque, copied by value. */
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize; /* always 0 here */
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

typedef enum {
    CUBLASLT_POINTER_MODE_HOST = 0,
    CUBLASLT_POINTER_MODE_DEVICE = 1
} cublasLtPointerMode_t;

typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,               /* int32_t, read only here */
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,                 /* int32_t, read only here */
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,               /* int32_t, HOST only */
    CUBLASLT_MATMUL_DESC_TRANSA = 3,                     /* int32_t cublasOperation_t */
    CUBLASLT_MATMUL_DESC_TRANSB = 4,                     /* int32_t cublasOperation_t */
    CUBLASLT_MATMUL_DESC_TRANSC = 5,                     /* int32_t, N only */
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                   /* uint32_t cublasLtEpilogue_t */
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,               /* const void * (void * for BGRAD) */
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,         /* int64_t, 0 only */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,      /* void * */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,           /* int64_t, elements */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13, /* int64_t, elements */
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,    /* int32_t, -1: D's type */
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26             /* int32_t, -1: D's type */
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = 2 | 128,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = 2 | 4,
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 2 | 128 | 4,
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = 8 | 128 | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
    CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;

typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                /* uint32_t cudaDataType_t */
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,               /* int32_t, COL only */
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                /* uint64_t */
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,                /* uint64_t */
    CUBLASLT_MATRIX_LAYOUT_LD = 4,                  /* int64_t */
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,         /* int32_t, default 1 */
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 /* int64_t elements, default 0 */
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,           /* uint32_t, 0 (best fit) only */
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,   /* uint64_t */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t, power of two */
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
const char *cublasLtGetStatusName(cublasStatus_t status);
const char *cublasLtGetStatusString(cublasStatus_t status);
size_t cublasLtGetVersion(void);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes);

/* One algorithm (workspace 0) when the stand-in implements the problem;
 * CUBLAS_STATUS_NOT_SUPPORTED and *returnAlgoCount = 0 when it does not. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount);

/* Checks everything (types, shapes, epilogue, and that A, B, C (when beta !=
 * 0), D, bias, aux and the workspace are device memory of the stream's
 * device, large enough for their layouts), then enqueues the product on
 * `stream`. C is not read when beta == 0; D may be C (same layout). */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif
