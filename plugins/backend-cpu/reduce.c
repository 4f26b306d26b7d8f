/* reduce.c — backend-cpu reductions: the bias gradient (sum over rows), the
 * sum of squares for gradient clipping, and the inf/NaN check.
 *
 * Every reduction here gives the same bits whatever the thread count: work
 * is cut into pieces fixed by the problem size alone, each piece is summed
 * in order (in double), and the pieces are combined in order. */
#include <string.h>

#include "cpu.h"
#include "tfcore/dtype.h"

/* Columns per piece of sum_rows (the double accumulators live on the stack). */
#define SUM_ROWS_CHUNK 64

CPU_CLONES
static void sum_rows_chunk(const float *dy, int rows, int cols, int c0, int c1, float *dbias,
                           bool accumulate)
{
    double acc[SUM_ROWS_CHUNK];
    int w = c1 - c0;
    for (int j = 0; j < w; j++) acc[j] = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *row = dy + (size_t)r * (size_t)cols + c0;
#pragma omp simd
        for (int j = 0; j < w; j++) acc[j] += (double)row[j];
    }
    for (int j = 0; j < w; j++)
        dbias[c0 + j] = accumulate ? (float)((double)dbias[c0 + j] + acc[j]) : (float)acc[j];
}

tf_status cpu_sum_rows(tf_backend *be, tf_stream *s, const void *dy, tf_dtype dt, int rows,
                       int cols, float *dbias, bool accumulate, tf_error *err)
{
    (void)s;
    const char *op = "sum_rows";
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "dy", dt)) ||
        (st = cpu_need_min(err, op, "rows", rows, 0)) ||
        (st = cpu_need_min(err, op, "cols", cols, 0)))
        return st;
    if (cols == 0) return TF_OK;
    if ((st = cpu_need(err, op, "dbias", dbias))) return st;
    if (rows > 0 && (st = cpu_need(err, op, "dy", dy))) return st;
    int chunks = (cols + SUM_ROWS_CHUNK - 1) / SUM_ROWS_CHUNK;
    CPU_PARALLEL_IF(be, chunks > 1 && cpu_par(be, (size_t)rows * (size_t)cols))
    {
        CPU_FOR_STATIC
        for (int c = 0; c < chunks; c++) {
            int c0 = c * SUM_ROWS_CHUNK;
            int c1 = c0 + SUM_ROWS_CHUNK < cols ? c0 + SUM_ROWS_CHUNK : cols;
            sum_rows_chunk(dy, rows, cols, c0, c1, dbias, accumulate);
        }
    }
    return TF_OK;
}

/* sum_squares: x is cut into SQ_PIECES equal pieces, whatever the team size. */
#define SQ_PIECES 64

CPU_CLONES
static double sum_squares_span(const float *x, size_t n)
{
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++) acc += (double)x[i] * (double)x[i];
    return acc;
}

tf_status cpu_sum_squares(tf_backend *be, tf_stream *s, const float *x, size_t n, float *out,
                          tf_error *err)
{
    (void)s;
    const char *op = "sum_squares";
    if (cpu_need(err, op, "backend", be) || cpu_need(err, op, "out", out)) return TF_ERR_RUNTIME;
    if (n > 0 && cpu_need(err, op, "x", x)) return TF_ERR_RUNTIME;
    double part[SQ_PIECES];
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        CPU_FOR_STATIC
        for (int p = 0; p < SQ_PIECES; p++) {
            size_t lo, hi;
            cpu_split(n, SQ_PIECES, p, 16, &lo, &hi);
            part[p] = sum_squares_span(x + lo, hi - lo);
        }
    }
    double total = 0.0;
    for (int p = 0; p < SQ_PIECES; p++) total += part[p];
    *out = (float)total;
    return TF_OK;
}

/* 1 when any element's exponent bits are all ones (inf or NaN). */
CPU_CLONES
static int nonfinite_f32(const uint32_t *u, size_t n)
{
    uint32_t any = 0;
#pragma omp simd reduction(| : any)
    for (size_t i = 0; i < n; i++) any |= (uint32_t)((u[i] & 0x7f800000u) == 0x7f800000u);
    return (int)any;
}

static int nonfinite_u16(const uint16_t *u, size_t n, uint16_t exp_mask)
{
    uint32_t any = 0;
#pragma omp simd reduction(| : any)
    for (size_t i = 0; i < n; i++) any |= (uint32_t)((u[i] & exp_mask) == exp_mask);
    return (int)any;
}

static int nonfinite_f64(const uint64_t *u, size_t n)
{
    uint64_t any = 0;
    const uint64_t m = 0x7ff0000000000000ull;
#pragma omp simd reduction(| : any)
    for (size_t i = 0; i < n; i++) any |= (uint64_t)((u[i] & m) == m);
    return (int)any;
}

tf_status cpu_finite_check(tf_backend *be, tf_stream *s, const void *x, size_t n, tf_dtype dt,
                           int32_t *found, tf_error *err)
{
    (void)s;
    const char *op = "finite_check";
    if (cpu_need(err, op, "backend", be) || cpu_need(err, op, "found", found))
        return TF_ERR_RUNTIME;
    if (dt != TF_DTYPE_F32 && dt != TF_DTYPE_F16 && dt != TF_DTYPE_BF16 && dt != TF_DTYPE_F64)
        return cpu_need_f32(err, op, "x", dt);
    if (n == 0) return TF_OK;
    if (cpu_need(err, op, "x", x)) return TF_ERR_RUNTIME;
    int any = 0;
    CPU_PARALLEL_IF(be, cpu_par(be, n))
    {
        size_t lo, hi;
        cpu_split(n, cpu_team_size(), cpu_thread_id(), 64, &lo, &hi);
        int mine = 0;
        if (lo < hi) switch (dt) {
            case TF_DTYPE_F32: mine = nonfinite_f32((const uint32_t *)x + lo, hi - lo); break;
            case TF_DTYPE_F16:
                mine = nonfinite_u16((const uint16_t *)x + lo, hi - lo, 0x7c00u);
                break;
            case TF_DTYPE_BF16:
                mine = nonfinite_u16((const uint16_t *)x + lo, hi - lo, 0x7f80u);
                break;
            default: mine = nonfinite_f64((const uint64_t *)x + lo, hi - lo); break;
            }
        if (mine) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
            any = 1;
        }
    }
    if (any) *found |= 1;
    return TF_OK;
}
