/* test_simt.cc — the CUDA emulation's own checks of its runtime and kernel
 * language (tests/cuda-emu/README.md): warp shuffles and votes with their
 * widths and masks, __syncthreads as a barrier, atomics across blocks, the
 * mma.m16n8k16 fragment layouts against a row-major product, fp16/bf16
 * rounding, stream order and events, and that a kernel the emulator cannot
 * run (a deadlock, a shuffle from outside the mask) or an out-of-bounds
 * access fails, naming the kernel. Prints "ok"/"FAIL" per check; exits 1 on
 * a failure. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "emu_simt.h"

static int failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            printf("ok   ");                                                   \
        } else {                                                               \
            printf("FAIL ");                                                   \
            failures++;                                                        \
        }                                                                      \
        printf(__VA_ARGS__);                                                   \
        printf("\n");                                                          \
    } while (0)
#define TRY(call) CHECK((call) == cudaSuccess, "%s", #call)

template <class T> static T *dalloc(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess) abort();
    cudaMemset(p, 0, n * sizeof(T));
    return (T *)p;
}

/* --- kernels --------------------------------------------------------------------- */

__global__ void shuffles(int *out)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, *o = out + (w * 32 + lane) * 6;
    o[0] = __shfl_sync(0xffffffffu, lane * 10, 31 - lane);
    o[1] = __shfl_xor_sync(0xffffffffu, lane, 5);
    o[2] = __shfl_down_sync(0xffffffffu, lane, 3, 8); /* segments of 8 */
    o[3] = __shfl_up_sync(0xffffffffu, lane, 2);
    o[4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    o[5] = __any_sync(0xffffffffu, lane == 17) * 2 + __all_sync(0xffffffffu, lane < 32);
}

__global__ void half_warp(int *out)
{
    /* lanes 0-15 and 16-31 shuffle within their own half, with their own masks */
    int lane = threadIdx.x & 31;
    unsigned m = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    out[lane] = __shfl_xor_sync(m, lane, 1);
}

__global__ void reverse(const int *in, int *out, int n)
{
    __shared__ int s[256];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * n + t];
    __syncthreads();
    out[blockIdx.x * n + t] = s[n - 1 - t];
    int c = __syncthreads_count(t % 4 == 0);
    if (t == 0) out[gridDim.x * n + blockIdx.x] = c;
}

__global__ void counter(unsigned *c, float *f)
{
    atomicAdd(c, 1u);
    atomicMax(c + 1, blockIdx.x * blockDim.x + threadIdx.x);
    atomicAdd(f, 0.5f);
}

template <class T> __global__ void mma_kernel(const T *A, const T *B, const float *C, float *D)
{
    /* A [16][16] row-major, B [8][16] (n-major: B[n][k]), C, D [16][8] */
    int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    float c[4];
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i & 1), k = 2 * t + 8 * (i >> 1);
        memcpy(&a[i], &A[r * 16 + k], 4);
    }
    for (int i = 0; i < 2; i++) memcpy(&b[i], &B[g * 16 + 2 * t + 8 * i], 4);
    for (int i = 0; i < 4; i++) c[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
    TFCB_HOST_MMA(T, c, a, b);
    for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = c[i];
}

__global__ void deadlock(int *x)
{
    /* warp 0 and lane 63 wait at the barrier, lanes 32..62 at a shuffle
     * that needs lane 63 */
    if (threadIdx.x < 32 || threadIdx.x == 63)
        __syncthreads();
    else
        (void)__shfl_sync(0xffffffffu, 1, 0);
    x[0] = 1;
}

__global__ void outside_mask(int *x) { x[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1, 16); }

/* just past the end: the guard page here (64 ints end on a page), a redzone under ASan */
__global__ void overrun(int *x, int n) { x[n + threadIdx.x] = 1; }

__global__ void slow_write(int *x, int v)
{
    volatile int spin = 0;
    for (int i = 0; i < 200000; i++) spin = spin + 1;
    x[threadIdx.x] = v;
}

__global__ void add_one(int *x) { x[threadIdx.x] += 1; }

/* --- helpers ---------------------------------------------------------------------- */

/* Run f in a child process (a fresh runtime: CUDA refuses a forked child
 * the parent's context); return its wait status. */
template <class F> static int in_child(F f)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child reports through its exit status only */
        if (!freopen("/dev/null", "w", stdout)) _exit(99);
        _exit(f());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(void)
{
    /* --- failures first, in children, before this process uses the runtime --- */
    int st = in_child([] {
        int *x = dalloc<int>(64);
        TFCB_LAUNCH(deadlock, 1, 64, 0, nullptr)(x);
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaErrorLaunchFailure) return 1;
        if (!strstr(cudaGetErrorString(e), "deadlock") || !strstr(cudaGetErrorString(e), "kernel deadlock"))
            return 2;
        /* sticky: later work is refused */
        return cudaMemset(x, 0, 4) == cudaErrorLaunchFailure ? 0 : 3;
    });
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a deadlocked block fails the launch with cudaErrorLaunchFailure naming it, sticky (status %d)",
          WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    st = in_child([] {
        int *x = dalloc<int>(32);
        TFCB_LAUNCH(outside_mask, 1, 32, 0, nullptr)(x);
        cudaError_t e = cudaDeviceSynchronize();
        return e == cudaErrorLaunchFailure && strstr(cudaGetErrorString(e), "outside_mask") ? 0 : 1;
    });
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a shuffle from a lane outside the mask fails naming the kernel");
    st = in_child([] {
        int *x = dalloc<int>(64);
        TFCB_LAUNCH(overrun, 1, 32, 4096, nullptr)(x, 64);
        if (cudaGetLastError() != cudaErrorNotSupported) return 5; /* dynamic shared memory: refused */
        TFCB_LAUNCH(overrun, 1, 32, 0, nullptr)(x, 64);
        cudaDeviceSynchronize();
        return 0; /* not reached: the access faults (or ASan stops the process) */
    });
    CHECK(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 5),
          "a kernel writing past the end of its allocation is stopped (status %#x)", st);
    st = in_child([] {
        /* the child of a process that used the runtime cannot use it, as with CUDA */
        int *x = dalloc<int>(4);
        (void)x;
        pid_t p = fork();
        if (p == 0) _exit(cudaMalloc((void **)&x, 4) == cudaErrorInitializationError ? 0 : 1);
        int s2;
        waitpid(p, &s2, 0);
        return WIFEXITED(s2) ? WEXITSTATUS(s2) : 2;
    });
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a process forked after CUDA use gets cudaErrorInitializationError");

    /* --- devices ---------------------------------------------------------------- */
    int n = 0;
    TRY(cudaGetDeviceCount(&n));
    cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    CHECK(strstr(prop.name, "emulated") && prop.major == 9, "device 0 is \"%s\", sm_%d%d", prop.name,
          prop.major, prop.minor);
    CHECK(cudaSetDevice(n) == cudaErrorInvalidDevice && cudaGetLastError() == cudaErrorInvalidDevice &&
              cudaGetLastError() == cudaSuccess,
          "cudaSetDevice(%d) is cudaErrorInvalidDevice; cudaGetLastError reports it once", n);

    /* --- warp collectives -------------------------------------------------------- */
    {
        int *d = dalloc<int>(64 * 6);
        TFCB_LAUNCH(shuffles, 1, 64, 0, nullptr)(d);
        TRY(cudaGetLastError());
        std::vector<int> h(64 * 6);
        TRY(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
        bool ok = true;
        unsigned ballot = 0;
        for (int l = 0; l < 32; l++)
            if (l % 3 == 0) ballot |= 1u << l;
        for (int t = 0; t < 64; t++) {
            int l = t & 31, *o = &h[t * 6];
            int down = (l % 8) + 3 < 8 ? l + 3 : l, up = l >= 2 ? l - 2 : l;
            ok &= o[0] == (31 - l) * 10 && o[1] == (l ^ 5) && o[2] == down && o[3] == up &&
                  (unsigned)o[4] == ballot && o[5] == 3;
        }
        CHECK(ok, "__shfl_sync / _xor / _down (width 8) / _up, __ballot_sync, __any_sync, __all_sync");
        TFCB_LAUNCH(half_warp, 1, 32, 0, nullptr)(d);
        TRY(cudaMemcpy(h.data(), d, 32 * 4, cudaMemcpyDeviceToHost));
        ok = true;
        for (int l = 0; l < 32; l++) ok &= h[l] == (l ^ 1);
        CHECK(ok, "two half-warps shuffle under their own masks");
        cudaFree(d);
    }

    /* --- barrier, shared memory, atomics ------------------------------------------- */
    {
        const int N = 256, B = 3;
        int *in = dalloc<int>(N * B), *out = dalloc<int>(N * B + B);
        std::vector<int> h(N * B + B);
        for (int i = 0; i < N * B; i++) h[i] = i * 7;
        TRY(cudaMemcpy(in, h.data(), N * B * 4, cudaMemcpyHostToDevice));
        TFCB_LAUNCH(reverse, B, N, 0, nullptr)(in, out, N);
        TRY(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < N; t++) ok &= h[b * N + t] == (b * N + N - 1 - t) * 7;
            ok &= h[N * B + b] == N / 4;
        }
        CHECK(ok, "__shared__ + __syncthreads: every block reverses its row; __syncthreads_count");
        unsigned *c = dalloc<unsigned>(2);
        float *f = dalloc<float>(1);
        cudaStream_t s1, s2;
        TRY(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
        TRY(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        TFCB_LAUNCH(counter, 40, 128, 0, s1)(c, f);
        TFCB_LAUNCH(counter, 40, 128, 0, s2)(c, f);
        TRY(cudaDeviceSynchronize());
        unsigned hc[2];
        float hf;
        cudaMemcpy(hc, c, 8, cudaMemcpyDeviceToHost);
        cudaMemcpy(&hf, f, 4, cudaMemcpyDeviceToHost);
        CHECK(hc[0] == 2 * 40 * 128 && hc[1] == 40 * 128 - 1 && hf == 40 * 128,
              "atomics from two streams at once: %u adds, max %u, float sum %g", hc[0], hc[1], (double)hf);

        /* stream order and events: s2 waits for s1's slow write, then adds */
        int *x = dalloc<int>(32);
        cudaEvent_t ev;
        TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        TFCB_LAUNCH(slow_write, 1, 32, 0, s1)(x, 41);
        TRY(cudaEventRecord(ev, s1));
        TRY(cudaStreamWaitEvent(s2, ev, 0));
        TFCB_LAUNCH(add_one, 1, 32, 0, s2)(x);
        TRY(cudaStreamSynchronize(s2));
        int hx[32];
        cudaMemcpy(hx, x, sizeof hx, cudaMemcpyDeviceToHost);
        ok = true;
        for (int i = 0; i < 32; i++) ok &= hx[i] == 42;
        cudaError_t eq = cudaEventQuery(ev), sq = cudaStreamQuery(s1);
        CHECK(ok && eq == cudaSuccess && sq == cudaSuccess,
              "cudaStreamWaitEvent orders two streams' kernels (x[0] %d, event %s, stream %s)", hx[0],
              cudaGetErrorName(eq), cudaGetErrorName(sq));
        /* pageable destination: cudaMemcpyAsync returns with the data there */
        int v = 0;
        TRY(cudaMemcpyAsync(&v, x, 4, cudaMemcpyDeviceToHost, s1));
        CHECK(v == 42, "cudaMemcpyAsync to pageable memory has completed on return");
        CHECK(cudaMemcpyAsync(x, hx, 33 * 4, cudaMemcpyHostToDevice, s1) == cudaErrorInvalidValue,
              "a copy running past a device allocation is cudaErrorInvalidValue");
        (void)cudaGetLastError();
        TRY(cudaEventDestroy(ev));
        TRY(cudaStreamDestroy(s1));
        TRY(cudaStreamDestroy(s2));
        CHECK(cudaStreamSynchronize(s1) == cudaErrorInvalidResourceHandle, "a destroyed stream is refused");
        (void)cudaGetLastError();
        cudaFree(in);
        cudaFree(out);
        cudaFree(x);
    }

    /* --- mma.m16n8k16 ------------------------------------------------------------------ */
    for (int kind = 0; kind < 2; kind++) {
        std::vector<float> A(256), B(128), C(128), want(128);
        std::vector<uint16_t> Ah(256), Bh(128);
        for (int i = 0; i < 256; i++) A[i] = (float)((i * 37) % 23 - 11) / 8.0f;
        for (int i = 0; i < 128; i++) B[i] = (float)((i * 29) % 19 - 9) / 4.0f;
        for (int i = 0; i < 128; i++) C[i] = (float)(i % 7) - 3.0f;
        for (int i = 0; i < 256; i++) {
            if (kind == 0) { __half v = __float2half_rn(A[i]); memcpy(&Ah[i], &v, 2); }
            else { __nv_bfloat16 v = __float2bfloat16_rn(A[i]); memcpy(&Ah[i], &v, 2); }
        }
        for (int i = 0; i < 128; i++) {
            if (kind == 0) { __half v = __float2half_rn(B[i]); memcpy(&Bh[i], &v, 2); }
            else { __nv_bfloat16 v = __float2bfloat16_rn(B[i]); memcpy(&Bh[i], &v, 2); }
        }
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 8; c++) {
                float s = C[r * 8 + c]; /* the values are exact in 16 bits: exact sums */
                for (int k = 0; k < 16; k++) s += A[r * 16 + k] * B[c * 16 + k];
                want[r * 8 + c] = s;
            }
        uint16_t *dA = dalloc<uint16_t>(256), *dB = dalloc<uint16_t>(128);
        float *dC = dalloc<float>(128), *dD = dalloc<float>(128);
        cudaMemcpy(dA, Ah.data(), 512, cudaMemcpyHostToDevice);
        cudaMemcpy(dB, Bh.data(), 256, cudaMemcpyHostToDevice);
        cudaMemcpy(dC, C.data(), 512, cudaMemcpyHostToDevice);
        if (kind == 0)
            TFCB_LAUNCH(mma_kernel<__half>, 1, 32, 0, nullptr)((const __half *)dA, (const __half *)dB, dC, dD);
        else
            TFCB_LAUNCH(mma_kernel<__nv_bfloat16>, 1, 32, 0, nullptr)((const __nv_bfloat16 *)dA,
                                                                     (const __nv_bfloat16 *)dB, dC, dD);
        std::vector<float> D(128);
        TRY(cudaMemcpy(D.data(), dD, 512, cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < 128; i++) ok &= D[i] == want[i];
        CHECK(ok, "mma.m16n8k16.row.col.f32.%s: D = A B + C by the PTX fragment layouts",
              kind ? "bf16" : "f16");
        cudaFree(dA);
        cudaFree(dB);
        cudaFree(dC);
        cudaFree(dD);
    }

    /* --- 16-bit conversions: round to nearest even ----------------------------------------- */
    {
        bool ok = true;
        /* every f16 value converts back to itself; halfway points round to even */
        for (uint32_t h = 0; h < 0x10000u; h++) {
            if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue; /* NaN */
            __half v(static_cast<uint16_t>(h), 0);
            ok &= __float2half_rn(__half2float(v)).__x == h;
        }
        ok &= __float2half_rn(1.0f + 1.0f / 2048).__x == 0x3c00u;       /* tie: to even (down) */
        ok &= __float2half_rn(1.0f + 3.0f / 2048).__x == 0x3c02u;       /* tie: to even (up) */
        ok &= __float2half_rn(65520.0f).__x == 0x7c00u;                 /* rounds past max: inf */
        ok &= __float2half_rn(65519.0f).__x == 0x7bffu;
        ok &= __float2half_rn(bits_f(0x33000000u)).__x == 0x0000u;      /* 2^-25: tie to 0 */
        ok &= __float2half_rn(bits_f(0x33000001u)).__x == 0x0001u;      /* just above: min subnormal */
        ok &= __float2half_rn(bits_f(0x7fc00000u)).__x == 0x7fffu;      /* NaN: canonical */
        CHECK(ok, "float -> f16 round to nearest even: round trips, ties, overflow, subnormals, NaN");
        ok = true;
        ok &= __float2bfloat16_rn(bits_f(0x3f808000u)).__x == 0x3f80u;  /* tie: to even (down) */
        ok &= __float2bfloat16_rn(bits_f(0x3f818000u)).__x == 0x3f82u;  /* tie: to even (up) */
        ok &= __float2bfloat16_rn(bits_f(0x3f808001u)).__x == 0x3f81u;
        ok &= __float2bfloat16_rn(bits_f(0x7f7fffffu)).__x == 0x7f80u;  /* overflow: inf */
        ok &= __float2bfloat16_rn(bits_f(0xffc00001u)).__x == 0x7fffu;  /* NaN: canonical */
        ok &= __bfloat162float(__nv_bfloat16(0x4049u, 0)) == bits_f(0x40490000u);
        CHECK(ok, "float -> bf16 round to nearest even: ties, overflow, NaN");
    }

    printf("test_simt: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
