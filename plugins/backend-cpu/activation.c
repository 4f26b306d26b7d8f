/* activation.c — backend-cpu GELU (exact erf form and tanh form) and tanh,
 * forward and backward, elementwise over flat f32 buffers. The math is in
 * cpu_math.h; y may alias x and dx may alias dy. */
#include "cpu.h"
#include "cpu_math.h"

CPU_CLONES
static void gelu_erf_span(const float *x, float *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = cpu_gelu_erf(x[i]);
}

CPU_CLONES
static void gelu_tanh_span(const float *x, float *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = cpu_gelu_tanh(x[i]);
}

void cpu_gelu_span(const float *x, float *y, size_t n, tf_gelu_kind kind)
{
    if (kind == TF_GELU_TANH)
        gelu_tanh_span(x, y, n);
    else
        gelu_erf_span(x, y, n);
}

CPU_CLONES
static void gelu_erf_bwd_span(const float *dy, const float *x, float *dx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * cpu_gelu_erf_grad(x[i]);
}

CPU_CLONES
static void gelu_tanh_bwd_span(const float *dy, const float *x, float *dx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * cpu_gelu_tanh_grad(x[i]);
}

CPU_CLONES
static void tanh_span(const float *x, float *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = cpu_tanhf(x[i]);
}

CPU_CLONES
static void tanh_bwd_span(const float *dy, const float *y, float *dx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* The pieces a team cuts an elementwise op into: 64 elements (a cache line
 * of floats times 16) so no two threads write the same line. */
#define EW_QUANTUM 64

static tf_status check_unary(tf_error *err, const char *op, tf_backend *be, const void *a,
                             const char *an, const void *b, const char *bn, const void *c,
                             const char *cn, size_t n, tf_dtype dt)
{
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, an, dt)))
        return st;
    if (n == 0) return TF_OK;
    if ((st = cpu_need(err, op, an, a)) || (st = cpu_need(err, op, bn, b))) return st;
    if (cn && (st = cpu_need(err, op, cn, c))) return st;
    return TF_OK;
}

static tf_status check_gelu_kind(tf_error *err, const char *op, tf_gelu_kind kind)
{
    if (kind == TF_GELU_ERF || kind == TF_GELU_TANH) return TF_OK;
    return cpu_fail(err, TF_ERR_RUNTIME, op, "unknown gelu kind %d", (int)kind);
}

tf_status cpu_gelu_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                       tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    (void)s;
    tf_status st;
    if ((st = check_unary(err, "gelu_fwd", be, x, "x", y, "y", NULL, NULL, n, dt)) ||
        (st = check_gelu_kind(err, "gelu_fwd", kind)))
        return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi) cpu_gelu_span((const float *)x + lo, (float *)y + lo, hi - lo, kind);
    }
    return TF_OK;
}

tf_status cpu_gelu_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *x, void *dx,
                       size_t n, tf_gelu_kind kind, tf_dtype dt, tf_error *err)
{
    (void)s;
    tf_status st;
    if ((st = check_unary(err, "gelu_bwd", be, dy, "dy", x, "x", dx, "dx", n, dt)) ||
        (st = check_gelu_kind(err, "gelu_bwd", kind)))
        return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi) {
            const float *a = (const float *)dy + lo, *b = (const float *)x + lo;
            float *c = (float *)dx + lo;
            if (kind == TF_GELU_TANH)
                gelu_tanh_bwd_span(a, b, c, hi - lo);
            else
                gelu_erf_bwd_span(a, b, c, hi - lo);
        }
    }
    return TF_OK;
}

tf_status cpu_tanh_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, size_t n,
                       tf_dtype dt, tf_error *err)
{
    (void)s;
    tf_status st = check_unary(err, "tanh_fwd", be, x, "x", y, "y", NULL, NULL, n, dt);
    if (st) return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi) tanh_span((const float *)x + lo, (float *)y + lo, hi - lo);
    }
    return TF_OK;
}

tf_status cpu_tanh_bwd(tf_backend *be, tf_stream *s, const void *dy, const void *y, void *dx,
                       size_t n, tf_dtype dt, tf_error *err)
{
    (void)s;
    tf_status st = check_unary(err, "tanh_bwd", be, dy, "dy", y, "y", dx, "dx", n, dt);
    if (st) return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi)
            tanh_bwd_span((const float *)dy + lo, (const float *)y + lo, (float *)dx + lo,
                          hi - lo);
    }
    return TF_OK;
}
