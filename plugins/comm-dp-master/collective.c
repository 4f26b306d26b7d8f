/* collective.c — reduce, broadcast, allreduce and barrier between the
 * replica threads: post, meet, check, work in phases (see dp_master.h).
 *
 * Where every replica's backend holds host memory (and staging is not
 * forced) ranks read each other's buffers directly. Otherwise (device memory:
 * backend-cuda on GPUs 0..N-1) buffers move with the backend's device-to-
 * device memcpy, which copies peer to peer where the GPUs allow it and
 * through host memory where they do not; the root sums through its staging
 * buffer (sum.c).
 */
#include <stdio.h>
#include <string.h>

#include "dp_master.h"

const char *dp_kind_name(dp_kind kind)
{
    switch (kind) {
    case DP_REDUCE: return "reduce";
    case DP_BROADCAST: return "broadcast";
    case DP_ALLREDUCE: return "allreduce";
    case DP_BARRIER: return "barrier";
    }
    return "?";
}

static const char *dt_name(tf_dtype dt)
{
    const char *n = tf_dtype_name(dt);
    return n ? n : "unknown-dtype";
}

static const char *op_name(tf_reduce_op op) { return op == TF_REDUCE_AVG ? "AVG" : "SUM"; }

/* The error every call returns once some rank called abort. */
static tf_status stopped(tf_comm *c, tf_error *err)
{
    int rank = -1;
    char why[DP_WHY_MAX];
    dp_barrier_aborted(&c->sh->barrier, &rank, why, sizeof why);
    return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": rank %d stopped: %s", rank, why);
}

/* Every rank runs this on the same posts, so all of them agree. */
static tf_status check_posts(tf_comm *c, const dp_post *posts, tf_error *err)
{
    const char *what = dp_kind_name(posts[c->rank].kind);
    for (int k = 0; k < c->world; k++)
        if (posts[k].failed[0])
            return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": %s on rank %d of %d: rank %d failed: %s",
                                what, c->rank, c->world, k, posts[k].fail_why);
    for (int k = 0; k < c->world; k++)
        if (posts[k].bad)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                DP_NAME ": %s on rank %d of %d: rank %d called %s with bad "
                                "arguments: %s",
                                what, c->rank, c->world, k, dp_kind_name(posts[k].kind),
                                posts[k].bad_why);
    const dp_post *p0 = &posts[0];
    for (int k = 1; k < c->world; k++) {
        const dp_post *p = &posts[k];
        char prefix[96];
        snprintf(prefix, sizeof prefix, DP_NAME ": %s on rank %d of %d: ", what, c->rank,
                 c->world);
        if (p->kind != p0->kind)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%scollective mismatch: rank 0 called %s, rank %d called %s",
                                prefix, dp_kind_name(p0->kind), k, dp_kind_name(p->kind));
        if (p0->kind == DP_BARRIER) continue;
        if (p->dt != p0->dt)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%sdtype mismatch: rank 0 passed %s, rank %d passed %s", prefix,
                                dt_name(p0->dt), k, dt_name(p->dt));
        if (p->count != p0->count)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%scount mismatch: rank 0 passed %zu elements of %s, rank %d "
                                "passed %zu",
                                prefix, p0->count, dt_name(p0->dt), k, p->count);
        if (p0->kind != DP_ALLREDUCE && p->root != p0->root)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%sroot mismatch: rank 0 named root %d, rank %d named root %d",
                                prefix, p0->root, k, p->root);
        if (p0->kind != DP_BROADCAST && p->op != p0->op)
            return tf_error_set(err, TF_ERR_RUNTIME,
                                "%sop mismatch: rank 0 passed %s, rank %d passed %s", prefix,
                                op_name(p0->op), k, op_name(p->op));
    }
    return TF_OK;
}

/* Ends a work phase: records this rank's outcome, meets the others, and turns
 * a failure on any rank into an error on every rank. */
static tf_status phase_end(tf_comm *c, dp_post *posts, int phase, tf_status st,
                           const tf_error *local, tf_error *err)
{
    dp_post *me = &posts[c->rank];
    if (st) {
        snprintf(me->fail_why, sizeof me->fail_why, "%s", local->msg);
        me->failed[phase] = true;
    }
    if (!dp_barrier_wait(&c->sh->barrier)) return stopped(c, err);
    for (int k = 0; k < c->world; k++)
        if (posts[k].failed[phase])
            return tf_error_set(err, TF_ERR_RUNTIME, DP_NAME ": %s on rank %d of %d: rank %d failed: %s",
                                dp_kind_name(me->kind), c->rank, c->world, k,
                                posts[k].fail_why);
    return TF_OK;
}

