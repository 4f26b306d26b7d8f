/* cuda_runtime.h — the test-only CUDA emulation's stand-in for the CUDA
 * runtime API (tests/cuda-emu/README.md). Declares exactly the part of the
 * runtime that backend-cuda and comm-nccl use, with the real API's names,
 * error numbers and semantics; runtime.cc implements it on the host. Never
 * seen by a real build: scripts/build-cuda-emu.sh puts this folder on the
 * include path ahead of anything CUDA. */
#ifndef TF_CUDA_EMU_CUDA_RUNTIME_H
#define TF_CUDA_EMU_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "library_types.h"

#define CUDART_VERSION 13000
#define CUDA_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

/* The real runtime's numbering (driver_types.h), for the errors we raise. */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidKernelImage = 200,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorIllegalInstruction = 715,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04

/* The fields of cudaDeviceProp our code reads (the real struct has more). */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major;
    int minor;
    int multiProcessorCount;
    int canMapHostMemory;
    int unifiedAddressing;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
};

struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
};

/* --- vector types (vector_types.h) ---------------------------------------- */
#define TF_EMU_VEC2(T, N) typedef struct N##2 { T x, y; } N##2;
#define TF_EMU_VEC4(T, N, A) typedef struct __attribute__((aligned(A))) N##4 { T x, y, z, w; } N##4;
TF_EMU_VEC2(float, float) TF_EMU_VEC2(int, int) TF_EMU_VEC2(unsigned int, uint)
TF_EMU_VEC4(float, float, 16) TF_EMU_VEC4(int, int, 16) TF_EMU_VEC4(unsigned int, uint, 16)
#undef TF_EMU_VEC2
#undef TF_EMU_VEC4
typedef struct uint3 { unsigned int x, y, z; } uint3;
/* vector_functions.h */
static inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w)
{
    uint4 v = {x, y, z, w};
    return v;
}
static inline float4 make_float4(float x, float y, float z, float w)
{
    float4 v = {x, y, z, w};
    return v;
}
static inline float2 make_float2(float x, float y)
{
    float2 v = {x, y};
    return v;
}
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z)
{
    uint3 v = {x, y, z};
    return v;
}
#ifdef __cplusplus
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
#else
typedef struct dim3 { unsigned int x, y, z; } dim3;
#endif

/* --- errors --------------------------------------------------------------- */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);

/* --- devices -------------------------------------------------------------- */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func);

/* --- memory --------------------------------------------------------------- */
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);

/* --- streams and events --------------------------------------------------- */
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

#ifdef __cplusplus
} /* extern "C" */

/* The runtime's C++ overloads (cuda_runtime.h): typed pointers. */
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
    return cudaMalloc((void **)p, bytes);
}
template <class T> static inline cudaError_t cudaHostAlloc(T **p, size_t bytes, unsigned int flags)
{
    return cudaHostAlloc((void **)p, bytes, flags);
}
template <class T> static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, T *f)
{
    return cudaFuncGetAttributes(a, (const void *)f);
}
#endif

#endif
