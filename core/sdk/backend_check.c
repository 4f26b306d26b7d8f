/* backend_check.c — the argument checks of the backend slots, written once
 * for every backend (tfcore/backend_check.h). */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "tfcore/backend_check.h"
#include "tfcore/dtype.h"

tf_status tf_check_fail(const tf_backend_checker *c, tf_error *err, tf_status code, const char *op,
                        const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tf_error_set(err, code, "%s: %s: %s", c->name, op, what);
    return code;
}

tf_status tf_check_need(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                        const void *p)
{
    return p ? TF_OK : tf_check_fail(c, err, TF_ERR_RUNTIME, op, "%s is NULL", name);
}

tf_status tf_check_min(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                       long long v, long long lo)
{
    return v >= lo ? TF_OK : tf_check_fail(c, err, TF_ERR_RUNTIME, op, "%s must be >= %lld, got %lld", name, lo, v);
}

tf_status tf_check_act_dtype(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                             tf_dtype dt)
{
    if ((unsigned)dt < 32 && (c->act_dtypes & TF_DTYPE_BIT(dt))) return TF_OK;
    const char *dn = tf_dtype_name(dt);
    if (dn)
        return tf_check_fail(c, err, TF_ERR_PLUGIN, op, "%s dtype %s is not supported (%s computes in %s)", name,
                             dn, c->name, c->act_dtypes_text);
    return tf_check_fail(c, err, TF_ERR_PLUGIN, op, "%s dtype %d is not a tf_dtype", name, (int)dt);
}

/* --- layernorm ----------------------------------------------------------------- */

static tf_status layernorm_shape(const tf_backend_checker *c, tf_error *err, const char *op, int rows, int cols,
                                 tf_dtype dt)
{
    tf_status st;
    if ((st = tf_check_act_dtype(c, err, op, "x", dt)) || (st = tf_check_min(c, err, op, "rows", rows, 0)) ||
        (st = tf_check_min(c, err, op, "cols", cols, 1)))
        return st;
    return TF_OK;
}

tf_status tf_check_layernorm_fwd(const tf_backend_checker *c, tf_error *err, const char *op, const void *x,
                                 const void *residual, const void *in_out, const void *y, const float *gamma,
                                 const float *beta, const float *mean, const float *rstd, int rows, int cols,
                                 float eps, tf_dtype dt)
{
    tf_status st;
    if ((st = layernorm_shape(c, err, op, rows, cols, dt))) return st;
    if (!(isfinite(eps) && eps >= 0.0f))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "eps must be finite and >= 0, got %g", (double)eps);
    if (rows == 0) return TF_OK;
    if ((st = tf_check_need(c, err, op, "x", x)) || (st = tf_check_need(c, err, op, "y", y)) ||
        (st = tf_check_need(c, err, op, "gamma", gamma)) || (st = tf_check_need(c, err, op, "beta", beta)) ||
        (st = tf_check_need(c, err, op, "mean", mean)) || (st = tf_check_need(c, err, op, "rstd", rstd)))
        return st;
    if (residual && !in_out)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op,
                             "in_out is NULL but residual is set (backward needs x + residual)");
    return TF_OK;
}

tf_status tf_check_layernorm_bwd(const tf_backend_checker *c, tf_error *err, const char *op, const void *dy,
                                 const void *in, const float *gamma, const float *mean, const float *rstd,
                                 const void *dx, const float *dgamma, const float *dbeta, int rows, int cols,
                                 tf_dtype dt)
{
    tf_status st;
    if ((st = layernorm_shape(c, err, op, rows, cols, dt))) return st;
    if (rows == 0) return TF_OK;
    if ((st = tf_check_need(c, err, op, "dy", dy)) || (st = tf_check_need(c, err, op, "in", in)) ||
        (st = tf_check_need(c, err, op, "gamma", gamma)) || (st = tf_check_need(c, err, op, "mean", mean)) ||
        (st = tf_check_need(c, err, op, "rstd", rstd)) || (st = tf_check_need(c, err, op, "dx", dx)) ||
        (st = tf_check_need(c, err, op, "dgamma", dgamma)) || (st = tf_check_need(c, err, op, "dbeta", dbeta)))
        return st;
    return TF_OK;
}

/* --- attention ----------------------------------------------------------------- */

tf_status tf_check_attention_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                  const tf_attention_desc *d)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "desc", d)) || (st = tf_check_min(c, err, op, "batch", d->batch, 1)) ||
        (st = tf_check_min(c, err, op, "seq", d->seq, 1)) || (st = tf_check_min(c, err, op, "heads", d->heads, 1)) ||
        (st = tf_check_min(c, err, op, "head_dim", d->head_dim, 1)) ||
        (st = tf_check_act_dtype(c, err, op, "qkv", d->dtype)))
        return st;
    if ((unsigned)d->mode > TF_MATMUL_BF16)
        return tf_check_fail(c, err, TF_ERR_PLUGIN, op, "unknown matmul mode %d", (int)d->mode);
    if (!isfinite(d->scale))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "scale must be finite, got %g", (double)d->scale);
    if (!(d->dropout >= 0.0f && d->dropout < 1.0f))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "dropout must be in [0, 1), got %g", (double)d->dropout);
    if ((long long)d->heads * d->head_dim > INT32_MAX / 3)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "heads * head_dim = %lld is too large",
                             (long long)d->heads * d->head_dim);
    return TF_OK;
}

tf_status tf_check_attention_fwd(const tf_backend_checker *c, tf_error *err, const char *op,
                                 const tf_attention_desc *d, const void *qkv, const void *out, const void *save,
                                 bool train)
{
    tf_status st;
    if ((st = tf_check_attention_desc(c, err, op, d)) || (st = tf_check_need(c, err, op, "qkv", qkv)) ||
        (st = tf_check_need(c, err, op, "out", out)))
        return st;
    if (train && !save)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op,
                             "save is NULL in training (backward needs attention_save_bytes of it)");
    return TF_OK;
}

