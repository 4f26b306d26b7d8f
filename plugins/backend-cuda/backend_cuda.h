/* backend_cuda.h — backend-cuda internals shared by its source files.
 *
 * Two halves:
 *  - the kernel launchers (tfc_*) that the .cu files define and the C glue
 *    calls: plain C declarations, included by C and by CUDA C++ alike. Each
 *    launcher enqueues its kernels on the stream it is given, returns the
 *    launch status (cudaGetLastError) and never synchronizes;
 *  - the backend, stream and event objects and the helpers of the C files
 *    (backend.c, errors.c, device.c, config.c, probe.c, memory.c, stream.c,
 *    gemm.c and the *_ops.c glue), compiled by gcc only.
 *
 * The fused kernels (layernorm, attention, cross-entropy) are declared in
 * fused_kernels.h with the same conventions.
 */
#ifndef TF_BACKEND_CUDA_H
#define TF_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "tfcore/backend.h"
#include "tfcore/backend_check.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_PLUGIN_NAME "cuda"
#define CUDA_PLUGIN_VERSION "1.0.0"

/* --- a bad embedding id, reported from the device -------------------------
 * The record lives in mapped pinned host memory (one per backend): kernels
 * write it with plain stores where the host reads it. Who may write it is
 * decided in device memory, without atomics on host memory (which PCIe
 * does not guarantee): each launch carries a generation number, and the
 * first thread that meets an id outside [0, vocab) claims the record with
 * atomicMax(claim, gen) — it wins when the old value was below gen — fills
 * the fields, fences (system scope) and sets state = 2. The host, after a
 * stream or event synchronization, sees state 2, turns the record into
 * TF_ERR_DATA, clears it and moves to the next generation. */
typedef struct tfc_id_error {
    volatile int32_t state; /* 0 none, 2 complete */
    int32_t op;             /* TFC_OP_EMBEDDING_FWD or _BWD */
    int32_t id;             /* the offending id */
    int32_t row;            /* its row in ids[] */
    int32_t vocab;          /* the table's rows */
    int32_t pad;
} tfc_id_error;

typedef struct tfc_id_check {
    tfc_id_error *rec; /* mapped pinned host memory */
    int32_t *claim;    /* device memory: the last generation that claimed rec */
    int32_t gen;       /* this launch's generation (>= 1) */
} tfc_id_check;

#define TFC_OP_EMBEDDING_FWD 1
#define TFC_OP_EMBEDDING_BWD 2

/* --- elementwise.cu ------------------------------------------------------
 * n elements of dtype dt (F32, F16 or BF16) unless said otherwise; the math
 * is backend-cpu's (cpu_math.h) operation for operation, without fused
 * multiply-adds, so f32 results carry the same bits as backend-cpu's. */
cudaError_t tfc_gelu_fwd(cudaStream_t s, const void *x, void *y, size_t n, tf_gelu_kind kind,
                         tf_dtype dt);
cudaError_t tfc_gelu_bwd(cudaStream_t s, const void *dy, const void *x, void *dx, size_t n,
                         tf_gelu_kind kind, tf_dtype dt);
/* y[b, r, c] = gelu(pre[b, r, c]) over batch x [rows, cols] matrices that
 * share the leading dimension ld and the batch stride (both in elements):
 * the GEMM's BIAS_GELU epilogue after cuBLASLt wrote pre = aux. */
cudaError_t tfc_gelu_matrix(cudaStream_t s, const void *pre, void *y, int batch, int rows,
                            int cols, int64_t ld, int64_t stride, tf_gelu_kind kind,
                            tf_dtype dt);
/* A GEMM with k = 0 (no products): c = beta * c (+ bias[col]); with
 * with_gelu, aux = that and c = gelu(aux). Same matrix shapes as above. */
cudaError_t tfc_gemm_no_k(cudaStream_t s, void *c, void *aux, const float *bias, bool with_gelu,
                          tf_gelu_kind kind, float beta, int batch, int rows, int cols,
                          int64_t ld, int64_t stride, tf_dtype dt);
