/* backend.c — backend-cuda: opening and closing a device, what it supports,
 * and the plugin descriptor with the vtable. The rest is one file per part:
 * errors.c, device.c (the current device per thread), config.c, probe.c,
 * memory.c, stream.c, gemm.c, and the glue of each op family
 * (reduce_ops.c, fused_ops.c, elementwise_ops.c, embedding_ops.c,
 * optimizer_ops.c) in front of the kernels of the .cu files.
 *
 * Threads: several backends may live in one process, on different devices
 * and threads (comm-dp-master). Every entry point makes the calling thread's
 * current device this backend's (cuda_bind, a thread-local compare in the
 * common case); a backend's objects carry no thread affinity otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"
#include "fused_kernels.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

/* configure's CUDA_ARCHS, for messages (local.mk passes it) */
#ifndef TFC_CUDA_ARCHS
#define TFC_CUDA_ARCHS "?"
#endif

static void describe(tf_backend *be)
{
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    (void)cudaGetLastError();
    char dv[16], rv[16], mem[32];
    cuda_version_text(dv, sizeof dv, drv);
    cuda_version_text(rv, sizeof rv, rt);
    snprintf(be->name, sizeof be->name, "%s (sm_%d%d, %d SMs, %s, device %d, CUDA %s, driver %s)",
             be->gpu, be->cc_major, be->cc_minor, be->sm_count,
             cuda_bytes(mem, sizeof mem, be->total_mem), be->device, rv, dv);
}

/* Peer access to every device this one can reach, so device-to-device
 * copies between the backends of one process go straight over NVLink/PCIe
 * (comm-dp-master). Already enabled (another backend did it) is fine. */
static void enable_peers(tf_backend *be, int count)
{
    for (int d = 0; d < count; d++) {
        if (d == be->device) continue;
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, be->device, d) != cudaSuccess || !can) {
            (void)cudaGetLastError();
            continue;
        }
        cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
            tf_debug("backend-cuda: device %d: peer access to device %d: %s", be->device, d,
                     cudaGetErrorString(e));
        (void)cudaGetLastError();
    }
}

static void destroy(tf_backend *be)
{
    if (be->def.s) {
        if (cudaStreamSynchronize(be->def.s) != cudaSuccess) (void)cudaGetLastError();
    }
    cuda_gemm_cache_free(be);
    if (be->adamw_dev) cuda_internal_free(be, be->adamw_dev, be->adamw_dev_bytes);
    free(be->adamw_segs);
    cuda_stream_release(be, &be->def);
    if (be->def.s) cudaStreamDestroy(be->def.s);
    if (be->lt) cublasLtDestroy(be->lt);
    if (be->bad_id) cudaFreeHost(be->bad_id);
    if (be->bad_id_claim) cuda_internal_free(be, be->bad_id_claim, sizeof(int32_t));
    (void)cudaGetLastError();
    cuda_blocks_free_table(be);
    pthread_mutex_destroy(&be->mem_lock);
    pthread_mutex_destroy(&be->gemm_lock);
    pthread_mutex_destroy(&be->adamw_lock);
    free(be);
}

