/* test_comm_mpi_driver.c — the comm-mpi plugin under mpirun, loaded the way
 * tfcore loads it (tf_registry: dlopen RTLD_LOCAL), with backend-cpu.
 * tests/test_comm_mpi.sh runs it; each rank prints
 *     "test_comm_mpi_driver: rank R MODE: P passed, F failed"
 * and exits non-zero when F > 0. The rank and size come from Open MPI's
 * environment, as the core reads them. Modes:
 *
 *   collectives DIR   every collective on three views of the CPU backend:
 *                     "host" (host_memory() true: buffers go to MPI as is),
 *                     "device" (host_memory() false: auto path, which is staged
 *                     unless the library is CUDA-aware) and "staged"
 *                     (device_buffers = "staged", small chunks, no progress
 *                     thread); exact values (reduce_scatter and all_gather
 *                     included); DIR is a folder every rank sees
 *                     (the barrier check leaves files there).
 *   errors            init errors: world size and rank mismatch, "cuda-aware"
 *                     on a library that is not; MPI started twice.
 *   mpi-error         ranks disagree on a broadcast's length: MPI's error comes
 *                     back as one line on the ranks that see it.
 *   abort             the last rank calls abort() while the others wait in a
 *                     broadcast from it; mpirun must end the job.
 *   preinit           MPI started by the application first (thread level
 *                     SINGLE): used as it is, no progress thread, not finalized.
 *   overlap           not a test: times allreduce_start/wait against simulated
 *                     backward compute, with and without the progress thread
 *                     (README.md's figures). */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h> /* constants only: MPI functions come from the plugin's scope */

#include "common.h" /* plugins through the registry (not its Check runner) */
#include "plan.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"

static int rank_, size_;
static const char *mode_;
static int passed, failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "test_comm_mpi_driver: rank %d %s: FAIL: %s\n", rank_, mode_, msg);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_comm_mpi_driver: rank %d: ", rank_);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v) die("%s is not set: run me under mpirun", name);
    return atoi(v);
}

/* --- plugins, through the real loader ----------------------------------------- */

static tf_registry *reg;
static const tf_comm_vtable *cvt;
static const tf_backend_vtable *cpu_vt;
static tf_backend *be;
static tf_config *be_cfg;

static void load_plugins(void)
{
    const char *rel[] = {"plugins/comm-mpi", "plugins/backend-cpu"};
    tf_error err = {0};
    if (tf_test_registry(&reg, rel, TF_TEST_COUNT(rel), &err)) die("registry: %s", err.msg);
    const tf_loaded_plugin *p = tf_test_plugin(reg, TF_KIND_COMM, "mpi", &err);
    if (!p) die("%s", err.msg);
    cvt = p->desc->vtable;
    if (!(p = tf_test_plugin(reg, TF_KIND_BACKEND, "cpu", &err))) die("%s", err.msg);
    cpu_vt = p->desc->vtable;
    if (tf_config_new(&be_cfg, &err)) die("%s", err.msg);
    tf_backend_open_args oa = {sizeof oa, 0, 1, 1, tf_config_section(be_cfg, "backend"), 1};
    if (cpu_vt->open(&oa, &be, &err)) die("backend-cpu open: %s", err.msg);
}

static void unload_plugins(void)
{
    cpu_vt->close(be);
    tf_config_free(be_cfg);
    tf_registry_free(reg);
}

/* The CPU backend seen as host memory or as device memory (ABI 1.1 slot). */
static bool yes(tf_backend *b) { (void)b; return true; }
static bool no(tf_backend *b) { (void)b; return false; }
static tf_backend_vtable host_view, device_view;

static void make_views(void)
{
    size_t n = cpu_vt->size < sizeof host_view ? cpu_vt->size : sizeof host_view;
    memcpy(&host_view, cpu_vt, n);
    host_view.size = sizeof host_view;
    device_view = host_view;
    host_view.host_memory = yes;
    device_view.host_memory = no;
}

typedef struct scenario {
    const char *name;
    const tf_backend_vtable *bvt;
    const char *cfg_text; /* the comm section's plugin keys */
    tf_config *cfg;
    tf_comm *c;
} scenario;

static tf_status open_comm(scenario *s, int rank, int world, tf_error *err)
{
    char text[1024];
    snprintf(text, sizeof text, "comm = {\n%s\n};\n", s->cfg_text);
    if (tf_config_load_string(&s->cfg, text, "mpi.cfg", NULL, err)) die("config: %s", err->msg);
    tf_comm_settings core; /* the core's keys, as the core reads them (comm.timeout_s) */
    if (tf_comm_settings_read(tf_config_section(s->cfg, "comm"), &core, err)) die("config: %s", err->msg);
    tf_comm_init_args a = {sizeof a, tf_config_section(s->cfg, "comm"), rank, world, 0, s->bvt, be,
                           NULL, 1, core.timeout_s};
    return cvt->init(&a, &s->c, err);
}

/* --- buffers: filled and read through the backend's copies --------------------- */

static void *dev_alloc(const tf_backend_vtable *vt, size_t bytes)
{
    void *p = NULL;
    tf_error err = {0};
    if (vt->alloc(be, bytes ? bytes : 1, TF_MEM_DEVICE, &p, &err)) die("alloc: %s", err.msg);
    return p;
}

