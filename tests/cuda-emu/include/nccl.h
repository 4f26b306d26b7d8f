/* nccl.h — the test-only NCCL stand-in of the CUDA emulation (tests/cuda-emu/).
 *
 * The subset of NCCL's API that plugins/comm-nccl calls, with NCCL's
 * documented names, values and semantics (blocking communicators). The ranks
 * are processes (or threads) of one machine; they meet and exchange data
 * through a POSIX shared-memory segment that the ncclUniqueId names. Every
 * collective runs on the given CUDA stream's host thread (emu_enqueue), in
 * that stream's order. See tests/cuda-emu/README.md, "NCCL stand-in".
 *
 * Not provided (comm-nccl does not call them; a use fails to compile):
 * non-blocking communicators (ncclConfig_t), split, user-defined reduction
 * ops. Groups hold point-to-point calls only (a collective inside a group is
 * ncclInvalidUsage). */
#ifndef TF_CUDA_EMU_NCCL_H
#define TF_CUDA_EMU_NCCL_H

#include <stddef.h>

#include "cuda_runtime.h" /* the stand-in's: cudaStream_t */

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_SUFFIX "emulated"
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef struct ncclComm *ncclComm_t;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclNumTypes = 10
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

ncclResult_t ncclGetVersion(int *version);
/* An id naming a new rendezvous (a shared-memory segment made at init). */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
/* Blocks until all nranks ranks joined with the same id; a rank missing
 * after TFCORE_EMU_NCCL_INIT_TIMEOUT_S seconds (default 120), a dead peer or
 * a disagreement on nranks is an error (real NCCL would wait forever). */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
/* sendbuff[nranks * recvcount] -> recvbuff[recvcount]: block r of every
 * rank's input reduced into rank r (in place: recvbuff = sendbuff + rank * recvcount). */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/* sendbuff[sendcount] of rank r -> block r of every rank's recvbuff[nranks * sendcount]
 * (in place: sendbuff = recvbuff + rank * sendcount). */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

/* Point-to-point: blocking for the stream until the peer's matching call (same
 * count and type) ran; the k-th send to a peer meets its k-th receive from us.
 * Calls between ncclGroupStart and ncclGroupEnd (of the calling thread, nested
 * groups count) progress together; ncclGroupEnd queues them. */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif
