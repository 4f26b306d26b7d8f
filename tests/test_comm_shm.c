/* test_comm_shm.c — the "shm" comm plugin (tests/comm-shm), the test double
 * of the core's process launcher path. Each test forks N worker processes
 * itself, after mapping the 64 KiB shared region the way the core does
 * (zero-filled, MAP_SHARED, before the fork); every worker opens
 * backend-cpu and the plugin through their vtables (loaded before the fork
 * by the core's registry).
 * Checked: exact sums in rank order (f32/f64, SUM/AVG, many chunks, several
 * requests in flight, waits out of order), broadcast of every dtype,
 * reduce, barrier ordering, abort, the no-progress timeout (and that
 * progress resets it), init failures, config errors, and that the segment's
 * name is unlinked once everyone has it. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"
#include "tfcore/dtype.h"
#include "tfcore/plugin.h"

#define MAX_WORLD 4

/* --- plugins ------------------------------------------------------------------ */
static const tf_comm_vtable *cvt;
static const tf_backend_vtable *bvt;

static tf_registry *reg; /* holds both plugins open for the process */

static const void *load_vtable(const char *name, uint32_t kind)
{
    tf_error err = {0};
    const tf_loaded_plugin *p = tf_test_plugin(reg, kind, name, &err);
    ck_assert_msg(p != NULL, "cannot load %s: %s", name, err.msg);
    ck_assert_ptr_nonnull(p->desc->vtable);
    ck_assert_uint_eq(p->desc->kind, kind);
    return p->desc->vtable;
}

static void load_plugins(void)
{
    if (!reg) {
        const char *rel[] = {"tests/comm-shm", "plugins/backend-cpu"};
        tf_error err = {0};
        ck_assert_msg(tf_test_registry(&reg, rel, 2, &err) == TF_OK, "%s", err.msg);
    }
    cvt = load_vtable("shm", TF_KIND_COMM);
    bvt = load_vtable("cpu", TF_KIND_BACKEND);
}

/* --- the harness: fork ranks as the core does ------------------------------- */

/* Memory of the test itself, shared by its workers (not the core's region). */
typedef struct test_page {
    _Atomic unsigned counter;
    pid_t pid[MAX_WORLD];
} test_page;

typedef struct rank_ctx {
    int rank, world;
    tf_config *cfg;
    tf_backend *be;
    tf_comm *c;      /* after init (harness-initialized bodies) */
    void *shared;    /* the core's region */
    test_page *page;
} rank_ctx;

typedef int (*body_fn)(rank_ctx *x);

/* In a worker: print why and fail. */
#define REQUIRE(cond, ...)                                                          \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "rank %d, %s:%d: ", x->rank, __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            return 1;                                                               \
        }                                                                           \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static tf_comm_init_args init_args(rank_ctx *x, void *shared)
{
    tf_comm_init_args a = {.size = sizeof a, .section = tf_config_section(x->cfg, "comm"),
                           .rank = x->rank, .world_size = x->world, .local_rank = x->rank,
                           .backend = bvt, .be = x->be, .shared = shared,
                           .local_world_size = x->world};
    return a;
}

/* One worker process: config, backend, (init), body, (finalize). */
static int worker(rank_ctx *x, const char *cfg_text, bool do_init, body_fn body)
{
    tf_error err = {0};
    x->page->pid[x->rank] = getpid();
    if (tf_config_load_string(&x->cfg, cfg_text, "shm.cfg", NULL, &err) != TF_OK) {
        fprintf(stderr, "rank %d: config: %s\n", x->rank, err.msg);
        return 1;
    }
    tf_backend_open_args oa = {.size = sizeof oa, .device = 0, .threads = 1, .seed = 1,
                               .section = tf_config_section(x->cfg, "backend")};
    if (bvt->open(&oa, &x->be, &err) != TF_OK) {
        fprintf(stderr, "rank %d: backend: %s\n", x->rank, err.msg);
        return 1;
    }
    int rc = 0;
    if (do_init) {
        tf_comm_init_args a = init_args(x, x->shared);
        if (cvt->init(&a, &x->c, &err) != TF_OK) {
            fprintf(stderr, "rank %d: init: %s\n", x->rank, err.msg);
            rc = 1;
        }
    }
    if (!rc) rc = body(x);
    if (x->c) cvt->finalize(x->c);
    bvt->close(x->be);
    tf_config_free(x->cfg);
    return rc;
}

/* Fork one worker per rank in ranks[0..n) (NULL: 0..world-1), all sharing a
 * fresh region; returns how many failed. */
static int run_ranks(int world, const int *ranks, int n, const char *cfg_text, bool do_init,
                     body_fn body)
{
    void *shared = mmap(NULL, TF_COMM_SHARED_BYTES, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    test_page *page = mmap(NULL, sizeof(test_page), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(shared != MAP_FAILED && page != MAP_FAILED);
    if (!ranks) n = world;
    pid_t pids[MAX_WORLD];
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            rank_ctx x = {.rank = ranks ? ranks[i] : i, .world = world, .shared = shared,
                          .page = page};
            int rc = worker(&x, cfg_text, do_init, body);
            fflush(NULL);
            _exit(rc);
        }
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int status = 0;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
    munmap(page, sizeof(test_page));
    munmap(shared, TF_COMM_SHARED_BYTES);
    return failed;
}

static char cfg_buf[512];
static const char *cfg(int world, double timeout_s, int slot_kb)
{
    snprintf(cfg_buf, sizeof cfg_buf,
             "comm = { plugin = \"shm\"; world_size = %d; timeout_s = %g; slot_kb = %d; };\n"
             "backend = { plugin = \"cpu\"; };\n",
             world, timeout_s, slot_kb);
    return cfg_buf;
}

static void *host_alloc(rank_ctx *x, size_t bytes)
{
    void *p = NULL;
    tf_error err;
    if (bvt->alloc(x->be, bytes ? bytes : 1, TF_MEM_DEVICE, &p, &err) != TF_OK) return NULL;
    return p;
}

/* --- values and their rank-order sums ------------------------------------------ */
static float v32(int r, size_t i) { return (float)(r + 1) * 0.37f * (float)(i % 17) - 0.11f * (float)r + 1e-3f * (float)i; }
static double v64(int r, size_t i) { return (r + 1) * 0.37 * (double)(i % 17) - 0.11 * r + 1e-3 * (double)i; }

static float sum32(int world, size_t i, bool avg)
{
    float acc = v32(0, i);
    for (int r = 1; r < world; r++) acc += v32(r, i);
    return avg ? acc / (float)world : acc;
}

static double sum64(int world, size_t i, bool avg)
{
    double acc = v64(0, i);
    for (int r = 1; r < world; r++) acc += v64(r, i);
    return avg ? acc / (double)world : acc;
}

/* --- bodies -------------------------------------------------------------------- */

/* slot_kb = 1: 256 f32 per chunk, so the larger buffers take many chunks. */
static int body_sums(rank_ctx *x)
{
    static const size_t sizes[4] = {1, 1000, 3 * 256 + 17, 70000};
    float *b[4];
    tf_comm_request *req[4];
    tf_error err = {0};
    for (int k = 0; k < 4; k++) {
        REQUIRE((b[k] = host_alloc(x, sizes[k] * sizeof(float))), "alloc");
        for (size_t i = 0; i < sizes[k]; i++) b[k][i] = v32(x->rank, i);
    }
    /* four buckets in flight, waited for in start order, as the core does */
    for (int k = 0; k < 4; k++)
        REQUIRE(cvt->allreduce_start(x->c, b[k], sizes[k], TF_DTYPE_F32, TF_REDUCE_SUM, &req[k],
                                     &err) == TF_OK, "start %d: %s", k, err.msg);
    for (int k = 0; k < 4; k++) REQUIRE(cvt->wait(x->c, req[k], &err) == TF_OK, "wait: %s", err.msg);
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            REQUIRE(b[k][i] == sum32(x->world, i, false), "sum %d[%zu] = %.9g, want %.9g", k, i,
                    b[k][i], sum32(x->world, i, false));
    /* AVG, and waits in reverse order (the last wait runs all three, in order) */
    for (int k = 1; k < 4; k++) {
        for (size_t i = 0; i < sizes[k]; i++) b[k][i] = v32(x->rank, i);
        REQUIRE(cvt->allreduce_start(x->c, b[k], sizes[k], TF_DTYPE_F32, TF_REDUCE_AVG, &req[k],
                                     &err) == TF_OK, "start: %s", err.msg);
    }
    for (int k = 3; k >= 1; k--) REQUIRE(cvt->wait(x->c, req[k], &err) == TF_OK, "wait: %s", err.msg);
    for (int k = 1; k < 4; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            REQUIRE(b[k][i] == sum32(x->world, i, true), "avg %d[%zu] = %.9g, want %.9g", k, i,
                    b[k][i], sum32(x->world, i, true));
    /* f64, SUM and AVG */
    for (int avg = 0; avg < 2; avg++) {
        double *d = host_alloc(x, 5000 * sizeof(double));
        REQUIRE(d, "alloc");
        for (size_t i = 0; i < 5000; i++) d[i] = v64(x->rank, i);
        tf_comm_request *r = NULL;
        REQUIRE(cvt->allreduce_start(x->c, d, 5000, TF_DTYPE_F64, avg ? TF_REDUCE_AVG : TF_REDUCE_SUM,
                                     &r, &err) == TF_OK, "start: %s", err.msg);
        REQUIRE(cvt->wait(x->c, r, &err) == TF_OK, "wait: %s", err.msg);
        for (size_t i = 0; i < 5000; i++)
            REQUIRE(d[i] == sum64(x->world, i, avg), "f64 %s[%zu] = %.17g, want %.17g",
                    avg ? "avg" : "sum", i, d[i], sum64(x->world, i, avg));
        bvt->free(x->be, d, TF_MEM_DEVICE);
    }
    /* a queued all-reduce runs before a later barrier; count 0 is a no-op */
    tf_comm_request *r0 = NULL, *r1 = NULL;
    for (size_t i = 0; i < 1000; i++) b[1][i] = v32(x->rank, i);
    REQUIRE(cvt->allreduce_start(x->c, b[1], 1000, TF_DTYPE_F32, TF_REDUCE_SUM, &r0, &err) == TF_OK,
            "start: %s", err.msg);
    REQUIRE(cvt->allreduce_start(x->c, NULL, 0, TF_DTYPE_F32, TF_REDUCE_SUM, &r1, &err) == TF_OK,
            "start of 0: %s", err.msg);
    REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "barrier: %s", err.msg);
    REQUIRE(b[1][999] == sum32(x->world, 999, false), "the queued all-reduce did not run first");
    REQUIRE(cvt->wait(x->c, r0, &err) == TF_OK && cvt->wait(x->c, r1, &err) == TF_OK, "wait: %s",
            err.msg);
    for (int k = 0; k < 4; k++) bvt->free(x->be, b[k], TF_MEM_DEVICE);
    return 0;
}

static int body_broadcast(rank_ctx *x)
{
    static const tf_dtype types[6] = {TF_DTYPE_F32, TF_DTYPE_I32, TF_DTYPE_U8, TF_DTYPE_I64,
                                      TF_DTYPE_BOOL, TF_DTYPE_F16};
    tf_error err = {0};
    int roots[2] = {0, x->world - 1};
    for (int ri = 0; ri < 2; ri++)
        for (int t = 0; t < 6; t++) {
            size_t es = tf_dtype_size(types[t]), count = 3 * 1024 / es + 5, bytes = count * es;
            unsigned char *b = host_alloc(x, bytes);
            REQUIRE(b, "alloc");
            for (size_t i = 0; i < bytes; i++)
                b[i] = x->rank == roots[ri] ? (unsigned char)(i * 7 + (size_t)t + 1) : 0xee;
            REQUIRE(cvt->broadcast(x->c, b, count, types[t], roots[ri], &err) == TF_OK,
                    "broadcast: %s", err.msg);
            for (size_t i = 0; i < bytes; i++)
                REQUIRE(b[i] == (unsigned char)(i * 7 + (size_t)t + 1),
                        "broadcast of %s from %d: byte %zu is %d", tf_dtype_name(types[t]),
                        roots[ri], i, b[i]);
            bvt->free(x->be, b, TF_MEM_DEVICE);
        }
    return 0;
}

static int body_reduce(rank_ctx *x)
{
    tf_error err = {0};
    enum { N = 1500 };
    float *b = host_alloc(x, N * sizeof(float));
    REQUIRE(b, "alloc");
    for (int root = 0; root < x->world; root += x->world - 1 > 0 ? x->world - 1 : 1) {
        for (size_t i = 0; i < N; i++) b[i] = v32(x->rank, i);
        REQUIRE(cvt->reduce(x->c, b, N, TF_DTYPE_F32, TF_REDUCE_SUM, root, &err) == TF_OK,
                "reduce: %s", err.msg);
        for (size_t i = 0; i < N; i++) {
            float want = x->rank == root ? sum32(x->world, i, false) : v32(x->rank, i);
            REQUIRE(b[i] == want, "reduce to %d: [%zu] = %.9g, want %.9g", root, i, b[i], want);
        }
    }
    bvt->free(x->be, b, TF_MEM_DEVICE);
    return 0;
}

/* Nobody leaves barrier k before everyone reached it. */
static int body_barrier(rank_ctx *x)
{
    tf_error err = {0};
    for (unsigned k = 0; k < 200; k++) {
        if ((k + (unsigned)x->rank) % 7 == 0) sleep_s(0.001); /* vary who comes last */
        atomic_fetch_add(&x->page->counter, 1);
        REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "barrier %u: %s", k, err.msg);
        unsigned seen = atomic_load(&x->page->counter);
        REQUIRE(seen >= (k + 1) * (unsigned)x->world, "after barrier %u only %u arrivals", k, seen);
    }
    return 0;
}