static void to_dev(const tf_backend_vtable *vt, void *d, const void *h, size_t bytes)
{
    if (bytes && vt->memcpy(be, d, h, bytes, TF_COPY_HOST_TO_DEVICE, NULL)) die("memcpy H2D");
}

static void from_dev(const tf_backend_vtable *vt, void *h, const void *d, size_t bytes)
{
    if (bytes && vt->memcpy(be, h, d, bytes, TF_COPY_DEVICE_TO_HOST, NULL)) die("memcpy D2H");
}

/* Values whose sums over ranks are exact in f32 and f64: quarters of small integers. */
static double value(int rank, size_t i) { return (double)((i % 1009) + 3 * (size_t)rank + 1) * 0.25; }

static double sum_over_ranks(size_t i)
{
    double s = 0;
    for (int r = 0; r < size_; r++) s += value(r, i);
    return s;
}

static void fill(void *h, tf_dtype dt, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == TF_DTYPE_F32) ((float *)h)[i] = (float)value(rank, i);
        else ((double *)h)[i] = value(rank, i);
    }
}

/* Index of the first element that differs from the expected result, or n. */
static size_t first_wrong(const void *h, tf_dtype dt, size_t n, tf_reduce_op op)
{
    for (size_t i = 0; i < n; i++) {
        double s = sum_over_ranks(i);
        if (dt == TF_DTYPE_F32) {
            float want = op == TF_REDUCE_AVG ? (float)s / (float)size_ : (float)s;
            if (((const float *)h)[i] != want) return i;
        } else {
            double want = op == TF_REDUCE_AVG ? s / (double)size_ : s;
            if (((const double *)h)[i] != want) return i;
        }
    }
    return n;
}

static const size_t counts[] = {0, 1, 7, (size_t)1 << 20};
#define NCOUNTS (sizeof counts / sizeof counts[0])

/* 16 reductions in flight (f32/f64 x sum/avg x 4 counts), waited in order. */
static void allreduce_round(scenario *s, int round)
{
    const tf_backend_vtable *vt = s->bvt;
    enum { N = 2 * 2 * NCOUNTS };
    void *dev[N], *host[N];
    tf_dtype dts[N];
    tf_reduce_op ops[N];
    size_t ns[N];
    tf_comm_request *req[N];
    int k = 0;
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++)
            for (size_t j = 0; j < NCOUNTS; j++, k++) {
                dts[k] = d ? TF_DTYPE_F64 : TF_DTYPE_F32;
                ops[k] = o ? TF_REDUCE_AVG : TF_REDUCE_SUM;
                ns[k] = counts[j];
                size_t bytes = ns[k] * tf_dtype_size(dts[k]);
                host[k] = malloc(bytes ? bytes : 1);
                dev[k] = dev_alloc(vt, bytes);
                fill(host[k], dts[k], ns[k], rank_);
                to_dev(vt, dev[k], host[k], bytes);
            }
    tf_error err = {0};
    for (k = 0; k < N; k++) {
        tf_status st = cvt->allreduce_start(s->c, dev[k], ns[k], dts[k], ops[k], &req[k], &err);
        check(st == TF_OK && req[k], "%s round %d: allreduce_start #%d: %s", s->name, round, k, err.msg);
        if (st) req[k] = NULL;
    }
    for (k = 0; k < N; k++) {
        if (!req[k]) continue;
        tf_status st = cvt->wait(s->c, req[k], &err);
        check(st == TF_OK, "%s round %d: wait #%d: %s", s->name, round, k, err.msg);
        size_t bytes = ns[k] * tf_dtype_size(dts[k]);
        memset(host[k], 0xff, bytes);
        from_dev(vt, host[k], dev[k], bytes);
        size_t w = first_wrong(host[k], dts[k], ns[k], ops[k]);
        check(w == ns[k], "%s round %d: allreduce %s %s of %zu: element %zu is wrong", s->name, round,
              tf_dtype_name(dts[k]), ops[k] ? "avg" : "sum", ns[k], w);
    }
    /* waiting a request twice is an error, not a crash or a hang */
    if (req[0]) {
        tf_status st = cvt->wait(s->c, req[0], &err);
        check(st == TF_ERR_RUNTIME && strstr(err.msg, "not in flight"),
              "%s: second wait of a request: status %d '%s'", s->name, st, err.msg);
    }
    for (k = 0; k < N; k++) {
        vt->free(be, dev[k], TF_MEM_DEVICE);
        free(host[k]);
    }
}

static size_t held_bytes(void)
{
    tf_backend_mem_info mi = {0};
    cpu_vt->mem_info(be, &mi);
    return mi.current;
}

/* Two rounds: the second must allocate nothing new (the request pool and its
 * staging buffers are reused); a staged comm holds staging for every byte in
 * flight, a host comm none. */
static void allreduce_checks(scenario *s, bool staged)
{
    size_t in_flight = 0;
    for (size_t j = 0; j < NCOUNTS; j++) in_flight += 2 * counts[j] * (sizeof(float) + sizeof(double));
    size_t before = held_bytes();
    allreduce_round(s, 1);
    size_t after1 = held_bytes();
    allreduce_round(s, 2);
    size_t after2 = held_bytes();
    check(after2 == after1, "%s: round 2 allocated %zd more bytes (pool not reused)", s->name,
          (ssize_t)(after2 - after1));
    if (staged)
        check(after1 - before >= in_flight, "%s: staging holds %zu bytes, %zu were in flight", s->name,
              after1 - before, in_flight);
    else if (s->bvt == &host_view)
        check(after1 == before, "%s: host memory was staged (%zu bytes held)", s->name, after1 - before);
}

