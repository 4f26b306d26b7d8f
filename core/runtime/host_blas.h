/* host_blas.h — which OpenBLAS kernels the process asks for (host_blas.c). */
#ifndef TFCORE_HOST_BLAS_H
#define TFCORE_HOST_BLAS_H

/* The OPENBLAS_CORETYPE tfcore asks for on this CPU: "SkylakeX" on AVX-512
 * (F, CD, BW, DQ, VL; the OS saving its state), "Cooperlake" with
 * AVX512_BF16 too; NULL elsewhere (OpenBLAS's own choice stands). */
const char *tf_host_blas_coretype(void);

/* Before the first plugin is loaded (registry.c): set OPENBLAS_CORETYPE to
 * tf_host_blas_coretype() unless the environment names a coretype already.
 * Once per process, before other threads exist. */
void tf_host_blas_prepare(void);

/* For a program linked with OpenBLAS itself, whose kernels were chosen
 * before main: when tf_host_blas_prepare would set OPENBLAS_CORETYPE, set it
 * and execute /proc/self/exe again with argv (NULL: the program's name
 * alone). Returns when nothing needed setting, or when the exec failed. */
void tf_host_blas_reexec(char *const argv[]);

#endif
