/* test_nccl.c — the NCCL stand-in (nccl.c) with 2 and 4 ranks as forked
 * processes (and 2 ranks as threads of one process): all-reduce of every
 * type and op against a reference computed here, broadcast and reduce from
 * every root, in place and out of place, a long mixed sequence on one
 * stream, and the failures that must be errors within seconds, not hangs:
 * mismatched collectives, ncclCommAbort by one rank, a killed rank, a
 * missing rank at init, disagreeing nranks, invalid arguments. Point to
 * point: a ring of sends and receives in groups (every type, larger than the
 * ring buffer, several messages to one peer in order), a pipeline's pattern
 * that needs groups, lone sends that block the stream (and end with an error
 * after the no-progress limit), mismatched messages, an abort while a
 * receive waits, and invalid calls and groups.
 * Prints `PASS: name` / `FAIL: name: why` per case; exits 1 on a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define RANK_ALARM_S 60 /* a rank still running after this is a hang: SIGALRM fails it */

static int failures;

/* In a rank: one line to stderr naming the rank, and a failed result. */
static int fail(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return fail(rank, "%s: %s", #call, cudaGetErrorString(e_));         \
    } while (0)
#define NC(call)                                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            return fail(rank, "%s: %s (%s)", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
    } while (0)

/* --- ranks as processes ------------------------------------------------------- */

typedef int (*rank_fn)(int rank, int n, ncclUniqueId id);

/* Forks n ranks running fn; `killed` is the rank expected to die of SIGKILL (-1: none). */
static void run_ranks(const char *name, int n, rank_fn fn, int killed)
{
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
        printf("FAIL: %s: ncclGetUniqueId\n", name);
        failures++;
        return;
    }
    fflush(stdout);
    pid_t pids[8];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(RANK_ALARM_S);
            _exit(fn(r, n, id));
        }
    }
    char why[256] = "";
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        bool ok = r == killed ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                              : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok && !why[0]) {
            if (WIFSIGNALED(st))
                snprintf(why, sizeof why, "rank %d ended by signal %d%s", r, WTERMSIG(st),
                         WTERMSIG(st) == SIGALRM ? " (a hang)" : "");
            else
                snprintf(why, sizeof why, "rank %d exited with %d", r, WEXITSTATUS(st));
        }
    }
    if (why[0]) {
        printf("FAIL: %s: %s\n", name, why);
        failures++;
    } else {
        printf("PASS: %s\n", name);
    }
    fflush(stdout);
}

typedef struct rank_ctx {
    cudaStream_t s;
    ncclComm_t comm;
} rank_ctx;

/* Rank r on emulated device r (TFCORE_EMU_DEVICES=4): the threads of one
 * process must not share a device, as with real NCCL. */
static int rank_setup(int rank, int n, ncclUniqueId id, rank_ctx *x)
{
    CU(cudaSetDevice(rank));
    CU(cudaStreamCreateWithFlags(&x->s, cudaStreamNonBlocking));
    NC(ncclCommInitRank(&x->comm, n, id, rank));
    return 0;
}

static int rank_teardown(int rank, rank_ctx *x)
{
    CU(cudaStreamSynchronize(x->s));
    NC(ncclCommFinalize(x->comm));
    NC(ncclCommDestroy(x->comm));
    CU(cudaStreamDestroy(x->s));
    return 0;
}

