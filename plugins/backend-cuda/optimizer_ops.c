/* optimizer_ops.c — the glue of AdamW (optimizer.cu): libtfcore's argument
 * checks (tf_check_adamw), the device work list (the segments cut into chunks, rebuilt when
 * the segments change), backend-cpu's scalars, then the launcher. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"

/* The device work list for these segments: rebuilt (and uploaded) only
 * when they differ from the last call's, i.e. once per training run. Under
 * adamw_lock. The old list may be read by queued AdamW kernels on any
 * stream, so replacing it waits for the device first. */
static tf_status adamw_work_list(tf_backend *be, tf_stream *st, const tf_adamw_segment *segs,
                                 size_t nsegs, tf_error *err)
{
    const char *op = "adamw";
    if (be->adamw_segs && be->adamw_nsegs == nsegs &&
        memcmp(be->adamw_segs, segs, nsegs * sizeof *segs) == 0)
        return TF_OK;
    if (nsegs > UINT32_MAX)
        return cuda_fail(err, TF_ERR_RUNTIME, op, "%zu segments is too many", nsegs);
    size_t nchunks = 0;
    for (size_t i = 0; i < nsegs; i++)
        nchunks += segs[i].count / TFC_ADAMW_CHUNK + (segs[i].count % TFC_ADAMW_CHUNK != 0);
    if (nchunks > SIZE_MAX / 2 / sizeof(tfc_adamw_chunk))
        return cuda_fail(err, TF_ERR_RUNTIME, op, "%zu chunks of %d elements is too many", nchunks,
                         TFC_ADAMW_CHUNK);
    /* [nchunks] chunks, then [nsegs] weight decays (16-byte aligned after the chunks) */
    size_t chunk_bytes = nchunks * sizeof(tfc_adamw_chunk);
    size_t bytes = chunk_bytes + nsegs * sizeof(float);
    tf_adamw_segment *copy = malloc(nsegs * sizeof *copy);
    unsigned char *host = malloc(bytes ? bytes : 1);
    if (!copy || !host) {
        free(copy);
        free(host);
        return cuda_fail(err, TF_ERR_RUNTIME, op, "out of host memory (%zu bytes) for the work list",
                         bytes);
    }
    memcpy(copy, segs, nsegs * sizeof *segs);
    tfc_adamw_chunk *ch = (tfc_adamw_chunk *)host;
    float *wd = (float *)(host + chunk_bytes);
    size_t c = 0;
    for (size_t i = 0; i < nsegs; i++) {
        wd[i] = segs[i].weight_decay;
        for (size_t done = 0; done < segs[i].count; done += TFC_ADAMW_CHUNK) {
            size_t left = segs[i].count - done;
            ch[c].offset = (uint64_t)(segs[i].offset + done);
            ch[c].count = (uint32_t)(left < TFC_ADAMW_CHUNK ? left : TFC_ADAMW_CHUNK);
            ch[c].segment = (uint32_t)i;
            c++;
        }
    }
    tf_status rc = TF_OK;
    cudaError_t e;
    if (be->adamw_dev && (e = cudaDeviceSynchronize()) != cudaSuccess)
        rc = cuda_fail_rt(err, op, e, "waiting to replace the work list");
    if (!rc && bytes > be->adamw_dev_bytes) {
        if (be->adamw_dev) cuda_internal_free(be, be->adamw_dev, be->adamw_dev_bytes);
        be->adamw_dev = NULL;
        be->adamw_dev_bytes = 0;
        rc = cuda_internal_alloc(be, bytes, op, "the AdamW work list", &be->adamw_dev, err);
        if (!rc) be->adamw_dev_bytes = bytes;
    }
    if (!rc && bytes > 0) {
        e = cudaMemcpyAsync(be->adamw_dev, host, bytes, cudaMemcpyHostToDevice, st->s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(st->s);
        if (e != cudaSuccess) rc = cuda_fail_rt(err, op, e, "uploading the work list (%zu bytes)", bytes);
    }
    free(host);
    if (rc) {
        free(copy);
        free(be->adamw_segs);
        be->adamw_segs = NULL;
        be->adamw_nsegs = 0;
        return rc;
    }
    free(be->adamw_segs);
    be->adamw_segs = copy;
    be->adamw_nsegs = nsegs;
    be->adamw_nchunks = nchunks;
    return TF_OK;
}

static tf_status adamw(tf_backend *be, tf_stream *s, const char *op, float *params,
                       const float *grads, float *m, float *v, const tf_adamw_segment *segs,
                       size_t nsegs, const tf_adamw_hyper *h, tf_adamw_rule rule, tf_error *err)
{
    tf_stream *st;
    tf_status rc;
    if ((rc = cuda_enter(be, s, op, &st, err)) ||
        (rc = tf_check_adamw(&cuda_checker, err, op, params, grads, m, v, segs, nsegs, h)))
        return rc;
    if (nsegs == 0) return TF_OK;
    /* backend-cpu's scalars: double, rounded to float once */
    double lr = h->lr, b1 = h->beta1, b2 = h->beta2;
    double bc1 = 1.0 - pow(b1, (double)h->step);
    double bc2 = 1.0 - pow(b2, (double)h->step);
    tfc_adamw_scalars k = {
        .lr = h->lr,
        .beta1 = h->beta1,
        .one_minus_beta1 = (float)(1.0 - b1),
        .beta2 = h->beta2,
        .one_minus_beta2 = (float)(1.0 - b2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = h->eps,
        .neg_step = rule == TF_ADAMW_HF ? (float)(-(lr * sqrt(bc2) / bc1)) : (float)(-(lr / bc1)),
        .grad_scale = h->grad_scale,
        .hf = rule == TF_ADAMW_HF,
    };
    pthread_mutex_lock(&be->adamw_lock);
    rc = adamw_work_list(be, st, segs, nsegs, err);
    if (!rc && be->adamw_nchunks > 0) {
        const tfc_adamw_chunk *chunks = be->adamw_dev;
        const float *wd = (const float *)((const unsigned char *)be->adamw_dev +
                                          be->adamw_nchunks * sizeof(tfc_adamw_chunk));
        rc = cuda_launched(err, op,
                      tfc_adamw(st->s, params, grads, m, v, chunks, be->adamw_nchunks, wd, &k),
                      "%zu segments, %zu chunks", nsegs, be->adamw_nchunks);
    }
    pthread_mutex_unlock(&be->adamw_lock);
    return rc;
}

tf_status cuda_adamw(tf_backend *be, tf_stream *s, float *params, const float *grads, float *m,
                     float *v, const tf_adamw_segment *segs, size_t nsegs,
                     const tf_adamw_hyper *h, tf_error *err)
{
    return adamw(be, s, "adamw", params, grads, m, v, segs, nsegs, h, TF_ADAMW_TORCH, err);
}

tf_status cuda_adamw_ex(tf_backend *be, tf_stream *s, float *params, const float *grads,
                        float *m, float *v, const tf_adamw_segment *segs, size_t nsegs,
                        const tf_adamw_desc *d, tf_error *err)
{
    const char *op = "adamw_ex";
    tf_status rc;
    if ((rc = tf_check_adamw_desc(&cuda_checker, err, op, d))) return rc;
    return adamw(be, s, op, params, grads, m, v, segs, nsegs, &d->hyper, d->rule, err);
}
