/* test_comm_dp_master.c — the dp-master comm plugin with 1 to 4 replica
 * threads on backend-cpu, both loaded through the real loader from the build
 * tree: reduce, broadcast and allreduce against exact sums of distinct
 * per-rank values, on the host-memory path, the forced staging path
 * (force_staging = true) and the device-memory path (a backend that says its
 * memory is not host memory); both host allreduce algorithms; long loops of
 * mixed collectives; abort releasing blocked ranks; mismatched and bad
 * arguments; backend failures on one rank reaching every rank; init errors.
 *
 * backend-cpu is wrapped in a shim vtable that answers host_memory as each
 * test needs, counts the copies and adds the plugin makes (to see which path
 * it took), and fails an op on one chosen replica when a test asks.
 * Exits 77 (skip) when backend-cpu was not built (no OpenBLAS). */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"

#define MAXN 4

static tf_registry *reg;
static const tf_backend_vtable *cpu; /* backend-cpu as loaded */
static const tf_comm_vtable *cvt;    /* dp-master as loaded */

/* --- the backend shim ------------------------------------------------------------ */

enum {
    FAIL_NONE = 0,
    FAIL_ADD,
    FAIL_MEMCPY,      /* every memcpy */
    FAIL_MEMCPY_D2H,  /* device-to-host copies only */
    FAIL_SYNC,
    FAIL_ALLOC_DEVICE,
    FAIL_ALLOC_PINNED
};
static _Atomic(tf_backend *) fail_be; /* the replica whose op fails */
static atomic_int fail_what;
static atomic_long n_d2d, n_h2h, n_add, n_alloc_device;
static atomic_int pinned_pass; /* pinned allocations let through before FAIL_ALLOC_PINNED bites */

static tf_backend_vtable shim_host, shim_dev;

static bool failing(tf_backend *be, int what)
{
    return atomic_load(&fail_what) == what && atomic_load(&fail_be) == be;
}
static bool says_host(tf_backend *be) { return true; }
static bool says_device(tf_backend *be) { return false; }

static tf_status shim_add(tf_backend *be, tf_stream *s, const void *a, const void *b, void *y,
                          size_t n, tf_dtype dt, tf_error *err)
{
    atomic_fetch_add(&n_add, 1);
    if (failing(be, FAIL_ADD)) return tf_error_set(err, TF_ERR_RUNTIME, "test: injected add failure");
    return cpu->add(be, s, a, b, y, n, dt, err);
}

static tf_status shim_memcpy(tf_backend *be, void *dst, const void *src, size_t bytes,
                             tf_memcpy_kind kind, tf_stream *s)
{
    if (kind == TF_COPY_DEVICE_TO_DEVICE) atomic_fetch_add(&n_d2d, 1);
    if (kind == TF_COPY_HOST_TO_HOST) atomic_fetch_add(&n_h2h, 1);
    if (failing(be, FAIL_MEMCPY) || (kind == TF_COPY_DEVICE_TO_HOST && failing(be, FAIL_MEMCPY_D2H)))
        return TF_ERR_RUNTIME;
    return cpu->memcpy(be, dst, src, bytes, kind, s);
}

static tf_status shim_sync(tf_backend *be, tf_stream *s, tf_error *err)
{
    if (failing(be, FAIL_SYNC))
        return tf_error_set(err, TF_ERR_RUNTIME, "test: injected stream_sync failure");
    return cpu->stream_sync(be, s, err);
}

static tf_status shim_alloc(tf_backend *be, size_t bytes, tf_mem_kind kind, void **out,
                            tf_error *err)
{
    if (kind == TF_MEM_DEVICE) atomic_fetch_add(&n_alloc_device, 1);
    if ((kind == TF_MEM_DEVICE && failing(be, FAIL_ALLOC_DEVICE)) ||
        (kind == TF_MEM_HOST_PINNED && failing(be, FAIL_ALLOC_PINNED) &&
         atomic_fetch_sub(&pinned_pass, 1) <= 0))
        return tf_error_set(err, TF_ERR_RUNTIME, "test: injected alloc failure (%zu bytes)", bytes);
    return cpu->alloc(be, bytes, kind, out, err);
}

static void make_shims(void)
{
    tf_backend_vtable base = {0};
    size_t n = cpu->size < sizeof base ? cpu->size : sizeof base;
    memcpy(&base, cpu, n);
    base.size = TF_VTABLE_SIZE(tf_backend_vtable);
    base.add = shim_add;
    base.memcpy = shim_memcpy;
    base.stream_sync = shim_sync;
    base.alloc = shim_alloc;
    shim_host = base;
    shim_host.host_memory = says_host;
    shim_dev = base;
    shim_dev.host_memory = says_device;
}

static void reset_counters(void)
{
    atomic_store(&n_d2d, 0);
    atomic_store(&n_h2h, 0);
    atomic_store(&n_add, 0);
    atomic_store(&n_alloc_device, 0);
}

static void inject(tf_backend *be, int what)
{
    if (what == FAIL_NONE) atomic_store(&pinned_pass, 0);
    atomic_store(&fail_be, be);
    atomic_store(&fail_what, what);
}

/* --- a world of N replicas ----------------------------------------------------------- */

enum { MODE_HOST, MODE_STAGED, MODE_DEVICE, MODE_HOST_RB, MODE_COUNT };
static const char *const mode_names[] = {"host", "forced staging", "device", "host reduce-broadcast"};

typedef struct world {
    int n;
    int mode;
    const tf_backend_vtable *bvt;
    tf_backend *be[MAXN];
    tf_comm *comm[MAXN];
    void *cell; /* the launcher's shared cell */
    tf_config *cfg;
} world;

static tf_config *config(const char *text)
{
    tf_config *cfg = NULL;
    tf_error err = {0};
    ck_assert_msg(tf_config_load_string(&cfg, text, "test.cfg", NULL, &err) == TF_OK, "%s",
                  err.msg);
    return cfg;
}

static tf_backend *open_backend(void)
{
    tf_backend_open_args a = {sizeof a, 0, 1, 1234, NULL, 1};
    tf_backend *be = NULL;
    tf_error err = {0};
    ck_assert_msg(cpu->open(&a, &be, &err) == TF_OK, "%s", err.msg);
    return be;
}

static tf_comm_init_args init_args(world *w, int rank)
{
    return (tf_comm_init_args){.size = sizeof(tf_comm_init_args),
                               .section = tf_config_section(w->cfg, "comm"),
                               .rank = rank,
                               .world_size = w->n,
                               .local_rank = rank,
                               .backend = w->bvt,
                               .be = w->be[rank],
                               .shared = &w->cell,
                               .local_world_size = w->n};
}

static void world_open(world *w, int n, int mode)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->mode = mode;
    w->cfg = config(mode == MODE_STAGED   ? "comm = { force_staging = true; };"
                    : mode == MODE_HOST_RB ? "comm = { allreduce = \"reduce-broadcast\"; };"
                                           : "comm = { };");
    w->bvt = mode == MODE_DEVICE ? &shim_dev : &shim_host;
    for (int r = 0; r < n; r++) w->be[r] = open_backend();
    for (int r = 0; r < n; r++) {
        tf_comm_init_args a = init_args(w, r);
        tf_error err = {0};
        ck_assert_msg(cvt->init(&a, &w->comm[r], &err) == TF_OK, "init rank %d: %s", r, err.msg);
        ck_assert_ptr_nonnull(w->cell);
    }
    inject(NULL, FAIL_NONE);
    reset_counters();
}

static void world_close(world *w)
{
    for (int r = 0; r < w->n; r++) {
        if (w->comm[r]) cvt->finalize(w->comm[r]);
        if (r < w->n - 1 && w->comm[r]) ck_assert_ptr_nonnull(w->cell);
    }
    ck_assert_ptr_null(w->cell); /* the last finalize freed the shared state */
    for (int r = 0; r < w->n; r++) cpu->close(w->be[r]);
    tf_config_free(w->cfg);
    inject(NULL, FAIL_NONE);
}

/* --- running one function on every replica thread -------------------------------------- */

typedef struct rank_ctx rank_ctx;
typedef void (*rank_fn)(rank_ctx *x);
struct rank_ctx {
    world *w;
    int rank;
    rank_fn fn;
    const void *arg;
    char fail[1024]; /* the first failed expectation of this rank */
    tf_status last;  /* for tests that look at errors */
    char last_msg[TF_ERROR_MSG_MAX];
};

static void *thread_main(void *p)
{
    rank_ctx *x = p;
    x->fn(x);
    return NULL;
}

/* A failed expectation is recorded, then the comm is aborted so the other
 * ranks do not wait forever for this one; they fail too, the first message
 * tells what happened. */
#define EXPECT(x, cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            if (!(x)->fail[0]) snprintf((x)->fail, sizeof (x)->fail, __VA_ARGS__);          \
            cvt->abort((x)->w->comm[(x)->rank], "test expectation failed");                 \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static void run_ranks_ctx(world *w, rank_fn fn, const void *arg, rank_ctx *ctx)
{
    pthread_t t[MAXN];
    for (int r = 0; r < w->n; r++) {
        memset(&ctx[r], 0, sizeof ctx[r]);
        ctx[r].w = w;
        ctx[r].rank = r;
        ctx[r].fn = fn;
        ctx[r].arg = arg;
        ck_assert_int_eq(pthread_create(&t[r], NULL, thread_main, &ctx[r]), 0);
    }
    for (int r = 0; r < w->n; r++) pthread_join(t[r], NULL);
}

/* Fails the test with every rank's failure, if any (the first to fail is
 * the one that matters; the others mostly say it aborted them). */
static void assert_no_fail(const world *w, const rank_ctx *ctx)
{
    char all[4 * 1100] = "";
    size_t len = 0;
    for (int r = 0; r < w->n; r++)
        if (ctx[r].fail[0] && len < sizeof all)
            len += (size_t)snprintf(all + len, sizeof all - len, "%s[rank %d] %s", len ? "; " : "",
                                    r, ctx[r].fail);
    ck_assert_msg(len == 0, "%s, %d replicas: %s", mode_names[w->mode], w->n, all);
}

static void run_ranks(world *w, rank_fn fn, const void *arg)
{
    rank_ctx ctx[MAXN];
    run_ranks_ctx(w, fn, arg, ctx);
    assert_no_fail(w, ctx);
}

/* --- values ------------------------------------------------------------------------- */

/* Rank r's element i in iteration `it`: small integers, exact in every dtype
 * and in every sum of four. */
static double val(int r, size_t i, int it) { return (r + 1) * 100.0 + (double)((i + (size_t)it) % 13); }

static void put(void *b, tf_dtype dt, size_t i, double v)
{
    switch (dt) {
    case TF_DTYPE_F32: ((float *)b)[i] = (float)v; break;
    case TF_DTYPE_F64: ((double *)b)[i] = v; break;
    case TF_DTYPE_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case TF_DTYPE_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    case TF_DTYPE_U8: ((uint8_t *)b)[i] = (uint8_t)((int)v & 255); break;
    default: ck_abort_msg("put: dtype %d", (int)dt);
    }
}

static double get(const void *b, tf_dtype dt, size_t i)
{
    switch (dt) {
    case TF_DTYPE_F32: return ((const float *)b)[i];
    case TF_DTYPE_F64: return ((const double *)b)[i];
    case TF_DTYPE_I32: return ((const int32_t *)b)[i];
    case TF_DTYPE_I64: return (double)((const int64_t *)b)[i];
    case TF_DTYPE_U8: return ((const uint8_t *)b)[i];
    default: return -1;
    }
}

/* What element i holds after a reduction over n ranks: the exact sum; AVG
 * as the plugin defines it (f32: times 1/n in f32; f64: divided by n). */
static double reduced(int n, tf_dtype dt, tf_reduce_op op, size_t i, int it)
{
    double s = 0;
    for (int r = 0; r < n; r++) s += val(r, i, it);
    if (op != TF_REDUCE_AVG) return s;
    if (dt == TF_DTYPE_F32) return (double)((float)s * (1.0f / (float)n));
    return s / n;
}

static double stored(tf_dtype dt, double v) { return dt == TF_DTYPE_U8 ? (double)((int)v & 255) : v; }

/* --- one collective on every rank, checked ---------------------------------------------- */

enum { K_REDUCE, K_BROADCAST, K_ALLREDUCE, K_BARRIER };
static const char *const kind_names[] = {"reduce", "broadcast", "allreduce", "barrier"};

typedef struct coll_case {
    int kind;
    tf_dtype dt;
    tf_reduce_op op;
    int root;
    size_t count;
    int it;
} coll_case;

/* Runs cc on this rank and checks the result; false (with x->fail set) on failure. */
static bool do_case(rank_ctx *x, const coll_case *cc)
{
    world *w = x->w;
    int r = x->rank;
    tf_backend *be = w->be[r];
    tf_comm *c = w->comm[r];
    tf_error err = {0};
    char name[160];
    snprintf(name, sizeof name, "%s %s %s root %d count %zu it %d", kind_names[cc->kind],
             tf_dtype_name(cc->dt), cc->op == TF_REDUCE_AVG ? "AVG" : "SUM", cc->root, cc->count,
             cc->it);
    void *buf = NULL; /* [count] of dt, this replica's backend memory */
    bool ok = false;
    if (cc->count) {
        tf_status st = cpu->alloc(be, cc->count * tf_dtype_size(cc->dt), TF_MEM_DEVICE, &buf, &err);
        if (st) {
            snprintf(x->fail, sizeof x->fail, "%s: alloc: %.800s", name, err.msg);
            cvt->abort(c, "test alloc failed");
            return false;
        }
    }
    for (size_t i = 0; i < cc->count; i++) put(buf, cc->dt, i, val(r, i, cc->it));
    tf_status st = TF_OK;
    switch (cc->kind) {
    case K_REDUCE: st = cvt->reduce(c, buf, cc->count, cc->dt, cc->op, cc->root, &err); break;
    case K_BROADCAST: st = cvt->broadcast(c, buf, cc->count, cc->dt, cc->root, &err); break;
    case K_ALLREDUCE: {
        tf_comm_request *req = NULL;
        st = cvt->allreduce_start(c, buf, cc->count, cc->dt, cc->op, &req, &err);
        if (!st && !req) {
            snprintf(x->fail, sizeof x->fail, "%s: no request", name);
            goto out;
        }
        if (!st) st = cvt->wait(c, req, &err);
        break;
    }
    case K_BARRIER: st = cvt->barrier(c, &err); break;
    }
    if (st) {
        snprintf(x->fail, sizeof x->fail, "%s: status %d: %.800s", name, (int)st, err.msg);
        goto out;
    }
    for (size_t i = 0; i < cc->count; i++) {
        double want;
        if (cc->kind == K_REDUCE)
            want = r == cc->root ? reduced(w->n, cc->dt, cc->op, i, cc->it) : val(r, i, cc->it);
        else if (cc->kind == K_BROADCAST)
            want = stored(cc->dt, val(cc->root, i, cc->it));
        else
            want = reduced(w->n, cc->dt, cc->op, i, cc->it);
        double got = get(buf, cc->dt, i);
        if (got != want) {
            snprintf(x->fail, sizeof x->fail, "%s: element %zu is %.17g, expected %.17g", name, i,
                     got, want);
            goto out;
        }
    }
    ok = true;
out:
    if (buf) cpu->free(be, buf, TF_MEM_DEVICE);
    if (!ok) cvt->abort(c, "test expectation failed");
    return ok;
}

typedef struct case_list {
    const coll_case *cases;
    size_t n;
} case_list;

/* Appends cc to cases[*nc], its iteration number being its index (so every
 * case has its own values). */
static void push_case(coll_case *cases, size_t *nc, coll_case cc)
{
    cc.it = (int)*nc;
    cases[(*nc)++] = cc;
}

static void run_case_list(rank_ctx *x)
{
    const case_list *l = x->arg;
    for (size_t k = 0; k < l->n; k++)
        if (!do_case(x, &l->cases[k])) return;
}

/* cases[nc] on a fresh world of n ranks in `mode`, every rank in order */
static void run_cases(int n, int mode, const coll_case *cases, size_t nc)
{
    world w;
    world_open(&w, n, mode);
    case_list l = {cases, nc};
    run_ranks(&w, run_case_list, &l);
    world_close(&w);
}

/* --- plugin basics and config ---------------------------------------------------------------- */

START_TEST(test_plugin_basics)
{
    const tf_loaded_plugin *p = tf_registry_find(reg, TF_KIND_COMM, "dp-master");
    ck_assert_ptr_nonnull(p);
    ck_assert(p->usable);
    ck_assert_ptr_nonnull(strstr(p->path, "tfcore-comm-dp-master.so"));
    ck_assert_int_eq(cvt->launch_mode(), TF_LAUNCH_THREADS);
    ck_assert(cvt->optimizer_on_root_only());
    ck_assert(TF_HAS(cvt, abort));
}
END_TEST

START_TEST(test_check_config)
{
    tf_error err = {0};
    ck_assert_int_eq(cvt->check_config(NULL, &err), TF_OK);
    tf_config *cfg = config("comm = { plugin = \"dp-master\"; force_staging = true; "
                            "allreduce = \"reduce-broadcast\"; };");
    ck_assert_int_eq(cvt->check_config(tf_config_section(cfg, "comm"), &err), TF_OK);
    tf_config_free(cfg);

    cfg = config("comm = { force_staging = 3; };");
    ck_assert_int_eq(cvt->check_config(tf_config_section(cfg, "comm"), &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "test.cfg:1") && strstr(err.msg, "force_staging"), "%s", err.msg);
    tf_config_free(cfg);

    cfg = config("comm = {\n allreduce = \"ring\"; };");
    ck_assert_int_eq(cvt->check_config(tf_config_section(cfg, "comm"), &err), TF_ERR_CONFIG);
    ck_assert_msg(strstr(err.msg, "test.cfg:2") && strstr(err.msg, "slices, reduce-broadcast"),
                  "%s", err.msg);
    tf_config_free(cfg);

    /* init reads the same keys */
    world w = {.n = 1};
    w.cfg = config("comm = { force_staging = \"yes\"; };");
    w.be[0] = open_backend();
    w.bvt = &shim_host;
    tf_comm_init_args a = init_args(&w, 0);
    tf_comm *c = NULL;
    ck_assert_int_eq(cvt->init(&a, &c, &err), TF_ERR_CONFIG);
    ck_assert_ptr_null(c);
    ck_assert_ptr_null(w.cell);
    cpu->close(w.be[0]);
    tf_config_free(w.cfg);
}
END_TEST

/* --- reduce / broadcast / allreduce, exact values ---------------------------------------------- */

static const tf_dtype reduce_dtypes[] = {TF_DTYPE_F32, TF_DTYPE_F64, TF_DTYPE_I32, TF_DTYPE_I64};