static void reduce_checks(scenario *s)
{
    const tf_backend_vtable *vt = s->bvt;
    static const struct { tf_dtype dt; tf_reduce_op op; size_t n; } cases[] = {
        {TF_DTYPE_F32, TF_REDUCE_SUM, 7},        {TF_DTYPE_F32, TF_REDUCE_AVG, (size_t)1 << 20},
        {TF_DTYPE_F64, TF_REDUCE_SUM, (size_t)1 << 20}, {TF_DTYPE_F64, TF_REDUCE_AVG, 1},
        {TF_DTYPE_F32, TF_REDUCE_SUM, 0},
    };
    for (int root = 0; root < 2; root++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            tf_dtype dt = cases[k].dt;
            size_t n = cases[k].n, bytes = n * tf_dtype_size(dt);
            void *h = malloc(bytes ? bytes : 1), *d = dev_alloc(vt, bytes);
            fill(h, dt, n, rank_);
            to_dev(vt, d, h, bytes);
            tf_error err = {0};
            tf_status st = cvt->reduce(s->c, d, n, dt, cases[k].op, root, &err);
            check(st == TF_OK, "%s: reduce to %d: %s", s->name, root, err.msg);
            memset(h, 0xff, bytes);
            from_dev(vt, h, d, bytes);
            if (rank_ == root) {
                size_t w = first_wrong(h, dt, n, cases[k].op);
                check(w == n, "%s: reduce %s %s of %zu to root %d: element %zu is wrong", s->name,
                      tf_dtype_name(dt), cases[k].op ? "avg" : "sum", n, root, w);
            } else {
                void *mine = malloc(bytes ? bytes : 1);
                fill(mine, dt, n, rank_);
                check(memcmp(mine, h, bytes) == 0, "%s: reduce to %d changed rank %d's buffer", s->name,
                      root, rank_);
                free(mine);
            }
            vt->free(be, d, TF_MEM_DEVICE);
            free(h);
        }
}

/* ZeRO's reduce_scatter and all_gather (ABI 1.4), in place on buf[block * size]:
 * the own block gets the sum (average) over ranks of that block; each rank's
 * block lands in every rank's buffer. Blocks of 0, 1, 7 and 250001 elements
 * (above the staged scenario's 100000-element chunks: several MPI calls). */
static void sharded_checks(scenario *s)
{
    const tf_backend_vtable *vt = s->bvt;
    const size_t blocks[] = {0, 1, 7, 250001};
    for (int dtk = 0; dtk < 2; dtk++)
        for (int op = 0; op < 2; op++)
            for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
                tf_dtype dt = dtk ? TF_DTYPE_F64 : TF_DTYPE_F32;
                size_t b = blocks[k], n = b * (size_t)size_, es = tf_dtype_size(dt), bytes = n * es;
                void *h = malloc(bytes ? bytes : 1), *d = dev_alloc(vt, bytes);
                fill(h, dt, n, rank_);
                to_dev(vt, d, h, bytes);
                tf_error err = {0};
                tf_comm_request *req = NULL;
                tf_status st = cvt->reduce_scatter(s->c, d, b, dt, (tf_reduce_op)op, &req, &err);
                if (!st) st = cvt->wait(s->c, req, &err);
                check(st == TF_OK, "%s: reduce_scatter %s of %zu a rank: %s", s->name, tf_dtype_name(dt), b, err.msg);
                from_dev(vt, h, d, bytes);
                size_t wrong = b;
                for (size_t i = 0; i < b && wrong == b; i++) {
                    size_t g = (size_t)rank_ * b + i;
                    double sum = sum_over_ranks(g);
                    double got = dt == TF_DTYPE_F32 ? ((float *)h)[g] : ((double *)h)[g];
                    double want = dt == TF_DTYPE_F32 ? (double)(op ? (float)sum / (float)size_ : (float)sum)
                                                     : (op ? sum / (double)size_ : sum);
                    if (got != want) wrong = i;
                }
                check(wrong == b, "%s: reduce_scatter %s %s of %zu a rank: own element %zu is wrong", s->name,
                      tf_dtype_name(dt), op ? "avg" : "sum", b, wrong);
                /* all_gather: only the own block holds this rank's values, the rest is junk */
                memset(h, 0x7f, bytes);
                for (size_t i = 0; i < b; i++) {
                    size_t g = (size_t)rank_ * b + i;
                    if (dt == TF_DTYPE_F32) ((float *)h)[g] = (float)value(rank_, g);
                    else ((double *)h)[g] = value(rank_, g);
                }
                to_dev(vt, d, h, bytes);
                st = cvt->all_gather(s->c, d, b, dt, &req, &err);
                if (!st) st = cvt->wait(s->c, req, &err);
                check(st == TF_OK, "%s: all_gather %s of %zu a rank: %s", s->name, tf_dtype_name(dt), b, err.msg);
                memset(h, 0, bytes);
                from_dev(vt, h, d, bytes);
                wrong = n;
                for (size_t g = 0; g < n && wrong == n; g++) {
                    double got = dt == TF_DTYPE_F32 ? ((float *)h)[g] : ((double *)h)[g];
                    double want = dt == TF_DTYPE_F32 ? (double)(float)value((int)(g / b), g) : value((int)(g / b), g);
                    if (got != want) wrong = g;
                }
                check(wrong == n, "%s: all_gather %s of %zu a rank: element %zu is wrong", s->name,
                      tf_dtype_name(dt), b, wrong);
                vt->free(be, d, TF_MEM_DEVICE);
                free(h);
            }
    /* a dtype MPI cannot reduce is one line, nothing started */
    int32_t x[8] = {0};
    tf_error err = {0};
    tf_comm_request *req = NULL;
    tf_status st = cvt->reduce_scatter(s->c, x, 1, TF_DTYPE_I32, TF_REDUCE_SUM, &req, &err);
    check(st != TF_OK && strstr(err.msg, "reduce_scatter: dtype I32 is not supported (F32 and F64 are)"),
          "%s: reduce_scatter of I32: %s", s->name, err.msg);
}

/* ZeRO-2's reduce_start (ABI 1.5): one buffer cut into a part per rank, every
 * part's reduction to its rank in flight at once, waited in reverse order;
 * each root's part holds the sum (average) over ranks. Parts of 0, 1, 7 and
 * 250001 elements (several MPI calls on the staged scenario). */
static void reduce_start_checks(scenario *s)
{
    const tf_backend_vtable *vt = s->bvt;
    const size_t parts[] = {0, 1, 7, 250001};
    for (int op = 0; op < 2; op++)
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            size_t b = parts[k], n = b * (size_t)size_, bytes = n * sizeof(float);
            float *h = malloc(bytes ? bytes : 1);
            void *d = dev_alloc(vt, bytes);
            fill(h, TF_DTYPE_F32, n, rank_);
            to_dev(vt, d, h, bytes);
            tf_error err = {0};
            tf_comm_request *req[64] = {0};
            tf_status st = TF_OK;
            for (int r = 0; r < size_ && r < 64 && !st; r++)
                st = cvt->reduce_start(s->c, (float *)d + (size_t)r * b, b, TF_DTYPE_F32, (tf_reduce_op)op, r, &req[r],
                                       &err);
            for (int r = (size_ < 64 ? size_ : 64) - 1; r >= 0 && !st; r--) st = cvt->wait(s->c, req[r], &err);
            check(st == TF_OK, "%s: reduce_start of %zu a part: %s", s->name, b, err.msg);
            from_dev(vt, h, d, bytes);
            size_t wrong = b;
            for (size_t i = 0; i < b && wrong == b; i++) {
                size_t g = (size_t)rank_ * b + i;
                double sum = sum_over_ranks(g);
                if (h[g] != (op ? (float)sum / (float)size_ : (float)sum)) wrong = i;
            }
            check(wrong == b, "%s: reduce_start %s of %zu: own element %zu is wrong", s->name, op ? "avg" : "sum", b,
                  wrong);
            vt->free(be, d, TF_MEM_DEVICE);
            free(h);
        }
    tf_error err = {0};
    tf_comm_request *req = NULL;
    float x = 0;
    tf_status st = cvt->reduce_start(s->c, &x, 1, TF_DTYPE_F32, TF_REDUCE_SUM, size_, &req, &err);
    check(st != TF_OK && strstr(err.msg, "reduce_start: root"), "%s: reduce_start to rank %d: %s", s->name, size_,
          err.msg);
}

static void broadcast_checks(scenario *s)
{
    const tf_backend_vtable *vt = s->bvt;
    const tf_dtype dts[] = {TF_DTYPE_F32, TF_DTYPE_I32, TF_DTYPE_U8, TF_DTYPE_I64};
    const size_t ns[] = {0, 5, ((size_t)1 << 20) + 3};
    int root = size_ - 1; /* not rank 0 */
    for (size_t a = 0; a < sizeof dts / sizeof dts[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            size_t bytes = ns[b] * tf_dtype_size(dts[a]);
            unsigned char *h = malloc(bytes ? bytes : 1);
            void *d = dev_alloc(vt, bytes);
            for (size_t i = 0; i < bytes; i++)
                h[i] = rank_ == root ? (unsigned char)(i * 7 + 13 + a) : (unsigned char)(0xe0 + rank_);
            to_dev(vt, d, h, bytes);
            tf_error err = {0};
            tf_status st = cvt->broadcast(s->c, d, ns[b], dts[a], root, &err);
            check(st == TF_OK, "%s: broadcast: %s", s->name, err.msg);
            memset(h, 0, bytes);
            from_dev(vt, h, d, bytes);
            size_t i = 0;
            while (i < bytes && h[i] == (unsigned char)(i * 7 + 13 + a)) i++;
            check(i == bytes, "%s: broadcast of %zu %s from %d: byte %zu is wrong", s->name, ns[b],
                  tf_dtype_name(dts[a]), root, i);
            vt->free(be, d, TF_MEM_DEVICE);
            free(h);
        }
}

/* Each rank leaves a file, then the barrier: afterwards every rank's file exists. */
static void barrier_checks(scenario *s, const char *dir)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s-%d", dir, s->name, rank_);
    FILE *f = fopen(path, "w");
    if (!f) die("cannot create %s", path);
    fclose(f);
    tf_error err = {0};
    check(cvt->barrier(s->c, &err) == TF_OK, "%s: barrier: %s", s->name, err.msg);
    for (int r = 0; r < size_; r++) {
        snprintf(path, sizeof path, "%s/%s-%d", dir, s->name, r);
        check(access(path, F_OK) == 0, "%s: after the barrier rank %d's file is missing", s->name, r);
    }
}

