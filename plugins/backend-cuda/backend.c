/* backend.c — backend-cuda: the plugin descriptor and probe, the vtable,
 * opening and closing a device, and the glue of every op: argument checks
 * (the rules of backend-cpu), the stream, the workspace, then the kernel
 * launcher (elementwise.cu, reduce.cu, embedding.cu, optimizer.cu, and
 * engineer B's layernorm.cu, attention.cu, cross_entropy.cu through
 * cuda_kernels_b.h), whose failure becomes one line naming the op and its
 * shape.
 *
 * Config ("backend" section), keys this plugin reads:
 *   device_offset          int >= 0, default 0: added to the worker's local
 *                          rank to pick the device (e.g. 2 to use GPUs 2, 3)
 *   cublaslt_workspace_mib int in [0, 1024], default 32: cuBLASLt workspace
 *                          per stream that runs GEMMs
 *   gelu_epilogue          "kernel" (default) or "cublaslt": see gemm.c
 *
 * Threads: several backends may live in one process, on different devices
 * and threads (comm-dp-master). Every entry point makes the calling thread's
 * current device this backend's (cuda_bind, a thread-local compare in the
 * common case); a backend's objects carry no thread affinity otherwise.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "cuda_kernels_b.h"
#include "tfcore/config.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

#define CUDA_MAX_DEVICE_OFFSET 1023

/* configure's CUDA_ARCHS, for messages (local.mk passes it) */
#ifndef TFC_CUDA_ARCHS
#define TFC_CUDA_ARCHS "?"
#endif

/* --- errors --------------------------------------------------------------- */

tf_status cuda_fail(tf_error *err, tf_status code, const char *op, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tf_error_set(err, code, "backend-cuda: %s: %s", op, what);
    return code;
}

tf_status cuda_fail_rt(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* clear a non-sticky error so the next call does not see it again */
    (void)cudaGetLastError();
    tf_error_set(err, TF_ERR_RUNTIME, "backend-cuda: %s (%s): %s: %s", op, what,
                 cudaGetErrorName(e), cudaGetErrorString(e));
    return TF_ERR_RUNTIME;
}

tf_status cuda_need(tf_error *err, const char *op, const char *name, const void *p)
{
    return p ? TF_OK : cuda_fail(err, TF_ERR_RUNTIME, op, "%s is NULL", name);
}

tf_status cuda_need_min(tf_error *err, const char *op, const char *name, long long v,
                        long long lo)
{
    if (v >= lo) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "%s must be >= %lld, got %lld", name, lo, v);
}

tf_status cuda_need_act(tf_error *err, const char *op, const char *name, tf_dtype dt)
{
    if (dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16) return TF_OK;
    const char *dn = tf_dtype_name(dt);
    if (dn)
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "%s dtype %s is not supported (backend-cuda computes in F32, F16, BF16)",
                         name, dn);
    return cuda_fail(err, TF_ERR_PLUGIN, op, "%s dtype %d is not a tf_dtype", name, (int)dt);
}

