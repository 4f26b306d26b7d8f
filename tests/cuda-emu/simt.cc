/* simt.cc — runs a kernel's grid on the host (tests/cuda-emu/README.md).
 *
 * emu_run_grid runs on the stream's host thread. Blocks run one after
 * another; the threads of a block run as fibers on this thread.
 * A fiber runs threads of the block to completion one after another until a
 * thread has to wait (a barrier or a warp collective that not every lane
 * has reached); the scheduler then starts another fiber for the next
 * thread, so a kernel without barriers runs on one fiber, and a kernel with
 * them on one fiber per thread. Waiting fibers are resumed round-robin and
 * re-check their condition. A full round in which nothing arrives, finishes
 * or starts is a deadlock: the launch fails naming the kernel and what the
 * threads wait for.
 *
 * Fibers and their stacks belong to the host thread and are reused by
 * every launch on it. The switch is a few instructions of x86-64 assembly
 * (callee-saved registers and the stack pointer), not swapcontext: that one
 * makes a signal-mask system call per switch, and warp shuffles switch a
 * lot. ThreadSanitizer and AddressSanitizer are told about
 * every switch (their fiber APIs), so both see the fibers as they are. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "emu_internal.h"

#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

/* The scheduler's and the collectives' bookkeeping (block_run, warp_state,
 * the fiber pool) is not ThreadSanitizer-instrumented: it belongs to one host
 * thread and passes between that thread's fibers only at switches, which
 * tell ThreadSanitizer they synchronise, so there is no race in it to find;
 * its instrumented loads and stores were about a fifth of a ThreadSanitizer
 * run's time. What kernels read and write stays instrumented. */
#ifdef EMU_TSAN
#define EMU_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define EMU_NO_TSAN
#endif

#ifdef EMU_TSAN
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
}
#endif
#ifdef EMU_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
}
#endif

/* emu_ctx_switch(&save, to): saves the callee-saved registers and the x87/SSE
 * control words on the current stack, stores its pointer in *save and
 * continues on the stack `to` (one saved the same way, or a new one made by
 * ctx_new). System V x86-64 only. */
#if !defined(__x86_64__)
#error "the CUDA emulation's fiber switch is written for x86-64"
#endif
extern "C" void emu_ctx_switch(void **save, void *to);
extern "C" void emu_ctx_start(void);
asm(R"(
    .text
    .globl emu_ctx_switch
    .type emu_ctx_switch, @function
emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_ctx_switch, .-emu_ctx_switch
    .globl emu_ctx_start
    .type emu_ctx_start, @function
emu_ctx_start:
    call emu_fiber_main
    ud2
    .size emu_ctx_start, .-emu_ctx_start
    .section .note.GNU-stack,"",@progbits
    .text
)");
extern "C" void emu_fiber_main(void);

EMU_INDEX_TLS uint3 threadIdx;
EMU_INDEX_TLS uint3 blockIdx;
EMU_INDEX_TLS dim3 blockDim;
EMU_INDEX_TLS dim3 gridDim;

