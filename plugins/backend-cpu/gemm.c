/* gemm.c — backend-cpu GEMM: OpenBLAS sgemm, split over the backend's
 * thread team here (OpenBLAS itself runs single-threaded), with the bias and
 * bias+GELU epilogues applied by each thread to its own tile while that tile
 * is still in its cache.
 *
 * Rules (as BLAS): C must not overlap A or B; with beta = 0, C is not read.
 * Bias epilogue: C starts as bias (or beta*C + bias) and sgemm adds
 * alpha*op(A)op(B) to it, the same arithmetic as torch's addmm for a
 * Linear layer.
 *
 * TF_MATMUL_BF16 (precision bf16): A and B rounded to bf16, fp32
 * accumulation, through oneDNN, epilogues included (gemm_bf16.c). */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "cpu.h"

void cpu_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) { /* C = beta * C; BLAS leaves A and B unread */
        for (int i = 0; i < m; i++) {
            float *row = c + (size_t)i * (size_t)ldc;
            if (beta == 0.0f)
                for (int j = 0; j < n; j++) row[j] = 0.0f;
            else if (beta != 1.0f)
                for (int j = 0; j < n; j++) row[j] *= beta;
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, (blasint)lda, b,
                (blasint)ldb, beta, c, (blasint)ldc);
}

static tf_status check_ld(tf_error *err, const char *name, int64_t ld, int cols)
{
    int64_t need = cols > 1 ? cols : 1;
    if (ld < need || ld > INT_MAX)
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm", "%s is %lld, must be in [%lld, %d]", name,
                        (long long)ld, (long long)need, INT_MAX);
    return TF_OK;
}