/* Rank 1 aborts while the others wait in a barrier. */
static int body_abort(rank_ctx *x)
{
    tf_error err = {0};
    const char *want = "comm-shm: rank 1 stopped: injected failure";
    if (x->rank == 1) {
        sleep_s(0.2);
        cvt->abort(x->c, "injected failure");
    }
    double t0 = now_s();
    REQUIRE(cvt->barrier(x->c, &err) == TF_ERR_RUNTIME, "barrier after the abort succeeded");
    REQUIRE(strcmp(err.msg, want) == 0, "got '%s', want '%s'", err.msg, want);
    REQUIRE(now_s() - t0 < 5.0, "the waiters were not woken (%.2f s)", now_s() - t0);
    /* and every later call */
    tf_comm_request *r = NULL;
    float v = 1;
    REQUIRE(cvt->allreduce_start(x->c, &v, 1, TF_DTYPE_F32, TF_REDUCE_SUM, &r, &err) == TF_ERR_RUNTIME &&
            strcmp(err.msg, want) == 0, "allreduce_start after the abort: '%s'", err.msg);
    REQUIRE(cvt->broadcast(x->c, &v, 1, TF_DTYPE_F32, 0, &err) == TF_ERR_RUNTIME &&
            strcmp(err.msg, want) == 0, "broadcast after the abort: '%s'", err.msg);
    return 0;
}

/* timeout_s = 0.3; rank 2 never joins the all-reduce of ranks 0 and 1. */
static int body_timeout(rank_ctx *x)
{
    tf_error err = {0};
    const char *what = "allreduce of 10 F32 elements timed out: no progress for 0.3 s";
    if (x->rank == 2) {
        sleep_s(1.5);
        REQUIRE(cvt->barrier(x->c, &err) == TF_ERR_RUNTIME, "the straggler's barrier succeeded");
        REQUIRE(strstr(err.msg, "stopped: ") && strstr(err.msg, what),
                "the straggler got '%s'", err.msg);
        return 0;
    }
    float b[10] = {0};
    tf_comm_request *r = NULL;
    double t0 = now_s();
    REQUIRE(cvt->allreduce_start(x->c, b, 10, TF_DTYPE_F32, TF_REDUCE_SUM, &r, &err) == TF_OK,
            "start: %s", err.msg);
    REQUIRE(cvt->wait(x->c, r, &err) == TF_ERR_RUNTIME, "the all-reduce without rank 2 succeeded");
    double t = now_s() - t0;
    REQUIRE(strstr(err.msg, what), "got '%s'", err.msg);
    REQUIRE(t >= 0.29 && t < 1.2, "timed out after %.2f s, want about 0.3", t);
    return 0;
}

/* world 2, timeout_s = 0.3: rank 1 never calls barrier. */
static int body_barrier_timeout(rank_ctx *x)
{
    tf_error err = {0};
    if (x->rank == 1) return 0; /* finalizes at once, without a word */
    REQUIRE(cvt->barrier(x->c, &err) == TF_ERR_RUNTIME, "barrier alone succeeded");
    const char *want =
        "comm-shm: rank 0: barrier timed out: no progress for 0.3 s (1 of 2 ranks at the barrier)";
    REQUIRE(strcmp(err.msg, want) == 0, "got '%s', want '%s'", err.msg, want);
    return 0;
}

/* timeout_s = 0.5; ranks arrive 0.4 s apart: each arrival is progress. */
static int body_progress(rank_ctx *x)
{
    tf_error err = {0};
    sleep_s(0.4 * x->rank);
    REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "a barrier that progressed timed out: %s", err.msg);
    return 0;
}

/* Init failures, in a worker (no harness init). */
static int body_init_alone(rank_ctx *x)
{
    tf_error err = {0};
    tf_comm_init_args a = init_args(x, x->shared);
    tf_comm *c = NULL;
    REQUIRE(cvt->init(&a, &c, &err) == TF_ERR_RUNTIME, "init alone succeeded");
    REQUIRE(c == NULL, "init failed but returned a communicator");
    const char *want = x->rank == 0
        ? "comm-shm: rank 0: init timed out: no progress for 0.3 s (waiting for 2 ranks to map the shared segment)"
        : "comm-shm: rank 1: init timed out: no progress for 0.3 s (waiting for rank 0's shared segment)";
    REQUIRE(strcmp(err.msg, want) == 0, "got '%s', want '%s'", err.msg, want);
    return 0;
}

static bool shm_name_exists(pid_t pid)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tfcore-shm-%ld-", (long)pid);
    DIR *d = opendir("/dev/shm");
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) found = true;
    closedir(d);
    return found;
}

/* Once init returned everywhere, rank 0's segment has no name any more. */
static int body_unlinked(rank_ctx *x)
{
    tf_error err = {0};
    REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "barrier: %s", err.msg);
    REQUIRE(!shm_name_exists(x->page->pid[0]), "rank 0's segment is still linked in /dev/shm");
    return 0;
}