namespace {

#if defined(EMU_TSAN) || defined(EMU_ASAN)
const size_t STACK_BYTES = 1u << 20; /* sanitizer frames are larger */
#else
const size_t STACK_BYTES = 256u << 10;
#endif

enum wait_kind { W_NONE, W_BARRIER, W_WARP };

struct fiber {
    void *sp = nullptr; /* saved stack pointer while not running */
    char *map = nullptr; /* guard page + stack */
    size_t map_bytes = 0;
    int thread = -1;     /* the block thread it runs, -1: none (idle) */
    bool started = false;
    wait_kind waiting = W_NONE;
#ifdef EMU_TSAN
    void *tsan = nullptr;
#endif
#ifdef EMU_ASAN
    void *fake_stack = nullptr;
#endif
};

struct warp_state {
    unsigned mask = 0, arrived = 0;
    emu_warp_fn fn = nullptr;
    const char *what = nullptr;
    const void *in[32];
    void *out[32];
    bool done[32];
};

struct block_run {
    const emu_launch *L = nullptr;
    int nthreads = 0, next = 0, exited = 0;
    unsigned long events = 0; /* arrivals, completions, starts: progress */
    int bar_arrived = 0, bar_count = 0;
    unsigned long bar_gen = 0;
    int bar_result = 0;
    std::vector<warp_state> warps;
    std::vector<uint3> tid; /* linear thread -> threadIdx */
    bool failed = false;
    std::string error;
};

/* One per host thread that runs kernels. */
struct sm_state {
    void *sched_sp = nullptr;
    std::vector<fiber *> fibers; /* the pool, reused */
    fiber *cur = nullptr;
    block_run *blk = nullptr;
#ifdef EMU_TSAN
    void *tsan_sched = nullptr;
#endif
#ifdef EMU_ASAN
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    void *sched_fake = nullptr;
#endif
    ~sm_state()
    {
        for (fiber *f : fibers) {
#ifdef EMU_TSAN
            if (f->tsan) __tsan_destroy_fiber(f->tsan);
#endif
            munmap(f->map, f->map_bytes);
            delete f;
        }
    }
};

/* tls_sm: the pointer every kernel-side call reads first, initial-exec as
 * the indices; the state itself needs thread_local's destructor */
__thread sm_state *tls_sm __attribute__((tls_model("initial-exec")));
thread_local sm_state tls_sm_storage;

sm_state &sm()
{
    if (!tls_sm) tls_sm = &tls_sm_storage;
    return *tls_sm;
}

/* Switch from the scheduler into fiber f. */
EMU_NO_TSAN void switch_to_fiber(sm_state &S, fiber *f)
{
    S.cur = f;
    const block_run &B = *S.blk;
    if (f->thread >= 0) threadIdx = B.tid[(size_t)f->thread];
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&S.sched_fake, f->map + getpagesize(),
                                   f->map_bytes - (size_t)getpagesize());
#endif
#ifdef EMU_TSAN
    __tsan_switch_to_fiber(f->tsan, 0);
#endif
    emu_ctx_switch(&S.sched_sp, f->sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(S.sched_fake, nullptr, nullptr);
#endif
    S.cur = nullptr;
}

/* Switch from the running fiber back to the scheduler. dying: the fiber will
 * be reset before it runs again (its frames are abandoned). */
EMU_NO_TSAN void switch_to_sched(sm_state &S, bool dying)
{
    fiber *f = S.cur;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(dying ? nullptr : &f->fake_stack, S.sched_bottom, S.sched_size);
#else
    (void)dying;
#endif
#ifdef EMU_TSAN
    __tsan_switch_to_fiber(S.tsan_sched, 0);
#endif
    emu_ctx_switch(&f->sp, S.sched_sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
    /* back in this fiber: restore its thread's index */
    if (f->thread >= 0) threadIdx = S.blk->tid[(size_t)f->thread];
}

void fiber_reset(fiber *f)
{
    /* a stack that emu_ctx_switch "returns" into emu_ctx_start from: the
     * control words, six registers, the return address */
    uintptr_t top = ((uintptr_t)f->map + f->map_bytes) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 64);
    uint32_t ctl[2] = {0x1f80u, 0x037fu}; /* MXCSR, x87 control word: the defaults */
    memcpy(sp, ctl, 8);
    for (int i = 1; i <= 6; i++) sp[i] = 0;
    sp[7] = (uint64_t)(uintptr_t)emu_ctx_start;
    f->sp = sp;
#ifdef EMU_ASAN
    __asan_unpoison_memory_region(f->map + getpagesize(), f->map_bytes - (size_t)getpagesize());
    f->fake_stack = nullptr;
#endif
#ifdef EMU_TSAN
    if (f->tsan) __tsan_destroy_fiber(f->tsan);
    f->tsan = __tsan_create_fiber(0);
#endif
    f->thread = -1;
    f->started = false;
    f->waiting = W_NONE;
}

fiber *fiber_new(void)
{
    fiber *f = new fiber;
    size_t page = (size_t)getpagesize();
    f->map_bytes = STACK_BYTES + page;
    void *m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        delete f;
        return nullptr;
    }
    f->map = (char *)m;
    mprotect(f->map, page, PROT_NONE); /* stack overflow: a fault, not corruption */
    fiber_reset(f);
    return f;
}

} // namespace

/* Block-thread body: runs threads of the current block until none is left,
 * then parks; resumed for the next block. */
EMU_NO_TSAN extern "C" void emu_fiber_main(void)
{
    sm_state &S = sm();
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.sched_bottom, &S.sched_size);
#endif
    for (;;) {
        block_run &B = *S.blk;
        fiber *f = S.cur;
        while (!B.failed && B.next < B.nthreads) {
            int t = B.next++;
            f->thread = t;
            threadIdx = B.tid[(size_t)t];
            B.events++;
            B.L->thread_fn(B.L->ctx);
            f->thread = -1;
            B.exited++;
            B.events++;
        }
        switch_to_sched(S, false); /* idle until the next block */
    }
}

namespace {

void block_fail(block_run &B, const std::string &msg)
{
    if (!B.failed) {
        B.failed = true;
        B.error = msg;
    }
}

/* Wait (yielding) until cond() holds. */
template <class F> EMU_NO_TSAN void wait_until(sm_state &S, wait_kind why, F cond)
{
    fiber *f = S.cur;
    while (!cond()) {
        f->waiting = why;
        switch_to_sched(S, false);
        if (S.blk->failed) {
            f->waiting = W_NONE;
            switch_to_sched(S, true); /* never resumed: the block is being torn down */
        }
    }
    f->waiting = W_NONE;
}

std::string thread_name(const block_run &B, int t)
{
    const uint3 &i = B.tid[(size_t)t];
    char buf[96];
    snprintf(buf, sizeof buf, "block (%u,%u,%u) thread (%u,%u,%u)", blockIdx.x, blockIdx.y,
             blockIdx.z, i.x, i.y, i.z);
    return buf;
}

/* Run one block to completion. False: it failed (B.error says why). */
EMU_NO_TSAN bool run_block(sm_state &S, block_run &B)
{
    B.next = B.exited = 0;
    B.bar_arrived = B.bar_count = 0;
    for (warp_state &w : B.warps) {
        w.mask = w.arrived = 0;
        memset(w.done, 0, sizeof w.done);
    }
    size_t active = 0; /* fibers [0, active) hold a started thread or are running */
    for (;;) {
        unsigned long before = B.events;
        /* resume the waiting fibers, in order */
        for (size_t i = 0; i < active && !B.failed; i++) {
            fiber *f = S.fibers[i];
            if (f->thread >= 0) switch_to_fiber(S, f);
        }
        /* start fibers for threads not yet started, while there are any.
         * Every fiber in [0, active) holds a thread here: a fiber goes idle
         * only once no thread is left to start (emu_fiber_main), so the next
         * one comes from the pool (or is made). */
        while (!B.failed && B.next < B.nthreads) {
            if (active == S.fibers.size()) {
                fiber *nf = fiber_new();
                if (!nf) {
                    block_fail(B, "out of memory for the block's thread stacks");
                    break;
                }
                S.fibers.push_back(nf);
            }
            switch_to_fiber(S, S.fibers[active++]);
        }
        if (B.failed) break;
        if (B.exited == B.nthreads) break;
        if (B.events == before) {
            /* nobody moved: a deadlock. Say what the first waiters wait for. */
            std::string why = "deadlock:";
            int shown = 0;
            for (size_t i = 0; i < active && shown < 3; i++) {
                fiber *f = S.fibers[i];
                if (f->thread < 0) continue;
                why += shown++ ? "; " : " ";
                why += thread_name(B, f->thread);
                if (f->waiting == W_BARRIER) {
                    why += " waits at __syncthreads (";
                    why += std::to_string(B.bar_arrived) + " of " +
                           std::to_string(B.nthreads - B.exited) + " live threads arrived)";
                } else {
                    const warp_state &w = B.warps[(size_t)f->thread / 32];
                    char m[96];
                    snprintf(m, sizeof m, " waits in %s (mask %#x, arrived %#x)",
                             w.what ? w.what : "a warp collective", w.mask, w.arrived);
                    why += m;
                }
            }
            block_fail(B, why);
            break;
        }
    }
    if (B.failed) {
        /* abandon every fiber's frames: they restart clean */
        for (size_t i = 0; i < active; i++) fiber_reset(S.fibers[i]);
        return false;
    }
    return true;
}

} // namespace

/* --- the kernel-side API ----------------------------------------------------- */

extern "C" void emu_syncthreads(void) { (void)emu_syncthreads_count(0); }

EMU_NO_TSAN extern "C" int emu_syncthreads_count(int pred)
{
    sm_state &S = sm();
    if (!S.cur) {
        fprintf(stderr, "cuda-emu: __syncthreads called outside a kernel\n");
        abort();
    }
    block_run &B = *S.blk;
    unsigned long gen = B.bar_gen;
    B.bar_arrived++;
    B.bar_count += pred != 0;
    B.events++;
    /* exited threads no longer take part (as on the GPU) */
    auto complete = [&] {
        if (B.bar_gen != gen) return true;
        if (B.bar_arrived == B.nthreads - B.exited) {
            B.bar_result = B.bar_count;
            B.bar_arrived = B.bar_count = 0;
            B.bar_gen++;
            B.events++;
            return true;
        }
        return false;
    };
    wait_until(S, W_BARRIER, complete);
    return B.bar_result;
}

