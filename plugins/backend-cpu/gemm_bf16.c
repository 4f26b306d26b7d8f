/* gemm_bf16.c — backend-cpu's bf16 GEMMs (TF_MATMUL_BF16 over f32
 * activations, precision "bf16"): A and B rounded to bf16 (round to nearest
 * even), multiplied by oneDNN's matmul with fp32 accumulation (AMX tiles or
 * AVX512_BF16 vdpbf16ps, whichever oneDNN picks for this CPU), C in f32,
 * with the same bias and bias+GELU epilogues as gemm.c's fp32 path.
 *
 * Whether this backend has them is decided once, at open, from CPUID
 * (AVX512_BF16; without it oneDNN would emulate bf16 slower than our fp32
 * path, so the backend refuses instead) and from the ISA oneDNN will use
 * (ONEDNN_MAX_CPU_ISA can cap it). The reason when not is kept for the
 * device name and `supports()`'s caller. Built without oneDNN
 * (configure --without-onednn, or no libdnnl-dev) the backend says so.
 *
 * Two ways through oneDNN:
 * - Row slabs (op(A) not transposed, one matrix: every Linear forward and
 *   the backward's dX): B is rounded to bf16 and reordered once per call
 *   into the blocked layout oneDNN's matmul wants; then each thread of the
 *   team takes slabs of CSLAB rows of C in turn and, while the slab is in
 *   its cache, rounds that slab's rows of A to bf16, runs oneDNN's matmul
 *   on them single-threaded (bias added in the kernel) and applies GELU. A
 *   separate pass over the whole [m, n] output (the intermediate layer's C
 *   is 50 MB at 32 x 256 tokens) would run at memory speed: that pass was
 *   12.6% of a MiniLM-L6 bf16 evaluation before this path (perf record).
 * - Whole matrices (transposed A, i.e. the weight gradients, or batches):
 *   A and B rounded to bf16 into one buffer, oneDNN threads the product,
 *   the epilogues go around it.
 * Both give the same numbers up to the order of fp32 accumulation inside
 * oneDNN's kernels.
 *
 * oneDNN threads with OpenMP: the calling thread's team size is set to the
 * backend's for a threaded call and restored after (the backend leaves
 * global OpenMP settings as it found them); called inside the team's
 * parallel region (slabs), oneDNN runs on the calling thread. Each thread
 * has its own scratchpad (user scratchpad mode), so one primitive can run
 * on several threads at once. oneDNN requests AMX tile state from Linux
 * (arch_prctl ARCH_REQ_XCOMP_PERM) itself.
 *
 * The bf16 copies live in buffers that grow to the largest GEMM seen (the
 * first step's), then are reused: no allocation in the steady state. oneDNN's
 * primitive cache makes re-creating a primitive for a shape seen before cost
 * microseconds, so nothing about the weights is remembered between calls:
 * there is no cached copy that an optimizer step could leave stale. */
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
    pthread_mutex_t lock; /* one bf16 GEMM at a time owns the buffers */
    uint16_t *buf;        /* bf16 A and B (whole matrices), or B alone (slabs) */
    size_t cap;           /* bytes */
    void *wbuf;           /* slabs: B in oneDNN's layout */
    size_t wcap;          /* bytes */
    char *tbuf;           /* slabs: per thread, a slab of A in bf16 and a scratchpad */
    size_t tcap;          /* bytes */
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
    free(b->wbuf);
    free(b->tbuf);
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

/* *p holds at least `bytes` (CPU_ALIGN-aligned), contents not kept. */
static bool grow(void **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap) return true;
    free(*p);
    *cap = 0;
    *p = aligned_alloc(CPU_ALIGN, (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN);
    if (!*p) return false;
    *cap = bytes;
    return true;
}

/* C (f32, batch items at stride_c) = alpha op(A) op(B) + beta C over whole
 * matrices, A and B rounded to bf16 first into b->buf. */