static int body_rank0_gave_up(rank_ctx *x)
{
    tf_error err = {0};
    tf_comm_init_args a = init_args(x, x->shared);
    tf_comm *c = NULL;
    REQUIRE(cvt->init(&a, &c, &err) == TF_ERR_RUNTIME, "init alone succeeded");
    REQUIRE(!shm_name_exists(getpid()), "a failed init left its segment linked");
    return 0;
}

/* Argument errors: refused locally, before any rank waits (world 1). */
static int body_argument_errors(rank_ctx *x)
{
    tf_error err = {0};
    tf_comm_request *r = NULL;
    int32_t i32 = 1;
    float f = 1;
    REQUIRE(cvt->allreduce_start(x->c, &i32, 1, TF_DTYPE_I32, TF_REDUCE_SUM, &r, &err) == TF_ERR_RUNTIME &&
            strcmp(err.msg, "comm-shm: rank 0: allreduce of 1 I32 elements: cannot reduce I32 (F32, F64)") == 0,
            "I32: '%s'", err.msg);
    REQUIRE(cvt->allreduce_start(x->c, &f, 1, TF_DTYPE_F32, (tf_reduce_op)7, &r, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "unknown reduce op 7"), "op 7: '%s'", err.msg);
    REQUIRE(cvt->allreduce_start(x->c, NULL, 4, TF_DTYPE_F32, TF_REDUCE_SUM, &r, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "the buffer is NULL"), "NULL buffer: '%s'", err.msg);
    REQUIRE(cvt->allreduce_start(x->c, &f, 1, TF_DTYPE_F32, TF_REDUCE_SUM, NULL, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "NULL request pointer"), "NULL req: '%s'", err.msg);
    REQUIRE(cvt->reduce(x->c, &f, 1, TF_DTYPE_F32, TF_REDUCE_SUM, 1, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "reduce of 1 F32 elements (root 1): root 1 is not in [0, 1)"),
            "reduce root: '%s'", err.msg);
    REQUIRE(cvt->reduce(x->c, &i32, 1, TF_DTYPE_I64, TF_REDUCE_SUM, 0, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "cannot reduce I64"), "reduce I64: '%s'", err.msg);
    REQUIRE(cvt->broadcast(x->c, &f, 1, (tf_dtype)99, 0, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "unknown dtype 99"), "dtype 99: '%s'", err.msg);
    REQUIRE(cvt->broadcast(x->c, &f, 1, TF_DTYPE_F32, -1, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "root -1 is not in [0, 1)"), "root -1: '%s'", err.msg);
    REQUIRE(cvt->broadcast(x->c, &f, SIZE_MAX / 2, TF_DTYPE_F32, 0, &err) == TF_ERR_RUNTIME &&
            strstr(err.msg, "the size overflows"), "overflow: '%s'", err.msg);
    REQUIRE(cvt->wait(x->c, NULL, &err) == TF_ERR_RUNTIME && strstr(err.msg, "NULL request"),
            "wait NULL: '%s'", err.msg);
    /* a request that is not in this communicator's queue */
    tf_comm_request *q = NULL;
    REQUIRE(cvt->allreduce_start(x->c, &f, 1, TF_DTYPE_F32, TF_REDUCE_SUM, &q, &err) == TF_OK, "start");
    REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "barrier: %s", err.msg); /* runs q */
    REQUIRE(cvt->wait(x->c, q, &err) == TF_OK, "wait after it ran: %s", err.msg);
    /* and after all that, the communicator still works (world 1: sum = itself) */
    f = 2.5f;
    REQUIRE(cvt->allreduce_start(x->c, &f, 1, TF_DTYPE_F32, TF_REDUCE_AVG, &r, &err) == TF_OK &&
            cvt->wait(x->c, r, &err) == TF_OK && f == 2.5f, "world 1 all-reduce: %s", err.msg);
    return 0;
}


/* --- send / recv ----------------------------------------------------------------- */

/* Every rank starts K sends to the next rank (dtypes vary; one far larger
 * than the 1 KiB ring, so it wraps), then waits for K receives from the
 * previous one, then for its sends: messages to one peer arrive in order.
 * Then the pipeline's pattern: start a send, wait in a receive. */
