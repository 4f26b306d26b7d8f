/* comm_nccl_driver.c — drives comm-nccl through its vtable for
 * tests/test_comm_nccl.sh, loading it the way the core does (dlopen,
 * RTLD_LOCAL) and starting ranks the way the core's launchers do.
 *
 *   comm-nccl-driver probe PLUGIN
 *       "usable" (exit 0) or "unusable: WHY" (exit 1)
 *   comm-nccl-driver check-config PLUGIN CONFIG
 *       runs check_config on CONFIG's comm section (reading the core's keys
 *       itself, as the core does), then the unread-key check; prints "ok"
 *       or the error line, exits with the tf_status
 *   comm-nccl-driver run PLUGIN [options]
 *       --world N            world size (default 1)
 *       --launch MODE        fork: one process per rank with the core's 64 KiB
 *                            MAP_SHARED region (TF_LAUNCH_PROCESSES);
 *                            fork-noshared: the same with shared = NULL;
 *                            external: this process is one rank, its number from
 *                            OMPI_COMM_WORLD_RANK (mpirun) or --rank (default fork)
 *       --ranks a,b,...      fork modes: start only these ranks (others never come)
 *       --rank R             external: this rank
 *       --backend SO|fake    the backend: a backend plugin, or "fake", a test
 *                            double with native streams that never reaches a GPU
 *       --ops                after init, run the collectives and check their results
 *                            (and, world 2 and more, send/recv)
 *       --abort-rank R       after init, rank R calls abort(); everyone then
 *                            calls barrier, which must fail
 *       -o KEY=VALUE         a config override (comm.bootstrap=file, ...)
 *       Every rank prints "rank R: ok ..." or "rank R: error: MESSAGE"; the
 *       exit status is 0 when every rank succeeded, else a failed rank's status.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/error.h"
#include "tfcore/plugin.h"

#include "plan.h" /* tf_comm_settings_read: the core's keys of the comm section */

#define MAX_RANKS 64
#define MAX_OVERRIDES 16

static const tf_plugin *load_plugin(const char *path, uint32_t kind, tf_error *err)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        tf_error_set(err, TF_ERR_PLUGIN, "cannot load %s: %s", path, dlerror());
        return NULL;
    }
    tf_plugin_entry_fn entry = (tf_plugin_entry_fn)dlsym(h, TF_PLUGIN_ENTRY_SYMBOL);
    const tf_plugin *p = entry ? entry() : NULL;
    if (!p || p->magic != TF_PLUGIN_MAGIC || p->kind != kind || !p->vtable) {
        tf_error_set(err, TF_ERR_PLUGIN, "%s is not a %s plugin", path, tf_kind_name(kind));
        return NULL;
    }
    return p;
}

/* --- a fake backend: native streams on paper, no device behind them ------- */
struct tf_backend { int unused; };
struct tf_stream { int unused; };
struct tf_event { int unused; };

static tf_status fake_stream_create(tf_backend *be, tf_stream **out, tf_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "fake backend: out of memory");
}
static void fake_stream_destroy(tf_backend *be, tf_stream *s) { free(s); }
static tf_status fake_event_create(tf_backend *be, tf_event **out, tf_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "fake backend: out of memory");
}
static void fake_event_destroy(tf_backend *be, tf_event *e) { free(e); }
static tf_status fake_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out,
                            tf_error *err)
{
    *out = calloc(1, bytes ? bytes : 1);
    return *out ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "fake backend: out of memory");
}
static void fake_free(tf_backend *be, void *p, tf_mem_kind kind) { free(p); }
static tf_status fake_memset(tf_backend *be, void *dst, int v, size_t n, tf_stream *s)
{
    memset(dst, v, n);
    return TF_OK;
}
static const char *fake_device_name(tf_backend *be) { return "fake CUDA backend (test double)"; }
/* NULL for every stream: were a GPU there, comm-nccl would refuse this
 * backend ("no native CUDA stream") instead of using a bogus handle. */
static void *fake_native_stream(tf_backend *be, tf_stream *s) { return NULL; }