/* Argument errors: one line naming the plugin, rank and what is wrong; no MPI call made. */
static void argument_error_checks(scenario *s)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "comm-mpi: rank %d of %d: ", rank_, size_);
    float x[4] = {0};
    tf_comm_request *req = (tf_comm_request *)&x;
    tf_error err = {0};
#define EXPECT(call, fragment)                                                                     \
    do {                                                                                           \
        memset(&err, 0, sizeof err);                                                               \
        tf_status st_ = (call);                                                                    \
        check(st_ == TF_ERR_RUNTIME && strncmp(err.msg, prefix, strlen(prefix)) == 0 &&            \
                  strstr(err.msg, fragment) != NULL,                                               \
              "%s: %s: status %d, message '%s', expected '%s'", s->name, #call, st_, err.msg,      \
              fragment);                                                                           \
    } while (0)
    EXPECT(cvt->allreduce_start(s->c, x, 4, TF_DTYPE_I32, TF_REDUCE_SUM, &req, &err),
           "allreduce_start: dtype I32 cannot be reduced (F32 and F64 can)");
    check(req == NULL, "%s: a failed allreduce_start left a request", s->name);
    EXPECT(cvt->allreduce_start(s->c, NULL, 3, TF_DTYPE_F32, TF_REDUCE_SUM, &req, &err),
           "allreduce_start: buffer is NULL for 3 elements");
    EXPECT(cvt->allreduce_start(s->c, x, 4, TF_DTYPE_F32, (tf_reduce_op)7, &req, &err),
           "allreduce_start: unknown reduce op 7");
    EXPECT(cvt->reduce(s->c, x, 4, TF_DTYPE_F32, TF_REDUCE_SUM, size_, &err), "reduce: root ");
    EXPECT(cvt->reduce(s->c, x, 4, TF_DTYPE_U8, TF_REDUCE_SUM, 0, &err),
           "reduce: dtype U8 cannot be reduced");
    EXPECT(cvt->reduce(s->c, NULL, 4, TF_DTYPE_F32, TF_REDUCE_SUM, 0, &err),
           "reduce: buffer is NULL for 4 elements");
    EXPECT(cvt->broadcast(s->c, x, 4, (tf_dtype)99, 0, &err), "broadcast: unknown dtype 99");
    EXPECT(cvt->broadcast(s->c, x, 4, TF_DTYPE_F32, -1, &err), "broadcast: root -1 is not a rank");
    EXPECT(cvt->broadcast(s->c, x, SIZE_MAX / 2, TF_DTYPE_F32, 0, &err), "overflow size_t");
    EXPECT(cvt->wait(s->c, (tf_comm_request *)&x, &err), "wait: the request is not in flight");
#undef EXPECT
}

/* ABI 1.4 send / recv: a ring, every rank sending to the next while it
 * receives from the one before (both started before either is waited, the
 * pattern of a pipeline's stages), two messages in a row per pair arriving
 * in order, lengths that take several chunks on the staged path, and the
 * argument errors. */
static void p2p_checks(scenario *s)
{
    const tf_backend_vtable *vt = s->bvt;
    const size_t lens[2] = {7, 250001};
    int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    void *sdev[2], *rdev[2];
    float *h = malloc(lens[1] * sizeof *h);
    if (!h) die("out of memory");
    tf_comm_request *sreq[2], *rreq[2];
    tf_error err = {0};
    for (int k = 0; k < 2; k++) {
        sdev[k] = dev_alloc(vt, lens[k] * sizeof(float));
        rdev[k] = dev_alloc(vt, lens[k] * sizeof(float));
        fill(h, TF_DTYPE_F32, lens[k], rank_ + 10 * k);
        to_dev(vt, sdev[k], h, lens[k] * sizeof(float));
    }
    for (int k = 0; k < 2; k++) {
        tf_status st = cvt->send(s->c, sdev[k], lens[k], TF_DTYPE_F32, next, &sreq[k], &err);
        check(st == TF_OK, "%s: send %d to rank %d: %s", s->name, k, next, err.msg);
        if (st) die("cannot continue");
    }
    for (int k = 0; k < 2; k++) {
        tf_status st = cvt->recv(s->c, rdev[k], lens[k], TF_DTYPE_F32, prev, &rreq[k], &err);
        check(st == TF_OK, "%s: recv %d from rank %d: %s", s->name, k, prev, err.msg);
        if (st) die("cannot continue");
    }
    for (int k = 0; k < 2; k++) {
        tf_status st = cvt->wait(s->c, rreq[k], &err);
        check(st == TF_OK, "%s: wait recv %d: %s", s->name, k, err.msg);
        from_dev(vt, h, rdev[k], lens[k] * sizeof(float));
        size_t bad = lens[k];
        for (size_t i = 0; i < lens[k] && bad == lens[k]; i++)
            if (h[i] != (float)value(prev + 10 * k, i)) bad = i;
        check(bad == lens[k], "%s: message %d from rank %d wrong at element %zu of %zu", s->name, k, prev, bad,
              lens[k]);
        check(cvt->wait(s->c, sreq[k], &err) == TF_OK, "%s: wait send %d: %s", s->name, k, err.msg);
    }
    for (int k = 0; k < 2; k++) {
        vt->free(be, sdev[k], TF_MEM_DEVICE);
        vt->free(be, rdev[k], TF_MEM_DEVICE);
    }
    tf_comm_request *r = NULL;
    float x[4];
    check(cvt->send(s->c, x, 4, TF_DTYPE_F32, rank_, &r, &err) != TF_OK && strstr(err.msg, "is not another rank"),
          "%s: send to itself: %s", s->name, err.msg);
    check(cvt->recv(s->c, x, 4, TF_DTYPE_F32, size_, &r, &err) != TF_OK && strstr(err.msg, "is not another rank"),
          "%s: recv from rank %d: %s", s->name, size_, err.msg);
    check(cvt->send(s->c, NULL, 4, TF_DTYPE_F32, next, &r, &err) != TF_OK && strstr(err.msg, "buffer is NULL"),
          "%s: send of NULL: %s", s->name, err.msg);
    free(h);
}

static void finalize_all(scenario *sc, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sc[i].c) cvt->finalize(sc[i].c);
        sc[i].c = NULL;
        if (sc[i].cfg) tf_config_free(sc[i].cfg);
        sc[i].cfg = NULL;
    }
}

static void mode_collectives(const char *dir)
{
    /* All comms stay open together: finalizing the last one ends MPI. */
    scenario sc[] = {
        {"host", &host_view, "", NULL, NULL},
        {"device", &device_view, "", NULL, NULL},
        {"staged", NULL, "device_buffers = \"staged\";\nchunk_elements = 100000;\n"
                         "progress_thread = false;", NULL, NULL},
    };
    sc[2].bvt = cpu_vt; /* backend-cpu as it is, forced through the staging path */
    size_t n = sizeof sc / sizeof sc[0];
    /* The plugin was opened RTLD_LOCAL: libmpi is not global until init promotes it. */
    check(dlsym(RTLD_DEFAULT, "MPI_Init") == NULL,
          "MPI_Init is global before init: the RTLD_LOCAL case is not being tested");
    for (size_t i = 0; i < n; i++) {
        tf_error err = {0};
        tf_status st = open_comm(&sc[i], rank_, size_, &err);
        check(st == TF_OK, "%s: init: %s", sc[i].name, err.msg);
        if (st) die("cannot continue without a comm");
    }
    check(dlsym(RTLD_DEFAULT, "MPI_Init") != NULL, "libmpi is not global after init");
    for (size_t i = 0; i < n; i++) {
        allreduce_checks(&sc[i], i == 2);
        reduce_checks(&sc[i]);
        sharded_checks(&sc[i]);
        reduce_start_checks(&sc[i]);
        broadcast_checks(&sc[i]);
        barrier_checks(&sc[i], dir);
        argument_error_checks(&sc[i]);
        p2p_checks(&sc[i]);
    }
    finalize_all(sc, n);
}

static void mode_errors(void)
{
    char want[256];
    tf_error err = {0};
    scenario bad = {"size", &host_view, "", NULL, NULL};
    tf_status st = open_comm(&bad, rank_, size_ + 2, &err);
    snprintf(want, sizeof want, "comm-mpi: mpirun started %d ranks, but comm.world_size is %d", size_,
             size_ + 2);
    check(st == TF_ERR_CONFIG && strstr(err.msg, want), "world size: status %d '%s'", st, err.msg);
    finalize_all(&bad, 1);

    bad = (scenario){"rank", &host_view, "", NULL, NULL};
    st = open_comm(&bad, (rank_ + 1) % size_, size_, &err);
    snprintf(want, sizeof want, "comm-mpi: MPI says this process is rank %d of %d, but tfcore started it "
             "as rank %d", rank_, size_, (rank_ + 1) % size_);
    check(st == TF_ERR_RUNTIME && strstr(err.msg, want), "rank: status %d '%s'", st, err.msg);
    finalize_all(&bad, 1);

    scenario sc[] = {
        {"good", &device_view, "", NULL, NULL},
        {"cuda-aware", &device_view, "  device_buffers = \"cuda-aware\";", NULL, NULL},
    };
    st = open_comm(&sc[0], rank_, size_, &err);
    check(st == TF_OK, "init after failed inits: %s", err.msg);
    st = open_comm(&sc[1], rank_, size_, &err);
    if (st == TF_OK) {
        printf("test_comm_mpi_driver: rank %d: the MPI library is CUDA-aware: \"cuda-aware\" accepted\n",
               rank_);
    } else {
        check(st == TF_ERR_CONFIG &&
                  strstr(err.msg, "mpi.cfg:2: comm.device_buffers is \"cuda-aware\", but ") &&
                  strstr(err.msg, "is not CUDA-aware"),
              "cuda-aware on a library that is not: status %d '%s'", st, err.msg);
    }
    finalize_all(sc, 2);

    /* MPI was finalized with the last comm: it cannot start again. */
    scenario again = {"again", &host_view, "", NULL, NULL};
    st = open_comm(&again, rank_, size_, &err);
    check(st == TF_ERR_RUNTIME && strstr(err.msg, "MPI was already finalized in this process"),
          "init after finalize: status %d '%s'", st, err.msg);
    finalize_all(&again, 1);
}