cudaError_t tfc_tanh_fwd(cudaStream_t s, const void *x, void *y, size_t n, tf_dtype dt);
cudaError_t tfc_tanh_bwd(cudaStream_t s, const void *dy, const void *y, void *dx, size_t n,
                         tf_dtype dt);
/* x, y, keep: [rows, row_elems]. keep of element j of row b = the Philox test
 * of tfcore/backend.h "Dropout masks" (stream offset + row_first + b *
 * row_stride, element j) against threshold `thr` (= ceil(p * 2^24), clamped
 * to [0, 2^24]); y = x * (keep ? scale : 0). */
cudaError_t tfc_dropout_fwd(cudaStream_t s, const void *x, void *y, uint8_t *keep, size_t rows,
                            size_t row_elems, uint32_t thr, float scale, uint64_t seed,
                            uint64_t offset, uint64_t row_first, uint64_t row_stride,
                            tf_dtype dt);
cudaError_t tfc_dropout_bwd(cudaStream_t s, const void *dy, const uint8_t *keep, void *dx,
                            size_t n, float scale, tf_dtype dt);
cudaError_t tfc_add(cudaStream_t s, const void *a, const void *b, void *y, size_t n, tf_dtype dt);
cudaError_t tfc_scale(cudaStream_t s, void *x, size_t n, float alpha, tf_dtype dt);
/* F32, F16, BF16, F64 each way; rounding to nearest even with libtfcore's
 * bit recipes (tfcore/dtype.h), NaN payloads included. src_dt != dst_dt. */
cudaError_t tfc_cast(cudaStream_t s, const void *src, tf_dtype src_dt, void *dst, tf_dtype dst_dt,
                     size_t n);

/* cudaSuccess when the build has kernels the current device can run. */
cudaError_t tfc_kernel_image_check(void);

/* --- reduce.cu ------------------------------------------------------------ */
/* Bytes of workspace tfc_sum_rows needs for [rows, cols]. */
size_t tfc_sum_rows_workspace_bytes(int rows, int cols);
/* dbias[cols] (+)= column sums of dy[rows, cols] (ld = cols), in double,
 * deterministic: the row split depends on rows only. */
cudaError_t tfc_sum_rows(cudaStream_t s, const void *dy, tf_dtype dt, int rows, int cols,
                         float *dbias, bool accumulate, void *workspace);
size_t tfc_sum_squares_workspace_bytes(void);
/* *out = (float) sum of x[i]^2 in double; fixed pieces, fixed-order sums. */
cudaError_t tfc_sum_squares(cudaStream_t s, const float *x, size_t n, float *out,
                            void *workspace);
/* *found |= 1 when x[n] (F32, F16, BF16 or F64) holds an inf or NaN. */
cudaError_t tfc_finite_check(cudaStream_t s, const void *x, size_t n, tf_dtype dt,
                             int32_t *found);

/* --- embedding.cu ---------------------------------------------------------- */
/* out[i, :] (+)= table[ids[i], :]; a row whose id is outside [0, vocab) is
 * left untouched and reported through `check`. */
cudaError_t tfc_embedding_fwd(cudaStream_t s, const int32_t *ids, int rows, const float *table,
                              int vocab, int dim, void *out, bool accumulate, tf_dtype dt,
                              tfc_id_check check);
size_t tfc_embedding_bwd_workspace_bytes(int rows, int dim, int vocab);
/* dtable[ids[i], :] += dout[i, :], deterministic: (id, row) pairs radix
 * sorted (stable), then per id the rows summed in row order (see
 * embedding.cu). Rows with a bad id are skipped and reported. 0 from the
 * size function: rows too large to sort. */
cudaError_t tfc_embedding_bwd(cudaStream_t s, const int32_t *ids, int rows, const void *dout,
                              tf_dtype dt, float *dtable, int vocab, int dim, void *workspace,
                              size_t workspace_bytes, tfc_id_check check);

/* --- optimizer.cu ------------------------------------------------------------ */
/* The AdamW work list: the segments cut into chunks of at most
 * TFC_ADAMW_CHUNK elements; one thread block per chunk. */
