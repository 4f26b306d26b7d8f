/* cpu.h — backend-cpu internals shared by its source files: the backend
 * object, the op entry points the vtable points at, and argument checks.
 *
 * Threading: every op runs on the calling thread plus an OpenMP team of
 * be->threads (num_threads clause on each parallel region; nothing touches
 * the global OpenMP settings). OpenBLAS is told to use one thread and each
 * GEMM is split across the team here, so only one thread pool ever runs:
 * no OpenBLAS threads spinning against OpenMP threads on the same cores.
 * Without OpenMP the loops run serially and OpenBLAS threads the GEMMs.
 *
 * Streams are synchronous: an op has finished when it returns.
 */
#ifndef TF_BACKEND_CPU_H
#define TF_BACKEND_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tfcore/backend.h"
#include "tfcore/backend_check.h"
#include "tfcore/error.h"

#define CPU_PLUGIN_NAME "cpu"
#define CPU_PLUGIN_VERSION "1.0.0"

/* Alignment of every buffer alloc() returns (a cache line, an AVX-512 vector). */
#define CPU_ALIGN 64
/* Per-thread scratch allocated at open (attention row blocks): 1 MiB. */
#define CPU_SCRATCH_FLOATS ((size_t)1 << 18)
/* Below this many elements an elementwise op stays on the calling thread:
 * waking the team costs more than the work. */
#define CPU_PAR_MIN 32768

/* Hot loops are compiled three times (baseline x86-64, x86-64-v3 = AVX2+FMA,
 * x86-64-v4 = AVX-512) and the loader picks one for the CPU it runs on (GNU
 * ifunc), so one binary is safe everywhere and fast on the machine it meets.
 * Floating-point contraction stays off (-std=c17), so all three clones give
 * bit-identical results. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \
    !defined(TF_CPU_NO_CLONES)
#define CPU_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define CPU_CLONES
#endif

#define CPU_STR2(x) #x
#define CPU_STR(x) CPU_STR2(x)
#ifdef _OPENMP
#define CPU_PRAGMA(x) _Pragma(#x)
/* A parallel region of the backend's team, skipped (run inline) when `cond` is false. */
#define CPU_PARALLEL_IF(be, cond) CPU_PRAGMA(omp parallel num_threads((be)->threads) if (cond))
#define CPU_FOR_STATIC CPU_PRAGMA(omp for schedule(static))
#define CPU_FOR_STATIC_NOWAIT CPU_PRAGMA(omp for schedule(static) nowait)
#define CPU_FOR_DYNAMIC CPU_PRAGMA(omp for schedule(dynamic, 1))
static inline int cpu_thread_id(void) { return omp_get_thread_num(); }
static inline int cpu_team_size(void) { return omp_get_num_threads(); }
#else
#define CPU_PARALLEL_IF(be, cond)
#define CPU_FOR_STATIC
#define CPU_FOR_STATIC_NOWAIT
#define CPU_FOR_DYNAMIC
static inline int cpu_thread_id(void) { return 0; }
static inline int cpu_team_size(void) { return 1; }
#endif

struct tf_backend {
    int threads;                /* size of the OpenMP team every op uses */
    uint64_t seed;              /* open_args.seed (ops take their own seeds) */
    char name[384];             /* device_name() */
    atomic_size_t current;      /* bytes held through alloc() now */
    atomic_size_t peak;         /* most bytes held at once */
    float *scratch;             /* [threads, CPU_SCRATCH_FLOATS] f32, attention row blocks */
    pthread_mutex_t scratch_lock; /* one op at a time uses the scratch */
    struct cpu_bf16 *bf16;      /* bf16 GEMMs (gemm_bf16.c); NULL: none, bf16_why says why */
    char bf16_why[160];         /* "bf16 GEMMs: oneDNN 2.6.3 (AMX)" or "no bf16 GEMMs: why" */
};

struct tf_stream {
    tf_backend *be;
};

struct tf_event {
    tf_backend *be;
    uint64_t recorded; /* how many times it was recorded (work is already done) */
};

/* --- argument checks: each fills err with "backend-cpu: OP: what" -------- */

/* This backend to libtfcore's shared checks (tfcore/backend_check.h): f32
 * activations only. The helpers below are those checks with it bound. */
extern const tf_backend_checker cpu_checker;