/* Wait up to `limit` s for an asynchronous error; returns it (ncclSuccess: none came). */
static ncclResult_t await_async_error(ncclComm_t comm, double limit, double *took)
{
    double t0 = now_s();
    ncclResult_t a = ncclSuccess;
    while (now_s() - t0 < limit) {
        if (ncclCommGetAsyncError(comm, &a) != ncclSuccess) return ncclInternalError;
        if (a != ncclSuccess) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    *took = now_s() - t0;
    return a;
}

/* --- the reference ----------------------------------------------------------- */

typedef struct tinfo {
    ncclDataType_t t;
    size_t size;
    bool is_float;
    const char *name;
} tinfo;

static const tinfo TYPES[] = {
    {ncclFloat32, 4, true, "f32"},  {ncclFloat16, 2, true, "f16"},  {ncclBfloat16, 2, true, "bf16"},
    {ncclFloat64, 8, true, "f64"},  {ncclInt32, 4, false, "i32"},   {ncclUint8, 1, false, "u8"},
    {ncclInt64, 8, false, "i64"},   {ncclInt8, 1, false, "i8"},
};

/* bf16 by round-to-nearest-even of the significand to 8 bits (finite, normal
 * inputs): written differently from the stand-in's bit arithmetic. */
static uint16_t ref_to_bf16(float f)
{
    if (f == 0.0f) return signbit(f) ? 0x8000 : 0;
    int e;
    double m = frexp((double)f, &e);
    float r = (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
    uint32_t b;
    memcpy(&b, &r, 4);
    return (uint16_t)(b >> 16);
}

static float ref_from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Element i of rank r's input, as a double value the type can hold. */
static double gen(const tinfo *ti, int r, size_t i)
{
    uint64_t h = (uint64_t)(r + 1) * 2654435761u + (uint64_t)i * 40503u;
    h ^= h >> 13;
    if (!ti->is_float) return (double)(int64_t)(h % 200) - 100; /* fits i8 after the sums below */
    return ((double)(h % 20001) - 10000.0) / 997.0;
}

static void store(const tinfo *ti, void *p, size_t i, double v)
{
    switch (ti->t) {
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat16: { _Float16 h = (_Float16)(float)v; memcpy((char *)p + 2 * i, &h, 2); break; }
    case ncclBfloat16: ((uint16_t *)p)[i] = ref_to_bf16((float)v); break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: break;
    }
}

static void fill(const tinfo *ti, void *p, int r, size_t count)
{
    for (size_t i = 0; i < count; i++) store(ti, p, i, gen(ti, r, i));
}

/* The reference result of op over ranks 0..n-1 (rank order; 16-bit types in
 * f32, rounded once; integers with wrapping sums). */
static void reference(const tinfo *ti, ncclRedOp_t op, int n, size_t count, void *out)
{
    for (size_t i = 0; i < count; i++) {
        if (ti->is_float) {
            double acc = 0;
            float accf = 0;
            for (int r = 0; r < n; r++) {
                double v = gen(ti, r, i);
                float vf;
                if (ti->t == ncclFloat16) vf = (float)(_Float16)(float)v;
                else if (ti->t == ncclBfloat16) vf = ref_from_bf16(ref_to_bf16((float)v));
                else vf = (float)v;
                if (r == 0) { acc = v; accf = vf; continue; }
                switch (op) {
                case ncclSum: case ncclAvg: acc += v; accf += vf; break;
                case ncclProd: acc *= v; accf *= vf; break;
                case ncclMax: acc = v > acc ? v : acc; accf = vf > accf ? vf : accf; break;
                case ncclMin: acc = v < acc ? v : acc; accf = vf < accf ? vf : accf; break;
                default: break;
                }
            }
            if (op == ncclAvg) { acc /= n; accf /= (float)n; }
            store(ti, out, i, ti->t == ncclFloat64 ? acc : (double)accf);
        } else {
            int64_t acc = 0;
            for (int r = 0; r < n; r++) {
                int64_t v = (int64_t)gen(ti, r, i);
                if (ti->t == ncclUint8) v = (uint8_t)v;
                if (r == 0) { acc = v; continue; }
                switch (op) {
                case ncclSum: case ncclAvg: acc += v; break;
                case ncclProd: acc *= v; break;
                case ncclMax: acc = v > acc ? v : acc; break;
                case ncclMin: acc = v < acc ? v : acc; break;
                default: break;
                }
            }
            if (ti->t == ncclUint8 && (op == ncclSum || op == ncclAvg || op == ncclProd)) acc = (uint8_t)acc;
            if (ti->t == ncclInt8 && (op == ncclSum || op == ncclAvg || op == ncclProd)) acc = (int8_t)acc;
            if (op == ncclAvg) acc /= n;
            store(ti, out, i, (double)acc);
        }
    }
}

/* Uploads rank r's input, returns the device buffer. */
static void *upload(const tinfo *ti, int r, size_t count)
{
    void *h = malloc(count * ti->size + 1), *d = NULL;
    fill(ti, h, r, count);
    if (cudaMalloc(&d, count * ti->size + 1) != cudaSuccess ||
        cudaMemcpy(d, h, count * ti->size, cudaMemcpyHostToDevice) != cudaSuccess)
        d = NULL;
    free(h);
    return d;
}

static int compare(int rank, const char *what, const tinfo *ti, const void *dev, const void *want,
                   size_t count)
{
    void *got = malloc(count * ti->size + 1);
    CU(cudaMemcpy(got, dev, count * ti->size, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++)
        if (memcmp((char *)got + i * ti->size, (const char *)want + i * ti->size, ti->size) != 0) {
            free(got);
            return fail(rank, "%s: element %zu of %zu differs from the reference", what, i, count);
        }
    free(got);
    return 0;
}

/* --- the cases ------------------------------------------------------------------ */

static const size_t COUNTS[] = {1, 7, 1001, 300007 /* f32: more than one 1 MiB chunk */};

static int case_allreduce(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    for (size_t t = 0; t < sizeof TYPES / sizeof *TYPES; t++) {
        const tinfo *ti = &TYPES[t];
        for (int op = 0; op < ncclNumOps; op++) {
            if (op == ncclProd && !ti->is_float && ti->size < 4) continue; /* i8/u8 products: kept for sums */
            for (size_t c = 0; c < sizeof COUNTS / sizeof *COUNTS; c++) {
                size_t count = COUNTS[c];
                if (count > 100000 && (ti->t != ncclFloat32 || op > ncclSum)) continue;
                char what[96];
                snprintf(what, sizeof what, "allreduce op %d of %zu %s", op, count, ti->name);
                void *a = upload(ti, rank, count), *out = NULL, *want = malloc(count * ti->size);
                if (!a || cudaMalloc(&out, count * ti->size) != cudaSuccess)
                    return fail(rank, "%s: cudaMalloc", what);
                reference(ti, (ncclRedOp_t)op, n, count, want);
                NC(ncclAllReduce(a, out, count, ti->t, (ncclRedOp_t)op, x.comm, x.s));
                NC(ncclAllReduce(a, a, count, ti->t, (ncclRedOp_t)op, x.comm, x.s)); /* in place */
                CU(cudaStreamSynchronize(x.s));
                if (compare(rank, what, ti, out, want, count)) return 1;
                strcat(what, " in place");
                if (compare(rank, what, ti, a, want, count)) return 1;
                cudaFree(a);
                cudaFree(out);
                free(want);
            }
        }
    }
    return rank_teardown(rank, &x);
}

static int case_broadcast_reduce(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    const tinfo *f32 = &TYPES[0], *u8 = &TYPES[5], *f16 = &TYPES[1];
    for (int root = 0; root < n; root++) {
        const tinfo *tis[] = {u8, f32, f16};
        const size_t counts[] = {1025, 300007, 77};
        for (int k = 0; k < 3; k++) {
            const tinfo *ti = tis[k];
            size_t count = counts[k];
            void *a = upload(ti, rank, count), *out = upload(ti, rank, count);
            void *want = malloc(count * ti->size);
            fill(ti, want, root, count);
            if (!a || !out) return fail(rank, "cudaMalloc");
            NC(ncclBroadcast(a, out, count, ti->t, root, x.comm, x.s));
            NC(ncclBroadcast(a, a, count, ti->t, root, x.comm, x.s)); /* in place */
            CU(cudaStreamSynchronize(x.s));
            char what[96];
            snprintf(what, sizeof what, "broadcast of %zu %s from root %d", count, ti->name, root);
            if (compare(rank, what, ti, out, want, count) || compare(rank, what, ti, a, want, count))
                return 1;
            /* reduce to root: the root gets the sum, the others' recvbuff is untouched */
            void *b = upload(ti, rank, count), *r_out = upload(ti, rank, count);
            if (ti->t == ncclFloat32 || ti->t == ncclFloat16) {
                NC(ncclReduce(b, r_out, count, ti->t, ncclSum, root, x.comm, x.s));
                CU(cudaStreamSynchronize(x.s));
                if (rank == root) reference(ti, ncclSum, n, count, want);
                else fill(ti, want, rank, count);
                snprintf(what, sizeof what, "reduce of %zu %s to root %d", count, ti->name, root);
                if (compare(rank, what, ti, r_out, want, count)) return 1;
            }
            cudaFree(a);
            cudaFree(out);
            cudaFree(b);
            cudaFree(r_out);
            free(want);
        }
    }
    return rank_teardown(rank, &x);
}

/* reduce-scatter (sum, avg) and all-gather, out of place and in place, f32
 * (one block above the 1 MiB staging chunk) and f16. */
static int case_scatter_gather(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    const tinfo *tis[] = {&TYPES[0], &TYPES[1]};
    const size_t counts[] = {1, 7, 300007};
    for (int k = 0; k < 2; k++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            const tinfo *ti = tis[k];
            size_t count = counts[c], all = count * (size_t)n, es = ti->size;
            if (count > 100000 && ti->t != ncclFloat32) continue;
            char what[112];
            for (int op = 0; op < 2; op++) {
                ncclRedOp_t o = op ? ncclAvg : ncclSum;
                void *a = upload(ti, rank, all), *out = NULL, *want = malloc(all * es);
                if (!a || !want || cudaMalloc(&out, count * es) != cudaSuccess) return fail(rank, "cudaMalloc");
                reference(ti, o, n, all, want);
                NC(ncclReduceScatter(a, out, count, ti->t, o, x.comm, x.s));
                NC(ncclReduceScatter(a, (char *)a + (size_t)rank * count * es, count, ti->t, o, x.comm, x.s));
                CU(cudaStreamSynchronize(x.s));
                snprintf(what, sizeof what, "reduce-scatter %s of %zu %s a rank", op ? "avg" : "sum", count, ti->name);
                if (compare(rank, what, ti, out, (char *)want + (size_t)rank * count * es, count)) return 1;
                strcat(what, " in place");
                if (compare(rank, what, ti, (char *)a + (size_t)rank * count * es,
                            (char *)want + (size_t)rank * count * es, count))
                    return 1;
                cudaFree(a);
                cudaFree(out);
                free(want);
            }
            /* all-gather: block r of the output is rank r's input */
            void *mine = upload(ti, rank, count), *out = NULL, *in_place = NULL, *want = malloc(all * es);
            if (!mine || !want || cudaMalloc(&out, all * es) != cudaSuccess || cudaMalloc(&in_place, all * es) != cudaSuccess)
                return fail(rank, "cudaMalloc");
            for (int r = 0; r < n; r++) fill(ti, (char *)want + (size_t)r * count * es, r, count);
            CU(cudaMemcpy((char *)in_place + (size_t)rank * count * es, (char *)want + (size_t)rank * count * es,
                          count * es, cudaMemcpyHostToDevice));
            NC(ncclAllGather(mine, out, count, ti->t, x.comm, x.s));
            NC(ncclAllGather((char *)in_place + (size_t)rank * count * es, in_place, count, ti->t, x.comm, x.s));
            CU(cudaStreamSynchronize(x.s));
            snprintf(what, sizeof what, "all-gather of %zu %s a rank", count, ti->name);
            if (compare(rank, what, ti, out, want, all)) return 1;
            strcat(what, " in place");
            if (compare(rank, what, ti, in_place, want, all)) return 1;
            cudaFree(mine);
            cudaFree(out);
            cudaFree(in_place);
            free(want);
        }
    return rank_teardown(rank, &x);
}

/* 24 collectives of varying kind, count and root queued at once, one sync. */
static int case_sequence(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    enum { N = 24 };
    const tinfo *ti = &TYPES[0];
    void *bufs[N];
    size_t counts[N];
    for (int k = 0; k < N; k++) {
        counts[k] = 3 + 97 * (size_t)k;
        bufs[k] = upload(ti, rank, counts[k]);
        if (!bufs[k]) return fail(rank, "cudaMalloc");
        switch (k % 3) {
        case 0: NC(ncclAllReduce(bufs[k], bufs[k], counts[k], ti->t, ncclAvg, x.comm, x.s)); break;
        case 1: NC(ncclBroadcast(bufs[k], bufs[k], counts[k], ti->t, k % n, x.comm, x.s)); break;
        case 2: NC(ncclReduce(bufs[k], bufs[k], counts[k], ti->t, ncclMax, k % n, x.comm, x.s)); break;
        }
    }
    CU(cudaStreamSynchronize(x.s));
    for (int k = 0; k < N; k++) {
        void *want = malloc(counts[k] * ti->size);
        if (k % 3 == 0) reference(ti, ncclAvg, n, counts[k], want);
        else if (k % 3 == 1) fill(ti, want, k % n, counts[k]);
        else if (rank == k % n) reference(ti, ncclMax, n, counts[k], want);
        else fill(ti, want, rank, counts[k]);
        char what[64];
        snprintf(what, sizeof what, "collective %d of the sequence", k);
        if (compare(rank, what, ti, bufs[k], want, counts[k])) return 1;
        free(want);
        cudaFree(bufs[k]);
    }
    return rank_teardown(rank, &x);
}

/* Every rank sees `want` as its asynchronous error within 10 s, with a
 * ncclGetLastError text containing `words`; the stream then drains. The
 * communicator is then destroyed (a peer's ncclCommDestroy is no error for a
 * rank that has not yet looked) or, with `abort`, aborted (the others may
 * see that abort before their own error). */
static int expect_async_end(int rank, rank_ctx *x, ncclResult_t want, const char *words, bool abort)
{
    double took = 0;
    ncclResult_t a = await_async_error(x->comm, 10, &took);
    if (a != want)
        return fail(rank, "asynchronous error %s after %.1f s, want %s", ncclGetErrorString(a), took,
                    ncclGetErrorString(want));
    const char *last = ncclGetLastError(x->comm);
    if (!strstr(last, words)) return fail(rank, "last error \"%s\" does not say \"%s\"", last, words);
    CU(cudaStreamSynchronize(x->s));
    if (abort) NC(ncclCommAbort(x->comm));
    else NC(ncclCommDestroy(x->comm));
    CU(cudaStreamDestroy(x->s));
    return 0;
}

static int expect_async(int rank, rank_ctx *x, ncclResult_t want, const char *words)
{
    return expect_async_end(rank, x, want, words, true);
}

static int case_mismatch_count(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    size_t count = rank == n - 1 ? 12 : 10;
    void *a = upload(&TYPES[0], rank, 12);
    NC(ncclAllReduce(a, a, 4, ncclFloat32, ncclSum, x.comm, x.s)); /* #1 matches */
    NC(ncclAllReduce(a, a, count, ncclFloat32, ncclSum, x.comm, x.s));
    return expect_async_end(rank, &x, ncclInvalidUsage, "collective #2 does not match", false);
}

static int case_mismatch_kind(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 8);
    if (rank == 1) NC(ncclBroadcast(a, a, 8, ncclFloat32, 0, x.comm, x.s));
    else NC(ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, x.comm, x.s));
    return expect_async_end(rank, &x, ncclInvalidUsage, "ncclBroadcast of 8 float32 from root 0", false);
}

static int case_abort(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 100);
    NC(ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, x.comm, x.s));
    if (rank == n - 1) {
        /* its collective may be waiting for the others or not started: both end */
        NC(ncclCommAbort(x.comm));
        CU(cudaStreamSynchronize(x.s));
        CU(cudaStreamDestroy(x.s));
        return 0;
    }
    char words[64];
    snprintf(words, sizeof words, "rank %d aborted", n - 1);
    NC(ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, x.comm, x.s));
    return expect_async(rank, &x, ncclRemoteError, words);
}

static int case_killed(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 100);
    if (rank == n - 1) raise(SIGKILL);
    NC(ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, x.comm, x.s));
    char words[64];
    snprintf(words, sizeof words, "rank %d (pid", n - 1);
    return expect_async(rank, &x, ncclRemoteError, words);
}

static int case_init_missing(int rank, int n, ncclUniqueId id)
{
    (void)n;
    setenv("TFCORE_EMU_NCCL_INIT_TIMEOUT_S", "1", 1);
    CU(cudaSetDevice(0));
    ncclComm_t comm = NULL;
    double t0 = now_s();
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank); /* rank 1 never comes */
    double took = now_s() - t0;
    if (r != ncclSystemError || comm)
        return fail(rank, "init without its peer gave %s, want %s", ncclGetErrorString(r),
                    ncclGetErrorString(ncclSystemError));
    if (took > 5) return fail(rank, "init without its peer took %.1f s", took);
    if (!strstr(ncclGetLastError(NULL), "only 1 of 2 ranks joined"))
        return fail(rank, "last error \"%s\"", ncclGetLastError(NULL));
    return 0;
}

static int case_init_nranks(int rank, int n, ncclUniqueId id)
{
    (void)n;
    setenv("TFCORE_EMU_NCCL_INIT_TIMEOUT_S", "2", 1);
    CU(cudaSetDevice(0));
    ncclComm_t comm = NULL;
    if (rank == 1) usleep(200000); /* rank 0 makes the segment with nranks 2 */
    ncclResult_t r = ncclCommInitRank(&comm, rank == 0 ? 2 : 3, id, rank);
    ncclResult_t want = rank == 0 ? ncclSystemError : ncclInvalidUsage;
    if (r != want)
        return fail(rank, "init with disagreeing nranks gave %s, want %s", ncclGetErrorString(r),
                    ncclGetErrorString(want));
    return 0;
}