/* The root sums every replica's buffer into its own (in rank order). */
static tf_status sum_on_root(tf_comm *c, const dp_post *posts, int root, tf_error *err)
{
    const dp_post *me = &posts[c->rank];
    if (c->rank != root) return TF_OK;
    tf_status st = TF_OK;
    if (!c->sh->host_path) {
        for (int k = 0; k < c->world; k++) c->bufs[k] = posts[k].buf;
        return dp_sum_staged(c, c->bufs, me->count, me->dt, me->op, err);
    }
    for (int k = 0; k < c->world && !st; k++)
        if (k != root) st = dp_add_host(c, me->buf, posts[k].buf, me->count, me->dt, err);
    if (!st && me->op == TF_REDUCE_AVG) st = dp_average(c, me->buf, me->count, me->dt, err);
    if (!st) st = c->bvt->stream_sync(c->be, NULL, err);
    return st;
}

/* Every rank but the root copies the root's buffer into its own. */
static tf_status copy_from_root(tf_comm *c, const dp_post *posts, int root, tf_error *err)
{
    const dp_post *me = &posts[c->rank];
    if (c->rank == root || me->buf == posts[root].buf) return TF_OK;
    size_t bytes = me->count * tf_dtype_size(me->dt);
    tf_memcpy_kind kind = c->sh->host_path ? TF_COPY_HOST_TO_HOST : TF_COPY_DEVICE_TO_DEVICE;
    if (c->bvt->memcpy(c->be, me->buf, posts[root].buf, bytes, kind, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "memcpy of %zu bytes from rank %d's buffer failed",
                            bytes, root);
    return c->bvt->stream_sync(c->be, NULL, err);
}

/* Host memory: rank r sums slice r of every buffer into rank 0's buffer, in
 * rank order (the same bits as a reduce to rank 0), and averages it. */
static tf_status sum_my_slice(tf_comm *c, const dp_post *posts, tf_error *err)
{
    const dp_post *me = &posts[c->rank];
    size_t esize = tf_dtype_size(me->dt);
    /* slices of whole 64-byte lines, so no two ranks write one cache line */
    size_t per = (me->count + (size_t)c->world - 1) / (size_t)c->world;
    size_t line = 64 / esize;
    per = (per + line - 1) / line * line;
    size_t lo = per * (size_t)c->rank, hi = lo + per;
    if (lo >= me->count) return TF_OK;
    if (hi > me->count) hi = me->count;
    char *acc = (char *)posts[0].buf + lo * esize;
    tf_status st = TF_OK;
    for (int k = 1; k < c->world && !st; k++)
        st = dp_add_host(c, acc, (const char *)posts[k].buf + lo * esize, hi - lo, me->dt, err);
    if (!st && me->op == TF_REDUCE_AVG) st = dp_average(c, acc, hi - lo, me->dt, err);
    if (!st) st = c->bvt->stream_sync(c->be, NULL, err);
    return st;
}

tf_status dp_collective(tf_comm *c, dp_kind kind, void *buf, size_t count, tf_dtype dt,
                        tf_reduce_op op, int root, const char *local_bad, tf_error *err)
{
    dp_shared *sh = c->sh;
    if (dp_barrier_aborted(&sh->barrier, NULL, NULL, 0)) return stopped(c, err);
    dp_post *posts = sh->posts[c->seq++ & 1];
    dp_post *me = &posts[c->rank];
    me->kind = kind;
    me->buf = buf;
    me->count = count;
    me->dt = dt;
    me->op = op;
    me->root = root;
    me->bad = local_bad != NULL;
    memset(me->failed, 0, sizeof me->failed);
    if (local_bad) {
        snprintf(me->bad_why, sizeof me->bad_why, "%s", local_bad);
    } else if (count > 0) {
        /* the buffer's producers ran on this backend's default stream */
        tf_error e = {0};
        if (c->bvt->stream_sync(c->be, NULL, &e) != TF_OK) {
            me->failed[0] = true;
            snprintf(me->fail_why, sizeof me->fail_why, "stream_sync before the %s: %.900s",
                     dp_kind_name(kind), e.msg);
        }
    }
    if (!dp_barrier_wait(&sh->barrier)) return stopped(c, err);
    tf_status st = check_posts(c, posts, err);
    if (st || kind == DP_BARRIER || count == 0) return st;

    tf_error local = {0};
    switch (kind) {
    case DP_REDUCE:
        st = sum_on_root(c, posts, root, &local);
        return phase_end(c, posts, 1, st, &local, err);
    case DP_BROADCAST:
        st = copy_from_root(c, posts, root, &local);
        return phase_end(c, posts, 1, st, &local, err);
    case DP_ALLREDUCE:
        if (sh->host_path && sh->algo == DP_ALLREDUCE_SLICES)
            st = sum_my_slice(c, posts, &local);
        else
            st = sum_on_root(c, posts, 0, &local);
        if ((st = phase_end(c, posts, 1, st, &local, err))) return st;
        st = copy_from_root(c, posts, 0, &local);
        return phase_end(c, posts, 2, st, &local, err);
    case DP_BARRIER:
        break;
    }
    return TF_OK;
}
