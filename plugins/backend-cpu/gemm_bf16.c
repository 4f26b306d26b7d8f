/* gemm_bf16.c — backend-cpu's bf16 GEMMs (TF_MATMUL_BF16 over f32
 * activations, precision "bf16"): A and B rounded to bf16 (round to nearest
 * even), multiplied by oneDNN's matmul with fp32 accumulation (AMX tiles or
 * AVX512_BF16 vdpbf16ps, whichever oneDNN picks for this CPU), C in f32.
 *
 * Whether this backend has them is decided once, at open, from CPUID
 * (AVX512_BF16; without it oneDNN would emulate bf16 slower than our fp32
 * path, so the backend refuses instead) and from the ISA oneDNN will use
 * (ONEDNN_MAX_CPU_ISA can cap it). The reason when not is kept for the
 * device name and `supports()`'s caller. Built without oneDNN
 * (configure --without-onednn, or no libdnnl-dev) the backend says so.
 *
 * oneDNN threads with OpenMP: the calling thread's team size is set to the
 * backend's for the call and restored after (the backend leaves global
 * OpenMP settings as it found them). oneDNN requests AMX tile state from
 * Linux (arch_prctl ARCH_REQ_XCOMP_PERM) itself.
 *
 * The bf16 copies of A and B live in a buffer that grows to the largest
 * GEMM seen (the first training step's), then is reused: no allocation in
 * the steady state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* The oneDNN path is x86-64's (CPUID, AVX512_BF16 conversions). */
#if defined(TF_HAVE_ONEDNN) && defined(__x86_64__)
#define CPU_BF16_ONEDNN 1
#include <cpuid.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.h>
#endif

/* dst[j] = bf16(src[j]) for j < cols: the hardware's conversion
 * (vcvtneps2bf16: round to nearest even, NaN kept quiet, subnormal inputs
 * flushed to zero as every AVX512_BF16 / AMX path does), 16 at a time. Only
 * called after open found AVX512_BF16 (the check below). */
#ifdef CPU_BF16_ONEDNN
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
to_bf16_row(const float *restrict src, uint16_t *restrict dst, int cols)
{
    int j = 0;
    for (; j + 16 <= cols; j += 16)
        _mm256_storeu_si256((__m256i *)(dst + j),
                            (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
    if (j < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - j)) - 1u);
        __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + j));
        _mm256_mask_storeu_epi16(dst + j, m, (__m256i)v);
    }
}
#endif

#ifdef CPU_BF16_ONEDNN

static bool cpu_has_avx512_bf16(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    if (!(a & (1u << 5))) return false; /* CPUID.(7,1):EAX[5] AVX512_BF16 */
    /* and the OS saves the AVX-512 state (XCR0 bits 1, 2, 5, 6, 7) */
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6u) == 0xe6u;
}

struct cpu_bf16 {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    pthread_mutex_t lock; /* one bf16 GEMM at a time owns the buffer */
    uint16_t *buf;
    size_t cap; /* elements */
};

void cpu_bf16_open(tf_backend *be)
{
    be->bf16 = NULL;
    const dnnl_version_t *v = dnnl_version();
    if (!cpu_has_avx512_bf16()) {
        snprintf(be->bf16_why, sizeof be->bf16_why,
                 "no bf16 GEMMs: this CPU has no AVX512_BF16 (oneDNN would emulate bf16, slower than fp32)");
        return;
    }
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) !=
        (unsigned)dnnl_cpu_isa_avx512_core_bf16) { /* ISA values are nested bit sets */
        snprintf(be->bf16_why, sizeof be->bf16_why,
                 "no bf16 GEMMs: oneDNN %d.%d is limited below AVX512_BF16 (ONEDNN_MAX_CPU_ISA?)",
                 v->major, v->minor);
        return;
    }
    struct cpu_bf16 *b = calloc(1, sizeof *b);
    if (!b || dnnl_engine_create(&b->engine, dnnl_cpu, 0) != dnnl_success) {
        free(b);
        snprintf(be->bf16_why, sizeof be->bf16_why, "no bf16 GEMMs: oneDNN's CPU engine did not open");
        return;
    }
    if (dnnl_stream_create(&b->stream, b->engine, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_engine_destroy(b->engine);
        free(b);
        snprintf(be->bf16_why, sizeof be->bf16_why, "no bf16 GEMMs: oneDNN's CPU stream did not open");
        return;
    }
    pthread_mutex_init(&b->lock, NULL);
    be->bf16 = b;
    /* AMX when oneDNN may use it (Sapphire Rapids and newer), else AVX512_BF16 */
    bool amx = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_amx) ==
               (unsigned)dnnl_cpu_isa_avx512_core_amx;
    snprintf(be->bf16_why, sizeof be->bf16_why, "bf16 GEMMs: oneDNN %d.%d.%d (%s)", v->major,
             v->minor, v->patch, amx ? "AMX" : "AVX512_BF16");
}

void cpu_bf16_close(tf_backend *be)
{
    struct cpu_bf16 *b = be->bf16;
    if (!b) return;
    dnnl_stream_destroy(b->stream);
    dnnl_engine_destroy(b->engine);
    pthread_mutex_destroy(&b->lock);
    free(b->buf);
    free(b);
    be->bf16 = NULL;
}