tf_status cpu_fail(tf_error *err, tf_status code, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* TF_ERR_RUNTIME "backend-cpu: OP: NAME is NULL" when p is NULL. */
tf_status cpu_need(tf_error *err, const char *op, const char *name, const void *p);
/* TF_ERR_PLUGIN when dt is not f32 (the only activation dtype this backend computes in). */
tf_status cpu_need_f32(tf_error *err, const char *op, const char *name, tf_dtype dt);
/* TF_ERR_RUNTIME when v < lo. */
tf_status cpu_need_min(tf_error *err, const char *op, const char *name, long long v,
                       long long lo);

/* Elementwise work: true when it is worth waking the team. */
static inline bool cpu_par(const tf_backend *be, size_t work)
{
    return be->threads > 1 && work >= CPU_PAR_MIN;
}

/* [begin, end) of part `t` of `n` items split into `parts` contiguous ranges,
 * each a multiple of `quantum` long (except the last). */
static inline void cpu_split(size_t n, int parts, int t, size_t quantum, size_t *begin,
                             size_t *end)
{
    size_t chunk = (n + (size_t)parts - 1) / (size_t)parts;
    chunk = (chunk + quantum - 1) / quantum * quantum;
    size_t b = chunk * (size_t)t;
    *begin = b < n ? b : n;
    *end = b + chunk < n ? b + chunk : n;
}

/* --- the vtable's slots, one file per concept ------------------------------ */

/* backend.c */
tf_status cpu_check_config(tf_section *section, tf_error *err);
tf_status cpu_open(const tf_backend_open_args *args, tf_backend **out, tf_error *err);
void cpu_close(tf_backend *be);
bool cpu_supports(tf_backend *be, tf_matmul_mode mode, tf_dtype act_dtype);
void cpu_mem_info(tf_backend *be, tf_backend_mem_info *info);
const char *cpu_device_name(tf_backend *be);

/* memory.c */
tf_status cpu_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out, tf_error *err);
void cpu_free(tf_backend *be, void *ptr, tf_mem_kind kind);
tf_status cpu_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes,
                     tf_memcpy_kind kind, tf_stream *s);
tf_status cpu_memset(tf_backend *be, void *dst, int value, size_t bytes, tf_stream *s);

/* stream.c */
tf_status cpu_stream_create(tf_backend *be, tf_stream **out, tf_error *err);
void cpu_stream_destroy(tf_backend *be, tf_stream *s);
tf_status cpu_stream_sync(tf_backend *be, tf_stream *s, tf_error *err);
tf_status cpu_event_create(tf_backend *be, tf_event **out, tf_error *err);
void cpu_event_destroy(tf_backend *be, tf_event *e);
tf_status cpu_event_record(tf_backend *be, tf_event *e, tf_stream *s);
tf_status cpu_stream_wait_event(tf_backend *be, tf_stream *s, tf_event *e);
tf_status cpu_event_sync(tf_backend *be, tf_event *e, tf_error *err);

/* gemm.c */
tf_status cpu_gemm(tf_backend *be, tf_stream *s, const tf_gemm_desc *g, tf_error *err);
/* gemm_bf16.c: bf16 GEMMs (TF_MATMUL_BF16 on f32 activations) through oneDNN.
 * open decides whether this CPU and build have them and fills bf16_why. */
void cpu_bf16_open(tf_backend *be);
void cpu_bf16_close(tf_backend *be);
/* g (mode TF_MATMUL_BF16, checked, k > 0, alpha != 0) with its epilogue:
 * A and B (f32) rounded to bf16, fp32 accumulation; be->bf16 must be set. */
tf_status cpu_bf16_gemm(tf_backend *be, const tf_gemm_desc *g, tf_error *err);
/* One single-threaded row-major sgemm (OpenBLAS), for ops that split work themselves. */
void cpu_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* reduce.c */
tf_status cpu_sum_rows(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                       int cols, float *dbias, bool accumulate, tf_error *err);
tf_status cpu_sum_squares(tf_backend *be, tf_stream *s, const float *x, size_t n, float *out,
                          tf_error *err);
tf_status cpu_finite_check(tf_backend *be, tf_stream *s, const void *x, size_t n, tf_dtype dt,
                           int32_t *found, tf_error *err);

/* layernorm.c */
tf_status cpu_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x, const void *residual,
                            void *in_out, void *y, const float *gamma, const float *beta,
                            float *mean, float *rstd, int rows, int cols, float eps,
                            tf_dtype dt, tf_error *err);
tf_status cpu_layernorm_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                            const float *gamma, const float *mean, const float *rstd, void *dx,
                            bool dx_accumulate, float *dgamma, float *dbeta, int rows,
                            int cols, tf_dtype dt, tf_error *err);

/* attention.c */
size_t cpu_attention_save_bytes(tf_backend *be, const tf_attention_desc *d);
tf_status cpu_attention_fwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                            const void *qkv, const int32_t *mask, void *out, void *save,
                            bool train, tf_error *err);
tf_status cpu_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                            const void *qkv, const int32_t *mask, const void *out,
                            const void *save, const void *dout, void *dqkv, tf_error *err);
tf_status cpu_attention_fwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               uint64_t row_first, uint64_t row_stride, const void *qkv,
                               const int32_t *mask, void *out, void *save, bool train,
                               tf_error *err);
tf_status cpu_attention_bwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                               uint64_t row_first, uint64_t row_stride, const void *qkv,
                               const int32_t *mask, const void *out, const void *save,
                               const void *dout, void *dqkv, tf_error *err);
tf_status cpu_attention_varlen_fwd(tf_backend *be, tf_stream *s,
                                   const tf_attention_varlen_desc *vd, const void *qkv, void *out,
                                   void *save, bool train, tf_error *err);
tf_status cpu_attention_varlen_bwd(tf_backend *be, tf_stream *s,
                                   const tf_attention_varlen_desc *vd, const void *qkv,
                                   const void *out, const void *save, const void *dout,
                                   void *dqkv, tf_error *err);

/* activation.c */
tf_status cpu_gelu_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                       tf_gelu_kind kind, tf_dtype dt, tf_error *err);
tf_status cpu_gelu_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *x, void *dx,
                       size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err);
tf_status cpu_tanh_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                       tf_dtype dt, tf_error *err);
tf_status cpu_tanh_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *y, void *dx,
                       size_t n, tf_dtype dt, tf_error *err);
/* y[i] = gelu(x[i]) for i < n on the calling thread (the GEMM epilogue). */
void cpu_gelu_span(const float *x, float *y, size_t n, tf_gelu_kind kind);

/* dropout.c */
tf_status cpu_dropout_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, uint8_t *keep,
                          size_t n, float p, uint64_t seed, uint64_t offset, tf_dtype dt,
                          tf_error *err);
tf_status cpu_dropout_bwd(tf_backend *be, tf_stream *s, const void *dy, const uint8_t *keep,
                          void *dx, size_t n, float p, tf_dtype dt, tf_error *err);
tf_status cpu_dropout_fwd_ex(tf_backend *be, tf_stream *s, const tf_dropout_desc *d,
                             tf_error *err);
tf_status cpu_dropout_varlen_fwd(tf_backend *be, tf_stream *s, const tf_dropout_varlen_desc *d,
                                 tf_error *err);

/* elementwise.c */
tf_status cpu_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y, size_t n,
                  tf_dtype dt, tf_error *err);
tf_status cpu_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha, tf_dtype dt,
                    tf_error *err);
tf_status cpu_cast(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt, void *dst,
                   tf_dtype dst_dt, size_t n, tf_error *err);

/* embedding.c */
tf_status cpu_embedding_fwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                            const float *table, int vocab, int dim, void *out, bool accumulate,
                            tf_dtype dt, tf_error *err);
tf_status cpu_embedding_bwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                            const void *dout, tf_dtype dt, float *dtable, int vocab, int dim,
                            tf_error *err);

/* loss.c */
tf_status cpu_cross_entropy(tf_backend *be, tf_stream *s, const void *logits, int64_t ld_logits,
                            tf_dtype dt, int rows, int classes, const int32_t *labels,
                            int ignore_index, float *loss, void *dlogits, float grad_scale,
                            tf_error *err);
tf_status cpu_cross_entropy_ex(tf_backend *be, tf_stream *s, const tf_cross_entropy_desc *d,
                               tf_error *err);

/* optimizer.c */
tf_status cpu_adamw(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                    float *v, const tf_adamw_segment *segs, size_t nsegs,
                    const tf_adamw_hyper *h, tf_error *err);
tf_status cpu_adamw_ex(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                       float *v, const tf_adamw_segment *segs, size_t nsegs,
                       const tf_adamw_desc *d, tf_error *err);
tf_status cpu_adafactor(tf_backend *be, tf_stream *s, float *params, const float *grads, float *state,
                        const tf_adafactor_desc *d, tf_error *err);

#endif
