/* tfcore/backend_check.h — the argument checks of the backend slots, written
 * once in libtfcore (core/sdk/backend_check.c) for every backend: a backend
 * calls them first and keeps only what is specific to it (its dtypes and
 * matmul modes, its size limits, checks that read device memory).
 *
 * Each check is a contract of the slot it serves (tfcore/backend.h): what it
 * lets through, every backend must compute; what it refuses, no backend
 * computes. Every check fills err with one line, "NAME: OP: what", NAME being
 * the backend's (tf_backend_checker.name) and OP the slot's name, and returns
 * TF_ERR_RUNTIME for a bad argument or TF_ERR_PLUGIN for a dtype the backend
 * does not compute in; TF_OK when the arguments hold. Shapes are in elements. */
#ifndef TFCORE_BACKEND_CHECK_H
#define TFCORE_BACKEND_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/backend.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bit of one tf_dtype in tf_backend_checker.act_dtypes. */
#define TF_DTYPE_BIT(dt) (1u << (unsigned)(dt))

/* What the checks need to know of a backend. */
typedef struct tf_backend_checker {
    const char *name;        /* "backend-cpu": the prefix of every message */
    uint32_t act_dtypes;     /* TF_DTYPE_BIT of each activation dtype it computes in */
    const char *act_dtypes_text; /* that set in words, for messages: "F32 only" */
} tf_backend_checker;

/* err = "NAME: OP: <fmt...>" with code; returns code. */
tf_status tf_check_fail(const tf_backend_checker *c, tf_error *err, tf_status code, const char *op,
                        const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* p is not NULL ("NAME is NULL"). */
tf_status tf_check_need(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                        const void *p);
/* v >= lo ("NAME must be >= lo, got v"). */
tf_status tf_check_min(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                       long long v, long long lo);
/* dt is one of c->act_dtypes (TF_ERR_PLUGIN: "NAME dtype F16 is not supported
 * (backend-cpu computes in F32 only)", or "... is not a tf_dtype"). */
tf_status tf_check_act_dtype(const tf_backend_checker *c, tf_error *err, const char *op, const char *name,
                             tf_dtype dt);

/* layernorm_fwd: x's dtype is an activation dtype, rows >= 0, cols >= 1, eps
 * finite and >= 0; when rows > 0, x, y, gamma, beta, mean and rstd are set,
 * and in_out is set when residual is (backward needs x + residual). */
tf_status tf_check_layernorm_fwd(const tf_backend_checker *c, tf_error *err, const char *op, const void *x,
                                 const void *residual, const void *in_out, const void *y, const float *gamma,
                                 const float *beta, const float *mean, const float *rstd, int rows, int cols,
                                 float eps, tf_dtype dt);
/* layernorm_bwd: the shape and dtype as layernorm_fwd; when rows > 0, dy, in,
 * gamma, mean, rstd, dx, dgamma and dbeta are set. */
tf_status tf_check_layernorm_bwd(const tf_backend_checker *c, tf_error *err, const char *op, const void *dy,
                                 const void *in, const float *gamma, const float *mean, const float *rstd,
                                 const void *dx, const float *dgamma, const float *dbeta, int rows, int cols,
                                 tf_dtype dt);

/* The attention descriptor (attention_fwd, attention_bwd): set; batch, seq,
 * heads, head_dim >= 1; dtype an activation dtype; mode a tf_matmul_mode
 * (whether this backend computes in it is the backend's check); scale finite;
 * dropout in [0, 1); heads * head_dim <= INT32_MAX / 3 (a qkv row holds 3
 * of them). Limits on batch and seq are each backend's (its indexing). */
tf_status tf_check_attention_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                  const tf_attention_desc *d);
/* attention_fwd: the descriptor, qkv and out set, and save set when train. */
tf_status tf_check_attention_fwd(const tf_backend_checker *c, tf_error *err, const char *op,
                                 const tf_attention_desc *d, const void *qkv, const void *out, const void *save,
                                 bool train);
/* attention_bwd: the descriptor, qkv, save, dout and dqkv set (out only
 * where the backend's backward reads it: its own check). */
tf_status tf_check_attention_bwd(const tf_backend_checker *c, tf_error *err, const char *op,
                                 const tf_attention_desc *d, const void *qkv, const void *save, const void *dout,
                                 const void *dqkv);

/* cross_entropy, cross_entropy_ex: logits' dtype an activation dtype, rows >=
 * 0, classes >= 1, loss set, ld_logits >= classes; when rows > 0, logits and
 * labels set. Labels in [0, classes) or ignore_index is checked where the
 * labels are read (backend memory: the backend's check). */
tf_status tf_check_cross_entropy(const tf_backend_checker *c, tf_error *err, const char *op, const void *logits,
                                 int64_t ld_logits, tf_dtype dt, int rows, int classes, const int32_t *labels,
                                 const float *loss);
/* cross_entropy_ex's descriptor: set, size >= sizeof(tf_cross_entropy_desc)
 * (ABI 1.2), label_smoothing in [0, 1]. Its other fields are then checked
 * with tf_check_cross_entropy. */
tf_status tf_check_cross_entropy_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                      const tf_cross_entropy_desc *d);

/* adamw, adamw_ex: h set and in range (tf_adamw_check_hyper); when nsegs > 0,
 * segs set, neither overflowing nor overlapping (tf_adamw_check_segments),
 * and params, grads, m, v set. The range messages read "NAME: adamw: ...". */
tf_status tf_check_adamw(const tf_backend_checker *c, tf_error *err, const char *op, const float *params,
                         const float *grads, const float *m, const float *v, const tf_adamw_segment *segs,
                         size_t nsegs, const tf_adamw_hyper *h);
/* adamw_ex's descriptor: set, size >= sizeof(tf_adamw_desc) (ABI 1.2), rule a
 * tf_adamw_rule; its hyper is then checked by tf_check_adamw. */
tf_status tf_check_adamw_desc(const tf_backend_checker *c, tf_error *err, const char *op, const tf_adamw_desc *d);

/* adafactor: d set, size >= sizeof(tf_adafactor_desc) (ABI 1.3), its fields
 * in range (tf_adafactor_check; those messages read "NAME: adafactor: ...");
 * when d->ntensors > 0, params, grads and state set. */
tf_status tf_check_adafactor(const tf_backend_checker *c, tf_error *err, const char *op, const float *params,
                             const float *grads, const float *state, const tf_adafactor_desc *d);

/* dropout_fwd_ex: d set, size >= sizeof(tf_dropout_desc) (TF_ERR_PLUGIN: a
 * descriptor older than the backend), x's dtype an activation dtype, p in
 * [0, 1], rows * row_elems not overflowing; when that is > 0, x, y and keep
 * set. */
tf_status tf_check_dropout_desc(const tf_backend_checker *c, tf_error *err, const char *op,
                                const tf_dropout_desc *d);

#ifdef __cplusplus
}
#endif

#endif
