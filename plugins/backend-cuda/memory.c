/* memory.c — backend-cuda memory: cudaMalloc for device memory,
 * cudaHostAlloc (portable: pinned for every device of the process) for
 * pinned host memory, the bytes held now and at the peak, the per-stream
 * workspaces, and the asynchronous copies and fills.
 *
 * Every live block is remembered in a small open-addressing table
 * (pointer -> size, kind) so free() can count it out, and so a pointer that
 * is not ours, or freed twice, is reported instead of handed to cudaFree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "backend_cuda.h"
#include "tfcore/log.h"

struct cuda_block {
    void *ptr;        /* NULL: empty slot; BLOCK_DEAD: a removed entry */
    size_t bytes;     /* what the caller asked for */
    tf_mem_kind kind;
};

static char block_dead_marker;
#define BLOCK_DEAD ((void *)&block_dead_marker)

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)(h & (cap - 1));
}

/* Under mem_lock. Returns false when the table cannot grow (host OOM). */
static bool blocks_grow(tf_backend *be)
{
    size_t cap = be->blocks_cap ? be->blocks_cap * 2 : 256;
    cuda_block *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < be->blocks_cap; i++) {
        cuda_block *b = &be->blocks[i];
        if (!b->ptr || b->ptr == BLOCK_DEAD) continue;
        size_t j = slot_of(b->ptr, cap);
        while (t[j].ptr) j = (j + 1) & (cap - 1);
        t[j] = *b;
    }
    free(be->blocks);
    be->blocks = t;
    be->blocks_cap = cap;
    be->blocks_dead = 0;
    return true;
}

static bool blocks_insert(tf_backend *be, void *p, size_t bytes, tf_mem_kind kind)
{
    if ((be->blocks_used + be->blocks_dead + 1) * 2 > be->blocks_cap && !blocks_grow(be))
        return false;
    size_t j = slot_of(p, be->blocks_cap);
    while (be->blocks[j].ptr && be->blocks[j].ptr != BLOCK_DEAD) j = (j + 1) & (be->blocks_cap - 1);
    if (be->blocks[j].ptr == BLOCK_DEAD) be->blocks_dead--;
    be->blocks[j] = (cuda_block){p, bytes, kind};
    be->blocks_used++;
    return true;
}

/* The slot holding p, or NULL. */
static cuda_block *blocks_find(tf_backend *be, const void *p)
{
    if (!be->blocks_cap) return NULL;
    size_t j = slot_of(p, be->blocks_cap);
    while (be->blocks[j].ptr) {
        if (be->blocks[j].ptr == p) return &be->blocks[j];
        j = (j + 1) & (be->blocks_cap - 1);
    }
    return NULL;
}

void cuda_blocks_free_table(tf_backend *be)
{
    free(be->blocks);
    be->blocks = NULL;
    be->blocks_cap = be->blocks_used = be->blocks_dead = 0;
}

static void count_in(tf_backend *be, size_t bytes)
{
    be->current += bytes;
    if (be->current > be->peak) be->peak = be->current;
}

const char *cuda_bytes(char *buf, size_t n, size_t bytes)
{
    double b = (double)bytes;
    if (bytes >= ((size_t)1 << 30))
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else if (bytes >= ((size_t)1 << 20))
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024.0));
    else if (bytes >= 1024)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%zu bytes", bytes);
    return buf;
}

static void host_memory(size_t *total, size_t *avail)
{
    struct sysinfo si;
    if (sysinfo(&si) != 0) {
        *total = *avail = 0;
        return;
    }
    *total = (size_t)si.totalram * si.mem_unit;
    *avail = (size_t)si.freeram * si.mem_unit;
}

/* The out-of-memory line: what was asked, how much is free, of how much. */
static tf_status oom(tf_backend *be, tf_error *err, const char *op, const char *what,
                     size_t bytes, tf_mem_kind kind)
{
    char want[32], fr[32], tot[32], held[32];
    size_t free_b = 0, total_b = 0;
    if (kind == TF_MEM_DEVICE) {
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
            (void)cudaGetLastError();
            free_b = 0;
            total_b = be->total_mem;
        }
        pthread_mutex_lock(&be->mem_lock);
        size_t cur = be->current;
        pthread_mutex_unlock(&be->mem_lock);
        return cuda_fail(err, TF_ERR_RUNTIME, op,
                         "out of device memory allocating %s%s%s (free %s of %s on %s, device "
                         "%d; this backend holds %s)",
                         cuda_bytes(want, sizeof want, bytes), what ? " for " : "",
                         what ? what : "", cuda_bytes(fr, sizeof fr, free_b),
                         cuda_bytes(tot, sizeof tot, total_b), be->gpu, be->device,
                         cuda_bytes(held, sizeof held, cur));
    }
    host_memory(&total_b, &free_b);
    return cuda_fail(err, TF_ERR_RUNTIME, op,
                     "out of pinned host memory allocating %s%s%s (host free %s of %s)",
                     cuda_bytes(want, sizeof want, bytes), what ? " for " : "", what ? what : "",
                     cuda_bytes(fr, sizeof fr, free_b), cuda_bytes(tot, sizeof tot, total_b));
}