static tf_status whole_gemm(tf_backend *be, const tf_gemm_desc *g, float beta, float *c0,
                            tf_error *err)
{
    struct cpu_bf16 *b = be->bf16;
    int ra = g->trans_a ? g->k : g->m, ca = g->trans_a ? g->m : g->k;
    int rb = g->trans_b ? g->n : g->k, cb = g->trans_b ? g->k : g->n;
    size_t na = (size_t)ra * (size_t)ca, nb = (size_t)rb * (size_t)cb;
    size_t need = (size_t)g->batch * (na + nb);
    if (!grow((void **)&b->buf, &b->cap, need * 2))
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                        "out of memory for the bf16 copies of A and B (%zu bytes)", need * 2);
    uint16_t *abuf = b->buf, *bbuf = b->buf + (size_t)g->batch * na;
    convert(be, g->a, g->lda, g->stride_a, g->batch, ra, ca, abuf);
    convert(be, g->b, g->ldb, g->stride_b, g->batch, rb, cb, bbuf);
    dnnl_status_t st = dnnl_success;
    for (int bi = 0; bi < g->batch && st == dnnl_success; bi++)
        st = matmul(b, g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, abuf + (size_t)bi * na,
                    bbuf + (size_t)bi * nb, beta, (float *)c0 + (int64_t)bi * g->stride_c, g->ldc);
    if (st != dnnl_success)
        return cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                        "oneDNN bf16 matmul [%d x %d x %d] failed (dnnl status %d)", g->m, g->n,
                        g->k, (int)st);
    return TF_OK;
}

/* Whole matrices with the epilogues around the product, row-parallel: C
 * (or aux) starts as beta*C + bias, the product is added to it, then GELU. */
static tf_status whole_gemm_epilogue(tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    float *out = g->epilogue == TF_EPILOGUE_BIAS_GELU ? g->aux : g->c;
    size_t elems = (size_t)g->batch * (size_t)g->m * (size_t)g->n;
    int rows = g->batch * g->m;
    if (g->epilogue != TF_EPILOGUE_NONE) {
        CPU_PARALLEL_IF(be, cpu_par(be, elems))
        {
            CPU_FOR_STATIC
            for (int r = 0; r < rows; r++) {
                float *row = out + (int64_t)(r / g->m) * g->stride_c + (int64_t)(r % g->m) * g->ldc;
                if (g->beta == 0.0f)
                    memcpy(row, g->bias, (size_t)g->n * sizeof(float));
                else
                    for (int j = 0; j < g->n; j++) row[j] = g->beta * row[j] + g->bias[j];
            }
        }
    }
    tf_status st = whole_gemm(be, g, g->epilogue == TF_EPILOGUE_NONE ? g->beta : 1.0f, out, err);
    if (st || g->epilogue != TF_EPILOGUE_BIAS_GELU) return st;
    CPU_PARALLEL_IF(be, cpu_par(be, elems))
    {
        CPU_FOR_STATIC
        for (int r = 0; r < rows; r++) {
            int64_t off = (int64_t)(r / g->m) * g->stride_c + (int64_t)(r % g->m) * g->ldc;
            cpu_gelu_span((const float *)g->aux + off, (float *)g->c + off, (size_t)g->n, g->gelu);
        }
    }
    return TF_OK;
}

/* ---- row slabs ------------------------------------------------------------ */

/* Rows of C per slab: a slab of the intermediate layer's output (128 x 1536
 * f32, 768 KiB) and its bf16 A stay in one core's L2 cache. */
#define CSLAB 128
/* Below this many flops the slabs run on the calling thread (as gemm.c). */
#define SLAB_PAR_MIN_FLOPS 4e6
#ifdef _OPENMP
#define SLAB_PARALLEL(n) CPU_PRAGMA(omp parallel num_threads(n) if ((n) > 1))
#else
#define SLAB_PARALLEL(n)
#endif

typedef struct slab_plan {
    int rows, slabs, threads;
    bool bias_in_kernel; /* bias as oneDNN's bias (beta 0, alpha 1), else pre-filled */
    dnnl_primitive_t full, tail; /* [rows] and [m % rows] rows of C; tail NULL if none */
    dnnl_memory_desc_t a_full, a_tail, c_full, c_tail, w, bias, sp;
    size_t a_bytes; /* per thread: a [rows, k] bf16 slab, CPU_ALIGN-rounded */
} slab_plan;

/* op(A) [m, k] (packed bf16, row stride k) times B (w: NULL = the layout
 * oneDNN prefers) into C [m, n] f32 at row stride ldc; alpha as output
 * scale, C's old value times sum added when sum != 0, f32 bias [1, n]. */