START_TEST(test_reduce)
{
    int mode = _i;
    coll_case cases[64];
    for (int n = 1; n <= MAXN; n++) {
        size_t nc = 0;
        for (int root = 0; root < (n > 1 ? 2 : 1); root++)
            for (size_t d = 0; d < 4; d++)
                for (int op = 0; op < 2; op++) {
                    tf_dtype dt = reduce_dtypes[d];
                    if (op == TF_REDUCE_AVG && dt != TF_DTYPE_F32 && dt != TF_DTYPE_F64) continue;
                    push_case(cases, &nc, (coll_case){K_REDUCE, dt, (tf_reduce_op)op, root, 1, 0});
                    push_case(cases, &nc, (coll_case){K_REDUCE, dt, (tf_reduce_op)op, root, 1001, 0});
                }
        run_cases(n, mode, cases, nc);
    }
}
END_TEST

START_TEST(test_broadcast)
{
    int mode = _i;
    static const tf_dtype dts[] = {TF_DTYPE_F32, TF_DTYPE_I32, TF_DTYPE_U8, TF_DTYPE_F64,
                                   TF_DTYPE_I64};
    static const size_t counts[] = {0, 1, 1001};
    coll_case cases[64];
    for (int n = 1; n <= MAXN; n++) {
        size_t nc = 0;
        for (int root = 0; root < (n > 1 ? 2 : 1); root++)
            for (size_t d = 0; d < 5; d++)
                for (size_t k = 0; k < 3; k++)
                    push_case(cases, &nc,
                              (coll_case){K_BROADCAST, dts[d], TF_REDUCE_SUM, root ? n - 1 : 0,
                                          counts[k], 0});
        run_cases(n, mode, cases, nc);
    }
}
END_TEST

START_TEST(test_allreduce)
{
    int mode = _i;
    static const size_t counts[] = {0, 1, 1001, (size_t)1 << 20};
    coll_case cases[64];
    for (int n = 1; n <= MAXN; n++) {
        size_t nc = 0;
        for (size_t k = 0; k < 4; k++) {
            push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, counts[k], 0});
            push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_AVG, 0, counts[k], 0});
            push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_F64, TF_REDUCE_SUM, 0, counts[k], 0});
            push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_F64, TF_REDUCE_AVG, 0, counts[k], 0});
        }
        push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_I32, TF_REDUCE_SUM, 0, 1001, 0});
        push_case(cases, &nc, (coll_case){K_ALLREDUCE, TF_DTYPE_I64, TF_REDUCE_SUM, 0, 77, 0});
        run_cases(n, mode, cases, nc);
    }
}
END_TEST

/* Many collectives of every kind back to back: no deadlock, no stale posts. */
static void mixed_loop(rank_ctx *x)
{
    int n = x->w->n;
    for (int it = 0; it < 400; it++) {
        size_t count = (size_t)(it * 37 % 300);
        coll_case cc[] = {
            {K_REDUCE, TF_DTYPE_F32, (tf_reduce_op)(it & 1), it % n, count, it},
            {K_BROADCAST, it % 3 ? TF_DTYPE_F32 : TF_DTYPE_U8, TF_REDUCE_SUM, (it + 1) % n,
             count + 1, it},
            {K_ALLREDUCE, it % 5 ? TF_DTYPE_F32 : TF_DTYPE_F64, (tf_reduce_op)((it >> 1) & 1), 0,
             count, it},
            {K_BARRIER, TF_DTYPE_U8, TF_REDUCE_SUM, 0, 0, it},
        };
        for (size_t k = 0; k < 4; k++)
            if (!do_case(x, &cc[k])) return;
    }
}

START_TEST(test_many_collectives)
{
    int mode = _i;
    for (int n = 2; n <= MAXN; n++) {
        world w;
        world_open(&w, n, mode);
        run_ranks(&w, mixed_loop, NULL);
        world_close(&w);
    }
}
END_TEST

/* --- which path the plugin took ------------------------------------------------------------ */

static void reduce_then_check(rank_ctx *x)
{
    const size_t *counts = x->arg;
    for (int k = 0; k < 3; k++) {
        coll_case cc = {K_REDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, counts[k], k};
        if (!do_case(x, &cc)) return;
    }
}

START_TEST(test_paths)
{
    static const size_t counts[3] = {1001, 10, 2000};
    for (int mode = 0; mode < MODE_COUNT; mode++) {
        world w;
        world_open(&w, 3, mode);
        run_ranks(&w, reduce_then_check, counts);
        if (mode == MODE_HOST || mode == MODE_HOST_RB) {
            /* the root reads the others' buffers itself: no copies, no staging */
            ck_assert_int_eq(atomic_load(&n_d2d), 0);
            ck_assert_int_eq(atomic_load(&n_add), 3 * 2);
        } else {
            /* each other rank's buffer copied to the root's staging buffer, then added */
            ck_assert_int_eq(atomic_load(&n_d2d), 3 * 2);
            ck_assert_int_eq(atomic_load(&n_add), 3 * 2);
        }
        /* only the plugin allocates through the shim: the staging buffer, made
         * for 1001 elements and grown for 2000 (not for 10) */
        ck_assert_int_eq(atomic_load(&n_alloc_device),
                         mode == MODE_HOST || mode == MODE_HOST_RB ? 0 : 2);
        world_close(&w);
    }
}
END_TEST

/* The staging buffer is allocated once and grown only for larger counts. */
static void staging_growth(rank_ctx *x)
{
    static const size_t counts[] = {1001, 10, 1001, 2000, 5};
    static const long want_allocs[] = {1, 1, 1, 2, 2}; /* root's cumulative staging allocations */
    for (int k = 0; k < 5; k++) {
        coll_case cc = {K_REDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 1, counts[k], k};
        if (!do_case(x, &cc)) return;
        EXPECT(x, atomic_load(&n_alloc_device) == want_allocs[k],
               "after reduce %d: %ld staging allocations, expected %ld", k,
               atomic_load(&n_alloc_device), want_allocs[k]);
    }
}

START_TEST(test_staging_growth)
{
    world w;
    world_open(&w, 2, MODE_STAGED);
    run_ranks(&w, staging_growth, NULL);
    world_close(&w);
}
END_TEST

static void allreduce_copies(rank_ctx *x)
{
    coll_case cc = {K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 100000, 3};
    do_case(x, &cc);
}

