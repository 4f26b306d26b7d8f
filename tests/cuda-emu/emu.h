/* emu.h — the internal contract between the parts of the test-only CUDA
 * emulation (tests/cuda-emu/): the runtime stand-in (streams, events, memory,
 * kernel launches), the cuBLASLt stand-in and the NCCL stand-in.
 *
 * The emulation exists so that CI can execute backend-cuda, comm-nccl and the
 * 16-bit paths on a machine without a GPU. It is linked only into the
 * emulated plugins that scripts/build-cuda-emu.sh builds; it never ships,
 * never installs and never backs a speed claim.
 *
 * Model: an emulated device is host memory plus a set of streams. Every
 * stream owns one host thread that runs the stream's queue in order; work
 * enqueued here (kernels, async copies and memsets, event records, waits,
 * library calls such as cublasLtMatmul or ncclAllReduce) runs on that thread,
 * never on the caller's. A missing cudaStreamWaitEvent between two streams
 * is therefore a real data race (ThreadSanitizer sees it) or a wrong result,
 * as it would be on a GPU. The legacy default stream (NULL) is a stream of
 * the current device like any other, with its own thread. */
#ifndef TF_CUDA_EMU_H
#define TF_CUDA_EMU_H

#include <stddef.h>

#include "cuda_runtime.h" /* the stand-in's, from tests/cuda-emu/include */

#ifdef __cplusplus
extern "C" {
#endif

/* One unit of queued work: fn(arg) runs on the stream's thread after
 * everything enqueued on that stream before it. If fn returns an error other
 * than cudaSuccess, that error becomes the device's sticky asynchronous error:
 * it is reported by the next synchronising call (cudaStreamSynchronize,
 * cudaEventSynchronize, cudaDeviceSynchronize) and by cudaGetLastError, and
 * the stream's later work is skipped. */
typedef cudaError_t (*emu_task_fn)(void *arg);

/* Enqueue fn(arg) on stream s (NULL: the current device's default stream).
 * arg_free, if not NULL, is called with arg after fn has run (or when the
 * task is skipped), on the stream's thread. Returns cudaErrorInvalidValue for
 * a destroyed or foreign stream handle, else cudaSuccess. Never blocks on the
 * queue's progress. */
cudaError_t emu_enqueue(cudaStream_t s, emu_task_fn fn, void *arg, void (*arg_free)(void *));

/* The device a stream belongs to (0-based), or -1 for an invalid handle. */
int emu_stream_device(cudaStream_t s);

/* The number of emulated devices: TFCORE_EMU_DEVICES (default 1, 1..16). */
int emu_device_count(void);

/* True when p lies inside a live device allocation (cudaMalloc) of device
 * `dev` (-1: of any device) and [p, p+bytes) does not run past its end. The
 * stand-ins use it to reject host pointers and out-of-bounds spans with
 * cudaErrorInvalidValue, as the real libraries would fault. */
int emu_is_device_span(const void *p, size_t bytes, int dev);

/* True when p lies inside a live pinned host allocation (cudaHostAlloc). */
int emu_is_pinned_span(const void *p, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif
