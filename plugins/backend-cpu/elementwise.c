/* elementwise.c — backend-cpu add, scale and cast over flat buffers.
 * y may alias a or b in add; cast converts between F32, F16, BF16 and F64
 * (round to nearest even, through libtfcore's conversions) and copies when
 * the two dtypes are the same. */
#include <string.h>

#include "cpu.h"
#include "tfcore/dtype.h"

#define EW_QUANTUM 64

CPU_CLONES
static void add_span(const float *a, const float *b, float *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

CPU_CLONES
static void scale_span(float *x, size_t n, float alpha)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

tf_status cpu_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y, size_t n,
                  tf_dtype dt, tf_error *err)
{
    (void)s;
    const char *op = "add";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "a", dt)))
        return st;
    if (n == 0) return TF_OK;
    if ((st = cpu_need(err, op, "a", a)) || (st = cpu_need(err, op, "b", b)) ||
        (st = cpu_need(err, op, "y", y)))
        return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi)
            add_span((const float *)a + lo, (const float *)b + lo, (float *)y + lo, hi - lo);
    }
    return TF_OK;
}

tf_status cpu_scale(tf_backend *be, tf_stream *s, void *x, size_t n, float alpha, tf_dtype dt,
                    tf_error *err)
{
    (void)s;
    const char *op = "scale";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "x", dt)))
        return st;
    if (n == 0) return TF_OK;
    if ((st = cpu_need(err, op, "x", x))) return st;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        if (lo < hi) scale_span((float *)x + lo, hi - lo, alpha);
    }
    return TF_OK;
}

static bool castable(tf_dtype dt)
{
    return dt == TF_DTYPE_F32 || dt == TF_DTYPE_F16 || dt == TF_DTYPE_BF16 || dt == TF_DTYPE_F64;
}

static double load(const void *p, tf_dtype dt, size_t i)
{
    switch (dt) {
    case TF_DTYPE_F32: return ((const float *)p)[i];
    case TF_DTYPE_F16: return tf_f16_to_f32(((const unsigned short *)p)[i]);
    case TF_DTYPE_BF16: return tf_bf16_to_f32(((const unsigned short *)p)[i]);
    default: return ((const double *)p)[i];
    }
}

/* Doubles reach f16/bf16 through float: two roundings, which can differ from
 * one direct rounding in the last bit for a double within 2^-29 of a tie. */
static void store(void *p, tf_dtype dt, size_t i, double v)
{
    switch (dt) {
    case TF_DTYPE_F32: ((float *)p)[i] = (float)v; break;
    case TF_DTYPE_F16: ((unsigned short *)p)[i] = tf_f32_to_f16((float)v); break;
    case TF_DTYPE_BF16: ((unsigned short *)p)[i] = tf_f32_to_bf16((float)v); break;
    default: ((double *)p)[i] = v; break;
    }
}

tf_status cpu_cast(tf_backend *be, tf_stream *s, const void *src, tf_dtype src_dt, void *dst,
                   tf_dtype dst_dt, size_t n, tf_error *err)
{
    (void)s;
    const char *op = "cast";
    if (cpu_need(err, op, "backend", be)) return TF_ERR_RUNTIME;
    if (!castable(src_dt) || !castable(dst_dt)) {
        const char *a = tf_dtype_name(src_dt), *b = tf_dtype_name(dst_dt);
        return cpu_fail(err, TF_ERR_PLUGIN, op,
                        "cast from %s to %s is not supported (F32, F16, BF16, F64 only)",
                        a ? a : "?", b ? b : "?");
    }
    if (n == 0) return TF_OK;
    if (cpu_need(err, op, "src", src) || cpu_need(err, op, "dst", dst)) return TF_ERR_RUNTIME;
    if (src_dt == dst_dt) {
        memmove(dst, src, n * tf_dtype_size(src_dt));
        return TF_OK;
    }
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), EW_QUANTUM, &lo, &hi);
        for (size_t i = lo; i < hi; i++) store(dst, dst_dt, i, load(src, src_dt, i));
    }
    return TF_OK;
}