START_TEST(test_allreduce_algorithms)
{
    /* slices: every rank adds its slice (n-1 adds each), ranks 1..n-1 copy */
    world w;
    world_open(&w, 4, MODE_HOST);
    run_ranks(&w, allreduce_copies, NULL);
    ck_assert_int_eq(atomic_load(&n_add), 4 * 3);
    ck_assert_int_eq(atomic_load(&n_h2h), 3);
    world_close(&w);
    /* reduce-broadcast: the root adds 3 whole buffers, ranks 1..n-1 copy */
    world_open(&w, 4, MODE_HOST_RB);
    run_ranks(&w, allreduce_copies, NULL);
    ck_assert_int_eq(atomic_load(&n_add), 3);
    ck_assert_int_eq(atomic_load(&n_h2h), 3);
    world_close(&w);
}
END_TEST

/* --- abort ---------------------------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct abort_plan {
    int aborter;
    const char *why;
    int blocked_in; /* K_BARRIER or K_REDUCE */
} abort_plan;

static void abort_scenario(rank_ctx *x)
{
    const abort_plan *p = x->arg;
    tf_comm *c = x->w->comm[x->rank];
    tf_error err = {0};
    if (x->rank == p->aborter) {
        sleep_ms(100); /* let the others block first */
        cvt->abort(c, p->why);
        x->last = TF_OK;
        return;
    }
    float buf[8] = {0}; /* [8] host memory is backend-cpu memory too */
    x->last = p->blocked_in == K_BARRIER
                  ? cvt->barrier(c, &err)
                  : cvt->reduce(c, buf, 8, TF_DTYPE_F32, TF_REDUCE_SUM, 0, &err);
    snprintf(x->last_msg, sizeof x->last_msg, "%s", err.msg);
    /* later calls fail the same way */
    tf_error err2 = {0};
    tf_comm_request *req = NULL;
    EXPECT(x, cvt->allreduce_start(c, buf, 8, TF_DTYPE_F32, TF_REDUCE_SUM, &req, &err2) ==
                  TF_ERR_RUNTIME && req == NULL && strcmp(err2.msg, err.msg) == 0,
           "allreduce after abort: '%.800s'", err2.msg);
    EXPECT(x, cvt->broadcast(c, buf, 8, TF_DTYPE_F32, 0, &err2) == TF_ERR_RUNTIME &&
                  strcmp(err2.msg, err.msg) == 0,
           "broadcast after abort: '%.800s'", err2.msg);
}