/* A launcher's result: OK, or one line with the op and its shape. */
static tf_status launched(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tf_status launched(tf_error *err, const char *op, cudaError_t e, const char *fmt, ...)
{
    if (e == cudaSuccess) return TF_OK;
    char shape[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(shape, sizeof shape, fmt, ap);
    va_end(ap);
    return cuda_fail_rt(err, op, e, "%s", shape);
}

/* --- the current device, per thread ---------------------------------------- */

static _Thread_local int tl_device = -1;

cudaError_t cuda_bind(tf_backend *be)
{
    if (tl_device == be->device) return cudaSuccess;
    cudaError_t e = cudaSetDevice(be->device);
    if (e == cudaSuccess) tl_device = be->device;
    return e;
}

void cuda_forget_device(void) { tl_device = -1; }

tf_status cuda_enter(tf_backend *be, tf_stream *s, const char *op, tf_stream **out,
                     tf_error *err)
{
    /* every failure returns a literal status, so *out is set whenever TF_OK is */
    if (!be) {
        cuda_fail(err, TF_ERR_RUNTIME, op, "backend is NULL");
        return TF_ERR_RUNTIME;
    }
    if (s && s->be != be) {
        cuda_fail(err, TF_ERR_RUNTIME, op, "the stream belongs to another backend");
        return TF_ERR_RUNTIME;
    }
    cudaError_t e = cuda_bind(be);
    if (e != cudaSuccess) {
        cuda_fail_rt(err, op, e, "cudaSetDevice(%d)", be->device);
        return TF_ERR_RUNTIME;
    }
    *out = s ? s : &be->def;
    return TF_OK;
}

/* --- config ----------------------------------------------------------------- */

typedef struct cuda_config {
    long long device_offset;
    long long lt_ws_mib;
    bool lt_gelu;
} cuda_config;

static tf_status read_config(tf_section *section, cuda_config *c, tf_error *err)
{
    static const char *const gelu_choices[] = {"kernel", "cublaslt", NULL};
    c->device_offset = 0;
    c->lt_ws_mib = CUDA_LT_WORKSPACE_MIB_DEFAULT;
    c->lt_gelu = false;
    if (!section) return TF_OK;
    const char *gelu = NULL;
    tf_status st;
    if ((st = tf_cfg_int(section, "device_offset", 0, 0, CUDA_MAX_DEVICE_OFFSET,
                         &c->device_offset, err)) ||
        (st = tf_cfg_int(section, "cublaslt_workspace_mib", CUDA_LT_WORKSPACE_MIB_DEFAULT, 0, 1024,
                         &c->lt_ws_mib, err)) ||
        (st = tf_cfg_choice(section, "gelu_epilogue", "kernel", gelu_choices, &gelu, err)))
        return st;
    c->lt_gelu = gelu && strcmp(gelu, "cublaslt") == 0;
    return TF_OK;
}

static tf_status cuda_check_config(tf_section *section, tf_error *err)
{
    cuda_config c;
    return read_config(section, &c, err);
}

/* --- can CUDA run here? -------------------------------------------------------- */

/* "13.0" from 13000 */
static void version_text(char *buf, size_t n, int v)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* 0 when a device is usable, else why in buf (and the status to return). */
static tf_status device_count(int *count, char *why, size_t n)
{
    *count = 0;
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    (void)cudaGetLastError();
    cudaError_t e = cudaGetDeviceCount(count);
    (void)cudaGetLastError();
    char dv[16], rv[16];
    version_text(dv, sizeof dv, drv);
    version_text(rv, sizeof rv, rt);
    /* a driver is there but older than the runtime this plugin was linked with
     * (within one major version, CUDA's minor-version compatibility applies) */
    if (drv > 0 && rt > 0 &&
        (drv / 1000 < rt / 1000 || e == cudaErrorInsufficientDriver)) {
        snprintf(why, n, "CUDA driver supports %s, this build needs %s: update the NVIDIA driver",
                 dv, rv);
        *count = 0;
        return TF_ERR_PLUGIN;
    }
    if (e != cudaSuccess) {
        snprintf(why, n, "no CUDA device: %s", cudaGetErrorString(e));
        *count = 0;
        return TF_ERR_PLUGIN;
    }
    if (*count < 1) {
        snprintf(why, n, "no CUDA device: cudaGetDeviceCount found none");
        return TF_ERR_PLUGIN;
    }
    return TF_OK;
}

/* The probe asks CUDA in a child process. Asking in this process would
 * initialize the CUDA driver here, and the core may fork its worker ranks
 * after scanning the plugins (comm-nccl: one process per GPU): a child forked
 * after the parent initialized CUDA cannot use CUDA at all. The child writes
 * '1' (usable) or '0' and the reason down a pipe. If no child can be made,
 * the question is asked here after all. */
static int probe_in_child(char *buf, size_t n)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        char msg[512];
        int count;
        msg[1] = '\0';
        msg[0] = device_count(&count, msg + 1, sizeof msg - 1) == TF_OK ? '1' : '0';
        size_t len = strlen(msg), off = 0;
        while (off < len) {
            ssize_t w = write(fd[1], msg + off, len - off);
            if (w <= 0 && errno != EINTR) break;
            if (w > 0) off += (size_t)w;
        }
        _exit(0); /* no atexit handlers, no stdio flush: this is the parent's copy */
    }
    close(fd[1]);
    char msg[512];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd[0], msg + got, sizeof msg - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof msg - 1) break;
    }
    msg[got] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got == 0 || (msg[0] != '0' && msg[0] != '1')) {
        if (WIFSIGNALED(status))
            snprintf(buf, n, "no CUDA device: the probe process was killed by signal %d",
                     WTERMSIG(status));
        else
            snprintf(buf, n, "no CUDA device: the probe process gave no answer");
        return 0;
    }
    snprintf(buf, n, "%s", msg + 1);
    return msg[0] == '1';
}

static int cuda_probe(char *why, size_t n)
{
    char buf[512] = "";
    int ok = probe_in_child(buf, sizeof buf);
    if (ok < 0) {
        int count;
        ok = device_count(&count, buf, sizeof buf) == TF_OK;
    }
    if (!ok && why && n) snprintf(why, n, "%s", buf);
    return ok;
}

/* The vtable's device_count: GPUs this process sees (CUDA_VISIBLE_DEVICES
 * applies), 0 with the reason when none. Asked in this process: the core's
 * launcher re-executes its worker processes, so a CUDA context here is never
 * inherited by a fork. */
static int cuda_device_count(char *why, size_t n)
{
    int count = 0;
    char buf[512] = "";
    if (device_count(&count, buf, sizeof buf) != TF_OK) count = 0;
    if (count == 0 && why && n) snprintf(why, n, "%s", buf);
    return count;
}

/* --- open / close --------------------------------------------------------------- */