static dnnl_status_t slab_pd(struct cpu_bf16 *b, int m, int n, int k, int64_t ldc, float alpha,
                             float sum, bool bias, const dnnl_memory_desc_t *w,
                             dnnl_primitive_desc_t *pd)
{
    dnnl_memory_desc_t ad, bd, cd, biasd;
    dnnl_dims_t adims = {m, k}, bdims = {k, n}, cdims = {m, n}, biasdims = {1, n};
    dnnl_dims_t as = {k, 1}, cs = {ldc, 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_matmul_desc_t md;
    dnnl_status_t st;
    *pd = NULL;
#define TRY(x) \
    if ((st = (x)) != dnnl_success) goto out
    TRY(dnnl_memory_desc_init_by_strides(&ad, 2, adims, dnnl_bf16, as));
    if (w)
        bd = *w;
    else
        TRY(dnnl_memory_desc_init_by_tag(&bd, 2, bdims, dnnl_bf16, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_strides(&cd, 2, cdims, dnnl_f32, cs));
    TRY(dnnl_memory_desc_init_by_tag(&biasd, 2, biasdims, dnnl_f32, dnnl_ab));
    TRY(dnnl_matmul_desc_init(&md, &ad, &bd, bias ? &biasd : NULL, &cd));
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (alpha != 1.0f) TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    if (sum != 0.0f) {
        TRY(dnnl_post_ops_create(&po));
        TRY(dnnl_post_ops_append_sum(po, sum));
        TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    TRY(dnnl_primitive_desc_create(pd, &md, attr, b->engine, NULL));
#undef TRY
out:
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

static void plan_free(slab_plan *p)
{
    if (p->full) dnnl_primitive_destroy(p->full);
    if (p->tail) dnnl_primitive_destroy(p->tail);
    p->full = p->tail = NULL;
}

/* The primitives for g's slabs and the layout of B they read; sp: the
 * largest scratchpad either needs. */
static dnnl_status_t plan_slabs(tf_backend *be, const tf_gemm_desc *g, slab_plan *p)
{
    struct cpu_bf16 *b = be->bf16;
    double flops = 2.0 * g->m * (double)g->n * g->k;
    memset(p, 0, sizeof *p);
    p->threads = be->threads > 1 && flops >= SLAB_PAR_MIN_FLOPS ? be->threads : 1;
    int rows = CSLAB;
    if (g->m < rows * p->threads) /* every thread a slab: ceil(m / threads), 16-row multiples */
        rows = ((g->m + p->threads - 1) / p->threads + 15) / 16 * 16;
    p->rows = rows < g->m ? rows : g->m;
    p->slabs = (g->m + p->rows - 1) / p->rows;
    int tail = g->m - (p->slabs - 1) * p->rows;
    p->bias_in_kernel = g->epilogue != TF_EPILOGUE_NONE && g->beta == 0.0f && g->alpha == 1.0f;
    float sum = g->epilogue == TF_EPILOGUE_NONE ? g->beta : p->bias_in_kernel ? 0.0f : 1.0f;
    dnnl_primitive_desc_t pf = NULL, pt = NULL;
    dnnl_status_t st;
    size_t spf = 0, spt = 0;
    if ((st = slab_pd(b, p->rows, g->n, g->k, g->ldc, g->alpha, sum, p->bias_in_kernel, NULL, &pf)))
        goto out;
    p->w = *dnnl_primitive_desc_query_md(pf, dnnl_query_weights_md, 0);
    p->a_full = *dnnl_primitive_desc_query_md(pf, dnnl_query_src_md, 0);
    p->c_full = *dnnl_primitive_desc_query_md(pf, dnnl_query_dst_md, 0);
    spf = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pf, dnnl_query_scratchpad_md, 0));
    if (tail != p->rows) { /* the last slab's rows read B in the same layout */
        if ((st = slab_pd(b, tail, g->n, g->k, g->ldc, g->alpha, sum, p->bias_in_kernel, &p->w, &pt)))
            goto out;
        p->a_tail = *dnnl_primitive_desc_query_md(pt, dnnl_query_src_md, 0);
        p->c_tail = *dnnl_primitive_desc_query_md(pt, dnnl_query_dst_md, 0);
        spt = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pt, dnnl_query_scratchpad_md, 0));
    }
    dnnl_dims_t biasdims = {1, g->n}, spdims = {(dnnl_dim_t)(spf > spt ? spf : spt) + 1};
    if ((st = dnnl_memory_desc_init_by_tag(&p->bias, 2, biasdims, dnnl_f32, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->sp, 1, spdims, dnnl_u8, dnnl_a)))
        goto out;
    p->a_bytes = ((size_t)p->rows * (size_t)g->k * 2 + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if ((st = dnnl_primitive_create(&p->full, pf))) goto out;
    if (pt && (st = dnnl_primitive_create(&p->tail, pt))) goto out;
out:
    if (pf) dnnl_primitive_desc_destroy(pf);
    if (pt) dnnl_primitive_desc_destroy(pt);
    if (st) plan_free(p);
    return st;
}

/* B (f32, ldb, trans_b as given) to bf16 in oneDNN's layout p->w at
 * b->wbuf: rounded by us (the same rounding as A), then reordered by
 * oneDNN. */
static dnnl_status_t pack_b(tf_backend *be, const tf_gemm_desc *g, const slab_plan *p)
{
    struct cpu_bf16 *b = be->bf16;
    int rb = g->trans_b ? g->n : g->k, cb = g->trans_b ? g->k : g->n;
    convert(be, g->b, g->ldb, 0, 1, rb, cb, b->buf);
    dnnl_memory_desc_t plain;
    dnnl_dims_t dims = {g->k, g->n}, strides = {g->trans_b ? 1 : g->n, g->trans_b ? g->k : 1};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_status_t st;
    if ((st = dnnl_memory_desc_init_by_strides(&plain, 2, dims, dnnl_bf16, strides)) ||
        (st = dnnl_reorder_primitive_desc_create(&pd, &plain, b->engine, &p->w, b->engine, NULL)) ||
        (st = dnnl_primitive_create(&prim, pd)) ||
        (st = dnnl_memory_create(&from, &plain, b->engine, b->buf)) ||
        (st = dnnl_memory_create(&to, &p->w, b->engine, b->wbuf)))
        goto out;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if (!(st = dnnl_primitive_execute(prim, b->stream, 2, args))) st = dnnl_stream_wait(b->stream);
out:
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}

/* One thread's slabs: A rows to bf16, the product (bias in the kernel or
 * pre-filled), GELU, each slab while it is in this thread's cache. */
static dnnl_status_t run_slabs(tf_backend *be, const tf_gemm_desc *g, const slab_plan *p)
{
    struct cpu_bf16 *b = be->bf16;
    size_t per_thread = p->a_bytes + dnnl_memory_desc_get_size(&p->sp);
    per_thread = (per_thread + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    float *target = g->epilogue == TF_EPILOGUE_BIAS_GELU ? g->aux : g->c;
    int failed = dnnl_success;
    SLAB_PARALLEL(p->threads)
    {
        char *mine = b->tbuf + (size_t)cpu_thread_id() * per_thread;
        uint16_t *abuf = (uint16_t *)mine;
        dnnl_memory_t am = NULL, at = NULL, wm = NULL, bm = NULL, spm = NULL, cm = NULL, ct = NULL;
        dnnl_status_t st;
        if ((st = dnnl_memory_create(&am, &p->a_full, b->engine, abuf)) ||
            (p->tail && (st = dnnl_memory_create(&at, &p->a_tail, b->engine, abuf))) ||
            (st = dnnl_memory_create(&wm, &p->w, b->engine, b->wbuf)) ||
            (st = dnnl_memory_create(&bm, &p->bias, b->engine, (void *)g->bias)) ||
            (st = dnnl_memory_create(&spm, &p->sp, b->engine, mine + p->a_bytes)) ||
            (st = dnnl_memory_create(&cm, &p->c_full, b->engine, target)) ||
            (p->tail && (st = dnnl_memory_create(&ct, &p->c_tail, b->engine, target))))
            __atomic_store_n(&failed, (int)st, __ATOMIC_RELAXED);
        CPU_FOR_DYNAMIC
        for (int s = 0; s < p->slabs; s++) {
            if (__atomic_load_n(&failed, __ATOMIC_RELAXED) != dnnl_success) continue;
            int r0 = s * p->rows, rr = g->m - r0 < p->rows ? g->m - r0 : p->rows;
            const float *a = (const float *)g->a + (int64_t)r0 * g->lda;
            for (int i = 0; i < rr; i++) to_bf16_row(a + (int64_t)i * g->lda, abuf + (size_t)i * g->k, g->k);
            float *out = target + (int64_t)r0 * g->ldc;
            if (g->epilogue != TF_EPILOGUE_NONE && !p->bias_in_kernel)
                for (int i = 0; i < rr; i++) {
                    float *row = out + (int64_t)i * g->ldc;
                    for (int j = 0; j < g->n; j++) row[j] = g->beta * row[j] + g->bias[j];
                }
            bool full = rr == p->rows;
            dnnl_memory_t c = full ? cm : ct;
            dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, full ? am : at},
                                       {DNNL_ARG_WEIGHTS, wm},
                                       {DNNL_ARG_DST, c},
                                       {DNNL_ARG_SCRATCHPAD, spm},
                                       {DNNL_ARG_BIAS, bm}};
            if ((st = dnnl_memory_set_data_handle(c, out)) ||
                (st = dnnl_primitive_execute(full ? p->full : p->tail, b->stream,
                                             p->bias_in_kernel ? 5 : 4, args))) {
                __atomic_store_n(&failed, (int)st, __ATOMIC_RELAXED);
                continue;
            }
            if (g->epilogue == TF_EPILOGUE_BIAS_GELU)
                for (int i = 0; i < rr; i++)
                    cpu_gelu_span(out + (int64_t)i * g->ldc, (float *)g->c + (int64_t)(r0 + i) * g->ldc,
                                  (size_t)g->n, g->gelu);
        }
        dnnl_memory_t mems[7] = {am, at, wm, bm, spm, cm, ct};
        for (int i = 0; i < 7; i++)
            if (mems[i]) dnnl_memory_destroy(mems[i]);
    }
    if (failed == dnnl_success) return dnnl_stream_wait(b->stream);
    return (dnnl_status_t)failed;
}