static tf_status cuda_open(const tf_backend_open_args *args, tf_backend **out, tf_error *err)
{
    const char *op = "open";
    tf_status st;
    if ((st = cuda_need(err, op, "args", args)) || (st = cuda_need(err, op, "out", out))) return st;
    *out = NULL;
    /* the fields up to section (ABI 1.0); local_world_size (1.4) is not used:
     * a GPU backend's worker has its own device */
    size_t need = offsetof(tf_backend_open_args, section) + sizeof args->section;
    if (args->size < need)
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "open_args.size is %u, expected at least %zu (core built against an "
                         "older backend.h?)",
                         args->size, need);
    if (args->device < 0)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "device must be >= 0, got %d", args->device);
    cuda_config cfg;
    if ((st = cuda_read_config(args->section, &cfg, err))) return st;

    int count;
    char why[512];
    if (cuda_count_devices(&count, why, sizeof why) != TF_OK) {
        if (strncmp(why, "no CUDA device: ", 16) == 0)
            return tf_error_set(err, TF_ERR_PLUGIN,
                                "backend-cuda: no CUDA device visible (cudaGetDeviceCount: %s)",
                                why + 16);
        return tf_error_set(err, TF_ERR_PLUGIN, "backend-cuda: %s", why);
    }
    long long dev = (long long)args->device + cfg.device_offset;
    if (dev >= count) {
        if (cfg.device_offset)
            return cuda_fail(err, TF_ERR_RUNTIME, op,
                             "device %lld requested (local rank %d + device_offset %lld), %d "
                             "visible",
                             dev, args->device, cfg.device_offset, count);
        return cuda_fail(err, TF_ERR_RUNTIME, op, "device %lld requested, %d visible", dev, count);
    }

    tf_backend *be = calloc(1, sizeof *be);
    if (!be) return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory (%zu bytes)", sizeof *be);
    be->device = (int)dev;
    be->lt_ws_bytes = (size_t)cfg.lt_ws_mib << 20;
    be->lt_gelu = cfg.lt_gelu;
    be->def.be = be;
    be->def.is_default = true;
    pthread_mutex_init(&be->mem_lock, NULL);
    pthread_mutex_init(&be->gemm_lock, NULL);
    pthread_mutex_init(&be->adamw_lock, NULL);

    cudaError_t e = cuda_bind(be);
    if (e != cudaSuccess) {
        st = cuda_fail_rt(err, op, e, "cudaSetDevice(%d)", be->device);
        goto fail;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, be->device)) != cudaSuccess) {
        st = cuda_fail_rt(err, op, e, "cudaGetDeviceProperties(%d)", be->device);
        goto fail;
    }
    snprintf(be->gpu, sizeof be->gpu, "%s", prop.name);
    be->cc_major = prop.major;
    be->cc_minor = prop.minor;
    be->sm_count = prop.multiProcessorCount;
    be->total_mem = prop.totalGlobalMem;
    describe(be);
    if ((e = tfc_kernel_image_check()) != cudaSuccess) {
        st = cuda_fail(err, TF_ERR_PLUGIN, op,
                       "%s (sm_%d%d) cannot run this build's kernels (built for CUDA_ARCHS \"%s\"; "
                       "reconfigure with CUDA_ARCHS including %d%d): %s",
                       be->gpu, be->cc_major, be->cc_minor, TFC_CUDA_ARCHS, be->cc_major,
                       be->cc_minor, cudaGetErrorString(e));
        (void)cudaGetLastError();
        goto fail;
    }

    if ((e = cudaStreamCreateWithFlags(&be->def.s, cudaStreamNonBlocking)) != cudaSuccess) {
        be->def.s = NULL;
        st = cuda_fail_rt(err, op, e, "creating the default stream on %s", be->name);
        goto fail;
    }
    cublasStatus_t ls = cublasLtCreate(&be->lt);
    if (ls != CUBLAS_STATUS_SUCCESS) {
        be->lt = NULL;
        st = cuda_fail(err, TF_ERR_RUNTIME, op, "cublasLtCreate on %s: %s", be->name,
                       cublasLtGetStatusString(ls));
        goto fail;
    }
    if (!cuda_gemm_cache_new(be)) {
        st = cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory for the GEMM plan cache");
        goto fail;
    }
    void *ws;
    if ((st = cuda_lt_workspace(be, &be->def, &ws, err))) goto fail;
    /* the bad-id record: pinned, mapped, so kernels write it where the host reads it */
    void *rec = NULL;
    if ((e = cudaHostAlloc(&rec, sizeof(tfc_id_error), cudaHostAllocMapped | cudaHostAllocPortable)) !=
        cudaSuccess) {
        st = cuda_fail_rt(err, op, e, "cudaHostAlloc of the id-error record");
        goto fail;
    }
    be->bad_id = rec;
    memset(rec, 0, sizeof(tfc_id_error));
    be->bad_id_gen = 1;
    if ((st = cuda_internal_alloc(be, sizeof(int32_t), op, "the id-error claim",
                                  (void **)&be->bad_id_claim, err)))
        goto fail;
    /* on this backend's stream (the legacy stream 0 does not order with
     * non-blocking streams), waited for here so a kernel on any stream of
     * this backend sees the cleared claim */
    if ((e = cudaMemsetAsync(be->bad_id_claim, 0, sizeof(int32_t), be->def.s)) != cudaSuccess ||
        (e = cudaStreamSynchronize(be->def.s)) != cudaSuccess) {
        st = cuda_fail_rt(err, op, e, "clearing the id-error claim");
        goto fail;
    }
    void *rec_dev = NULL;
    if ((e = cudaHostGetDevicePointer(&rec_dev, rec, 0)) != cudaSuccess || rec_dev != rec) {
        /* with unified addressing (every 64-bit platform CUDA 13 runs on) they are equal */
        st = e != cudaSuccess ? cuda_fail_rt(err, op, e, "cudaHostGetDevicePointer")
                              : cuda_fail(err, TF_ERR_RUNTIME, op,
                                          "mapped host memory has a different device address "
                                          "(no unified addressing?)");
        goto fail;
    }
    enable_peers(be, count);
    tf_debug("backend-cuda: opened %s", be->name);
    *out = be;
    return TF_OK;