/* The root sends 8 bytes, the others expect 4: MPI_ERR_TRUNCATE on the receivers. */
static void mode_mpi_error(void)
{
    scenario s = {"mpi-error", &host_view, "", NULL, NULL};
    tf_error err = {0};
    if (open_comm(&s, rank_, size_, &err)) die("init: %s", err.msg);
    unsigned char b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tf_status st = cvt->broadcast(s.c, b, rank_ == 0 ? 8 : 4, TF_DTYPE_U8, 0, &err);
    if (rank_ != 0) {
        char want[128];
        snprintf(want, sizeof want, "comm-mpi: rank %d of %d: MPI_Ibcast of 4 bytes (U8) from root 0 "
                 "(bytes 0..3) failed: ", rank_, size_);
        check(st == TF_ERR_RUNTIME && strstr(err.msg, want) && strstr(err.msg, "truncat") &&
                  !strchr(err.msg, '\n'),
              "truncated broadcast: status %d '%s'", st, err.msg);
        printf("test_comm_mpi_driver: rank %d: the error line: %s\n", rank_, err.msg);
    }
    check(cvt->barrier(s.c, &err) == TF_OK, "barrier after the error: %s", err.msg);
    finalize_all(&s, 1);
}

static void mode_abort(void)
{
    scenario s = {"abort", &host_view, "", NULL, NULL};
    tf_error err = {0};
    if (open_comm(&s, rank_, size_, &err)) die("init: %s", err.msg);
    if (cvt->barrier(s.c, &err)) die("barrier: %s", err.msg);
    int last = size_ - 1;
    if (rank_ == last) {
        usleep(200000);
        char why[64];
        snprintf(why, sizeof why, "rank %d failed on purpose (test)", rank_);
        cvt->abort(s.c, why);
        die("abort returned");
    }
    float x[4];
    cvt->broadcast(s.c, x, 4, TF_DTYPE_F32, last, &err); /* never completes: rank `last` aborts */
    die("broadcast returned after the root aborted: %s", err.msg);
}

/* comm.timeout_s bounds reduce, broadcast and barrier too: with the last rank
 * never joining, each gives up on rank 0 after timeout_s (1 s) + the 2 s
 * grace, with the timeout's line; then rank 0 ends the job (abort). */
static double now_s(void);

static void mode_bounded(void)
{
    scenario s = {"bounded", &host_view, "timeout_s = 1.0;", NULL, NULL};
    tf_error err = {0};
    if (open_comm(&s, rank_, size_, &err)) die("init: %s", err.msg);
    int last = size_ - 1;
    if (rank_ == last) { /* stalled: the others' collectives never complete */
        sleep(60);
        die("rank %d was not stopped by the abort", rank_);
    }
    static float x[4] = {1, 2, 3, 4}; /* MPI keeps the abandoned requests: static memory */
    const char *ops[] = {"barrier", "broadcast", "reduce"};
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        tf_status st = i == 0   ? cvt->barrier(s.c, &err)
                       : i == 1 ? cvt->broadcast(s.c, x, 4, TF_DTYPE_F32, last, &err)
                                : cvt->reduce(s.c, x, 4, TF_DTYPE_F32, TF_REDUCE_SUM, 0, &err); /* the root waits */
        double took = now_s() - t0;
        check(st == TF_ERR_RUNTIME && strstr(err.msg, "did not finish in 1 s (comm.timeout_s, and 2 s more)") &&
                  took >= 2.9 && took < 8,
              "%s with rank %d absent: status %d after %.1f s: '%s'", ops[i], last, st, took, err.msg);
        printf("test_comm_mpi_driver: rank %d: %s gave up after %.1f s: %s\n", rank_, ops[i], took, err.msg);
    }
    printf("test_comm_mpi_driver: rank %d %s: %d passed, %d failed\n", rank_, mode_, passed, failed);
    fflush(stdout);
    cvt->abort(s.c, "bounded: done");
    die("abort returned");
}

/* MPI started by the application (at MPI_THREAD_SINGLE) before the plugin:
 * the plugin uses it, turns its progress thread off (it needs
 * MPI_THREAD_SERIALIZED), and leaves MPI_Finalize to whoever started MPI.
 * The driver does not link MPI: it takes the functions from the plugin's
 * own scope, where libmpi is. */
static void mode_preinit(void)
{
    const tf_loaded_plugin *p = tf_registry_find(reg, TF_KIND_COMM, "mpi");
    int (*init_thread)(int *, char ***, int, int *) =
        (int (*)(int *, char ***, int, int *))dlsym(p->handle, "MPI_Init_thread");
    int (*finalized)(int *) = (int (*)(int *))dlsym(p->handle, "MPI_Finalized");
    int (*finalize)(void) = (int (*)(void))dlsym(p->handle, "MPI_Finalize");
    if (!init_thread || !finalized || !finalize) die("MPI functions not found through the plugin");
    int provided = -1;
    if (init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) die("MPI_Init_thread");

    scenario s = {"preinit", &host_view, "progress_thread = true;", NULL, NULL};
    tf_error err = {0};
    tf_status st = open_comm(&s, rank_, size_, &err);
    check(st == TF_OK, "init with MPI already running: %s", err.msg);
    if (st) die("cannot continue");
    allreduce_round(&s, 1);
    finalize_all(&s, 1);
    int done = 1;
    finalized(&done);
    check(!done, "the plugin finalized MPI that the application had started");
    check(finalize() == MPI_SUCCESS, "the application's MPI_Finalize failed");
}

