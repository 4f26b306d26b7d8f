/* emu_internal.h — what runtime.cc and simt.cc share inside the CUDA
 * emulation (the other parts use emu.h). */
#ifndef TF_CUDA_EMU_INTERNAL_H
#define TF_CUDA_EMU_INTERNAL_H

#include <string>

#include "emu.h"
#include "emu_simt.h"

/* One kernel launch, as the stream thread runs it. */
struct emu_launch {
    const char *kernel, *site, *func; /* names for errors */
    dim3 grid, block;
    void (*thread_fn)(void *); /* one GPU thread: the kernel with its arguments */
    void *ctx;
    void (*ctx_free)(void *);
};

/* Run every block of the launch on this host thread (simt.cc). On failure
 * (a deadlock, a bad collective, emu_kernel_fail) returns
 * cudaErrorLaunchFailure and says why in *error. */
cudaError_t emu_run_grid(const emu_launch *L, std::string *error);

#endif