tf_status tf_check_attention_bwd(const tf_backend_checker *c, tf_error *err, const char *op,
                                 const tf_attention_desc *d, const void *qkv, const void *save, const void *dout,
                                 const void *dqkv)
{
    tf_status st;
    if ((st = tf_check_attention_desc(c, err, op, d)) || (st = tf_check_need(c, err, op, "qkv", qkv)) ||
        (st = tf_check_need(c, err, op, "save", save)) || (st = tf_check_need(c, err, op, "dout", dout)) ||
        (st = tf_check_need(c, err, op, "dqkv", dqkv)))
        return st;
    return TF_OK;
}

/* --- cross-entropy ------------------------------------------------------------- */

tf_status tf_check_cross_entropy(const tf_backend_checker *c, tf_error *err, const char *op, const void *logits,
                                 int64_t ld_logits, tf_dtype dt, int rows, int classes, const int32_t *labels,
                                 const float *loss)
{
    tf_status st;
    if ((st = tf_check_act_dtype(c, err, op, "logits", dt)) || (st = tf_check_min(c, err, op, "rows", rows, 0)) ||
        (st = tf_check_min(c, err, op, "classes", classes, 1)) || (st = tf_check_need(c, err, op, "loss", loss)))
        return st;
    if (ld_logits < classes)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "ld_logits %lld is less than classes %d",
                             (long long)ld_logits, classes);
    if (rows > 0 &&
        ((st = tf_check_need(c, err, op, "logits", logits)) || (st = tf_check_need(c, err, op, "labels", labels))))
        return st;
    return TF_OK;
}

tf_status tf_check_cross_entropy_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                      const tf_cross_entropy_desc *d)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "descriptor", d))) return st;
    if (d->size < sizeof *d)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.2 needs %zu", (unsigned)d->size,
                             sizeof *d);
    if (!(d->label_smoothing >= 0.0f && d->label_smoothing <= 1.0f))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "label_smoothing must be in [0, 1], got %g",
                             (double)d->label_smoothing);
    return TF_OK;
}

/* --- AdamW --------------------------------------------------------------------- */

tf_status tf_check_adamw(const tf_backend_checker *c, tf_error *err, const char *op, const float *params,
                         const float *grads, const float *m, const float *v, const tf_adamw_segment *segs,
                         size_t nsegs, const tf_adamw_hyper *h)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "hyper", h))) return st;
    if ((st = tf_adamw_check_hyper(h, err))) {
        tf_error_prefix(err, "%s: adamw", c->name);
        return st;
    }
    if (nsegs == 0) return TF_OK;
    if ((st = tf_check_need(c, err, op, "segments", segs))) return st;
    if ((st = tf_adamw_check_segments(segs, nsegs, err))) {
        tf_error_prefix(err, "%s: adamw", c->name);
        return st;
    }
    if ((st = tf_check_need(c, err, op, "params", params)) || (st = tf_check_need(c, err, op, "grads", grads)) ||
        (st = tf_check_need(c, err, op, "m", m)) || (st = tf_check_need(c, err, op, "v", v)))
        return st;
    return TF_OK;
}

tf_status tf_check_adamw_desc(const tf_backend_checker *c, tf_error *err, const char *op, const tf_adamw_desc *d)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "descriptor", d))) return st;
    if (d->size < sizeof *d)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.2 needs %zu", (unsigned)d->size,
                             sizeof *d);
    if (d->rule != TF_ADAMW_TORCH && d->rule != TF_ADAMW_HF)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "unknown rule %d", (int)d->rule);
    return TF_OK;
}

/* --- Adafactor ----------------------------------------------------------------- */

tf_status tf_check_adafactor(const tf_backend_checker *c, tf_error *err, const char *op, const float *params,
                             const float *grads, const float *state, const tf_adafactor_desc *d)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "descriptor", d))) return st;
    if (d->size < sizeof *d)
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "descriptor size %u, ABI 1.3 needs %zu", (unsigned)d->size,
                             sizeof *d);
    if ((st = tf_adafactor_check(d, err))) {
        tf_error_prefix(err, "%s: adafactor", c->name);
        return st;
    }
    if (d->ntensors == 0) return TF_OK;
    if ((st = tf_check_need(c, err, op, "params", params)) || (st = tf_check_need(c, err, op, "grads", grads)) ||
        (st = tf_check_need(c, err, op, "state", state)))
        return st;
    return TF_OK;
}

/* --- dropout by rows ------------------------------------------------------------- */

tf_status tf_check_dropout_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                const tf_dropout_desc *d)
{
    tf_status st;
    if ((st = tf_check_need(c, err, op, "desc", d))) return st;
    if (d->size < sizeof *d)
        return tf_check_fail(c, err, TF_ERR_PLUGIN, op, "descriptor of %u bytes is older than this backend's (%zu)",
                             d->size, sizeof *d);
    if ((st = tf_check_act_dtype(c, err, op, "x", d->dt))) return st;
    if (!(d->p >= 0.0f && d->p <= 1.0f))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "p must be in [0, 1], got %g", (double)d->p);
    size_t n;
    if (__builtin_mul_overflow(d->rows, d->row_elems, &n))
        return tf_check_fail(c, err, TF_ERR_RUNTIME, op, "rows * row_elems overflows");
    if (n == 0) return TF_OK;
    if ((st = tf_check_need(c, err, op, "x", d->x)) || (st = tf_check_need(c, err, op, "y", d->y)) ||
        (st = tf_check_need(c, err, op, "keep", d->keep)))
        return st;
    return TF_OK;
}