static const tf_backend_vtable fake_vt = {
    .size = TF_VTABLE_SIZE(tf_backend_vtable),
    .device_name = fake_device_name,
    .alloc = fake_alloc,
    .free = fake_free,
    .memset = fake_memset,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .native_stream = fake_native_stream,
};
static struct tf_backend fake_be;

/* --- options ------------------------------------------------------------------ */
typedef struct opts {
    const char *plugin;
    int world;
    const char *launch;
    int ranks[MAX_RANKS];
    int nranks;          /* 0: all */
    int rank;            /* external */
    const char *backend; /* NULL: fake */
    bool ops;
    int abort_rank;
    const char *overrides[MAX_OVERRIDES];
    int noverrides;
} opts;

static int usage(void)
{
    fprintf(stderr, "usage: comm-nccl-driver probe PLUGIN | check-config PLUGIN CONFIG | "
                    "run PLUGIN [--world N] [--launch fork|fork-noshared|external] "
                    "[--ranks a,b] [--rank R] [--backend SO|fake] [--ops] [--abort-rank R] "
                    "[-o KEY=VALUE]...\n");
    return 2;
}

/* Print one whole line with one write(), so that ranks do not interleave. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
    (void)w;
}

/* --- the collectives check (needs a real CUDA backend) ---------------------- */
typedef struct ctx {
    const tf_comm_vtable *cvt;
    tf_comm *c;
    const tf_backend_vtable *bvt;
    tf_backend *be;
    int rank, world;
} ctx;