#define TFC_ADAMW_CHUNK 4096
typedef struct tfc_adamw_chunk {
    uint64_t offset;  /* first element in the flat buffers */
    uint32_t count;   /* elements, <= TFC_ADAMW_CHUNK */
    uint32_t segment; /* index into the weight-decay table */
} tfc_adamw_chunk;

/* Scalars of one AdamW step, rounded to float on the host as backend-cpu
 * does; the per-segment decay 1 - lr * wd is formed on the device in double
 * from lr and the segment's weight decay, exactly as backend-cpu forms it. */
typedef struct tfc_adamw_scalars {
    float lr, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step,
        grad_scale;
    int hf; /* TF_ADAMW_HF: transformers' AdamW (neg_step = -lr·sqrt(bc2)/bc1; see optimizer.cu) */
} tfc_adamw_scalars;

/* chunks[nchunks] and weight_decay[] live in device memory. */
cudaError_t tfc_adamw(cudaStream_t s, float *params, const float *grads, float *m, float *v,
                      const tfc_adamw_chunk *chunks, size_t nchunks, const float *weight_decay,
                      const tfc_adamw_scalars *k);

/* --- adafactor.cu ------------------------------------------------------------ */
/* Scalars of one Adafactor step, rounded to float on the host as backend-cpu
 * does (lr_d: the descriptor's lr, for -(wd·lr) formed in double). */
typedef struct tfc_adafactor_scalars {
    float beta2t, one_minus_beta2t, eps, grad_scale, clip, lr;
    double lr_d;
} tfc_adafactor_scalars;
/* Most pieces a sum of squares is cut into (ws holds 2 + this many doubles). */
#define TFC_ADAFACTOR_PARTS 1024
/* One tensor's step, queued on s; ws: the descriptor's workspace (device). */
cudaError_t tfc_adafactor_tensor(cudaStream_t s, float *params, const float *grads, float *state,
                                 const tf_adafactor_tensor *t, const tfc_adafactor_scalars *k, double *ws);

#ifdef __cplusplus
}
#endif

/* --- the device side of the dropout recipe (for any .cu of the plugin) -----
 * Philox4x32-10 as plugins/backend-cpu/random.c: keep[i] for element i of
 * stream (seed, offset) is word i % 4 of Philox(counter = {i/4 lo, i/4 hi,
 * offset lo, offset hi}, key = {seed lo, seed hi}), tested (w >> 8) >= thr. */