/* C = alpha op(A) op(B) + beta C for one matrix, A and B packed bf16. */
static dnnl_status_t matmul(struct cpu_bf16 *b, bool ta, bool tb, int m, int n, int k, float alpha,
                            const uint16_t *a, const uint16_t *bm, float beta, float *c,
                            int64_t ldc)
{
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_dims_t adims = {m, k}, bdims = {k, n}, cdims = {m, n};
    dnnl_dims_t as = {ta ? 1 : k, ta ? m : 1}, bs = {tb ? 1 : n, tb ? k : 1}, cs = {ldc, 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t am = NULL, bmm = NULL, cm = NULL;
    dnnl_matmul_desc_t md;
    dnnl_status_t st;
#define TRY(x) \
    if ((st = (x)) != dnnl_success) goto out
    TRY(dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_bf16, as));
    TRY(dnnl_memory_desc_init_by_strides(&bd, 2, bdims, dnnl_bf16, bs));
    TRY(dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs));
    TRY(dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd));
    TRY(dnnl_primitive_attr_create(&attr));
    if (alpha != 1.0f) TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    if (beta != 0.0f) {
        TRY(dnnl_post_ops_create(&po));
        TRY(dnnl_post_ops_append_sum(po, beta));
        TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    /* oneDNN's primitive cache makes a repeated shape cost a few microseconds */
    TRY(dnnl_primitive_desc_create(&pd, &md, attr, b->engine, NULL));
    TRY(dnnl_primitive_create(&prim, pd));
    TRY(dnnl_memory_create(&am, &ad, b->engine, (void *)a));
    TRY(dnnl_memory_create(&bmm, &bd, b->engine, (void *)bm));
    TRY(dnnl_memory_create(&cm, &cd, b->engine, c));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bmm}, {DNNL_ARG_DST, cm}};
    TRY(dnnl_primitive_execute(prim, b->stream, 3, args));
    st = dnnl_stream_wait(b->stream);
#undef TRY
out:
    if (am) dnnl_memory_destroy(am);
    if (bmm) dnnl_memory_destroy(bmm);
    if (cm) dnnl_memory_destroy(cm);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* Rows [0, rows) of every batch item of a stored [rows, cols] operand to
 * packed bf16 at dst (item after item), over the team. */
static void convert(tf_backend *be, const float *src, int64_t ld, int64_t stride, int batch,
                    int rows, int cols, uint16_t *dst)
{
    int64_t total = (int64_t)batch * rows;
    CPU_PARALLEL_IF(be, cpu_par(be, (size_t)total * (size_t)cols))
    {
        CPU_FOR_STATIC
        for (int64_t r = 0; r < total; r++) {
            int64_t bi = r / rows, i = r % rows;
            to_bf16_row(src + bi * stride + i * ld, dst + r * cols, cols);
        }
    }
}

tf_status cpu_bf16_gemm(tf_backend *be, const tf_gemm_desc *g, float beta, float *c0,
                        tf_error *err)
{
    struct cpu_bf16 *b = be->bf16;
    int ra = g->trans_a ? g->k : g->m, ca = g->trans_a ? g->m : g->k;
    int rb = g->trans_b ? g->n : g->k, cb = g->trans_b ? g->k : g->n;
    size_t na = (size_t)ra * (size_t)ca, nb = (size_t)rb * (size_t)cb;
    size_t need = (size_t)g->batch * (na + nb);
    pthread_mutex_lock(&b->lock);
    if (need > b->cap) {
        free(b->buf);
        b->cap = 0;
        b->buf = aligned_alloc(CPU_ALIGN, (need * 2 + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN);
        if (!b->buf) {
            pthread_mutex_unlock(&b->lock);
            return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                            "out of memory for the bf16 copies of A and B (%zu bytes)", need * 2);
        }
        b->cap = need;
    }
    uint16_t *abuf = b->buf, *bbuf = b->buf + (size_t)g->batch * na;
    convert(be, g->a, g->lda, g->stride_a, g->batch, ra, ca, abuf);
    convert(be, g->b, g->ldb, g->stride_b, g->batch, rb, cb, bbuf);
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    omp_set_num_threads(be->threads);
#endif
    dnnl_status_t st = dnnl_success;
    for (int bi = 0; bi < g->batch && st == dnnl_success; bi++)
        st = matmul(b, g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, abuf + (size_t)bi * na,
                    bbuf + (size_t)bi * nb, beta, (float *)c0 + (int64_t)bi * g->stride_c, g->ldc);
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    pthread_mutex_unlock(&b->lock);
    if (st != dnnl_success)
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                        "oneDNN bf16 matmul [%d x %d x %d] failed (dnnl status %d)", g->m, g->n,
                        g->k, (int)st);
    return TF_OK;
}

#else /* !CPU_BF16_ONEDNN */

void cpu_bf16_open(tf_backend *be)
{
    be->bf16 = NULL;
#ifdef TF_HAVE_ONEDNN
    snprintf(be->bf16_why, sizeof be->bf16_why, "no bf16 GEMMs: they need an x86-64 CPU with AVX512_BF16");
#else
    snprintf(be->bf16_why, sizeof be->bf16_why,
             "no bf16 GEMMs: built without oneDNN (configure found no libdnnl-dev, or --without-onednn)");
#endif
}

void cpu_bf16_close(tf_backend *be) { (void)be; }

tf_status cpu_bf16_gemm(tf_backend *be, const tf_gemm_desc *g, float beta, float *c0,
                        tf_error *err)
{
    (void)be;
    (void)g;
    (void)beta;
    (void)c0;
    return cpu_fail(err, TF_ERR_PLUGIN, "gemm", "bf16 GEMMs: built without oneDNN");
}

#endif
