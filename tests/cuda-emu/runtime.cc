/* runtime.cc — the CUDA runtime stand-in of the test-only emulation
 * (tests/cuda-emu/README.md; the contract with the other stand-ins is
 * emu.h). Implements the runtime calls backend-cuda and comm-nccl make, with
 * the semantics NVIDIA documents:
 *
 *  - devices: TFCORE_EMU_DEVICES of them (default 1), H100-like, named
 *    "... (emulated)"; the current device is per host thread.
 *  - memory: device and pinned allocations are host memory. Outside ASan
 *    each sits at the end of its own mapping, followed by an inaccessible
 *    guard page (and preceded by one), so an access past the end faults
 *    like compute-sanitizer would report it; freed mappings are unmapped, so
 *    a use after free faults too. Under ASan plain malloc lets ASan check.
 *  - streams: each stream (the legacy default stream of each device too)
 *    owns one host thread that runs its queue in order. The legacy default
 *    stream synchronizes with the blocking streams of its device, as CUDA's
 *    does. Events are markers completed by the stream thread.
 *  - errors: launch and argument errors are returned and remembered per host
 *    thread (cudaGetLastError clears); an error inside queued work is
 *    sticky for the device: later work is skipped and every synchronizing
 *    call and cudaGetLastError reports it.
 *  - like CUDA, a process forked after this one used the runtime cannot use
 *    it: every call returns cudaErrorInitializationError. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

namespace {

const size_t DEVICE_BYTES = 85520809984ull; /* an H100's 80 GB */

struct task {
    emu_task_fn fn;
    void *arg;
    void (*arg_free)(void *);
    bool always; /* completion markers run even after a sticky error */
};

/* Completion marker of one cudaEventRecord (or an internal one). */
struct marker {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    void set()
    {
        std::lock_guard<std::mutex> g(m);
        done = true;
        cv.notify_all();
    }
    void wait()
    {
        std::unique_lock<std::mutex> g(m);
        cv.wait(g, [&] { return done; });
    }
    bool query()
    {
        std::lock_guard<std::mutex> g(m);
        return done;
    }
};

struct device;

} // namespace

struct CUstream_st {
    int dev;
    unsigned flags;
    bool legacy; /* the device's NULL stream */
    std::mutex m;
    std::condition_variable cv;
    std::deque<task> q;
    bool busy = false, stop = false;
    std::shared_ptr<marker> last; /* completes after everything enqueued so far */
};

struct CUevent_st {
    unsigned flags;
    std::mutex m;
    std::shared_ptr<marker> last; /* the latest record; NULL: never recorded */
};

namespace {

struct device {
    std::mutex m;
    cudaError_t sticky = cudaSuccess;
    CUstream_st *legacy = nullptr;
    std::set<CUstream_st *> streams; /* created ones, live */
    std::set<int> peers;
};

struct alloc {
    size_t bytes;
    int dev;     /* -1: pinned host memory */
    char *map;   /* the mapping (or malloc block) */
    size_t map_bytes;
};

struct global {
    std::mutex m; /* streams, events and allocations tables */
    int ndev = 0;
    pid_t pid = 0;
    std::vector<device *> devs;
    std::set<CUstream_st *> live_streams;
    std::set<CUevent_st *> live_events;
    std::map<uintptr_t, alloc> allocs; /* by start address */
    size_t used[16] = {0};
    std::string launch_error; /* the last failed kernel, for cudaGetErrorString */
};

/* Never destroyed: stream threads may outlive static destructors at exit. */
global *G;
std::once_flag G_once;

thread_local int tls_device = 0;
thread_local cudaError_t tls_last = cudaSuccess;

void init_global(void)
{
    G = new global;
    G->pid = getpid();
    const char *e = getenv("TFCORE_EMU_DEVICES");
    int n = 1;
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end || v < 1 || v > 16) {
            fprintf(stderr, "cuda-emu: TFCORE_EMU_DEVICES=%s is not a number in 1..16; no devices\n", e);
            n = 0;
        } else {
            n = (int)v;
        }
    }
    G->ndev = n;
    for (int i = 0; i < n; i++) G->devs.push_back(new device);
}