fail:
    destroy(be);
    return st;
}

static void cuda_close(tf_backend *be)
{
    if (!be) return;
    if (cuda_bind(be) != cudaSuccess) (void)cudaGetLastError();
    if (be->def.s && cudaStreamSynchronize(be->def.s) != cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        tf_warn("backend-cuda: close: the default stream ended with %s", cudaGetErrorString(e));
    }
    tf_error err = {0};
    if (cuda_take_id_error(be, &err)) tf_warn("%s (at close)", err.msg);
    pthread_mutex_lock(&be->mem_lock);
    size_t peak = be->peak, blocks = be->blocks_used;
    pthread_mutex_unlock(&be->mem_lock);
    /* blocks the caller never freed stay allocated (freeing them behind its
     * back could break a pointer still in use); say so */
    if (blocks)
        tf_warn("backend-cuda: closed with %zu block%s still allocated (peak %zu bytes)", blocks,
                blocks == 1 ? "" : "s", peak);
    destroy(be);
}

static bool cuda_supports(tf_backend *be, tf_matmul_mode mode, tf_dtype act)
{
    if (!be) return false;
    switch (mode) {
    case TF_MATMUL_FP32:
    case TF_MATMUL_TF32:
        if (act != TF_DTYPE_F32) return false;
        if (mode == TF_MATMUL_TF32 && be->cc_major < 8) return false;
        break;
    case TF_MATMUL_F16:
        if (act != TF_DTYPE_F16) return false;
        break;
    case TF_MATMUL_BF16:
        if (act != TF_DTYPE_BF16 || be->cc_major < 8) return false;
        break;
    default: return false;
    }
    /* the attention kernels decide per head_dim; BERT models use 32 or 64 */
    return tfc_attention_supported(act, 64) || tfc_attention_supported(act, 32);
}

static const char *cuda_device_name(tf_backend *be) { return be ? be->name : "backend-cuda (not open)"; }

static bool cuda_host_memory(tf_backend *be)
{
    (void)be;
    return false;
}

/* --- the descriptor ------------------------------------------------------------ */

static const tf_backend_vtable cuda_vtable = {
    .size = TF_VTABLE_SIZE(tf_backend_vtable),
    .check_config = cuda_check_config,
    .open = cuda_open,
    .close = cuda_close,
    .supports = cuda_supports,
    .mem_info = cuda_mem_info,
    .device_name = cuda_device_name,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memcpy = cuda_memcpy,
    .memset = cuda_memset,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_sync = cuda_event_sync,
    .gemm = cuda_gemm,
    .sum_rows = cuda_sum_rows,
    .layernorm_fwd = cuda_layernorm_fwd,
    .layernorm_bwd = cuda_layernorm_bwd,
    .attention_save_bytes = cuda_attention_save_bytes,
    .attention_fwd = cuda_attention_fwd,
    .attention_bwd = cuda_attention_bwd,
    .gelu_fwd = cuda_gelu_fwd,
    .gelu_bwd = cuda_gelu_bwd,
    .tanh_fwd = cuda_tanh_fwd,
    .tanh_bwd = cuda_tanh_bwd,
    .dropout_fwd = cuda_dropout_fwd,
    .dropout_bwd = cuda_dropout_bwd,
    .add = cuda_add,
    .scale = cuda_scale,
    .cast = cuda_cast,
    .embedding_fwd = cuda_embedding_fwd,
    .embedding_bwd = cuda_embedding_bwd,
    .cross_entropy = cuda_cross_entropy,
    .adamw = cuda_adamw,
    .sum_squares = cuda_sum_squares,
    .finite_check = cuda_finite_check,
    .host_memory = cuda_host_memory,
    .native_stream = cuda_native_stream,
    .device_count = cuda_device_count,
    .cross_entropy_ex = cuda_cross_entropy_ex,
    .adamw_ex = cuda_adamw_ex,
    .dropout_fwd_ex = cuda_dropout_fwd_ex,
    .attention_fwd_ex = cuda_attention_fwd_ex,
    .attention_bwd_ex = cuda_attention_bwd_ex,
    .adafactor = cuda_adafactor,
    .attention_varlen_fwd = cuda_attention_varlen_fwd,
    .attention_varlen_bwd = cuda_attention_varlen_bwd,
};

TF_PLUGIN_DEFINE(TF_KIND_BACKEND, CUDA_PLUGIN_NAME, CUDA_PLUGIN_VERSION,
                 "NVIDIA GPUs: cuBLASLt GEMMs, fused CUDA kernels, fp32/tf32/fp16/bf16",
                 cuda_probe, &cuda_vtable)
