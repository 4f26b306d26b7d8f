/* memory.c — backend-cpu memory: 64-byte aligned host memory for both kinds
 * (device and "pinned" are the same thing here), with the bytes held now and
 * at the peak, and the system's total and free memory for mem_info.
 *
 * Each block carries a 64-byte header in front of the pointer handed out,
 * recording its size (for the counters) and a tag that free() checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "cpu.h"
#include "tfcore/log.h"

#define BLOCK_TAG 0x74666370753a6d6dull /* "tfcpu:mm" */

typedef struct block_header {
    uint64_t tag;
    uint64_t bytes; /* what the caller asked for */
    uint32_t kind;
    unsigned char pad[CPU_ALIGN - 20];
} block_header;
_Static_assert(sizeof(block_header) == CPU_ALIGN, "the header keeps the data aligned");

static void system_memory(size_t *total, size_t *free_bytes)
{
    struct sysinfo si;
    if (sysinfo(&si) != 0) {
        *total = *free_bytes = 0;
        return;
    }
    *total = (size_t)si.totalram * si.mem_unit;
    *free_bytes = (size_t)si.freeram * si.mem_unit;
}

void cpu_mem_info(tf_backend *be, tf_backend_mem_info *info)
{
    if (!info) return;
    system_memory(&info->total, &info->free);
    info->current = be ? atomic_load(&be->current) : 0;
    info->peak = be ? atomic_load(&be->peak) : 0;
}

static const char *kind_name(tf_mem_kind kind)
{
    return kind == TF_MEM_DEVICE ? "device" : "pinned host";
}

tf_status cpu_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out, tf_error *err)
{
    if (cpu_need(err, "alloc", "backend", be) || cpu_need(err, "alloc", "out", out))
        return TF_ERR_RUNTIME;
    *out = NULL;
    if (kind != TF_MEM_DEVICE && kind != TF_MEM_HOST_PINNED)
        return cpu_fail(err, TF_ERR_RUNTIME, "alloc", "unknown memory kind %d", (int)kind);
    size_t total, avail;
    /* header + bytes rounded up to the alignment, without wrapping around */
    if (bytes > SIZE_MAX - 2 * CPU_ALIGN) {
        system_memory(&total, &avail);
        return cpu_fail(err, TF_ERR_RUNTIME, "alloc",
                        "out of memory: %zu bytes of %s memory is more than can be addressed "
                        "(%zu bytes free of %zu)",
                        bytes, kind_name(kind), avail, total);
    }
    size_t whole = sizeof(block_header) + (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    block_header *h = aligned_alloc(CPU_ALIGN, whole);
    if (!h) {
        system_memory(&total, &avail);
        return cpu_fail(err, TF_ERR_RUNTIME, "alloc",
                        "out of memory allocating %zu bytes of %s memory (%zu bytes free of "
                        "%zu; this backend holds %zu)",
                        bytes, kind_name(kind), avail, total, atomic_load(&be->current));
    }
    h->tag = BLOCK_TAG;
    h->bytes = bytes;
    h->kind = (uint32_t)kind;
    size_t now = atomic_fetch_add(&be->current, bytes) + bytes;
    size_t peak = atomic_load(&be->peak);
    while (now > peak && !atomic_compare_exchange_weak(&be->peak, &peak, now)) {
    }
    *out = h + 1;
    return TF_OK;
}

void cpu_free(tf_backend *be, void *ptr, tf_mem_kind kind)
{
    if (!ptr || !be) return;
    block_header *h = (block_header *)ptr - 1;
    if (h->tag != BLOCK_TAG) {
        /* not ours (or already freed): freeing it would corrupt the heap */
        tf_log(TF_LOG_ERROR, "backend-cpu: free(%p): not a block from this backend's alloc",
               ptr);
        return;
    }
    if (h->kind != (uint32_t)kind)
        tf_warn("backend-cpu: free(%p): allocated as %s memory, freed as %s", ptr,
                kind_name((tf_mem_kind)h->kind), kind_name(kind));
    atomic_fetch_sub(&be->current, (size_t)h->bytes);
    h->tag = 0;
    free(h);
}

/* Copies and fills of at least this many bytes are split over the team:
 * one core does not saturate memory bandwidth (zeroing the gradients of a
 * 22M-parameter model every step is 90 MB). */
#define MEM_PAR_MIN ((size_t)1 << 20)

tf_status cpu_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes,
                     tf_memcpy_kind kind, tf_stream *s)
{
    (void)s;
    if ((unsigned)kind > TF_COPY_HOST_TO_HOST) return TF_ERR_RUNTIME;
    if (bytes == 0) return TF_OK;
    if (!dst || !src || !be) return TF_ERR_RUNTIME;
    /* every kind is host to host here; overlapping ranges are moved */
    const char *from = src;
    char *to = dst;
    bool overlap = to < from + bytes && from < to + bytes;
    if (overlap || be->threads < 2 || bytes < MEM_PAR_MIN) {
        memmove(dst, src, bytes);
        return TF_OK;
    }
    CPU_PARALLEL_IF(be, true)
    {
        size_t lo, hi;
        cpu_split(bytes, cpu_team_size(), cpu_thread_id(), CPU_ALIGN, &lo, &hi);
        if (lo < hi) memcpy(to + lo, from + lo, hi - lo);
    }
    return TF_OK;
}

tf_status cpu_memset(tf_backend *be, void *dst, int value, size_t bytes, tf_stream *s)
{
    (void)s;
    if (bytes == 0) return TF_OK;
    if (!dst || !be) return TF_ERR_RUNTIME;
    char *to = dst;
    CPU_PARALLEL_IF(be, be->threads > 1 && bytes >= MEM_PAR_MIN)
    {
        size_t lo, hi;
        cpu_split(bytes, cpu_team_size(), cpu_thread_id(), CPU_ALIGN, &lo, &hi);
        if (lo < hi) memset(to + lo, value, hi - lo);
    }
    return TF_OK;
}