global &g(void)
{
    std::call_once(G_once, init_global);
    return *G;
}

cudaError_t set_last(cudaError_t e)
{
    if (e != cudaSuccess) tls_last = e;
    return e;
}

bool forked(void) { return getpid() != g().pid; }

#define ENTER()                                                                      \
    do {                                                                             \
        if (forked()) return set_last(cudaErrorInitializationError);                 \
    } while (0)

cudaError_t sticky_of(int dev)
{
    device *d = g().devs[(size_t)dev];
    std::lock_guard<std::mutex> l(d->m);
    return d->sticky;
}

void set_sticky(int dev, cudaError_t e)
{
    device *d = g().devs[(size_t)dev];
    std::lock_guard<std::mutex> l(d->m);
    if (d->sticky == cudaSuccess) d->sticky = e;
}

/* The stream thread: runs the queue in order. */
void stream_main(CUstream_st *s)
{
    /* kernels read the current device like any host thread would */
    tls_device = s->dev;
    for (;;) {
        task t;
        {
            std::unique_lock<std::mutex> l(s->m);
            s->cv.wait(l, [&] { return !s->q.empty() || s->stop; });
            if (s->q.empty()) break; /* stopped and drained */
            t = s->q.front();
            s->q.pop_front();
            s->busy = true;
        }
        if (t.always || sticky_of(s->dev) == cudaSuccess) {
            cudaError_t e = t.fn(t.arg);
            if (e != cudaSuccess) set_sticky(s->dev, e);
        }
        if (t.arg_free) t.arg_free(t.arg);
        std::lock_guard<std::mutex> l(s->m);
        s->busy = false;
    }
    delete s;
}

CUstream_st *stream_new(int dev, unsigned flags, bool legacy)
{
    CUstream_st *s = new CUstream_st;
    s->dev = dev;
    s->flags = flags;
    s->legacy = legacy;
    s->last = std::make_shared<marker>();
    s->last->done = true;
    std::thread(stream_main, s).detach();
    return s;
}

/* The legacy default stream of the current device (made on first use). */
CUstream_st *legacy_stream(int dev)
{
    device *d = g().devs[(size_t)dev];
    std::lock_guard<std::mutex> l(d->m);
    if (!d->legacy) d->legacy = stream_new(dev, cudaStreamDefault, true);
    return d->legacy;
}

/* Resolve a handle: NULL is the current device's legacy stream. */
CUstream_st *resolve(cudaStream_t s)
{
    if (!s) {
        if (tls_device >= g().ndev) return nullptr;
        return legacy_stream(tls_device);
    }
    std::lock_guard<std::mutex> l(g().m);
    return g().live_streams.count(s) ? s : nullptr;
}

void marker_release(void *arg) { delete (std::shared_ptr<marker> *)arg; }
cudaError_t marker_set_task(void *arg)
{
    (*(std::shared_ptr<marker> *)arg)->set();
    return cudaSuccess;
}
cudaError_t marker_wait_task(void *arg)
{
    (*(std::shared_ptr<marker> *)arg)->wait();
    return cudaSuccess;
}

/* Append to s's queue (no legacy-stream ordering). */
void push(CUstream_st *s, emu_task_fn fn, void *arg, void (*arg_free)(void *))
{
    std::lock_guard<std::mutex> l(s->m);
    if (fn == marker_set_task) {
        /* a marker (an event record) is itself the stream's completion point */
        s->q.push_back(task{fn, arg, arg_free, true});
        s->last = *(std::shared_ptr<marker> *)arg;
    } else {
        auto mk = std::make_shared<marker>();
        s->q.push_back(task{fn, arg, arg_free, false});
        s->q.push_back(task{marker_set_task, new std::shared_ptr<marker>(mk), marker_release, true});
        s->last = mk;
    }
    s->cv.notify_one();
}

std::shared_ptr<marker> last_of(CUstream_st *s)
{
    std::lock_guard<std::mutex> l(s->m);
    return s->last;
}