static void describe(tf_backend *be)
{
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    (void)cudaGetLastError();
    char dv[16], rv[16], mem[32];
    version_text(dv, sizeof dv, drv);
    version_text(rv, sizeof rv, rt);
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
    if (args->size < sizeof(tf_backend_open_args))
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "open_args.size is %u, expected at least %zu (core built against an "
                         "older backend.h?)",
                         args->size, sizeof(tf_backend_open_args));
    if (args->device < 0)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "device must be >= 0, got %d", args->device);
    cuda_config cfg;
    if ((st = read_config(args->section, &cfg, err))) return st;

    int count;
    char why[512];
    if (device_count(&count, why, sizeof why) != TF_OK) {
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
    if ((e = cudaMemset(be->bad_id_claim, 0, sizeof(int32_t))) != cudaSuccess) {
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
    /* B's attention kernels decide per head_dim; BERT models use 32 or 64 */
    return tfc_attention_supported(act, 64) || tfc_attention_supported(act, 32);
}

static const char *cuda_device_name(tf_backend *be) { return be ? be->name : "backend-cuda (not open)"; }

static bool cuda_host_memory(tf_backend *be)
{
    (void)be;
    return false;
}

/* --- sum_rows, sum_squares, finite_check ---------------------------------------- */

static tf_status cuda_sum_rows(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                               int cols, float *dbias, bool accumulate, tf_error *err)
{
    const char *op = "sum_rows";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "dy", dt)) ||
        (rc = cuda_need_min(err, op, "rows", rows, 0)) ||
        (rc = cuda_need_min(err, op, "cols", cols, 0)))
        return rc;
    if (cols == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dbias", dbias))) return rc;
    if (rows > 0 && (rc = cuda_need(err, op, "dy", dy))) return rc;
    if ((rc = cuda_workspace(be, st, tfc_sum_rows_workspace_bytes(rows, cols), op, &ws, err)))
        return rc;
    return launched(err, op, tfc_sum_rows(st->s, dy, dt, rows, cols, dbias, accumulate, ws),
                    "[%d, %d]", rows, cols);
}

static tf_status cuda_sum_squares(tf_backend *be, tf_stream *s, const float *x, size_t n,
                                  float *out, tf_error *err)
{
    const char *op = "sum_squares";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need(err, op, "out", out))) return rc;
    if (n > 0 && (rc = cuda_need(err, op, "x", x))) return rc;
    if ((rc = cuda_workspace(be, st, tfc_sum_squares_workspace_bytes(), op, &ws, err))) return rc;
    return launched(err, op, tfc_sum_squares(st->s, x, n, out, ws), "[%zu]", n);
}

static tf_status cuda_finite_check(tf_backend *be, tf_stream *s, const void *x, size_t n,
                                   tf_dtype dt, int32_t *found, tf_error *err)
{
    const char *op = "finite_check";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need(err, op, "found", found)))
        return rc;
    if (dt != TF_DTYPE_F64 && (rc = cuda_need_act(err, op, "x", dt))) return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x))) return rc;
    return launched(err, op, tfc_finite_check(st->s, x, n, dt, found), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

/* --- layernorm (engineer B's kernels) ------------------------------------------ */

static tf_status check_ln_shape(tf_error *err, const char *op, int rows, int cols, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, "x", dt)) || (st = cuda_need_min(err, op, "rows", rows, 0)) ||
        (st = cuda_need_min(err, op, "cols", cols, 1)))
        return st;
    return TF_OK;
}

static tf_status cuda_layernorm_fwd(tf_backend *be, tf_stream *s, const void *x,
                                    const void *residual, void *in_out, void *y,
                                    const float *gamma, const float *beta, float *mean,
                                    float *rstd, int rows, int cols, float eps, tf_dtype dt,
                                    tf_error *err)
{
    const char *op = "layernorm_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_ln_shape(err, op, rows, cols, dt)))
        return rc;
    if (!(isfinite(eps) && eps >= 0.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "eps must be finite and >= 0, got %g",
                         (double)eps);
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x)) || (rc = cuda_need(err, op, "y", y)) ||
        (rc = cuda_need(err, op, "gamma", gamma)) || (rc = cuda_need(err, op, "beta", beta)) ||
        (rc = cuda_need(err, op, "mean", mean)) || (rc = cuda_need(err, op, "rstd", rstd)))
        return rc;
    if (residual && !in_out)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "in_out is NULL but residual is set (backward needs x + residual)");
    return launched(err, op,
                    tfc_layernorm_fwd(st->s, x, residual, in_out, y, gamma, beta, mean, rstd, rows,
                                      cols, eps, dt),
                    "[%d, %d] %s%s", rows, cols, tf_dtype_name(dt),
                    residual ? " with residual" : "");
}