static tf_status check_desc(const tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    if (cpu_need(err, "gemm", "desc", g)) return TF_ERR_RUNTIME;
    tf_status st;
    if ((st = cpu_need_min(err, "gemm", "m", g->m, 0)) ||
        (st = cpu_need_min(err, "gemm", "n", g->n, 0)) ||
        (st = cpu_need_min(err, "gemm", "k", g->k, 0)) ||
        (st = cpu_need_min(err, "gemm", "batch", g->batch, 1)))
        return st;
    if ((st = cpu_need_f32(err, "gemm", "ab", g->ab_dtype)) ||
        (st = cpu_need_f32(err, "gemm", "c", g->c_dtype)))
        return st;
    if (g->mode == TF_MATMUL_BF16 && !be->bf16)
        return cpu_fail(err, TF_ERR_PLUGIN, "gemm", "matmul mode bf16: %s", be->bf16_why);
    if (g->mode != TF_MATMUL_FP32 && g->mode != TF_MATMUL_BF16)
        return cpu_fail(err, TF_ERR_PLUGIN, "gemm",
                        "matmul mode %d is not supported (backend-cpu computes fp32, or bf16 "
                        "GEMM inputs with fp32 accumulation)",
                        (int)g->mode);
    if ((st = check_ld(err, "lda", g->lda, g->trans_a ? g->m : g->k)) ||
        (st = check_ld(err, "ldb", g->ldb, g->trans_b ? g->k : g->n)) ||
        (st = check_ld(err, "ldc", g->ldc, g->n)))
        return st;
    if (g->batch > 1 && (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0))
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                        "batch strides must be >= 0, got a %lld, b %lld, c %lld",
                        (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c);
    switch (g->epilogue) {
    case TF_EPILOGUE_NONE: break;
    case TF_EPILOGUE_BIAS:
        if (cpu_need(err, "gemm", "bias (BIAS epilogue)", g->bias)) return TF_ERR_RUNTIME;
        break;
    case TF_EPILOGUE_BIAS_GELU:
        if (cpu_need(err, "gemm", "bias (BIAS_GELU epilogue)", g->bias) ||
            cpu_need(err, "gemm", "aux (BIAS_GELU epilogue)", g->aux))
            return TF_ERR_RUNTIME;
        if (g->beta != 0.0f)
            return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                            "the BIAS_GELU epilogue needs beta = 0, got %g", (double)g->beta);
        if (g->gelu != TF_GELU_ERF && g->gelu != TF_GELU_TANH)
            return cpu_fail(err, TF_ERR_RUNTIME, "gemm", "unknown gelu kind %d", (int)g->gelu);
        break;
    default:
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm", "unknown epilogue %d", (int)g->epilogue);
    }
    if (g->m > 0 && g->n > 0) {
        if (cpu_need(err, "gemm", "c", g->c)) return TF_ERR_RUNTIME;
        if (g->k > 0 && (cpu_need(err, "gemm", "a", g->a) || cpu_need(err, "gemm", "b", g->b)))
            return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

/* C[m0:m1, n0:n1] of batch item `bi`, epilogue included: the rows m0:m1 of
 * op(A) ([m1-m0, k]) times the columns n0:n1 of op(B) ([k, n1-n0]). */
static void gemm_tile(const tf_gemm_desc *g, int bi, int m0, int m1, int n0, int n1)
{
    const float *a = (const float *)g->a + (int64_t)bi * g->stride_a;
    const float *b = (const float *)g->b + (int64_t)bi * g->stride_b;
    float *c = (float *)g->c + (int64_t)bi * g->stride_c;
    const float *at = g->trans_a ? a + m0 : a + (int64_t)m0 * g->lda;
    const float *bt = g->trans_b ? b + (int64_t)n0 * g->ldb : b + n0;
    float *ct = c + (int64_t)m0 * g->ldc + n0;
    int mm = m1 - m0, nn = n1 - n0;
    const float *bias = g->bias ? g->bias + n0 : NULL;

    switch (g->epilogue) {
    case TF_EPILOGUE_BIAS:
        for (int i = 0; i < mm; i++) {
            float *row = ct + (int64_t)i * g->ldc;
            if (g->beta == 0.0f)
                memcpy(row, bias, (size_t)nn * sizeof(float));
            else
                for (int j = 0; j < nn; j++) row[j] = g->beta * row[j] + bias[j];
        }
        cpu_sgemm(g->trans_a, g->trans_b, mm, nn, g->k, g->alpha, at, g->lda, bt, g->ldb, 1.0f,
                  ct, g->ldc);
        break;
    case TF_EPILOGUE_BIAS_GELU: {
        float *aux = (float *)g->aux + (int64_t)bi * g->stride_c + (int64_t)m0 * g->ldc + n0;
        for (int i = 0; i < mm; i++) memcpy(aux + (int64_t)i * g->ldc, bias, (size_t)nn * sizeof(float));
        cpu_sgemm(g->trans_a, g->trans_b, mm, nn, g->k, g->alpha, at, g->lda, bt, g->ldb, 1.0f,
                  aux, g->ldc);
        for (int i = 0; i < mm; i++)
            cpu_gelu_span(aux + (int64_t)i * g->ldc, ct + (int64_t)i * g->ldc, (size_t)nn,
                          g->gelu);
        break;
    }
    default:
        cpu_sgemm(g->trans_a, g->trans_b, mm, nn, g->k, g->alpha, at, g->lda, bt, g->ldb,
                  g->beta, ct, g->ldc);
        break;
    }
}

/* Below this many flops a GEMM runs on the calling thread. */
#define GEMM_PAR_MIN_FLOPS 4e6
/* Tiles are cut at multiples of the OpenBLAS micro-kernel's tile sides. */
#define GEMM_QUANTUM 16
/* Slabs per thread, handed out dynamically: with 2, a thread that the OS
 * preempts (a busy machine) leaves its second slab to the others, for ~1-2%
 * more B packing on a quiet one. Slabs are at least GEMM_MIN_SLAB long. */
#define GEMM_SLABS_PER_THREAD 2
#define GEMM_MIN_SLAB 128

tf_status cpu_gemm(tf_backend *be, tf_stream *s, const tf_gemm_desc *g, tf_error *err)
{
    (void)s;
    if (cpu_need(err, "gemm", "backend", be)) return TF_ERR_RUNTIME;
    tf_status st = check_desc(be, g, err);
    if (st) return st;
    if (g->m == 0 || g->n == 0) return TF_OK;
    if (g->mode == TF_MATMUL_BF16 && g->k > 0 && g->alpha != 0.0f) return cpu_bf16_gemm(be, g, err);

    double flops = 2.0 * g->m * (double)g->n * (g->k > 0 ? g->k : 1) * g->batch;
    bool par = be->threads > 1 && flops >= GEMM_PAR_MIN_FLOPS;
    if (!par) {
        for (int bi = 0; bi < g->batch; bi++) gemm_tile(g, bi, 0, g->m, 0, g->n);
        return TF_OK;
    }
    if (g->batch >= be->threads) {
        /* whole matrices, one at a time to whichever thread is free */
        CPU_PARALLEL_IF(be, true)
        {
            CPU_FOR_DYNAMIC
            for (int bi = 0; bi < g->batch; bi++) gemm_tile(g, bi, 0, g->m, 0, g->n);
        }
        return TF_OK;
    }
    /* fewer matrices than threads: slabs of every matrix, cut across the
     * longer side of C */
    bool split_m = g->m >= g->n;
    size_t len = (size_t)(split_m ? g->m : g->n);
    int slabs = be->threads * GEMM_SLABS_PER_THREAD;
    while (slabs > be->threads && len / (size_t)slabs < GEMM_MIN_SLAB) slabs--;
    int tasks = slabs * g->batch;
    CPU_PARALLEL_IF(be, true)
    {
        CPU_FOR_DYNAMIC
        for (int t = 0; t < tasks; t++) {
            size_t lo, hi;
            cpu_split(len, slabs, t % slabs, GEMM_QUANTUM, &lo, &hi);
            if (lo >= hi) continue;
            if (split_m)
                gemm_tile(g, t / slabs, (int)lo, (int)hi, 0, g->n);
            else
                gemm_tile(g, t / slabs, 0, g->m, (int)lo, (int)hi);
        }
    }
    return TF_OK;
}