static int body_p2p_ring(rank_ctx *x)
{
    tf_error err = {0};
    enum { K = 3 };
    const tf_dtype dts[K] = {TF_DTYPE_F32, TF_DTYPE_U8, TF_DTYPE_F64};
    const size_t counts[K] = {5003, 7, 0};
    int next = (x->rank + 1) % x->world, prev = (x->rank + x->world - 1) % x->world;
    unsigned char *out[K], *in[K];
    tf_comm_request *sends[K], *recvs[K];
    for (int k = 0; k < K; k++) {
        size_t bytes = counts[k] * tf_dtype_size(dts[k]);
        out[k] = host_alloc(x, bytes);
        in[k] = host_alloc(x, bytes);
        REQUIRE(out[k] && in[k], "alloc");
        for (size_t i = 0; i < bytes; i++) out[k][i] = (unsigned char)(i * 13 + (size_t)k * 5 + (size_t)x->rank);
        memset(in[k], 0xee, bytes);
        REQUIRE(cvt->send(x->c, out[k], counts[k], dts[k], next, &sends[k], &err) == TF_OK, "send %d: %s", k, err.msg);
    }
    for (int k = 0; k < K; k++)
        REQUIRE(cvt->recv(x->c, in[k], counts[k], dts[k], prev, &recvs[k], &err) == TF_OK, "recv %d: %s", k, err.msg);
    for (int k = K - 1; k >= 0; k--) /* any order of waits */
        REQUIRE(cvt->wait(x->c, recvs[k], &err) == TF_OK, "wait for recv %d: %s", k, err.msg);
    for (int k = 0; k < K; k++) REQUIRE(cvt->wait(x->c, sends[k], &err) == TF_OK, "wait for send %d: %s", k, err.msg);
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < counts[k] * tf_dtype_size(dts[k]); i++)
            REQUIRE(in[k][i] == (unsigned char)(i * 13 + (size_t)k * 5 + (size_t)prev),
                    "message %d from rank %d: byte %zu is %d", k, prev, i, in[k][i]);
    /* a send started, then a receive waited for, in both directions at once */
    float a = (float)x->rank, b = -1;
    tf_comm_request *s = NULL, *r = NULL;
    REQUIRE(cvt->send(x->c, &a, 1, TF_DTYPE_F32, next, &s, &err) == TF_OK, "send: %s", err.msg);
    REQUIRE(cvt->recv(x->c, &b, 1, TF_DTYPE_F32, prev, &r, &err) == TF_OK, "recv: %s", err.msg);
    REQUIRE(cvt->wait(x->c, r, &err) == TF_OK && b == (float)prev, "exchange: %s, got %g", err.msg, b);
    REQUIRE(cvt->wait(x->c, s, &err) == TF_OK, "send wait: %s", err.msg);
    /* a collective after point-to-point still lines up */
    REQUIRE(cvt->barrier(x->c, &err) == TF_OK, "barrier: %s", err.msg);
    for (int k = 0; k < K; k++) {
        bvt->free(x->be, out[k], TF_MEM_DEVICE);
        bvt->free(x->be, in[k], TF_MEM_DEVICE);
    }
    return 0;
}

/* Rank 0 sends 10 F32, rank 1 expects 12: rank 1 names both, rank 0 stops. */
static int body_p2p_mismatch(rank_ctx *x)
{
    tf_error err = {0};
    float b[12] = {0};
    tf_comm_request *q = NULL;
    if (x->rank == 0) REQUIRE(cvt->send(x->c, b, 10, TF_DTYPE_F32, 1, &q, &err) == TF_OK, "send: %s", err.msg);
    else REQUIRE(cvt->recv(x->c, b, 12, TF_DTYPE_F32, 0, &q, &err) == TF_OK, "recv: %s", err.msg);
    REQUIRE(cvt->wait(x->c, q, &err) == TF_ERR_RUNTIME, "a mismatched message was delivered");
    const char *want = "rank 0's message #1 to rank 1 is 10 F32 elements; rank 1's recv of 12 F32 elements from "
                       "rank 0 expected it";
    REQUIRE(strstr(err.msg, want), "got '%s'", err.msg);
    if (x->rank == 0) REQUIRE(strstr(err.msg, "comm-shm: rank 1 stopped: "), "got '%s'", err.msg);
    return 0;
}

/* timeout_s = 0.3: rank 1 never sends; rank 0's receive names itself. */
static int body_p2p_timeout(rank_ctx *x)
{
    tf_error err = {0};
    if (x->rank == 1) return 0;
    float b[4] = {0};
    tf_comm_request *q = NULL;
    REQUIRE(cvt->recv(x->c, b, 4, TF_DTYPE_F32, 1, &q, &err) == TF_OK, "recv: %s", err.msg);
    double t0 = now_s();
    REQUIRE(cvt->wait(x->c, q, &err) == TF_ERR_RUNTIME, "a receive without a sender succeeded");
    const char *want = "comm-shm: rank 0: recv of 4 F32 elements from rank 1 timed out: no progress for 0.3 s";
    REQUIRE(strstr(err.msg, want), "got '%s', want '%s'", err.msg, want);
    REQUIRE(now_s() - t0 < 1.5, "timed out after %.2f s", now_s() - t0);
    return 0;
}