static tf_status to_device(ctx *x, void *dev, const void *host, size_t bytes, tf_error *err)
{
    if (x->bvt->memcpy(x->be, dev, host, bytes, TF_COPY_HOST_TO_DEVICE, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "backend memcpy to the device failed");
    return TF_OK;
}

static tf_status to_host(ctx *x, void *host, const void *dev, size_t bytes, tf_error *err)
{
    if (x->bvt->memcpy(x->be, host, dev, bytes, TF_COPY_DEVICE_TO_HOST, NULL) != TF_OK)
        return tf_error_set(err, TF_ERR_RUNTIME, "backend memcpy to the host failed");
    return x->bvt->stream_sync(x->be, NULL, err);
}

/* DDP's pattern: three f32 buckets (1, 1000 and 25 MiB of elements) started
 * back to back with AVG, waited for in order, three steps in a row. */
static tf_status check_buckets(ctx *x, tf_error *err)
{
    static const size_t sizes[3] = {1, 1000, 25u << 18}; /* 25 MiB of f32 */
    void *dev[3] = {NULL, NULL, NULL};
    float *host = malloc(sizes[2] * sizeof(float));
    tf_status st = host ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    for (int b = 0; !st && b < 3; b++)
        st = x->bvt->alloc(x->be, sizes[b] * sizeof(float), TF_MEM_DEVICE, &dev[b], err);
    double rank_sum = (double)x->world * (x->world + 1) / 2; /* sum of (rank + 1) */
    for (int step = 0; !st && step < 3; step++) {
        tf_comm_request *req[3] = {NULL, NULL, NULL};
        for (int b = 0; !st && b < 3; b++) {
            for (size_t i = 0; i < sizes[b]; i++)
                host[i] = (float)((x->rank + 1) * (int)((i + (size_t)step) % 251 + 1));
            st = to_device(x, dev[b], host, sizes[b] * sizeof(float), err);
            if (!st) st = x->cvt->allreduce_start(x->c, dev[b], sizes[b], TF_DTYPE_F32, TF_REDUCE_AVG,
                                                  &req[b], err);
        }
        for (int b = 0; b < 3; b++)
            if (req[b]) {
                tf_status w = x->cvt->wait(x->c, req[b], err);
                if (!st) st = w;
            }
        for (int b = 0; !st && b < 3; b++) {
            st = to_host(x, host, dev[b], sizes[b] * sizeof(float), err);
            for (size_t i = 0; !st && i < sizes[b]; i++) {
                double want = (double)((i + (size_t)step) % 251 + 1) * rank_sum / x->world;
                if (fabs(host[i] - want) > 1e-6 * want)
                    st = tf_error_set(err, TF_ERR_RUNTIME,
                                      "step %d bucket %d element %zu: average %.9g, want %.9g", step,
                                      b, i, host[i], want);
            }
        }
    }
    for (int b = 0; b < 3; b++)
        if (dev[b]) x->bvt->free(x->be, dev[b], TF_MEM_DEVICE);
    free(host);
    return st;
}

static tf_status check_f64_sum(ctx *x, tf_error *err)
{
    enum { N = 1000 };
    double h[N];
    void *d = NULL;
    tf_status st = x->bvt->alloc(x->be, sizeof h, TF_MEM_DEVICE, &d, err);
    for (int i = 0; i < N; i++) h[i] = x->rank + 0.5 + i;
    if (!st) st = to_device(x, d, h, sizeof h, err);
    tf_comm_request *r = NULL;
    if (!st) st = x->cvt->allreduce_start(x->c, d, N, TF_DTYPE_F64, TF_REDUCE_SUM, &r, err);
    if (!st) st = x->cvt->wait(x->c, r, err);
    if (!st) st = to_host(x, h, d, sizeof h, err);
    for (int i = 0; !st && i < N; i++) {
        double want = (double)x->world * (x->world - 1) / 2 + x->world * (0.5 + i);
        if (h[i] != want)
            st = tf_error_set(err, TF_ERR_RUNTIME, "f64 sum element %d: %.17g, want %.17g", i, h[i], want);
    }
    if (d) x->bvt->free(x->be, d, TF_MEM_DEVICE);
    return st;
}

/* Broadcast from the last rank: f32, i32, u8, i64 (NCCL types) and bool (bytes). */
static tf_status check_broadcasts(ctx *x, tf_error *err)
{
    static const tf_dtype types[5] = {TF_DTYPE_F32, TF_DTYPE_I32, TF_DTYPE_U8, TF_DTYPE_I64,
                                      TF_DTYPE_BOOL};
    enum { N = 777 };
    int root = x->world - 1;
    tf_status st = TF_OK;
    for (int t = 0; !st && t < 5; t++) {
        size_t es = tf_dtype_size(types[t]), bytes = es * N;
        unsigned char want[8 * N], got[8 * N];
        for (size_t i = 0; i < bytes; i++) want[i] = (unsigned char)(i * 37 + (size_t)t * 11 + 1);
        void *d = NULL;
        st = x->bvt->alloc(x->be, bytes, TF_MEM_DEVICE, &d, err);
        memset(got, 0, bytes);
        if (!st) st = to_device(x, d, x->rank == root ? want : got, bytes, err);
        if (!st) st = x->cvt->broadcast(x->c, d, N, types[t], root, err);
        if (!st) st = to_host(x, got, d, bytes, err);
        if (!st && memcmp(got, want, bytes) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "broadcast of %d %s from rank %d differs", N,
                              tf_dtype_name(types[t]), root);
        if (d) x->bvt->free(x->be, d, TF_MEM_DEVICE);
    }
    return st;
}

static tf_status check_reduce(ctx *x, tf_error *err)
{
    enum { N = 4096 };
    float h[N];
    void *d = NULL;
    tf_status st = x->bvt->alloc(x->be, sizeof h, TF_MEM_DEVICE, &d, err);
    for (int i = 0; i < N; i++) h[i] = (float)(x->rank * 3 + i % 7);
    if (!st) st = to_device(x, d, h, sizeof h, err);
    if (!st) st = x->cvt->reduce(x->c, d, N, TF_DTYPE_F32, TF_REDUCE_SUM, 0, err);
    if (!st) st = to_host(x, h, d, sizeof h, err);
    for (int i = 0; !st && x->rank == 0 && i < N; i++) {
        float want = (float)(3 * x->world * (x->world - 1) / 2 + x->world * (i % 7));
        if (h[i] != want)
            st = tf_error_set(err, TF_ERR_RUNTIME, "reduce element %d: %g, want %g", i, h[i], want);
    }
    if (d) x->bvt->free(x->be, d, TF_MEM_DEVICE);
    return st;
}

static tf_status check_errors(ctx *x, tf_error *err)
{
    tf_comm_request *r = NULL;
    tf_error e;
    int dummy = 0;
    if (x->cvt->allreduce_start(x->c, &dummy, 1, TF_DTYPE_I32, TF_REDUCE_AVG, &r, &e) == TF_OK ||
        !strstr(e.msg, "TF_REDUCE_AVG needs a floating-point dtype"))
        return tf_error_set(err, TF_ERR_RUNTIME, "AVG of I32 was not refused as it should: %s", e.msg);
    if (x->cvt->broadcast(x->c, &dummy, 1, TF_DTYPE_I32, x->world, &e) == TF_OK ||
        !strstr(e.msg, "is not in [0,"))
        return tf_error_set(err, TF_ERR_RUNTIME, "broadcast from rank %d was not refused: %s",
                            x->world, e.msg);
    return TF_OK;
}


/* send / recv (ABI 1.4): a pipeline's 1F1B exchange between ranks 0 and 1
 * (rank 0 starts two sends, then waits in a receive of the first gradient,
 * which rank 1 sends only after its first receive), then a ring over every
 * rank of two messages each (f32, and bool travelling as bytes), all four
 * started before any is waited for (a wait completes every send and receive
 * started before it: README.md, "Point to point"). */
static tf_status check_p2p(ctx *x, tf_error *err)
{
    enum { N = 5000 };
    float h[N];
    void *a0 = NULL, *a1 = NULL, *g0 = NULL, *b = NULL;
    tf_status st = x->bvt->alloc(x->be, sizeof h, TF_MEM_DEVICE, &a0, err);
    if (!st) st = x->bvt->alloc(x->be, sizeof h, TF_MEM_DEVICE, &a1, err);
    if (!st) st = x->bvt->alloc(x->be, sizeof h, TF_MEM_DEVICE, &g0, err);
    if (!st) st = x->bvt->alloc(x->be, N, TF_MEM_DEVICE, &b, err);
    tf_comm_request *r[3] = {NULL, NULL, NULL};
    if (!st && x->rank == 0) {
        for (int i = 0; i < N; i++) h[i] = (float)(i % 97);
        st = to_device(x, a0, h, sizeof h, err);
        for (int i = 0; !st && i < N; i++) h[i] = (float)(i % 89) + 0.5f;
        if (!st) st = to_device(x, a1, h, sizeof h, err);
        if (!st) st = x->cvt->send(x->c, a0, N, TF_DTYPE_F32, 1, &r[0], err);
        if (!st) st = x->cvt->send(x->c, a1, N, TF_DTYPE_F32, 1, &r[1], err);
        if (!st) st = x->cvt->recv(x->c, g0, N, TF_DTYPE_F32, 1, &r[2], err);
        if (!st) st = x->cvt->wait(x->c, r[2], err);
        for (int k = 0; !st && k < 2; k++) st = x->cvt->wait(x->c, r[k], err);
        if (!st) st = to_host(x, h, g0, sizeof h, err);
        for (int i = 0; !st && i < N; i++)
            if (h[i] != (float)(i % 83) - 1.0f)
                st = tf_error_set(err, TF_ERR_RUNTIME, "gradient 0 element %d: %g, want %g", i, h[i],
                                  (float)(i % 83) - 1.0f);
    } else if (!st && x->rank == 1) {
        st = x->cvt->recv(x->c, a0, N, TF_DTYPE_F32, 0, &r[0], err);
        if (!st) st = x->cvt->wait(x->c, r[0], err);
        for (int i = 0; !st && i < N; i++) h[i] = (float)(i % 83) - 1.0f;
        if (!st) st = to_device(x, g0, h, sizeof h, err);
        if (!st) st = x->cvt->send(x->c, g0, N, TF_DTYPE_F32, 0, &r[1], err);
        if (!st) st = x->cvt->recv(x->c, a1, N, TF_DTYPE_F32, 0, &r[2], err);
        if (!st) st = x->cvt->wait(x->c, r[2], err);
        if (!st) st = x->cvt->wait(x->c, r[1], err);
        for (int k = 0; !st && k < 2; k++) {
            st = to_host(x, h, k ? a1 : a0, sizeof h, err);
            for (int i = 0; !st && i < N; i++) {
                float want = k ? (float)(i % 89) + 0.5f : (float)(i % 97);
                if (h[i] != want)
                    st = tf_error_set(err, TF_ERR_RUNTIME, "activation %d element %d: %g, want %g", k, i, h[i], want);
            }
        }
    }
    /* the ring */
    int next = (x->rank + 1) % x->world, prev = (x->rank + x->world - 1) % x->world;
    unsigned char bytes[N];
    for (int i = 0; !st && i < N; i++) h[i] = (float)(x->rank * 1000 + i % 101);
    for (int i = 0; i < N; i++) bytes[i] = (unsigned char)((i + x->rank) & 1);
    if (!st) st = to_device(x, a0, h, sizeof h, err);
    if (!st) st = to_device(x, b, bytes, N, err);
    tf_comm_request *r4 = NULL;
    void *bin = g0; /* the bool message's receive buffer */
    if (!st) st = x->cvt->send(x->c, a0, N, TF_DTYPE_F32, next, &r[0], err);
    if (!st) st = x->cvt->send(x->c, b, N, TF_DTYPE_BOOL, next, &r[1], err);
    if (!st) st = x->cvt->recv(x->c, a1, N, TF_DTYPE_F32, prev, &r[2], err);
    if (!st) st = x->cvt->recv(x->c, bin, N, TF_DTYPE_BOOL, prev, &r4, err);
    if (!st) st = x->cvt->wait(x->c, r[2], err);
    if (!st) st = x->cvt->wait(x->c, r[0], err);
    if (!st) st = x->cvt->wait(x->c, r4, err);
    if (!st) st = x->cvt->wait(x->c, r[1], err);
    if (!st) st = to_host(x, h, a1, sizeof h, err);
    for (int i = 0; !st && i < N; i++)
        if (h[i] != (float)(prev * 1000 + i % 101))
            st = tf_error_set(err, TF_ERR_RUNTIME, "ring message from rank %d element %d: %g", prev, i, h[i]);
    if (!st) st = to_host(x, bytes, bin, N, err);
    for (int i = 0; !st && i < N; i++)
        if (bytes[i] != (unsigned char)((i + prev) & 1))
            st = tf_error_set(err, TF_ERR_RUNTIME, "ring bool message from rank %d byte %d: %d", prev, i, bytes[i]);
    tf_error e;
    tf_comm_request *q = NULL;
    if (!st && (x->cvt->send(x->c, a0, N, TF_DTYPE_F32, x->rank, &q, &e) == TF_OK || !strstr(e.msg, "is not another rank")))
        st = tf_error_set(err, TF_ERR_RUNTIME, "a send to itself was not refused: %s", q ? "started" : e.msg);
    void *bufs[4] = {a0, a1, g0, b};
    for (int k = 0; k < 4; k++)
        if (bufs[k]) x->bvt->free(x->be, bufs[k], TF_MEM_DEVICE);
    return st;
}

static tf_status run_ops(ctx *x, tf_error *err)
{
    tf_status st = check_errors(x, err);
    if (!st) st = check_buckets(x, err);
    if (!st) st = check_f64_sum(x, err);
    if (!st) st = check_broadcasts(x, err);
    if (!st) st = check_reduce(x, err);
    if (!st && x->world > 1 && TF_HAS(x->cvt, send) && TF_HAS(x->cvt, recv)) st = check_p2p(x, err);
    for (int i = 0; !st && i < 3; i++) st = x->cvt->barrier(x->c, err);
    return st;
}

/* --- one rank ------------------------------------------------------------------- */

static tf_status open_backend(const opts *o, tf_config *cfg, int device,
                              const tf_backend_vtable **bvt, tf_backend **be, tf_error *err)
{
    if (!o->backend || strcmp(o->backend, "fake") == 0) {
        *bvt = &fake_vt;
        *be = &fake_be;
        return TF_OK;
    }
    const tf_plugin *p = load_plugin(o->backend, TF_KIND_BACKEND, err);
    if (!p) return err->code;
    *bvt = p->vtable;
    tf_backend_open_args a = {.size = sizeof a, .device = device, .threads = 1, .seed = 1,
                              .section = tf_config_section(cfg, "backend")};
    return (*bvt)->open(&a, be, err);
}

static tf_status build_config(const opts *o, tf_config **cfg, tf_error *err)
{
    char text[256];
    snprintf(text, sizeof text, "comm = { plugin = \"nccl\"; world_size = %d; };\n", o->world);
    tf_status st = tf_config_load_string(cfg, text, "driver.cfg", NULL, err);
    for (int i = 0; !st && i < o->noverrides; i++) st = tf_config_override(*cfg, o->overrides[i], err);
    return st;
}

static tf_status run_rank(const opts *o, const tf_comm_vtable *cvt, int rank, int local_rank,
                          void *shared, char *done, size_t n, tf_error *err)
{
    tf_config *cfg = NULL;
    tf_status st = build_config(o, &cfg, err);
    if (st) return st;
    const tf_backend_vtable *bvt = NULL;
    tf_backend *be = NULL;
    if ((st = open_backend(o, cfg, local_rank, &bvt, &be, err))) {
        tf_config_free(cfg);
        return st;
    }
    tf_comm_settings core; /* the core's keys, as the core reads them (comm.timeout_s) */
    if ((st = tf_comm_settings_read(tf_config_section(cfg, "comm"), &core, err))) {
        if (bvt != &fake_vt) bvt->close(be);
        tf_config_free(cfg);
        return st;
    }
    tf_comm_init_args a = {.size = sizeof a, .section = tf_config_section(cfg, "comm"),
                           .rank = rank, .world_size = o->world, .local_rank = local_rank,
                           .backend = bvt, .be = be, .shared = shared,
                           .local_world_size = o->world, .timeout_s = core.timeout_s};
    tf_comm *c = NULL;
    st = cvt->init(&a, &c, err);
    if (!st && o->abort_rank >= 0) {
        if (rank == o->abort_rank) cvt->abort(c, "driver injected failure");
        tf_error e;
        st = cvt->barrier(c, &e);
        if (st == TF_OK)
            st = tf_error_set(err, TF_ERR_RUNTIME, "barrier succeeded after rank %d aborted",
                              o->abort_rank);
        else if (!strstr(e.msg, "driver injected failure"))
            st = tf_error_set(err, TF_ERR_RUNTIME, "barrier failed without the abort's reason: %s",
                              e.msg);
        else {
            st = TF_OK;
            snprintf(done, n, "barrier after the abort: %.200s", e.msg);
        }
    } else if (!st && o->ops) {
        ctx x = {cvt, c, bvt, be, rank, o->world};
        st = run_ops(&x, err);
        if (!st)
            snprintf(done, n, "3 steps x 3 AVG buckets, f64 sum, 5 broadcasts, reduce, 3 barriers%s",
                     o->world > 1 && TF_HAS(cvt, send) && TF_HAS(cvt, recv) ? ", send/recv" : "");
    }
    if (c) cvt->finalize(c);
    if (bvt != &fake_vt) bvt->close(be);
    tf_config_free(cfg);
    return st;
}

static int report(int rank, tf_status st, const char *done, const tf_error *err)
{
    if (st) say("rank %d: error: %s", rank, err->msg);
    else say("rank %d: ok%s%s", rank, done[0] ? ": " : "", done);
    return (int)st;
}

static int cmd_run(const opts *o)
{
    tf_error err;
    const tf_plugin *p = load_plugin(o->plugin, TF_KIND_COMM, &err);
    if (!p) {
        say("error: %s", err.msg);
        return err.code;
    }
    const tf_comm_vtable *cvt = p->vtable;
    char done[256] = "";
    if (strcmp(o->launch, "external") == 0) {
        const char *env = getenv("OMPI_COMM_WORLD_RANK");
        int rank = env ? atoi(env) : o->rank;
        env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        int local = env ? atoi(env) : 0;
        tf_status st = run_rank(o, cvt, rank, local, NULL, done, sizeof done, &err);
        return report(rank, st, done, &err);
    }
    bool with_shared = strcmp(o->launch, "fork") == 0;
    if (!with_shared && strcmp(o->launch, "fork-noshared") != 0) return usage();
    /* the core's region: zero-filled, MAP_SHARED, mapped before the fork */
    void *shared = mmap(NULL, TF_COMM_SHARED_BYTES, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        say("error: mmap: %s", strerror(errno));
        return 1;
    }
    int ranks[MAX_RANKS], nranks = o->nranks;
    for (int i = 0; i < (nranks ? nranks : o->world); i++) ranks[i] = nranks ? o->ranks[i] : i;
    if (!nranks) nranks = o->world;
    pid_t pids[MAX_RANKS];
    for (int i = 0; i < nranks; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            say("error: fork: %s", strerror(errno));
            return 1;
        }
        if (pids[i] == 0) {
            tf_status st = run_rank(o, cvt, ranks[i], ranks[i], with_shared ? shared : NULL, done,
                                    sizeof done, &err);
            _exit(report(ranks[i], st, done, &err));
        }
    }
    int worst = 0;
    for (int i = 0; i < nranks; i++) {
        int status = 0;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (WIFSIGNALED(status)) say("rank %d: error: killed by signal %d", ranks[i], WTERMSIG(status));
        if (code && !worst) worst = code;
    }
    munmap(shared, TF_COMM_SHARED_BYTES);
    return worst;
}