static tf_status cuda_layernorm_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *in,
                                    const float *gamma, const float *mean, const float *rstd,
                                    void *dx, bool dx_accumulate, float *dgamma, float *dbeta,
                                    int rows, int cols, tf_dtype dt, tf_error *err)
{
    const char *op = "layernorm_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_ln_shape(err, op, rows, cols, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dy", dy)) || (rc = cuda_need(err, op, "in", in)) ||
        (rc = cuda_need(err, op, "gamma", gamma)) || (rc = cuda_need(err, op, "mean", mean)) ||
        (rc = cuda_need(err, op, "rstd", rstd)) || (rc = cuda_need(err, op, "dx", dx)) ||
        (rc = cuda_need(err, op, "dgamma", dgamma)) || (rc = cuda_need(err, op, "dbeta", dbeta)))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_layernorm_bwd_workspace_bytes(rows, cols), op, &ws, err)))
        return rc;
    return launched(err, op,
                    tfc_layernorm_bwd(st->s, dy, in, gamma, mean, rstd, dx, dx_accumulate, dgamma,
                                      dbeta, rows, cols, dt, ws),
                    "[%d, %d] %s", rows, cols, tf_dtype_name(dt));
}

/* --- attention (engineer B's kernels) ---------------------------------------------- */

static tf_status check_attention(tf_error *err, const char *op, const tf_attention_desc *d)
{
    tf_status st;
    if ((st = cuda_need(err, op, "desc", d)) ||
        (st = cuda_need_min(err, op, "batch", d->batch, 1)) ||
        (st = cuda_need_min(err, op, "seq", d->seq, 1)) ||
        (st = cuda_need_min(err, op, "heads", d->heads, 1)) ||
        (st = cuda_need_min(err, op, "head_dim", d->head_dim, 1)) ||
        (st = cuda_need_act(err, op, "qkv", d->dtype)))
        return st;
    if ((unsigned)d->mode > TF_MATMUL_BF16)
        return cuda_fail(err, TF_ERR_PLUGIN, op, "unknown matmul mode %d", (int)d->mode);
    if (!isfinite(d->scale))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "scale must be finite, got %g", (double)d->scale);
    if (!(d->dropout >= 0.0f && d->dropout < 1.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "dropout must be in [0, 1), got %g",
                         (double)d->dropout);
    if ((long long)d->heads * d->head_dim > INT32_MAX / 3)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "heads * head_dim = %lld is too large",
                         (long long)d->heads * d->head_dim);
    if ((long long)d->batch * d->seq > INT32_MAX)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "batch * seq = %lld is too large",
                         (long long)d->batch * d->seq);
    if (!tfc_attention_supported(d->dtype, d->head_dim))
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "head_dim %d with %s activations is not supported by backend-cuda's "
                         "attention kernels",
                         d->head_dim, tf_dtype_name(d->dtype));
    return TF_OK;
}

static size_t cuda_attention_save_bytes(tf_backend *be, const tf_attention_desc *d)
{
    (void)be;
    if (!d || d->batch < 1 || d->seq < 1 || d->heads < 1 || d->head_dim < 1) return 0;
    return tfc_attention_save_bytes(d);
}

static tf_status cuda_attention_fwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                    const void *qkv, const int32_t *mask, void *out, void *save,
                                    bool train, tf_error *err)
{
    const char *op = "attention_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_attention(err, op, d)) ||
        (rc = cuda_need(err, op, "qkv", qkv)) || (rc = cuda_need(err, op, "out", out)))
        return rc;
    if (train && !save)
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "save is NULL in training (backward needs attention_save_bytes of it)");
    return launched(err, op, tfc_attention_fwd(st->s, d, qkv, mask, out, save, train),
                    "batch %d, seq %d, heads %d, head_dim %d, %s%s", d->batch, d->seq, d->heads,
                    d->head_dim, tf_dtype_name(d->dtype), train ? ", train" : "");
}

static tf_status cuda_attention_bwd(tf_backend *be, tf_stream *s, const tf_attention_desc *d,
                                    const void *qkv, const int32_t *mask, const void *out,
                                    const void *save, const void *dout, void *dqkv, tf_error *err)
{
    const char *op = "attention_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = check_attention(err, op, d)) ||
        (rc = cuda_need(err, op, "qkv", qkv)) || (rc = cuda_need(err, op, "out", out)) ||
        (rc = cuda_need(err, op, "save", save)) || (rc = cuda_need(err, op, "dout", dout)) ||
        (rc = cuda_need(err, op, "dqkv", dqkv)))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_attention_bwd_workspace_bytes(d), op, &ws, err)))
        return rc;
    return launched(err, op, tfc_attention_bwd(st->s, d, qkv, mask, out, save, dout, dqkv, ws),
                    "batch %d, seq %d, heads %d, head_dim %d, %s", d->batch, d->seq, d->heads,
                    d->head_dim, tf_dtype_name(d->dtype));
}

/* --- elementwise ------------------------------------------------------------------- */

