/* sgemm_ceiling.c — the CPU's practical fp32 GEMM ceiling: OpenBLAS
 * cblas_sgemm on large square matrices, median GFLOP/s of several runs.
 *   bench/sgemm_ceiling [N] [REPEATS]    (default 2048, 7)
 * Prints one line: "sgemm N=2048 threads=T: G GFLOP/s (median of R)". */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "host_blas.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    tf_host_blas_reexec(argv); /* the kernels tfcore's processes get (core/runtime/host_blas.c) */
    int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 7;
    if (n < 64 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: sgemm_ceiling [N >= 64] [REPEATS 1..100]\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    double *g = malloc((size_t)reps * sizeof *g);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        g[r] = 2.0 * n * (double)n * n / (now() - t0) / 1e9;
    }
    qsort(g, (size_t)reps, sizeof *g, cmp);
    printf("sgemm N=%d threads=%d: %.1f GFLOP/s (median of %d)\n", n, openblas_get_num_threads(), g[reps / 2], reps);
    free(a);
    free(b);
    free(c);
    free(g);
    return 0;
}