/* --- overlap measurement (README.md) -------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Stand-in for backward compute: about `seconds` of arithmetic on one core. */
static volatile double sink;
static void compute(double seconds)
{
    double t0 = now_s(), x = 1.0;
    while (now_s() - t0 < seconds)
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1e-9;
    sink = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over reps of: blocking all-reduce of the buckets, and the time left
 * to wait after `per_bucket` seconds of compute between starts. */
static void overlap_run(scenario *s, int nb, size_t floats, double per_bucket, int reps)
{
    float *buf[64];
    for (int b = 0; b < nb; b++) buf[b] = dev_alloc(s->bvt, floats * sizeof(float));
    double blocking[32], exposed[32], total[32];
    tf_error err = {0};
    tf_comm_request *req[64];
    for (int r = 0; r < reps; r++) {
        cvt->barrier(s->c, &err);
        double t0 = now_s();
        for (int b = 0; b < nb; b++) {
            if (cvt->allreduce_start(s->c, buf[b], floats, TF_DTYPE_F32, TF_REDUCE_AVG, &req[b], &err) ||
                cvt->wait(s->c, req[b], &err))
                die("overlap: %s", err.msg);
        }
        blocking[r] = now_s() - t0;
        cvt->barrier(s->c, &err);
        t0 = now_s();
        for (int b = 0; b < nb; b++) {
            compute(per_bucket);
            if (cvt->allreduce_start(s->c, buf[b], floats, TF_DTYPE_F32, TF_REDUCE_AVG, &req[b], &err))
                die("overlap: %s", err.msg);
        }
        compute(per_bucket); /* the rest of backward after the last bucket */
        double t1 = now_s();
        for (int b = 0; b < nb; b++)
            if (cvt->wait(s->c, req[b], &err)) die("overlap: %s", err.msg);
        exposed[r] = now_s() - t1;
        total[r] = now_s() - t0;
    }
    qsort(blocking, (size_t)reps, sizeof(double), cmp_double);
    qsort(exposed, (size_t)reps, sizeof(double), cmp_double);
    qsort(total, (size_t)reps, sizeof(double), cmp_double);
    if (rank_ == 0)
        printf("overlap %-22s %d ranks, %d buckets x %.1f MB, compute %.0f ms/bucket: all-reduce alone "
               "%.1f ms, left to wait after compute %.1f ms (%.0f%% hidden), step %.1f ms (median of %d)\n",
               s->name, size_, nb, (double)floats * 4 / 1e6, per_bucket * 1e3, blocking[reps / 2] * 1e3,
               exposed[reps / 2] * 1e3,
               100.0 * (1.0 - exposed[reps / 2] / blocking[reps / 2]), total[reps / 2] * 1e3, reps);
    for (int b = 0; b < nb; b++) s->bvt->free(be, buf[b], TF_MEM_DEVICE);
}

static void mode_overlap(int argc, char **argv)
{
    int nb = argc > 2 ? atoi(argv[2]) : 4;
    double mb = argc > 3 ? atof(argv[3]) : 25.0;
    double ms = argc > 4 ? atof(argv[4]) : 40.0;
    int reps = argc > 5 ? atoi(argv[5]) : 7;
    if (nb < 1 || nb > 64 || mb <= 0 || reps < 1 || reps > 32) die("overlap: bad arguments");
    size_t floats = (size_t)(mb * 1e6 / 4);
    scenario sc[] = {
        {"calls-only", &host_view, "progress_thread = false;", NULL, NULL},
        {"thread-50us", &host_view, "progress_thread = true;\nprogress_interval_us = 50;", NULL, NULL},
        {"thread-1000us", &host_view, "progress_thread = true;\nprogress_interval_us = 1000;", NULL, NULL},
    };
    size_t n = sizeof sc / sizeof sc[0];
    tf_error err = {0};
    for (size_t i = 0; i < n; i++)
        if (open_comm(&sc[i], rank_, size_, &err)) die("init: %s", err.msg);
    for (size_t i = 0; i < n; i++) overlap_run(&sc[i], nb, floats, ms / 1e3, reps);
    finalize_all(sc, n);
    passed++;
}

int main(int argc, char **argv)
{
    rank_ = env_int("OMPI_COMM_WORLD_RANK");
    size_ = env_int("OMPI_COMM_WORLD_SIZE");
    if (argc < 2) die("usage: %s collectives DIR | errors | mpi-error | abort | bounded | preinit | overlap", argv[0]);
    mode_ = argv[1];
    if (size_ < 2) die("run me with at least 2 ranks");
    load_plugins();
    make_views();
    if (strcmp(mode_, "collectives") == 0 && argc > 2) mode_collectives(argv[2]);
    else if (strcmp(mode_, "errors") == 0) mode_errors();
    else if (strcmp(mode_, "mpi-error") == 0) mode_mpi_error();
    else if (strcmp(mode_, "abort") == 0) mode_abort();
    else if (strcmp(mode_, "bounded") == 0) mode_bounded();
    else if (strcmp(mode_, "preinit") == 0) mode_preinit();
    else if (strcmp(mode_, "overlap") == 0) mode_overlap(argc, argv);
    else die("unknown mode '%s'", mode_);
    unload_plugins();
    printf("test_comm_mpi_driver: rank %d %s: %d passed, %d failed\n", rank_, mode_, passed, failed);
    return failed ? 1 : 0;
}
