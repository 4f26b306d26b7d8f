/* dropout.c — backend-cpu inverted dropout, as torch's: y = x * (keep / (1-p))
 * with keep drawn by the Philox recipe of cpu_random.h (a pure function of
 * seed, offset, global row and element index, so any thread count gives the
 * same mask; tfcore/backend.h "Dropout masks").
 * The scale 1/(1-p) is rounded to float once, as torch does; a dropped
 * element is x * 0 (so an inf or NaN input still shows as NaN).
 * y may alias x; dx may alias dy. */
#include <math.h>

#include "cpu.h"
#include "cpu_random.h"

CPU_CLONES
static void apply_mask(const float *x, const uint8_t *keep, float *y, size_t n, float scale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * (keep[i] ? scale : 0.0f);
}

static tf_status check_p(tf_error *err, const char *op, float p)
{
    if (p >= 0.0f && p <= 1.0f) return TF_OK;
    return cpu_fail(err, TF_ERR_RUNTIME, op, "p must be in [0, 1], got %g", (double)p);
}

/* Elements per piece: a multiple of 4 (one Philox counter) and of a cache line. */
#define DROPOUT_QUANTUM 64

tf_status cpu_dropout_fwd(tf_backend *be, tf_stream *s, const void *x, void *y, uint8_t *keep,
                          size_t n, float p, uint64_t seed, uint64_t offset, tf_dtype dt,
                          tf_error *err)
{
    (void)s;
    const char *op = "dropout_fwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "x", dt)) ||
        (st = check_p(err, op, p)))
        return st;
    if (n == 0) return TF_OK;
    if ((st = cpu_need(err, op, "x", x)) || (st = cpu_need(err, op, "y", y)) ||
        (st = cpu_need(err, op, "keep", keep)))
        return st;
    float scale = 1.0f / (1.0f - p); /* inf for p = 1, where nothing is kept */
    CPU_PARALLEL_IF(be, cpu_par(be, n / 4))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), DROPOUT_QUANTUM, &lo, &hi);
        if (lo < hi) {
            cpu_dropout_mask(seed, offset, lo, hi - lo, p, keep + lo);
            apply_mask((const float *)x + lo, keep + lo, (float *)y + lo, hi - lo, scale);
        }
    }
    return TF_OK;
}

/* Rows [rows, row_elems]: row b draws the stream of offset + row_first +
 * b * row_stride, its elements indexed from 0. */
tf_status cpu_dropout_fwd_ex(tf_backend *be, tf_stream *s, const tf_dropout_desc *d,
                             tf_error *err)
{
    (void)s;
    const char *op = "dropout_fwd_ex";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = tf_check_dropout_desc(&cpu_checker, err, op, d)))
        return st;
    size_t n = d->rows * d->row_elems; /* checked: no overflow */
    if (n == 0) return TF_OK;
    float scale = 1.0f / (1.0f - d->p);
    size_t R = d->row_elems;
    CPU_PARALLEL_IF(be, cpu_par(be, n / 4))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), DROPOUT_QUANTUM, &lo, &hi);
        for (size_t i = lo; i < hi;) { /* the part of one row in [i, hi) */
            size_t b = i / R, j = i % R, len = R - j < hi - i ? R - j : hi - i;
            uint64_t row = d->offset + d->row_first + (uint64_t)b * d->row_stride;
            cpu_dropout_mask(d->seed, row, j, len, d->p, d->keep + i);
            i += len;
        }
        if (lo < hi)
            apply_mask((const float *)d->x + lo, d->keep + lo, (float *)d->y + lo, hi - lo, scale);
    }
    return TF_OK;
}

/* Packed sequences (ABI 1.5): sequence b is tokens [cu[b], cu[b+1]) drawn as
 * one row of (cu[b+1] - cu[b]) * E elements, global row row_first + b * stride.
 * The packed tensor is split evenly over the team as dropout_fwd_ex splits
 * its rows; each piece finds its first sequence by binary search in cu. */
static size_t seq_at(const int32_t *cu, size_t rows, size_t E, size_t i)
{
    size_t lo = 0, hi = rows; /* the last b with cu[b] * E <= i */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)cu[mid] * E <= i) lo = mid;
        else hi = mid;
    }
    return lo;
}

tf_status cpu_dropout_varlen_fwd(tf_backend *be, tf_stream *s, const tf_dropout_varlen_desc *vd,
                                 tf_error *err)
{
    (void)s;
    const char *op = "dropout_varlen_fwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need(err, op, "desc", vd))) return st;
    if (vd->size < sizeof *vd)
        return cpu_fail(err, TF_ERR_PLUGIN, op, "descriptor of %u bytes is older than this backend's (%zu)",
                        vd->size, sizeof *vd);
    const tf_dropout_desc *d = &vd->drop;
    if ((st = tf_check_dropout_desc(&cpu_checker, err, op, d)) ||
        (st = cpu_need(err, op, "cu_seqlens", vd->cu_seqlens)))
        return st;
    const int32_t *cu = vd->cu_seqlens;
    const size_t rows = d->rows, E = d->row_elems;
    if (cu[0] != 0) return cpu_fail(err, TF_ERR_RUNTIME, op, "cu_seqlens[0] is %d, not 0", cu[0]);
    for (size_t b = 0; b < rows; b++)
        if (cu[b + 1] < cu[b])
            return cpu_fail(err, TF_ERR_RUNTIME, op, "cu_seqlens decreases at sequence %zu (%d, %d)", b,
                            cu[b], cu[b + 1]);
    size_t n;
    if (__builtin_mul_overflow((size_t)cu[rows], E, &n))
        return cpu_fail(err, TF_ERR_RUNTIME, op, "tokens * row_elems overflows");
    if (n == 0) return TF_OK;
    float scale = 1.0f / (1.0f - d->p);
    CPU_PARALLEL_IF(be, cpu_par(be, n / 4))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), DROPOUT_QUANTUM, &lo, &hi);
        size_t b = lo < hi ? seq_at(cu, rows, E, lo) : 0;
        for (size_t i = lo; i < hi; b++) { /* the part of sequence b in [i, hi) */
            size_t end = (size_t)cu[b + 1] * E, len = (end < hi ? end : hi) - i;
            if (len == 0) continue; /* an empty sequence */
            uint64_t row = d->offset + d->row_first + (uint64_t)b * d->row_stride;
            cpu_dropout_mask(d->seed, row, i - (size_t)cu[b] * E, len, d->p, d->keep + i);
            i += len;
        }
        if (lo < hi)
            apply_mask((const float *)d->x + lo, d->keep + lo, (float *)d->y + lo, hi - lo, scale);
    }
    return TF_OK;
}

tf_status cpu_dropout_bwd(tf_backend *be, tf_stream *s, const void *dy, const uint8_t *keep,
                          void *dx, size_t n, float p, tf_dtype dt, tf_error *err)
{
    (void)s;
    const char *op = "dropout_bwd";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "dy", dt)) ||
        (st = check_p(err, op, p)))
        return st;
    if (n == 0) return TF_OK;
    if ((st = cpu_need(err, op, "dy", dy)) || (st = cpu_need(err, op, "keep", keep)) ||
        (st = cpu_need(err, op, "dx", dx)))
        return st;
    float scale = 1.0f / (1.0f - p);
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), DROPOUT_QUANTUM, &lo, &hi);
        if (lo < hi) apply_mask((const float *)dy + lo, keep + lo, (float *)dx + lo, hi - lo, scale);
    }
    return TF_OK;
}