/* The slab way for g (not trans_a, batch 1). *done = false when oneDNN has
 * no matmul for this plan (then the whole-matrix way runs instead). */
static tf_status slab_gemm(tf_backend *be, const tf_gemm_desc *g, bool *done, tf_error *err)
{
    struct cpu_bf16 *b = be->bf16;
    slab_plan p;
    *done = false;
    if (plan_slabs(be, g, &p) != dnnl_success) return TF_OK;
    *done = true;
    size_t per_thread = p.a_bytes + dnnl_memory_desc_get_size(&p.sp);
    per_thread = (per_thread + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    size_t wbytes = dnnl_memory_desc_get_size(&p.w);
    tf_status st = TF_OK;
    if (!grow((void **)&b->buf, &b->cap, (size_t)g->n * (size_t)g->k * 2) ||
        !grow(&b->wbuf, &b->wcap, wbytes) ||
        !grow((void **)&b->tbuf, &b->tcap, per_thread * (size_t)p.threads)) {
        st = cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                      "out of memory for the bf16 copies of A and B ([%d x %d x %d])", g->m, g->n,
                      g->k);
        goto out;
    }
    dnnl_status_t ds = pack_b(be, g, &p);
    if (ds == dnnl_success) ds = run_slabs(be, g, &p);
    if (ds != dnnl_success)
        st = cpu_fail(err, TF_ERR_RUNTIME, "gemm",
                      "oneDNN bf16 matmul [%d x %d x %d] failed (dnnl status %d)", g->m, g->n,
                      g->k, (int)ds);
out:
    plan_free(&p);
    return st;
}

tf_status cpu_bf16_gemm(tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    struct cpu_bf16 *b = be->bf16;
    tf_status st = TF_OK;
    bool done = false;
    pthread_mutex_lock(&b->lock);
#ifdef _OPENMP
    /* oneDNN's team outside our parallel regions (B's reorder, the whole
     * matrices, slabs run on one thread): the backend's size */
    int saved = omp_get_max_threads();
    omp_set_num_threads(be->threads);
#endif
    if (!g->trans_a && g->batch == 1) st = slab_gemm(be, g, &done, err);
    if (!done) st = whole_gemm_epilogue(be, g, err);
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    pthread_mutex_unlock(&b->lock);
    return st;
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

tf_status cpu_bf16_gemm(tf_backend *be, const tf_gemm_desc *g, tf_error *err)
{
    (void)be;
    (void)g;
    return cpu_fail(err, TF_ERR_PLUGIN, "gemm", "bf16 GEMMs: built without oneDNN");
}

#endif
