/* bench_allreduce.c — timings of dp-master's collectives on backend-cpu
 * replicas: allreduce with each host-memory algorithm ("slices",
 * "reduce-broadcast") and with forced staging, and the DataParallel step
 * (reduce to rank 0, then broadcast from it).
 *
 *   top_builddir=$PWD plugins/comm-dp-master/bench_allreduce [N [COUNT [REPS [THREADS]]]]
 *
 * N replica threads (default 2), COUNT f32 elements (default 10000000),
 * REPS timed repetitions after one warm-up (default 10), THREADS backend-cpu
 * threads per replica (default 1). Prints the median time of each. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"
#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"

#define MAXN 64

static const tf_backend_vtable *bvt;
static const tf_comm_vtable *cvt;

/* backend-cpu's memory is host memory; a backend-cpu built before it filled
 * the ABI 1.1 host_memory slot does not say so, and dp-master would take the
 * staging path for everything. This copy of its vtable says so. */
static tf_backend_vtable cpu_says_host;
static bool says_host(tf_backend *be) { return true; }

typedef struct job {
    int n, reps, what; /* what: 0 allreduce, 1 reduce + broadcast */
    size_t count;
    tf_comm *comm[MAXN];
    float *buf[MAXN];  /* [count] each */
    double *times;     /* [reps], filled by rank 0 */
    int failed;
} job;

typedef struct arg {
    job *j;
    int rank;
} arg;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *p)
{
    arg *a = p;
    job *j = a->j;
    tf_comm *c = j->comm[a->rank];
    tf_error err = {0};
    for (int rep = -1; rep < j->reps; rep++) {
        if (cvt->barrier(c, &err)) goto fail;
        double t0 = now();
        if (j->what == 0) {
            tf_comm_request *req = NULL;
            if (cvt->allreduce_start(c, j->buf[a->rank], j->count, TF_DTYPE_F32, TF_REDUCE_SUM,
                                     &req, &err) ||
                cvt->wait(c, req, &err))
                goto fail;
        } else {
            if (cvt->reduce(c, j->buf[a->rank], j->count, TF_DTYPE_F32, TF_REDUCE_SUM, 0, &err) ||
                cvt->broadcast(c, j->buf[a->rank], j->count, TF_DTYPE_F32, 0, &err))
                goto fail;
        }
        if (cvt->barrier(c, &err)) goto fail;
        if (a->rank == 0 && rep >= 0) j->times[rep] = now() - t0;
    }
    return NULL;
fail:
    fprintf(stderr, "rank %d: %s\n", a->rank, err.msg);
    cvt->abort(c, "benchmark failed");
    j->failed = 1;
    return NULL;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int run(const char *label, const char *cfg_text, int what, int n, size_t count, int reps,
               int threads)
{
    tf_error err = {0};
    tf_config *cfg = NULL;
    if (tf_config_load_string(&cfg, cfg_text, "bench.cfg", NULL, &err)) goto fail;
    job j = {.n = n, .reps = reps, .what = what, .count = count};
    j.times = calloc((size_t)reps, sizeof *j.times);
    tf_backend *be[MAXN] = {0};
    void *cell = NULL;
    for (int r = 0; r < n; r++) {
        tf_backend_open_args oa = {sizeof oa, 0, threads, 1, NULL, 1};
        if (bvt->open(&oa, &be[r], &err)) goto fail;
        void *p = NULL;
        if (bvt->alloc(be[r], count * sizeof(float), TF_MEM_DEVICE, &p, &err)) goto fail;
        j.buf[r] = p;
        for (size_t i = 0; i < count; i++) j.buf[r][i] = (float)(r + (int)(i % 7));
        tf_comm_init_args ia = {.size = sizeof ia, .section = tf_config_section(cfg, "comm"),
                                .rank = r, .world_size = n, .local_rank = r, .backend = bvt,
                                .be = be[r], .shared = &cell, .local_world_size = n};
        if (cvt->init(&ia, &j.comm[r], &err)) goto fail;
    }
    pthread_t t[MAXN];
    arg args[MAXN];
    for (int r = 0; r < n; r++) {
        args[r] = (arg){&j, r};
        pthread_create(&t[r], NULL, worker, &args[r]);
    }
    for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
    if (!j.failed) {
        qsort(j.times, (size_t)reps, sizeof *j.times, cmp);
        double med = j.times[reps / 2];
        double gb = (double)count * sizeof(float) / 1e9;
        printf("%-36s N=%d count=%zu threads/replica=%d: median %.2f ms (min %.2f), "
               "%.2f GB/s of buffer per replica\n",
               label, n, count, threads, 1e3 * med, 1e3 * j.times[0], gb / med);
    }
    for (int r = 0; r < n; r++) {
        cvt->finalize(j.comm[r]);
        bvt->free(be[r], j.buf[r], TF_MEM_DEVICE);
        bvt->close(be[r]);
    }
    free(j.times);
    tf_config_free(cfg);
    return j.failed;
fail:
    fprintf(stderr, "bench_allreduce: %s\n", err.msg);
    return 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    size_t count = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 10000000;
    int reps = argc > 3 ? atoi(argv[3]) : 10;
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    if (n < 1 || n > MAXN || reps < 1 || threads < 1) {
        fprintf(stderr, "usage: bench_allreduce [N [COUNT [REPS [THREADS]]]]\n");
        return 2;
    }
    const char *top = getenv("top_builddir");
    if (!top) top = ".";
    char d1[4096], d2[4096];
    snprintf(d1, sizeof d1, "%s/plugins/backend-cpu/.libs", top);
    snprintf(d2, sizeof d2, "%s/plugins/comm-dp-master/.libs", top);
    const char *dirs[] = {d1, d2};
    tf_registry *reg = NULL;
    tf_error err = {0};
    if (tf_registry_scan(&reg, dirs, 2, &err)) {
        fprintf(stderr, "bench_allreduce: %s\n", err.msg);
        return 1;
    }
    const tf_loaded_plugin *pb = tf_registry_find(reg, TF_KIND_BACKEND, "cpu");
    const tf_loaded_plugin *pc = tf_registry_find(reg, TF_KIND_COMM, "dp-master");
    if (!pb || !pc) {
        fprintf(stderr, "bench_allreduce: backend-cpu or dp-master not found under %s\n", top);
        tf_registry_free(reg);
        return 1;
    }
    bvt = pb->desc->vtable;
    cvt = pc->desc->vtable;
    if (!TF_HAS(bvt, host_memory)) {
        size_t sz = bvt->size < sizeof cpu_says_host ? bvt->size : sizeof cpu_says_host;
        memcpy(&cpu_says_host, bvt, sz);
        cpu_says_host.size = TF_VTABLE_SIZE(tf_backend_vtable);
        cpu_says_host.host_memory = says_host;
        bvt = &cpu_says_host;
        printf("(backend-cpu has no host_memory slot: using a copy of its vtable that has one)\n");
    }
    int bad = 0;
    bad |= run("allreduce, slices", "comm = { allreduce = \"slices\"; };", 0, n, count, reps,
               threads);
    bad |= run("allreduce, reduce-broadcast", "comm = { allreduce = \"reduce-broadcast\"; };", 0,
               n, count, reps, threads);
    bad |= run("allreduce, forced staging", "comm = { force_staging = true; };", 0, n, count,
               reps, threads);
    bad |= run("reduce + broadcast (DataParallel step)", "comm = { };", 1, n, count, reps,
               threads);
    tf_registry_free(reg);
    return bad;
}