static int case_invalid_args(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    float host[4] = {0};
    void *other = NULL;
    CU(cudaSetDevice((rank + 1) % 4));
    CU(cudaMalloc(&other, 16));
    CU(cudaSetDevice(rank));
    void *d = upload(&TYPES[0], rank, 4);
    struct {
        ncclResult_t got;
        const char *what;
    } cases[] = {
        {ncclAllReduce(host, host, 4, ncclFloat32, ncclSum, x.comm, x.s), "a host buffer"},
        {ncclAllReduce(d, d, 5, ncclFloat32, ncclSum, x.comm, x.s), "a count past the allocation"},
        {ncclAllReduce(other, other, 4, ncclFloat32, ncclSum, x.comm, x.s), "another device's buffer"},
        {ncclBroadcast(d, d, 4, ncclFloat32, n, x.comm, x.s), "root == nranks"},
        {ncclAllReduce(d, d, 4, (ncclDataType_t)42, ncclSum, x.comm, x.s), "type 42"},
        {ncclAllReduce(d, d, 4, ncclFloat32, (ncclRedOp_t)9, x.comm, x.s), "op 9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (cases[i].got != ncclInvalidArgument)
            return fail(rank, "%s gave %s, want invalid argument", cases[i].what,
                        ncclGetErrorString(cases[i].got));
    /* nothing was queued: the communicator still works */
    NC(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, x.comm, x.s));
    return rank_teardown(rank, &x);
}


/* --- point to point ------------------------------------------------------------ */

/* Every rank sends K messages (types and sizes vary, one larger than the
 * 256 KiB ring) to the next rank and receives K from the previous one, in
 * one group: to one peer in order; then a lone empty send and receive. */
static int case_p2p_ring(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    enum { K = 4 };
    const tinfo *tis[K] = {&TYPES[0], &TYPES[2], &TYPES[5], &TYPES[0]};
    const size_t counts[K] = {1001, 7, 3, 300007};
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    void *out[K], *in[K];
    for (int k = 0; k < K; k++) {
        out[k] = upload(tis[k], rank * 10 + k, counts[k]);
        if (!out[k] || cudaMalloc(&in[k], counts[k] * tis[k]->size) != cudaSuccess) return fail(rank, "cudaMalloc");
    }
    NC(ncclGroupStart());
    for (int k = 0; k < K; k++) {
        NC(ncclSend(out[k], counts[k], tis[k]->t, next, x.comm, x.s));
        NC(ncclRecv(in[k], counts[k], tis[k]->t, prev, x.comm, x.s));
    }
    NC(ncclGroupEnd());
    /* a group of one, and messages of no elements */
    if (rank % 2 == 0) {
        NC(ncclSend(out[0], 0, ncclFloat32, next, x.comm, x.s));
        NC(ncclRecv(in[0], 0, ncclFloat32, prev, x.comm, x.s));
    } else {
        NC(ncclRecv(in[0], 0, ncclFloat32, prev, x.comm, x.s));
        NC(ncclSend(out[0], 0, ncclFloat32, next, x.comm, x.s));
    }
    CU(cudaStreamSynchronize(x.s));
    for (int k = 0; k < K; k++) {
        void *want = malloc(counts[k] * tis[k]->size);
        fill(tis[k], want, prev * 10 + k, counts[k]);
        char what[64];
        snprintf(what, sizeof what, "message %d from rank %d", k, prev);
        if (compare(rank, what, tis[k], in[k], want, counts[k])) return 1;
        free(want);
        cudaFree(in[k]);
        cudaFree(out[k]);
    }
    return rank_teardown(rank, &x);
}

/* 1F1B between two stages: stage 0 sends activations 0 and 1, then receives
 * gradient 0; stage 1 receives activation 0, sends gradient 0, receives
 * activation 1. Issued as groups {send a0, send a1, recv g0} and {recv a0},
 * {send g0, recv a1} it completes; the data arrive where they belong. */
static int case_p2p_pipeline(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    const tinfo *ti = &TYPES[0];
    size_t count = 70001;
    void *a0 = upload(ti, 100, count), *a1 = upload(ti, 101, count), *g0 = upload(ti, 200, count);
    if (!a0 || !a1 || !g0) return fail(rank, "cudaMalloc");
    if (rank == 0) {
        NC(ncclGroupStart());
        NC(ncclSend(a0, count, ti->t, 1, x.comm, x.s));
        NC(ncclSend(a1, count, ti->t, 1, x.comm, x.s));
        NC(ncclRecv(g0, count, ti->t, 1, x.comm, x.s));
        NC(ncclGroupEnd());
    } else {
        void *want = malloc(count * ti->size);
        fill(ti, want, 100, count);
        CU(cudaMemset(a0, 0, count * ti->size));
        CU(cudaMemset(a1, 0, count * ti->size));
        NC(ncclRecv(a0, count, ti->t, 0, x.comm, x.s));
        NC(ncclGroupStart());
        NC(ncclSend(g0, count, ti->t, 0, x.comm, x.s));
        NC(ncclRecv(a1, count, ti->t, 0, x.comm, x.s));
        NC(ncclGroupEnd());
        CU(cudaStreamSynchronize(x.s));
        if (compare(rank, "activation 0", ti, a0, want, count)) return 1;
        fill(ti, want, 101, count);
        if (compare(rank, "activation 1", ti, a1, want, count)) return 1;
        free(want);
    }
    CU(cudaStreamSynchronize(x.s));
    if (rank == 0) {
        void *want = malloc(count * ti->size);
        fill(ti, want, 200, count);
        if (compare(rank, "gradient 0", ti, g0, want, count)) return 1;
        free(want);
    }
    return rank_teardown(rank, &x);
}

/* Lone calls block the stream until the peer's match: both ranks sending
 * first (not in a group) is the deadlock NCCL documents; here it ends after
 * the no-progress limit with ncclSystemError on both, not a hang. */
static int case_p2p_lone_blocks(int rank, int n, ncclUniqueId id)
{
    (void)n;
    setenv("TFCORE_EMU_NCCL_TIMEOUT_S", "1", 1);
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 16), *b = upload(&TYPES[0], rank, 16);
    NC(ncclSend(a, 16, ncclFloat32, 1 - rank, x.comm, x.s));
    NC(ncclRecv(b, 16, ncclFloat32, 1 - rank, x.comm, x.s));
    /* the first rank at the limit destroys the communicator; the other may
     * see that before its own limit */
    double took = 0;
    ncclResult_t e = await_async_error(x.comm, 10, &took);
    const char *last = ncclGetLastError(x.comm);
    bool own = e == ncclSystemError && strstr(last, "ncclSend of 16 float32 to rank") && strstr(last, "no progress");
    bool peer = e == ncclRemoteError && strstr(last, "destroyed the communicator before the matching call");
    if (!own && !peer) return fail(rank, "asynchronous error %s (\"%s\") after %.1f s", ncclGetErrorString(e), last, took);
    if (took < 0.5) return fail(rank, "the blocked send ended after %.2f s, before the 1 s limit", took);
    CU(cudaStreamSynchronize(x.s));
    NC(ncclCommDestroy(x.comm));
    CU(cudaStreamDestroy(x.s));
    return 0;
}