#ifdef __CUDACC__
__device__ __forceinline__ void tfc_philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1)
{
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        uint32_t y0 = hi1 ^ c[1] ^ k0, y2 = hi0 ^ c[3] ^ k1;
        c[0] = y0;
        c[1] = lo1;
        c[2] = y2;
        c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/* --- element access in any activation dtype, with libtfcore's conversions --
 * Conversions follow tfcore/dtype.h bit for bit (round to nearest even;
 * f16 overflow to inf, subnormals exact; a NaN stays a quiet NaN with its
 * sign), so a value the host rounded and one the device rounded agree. */
__device__ __forceinline__ float tfc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (e == 0) {
        float v = __fmul_rn((float)man, 1.0f / 16777216.0f); /* subnormal: man * 2^-24, exact */
        return sign ? -v : v;
    }
    if (e == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    return __uint_as_float(sign | ((e + 112u) << 23) | (man << 13));
}

__device__ __forceinline__ uint16_t tfc_f32_to_f16(float f)
{
    uint32_t u = __float_as_uint(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) {                                   /* subnormal or zero */
        float v = __fmul_rn(__uint_as_float(a), 16777216.0f);
        uint32_t m = (uint32_t)v;
        float frac = __fsub_rn(v, (float)m);
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

__device__ __forceinline__ float tfc_bf16_to_f32(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

__device__ __forceinline__ uint16_t tfc_f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Element i of an activation buffer of dtype DT (F32, F16, BF16), as float. */
template <int DT>
__device__ __forceinline__ float tfc_load(const void *p, size_t i)
{
    static_assert(DT == TF_DTYPE_F32 || DT == TF_DTYPE_F16 || DT == TF_DTYPE_BF16,
                  "an activation dtype");
    if constexpr (DT == TF_DTYPE_F32)
        return ((const float *)p)[i];
    else if constexpr (DT == TF_DTYPE_F16)
        return tfc_f16_to_f32(((const uint16_t *)p)[i]);
    else
        return tfc_bf16_to_f32(((const uint16_t *)p)[i]);
}

template <int DT>
__device__ __forceinline__ void tfc_store(void *p, size_t i, float v)
{
    static_assert(DT == TF_DTYPE_F32 || DT == TF_DTYPE_F16 || DT == TF_DTYPE_BF16,
                  "an activation dtype");
    if constexpr (DT == TF_DTYPE_F32)
        ((float *)p)[i] = v;
    else if constexpr (DT == TF_DTYPE_F16)
        ((uint16_t *)p)[i] = tfc_f32_to_f16(v);
    else
        ((uint16_t *)p)[i] = tfc_f32_to_bf16(v);
}

/* Call F<dtype>(args...) for an activation dtype; anything else is
 * cudaErrorInvalidValue (the glue checked the dtype before). */
#define TFC_DISPATCH_ACT(dt, F, ...)                                    \
    switch (dt) {                                                       \
    case TF_DTYPE_F32: return F<TF_DTYPE_F32>(__VA_ARGS__);             \
    case TF_DTYPE_F16: return F<TF_DTYPE_F16>(__VA_ARGS__);             \
    case TF_DTYPE_BF16: return F<TF_DTYPE_BF16>(__VA_ARGS__);           \
    default: return cudaErrorInvalidValue;                              \
    }

/* Launch `kernel` on (grid, block, dynamic shared bytes, stream):
 *   TFCB_LAUNCH(k, grid, block, 0, s)(args...);
 * One spelling for every launch of every .cu file, so the launch syntax lives
 * in one place and the host-side emulation (tests/cuda-emu) can replace it.
 * A kernel name with a comma in its template arguments goes in parentheses. */
#ifndef TFCB_LAUNCH
#define TFCB_LAUNCH(kernel, grid, block, smem, stream) kernel<<<(grid), (block), (smem), (stream)>>>
#endif

/* Threads per block of the flat elementwise kernels, and their grid: one
 * thread per element (or per `per` elements) up to TFC_MAX_BLOCKS blocks,
 * then grid-stride loops. */
#define TFC_THREADS 256
#define TFC_MAX_BLOCKS 65536u
static inline unsigned tfc_blocks(size_t n, size_t per)
{
    size_t threads = (n + per - 1) / per;
    size_t b = (threads + TFC_THREADS - 1) / TFC_THREADS;
    return b < 1 ? 1u : b > TFC_MAX_BLOCKS ? TFC_MAX_BLOCKS : (unsigned)b;
}
#endif

/* --- the C side: objects and helpers (not seen by nvcc) -------------------- */
#ifndef __CUDACC__
#include <pthread.h>

#include <cublasLt.h>

#include "tfcore/error.h"

/* cuBLASLt workspace per stream, unless the config says otherwise. */
#define CUDA_LT_WORKSPACE_MIB_DEFAULT 32

struct tf_stream {
    tf_backend *be;
    cudaStream_t s;      /* non-blocking */
    bool is_default;     /* the backend's own (NULL) stream */
    /* cuBLASLt workspace: [lt_ws_bytes] bytes, made at the first GEMM on
     * this stream (at open for the default stream). One per stream, because
     * two GEMMs running at once on two streams must not share it. */
    void *lt_ws;
    size_t lt_ws_bytes;
    /* Op workspace (sum_rows, sum_squares, embedding backward and the fused
     * ops): grow-only, [ws_bytes] bytes, per stream for the same reason. */
    void *ws;
    size_t ws_bytes;
};

struct tf_event {
    tf_backend *be;
    cudaEvent_t e; /* cudaEventDisableTiming */
};

typedef struct cuda_block cuda_block;      /* memory.c: one live allocation */
typedef struct cuda_gemm_cache cuda_gemm_cache; /* gemm.c: matmul plans by shape */

struct tf_backend {
    int device;                  /* CUDA device index */
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    size_t total_mem;            /* bytes of device memory */
    char gpu[256];               /* cudaDeviceProp.name */
    char name[384];              /* device_name() */
    size_t lt_ws_bytes;          /* cuBLASLt workspace per stream */
    bool lt_gelu;                /* gelu_epilogue = "cublaslt" (tanh GELU, 16-bit) */

    tf_stream def;               /* the default stream (a created non-blocking one) */
    cublasLtHandle_t lt;
    tfc_id_error *bad_id;        /* mapped pinned host memory, device-visible at the same address */
    int32_t *bad_id_claim;       /* device memory, see tfc_id_check */
    int32_t bad_id_gen;          /* current generation (__atomic builtins: any thread may sync) */

    pthread_mutex_t mem_lock;    /* current, peak, blocks */
    size_t current, peak;        /* bytes held: alloc() plus the backend's own buffers */
    cuda_block *blocks;          /* open-addressing table ptr -> size, kind */
    size_t blocks_cap, blocks_used, blocks_dead;

    pthread_mutex_t gemm_lock;   /* the plan cache and its descriptors */
    cuda_gemm_cache *gemm_cache;

    pthread_mutex_t adamw_lock;  /* AdamW work list, rebuilt when the segments change */
    tf_adamw_segment *adamw_segs; /* host copy of the segments the list was built from */
    size_t adamw_nsegs;
    void *adamw_dev;             /* [chunks][weight decays] in device memory */
    size_t adamw_dev_bytes;
    size_t adamw_nchunks;
};

/* --- errors: every message is one line "backend-cuda: OP: what" ----------- */
/* This backend to libtfcore's shared checks (tfcore/backend_check.h): F32,
 * F16, BF16 activations. cuda_need* are those checks with it bound. */
extern const tf_backend_checker cuda_checker;
tf_status cuda_fail(tf_error *err, tf_status code, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* TF_ERR_RUNTIME "backend-cuda: OP (what): cudaErrorX: its description". */
tf_status cuda_fail_rt(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* TF_ERR_RUNTIME when p is NULL. */
tf_status cuda_need(tf_error *err, const char *op, const char *name, const void *p);
/* TF_ERR_RUNTIME when v < lo. */
tf_status cuda_need_min(tf_error *err, const char *op, const char *name, long long v,
                        long long lo);
/* TF_ERR_PLUGIN unless dt is an activation dtype (F32, F16, BF16). */
tf_status cuda_need_act(tf_error *err, const char *op, const char *name, tf_dtype dt);
/* A launcher's result: OK, or one line with the op and its shape. */
tf_status cuda_launched(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "1.50 GiB", "12.0 MiB", "512 bytes" into buf. */
const char *cuda_bytes(char *buf, size_t n, size_t bytes);

/* Make this thread's current device the backend's. A thread-local remembers
 * the last device set through here, so the common case is one compare.
 * (Code that calls cudaSetDevice itself on a thread that also uses a backend
 * must call cuda_forget_device() — no plugin of tfcore does.) */
cudaError_t cuda_bind(tf_backend *be);
void cuda_forget_device(void);

/* Start of every op: backend non-NULL, device bound, s resolved (NULL = the
 * default stream; another backend's stream is an error). */
tf_status cuda_enter(tf_backend *be, tf_stream *s, const char *op, tf_stream **out,
                     tf_error *err);

/* --- memory.c --------------------------------------------------------------- */
/* Device memory for the backend's own use, counted in current/peak; the
 * out-of-memory error names `what`. */
tf_status cuda_internal_alloc(tf_backend *be, size_t bytes, const char *op, const char *what,
                              void **out, tf_error *err);
void cuda_internal_free(tf_backend *be, void *p, size_t bytes);
/* The stream's op workspace, grown (never shrunk) to at least `bytes`.
 * Growing waits for the stream, since queued kernels may still use the old one. */
tf_status cuda_workspace(tf_backend *be, tf_stream *st, size_t bytes, const char *op, void **out,
                         tf_error *err);
/* The stream's cuBLASLt workspace (made on first use). */
tf_status cuda_lt_workspace(tf_backend *be, tf_stream *st, void **out, tf_error *err);
void cuda_stream_release(tf_backend *be, tf_stream *st); /* frees both workspaces */
void cuda_blocks_free_table(tf_backend *be);

tf_status cuda_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out, tf_error *err);
void cuda_free(tf_backend *be, void *ptr, tf_mem_kind kind);
tf_status cuda_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes,
                      tf_memcpy_kind kind, tf_stream *s);
tf_status cuda_memset(tf_backend *be, void *dst, int value, size_t bytes, tf_stream *s);
void cuda_mem_info(tf_backend *be, tf_backend_mem_info *info);

/* --- stream.c --------------------------------------------------------------- */
tf_status cuda_stream_create(tf_backend *be, tf_stream **out, tf_error *err);
void cuda_stream_destroy(tf_backend *be, tf_stream *s);
tf_status cuda_stream_sync(tf_backend *be, tf_stream *s, tf_error *err);
tf_status cuda_event_create(tf_backend *be, tf_event **out, tf_error *err);
void cuda_event_destroy(tf_backend *be, tf_event *e);
tf_status cuda_event_record(tf_backend *be, tf_event *e, tf_stream *s);
tf_status cuda_stream_wait_event(tf_backend *be, tf_stream *s, tf_event *e);
tf_status cuda_event_sync(tf_backend *be, tf_event *e, tf_error *err);
void *cuda_native_stream(tf_backend *be, tf_stream *s);
/* TF_ERR_DATA for a bad embedding id the device recorded (then cleared). */
tf_status cuda_take_id_error(tf_backend *be, tf_error *err);

/* --- gemm.c ------------------------------------------------------------------ */
tf_status cuda_gemm(tf_backend *be, tf_stream *s, const tf_gemm_desc *g, tf_error *err);
bool cuda_gemm_cache_new(tf_backend *be); /* false: out of host memory */
void cuda_gemm_cache_free(tf_backend *be);

/* --- config.c ---------------------------------------------------------------- */
typedef struct cuda_config {
    long long device_offset;
    long long lt_ws_mib;
    bool lt_gelu;
} cuda_config;
/* The "backend" section's keys (defaults when section is NULL). */
tf_status cuda_read_config(tf_section *section, cuda_config *c, tf_error *err);
tf_status cuda_check_config(tf_section *section, tf_error *err);

/* --- probe.c ----------------------------------------------------------------- */
/* "13.0" from CUDA's 13000. */
void cuda_version_text(char *buf, size_t n, int v);
/* TF_OK with *count >= 1 when a device is usable; else why in why[n] (in
 * this process: initialises CUDA here). */
tf_status cuda_count_devices(int *count, char *why, size_t n);
int cuda_probe(char *why, size_t n);        /* the descriptor's probe */
int cuda_device_count(char *why, size_t n); /* the vtable's device_count */

/* --- the glue of the ops (the vtable's slots) --------------------------------- */
/* reduce_ops.c */
tf_status cuda_sum_rows(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                        int cols, float *dbias, bool accumulate, tf_error *err);
tf_status cuda_sum_squares(tf_backend *be, tf_stream *s, const float *x, size_t n, float *out,
                           tf_error *err);
tf_status cuda_finite_check(tf_backend *be, tf_stream *s, const void *x, size_t n, tf_dtype dt,
                            int32_t *found, tf_error *err);
/* fused_ops.c */
tf_status cuda_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x, const void *residual,
                             void *in_out, void *y, const float *gamma, const float *beta,
                             float *mean, float *rstd, int rows, int cols, float eps, tf_dtype dt,
                             tf_error *err);
tf_status cuda_layernorm_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                             const float *gamma, const float *mean, const float *rstd, void *dx,
                             bool dx_accumulate, float *dgamma, float *dbeta, int rows, int cols,
                             tf_dtype dt, tf_error *err);
size_t cuda_attention_save_bytes(tf_backend *be, const tf_attention_desc *d);
tf_status cuda_attention_fwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                             const void *qkv, const int32_t *mask, void *out, void *save,
                             bool train, tf_error *err);
tf_status cuda_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                             const void *qkv, const int32_t *mask, const void *out,
                             const void *save, const void *dout, void *dqkv, tf_error *err);
tf_status cuda_attention_fwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                uint64_t row_first, uint64_t row_stride, const void *qkv,
                                const int32_t *mask, void *out, void *save, bool train,
                                tf_error *err);
