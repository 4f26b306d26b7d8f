/* emu_simt.h — the kernel-side language of the test-only CUDA emulation
 * (tests/cuda-emu/README.md): what a .cu file needs to compile as host C++
 * and run its kernels on the host. scripts/build-cuda-emu.sh force-includes
 * it (-include emu_simt.h) into every .cu file, compiled with g++ -x c++.
 *
 * Execution model (simt.cc): a launch is one task on its stream's host
 * thread. The blocks of the grid run one after another on that thread; the
 * threads of a block run as fibers on it, switched round-robin, so
 * __syncthreads is a real barrier and the warp collectives (shuffles, votes,
 * mma) exchange values among the 32 lanes of a warp with their masks
 * checked. `__shared__` variables are `static thread_local`: one copy per
 * stream thread, which is one copy per running block. Dynamic shared memory
 * (a launch's third argument) is refused at launch.
 *
 * What CUDA does differently, and where it matters: the math functions are
 * the C library's, correctly rounded or nearly so, while CUDA's __expf,
 * __fdividef and friends are approximations (a few ulp); our kernels use the
 * IEEE intrinsics (__fadd_rn, __fmul_rn, expf, ...) where the bits matter.
 * Compiled with -ffp-contract=off, like the kernels' own no-FMA rule. */
#ifndef TF_CUDA_EMU_SIMT_H
#define TF_CUDA_EMU_SIMT_H

#ifndef __cplusplus
#error "emu_simt.h is for the .cu files, compiled as C++"
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime.h"

/* --- qualifiers ------------------------------------------------------------ */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static thread_local
#define __constant__ static

/* --- indices: set by the scheduler for the fiber it runs ------------------- */
/* __thread rather than thread_local (no TLS wrapper call per read: these are
 * plain data) and initial-exec (a direct %fs-relative load instead of a
 * __tls_get_addr call; kernels read them in every loop): their 48 bytes come
 * from the static TLS glibc keeps for libraries loaded by dlopen(). */
#define EMU_INDEX_TLS __thread __attribute__((tls_model("initial-exec")))
extern EMU_INDEX_TLS uint3 threadIdx;
extern EMU_INDEX_TLS uint3 blockIdx;
extern EMU_INDEX_TLS dim3 blockDim;
extern EMU_INDEX_TLS dim3 gridDim;
static constexpr int warpSize = 32;

extern "C" {
/* simt.cc: the collective operations of the running block. */
void emu_syncthreads(void);
int emu_syncthreads_count(int pred); /* how many threads passed pred != 0 */
/* One warp-collective step: every lane of `mask` calls it with the same fn;
 * when the last arrives, fn(mask, in, out) runs once with every lane's in
 * and out pointers (indexed by lane; NULL outside the mask), then all
 * return. `what` names the operation in an error. */
typedef void (*emu_warp_fn)(unsigned mask, const void *const in[32], void *const out[32]);
void emu_warp_collective(unsigned mask, emu_warp_fn fn, const void *in, void *out,
                         const char *what);
/* Fail the running kernel: the launch ends with cudaErrorLaunchFailure and
 * the message names the kernel. Does not return. */
[[noreturn]] void emu_kernel_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned emu_lane_id(void);
/* runtime.cc: enqueue a kernel launch (see TFCB_LAUNCH below). */
cudaError_t emu_launch_kernel(const char *kernel, const char *site, const char *func,
                              dim3 grid, dim3 block,
                              size_t smem, cudaStream_t s, void (*thread_fn)(void *), void *ctx,
                              void (*ctx_free)(void *));
}

static __forceinline__ void __syncthreads(void) { emu_syncthreads(); }
static __forceinline__ int __syncthreads_or(int p) { return emu_syncthreads_count(p) != 0; }
static __forceinline__ int __syncthreads_and(int p)
{
    return emu_syncthreads_count(p) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
static __forceinline__ int __syncthreads_count(int p) { return emu_syncthreads_count(p); }

/* --- warp shuffles and votes ---------------------------------------------- */
namespace tf_emu {
enum shfl_mode { SHFL_IDX, SHFL_XOR, SHFL_DOWN, SHFL_UP };
struct shfl_in {
    uint64_t v[2];
    int arg, width, mode;
};
/* Lane i reads lane src; a source outside i's segment of `width` lanes
 * (xor/down/up) gives i its own value, as CUDA documents. A source lane
 * outside the mask has no defined value in CUDA: here it fails the kernel. */
inline void shfl_fn(unsigned mask, const void *const in[32], void *const out[32])
{
    for (int i = 0; i < 32; i++) {
        if (!(mask >> i & 1u)) continue;
        const shfl_in *me = (const shfl_in *)in[i];
        int w = me->width, base = i & ~(w - 1), src;
        switch (me->mode) {
        case SHFL_IDX: src = base + (me->arg & (w - 1)); break;
        case SHFL_XOR: src = i ^ me->arg; if (src < base || src >= base + w) src = i; break;
        case SHFL_DOWN: src = (i - base) + me->arg < w ? i + me->arg : i; break;
        default: src = (i - base) >= me->arg ? i - me->arg : i; break;
        }
        if (src < 0 || src > 31 || !(mask >> src & 1u))
            emu_kernel_fail("lane %d shuffles from lane %d, which is not in the mask %#x", i, src,
                            mask);
        memcpy(out[i], ((const shfl_in *)in[src])->v, sizeof me->v);
    }
}
template <class T> inline T shfl(unsigned mask, T var, int arg, int width, int mode, const char *what)
{
    static_assert(sizeof(T) <= 16 && std::is_trivially_copyable<T>::value, "a shuffled value");
    if (width < 1 || width > 32 || (width & (width - 1)))
        emu_kernel_fail("%s with width %d (not a power of 2 in 1..32)", what, width);
    shfl_in in{};
    memcpy(in.v, &var, sizeof var);
    in.arg = arg;
    in.width = width;
    in.mode = mode;
    uint64_t out[2];
    emu_warp_collective(mask, shfl_fn, &in, out, what);
    T r;
    memcpy(&r, out, sizeof r);
    return r;
}
inline void ballot_fn(unsigned mask, const void *const in[32], void *const out[32])
{
    unsigned b = 0;
    for (int i = 0; i < 32; i++)
        if ((mask >> i & 1u) && *(const int *)in[i]) b |= 1u << i;
    for (int i = 0; i < 32; i++)
        if (mask >> i & 1u) *(unsigned *)out[i] = b;
}
inline unsigned ballot(unsigned mask, int pred, const char *what)
{
    int p = pred != 0;
    unsigned r;
    emu_warp_collective(mask, ballot_fn, &p, &r, what);
    return r;
}
} // namespace tf_emu

template <class T> static inline T __shfl_sync(unsigned m, T v, int src, int width = 32)
{
    return tf_emu::shfl(m, v, src, width, tf_emu::SHFL_IDX, "__shfl_sync");
}
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int lanemask, int width = 32)
{
    return tf_emu::shfl(m, v, lanemask, width, tf_emu::SHFL_XOR, "__shfl_xor_sync");
}
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int width = 32)
{
    return tf_emu::shfl(m, v, (int)d, width, tf_emu::SHFL_DOWN, "__shfl_down_sync");
}
template <class T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int width = 32)
{
    return tf_emu::shfl(m, v, (int)d, width, tf_emu::SHFL_UP, "__shfl_up_sync");
}
static inline unsigned __ballot_sync(unsigned m, int p) { return tf_emu::ballot(m, p, "__ballot_sync"); }
static inline int __any_sync(unsigned m, int p) { return tf_emu::ballot(m, p, "__any_sync") != 0; }
static inline int __all_sync(unsigned m, int p)
{
    return tf_emu::ballot(m, p, "__all_sync") == m;
}
static inline void __syncwarp(unsigned m = 0xffffffffu) { (void)tf_emu::ballot(m, 0, "__syncwarp"); }

/* --- mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 -------
 * A warp-collective product D = A B + C, A 16x16 (row), B 16x8 (col), C and D
 * 16x8 f32, each spread over the 32 lanes' registers by the PTX ISA's
 * fragment layouts ("Matrix Fragments for mma.m16n8k16", floating point).
 * With groupID g = lane >> 2 and t = lane % 4:
 *   A: a[i] holds two 16-bit elements (lo half first); row = g + 8 * (i & 1),
 *      col = 2t + (k & 1) + 8 * (i >> 1) for k = 0, 1 (the element within);
 *   B: b[i] holds two; row (k index) = 2t + (k & 1) + 8 * i, col = g;
 *   C, D: c[i]: row = g + 8 * (i >> 1), col = 2t + (i & 1).
 * Products are accumulated in f32 in k order (the hardware's internal order
 * and rounding are not documented; results may differ from a GPU's in the
 * last bits). */
namespace tf_emu {
template <class T> inline float mma_elem(uint32_t reg, int k)
{
    uint16_t bits = (uint16_t)(k ? reg >> 16 : reg & 0xffffu);
    T v;
    memcpy(&v, &bits, 2);
    if constexpr (std::is_same<T, __half>::value)
        return __half2float(v);
    else
        return __bfloat162float(v);
}
struct mma_in {
    uint32_t a[4], b[2];
    float c[4];
};
template <class T> void mma_fn(unsigned mask, const void *const in[32], void *const out[32])
{
    if (mask != 0xffffffffu) emu_kernel_fail("mma.sync with mask %#x: all 32 lanes must take part", mask);
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const mma_in *p = (const mma_in *)in[lane];
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 2; k++)
                A[g + 8 * (i & 1)][2 * t + k + 8 * (i >> 1)] = mma_elem<T>(p->a[i], k);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) B[2 * t + k + 8 * i][g] = mma_elem<T>(p->b[i], k);
        for (int i = 0; i < 4; i++) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = p->c[i];
    }
    for (int lane = 0; lane < 32; lane++) {
        float *d = (float *)out[lane];
        int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++) {
            int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
            float acc = C[r][c];
            for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][c];
            d[i] = acc;
        }
    }
}
} // namespace tf_emu
/* attention.cu's hook: c (float[4]) += A(a: uint32_t[4]) B(b: uint32_t[2]). */
#define TFCB_HOST_MMA(T, c, a, b)                                                             \
    do {                                                                                      \
        tf_emu::mma_in in_;                                                                   \
        memcpy(in_.a, (a), sizeof in_.a);                                                     \
        memcpy(in_.b, (b), sizeof in_.b);                                                     \
        memcpy(in_.c, (c), sizeof in_.c);                                                     \
        emu_warp_collective(0xffffffffu, tf_emu::mma_fn<T>, &in_, (c), "mma.sync.m16n8k16"); \
    } while (0)

/* --- atomics: real atomic operations (blocks of kernels on different streams
 * run on different host threads) ------------------------------------------ */
template <class T> static inline T atomicAdd(T *p, T v)
{
    if constexpr (std::is_floating_point<T>::value) {
        T old, nv;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        do
            nv = old + v;
        while (!__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return old;
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    }
}
template <class T> static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T> static inline T atomicMax(T *p, T v)
{
    static_assert(std::is_integral<T>::value, "atomicMax on integers");
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class T> static inline T atomicMin(T *p, T v)
{
    static_assert(std::is_integral<T>::value, "atomicMin on integers");
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class T> static inline T atomicCAS(T *p, T cmp, T v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* --- arithmetic intrinsics ------------------------------------------------ */
/* IEEE, round to nearest: exactly CUDA's. */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __double2float_rn(double d) { return (float)d; }
/* CUDA's fast approximations; here exact. (__expf, __logf and __tanhf are
 * glibc's own names for expf, logf and tanhf, declared by math.h.) */
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }

/* bit reinterpretation */
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }

/* integer intrinsics */
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline int __mulhi(int a, int b) { return (int)(((int64_t)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned __brev(unsigned x)
{
    x = (x >> 1 & 0x55555555u) | (x & 0x55555555u) << 1;
    x = (x >> 2 & 0x33333333u) | (x & 0x33333333u) << 2;
    x = (x >> 4 & 0x0f0f0f0fu) | (x & 0x0f0f0f0fu) << 4;
    return __builtin_bswap32(x);
}
template <class T> static inline T __ldg(const T *p) { return *p; }

/* CUDA's device-side min/max overloads */
#define TF_EMU_MINMAX(T)                                              \
    static inline T min(T a, T b) { return a < b ? a : b; }           \
    static inline T max(T a, T b) { return a > b ? a : b; }
TF_EMU_MINMAX(int)
TF_EMU_MINMAX(unsigned)
TF_EMU_MINMAX(long long)
TF_EMU_MINMAX(unsigned long long)
TF_EMU_MINMAX(long)
TF_EMU_MINMAX(unsigned long)
#undef TF_EMU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

/* --- kernel launches --------------------------------------------------------
 * TFCB_LAUNCH(kernel, grid, block, smem, stream)(args...): the arguments are
 * converted to the kernel's parameter types and copied (as a launch copies
 * them to the device), and a task that runs the grid is enqueued on the
 * stream. Every thread gets its own copy of the parameters. */
namespace tf_emu {
template <class... P> struct kernel_call {
    void (*k)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    static void run(void *ctx)
    {
        kernel_call *c = (kernel_call *)ctx;
        std::apply(c->k, c->args);
    }
    static void destroy(void *ctx) { delete (kernel_call *)ctx; }
};
template <class... P> struct launcher {
    void (*k)(P...);
    const char *name, *site, *func;
    dim3 grid, block;
    size_t smem;
    cudaStream_t s;
    template <class... A> void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "a kernel launch with the wrong argument count");
        auto *c = new kernel_call<P...>{k, std::tuple<typename std::decay<P>::type...>(
                                               static_cast<P>(std::forward<A>(a))...)};
        (void)emu_launch_kernel(name, site, func, grid, block, smem, s, kernel_call<P...>::run, c,
                                kernel_call<P...>::destroy);
    }
};
template <class... P>
inline launcher<P...> make_launcher(void (*k)(P...), const char *name, const char *site,
                                    const char *func, dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t s)
{
    return launcher<P...>{k, name, site, func, grid, block, smem, s};
}
} // namespace tf_emu

#define TF_EMU_STR2(x) #x
#define TF_EMU_STR(x) TF_EMU_STR2(x)
#define TFCB_LAUNCH(kernel, grid, block, smem, stream)                                          \
    tf_emu::make_launcher(kernel, #kernel,                                                      \
                          __FILE__ ":" TF_EMU_STR(__LINE__), __PRETTY_FUNCTION__, dim3(grid),  \
                          dim3(block), (smem), (stream))

#endif