EMU_NO_TSAN extern "C" unsigned emu_lane_id(void)
{
    sm_state &S = sm();
    return S.cur ? (unsigned)S.cur->thread & 31u : 0u;
}

EMU_NO_TSAN extern "C" void emu_warp_collective(unsigned mask, emu_warp_fn fn, const void *in, void *out,
                                    const char *what)
{
    sm_state &S = sm();
    if (!S.cur) {
        fprintf(stderr, "cuda-emu: %s called outside a kernel\n", what);
        abort();
    }
    block_run &B = *S.blk;
    int t = S.cur->thread, lane = t & 31, warp = t >> 5;
    int lanes = B.nthreads - warp * 32 < 32 ? B.nthreads - warp * 32 : 32;
    unsigned exist = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
    if (!(mask >> lane & 1u))
        emu_kernel_fail("%s: lane %d calls it with mask %#x, which leaves it out", what, lane, mask);
    if (mask & ~exist)
        emu_kernel_fail("%s: mask %#x names lanes the warp does not have (%d threads)", what, mask,
                        lanes);
    warp_state &w = B.warps[(size_t)warp];
    /* another group of lanes is mid-way through a collective: wait for it
     * unless it involves this lane's lanes (then the two disagree) */
    wait_until(S, W_WARP, [&] {
        if (w.arrived == 0 || w.mask == mask) return true;
        if (w.mask & mask)
            emu_kernel_fail("%s: lanes disagree on the mask (%#x and %#x)", what, w.mask, mask);
        return false;
    });
    if (w.arrived == 0) {
        w.mask = mask;
        w.fn = fn;
        w.what = what;
        for (int i = 0; i < 32; i++) {
            w.in[i] = nullptr;
            w.out[i] = nullptr;
        }
    } else if (w.fn != fn) {
        emu_kernel_fail("lanes of warp %d meet at different collectives (%s and %s)", warp, w.what,
                        what);
    }
    w.in[lane] = in;
    w.out[lane] = out;
    w.done[lane] = false;
    w.arrived |= 1u << lane;
    B.events++;
    if (w.arrived == mask) {
        fn(mask, w.in, w.out);
        for (int i = 0; i < 32; i++)
            if (mask >> i & 1u) w.done[i] = true;
        w.arrived = 0;
        B.events++;
    }
    wait_until(S, W_WARP, [&] { return w.done[lane]; });
    w.done[lane] = false;
}

extern "C" void emu_kernel_fail(const char *fmt, ...)
{
    sm_state &S = sm();
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!S.cur) {
        fprintf(stderr, "cuda-emu: %s (outside a kernel)\n", buf);
        abort();
    }
    block_run &B = *S.blk;
    std::string msg = thread_name(B, S.cur->thread >= 0 ? S.cur->thread : 0) + ": " + buf;
    block_fail(B, msg);
    switch_to_sched(S, true);
    abort(); /* not reached: a failed block's fibers are reset, never resumed */
}

/* --- the runtime's side -------------------------------------------------------- */

EMU_NO_TSAN cudaError_t emu_run_grid(const emu_launch *L, std::string *error)
{
    sm_state &S = sm();
    block_run B;
    B.L = L;
    B.nthreads = (int)(L->block.x * L->block.y * L->block.z);
    B.warps.resize((size_t)(B.nthreads + 31) / 32);
    B.tid.resize((size_t)B.nthreads);
    for (unsigned z = 0, t = 0; z < L->block.z; z++)
        for (unsigned y = 0; y < L->block.y; y++)
            for (unsigned x = 0; x < L->block.x; x++) B.tid[t++] = uint3{x, y, z};
#ifdef EMU_TSAN
    if (!S.tsan_sched) S.tsan_sched = __tsan_get_current_fiber();
#endif
    block_run *saved = S.blk;
    S.blk = &B;
    blockDim = L->block;
    gridDim = L->grid;
    cudaError_t rc = cudaSuccess;
    for (unsigned z = 0; z < L->grid.z && rc == cudaSuccess; z++)
        for (unsigned y = 0; y < L->grid.y && rc == cudaSuccess; y++)
            for (unsigned x = 0; x < L->grid.x; x++) {
                blockIdx = uint3{x, y, z};
                if (!run_block(S, B)) {
                    *error = B.error;
                    rc = cudaErrorLaunchFailure;
                    break;
                }
            }
    S.blk = saved;
    return rc;
}