static void check_abort(int n, abort_plan p, const char *want)
{
    world w;
    world_open(&w, n, MODE_HOST);
    rank_ctx ctx[MAXN];
    run_ranks_ctx(&w, abort_scenario, &p, ctx);
    assert_no_fail(&w, ctx);
    for (int r = 0; r < n; r++) {
        if (r == p.aborter) continue;
        ck_assert_int_eq(ctx[r].last, TF_ERR_RUNTIME);
        ck_assert_str_eq(ctx[r].last_msg, want);
    }
    /* the aborting rank's own later calls fail too */
    tf_error err = {0};
    ck_assert_int_eq(cvt->barrier(w.comm[p.aborter], &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, want);
    world_close(&w);
}

START_TEST(test_abort_releases_barrier)
{
    check_abort(3, (abort_plan){2, "disk full", K_BARRIER}, "comm-dp-master: rank 2 stopped: disk full");
    check_abort(4, (abort_plan){0, "loss is NaN", K_BARRIER},
                "comm-dp-master: rank 0 stopped: loss is NaN");
}
END_TEST

START_TEST(test_abort_releases_reduce)
{
    check_abort(3, (abort_plan){1, "out of memory", K_REDUCE},
                "comm-dp-master: rank 1 stopped: out of memory");
    check_abort(2, (abort_plan){1, NULL, K_REDUCE},
                "comm-dp-master: rank 1 stopped: (no reason given)");
}
END_TEST

START_TEST(test_abort_first_reason_wins)
{
    world w;
    world_open(&w, 2, MODE_HOST);
    cvt->abort(w.comm[1], "first");
    cvt->abort(w.comm[0], "second");
    cvt->abort(NULL, "ignored");
    tf_error err = {0};
    ck_assert_int_eq(cvt->barrier(w.comm[0], &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: rank 1 stopped: first");
    world_close(&w);
}
END_TEST

/* --- mismatched and bad arguments ------------------------------------------------------------ */

/* Each rank runs its own call (by rank) and keeps the status and message;
 * then every rank runs one good allreduce, which must work: an error that
 * every rank saw the same way leaves the comm usable. */
typedef struct per_rank_call {
    int kind[MAXN];
    size_t count[MAXN];
    tf_dtype dt[MAXN];
    tf_reduce_op op[MAXN];
    int root[MAXN];
    bool null_buf[MAXN];
    bool null_req[MAXN];
} per_rank_call;

static void mismatch_scenario(rank_ctx *x)
{
    const per_rank_call *p = x->arg;
    int r = x->rank;
    tf_comm *c = x->w->comm[r];
    tf_error err = {0};
    double storage[64] = {0}; /* [64] f64: room for every dtype and count used here */
    void *buf = p->null_buf[r] ? NULL : storage;
    tf_comm_request *req = NULL;
    switch (p->kind[r]) {
    case K_REDUCE: x->last = cvt->reduce(c, buf, p->count[r], p->dt[r], p->op[r], p->root[r], &err); break;
    case K_BROADCAST: x->last = cvt->broadcast(c, buf, p->count[r], p->dt[r], p->root[r], &err); break;
    case K_ALLREDUCE:
        x->last = cvt->allreduce_start(c, buf, p->count[r], p->dt[r], p->op[r],
                                       p->null_req[r] ? NULL : &req, &err);
        EXPECT(x, req == NULL, "a failed allreduce_start returned a request");
        break;
    case K_BARRIER: x->last = cvt->barrier(c, &err); break;
    }
    snprintf(x->last_msg, sizeof x->last_msg, "%s", err.msg);
    coll_case good = {K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 33, 5};
    do_case(x, &good);
}

static per_rank_call good_reduce(int n)
{
    per_rank_call p;
    memset(&p, 0, sizeof p);
    for (int r = 0; r < n; r++) {
        p.kind[r] = K_REDUCE;
        p.count[r] = 10;
        p.dt[r] = TF_DTYPE_F32;
        p.op[r] = TF_REDUCE_SUM;
        p.root[r] = 0;
    }
    return p;
}

/* Every rank gets TF_ERR_RUNTIME with "<kind> on rank R of N: " + tail. */
static void check_mismatch(int n, int mode, const per_rank_call *p, const char *tail)
{
    world w;
    world_open(&w, n, mode);
    rank_ctx ctx[MAXN];
    run_ranks_ctx(&w, mismatch_scenario, p, ctx);
    assert_no_fail(&w, ctx);
    for (int r = 0; r < n; r++) {
        ck_assert_msg(ctx[r].last == TF_ERR_RUNTIME, "rank %d: status %d (%s)", r, ctx[r].last,
                      ctx[r].last_msg);
        char want[512];
        const char *k = kind_names[p->kind[r]];
        snprintf(want, sizeof want, "comm-dp-master: %s on rank %d of %d: %s", k, r, n, tail);
        ck_assert_str_eq(ctx[r].last_msg, want);
    }
    world_close(&w);
}

START_TEST(test_mismatch)
{
    per_rank_call p = good_reduce(2);
    p.count[1] = 12;
    check_mismatch(2, MODE_HOST, &p, "count mismatch: rank 0 passed 10 elements of F32, rank 1 passed 12");
    check_mismatch(2, MODE_STAGED, &p, "count mismatch: rank 0 passed 10 elements of F32, rank 1 passed 12");

    p = good_reduce(3);
    p.count[2] = 9;
    p.kind[2] = K_ALLREDUCE;
    check_mismatch(3, MODE_HOST, &p, "collective mismatch: rank 0 called reduce, rank 2 called allreduce");

    p = good_reduce(3);
    p.kind[0] = p.kind[1] = p.kind[2] = K_BROADCAST;
    p.kind[1] = K_BARRIER;
    check_mismatch(3, MODE_HOST, &p, "collective mismatch: rank 0 called broadcast, rank 1 called barrier");

    p = good_reduce(2);
    p.dt[1] = TF_DTYPE_F64;
    check_mismatch(2, MODE_HOST, &p, "dtype mismatch: rank 0 passed F32, rank 1 passed F64");

    p = good_reduce(4);
    p.root[3] = 1;
    check_mismatch(4, MODE_HOST, &p, "root mismatch: rank 0 named root 0, rank 3 named root 1");

    p = good_reduce(2);
    p.op[1] = TF_REDUCE_AVG;
    check_mismatch(2, MODE_DEVICE, &p, "op mismatch: rank 0 passed SUM, rank 1 passed AVG");

    p = good_reduce(2);
    p.kind[0] = p.kind[1] = K_BROADCAST;
    p.root[1] = 1;
    check_mismatch(2, MODE_HOST, &p, "root mismatch: rank 0 named root 0, rank 1 named root 1");
}
END_TEST

START_TEST(test_bad_arguments)
{
    per_rank_call p = good_reduce(2);
    p.null_buf[1] = true;
    check_mismatch(2, MODE_HOST, &p,
                   "rank 1 called reduce with bad arguments: buf is NULL with count 10");

    p = good_reduce(3);
    p.root[0] = p.root[1] = p.root[2] = 3;
    check_mismatch(3, MODE_HOST, &p, "rank 0 called reduce with bad arguments: root 3 is outside [0, 3)");

    p = good_reduce(2);
    p.root[0] = p.root[1] = -1;
    p.kind[0] = p.kind[1] = K_BROADCAST;
    check_mismatch(2, MODE_HOST, &p, "rank 0 called broadcast with bad arguments: root -1 is outside [0, 2)");

    p = good_reduce(2);
    p.dt[0] = p.dt[1] = TF_DTYPE_F16;
    check_mismatch(2, MODE_HOST, &p,
                   "rank 0 called reduce with bad arguments: reduce takes F32, F64, I32 or I64, not F16");

    p = good_reduce(2);
    p.dt[0] = p.dt[1] = TF_DTYPE_I32;
    p.op[0] = p.op[1] = TF_REDUCE_AVG;
    p.kind[0] = p.kind[1] = K_ALLREDUCE;
    check_mismatch(2, MODE_HOST, &p, "rank 0 called allreduce with bad arguments: AVG needs F32 or F64, not I32");

    p = good_reduce(2);
    p.op[1] = (tf_reduce_op)7;
    check_mismatch(2, MODE_HOST, &p, "rank 1 called reduce with bad arguments: unknown reduce op 7");

    p = good_reduce(2);
    p.dt[0] = p.dt[1] = (tf_dtype)99;
    p.kind[0] = p.kind[1] = K_BROADCAST;
    check_mismatch(2, MODE_HOST, &p, "rank 0 called broadcast with bad arguments: unknown dtype 99");

    p = good_reduce(2);
    p.count[0] = p.count[1] = SIZE_MAX / 2;
    p.kind[0] = p.kind[1] = K_BROADCAST;
    char want[200];
    snprintf(want, sizeof want,
             "rank 0 called broadcast with bad arguments: %zu elements of F32 overflow size_t",
             SIZE_MAX / 2);
    check_mismatch(2, MODE_HOST, &p, want);

    p = good_reduce(2);
    p.kind[0] = p.kind[1] = K_ALLREDUCE;
    p.null_req[1] = true;
    check_mismatch(2, MODE_HOST, &p, "rank 1 called allreduce with bad arguments: req is NULL");
}
END_TEST

/* --- a backend failure on one replica reaches every replica --------------------------------- */

typedef struct failure_plan {
    int mode;
    int n;
    int failing_rank;
    int what;
    coll_case cc;
    const char *tail; /* after "comm-dp-master: <kind> on rank R of N: " */
} failure_plan;

static void failure_scenario(rank_ctx *x)
{
    const failure_plan *p = x->arg;
    tf_comm *c = x->w->comm[x->rank];
    tf_error err = {0};
    float buf[2000]; /* [2000] f32, room for every dtype and count used here */
    memset(buf, 0, sizeof buf);
    tf_comm_request *req = NULL;
    switch (p->cc.kind) {
    case K_REDUCE: x->last = cvt->reduce(c, buf, p->cc.count, p->cc.dt, p->cc.op, p->cc.root, &err); break;
    case K_BROADCAST: x->last = cvt->broadcast(c, buf, p->cc.count, p->cc.dt, p->cc.root, &err); break;
    case K_ALLREDUCE: x->last = cvt->allreduce_start(c, buf, p->cc.count, p->cc.dt, p->cc.op, &req, &err); break;
    }
    snprintf(x->last_msg, sizeof x->last_msg, "%s", err.msg);
    /* stop failing (once every rank is past the failing call) and check the comm still works */
    tf_error e2 = {0};
    EXPECT(x, cvt->barrier(c, &e2) == TF_OK, "barrier after the failure: %.800s", e2.msg);
    if (x->rank == 0) inject(NULL, FAIL_NONE);
    EXPECT(x, cvt->barrier(c, &e2) == TF_OK, "barrier after the failure: %.800s", e2.msg);
    coll_case good = {K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 33, 5};
    do_case(x, &good);
}

static void check_failure(failure_plan p)
{
    world w;
    world_open(&w, p.n, p.mode);
    inject(w.be[p.failing_rank], p.what);
    rank_ctx ctx[MAXN];
    run_ranks_ctx(&w, failure_scenario, &p, ctx);
    assert_no_fail(&w, ctx);
    for (int r = 0; r < p.n; r++) {
        ck_assert_msg(ctx[r].last == TF_ERR_RUNTIME, "rank %d: status %d", r, ctx[r].last);
        char want[1024];
        snprintf(want, sizeof want, "comm-dp-master: %s on rank %d of %d: %s",
                 kind_names[p.cc.kind], r, p.n, p.tail);
        ck_assert_str_eq(ctx[r].last_msg, want);
    }
    world_close(&w);
}

START_TEST(test_backend_failures)
{
    coll_case red = {K_REDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 100, 0};
    coll_case red64 = {K_REDUCE, TF_DTYPE_F64, TF_REDUCE_SUM, 1, 100, 0};
    coll_case bc = {K_BROADCAST, TF_DTYPE_I32, TF_REDUCE_SUM, 0, 100, 0};
    coll_case ar = {K_ALLREDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 1000, 0};

    check_failure((failure_plan){MODE_HOST, 3, 0, FAIL_ADD, red,
                                 "rank 0 failed: test: injected add failure"});
    check_failure((failure_plan){MODE_STAGED, 2, 0, FAIL_ADD, red,
                                 "rank 0 failed: test: injected add failure"});
    /* slices: rank 2 sums its own slice */
    check_failure((failure_plan){MODE_HOST, 3, 2, FAIL_ADD, ar,
                                 "rank 2 failed: test: injected add failure"});
    check_failure((failure_plan){MODE_HOST, 3, 1, FAIL_SYNC, red,
                                 "rank 1 failed: stream_sync before the reduce: test: injected "
                                 "stream_sync failure"});
    check_failure((failure_plan){MODE_HOST, 2, 1, FAIL_MEMCPY, bc,
                                 "rank 1 failed: memcpy of 400 bytes from rank 0's buffer failed"});
    check_failure((failure_plan){MODE_HOST, 3, 2, FAIL_MEMCPY, ar,
                                 "rank 2 failed: memcpy of 4000 bytes from rank 0's buffer failed"});
    check_failure((failure_plan){MODE_DEVICE, 3, 0, FAIL_MEMCPY, red,
                                 "rank 0 failed: memcpy of 400 bytes (rank 1's buffer into the "
                                 "staging buffer) failed"});
    check_failure((failure_plan){MODE_DEVICE, 2, 0, FAIL_ALLOC_DEVICE, red,
                                 "rank 0 failed: allocating the 400-byte staging buffer: test: "
                                 "injected alloc failure (400 bytes)"});
    /* f64 on device memory goes through pinned host buffers */
    check_failure((failure_plan){MODE_DEVICE, 2, 1, FAIL_ALLOC_PINNED, red64,
                                 "rank 1 failed: allocating 2 x 800 bytes of pinned host buffers: "
                                 "test: injected alloc failure (800 bytes)"});
    check_failure((failure_plan){MODE_STAGED, 2, 1, FAIL_MEMCPY_D2H, red64,
                                 "rank 1 failed: memcpy of 800 bytes (the root's buffer to the "
                                 "host) failed"});
}
END_TEST

/* The second of the two pinned host buffers fails (the first was made);
 * the next f64 reduce on the same comm replaces the half-made pair. */
START_TEST(test_staged_f64_recovers)
{
    world w;
    world_open(&w, 2, MODE_DEVICE);
    atomic_store(&pinned_pass, 1);
    failure_plan p = {MODE_DEVICE, 2, 0, FAIL_ALLOC_PINNED,
                      {K_REDUCE, TF_DTYPE_F64, TF_REDUCE_AVG, 0, 50, 0},
                      "rank 0 failed: allocating 2 x 400 bytes of pinned host buffers: test: "
                      "injected alloc failure (400 bytes)"};
    inject(w.be[0], FAIL_ALLOC_PINNED);
    rank_ctx ctx[MAXN];
    run_ranks_ctx(&w, failure_scenario, &p, ctx); /* ends with a good f32 allreduce */
    assert_no_fail(&w, ctx);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(ctx[r].last, TF_ERR_RUNTIME);
        ck_assert_msg(strstr(ctx[r].last_msg, p.tail) != NULL, "%s", ctx[r].last_msg);
    }
    coll_case cases[] = {{K_REDUCE, TF_DTYPE_F64, TF_REDUCE_AVG, 0, 50, 1},
                         {K_REDUCE, TF_DTYPE_I64, TF_REDUCE_SUM, 0, 100, 2},
                         {K_ALLREDUCE, TF_DTYPE_I32, TF_REDUCE_SUM, 0, 100, 3}};
    case_list l = {cases, 3};
    run_ranks(&w, run_case_list, &l);
    world_close(&w);
}
END_TEST

/* --- init, wait and NULL arguments ------------------------------------------------------------- */

static void expect_init_error(tf_comm_init_args a, const char *needle)
{
    tf_comm *c = (tf_comm *)&c; /* must be reset to NULL */
    tf_error err = {0};
    ck_assert_int_eq(cvt->init(&a, &c, &err), TF_ERR_RUNTIME);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' lacks '%s'", err.msg, needle);
    ck_assert_msg(strncmp(err.msg, "comm-dp-master: init", 20) == 0, "%s", err.msg);
}

START_TEST(test_init_errors)
{
    world w;
    memset(&w, 0, sizeof w);
    w.n = 2;
    w.cfg = config("comm = { };");
    w.bvt = &shim_host;
    w.be[0] = open_backend();
    w.be[1] = open_backend();
    tf_comm_init_args a;
    tf_error err = {0};

    ck_assert_int_eq(cvt->init(NULL, &w.comm[0], &err), TF_ERR_RUNTIME);
    ck_assert_ptr_nonnull(strstr(err.msg, "args or out is NULL"));
    a = init_args(&w, 0);
    a.size = (uint32_t)offsetof(tf_comm_init_args, shared);
    expect_init_error(a, "args.size is");
    a = init_args(&w, 0);
    a.world_size = 0;
    expect_init_error(a, "world_size must be in [1, 4096], got 0");
    a = init_args(&w, 0);
    a.rank = 2;
    expect_init_error(a, "rank must be in [0, 2), got 2");
    a = init_args(&w, 0);
    a.be = NULL;
    expect_init_error(a, "no backend");
    a = init_args(&w, 0);
    a.shared = NULL;
    expect_init_error(a, "no shared cell");
    a = init_args(&w, 1);
    expect_init_error(a, "rank 0 was not initialized first");
    ck_assert_ptr_null(w.cell);

    a = init_args(&w, 0);
    ck_assert_int_eq(cvt->init(&a, &w.comm[0], &err), TF_OK);
    ck_assert_ptr_nonnull(w.cell);
    expect_init_error(a, "rank 0 initialized twice?");
    a = init_args(&w, 1);
    a.world_size = 3;
    expect_init_error(a, "world_size 3, but rank 0 was initialized with 2");
    a = init_args(&w, 1);
    a.backend = &shim_dev;
    expect_init_error(a, "this replica's backend holds device memory but rank 0's holds host memory");
    a = init_args(&w, 1);
    ck_assert_int_eq(cvt->init(&a, &w.comm[1], &err), TF_OK);
    expect_init_error(a, "rank 1 initialized twice");
    world_close(&w);

    /* a backend without the host_memory slot (an ABI 1.0 backend) counts as device memory */
    tf_backend_vtable old = shim_host;
    old.size = (uint32_t)offsetof(tf_backend_vtable, host_memory);
    memset(&w, 0, sizeof w);
    w.n = 2;
    w.cfg = config("comm = { };");
    w.bvt = &old;
    w.be[0] = open_backend();
    w.be[1] = open_backend();
    for (int r = 0; r < 2; r++) {
        a = init_args(&w, r);
        ck_assert_int_eq(cvt->init(&a, &w.comm[r], &err), TF_OK);
    }
    coll_case cc = {K_REDUCE, TF_DTYPE_F32, TF_REDUCE_SUM, 0, 10, 0};
    case_list l = {&cc, 1};
    reset_counters();
    run_ranks(&w, run_case_list, &l);
    ck_assert_int_eq(atomic_load(&n_d2d), 1); /* staged */
    world_close(&w);
}
END_TEST

START_TEST(test_wait_and_null_errors)
{
    world w;
    world_open(&w, 1, MODE_HOST);
    tf_error err = {0};
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(cvt->wait(w.comm[0], NULL, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: wait on rank 0: request is NULL");
    tf_comm_request *req = NULL;
    ck_assert_int_eq(cvt->allreduce_start(w.comm[0], x, 4, TF_DTYPE_F32, TF_REDUCE_AVG, &req, &err), TF_OK);
    ck_assert(x[0] == 1 && x[3] == 4); /* a world of one: the average is the value */

    /* a second, independent world: its rank 0 must not accept this request */
    world w2;
    world_open(&w2, 1, MODE_HOST);
    ck_assert_int_eq(cvt->wait(w2.comm[0], req, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: wait on rank 0: not a request of this rank's allreduce_start");
    world_close(&w2);
    ck_assert_int_eq(cvt->wait(w.comm[0], req, &err), TF_OK);

    ck_assert_int_eq(cvt->reduce(NULL, x, 4, TF_DTYPE_F32, TF_REDUCE_SUM, 0, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: reduce: comm is NULL");
    ck_assert_int_eq(cvt->broadcast(NULL, x, 4, TF_DTYPE_F32, 0, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: broadcast: comm is NULL");
    ck_assert_int_eq(cvt->allreduce_start(NULL, x, 4, TF_DTYPE_F32, TF_REDUCE_SUM, &req, &err),
                     TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: allreduce_start: comm is NULL");
    ck_assert_int_eq(cvt->wait(NULL, req, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: wait: comm is NULL");
    ck_assert_int_eq(cvt->barrier(NULL, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-dp-master: barrier: comm is NULL");
    cvt->finalize(NULL);
    world_close(&w);
}
END_TEST

static Suite *dp_master_suite(void)
{
    Suite *s = suite_create("comm-dp-master");
    TCase *t = tcase_create("basics");
    tcase_add_test(t, test_plugin_basics);
    tcase_add_test(t, test_check_config);
    tcase_add_test(t, test_init_errors);
    tcase_add_test(t, test_wait_and_null_errors);
    suite_add_tcase(s, t);

    t = tcase_create("collectives");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, test_reduce, 0, MODE_COUNT);
    tcase_add_loop_test(t, test_broadcast, 0, MODE_COUNT);
    tcase_add_loop_test(t, test_allreduce, 0, MODE_COUNT);
    tcase_add_loop_test(t, test_many_collectives, 0, MODE_COUNT);
    tcase_add_test(t, test_paths);
    tcase_add_test(t, test_staging_growth);
    tcase_add_test(t, test_allreduce_algorithms);
    suite_add_tcase(s, t);

    t = tcase_create("errors");
    tcase_add_test(t, test_abort_releases_barrier);
    tcase_add_test(t, test_abort_releases_reduce);
    tcase_add_test(t, test_abort_first_reason_wins);
    tcase_add_test(t, test_mismatch);
    tcase_add_test(t, test_bad_arguments);
    tcase_add_test(t, test_backend_failures);
    tcase_add_test(t, test_staged_f64_recovers);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    const char *rel[] = {"plugins/backend-cpu", "plugins/comm-dp-master"};
    tf_error err = {0};
    const tf_loaded_plugin *pc = NULL, *pb = NULL;
    if (tf_test_registry(&reg, rel, TF_TEST_COUNT(rel), &err) != TF_OK ||
        !(pc = tf_test_plugin(reg, TF_KIND_COMM, "dp-master", &err))) {
        fprintf(stderr, "test_comm_dp_master: %s\n", err.msg);
        tf_registry_free(reg);
        return EXIT_FAILURE;
    }
    if (!(pb = tf_test_plugin(reg, TF_KIND_BACKEND, "cpu", &err))) {
        printf("test_comm_dp_master: SKIP: backend-cpu not built or not usable (%s)\n", err.msg);
        tf_registry_free(reg);
        return 77;
    }
    cvt = pc->desc->vtable;
    cpu = pb->desc->vtable;
    make_shims();

    int failed = tf_test_run(dp_master_suite(), false);
    tf_registry_free(reg);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