/* Enqueue with CUDA's legacy default stream semantics: work on the legacy
 * stream waits for all earlier work on the device's blocking streams; work
 * on a blocking stream waits for earlier work on the legacy stream. */
void enqueue(CUstream_st *s, emu_task_fn fn, void *arg, void (*arg_free)(void *))
{
    if (s->legacy) {
        std::vector<std::shared_ptr<marker>> waits;
        device *d = g().devs[(size_t)s->dev];
        {
            std::lock_guard<std::mutex> l(d->m);
            for (CUstream_st *o : d->streams)
                if (!(o->flags & cudaStreamNonBlocking)) waits.push_back(last_of(o));
        }
        for (auto &w : waits)
            push(s, marker_wait_task, new std::shared_ptr<marker>(w), marker_release);
    } else if (!(s->flags & cudaStreamNonBlocking)) {
        device *d = g().devs[(size_t)s->dev];
        CUstream_st *leg;
        {
            std::lock_guard<std::mutex> l(d->m);
            leg = d->legacy;
        }
        if (leg) push(s, marker_wait_task, new std::shared_ptr<marker>(last_of(leg)), marker_release);
    }
    push(s, fn, arg, arg_free);
}

/* Wait until everything enqueued on s so far has run. */
void drain(CUstream_st *s) { last_of(s)->wait(); }

void drain_device(int dev)
{
    device *d = g().devs[(size_t)dev];
    std::vector<std::shared_ptr<marker>> ms;
    {
        /* markers taken under the lock: a concurrent destroy is safe */
        std::lock_guard<std::mutex> l(d->m);
        for (CUstream_st *s : d->streams) ms.push_back(last_of(s));
        if (d->legacy) ms.push_back(last_of(d->legacy));
    }
    for (auto &m : ms) m->wait();
}

/* --- memory table ---------------------------------------------------------- */

const alloc *find_alloc(const void *p, uintptr_t *base)
{
    auto &A = g().allocs;
    uintptr_t u = (uintptr_t)p;
    auto it = A.upper_bound(u);
    if (it == A.begin()) return nullptr;
    --it;
    /* a zero-byte allocation still owns its start address */
    if (u >= it->first && u < it->first + (it->second.bytes ? it->second.bytes : 1)) {
        *base = it->first;
        return &it->second;
    }
    return nullptr;
}

int span_kind(const void *p, size_t bytes, int *dev)
{
    std::lock_guard<std::mutex> l(g().m);
    uintptr_t base;
    const alloc *a = find_alloc(p, &base);
    if (!a) return 0; /* pageable host memory (or nothing we know) */
    if ((uintptr_t)p + bytes > base + a->bytes) return -1; /* runs past the end */
    *dev = a->dev;
    return a->dev >= 0 ? 1 : 2;
}