static tf_status check_unary(tf_error *err, const char *op, const void *a, const char *an,
                             const void *b, const char *bn, const void *c, const char *cn,
                             size_t n, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, an, dt))) return st;
    if (n == 0) return TF_OK;
    if ((st = cuda_need(err, op, an, a)) || (st = cuda_need(err, op, bn, b))) return st;
    if (cn && (st = cuda_need(err, op, cn, c))) return st;
    return TF_OK;
}

static tf_status check_gelu_kind(tf_error *err, const char *op, tf_gelu_kind kind)
{
    if (kind == TF_GELU_ERF || kind == TF_GELU_TANH) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "unknown gelu kind %d", (int)kind);
}

static tf_status cuda_gelu_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                               tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    const char *op = "gelu_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, x, "x", y, "y", NULL, NULL, n, dt)) ||
        (rc = check_gelu_kind(err, op, kind)))
        return rc;
    if (n == 0) return TF_OK;
    return launched(err, op, tfc_gelu_fwd(st->s, x, y, n, kind, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

static tf_status cuda_gelu_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *x,
                               void *dx, size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    const char *op = "gelu_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, dy, "dy", x, "x", dx, "dx", n, dt)) ||
        (rc = check_gelu_kind(err, op, kind)))
        return rc;
    if (n == 0) return TF_OK;
    return launched(err, op, tfc_gelu_bwd(st->s, dy, x, dx, n, kind, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

static tf_status cuda_tanh_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                               tf_dtype dt, tf_error *err)
{
    const char *op = "tanh_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, x, "x", y, "y", NULL, NULL, n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return launched(err, op, tfc_tanh_fwd(st->s, x, y, n, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

static tf_status cuda_tanh_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *y,
                               void *dx, size_t n, tf_dtype dt, tf_error *err)
{
    const char *op = "tanh_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, dy, "dy", y, "y", dx, "dx", n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return launched(err, op, tfc_tanh_bwd(st->s, dy, y, dx, n, dt), "[%zu] %s", n,
                    tf_dtype_name(dt));
}

static tf_status check_p(tf_error *err, const char *op, float p)
{
    if (p >= 0.0f && p <= 1.0f) return TF_OK;
    return cuda_fail(err, TF_ERR_RUNTIME, op, "p must be in [0, 1], got %g", (double)p);
}

static tf_status cuda_dropout_fwd(tf_backend *be, tf_stream *s, const void *x, void *y,
                                  uint8_t *keep, size_t n, float p, uint64_t seed,
                                  uint64_t offset, tf_dtype dt, tf_error *err)
{
    const char *op = "dropout_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "x", dt)) ||
        (rc = check_p(err, op, p)))
        return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x)) || (rc = cuda_need(err, op, "y", y)) ||
        (rc = cuda_need(err, op, "keep", keep)))
        return rc;
    /* backend-cpu's threshold and scale, computed the same way */
    float t = ceilf(p * 16777216.0f);
    uint32_t thr = t <= 0.0f ? 0u : t >= 16777216.0f ? 16777216u : (uint32_t)t;
    float scale = 1.0f / (1.0f - p); /* inf for p = 1, where nothing is kept */
    return launched(err, op, tfc_dropout_fwd(st->s, x, y, keep, n, thr, scale, seed, offset, dt),
                    "[%zu] %s, p %g", n, tf_dtype_name(dt), (double)p);
}

static tf_status cuda_dropout_bwd(tf_backend *be, tf_stream *s, const void *dy,
                                  const uint8_t *keep, void *dx, size_t n, float p, tf_dtype dt,
                                  tf_error *err)
{
    const char *op = "dropout_bwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "dy", dt)) ||
        (rc = check_p(err, op, p)))
        return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dy", dy)) || (rc = cuda_need(err, op, "keep", keep)) ||
        (rc = cuda_need(err, op, "dx", dx)))
        return rc;
    float scale = 1.0f / (1.0f - p);
    return launched(err, op, tfc_dropout_bwd(st->s, dy, keep, dx, n, scale, dt), "[%zu] %s, p %g",
                    n, tf_dtype_name(dt), (double)p);
}

static tf_status cuda_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y,
                          size_t n, tf_dtype dt, tf_error *err)
{
    const char *op = "add";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_unary(err, op, a, "a", b, "b", y, "y", n, dt)))
        return rc;
    if (n == 0) return TF_OK;
    return launched(err, op, tfc_add(st->s, a, b, y, n, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

static tf_status cuda_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha,
                            tf_dtype dt, tf_error *err)
{
    const char *op = "scale";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "x", dt))) return rc;
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "x", x))) return rc;
    return launched(err, op, tfc_scale(st->s, x, n, alpha, dt), "[%zu] %s", n, tf_dtype_name(dt));
}

static bool castable(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16 || dt == TF_DTYPE_F64;
}