static bool is_oom(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation;
}

tf_status cuda_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out, tf_error *err)
{
    const char *op = "alloc";
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_need(err, op, "out", out))) return rc;
    *out = NULL;
    if ((rc = cuda_enter(be, NULL, op, &st, err))) return rc;
    if (kind != TF_MEM_DEVICE && kind != TF_MEM_HOST_PINNED)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "unknown memory kind %d", (int)kind);
    /* cudaMalloc(0) gives no pointer; a zero-byte block still gets one */
    size_t ask = bytes ? bytes : 1;
    void *p = NULL;
    cudaError_t e = kind == TF_MEM_DEVICE ? cudaMalloc(&p, ask)
                                          : cudaHostAlloc(&p, ask, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        /* a request beyond the device's size is out of memory whatever the code says */
        if (is_oom(e) || (kind == TF_MEM_DEVICE && bytes > be->total_mem))
            return oom(be, err, op, NULL, bytes, kind);
        return cuda_fail_rt(err, op, e, "%s of %zu bytes",
                            kind == TF_MEM_DEVICE ? "cudaMalloc" : "cudaHostAlloc", bytes);
    }
    pthread_mutex_lock(&be->mem_lock);
    bool ok = blocks_insert(be, p, bytes, kind);
    if (ok) count_in(be, bytes);
    pthread_mutex_unlock(&be->mem_lock);
    if (!ok) {
        if (kind == TF_MEM_DEVICE)
            cudaFree(p);
        else
            cudaFreeHost(p);
        return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory for the allocation table");
    }
    *out = p;
    return TF_OK;
}

static const char *kind_name(tf_mem_kind kind)
{
    return kind == TF_MEM_DEVICE ? "device" : "pinned host";
}

void cuda_free(tf_backend *be, void *ptr, tf_mem_kind kind)
{
    if (!ptr || !be) return;
    if (cuda_bind(be) != cudaSuccess) (void)cudaGetLastError();
    pthread_mutex_lock(&be->mem_lock);
    cuda_block *b = blocks_find(be, ptr);
    cuda_block blk = b ? *b : (cuda_block){NULL, 0, TF_MEM_DEVICE};
    if (b) {
        b->ptr = BLOCK_DEAD;
        be->blocks_used--;
        be->blocks_dead++;
        be->current -= blk.bytes;
    }
    pthread_mutex_unlock(&be->mem_lock);
    if (!b) {
        tf_log(TF_LOG_ERROR,
               "backend-cuda: free(%p): not a live block from this backend's alloc (freed "
               "twice, or another backend's)",
               ptr);
        return;
    }
    if (blk.kind != kind)
        tf_warn("backend-cuda: free(%p): allocated as %s memory, freed as %s", ptr,
                kind_name(blk.kind), kind_name(kind));
    /* cudaFree waits for work still using the block; the kind it was made with decides */
    cudaError_t e = blk.kind == TF_MEM_DEVICE ? cudaFree(ptr) : cudaFreeHost(ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tf_warn("backend-cuda: free(%p) of %zu bytes: %s: %s", ptr, blk.bytes,
                cudaGetErrorName(e), cudaGetErrorString(e));
    }
}

tf_status cuda_internal_alloc(tf_backend *be, size_t bytes, const char *op, const char *what,
                              void **out, tf_error *err)
{
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (is_oom(e)) return oom(be, err, op, what, bytes, TF_MEM_DEVICE);
        return cuda_fail_rt(err, op, e, "cudaMalloc of %zu bytes for %s", bytes, what);
    }
    pthread_mutex_lock(&be->mem_lock);
    count_in(be, bytes);
    pthread_mutex_unlock(&be->mem_lock);
    *out = p;
    return TF_OK;
}

void cuda_internal_free(tf_backend *be, void *p, size_t bytes)
{
    if (!p) return;
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tf_warn("backend-cuda: freeing %zu bytes of internal memory: %s", bytes,
                cudaGetErrorString(e));
    }
    pthread_mutex_lock(&be->mem_lock);
    be->current -= bytes;
    pthread_mutex_unlock(&be->mem_lock);
}

/* Workspaces grow in steps of 1 MiB, by at least a quarter, so a sequence
 * of slightly larger requests does not reallocate each time. */