tf_status cuda_attention_bwd_ex(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                uint64_t row_first, uint64_t row_stride, const void *qkv,
                                const int32_t *mask, const void *out, const void *save,
                                const void *dout, void *dqkv, tf_error *err);
tf_status cuda_attention_varlen_fwd(tf_backend *be, tf_stream *s,
                                    const tf_attention_varlen_desc *vd, const void *qkv,
                                    void *out, void *save, bool train, tf_error *err);
tf_status cuda_attention_varlen_bwd(tf_backend *be, tf_stream *s,
                                    const tf_attention_varlen_desc *vd, const void *qkv,
                                    const void *out, const void *save, const void *dout,
                                    void *dqkv, tf_error *err);
tf_status cuda_cross_entropy(tf_backend *be, tf_stream *s, const void *logits, int64_t ld_logits,
                             tf_dtype dt, int rows, int classes, const int32_t *labels,
                             int ignore_index, float *loss, void *dlogits, float grad_scale,
                             tf_error *err);
tf_status cuda_cross_entropy_ex(tf_backend *be, tf_stream *s, const tf_cross_entropy_desc *d,
                                tf_error *err);
/* elementwise_ops.c */
tf_status cuda_gelu_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                        tf_gelu_kind kind, tf_dtype dt, tf_error *err);
tf_status cuda_gelu_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *x, void *dx,
                        size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err);