static tf_status cuda_cast(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt,
                           void *dst, tf_dtype dst_dt, size_t n, tf_error *err)
{
    const char *op = "cast";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err))) return rc;
    if (!castable(src_dt) || !castable(dst_dt)) {
        const char *a = tf_dtype_name(src_dt), *b = tf_dtype_name(dst_dt);
        return cuda_fail(err, TF_ERR_PLUGIN, op,
                         "cast from %s to %s is not supported (F32, F16, BF16, F64 only)",
                         a ? a : "?", b ? b : "?");
    }
    if (n == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "src", src)) || (rc = cuda_need(err, op, "dst", dst))) return rc;
    if (src_dt == dst_dt) {
        if (src == dst) return TF_OK;
        return launched(err, op,
                        cudaMemcpyAsync(dst, src, n * tf_dtype_size(src_dt),
                                        cudaMemcpyDeviceToDevice, st->s),
                        "[%zu] %s copy", n, tf_dtype_name(src_dt));
    }
    return launched(err, op, tfc_cast(st->s, src, src_dt, dst, dst_dt, n), "[%zu] %s -> %s", n,
                    tf_dtype_name(src_dt), tf_dtype_name(dst_dt));
}

/* --- embeddings ------------------------------------------------------------------- */

static tf_status check_embedding(tf_error *err, const char *op, const int32_t *ids, int rows,
                                 int vocab, int dim, tf_dtype dt)
{
    tf_status st;
    if ((st = cuda_need_act(err, op, "out", dt)) || (st = cuda_need_min(err, op, "rows", rows, 0)) ||
        (st = cuda_need_min(err, op, "vocab", vocab, 1)) ||
        (st = cuda_need_min(err, op, "dim", dim, 1)))
        return st;
    if (rows > 0 && (st = cuda_need(err, op, "ids", ids))) return st;
    return TF_OK;
}

static tfc_id_check id_check(tf_backend *be)
{
    tfc_id_check c = {be->bad_id, be->bad_id_claim, __atomic_load_n(&be->bad_id_gen, __ATOMIC_ACQUIRE)};
    return c;
}

/* Ids live in device memory: they are checked by the kernels, and a bad one
 * is reported (TF_ERR_DATA, naming the id and its row) by the next
 * stream_sync or event_sync of this backend, which is where the host first
 * could know. Rows with good ids are still written. */
static tf_status cuda_embedding_fwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                                    const float *table, int vocab, int dim, void *out,
                                    bool accumulate, tf_dtype dt, tf_error *err)
{
    const char *op = "embedding_fwd";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_embedding(err, op, ids, rows, vocab, dim, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "table", table)) || (rc = cuda_need(err, op, "out", out)))
        return rc;
    return launched(err, op,
                    tfc_embedding_fwd(st->s, ids, rows, table, vocab, dim, out, accumulate, dt,
                                      id_check(be)),
                    "rows %d, vocab %d, dim %d, %s", rows, vocab, dim, tf_dtype_name(dt));
}

static tf_status cuda_embedding_bwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                                    const void *dout, tf_dtype dt, float *dtable, int vocab,
                                    int dim, tf_error *err)
{
    const char *op = "embedding_bwd";
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = check_embedding(err, op, ids, rows, vocab, dim, dt)))
        return rc;
    if (rows == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "dout", dout)) || (rc = cuda_need(err, op, "dtable", dtable)))
        return rc;
    size_t bytes = tfc_embedding_bwd_workspace_bytes(rows, dim, vocab);
    if (bytes == 0)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "cannot size the sort workspace for %d rows",
                         rows);
    if ((rc = cuda_workspace(be, st, bytes, op, &ws, err))) return rc;
    return launched(err, op,
                    tfc_embedding_bwd(st->s, ids, rows, dout, dt, dtable, vocab, dim, ws, bytes,
                                      id_check(be)),
                    "rows %d, vocab %d, dim %d, %s", rows, vocab, dim, tf_dtype_name(dt));
}

/* --- cross-entropy (engineer B's kernel) ---------------------------------------------- */

static tf_status cross_entropy(tf_backend *be, tf_stream *s, const char *op, const void *logits,
                               int64_t ld_logits, tf_dtype dt, int rows, int classes,
                               const int32_t *labels, int ignore_index, float label_smoothing,
                               float *loss, void *dlogits, float grad_scale, tf_error *err)
{
    tf_stream *st;
    tf_status rc;
    void *ws;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need_act(err, op, "logits", dt)) ||
        (rc = cuda_need_min(err, op, "rows", rows, 0)) ||
        (rc = cuda_need_min(err, op, "classes", classes, 1)) ||
        (rc = cuda_need(err, op, "loss", loss)))
        return rc;
    if (ld_logits < classes)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "ld_logits %lld is less than classes %d",
                         (long long)ld_logits, classes);
    if (rows > 0 && ((rc = cuda_need(err, op, "logits", logits)) ||
                     (rc = cuda_need(err, op, "labels", labels))))
        return rc;
    if ((rc = cuda_workspace(be, st, tfc_cross_entropy_workspace_bytes(rows, classes), op, &ws,
                             err)))
        return rc;
    return launched(err, op,
                    tfc_cross_entropy(st->s, logits, ld_logits, dt, rows, classes, labels,
                                      ignore_index, label_smoothing, loss, dlogits, grad_scale, ws),
                    "[%d, %d] %s", rows, classes, tf_dtype_name(dt));
}