static size_t grown_size(size_t have, size_t need)
{
    size_t want = need + need / 4;
    if (want < need) want = need; /* wrapped */
    if (want < have + have / 4) want = have + have / 4;
    size_t mib = (size_t)1 << 20;
    if (want < mib) want = mib;
    if (want <= SIZE_MAX - mib) want = (want + mib - 1) / mib * mib;
    return want;
}

tf_status cuda_workspace(tf_backend *be, tf_stream *st, size_t bytes, const char *op, void **out,
                         tf_error *err)
{
    if (bytes <= st->ws_bytes && st->ws) {
        *out = st->ws;
        return TF_OK;
    }
    *out = NULL;
    if (st->ws) {
        /* kernels queued on this stream may still read the old workspace */
        cudaError_t e = cudaStreamSynchronize(st->s);
        if (e != cudaSuccess) return cuda_fail_rt(err, op, e, "waiting to grow the workspace");
        cuda_internal_free(be, st->ws, st->ws_bytes);
        st->ws = NULL;
        st->ws_bytes = 0;
    }
    size_t want = grown_size(st->ws_bytes, bytes);
    tf_status rc = cuda_internal_alloc(be, want, op, "the op workspace", &st->ws, err);
    if (rc) return rc;
    st->ws_bytes = want;
    tf_debug("backend-cuda: %s: op workspace of stream %p grown to %zu bytes", op, (void *)st,
             want);
    *out = st->ws;
    return TF_OK;
}

tf_status cuda_lt_workspace(tf_backend *be, tf_stream *st, void **out, tf_error *err)
{
    if (!st->lt_ws && be->lt_ws_bytes) {
        tf_status rc = cuda_internal_alloc(be, be->lt_ws_bytes, "gemm", "the cuBLASLt workspace",
                                           &st->lt_ws, err);
        if (rc) return rc;
        st->lt_ws_bytes = be->lt_ws_bytes;
    }
    *out = st->lt_ws;
    return TF_OK;
}

void cuda_stream_release(tf_backend *be, tf_stream *st)
{
    cuda_internal_free(be, st->ws, st->ws_bytes);
    st->ws = NULL;
    st->ws_bytes = 0;
    cuda_internal_free(be, st->lt_ws, st->lt_ws_bytes);
    st->lt_ws = NULL;
    st->lt_ws_bytes = 0;
}

void cuda_mem_info(tf_backend *be, tf_backend_mem_info *info)
{
    if (!info) return;
    memset(info, 0, sizeof *info);
    if (!be) return;
    if (cuda_bind(be) == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            info->free = free_b;
            info->total = total_b;
        } else {
            (void)cudaGetLastError();
            info->total = be->total_mem;
        }
    } else {
        (void)cudaGetLastError();
    }
    pthread_mutex_lock(&be->mem_lock);
    info->current = be->current;
    info->peak = be->peak;
    pthread_mutex_unlock(&be->mem_lock);
}

/* All four kinds go through cudaMemcpyDefault: with unified addressing the
 * runtime knows where each pointer lives, so device-to-device works across
 * devices (peer access, or staged by the driver), and host buffers that are
 * not pinned still work (staged; such copies are synchronous for the host). */
tf_status cuda_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes,
                      tf_memcpy_kind kind, tf_stream *s)
{
    if ((unsigned)kind > TF_COPY_HOST_TO_HOST) return TF_ERR_RUNTIME;
    if (bytes == 0) return TF_OK;
    tf_stream *st;
    if (!dst || !src || cuda_enter(be, s, "memcpy", &st, NULL)) return TF_ERR_RUNTIME;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st->s);
    if (e != cudaSuccess) {
        tf_log(TF_LOG_ERROR, "backend-cuda: memcpy of %zu bytes (%p <- %p, kind %d): %s: %s",
               bytes, dst, src, (int)kind, cudaGetErrorName(e), cudaGetErrorString(e));
        return TF_ERR_RUNTIME;
    }
    return TF_OK;
}

tf_status cuda_memset(tf_backend *be, void *dst, int value, size_t bytes, tf_stream *s)
{
    if (bytes == 0) return TF_OK;
    tf_stream *st;
    if (!dst || cuda_enter(be, s, "memset", &st, NULL)) return TF_ERR_RUNTIME;
    cudaError_t e = cudaMemsetAsync(dst, value, bytes, st->s);
    if (e != cudaSuccess) {
        tf_log(TF_LOG_ERROR, "backend-cuda: memset of %zu bytes at %p: %s: %s", bytes, dst,
               cudaGetErrorName(e), cudaGetErrorString(e));
        return TF_ERR_RUNTIME;
    }
    return TF_OK;
}