cudaError_t mem_new(void **out, size_t bytes, int dev)
{
    if (!out) return cudaErrorInvalidValue;
    alloc a;
    a.bytes = bytes;
    a.dev = dev;
    char *p;
#ifdef EMU_ASAN
    a.map_bytes = bytes ? bytes : 1;
    a.map = (char *)aligned_alloc(256, (a.map_bytes + 255) / 256 * 256);
    if (!a.map) return cudaErrorMemoryAllocation;
    p = a.map;
#else
    /* [guard][... data ending at the aligned end][guard]; 256-byte aligned
     * like cudaMalloc, so at most 255 bytes past the end go unnoticed */
    size_t page = (size_t)getpagesize();
    size_t rounded = (bytes + 255) / 256 * 256;
    size_t body = (rounded + page - 1) / page * page;
    a.map_bytes = body + 2 * page;
    void *m = mmap(nullptr, a.map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
    a.map = (char *)m;
    if (body && mprotect(a.map + page, body, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, a.map_bytes);
        return cudaErrorMemoryAllocation;
    }
    p = a.map + page + body - rounded;
#endif
    std::lock_guard<std::mutex> l(g().m);
    if (dev >= 0) {
        if (g().used[dev] + bytes > DEVICE_BYTES) {
#ifdef EMU_ASAN
            free(a.map);
#else
            munmap(a.map, a.map_bytes);
#endif
            return cudaErrorMemoryAllocation;
        }
        g().used[dev] += bytes;
    }
    g().allocs[(uintptr_t)p] = a;
    *out = p;
    return cudaSuccess;
}

cudaError_t mem_free(void *p, bool device_mem)
{
    if (!p) return cudaSuccess;
    alloc a;
    {
        std::lock_guard<std::mutex> l(g().m);
        auto it = g().allocs.find((uintptr_t)p);
        if (it == g().allocs.end() || (it->second.dev >= 0) != device_mem)
            return cudaErrorInvalidValue;
        a = it->second;
    }
    /* cudaFree and cudaFreeHost synchronize: queued work may still use it */
    if (device_mem)
        drain_device(a.dev);
    else
        for (int d = 0; d < g().ndev; d++) drain_device(d);
    std::lock_guard<std::mutex> l(g().m);
    g().allocs.erase((uintptr_t)p);
    if (a.dev >= 0) g().used[a.dev] -= a.bytes;
#ifdef EMU_ASAN
    free(a.map);
#else
    munmap(a.map, a.map_bytes);
#endif
    return cudaSuccess;
}

struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
    int value; /* memset: >= 0 */
    void *owned; /* a staged copy of pageable source memory, freed after */
};
cudaError_t copy_task(void *arg)
{
    copy_args *c = (copy_args *)arg;
    if (c->value >= 0)
        memset(c->dst, c->value, c->bytes);
    else
        memmove(c->dst, c->src, c->bytes);
    return cudaSuccess;
}
void copy_free(void *arg)
{
    copy_args *c = (copy_args *)arg;
    free(c->owned);
    delete c;
}

} // namespace

/* --- emu.h ------------------------------------------------------------------- */

extern "C" cudaError_t emu_enqueue(cudaStream_t s, emu_task_fn fn, void *arg, void (*arg_free)(void *))
{
    if (forked()) return cudaErrorInitializationError;
    CUstream_st *st = resolve(s);
    if (!st || !fn) return cudaErrorInvalidValue;
    enqueue(st, fn, arg, arg_free);
    return cudaSuccess;
}

extern "C" int emu_stream_device(cudaStream_t s)
{
    CUstream_st *st = resolve(s);
    return st ? st->dev : -1;
}

extern "C" int emu_device_count(void) { return g().ndev; }

extern "C" int emu_is_device_span(const void *p, size_t bytes, int dev)
{
    int d = -1;
    return span_kind(p, bytes, &d) == 1 && (dev < 0 || d == dev);
}

extern "C" int emu_is_pinned_span(const void *p, size_t bytes)
{
    int d;
    return span_kind(p, bytes, &d) == 2;
}

/* --- kernel launches --------------------------------------------------------- */

namespace {
cudaError_t launch_task(void *arg)
{
    emu_launch *L = (emu_launch *)arg;
    std::string why;
    cudaError_t e = emu_run_grid(L, &why);
    if (e != cudaSuccess) {
        char buf[1024];
        snprintf(buf, sizeof buf, "kernel %s (launched at %s, in %s) grid (%u,%u,%u) block (%u,%u,%u): %s",
                 L->kernel, L->site, L->func, L->grid.x, L->grid.y, L->grid.z, L->block.x,
                 L->block.y, L->block.z, why.c_str());
        fprintf(stderr, "cuda-emu: %s\n", buf);
        std::lock_guard<std::mutex> l(g().m);
        g().launch_error = buf;
    }
    return e;
}
void launch_free(void *arg)
{
    emu_launch *L = (emu_launch *)arg;
    L->ctx_free(L->ctx);
    delete L;
}
} // namespace