/* Rank 1 aborts while rank 0 waits in a receive from it. */
static int body_p2p_abort(rank_ctx *x)
{
    tf_error err = {0};
    if (x->rank == 1) {
        sleep_s(0.2);
        cvt->abort(x->c, "injected failure");
        return 0;
    }
    float b[4] = {0};
    tf_comm_request *q = NULL;
    REQUIRE(cvt->recv(x->c, b, 4, TF_DTYPE_F32, 1, &q, &err) == TF_OK, "recv: %s", err.msg);
    REQUIRE(cvt->wait(x->c, q, &err) == TF_ERR_RUNTIME, "the receive succeeded");
    REQUIRE(strcmp(err.msg, "comm-shm: rank 1 stopped: injected failure") == 0, "got '%s'", err.msg);
    REQUIRE(cvt->send(x->c, b, 4, TF_DTYPE_F32, 1, &q, &err) == TF_ERR_RUNTIME, "a send after the abort started");
    return 0;
}

static int body_p2p_arguments(rank_ctx *x)
{
    tf_error err = {0};
    float b[4] = {0};
    tf_comm_request *q = NULL;
    REQUIRE(cvt->send(x->c, b, 4, TF_DTYPE_F32, x->rank, &q, &err) == TF_ERR_RUNTIME &&
                strstr(err.msg, "is not another rank"), "a send to itself: '%s'", err.msg);
    REQUIRE(cvt->recv(x->c, b, 4, TF_DTYPE_F32, x->world, &q, &err) == TF_ERR_RUNTIME &&
                strstr(err.msg, "is not another rank"), "a receive from rank world: '%s'", err.msg);
    REQUIRE(cvt->recv(x->c, NULL, 4, TF_DTYPE_F32, 1 - x->rank, &q, &err) == TF_ERR_RUNTIME &&
                strstr(err.msg, "the buffer is NULL"), "a NULL buffer: '%s'", err.msg);
    return cvt->barrier(x->c, &err) == TF_OK ? 0 : 1;
}

/* --- tests ----------------------------------------------------------------------- */

START_TEST(test_sums)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1), true, body_sums), 0);
}
END_TEST

START_TEST(test_broadcast)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1), true, body_broadcast), 0);
}
END_TEST

START_TEST(test_reduce)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1), true, body_reduce), 0);
}
END_TEST

START_TEST(test_barrier)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1024), true, body_barrier), 0);
}
END_TEST

START_TEST(test_abort)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1024), true, body_abort), 0);
}
END_TEST

START_TEST(test_timeout_names_the_collective)
{
    load_plugins();
    ck_assert_int_eq(run_ranks(3, NULL, 0, cfg(3, 0.3, 1024), true, body_timeout), 0);
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 0.3, 1024), true, body_barrier_timeout), 0);
}
END_TEST

START_TEST(test_progress_resets_the_timeout)
{
    load_plugins();
    ck_assert_int_eq(run_ranks(3, NULL, 0, cfg(3, 0.5, 1024), true, body_progress), 0);
}
END_TEST

START_TEST(test_init_waits_time_out)
{
    load_plugins();
    int one = 1, zero = 0;
    ck_assert_int_eq(run_ranks(2, &one, 1, cfg(2, 0.3, 1024), false, body_init_alone), 0);
    ck_assert_int_eq(run_ranks(2, &zero, 1, cfg(2, 0.3, 1024), false, body_init_alone), 0);
    ck_assert_int_eq(run_ranks(2, &zero, 1, cfg(2, 0.3, 1024), false, body_rank0_gave_up), 0);
}
END_TEST

START_TEST(test_segment_unlinked_after_init)
{
    load_plugins();
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 30, 1024), true, body_unlinked), 0);
    ck_assert_int_eq(run_ranks(3, NULL, 0, cfg(3, 30, 1024), true, body_unlinked), 0);
}
END_TEST

START_TEST(test_argument_errors)
{
    load_plugins();
    ck_assert_int_eq(run_ranks(1, NULL, 0, cfg(1, 30, 1024), true, body_argument_errors), 0);
    ck_assert_int_eq(cvt->launch_mode(), TF_LAUNCH_PROCESSES);
    ck_assert(!cvt->optimizer_on_root_only());
}
END_TEST

/* A backend-vtable double: host_memory says no, or the slot is absent (1.0). */
static bool says_device_memory(tf_backend *be) { return false; }
static const char *double_name(tf_backend *be) { return "a device backend"; }