static int case_p2p_mismatch(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 12);
    if (rank == 0) NC(ncclSend(a, 10, ncclFloat32, 1, x.comm, x.s));
    else NC(ncclRecv(a, 12, ncclFloat32, 0, x.comm, x.s));
    return expect_async_end(rank, &x, ncclInvalidUsage,
                            "rank 0's message #1 to rank 1 is 10 float32, but rank 1's ncclRecv of 12 float32", false);
}

static int case_p2p_abort(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    void *a = upload(&TYPES[0], rank, 100);
    if (rank == 1) {
        usleep(100000); /* rank 0's receive is waiting */
        NC(ncclCommAbort(x.comm));
        CU(cudaStreamDestroy(x.s));
        return 0;
    }
    NC(ncclRecv(a, 100, ncclFloat32, 1, x.comm, x.s));
    /* the receive ends (the stream drains) with rank 1's abort as the error;
     * the line names the ncclRecv when the receive saw the abort first, not
     * when ncclCommGetAsyncError's own look at the peers did (a loaded
     * machine can delay the stream thread past rank 1's 100 ms) */
    return expect_async(rank, &x, ncclRemoteError, "rank 1 aborted");
}

static int case_p2p_invalid(int rank, int n, ncclUniqueId id)
{
    rank_ctx x;
    if (rank_setup(rank, n, id, &x)) return 1;
    float host[4] = {0};
    void *d = upload(&TYPES[0], rank, 4);
    int peer = 1 - rank;
    struct {
        ncclResult_t got, want;
        const char *what;
    } cases[] = {
        {ncclSend(d, 4, ncclFloat32, 2, x.comm, x.s), ncclInvalidArgument, "peer == nranks"},
        {ncclRecv(d, 4, ncclFloat32, -1, x.comm, x.s), ncclInvalidArgument, "peer -1"},
        {ncclSend(host, 4, ncclFloat32, peer, x.comm, x.s), ncclInvalidArgument, "a host buffer"},
        {ncclRecv(d, 5, ncclFloat32, peer, x.comm, x.s), ncclInvalidArgument, "a count past the allocation"},
        {ncclSend(d, 4, (ncclDataType_t)42, peer, x.comm, x.s), ncclInvalidArgument, "type 42"},
        {ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (cases[i].got != cases[i].want)
            return fail(rank, "%s gave %s, want %s", cases[i].what, ncclGetErrorString(cases[i].got),
                        ncclGetErrorString(cases[i].want));
    /* a collective inside a group, and a group with a failed call: nothing queued */
    NC(ncclGroupStart());
    ncclResult_t r = ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, x.comm, x.s);
    NC(ncclGroupEnd());
    if (r != ncclInvalidUsage) return fail(rank, "an all-reduce in a group gave %s", ncclGetErrorString(r));
    NC(ncclGroupStart());
    NC(ncclSend(d, 4, ncclFloat32, peer, x.comm, x.s));
    ncclSend(d, 4, ncclFloat32, 7, x.comm, x.s);
    r = ncclGroupEnd();
    if (r != ncclInvalidArgument) return fail(rank, "a group with a bad call ended with %s", ncclGetErrorString(r));
    /* the communicator still works, nested groups count */
    void *in = upload(&TYPES[0], 9, 4);
    NC(ncclGroupStart());
    NC(ncclGroupStart());
    NC(ncclSend(d, 4, ncclFloat32, peer, x.comm, x.s));
    NC(ncclGroupEnd());
    NC(ncclRecv(in, 4, ncclFloat32, peer, x.comm, x.s));
    NC(ncclGroupEnd());
    NC(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, x.comm, x.s));
    CU(cudaStreamSynchronize(x.s));
    float want[4];
    fill(&TYPES[0], want, peer, 4);
    if (compare(rank, "the message after the refused ones", &TYPES[0], in, want, 4)) return 1;
    return rank_teardown(rank, &x);
}

