/* embedding.c — backend-cpu embedding gather and its scatter-add backward.
 *
 * Every id is checked before anything is written: an id outside [0, vocab)
 * is TF_ERR_DATA naming the id and its row, and the output is untouched.
 * The backward is deterministic whatever the thread count: threads split the
 * embedding dimension, and each thread walks all rows in order, so every
 * dtable element sums its contributions in row order, as a serial loop. */
#include <string.h>

#include "cpu.h"

static tf_status check_ids(tf_error *err, const char *op, const int32_t *ids, int rows,
                           int vocab)
{
    for (int i = 0; i < rows; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return cpu_fail(err, TF_ERR_DATA, op, "id %d at row %d is outside [0, %d)",
                            (int)ids[i], i, vocab);
    return TF_OK;
}

static tf_status check_args(tf_error *err, const char *op, tf_backend *be, const int32_t *ids,
                            int rows, int vocab, int dim, tf_dtype dt)
{
    tf_status st;
    if ((st = cpu_need(err, op, "backend", be)) || (st = cpu_need_f32(err, op, "out", dt)) ||
        (st = cpu_need_min(err, op, "rows", rows, 0)) ||
        (st = cpu_need_min(err, op, "vocab", vocab, 1)) ||
        (st = cpu_need_min(err, op, "dim", dim, 1)))
        return st;
    if (rows > 0 && (st = cpu_need(err, op, "ids", ids))) return st;
    return TF_OK;
}

CPU_CLONES
static void gather_row(const float *src, float *dst, int dim, bool accumulate)
{
    if (accumulate) {
#pragma omp simd
        for (int j = 0; j < dim; j++) dst[j] += src[j];
    } else {
        memcpy(dst, src, (size_t)dim * sizeof(float));
    }
}

tf_status cpu_embedding_fwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                            const float *table, int vocab, int dim, void *out, bool accumulate,
                            tf_dtype dt, tf_error *err)
{
    (void)s;
    const char *op = "embedding_fwd";
    tf_status st;
    if ((st = check_args(err, op, be, ids, rows, vocab, dim, dt))) return st;
    if (rows == 0) return TF_OK;
    if ((st = cpu_need(err, op, "table", table)) || (st = cpu_need(err, op, "out", out)) ||
        (st = check_ids(err, op, ids, rows, vocab)))
        return st;
    float *o = out;
    size_t d = (size_t)dim;
    CPU_PARALLEL_IF(be, cpu_par(be, (size_t)rows * d))
    {
        CPU_FOR_STATIC
        for (int i = 0; i < rows; i++)
            gather_row(table + (size_t)ids[i] * d, o + (size_t)i * d, dim, accumulate);
    }
    return TF_OK;
}

CPU_CLONES
static void scatter_cols(const int32_t *ids, int rows, const float *dout, float *dtable,
                         size_t dim, size_t c0, size_t c1)
{
    for (int i = 0; i < rows; i++) {
        const float *src = dout + (size_t)i * dim;
        float *dst = dtable + (size_t)ids[i] * dim;
#pragma omp simd
        for (size_t j = c0; j < c1; j++) dst[j] += src[j];
    }
}

tf_status cpu_embedding_bwd(tf_backend *be, tf_stream *s, const int32_t *ids, int rows,
                            const void *dout, tf_dtype dt, float *dtable, int vocab, int dim,
                            tf_error *err)
{
    (void)s;
    const char *op = "embedding_bwd";
    tf_status st;
    if ((st = check_args(err, op, be, ids, rows, vocab, dim, dt))) return st;
    if (rows == 0) return TF_OK;
    if ((st = cpu_need(err, op, "dout", dout)) || (st = cpu_need(err, op, "dtable", dtable)) ||
        (st = check_ids(err, op, ids, rows, vocab)))
        return st;
    size_t d = (size_t)dim;
    /* pieces of 16 floats: a cache line each when rows are 64-byte aligned */
    CPU_PARALLEL_IF(be, dim >= 32 && cpu_par(be, (size_t)rows * d))
    {
        size_t lo, hi;
        cpu_split(d, cpu_team_size(), cpu_thread_id(), 16, &lo, &hi);
        if (lo < hi) scatter_cols(ids, rows, dout, dtable, d, lo, hi);
    }
    return TF_OK;
}