static tf_status cuda_cross_entropy(tf_backend *be, tf_stream *s, const void *logits,
                                    int64_t ld_logits, tf_dtype dt, int rows, int classes,
                                    const int32_t *labels, int ignore_index, float *loss,
                                    void *dlogits, float grad_scale, tf_error *err)
{
    return cross_entropy(be, s, "cross_entropy", logits, ld_logits, dt, rows, classes, labels,
                         ignore_index, 0.0f, loss, dlogits, grad_scale, err);
}

static tf_status cuda_cross_entropy_ex(tf_backend *be, tf_stream *s,
                                       const tf_cross_entropy_desc *d, tf_error *err)
{
    const char *op = "cross_entropy_ex";
    tf_status rc;
    if ((rc = cuda_need(err, op, "descriptor", d))) return rc;
    if (d->size < sizeof *d)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.2 needs %zu",
                         (unsigned)d->size, sizeof *d);
    if (!(d->label_smoothing >= 0.0f && d->label_smoothing <= 1.0f))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "label_smoothing must be in [0, 1], got %g",
                         (double)d->label_smoothing);
    return cross_entropy(be, s, op, d->logits, d->ld_logits, d->dt, d->rows, d->classes,
                         d->labels, d->ignore_index, d->label_smoothing, d->loss, d->dlogits,
                         d->grad_scale, err);
}

/* --- AdamW -------------------------------------------------------------------------------- */

/* libtfcore's checks (tfcore/backend.h), with this backend's prefix */
static tf_status check_segments(tf_error *err, const tf_adamw_segment *segs, size_t nsegs)
{
    tf_status st = tf_adamw_check_segments(segs, nsegs, err);
    if (st) tf_error_prefix(err, "%s: adamw", "backend-cuda");
    return st;
}

static tf_status check_hyper(tf_error *err, const tf_adamw_hyper *h)
{
    tf_status st = tf_adamw_check_hyper(h, err);
    if (st) tf_error_prefix(err, "%s: adamw", "backend-cuda");
    return st;
}

/* The device work list for these segments: rebuilt (and uploaded) only
 * when they differ from the last call's, i.e. once per training run. Under
 * adamw_lock. The old list may be read by queued AdamW kernels on any
 * stream, so replacing it waits for the device first. */
static tf_status adamw_work_list(tf_backend *be, tf_stream *st, const tf_adamw_segment *segs,
                                 size_t nsegs, tf_error *err)
{
    const char *op = "adamw";
    if (be->adamw_segs && be->adamw_nsegs == nsegs &&
        memcmp(be->adamw_segs, segs, nsegs * sizeof *segs) == 0)
        return TF_OK;
    if (nsegs > UINT32_MAX)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "%zu segments is too many", nsegs);
    size_t nchunks = 0;
    for (size_t i = 0; i < nsegs; i++)
        nchunks += segs[i].count / TFC_ADAMW_CHUNK + (segs[i].count % TFC_ADAMW_CHUNK != 0);
    if (nchunks > SIZE_MAX / 2 / sizeof(tfc_adamw_chunk))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "%zu chunks of %d elements is too many", nchunks,
                         TFC_ADAMW_CHUNK);
    /* [nchunks] chunks, then [nsegs] weight decays (16-byte aligned after the chunks) */
    size_t chunk_bytes = nchunks * sizeof(tfc_adamw_chunk);
    size_t bytes = chunk_bytes + nsegs * sizeof(float);
    tf_adamw_segment *copy = malloc(nsegs * sizeof *copy);
    unsigned char *host = malloc(bytes ? bytes : 1);
    if (!copy || !host) {
        free(copy);
        free(host);
        return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory (%zu bytes) for the work list",
                         bytes);
    }
    memcpy(copy, segs, nsegs * sizeof *segs);
    tfc_adamw_chunk *ch = (tfc_adamw_chunk *)host;
    float *wd = (float *)(host + chunk_bytes);
    size_t c = 0;
    for (size_t i = 0; i < nsegs; i++) {
        wd[i] = segs[i].weight_decay;
        for (size_t done = 0; done < segs[i].count; done += TFC_ADAMW_CHUNK) {
            size_t left = segs[i].count - done;
            ch[c].offset = (uint64_t)(segs[i].offset + done);
            ch[c].count = (uint32_t)(left < TFC_ADAMW_CHUNK ? left : TFC_ADAMW_CHUNK);
            ch[c].segment = (uint32_t)i;
            c++;
        }
    }
    tf_status rc = TF_OK;
    cudaError_t e;
    if (be->adamw_dev && (e = cudaDeviceSynchronize()) != cudaSuccess)
        rc = cuda_fail_rt(err, op, e, "waiting to replace the work list");
    if (!rc && bytes > be->adamw_dev_bytes) {
        if (be->adamw_dev) cuda_internal_free(be, be->adamw_dev, be->adamw_dev_bytes);
        be->adamw_dev = NULL;
        be->adamw_dev_bytes = 0;
        rc = cuda_internal_alloc(be, bytes, op, "the AdamW work list", &be->adamw_dev, err);
        if (!rc) be->adamw_dev_bytes = bytes;
    }
    if (!rc && bytes > 0) {
        e = cudaMemcpyAsync(be->adamw_dev, host, bytes, cudaMemcpyHostToDevice, st->s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(st->s);
        if (e != cudaSuccess) rc = cuda_fail_rt(err, op, e, "uploading the work list (%zu bytes)", bytes);
    }
    free(host);
    if (rc) {
        free(copy);
        free(be->adamw_segs);
        be->adamw_segs = NULL;
        be->adamw_nsegs = 0;
        return rc;
    }
    free(be->adamw_segs);
    be->adamw_segs = copy;
    be->adamw_nsegs = nsegs;
    be->adamw_nchunks = nchunks;
    return TF_OK;
}