START_TEST(test_init_refusals)
{
    load_plugins();
    tf_config *c = NULL;
    tf_error err = {0};
    ck_assert_int_eq(tf_config_load_string(&c, cfg(2, 30, 1024), "shm.cfg", NULL, &err), TF_OK);
    static char fake_be;
    static char region[TF_COMM_SHARED_BYTES];
    tf_comm_init_args a = {.size = sizeof a, .section = tf_config_section(c, "comm"), .rank = 0,
                           .world_size = 2, .backend = bvt, .be = (tf_backend *)&fake_be,
                           .shared = NULL, .local_world_size = 2};
    tf_comm *comm = NULL;
    /* not started by the process launcher */
    ck_assert_int_eq(cvt->init(&a, &comm, &err), TF_ERR_CONFIG);
    ck_assert_str_eq(err.msg, "comm-shm needs tfcore's process launcher (no shared region: started "
                              "by mpirun or srun?)");
    /* a backend with device memory */
    tf_backend_vtable dev = {.size = TF_VTABLE_SIZE(tf_backend_vtable),
                             .device_name = double_name, .host_memory = says_device_memory};
    a.shared = region;
    a.backend = &dev;
    ck_assert_int_eq(cvt->init(&a, &comm, &err), TF_ERR_CONFIG);
    ck_assert_str_eq(err.msg, "comm-shm needs a backend whose buffers are host memory (backend \"a "
                              "device backend\" has device memory)");
    /* an ABI 1.0 backend: no host_memory slot at all */
    dev.size = (uint32_t)offsetof(tf_backend_vtable, host_memory);
    dev.host_memory = NULL;
    ck_assert_int_eq(cvt->init(&a, &comm, &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "has device memory"));
    /* no placement */
    a.backend = bvt;
    a.rank = 2;
    ck_assert_int_eq(cvt->init(&a, &comm, &err), TF_ERR_RUNTIME);
    ck_assert_str_eq(err.msg, "comm-shm: init: rank 2 of world_size 2");
    ck_assert_ptr_null(comm);
    tf_config_free(c);
}
END_TEST

START_TEST(test_p2p)
{
    int world = 2 + _i;
    load_plugins();
    ck_assert_int_eq(run_ranks(world, NULL, 0, cfg(world, 30, 1), true, body_p2p_ring), 0);
}
END_TEST

START_TEST(test_p2p_failures)
{
    load_plugins();
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 30, 1), true, body_p2p_mismatch), 0);
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 0.3, 1), true, body_p2p_timeout), 0);
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 30, 1), true, body_p2p_abort), 0);
    ck_assert_int_eq(run_ranks(2, NULL, 0, cfg(2, 30, 1), true, body_p2p_arguments), 0);
}
END_TEST

static tf_status check_text(const char *text, tf_error *err)
{
    tf_config *c = NULL;
    tf_status st = tf_config_load_string(&c, text, "shm.cfg", NULL, err);
    if (!st) st = cvt->check_config(tf_config_section(c, "comm"), err);
    tf_config_free(c);
    return st;
}

START_TEST(test_config_errors)
{
    load_plugins();
    tf_error err = {0};
    ck_assert_int_eq(check_text("comm = {\n  plugin = \"shm\";\n  timeout_s = 2.5;\n  slot_kb = 4;\n};\n", &err), TF_OK);
    ck_assert_int_eq(check_text("comm = {\n  plugin = \"shm\";\n};\n", &err), TF_OK);
    ck_assert_int_eq(check_text("comm = {\n  plugin = \"shm\";\n  timeout_s = -1;\n};\n", &err), TF_ERR_CONFIG);
    ck_assert_str_eq(err.msg, "shm.cfg:3: comm.timeout_s must be in [0.1, 604800], got -1");
    ck_assert_int_eq(check_text("comm = {\n  plugin = \"shm\";\n  timeout_s = \"soon\";\n};\n", &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "shm.cfg:3: comm.timeout_s must be a number"));
    ck_assert_int_eq(check_text("comm = {\n  plugin = \"shm\";\n\n  slot_kb = 0;\n};\n", &err), TF_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(err.msg, "shm.cfg:4: comm.slot_kb must be in [1, 1048576], got 0"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm-shm");
    TCase *tc = tcase_create("collectives");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_sums, 0, 2); /* world 2 and 3 */
    tcase_add_loop_test(tc, test_broadcast, 0, 2);
    tcase_add_loop_test(tc, test_reduce, 0, 2);
    tcase_add_loop_test(tc, test_barrier, 0, 2);
    tcase_add_loop_test(tc, test_abort, 0, 2);
    tcase_add_test(tc, test_timeout_names_the_collective);
    tcase_add_test(tc, test_progress_resets_the_timeout);
    tcase_add_test(tc, test_init_waits_time_out);
    tcase_add_test(tc, test_segment_unlinked_after_init);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_init_refusals);
    tcase_add_test(tc, test_config_errors);
    tcase_add_loop_test(tc, test_p2p, 0, 2); /* world 2 and 3 */
    tcase_add_test(tc, test_p2p_failures);
    suite_add_tcase(s, tc);
    int failed = tf_test_run(s, false);
    tf_registry_free(reg);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