static int cmd_probe(const char *plugin)
{
    tf_error err;
    const tf_plugin *p = load_plugin(plugin, TF_KIND_COMM, &err);
    if (!p) {
        say("error: %s", err.msg);
        return err.code;
    }
    char why[512] = "";
    if (!p->probe || p->probe(why, sizeof why)) {
        say("usable");
        return 0;
    }
    say("unusable: %s", why);
    return 1;
}

static int cmd_check_config(const char *plugin, const char *path)
{
    tf_error err;
    const tf_plugin *p = load_plugin(plugin, TF_KIND_COMM, &err);
    tf_config *cfg = NULL;
    tf_status st = p ? tf_config_load(&cfg, path, &err) : err.code;
    if (st) goto out;
    /* the core's keys, read (and so known) by the core's own function */
    tf_section *sec = tf_config_section(cfg, "comm");
    const char *name = NULL;
    tf_comm_settings core;
    if ((st = tf_cfg_string(sec, "plugin", NULL, &name, &err)) || (st = tf_comm_settings_read(sec, &core, &err)) ||
        (st = ((const tf_comm_vtable *)p->vtable)->check_config(sec, &err)))
        goto out;
    st = tf_config_check_unread(cfg, &err);
out:
    tf_config_free(cfg);
    if (st) say("%s", err.msg);
    else say("ok");
    return (int)st;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "probe") == 0) return cmd_probe(argv[2]);
    if (argc == 4 && strcmp(argv[1], "check-config") == 0) return cmd_check_config(argv[2], argv[3]);
    if (argc < 3 || strcmp(argv[1], "run") != 0) return usage();
    opts o = {.plugin = argv[2], .world = 1, .launch = "fork", .abort_rank = -1};
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ops") == 0) { o.ops = true; continue; }
        if (!v) return usage();
        i++;
        if (strcmp(a, "--world") == 0) {
            if (!parse_int(v, 1, MAX_RANKS, &o.world)) return usage();
        } else if (strcmp(a, "--launch") == 0) {
            o.launch = v;
        } else if (strcmp(a, "--rank") == 0) {
            if (!parse_int(v, 0, MAX_RANKS - 1, &o.rank)) return usage();
        } else if (strcmp(a, "--abort-rank") == 0) {
            if (!parse_int(v, 0, MAX_RANKS - 1, &o.abort_rank)) return usage();
        } else if (strcmp(a, "--backend") == 0) {
            o.backend = v;
        } else if (strcmp(a, "-o") == 0) {
            if (o.noverrides == MAX_OVERRIDES) return usage();
            o.overrides[o.noverrides++] = v;
        } else if (strcmp(a, "--ranks") == 0) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                if (o.nranks == MAX_RANKS || !parse_int(t, 0, MAX_RANKS - 1, &o.ranks[o.nranks]))
                    return usage();
                o.nranks++;
            }
        } else {
            return usage();
        }
    }
    return cmd_run(&o);
}