static tf_status adamw(tf_backend *be, tf_stream *s, const char *op, float *params,
                       const float *grads, float *m, float *v, const tf_adamw_segment *segs,
                       size_t nsegs, const tf_adamw_hyper *h, tf_adamw_rule rule, tf_error *err)
{
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) || (rc = cuda_need(err, op, "hyper", h)) ||
        (rc = check_hyper(err, h)))
        return rc;
    if (nsegs == 0) return TF_OK;
    if ((rc = cuda_need(err, op, "segments", segs)) || (rc = check_segments(err, segs, nsegs)))
        return rc;
    if ((rc = cuda_need(err, op, "params", params)) || (rc = cuda_need(err, op, "grads", grads)) ||
        (rc = cuda_need(err, op, "m", m)) || (rc = cuda_need(err, op, "v", v)))
        return rc;
    /* backend-cpu's scalars: double, rounded to float once */
    double lr = h->lr, b1 = h->beta1, b2 = h->beta2;
    double bc1 = 1.0 - pow(b1, (double)h->step);
    double bc2 = 1.0 - pow(b2, (double)h->step);
    tfc_adamw_scalars k = {
        .lr = h->lr,
        .beta1 = h->beta1,
        .one_minus_beta1 = (float)(1.0 - b1),
        .beta2 = h->beta2,
        .one_minus_beta2 = (float)(1.0 - b2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = h->eps,
        .neg_step = rule == TF_ADAMW_HF ? (float)(-(lr * sqrt(bc2) / bc1)) : (float)(-(lr / bc1)),
        .grad_scale = h->grad_scale,
        .hf = rule == TF_ADAMW_HF,
    };
    pthread_mutex_lock(&be->adamw_lock);
    rc = adamw_work_list(be, st, segs, nsegs, err);
    if (!rc && be->adamw_nchunks > 0) {
        const tfc_adamw_chunk *chunks = be->adamw_dev;
        const float *wd = (const float *)((const unsigned char *)be->adamw_dev +
                                          be->adamw_nchunks * sizeof(tfc_adamw_chunk));
        rc = launched(err, op,
                      tfc_adamw(st->s, params, grads, m, v, chunks, be->adamw_nchunks, wd, &k),
                      "%zu segments, %zu chunks", nsegs, be->adamw_nchunks);
    }
    pthread_mutex_unlock(&be->adamw_lock);
    return rc;
}

static tf_status cuda_adamw(tf_backend *be, tf_stream *s, float *params, const float *grads,
                            float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                            const tf_adamw_hyper *h, tf_error *err)
{
    return adamw(be, s, "adamw", params, grads, m, v, segs, nsegs, h, TF_ADAMW_TORCH, err);
}

static tf_status cuda_adamw_ex(tf_backend *be, tf_stream *s, float *params, const float *grads,
                               float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                               const tf_adamw_desc *d, tf_error *err)
{
    const char *op = "adamw_ex";
    tf_status rc;
    if ((rc = cuda_need(err, op, "descriptor", d))) return rc;
    if (d->size < sizeof *d)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.2 needs %zu",
                         (unsigned)d->size, sizeof *d);
    if (d->rule != TF_ADAMW_TORCH && d->rule != TF_ADAMW_HF)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "unknown rule %d", (int)d->rule);
    return adamw(be, s, op, params, grads, m, v, segs, nsegs, &d->hyper, d->rule, err);
}

/* --- the descriptor ------------------------------------------------------------------------ */

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
};

TF_PLUGIN_DEFINE(TF_KIND_BACKEND, CUDA_PLUGIN_NAME, CUDA_PLUGIN_VERSION,
                 "NVIDIA GPUs: cuBLASLt GEMMs, fused CUDA kernels, fp32/tf32/fp16/bf16",
                 cuda_probe, &cuda_vtable)