tf_status cuda_tanh_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                        tf_dtype dt, tf_error *err);
tf_status cuda_tanh_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *y, void *dx,
                        size_t n, tf_dtype dt, tf_error *err);
tf_status cuda_dropout_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, uint8_t *keep,
                           size_t n, float p, uint64_t seed, uint64_t offset, tf_dtype dt,
                           tf_error *err);
tf_status cuda_dropout_bwd(tf_backend *be, tf_stream *s, const void *dy, const uint8_t *keep,
                           void *dx, size_t n, float p, tf_dtype dt, tf_error *err);
tf_status cuda_dropout_fwd_ex(tf_backend *be, tf_stream *s, const tf_dropout_desc *d,
                              tf_error *err);
tf_status cuda_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y, size_t n,
                   tf_dtype dt, tf_error *err);
tf_status cuda_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha, tf_dtype dt,
                     tf_error *err);
tf_status cuda_cast(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt, void *dst,
                    tf_dtype dst_dt, size_t n, tf_error *err);
/* embedding_ops.c */
tf_status cuda_embedding_fwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                             const float *table, int vocab, int dim, void *out, bool accumulate,
                             tf_dtype dt, tf_error *err);
tf_status cuda_embedding_bwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                             const void *dout, tf_dtype dt, float *dtable, int vocab, int dim,
                             tf_error *err);
/* optimizer_ops.c */
tf_status cuda_adamw(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                     float *v, const tf_adamw_segment *segs, size_t nsegs,
                     const tf_adamw_hyper *h, tf_error *err);
tf_status cuda_adamw_ex(tf_backend *be, tf_stream *s, float *params, const float *grads,
                        float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                        const tf_adamw_desc *d, tf_error *err);
tf_status cuda_adafactor(tf_backend *be, tf_stream *s, float *params, const float *grads, float *state,
                         const tf_adafactor_desc *d, tf_error *err);
#endif /* !__CUDACC__ */

#endif
