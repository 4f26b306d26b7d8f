/* host_blas.c — the OpenBLAS kernels tfcore asks for (host_blas.h).
 *
 * OpenBLAS (backend-cpu's GEMMs) picks its kernels when it is loaded, by the
 * CPU's family and model numbers. A model it does not know gets its generic
 * SSE3 "Prescott" kernels, whatever the CPU supports: OpenBLAS 0.3.21
 * (Debian 12) does that on a KVM guest that reports an Intel Xeon of family
 * 6, model 207 with AVX-512, where the 2-thread sgemm ceiling measured 63.8
 * GFLOP/s with those kernels and 299.1 with its SkylakeX ones (2026-12-07,
 * bench/sgemm_ceiling). So before any plugin is loaded tfcore names the
 * kernels by the CPU's features, unless OPENBLAS_CORETYPE is already set
 * (the user's, or the machine's: that choice always stands). It names only
 * the AVX-512 ones: on the AVX-512 CPUs OpenBLAS knows it picks the same
 * kernels itself (SkylakeX, or Cooperlake: SkylakeX's sgemm with bf16
 * extras), so the setting changes nothing there.
 * Which kernels a run used is in backend-cpu's device name. */
#include "host_blas.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

const char *tf_host_blas_coretype(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    /* __builtin_cpu_supports reports AVX-512 only where the OS saves its state */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
#endif
    return NULL;
}

/* The coretype to set now: NULL when the environment names one or tfcore has none. */
static const char *wanted(void)
{
    const char *have = getenv("OPENBLAS_CORETYPE");
    return have && *have ? NULL : tf_host_blas_coretype();
}

static pthread_once_t prepare_once = PTHREAD_ONCE_INIT;

static void prepare(void)
{
    const char *core = wanted();
    if (core) setenv("OPENBLAS_CORETYPE", core, 1);
}

void tf_host_blas_prepare(void) { pthread_once(&prepare_once, prepare); }

void tf_host_blas_reexec(char *const argv[])
{
    const char *core = wanted();
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    char *self[] = {(char *)"program", NULL};
    execv("/proc/self/exe", argv && argv[0] ? argv : self);
}