/* Two communicators of one process (threads), each collective checked. */
typedef struct thread_rank {
    int rank;
    ncclUniqueId id;
    int result;
} thread_rank;

static void *thread_main(void *p)
{
    thread_rank *t = p;
    t->result = case_sequence(t->rank, 2, t->id);
    return NULL;
}

static int case_threads(int rank, int n, ncclUniqueId id)
{
    (void)n;
    thread_rank t[2] = {{0, id, 1}, {1, id, 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &t[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    if (t[0].result || t[1].result) return fail(rank, "a thread rank failed");
    return 0;
}

/* Nothing of ours is left in /dev/shm. */
static void check_no_segments(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tfcore-emu-nccl-%d-", (int)getpid());
    DIR *d = opendir("/dev/shm");
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            printf("  left over: /dev/shm/%s\n", e->d_name);
            left++;
        }
    if (d) closedir(d);
    printf("%s: no shared-memory segment left\n", left ? "FAIL" : "PASS");
    if (left) failures++;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("TFCORE_EMU_NCCL_TIMEOUT_S", "30", 0);
    setenv("TFCORE_EMU_DEVICES", "4", 1); /* before any rank starts the runtime */
    for (int n = 2; n <= 4; n += 2) {
        char name[128];
#define RUN(fn, label, killed)                                                                     \
    snprintf(name, sizeof name, "%s, %d ranks", label, n);                                         \
    run_ranks(name, n, fn, killed)
        RUN(case_allreduce, "all-reduce of every type and op, odd counts, in place", -1);
        RUN(case_broadcast_reduce, "broadcast and reduce from every root, in place", -1);
        RUN(case_scatter_gather, "reduce-scatter and all-gather, out of place and in place", -1);
        RUN(case_sequence, "24 mixed collectives queued on one stream", -1);
        RUN(case_mismatch_count, "mismatched counts are invalid usage on every rank", -1);
        RUN(case_mismatch_kind, "all-reduce against broadcast is invalid usage", -1);
        RUN(case_abort, "ncclCommAbort by one rank ends the others' collectives", -1);
        RUN(case_killed, "a killed rank ends the others' collectives", n - 1);
        RUN(case_invalid_args, "invalid arguments are refused, nothing queued", -1);
        RUN(case_p2p_ring, "send/recv in a ring, in groups, every size, in order", -1);
    }
    run_ranks("send/recv: a 1F1B exchange completes in groups", 2, case_p2p_pipeline, -1);
    run_ranks("send/recv: lone sends block the stream, an error after the limit", 2, case_p2p_lone_blocks, -1);
    run_ranks("send/recv: a mismatched message is invalid usage on both ranks", 2, case_p2p_mismatch, -1);
    run_ranks("send/recv: an abort ends the peer's waiting receive", 2, case_p2p_abort, -1);
    run_ranks("send/recv: invalid calls and groups are refused, nothing queued", 2, case_p2p_invalid, -1);
    run_ranks("a missing rank is an init error, not a hang", 1, case_init_missing, -1);
    run_ranks("disagreeing nranks is an init error", 2, case_init_nranks, -1);
    run_ranks("two communicators in one process (threads)", 1, case_threads, -1);
    check_no_segments();
    printf("test_nccl: %d failed\n", failures);
    return failures ? 1 : 0;
}