extern "C" cudaError_t emu_launch_kernel(const char *kernel, const char *site, const char *func,
                                         dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                         void (*thread_fn)(void *), void *ctx,
                                         void (*ctx_free)(void *))
{
    cudaError_t e = cudaSuccess;
    CUstream_st *st = nullptr;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (forked())
        e = cudaErrorInitializationError;
    else if (!(st = resolve(s)))
        e = cudaErrorInvalidResourceHandle;
    else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
             grid.x > 0x7fffffffu || threads == 0 || threads > 1024 || block.z > 64)
        e = cudaErrorInvalidConfiguration;
    else if (smem > 0) {
        /* the kernels declare their shared memory statically; dynamic shared
         * memory is not emulated, and saying so beats running it wrong */
        fprintf(stderr, "cuda-emu: kernel %s (%s): dynamic shared memory is not emulated\n", kernel,
                site);
        e = cudaErrorNotSupported;
    } else if ((e = sticky_of(st->dev)) != cudaSuccess) {
    }
    if (e != cudaSuccess) {
        ctx_free(ctx);
        return set_last(e);
    }
    emu_launch *L = new emu_launch{kernel, site, func, grid, block, thread_fn, ctx, ctx_free};
    enqueue(st, launch_task, L, launch_free);
    return cudaSuccess;
}

/* --- errors -------------------------------------------------------------------- */

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = tls_last;
    tls_last = cudaSuccess;
    if (e == cudaSuccess && tls_device < g().ndev) e = sticky_of(tls_device);
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    cudaError_t e = tls_last;
    if (e == cudaSuccess && tls_device < g().ndev) e = sticky_of(tls_device);
    return e;
}

namespace {
struct err_text {
    cudaError_t e;
    const char *name, *text;
};
const err_text ERRS[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
} // namespace

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    for (const err_text &t : ERRS)
        if (t.e == e) return t.name;
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    if (e == cudaErrorLaunchFailure) {
        /* name the kernel that failed (one message per process is enough:
         * the first failure is sticky) */
        static thread_local std::string text;
        std::lock_guard<std::mutex> l(g().m);
        if (!g().launch_error.empty()) {
            text = "unspecified launch failure (emulated " + g().launch_error + ")";
            return text.c_str();
        }
    }
    for (const err_text &t : ERRS)
        if (t.e == e) return t.text;
    return "unrecognized error code";
}

/* --- devices --------------------------------------------------------------------- */

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    ENTER();
    if (!count) return set_last(cudaErrorInvalidValue);
    *count = g().ndev;
    return g().ndev ? cudaSuccess : set_last(cudaErrorNoDevice);
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    ENTER();
    if (device < 0 || device >= g().ndev) return set_last(cudaErrorInvalidDevice);
    tls_device = device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *device)
{
    ENTER();
    if (!device) return set_last(cudaErrorInvalidValue);
    *device = tls_device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    ENTER();
    if (!p) return set_last(cudaErrorInvalidValue);
    if (device < 0 || device >= g().ndev) return set_last(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (emulated)");
    p->totalGlobalMem = DEVICE_BYTES;
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->canMapHostMemory = 1;
    p->unifiedAddressing = 1;
    p->pciBusID = 0x18 + device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    if (tls_device >= g().ndev) return set_last(cudaErrorNoDevice);
    drain_device(tls_device);
    return set_last(sticky_of(tls_device));
}

extern "C" cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    ENTER();
    if (!can) return set_last(cudaErrorInvalidValue);
    if (device < 0 || device >= g().ndev || peer < 0 || peer >= g().ndev)
        return set_last(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    ENTER();
    if (flags != 0) return set_last(cudaErrorInvalidValue);
    if (peer < 0 || peer >= g().ndev || peer == tls_device) return set_last(cudaErrorInvalidDevice);
    device *d = g().devs[(size_t)tls_device];
    std::lock_guard<std::mutex> l(d->m);
    if (!d->peers.insert(peer).second) return set_last(cudaErrorPeerAccessAlreadyEnabled);
    return cudaSuccess;
}

extern "C" cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v) return set_last(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v) return set_last(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    ENTER();
    if (!free_bytes || !total_bytes) return set_last(cudaErrorInvalidValue);
    if (tls_device >= g().ndev) return set_last(cudaErrorNoDevice);
    std::lock_guard<std::mutex> l(g().m);
    *total_bytes = DEVICE_BYTES;
    *free_bytes = DEVICE_BYTES - g().used[tls_device];
    return cudaSuccess;
}

extern "C" cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
    ENTER();
    if (!a || !func) return set_last(cudaErrorInvalidDeviceFunction);
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = 90;
    a->binaryVersion = 90;
    return cudaSuccess;
}

/* --- memory ------------------------------------------------------------------------ */

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    ENTER();
    if (tls_device >= g().ndev) return set_last(cudaErrorNoDevice);
    return set_last(mem_new(p, bytes, tls_device));
}

extern "C" cudaError_t cudaFree(void *p)
{
    ENTER();
    return set_last(mem_free(p, true));
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    ENTER();
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return set_last(cudaErrorInvalidValue);
    return set_last(mem_new(p, bytes, -1));
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }

extern "C" cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    return set_last(mem_free(p, false));
}

extern "C" cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags)
{
    ENTER();
    if (!dev || flags != 0 || !emu_is_pinned_span(host, 1)) return set_last(cudaErrorInvalidValue);
    *dev = host; /* unified addressing: the same address */
    return cudaSuccess;
}

namespace {
/* Where a copy's pointer lies: 1 device, 2 pinned, 0 pageable host; -1 a
 * known allocation overrun. */
int where(const void *p, size_t n)
{
    int d;
    return span_kind(p, n, &d);
}

cudaError_t copy_common(void *dst, const void *src, size_t n, int value, enum cudaMemcpyKind kind,
                        cudaStream_t s, bool sync)
{
    CUstream_st *st = resolve(s);
    if (!st) return cudaErrorInvalidResourceHandle;
    cudaError_t e = sticky_of(st->dev);
    if (e != cudaSuccess) return e;
    if (n == 0) return cudaSuccess;
    if (!dst || (value < 0 && !src)) return cudaErrorInvalidValue;
    int wd = where(dst, n), ws = value < 0 ? where(src, n) : 1;
    if (wd < 0 || ws < 0) return cudaErrorInvalidValue;
    bool dst_dev = wd == 1, src_dev = ws == 1;
    switch (kind) {
    case cudaMemcpyHostToHost: if (dst_dev || src_dev) return cudaErrorInvalidValue; break;
    case cudaMemcpyHostToDevice: if (!dst_dev && wd != 2) return cudaErrorInvalidValue; break;
    case cudaMemcpyDeviceToHost: if (!src_dev && ws != 2) return cudaErrorInvalidValue; break;
    case cudaMemcpyDeviceToDevice:
        if ((!dst_dev && wd != 2) || (!src_dev && ws != 2)) return cudaErrorInvalidValue;
        break;
    case cudaMemcpyDefault: break;
    default: return cudaErrorInvalidMemcpyDirection;
    }
    if (value >= 0 && wd == 0) return cudaErrorInvalidValue; /* memset of pageable memory */
    copy_args *c = new copy_args{dst, src, n, value, nullptr};
    /* pageable source: staged at the call, as CUDA does before returning */
    if (value < 0 && ws == 0) {
        c->owned = malloc(n);
        if (!c->owned) {
            delete c;
            return cudaErrorMemoryAllocation;
        }
        memcpy(c->owned, src, n);
        c->src = c->owned;
    }
    enqueue(st, copy_task, c, copy_free);
    /* pageable destination: the call returns once the data is there */
    if (sync || (value < 0 && wd == 0)) {
        drain(st);
        return sticky_of(st->dev);
    }
    return cudaSuccess;
}
} // namespace

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    ENTER();
    return set_last(copy_common(dst, src, bytes, -1, kind, nullptr, true));
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       enum cudaMemcpyKind kind, cudaStream_t s)
{
    ENTER();
    return set_last(copy_common(dst, src, bytes, -1, kind, s, false));
}

extern "C" cudaError_t cudaMemset(void *dst, int value, size_t bytes)
{
    ENTER();
    /* on the legacy stream; this emulation completes it before returning */
    return set_last(copy_common(dst, nullptr, bytes, value & 0xff, cudaMemcpyDefault, nullptr, true));
}

extern "C" cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    ENTER();
    return set_last(copy_common(dst, nullptr, bytes, value & 0xff, cudaMemcpyDefault, s, false));
}

/* --- streams and events ------------------------------------------------------------- */

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    ENTER();
    if (!s || (flags & ~1u)) return set_last(cudaErrorInvalidValue);
    if (tls_device >= g().ndev) return set_last(cudaErrorNoDevice);
    CUstream_st *st = stream_new(tls_device, flags, false);
    device *d = g().devs[(size_t)tls_device];
    {
        std::lock_guard<std::mutex> l(d->m);
        d->streams.insert(st);
    }
    std::lock_guard<std::mutex> l(g().m);
    g().live_streams.insert(st);
    *s = st;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    ENTER();
    if (!s) return set_last(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> l(g().m);
        if (!g().live_streams.erase(s)) return set_last(cudaErrorInvalidResourceHandle);
    }
    device *d = g().devs[(size_t)s->dev];
    {
        std::lock_guard<std::mutex> l(d->m);
        d->streams.erase(s);
    }
    /* queued work still runs; the thread then ends and frees the stream */
    std::lock_guard<std::mutex> l(s->m);
    s->stop = true;
    s->cv.notify_one();
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    ENTER();
    CUstream_st *st = resolve(s);
    if (!st) return set_last(cudaErrorInvalidResourceHandle);
    drain(st);
    return set_last(sticky_of(st->dev));
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t s)
{
    ENTER();
    CUstream_st *st = resolve(s);
    if (!st) return set_last(cudaErrorInvalidResourceHandle);
    cudaError_t e = sticky_of(st->dev);
    if (e != cudaSuccess) return set_last(e);
    return last_of(st)->query() ? cudaSuccess : cudaErrorNotReady;
}

extern "C" cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device)
{
    ENTER();
    if (!device) return set_last(cudaErrorInvalidValue);
    CUstream_st *st = resolve(s);
    if (!st) return set_last(cudaErrorInvalidResourceHandle);
    *device = st->dev;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    ENTER();
    if (!e || (flags & ~3u)) return set_last(cudaErrorInvalidValue);
    CUevent_st *ev = new CUevent_st;
    ev->flags = flags;
    std::lock_guard<std::mutex> l(g().m);
    g().live_events.insert(ev);
    *e = ev;
    return cudaSuccess;
}

namespace {
bool event_live(cudaEvent_t e)
{
    std::lock_guard<std::mutex> l(g().m);
    return e && g().live_events.count(e);
}
std::shared_ptr<marker> event_last(cudaEvent_t e)
{
    std::lock_guard<std::mutex> l(e->m);
    return e->last;
}
} // namespace

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    ENTER();
    {
        std::lock_guard<std::mutex> l(g().m);
        if (!e || !g().live_events.erase(e)) return set_last(cudaErrorInvalidResourceHandle);
    }
    delete e; /* pending records hold their markers themselves */
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ENTER();
    if (!event_live(e)) return set_last(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    if (!st) return set_last(cudaErrorInvalidResourceHandle);
    auto mk = std::make_shared<marker>();
    {
        std::lock_guard<std::mutex> l(e->m);
        e->last = mk;
    }
    enqueue(st, marker_set_task, new std::shared_ptr<marker>(mk), marker_release);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
    ENTER();
    if (!event_live(e)) return set_last(cudaErrorInvalidResourceHandle);
    auto mk = event_last(e);
    return !mk || mk->query() ? cudaSuccess : cudaErrorNotReady;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    ENTER();
    if (!event_live(e)) return set_last(cudaErrorInvalidResourceHandle);
    auto mk = event_last(e);
    if (mk) mk->wait();
    return set_last(tls_device < g().ndev ? sticky_of(tls_device) : cudaSuccess);
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    ENTER();
    if (flags != 0) return set_last(cudaErrorInvalidValue);
    if (!event_live(e)) return set_last(cudaErrorInvalidResourceHandle);
    CUstream_st *st = resolve(s);
    if (!st) return set_last(cudaErrorInvalidResourceHandle);
    auto mk = event_last(e);
    if (!mk) return cudaSuccess; /* never recorded: nothing to wait for */
    enqueue(st, marker_wait_task, new std::shared_ptr<marker>(mk), marker_release);
    return cudaSuccess;
}
