/* backend.c — backend-cpu: the plugin descriptor, the vtable, opening and
 * closing the device (the host), what it supports and what it is called.
 *
 * Config ("backend" section), keys this plugin reads:
 *   threads  int >= 0, default 0: size of the thread team every op uses;
 *            0 = the cores shared among the job's workers on this machine
 *            (open_args.local_world_size), or with one worker as many as
 *            OpenMP would use (OMP_NUM_THREADS, else every core this process
 *            may run on).
 * open_args.threads > 0 overrides both.
 */
#include <stddef.h>
#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu.h"
#include "tfcore/config_keys.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

#define CPU_MAX_THREADS 1024

tf_status cpu_fail(tf_error *err, tf_status code, const char *op, const char *fmt, ...)
{
    char what[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tf_error_set(err, code, "backend-cpu: %s: %s", op, what);
}

const tf_backend_checker cpu_checker = {
    .name = "backend-cpu",
    .act_dtypes = TF_DTYPE_BIT(TF_DTYPE_F32),
    .act_dtypes_text = "F32 only",
};

tf_status cpu_need(tf_error *err, const char *op, const char *name, const void *p)
{
    return tf_check_need(&cpu_checker, err, op, name, p);
}

tf_status cpu_need_f32(tf_error *err, const char *op, const char *name, tf_dtype dt)
{
    return tf_check_act_dtype(&cpu_checker, err, op, name, dt);
}

tf_status cpu_need_min(tf_error *err, const char *op, const char *name, long long v,
                       long long lo)
{
    return tf_check_min(&cpu_checker, err, op, name, v, lo);
}

/* The one key of the "backend" section this plugin owns (`plugin` is the
 * core's); plugins/backend-cpu/README.md's key section is generated from it. */
static const tf_cfg_key keys[] = {
    {"threads", TF_CFG_KEY_INT, .int_def = 0, .int_min = 0, .int_max = CPU_MAX_THREADS,
     .doc = "threads every op uses; 0: the online cores divided by the job's workers on this machine (at least 1), "
            "or with one worker what OpenMP would use (`OMP_NUM_THREADS`, else every core this process may run "
            "on). `open_args.threads > 0` overrides it"},
    {0},
};
TF_PLUGIN_KEYS(keys);

static tf_status read_threads(tf_section *section, long long *threads, tf_error *err)
{
    *threads = 0;
    if (!section) return TF_OK;
    return tf_cfg_key_int(section, keys, "threads", threads, err);
}

tf_status cpu_check_config(tf_section *section, tf_error *err)
{
    long long threads;
    return read_threads(section, &threads, err);
}

/* Without a number from the core or the config: alone, what OpenMP would
 * use; with local_world workers on this machine, each its share of the
 * online cores (at least one). */
static int default_threads(int local_world)
{
#ifdef _OPENMP
    int n = omp_get_max_threads();
#else
    int n = 1;
#endif
    if (local_world > 1) {
        long share = sysconf(_SC_NPROCESSORS_ONLN) / local_world;
        n = share < 1 ? 1 : share > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)share;
    }
    return n < 1 ? 1 : n > CPU_MAX_THREADS ? CPU_MAX_THREADS : n;
}

/* OpenBLAS's thread count is process-wide: set it once. With OpenMP the
 * backend splits each GEMM over its own team and OpenBLAS runs single-threaded
 * inside it; without OpenMP OpenBLAS threads the GEMMs itself. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static int blas_threads_wanted = 1;
static void set_blas_threads(void) { openblas_set_num_threads(blas_threads_wanted); }

/* "x86_64 Intel(R) Xeon(R) Processor, 2 threads, OpenBLAS 0.3.21 (Cooperlake
 * kernels), bf16 GEMMs: oneDNN 2.6.3 (AMX)" */
static void describe(tf_backend *be)
{
    struct utsname un;
    const char *arch = uname(&un) == 0 ? un.machine : "host";
    char model[96] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            const char *v = strchr(line, ':');
            if (!v) break;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(model, sizeof model, " %s", v);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
        fclose(f);
    }
    /* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... Cooperlake ..." */
    char blas[64] = "OpenBLAS";
    const char *cfg = openblas_get_config();
    if (cfg) {
        const char *sp = strchr(cfg, ' ');
        if (sp) sp = strchr(sp + 1, ' ');
        size_t len = sp ? (size_t)(sp - cfg) : strlen(cfg);
        if (len >= sizeof blas) len = sizeof blas - 1;
        memcpy(blas, cfg, len);
        blas[len] = '\0';
    }
    const char *core = openblas_get_corename();
    snprintf(be->name, sizeof be->name, "%s%s, %d thread%s, %s (%s kernels), %s", arch, model,
             be->threads, be->threads == 1 ? "" : "s", blas, core ? core : "unknown",
             be->bf16_why);
}

tf_status cpu_open(const tf_backend_open_args *args, tf_backend **out, tf_error *err)
{
    if (cpu_need(err, "open", "args", args) || cpu_need(err, "open", "out", out))
        return TF_ERR_RUNTIME;
    *out = NULL;
    size_t need = offsetof(tf_backend_open_args, section) + sizeof args->section;
    if (args->size < need)
        return cpu_fail(err, TF_ERR_PLUGIN, "open",
                        "open_args.size is %u, expected at least %zu (core built against an "
                        "older backend.h?)",
                        args->size, need);
    /* ABI 1.4: the workers sharing this machine's cores; an older core's args end before it */
    int local_world = args->size >= offsetof(tf_backend_open_args, local_world_size) + sizeof args->local_world_size
                          ? args->local_world_size
                          : 1;
    if (args->device < 0)
        return cpu_fail(err, TF_ERR_RUNTIME, "open",
                        "device must be >= 0 (every index names the host), got %d",
                        args->device);
    if (args->threads < 0 || args->threads > CPU_MAX_THREADS)
        return cpu_fail(err, TF_ERR_RUNTIME, "open", "threads must be in [0, %d], got %d",
                        CPU_MAX_THREADS, args->threads);
    long long cfg_threads;
    tf_status st = read_threads(args->section, &cfg_threads, err);
    if (st) return st;

    tf_backend *be = calloc(1, sizeof *be);
    if (!be) return cpu_fail(err, TF_ERR_RUNTIME, "open", "out of memory (%zu bytes)", sizeof *be);
    be->threads = args->threads > 0 ? args->threads
                  : cfg_threads > 0 ? (int)cfg_threads
                                    : default_threads(local_world);
    be->seed = args->seed;
    atomic_init(&be->current, 0);
    atomic_init(&be->peak, 0);
    size_t scratch_bytes = (size_t)be->threads * CPU_SCRATCH_FLOATS * sizeof(float);
    be->scratch = aligned_alloc(CPU_ALIGN, scratch_bytes);
    if (!be->scratch) {
        int threads = be->threads;
        free(be);
        return cpu_fail(err, TF_ERR_RUNTIME, "open",
                        "out of memory allocating %zu bytes of scratch (%d threads)",
                        scratch_bytes, threads);
    }
    pthread_mutex_init(&be->scratch_lock, NULL);
#ifdef _OPENMP
    blas_threads_wanted = 1;
#else
    blas_threads_wanted = be->threads;
#endif
    pthread_once(&blas_once, set_blas_threads);
    cpu_bf16_open(be);
    describe(be);
    tf_debug("backend-cpu: opened %s", be->name);
    *out = be;
    return TF_OK;
}

void cpu_close(tf_backend *be)
{
    if (!be) return;
    size_t held = atomic_load(&be->current);
    if (held)
        tf_warn("backend-cpu: closed with %zu bytes still allocated (peak %zu)", held,
                atomic_load(&be->peak));
    cpu_bf16_close(be);
    pthread_mutex_destroy(&be->scratch_lock);
    free(be->scratch);
    free(be);
}

/* Activations are f32 always; GEMMs fp32, or bf16 inputs with fp32
 * accumulation where this CPU and build have them (be->bf16, gemm_bf16.c). */
bool cpu_supports(tf_backend *be, tf_matmul_mode mode, tf_dtype act_dtype)
{
    if (act_dtype != TF_DTYPE_F32) return false;
    return mode == TF_MATMUL_FP32 || (mode == TF_MATMUL_BF16 && be && be->bf16);
}

const char *cpu_device_name(tf_backend *be) { return be ? be->name : "backend-cpu (not open)"; }

static int cpu_probe(char *why, size_t n)
{
    (void)why;
    (void)n;
    return 1; /* the host is always there; OpenBLAS picks its kernels at load time */
}

/* Buffers are malloc'ed host memory: comm plugins may use them as they are. */
static bool cpu_host_memory(tf_backend *be)
{
    (void)be;
    return true;
}

/* The host is one "device" that any number of workers share (each gets its
 * share of the cores): not a limit on the world size. */
static int cpu_device_count(char *why, size_t n)
{
    (void)why;
    (void)n;
    return -1;
}

static const tf_backend_vtable cpu_vtable = {
    .size = TF_VTABLE_SIZE(tf_backend_vtable),
    .check_config = cpu_check_config,
    .open = cpu_open,
    .close = cpu_close,
    .supports = cpu_supports,
    .mem_info = cpu_mem_info,
    .device_name = cpu_device_name,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy = cpu_memcpy,
    .memset = cpu_memset,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .gemm = cpu_gemm,
    .sum_rows = cpu_sum_rows,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .attention_save_bytes = cpu_attention_save_bytes,
    .attention_fwd = cpu_attention_fwd,
    .attention_bwd = cpu_attention_bwd,
    .gelu_fwd = cpu_gelu_fwd,
    .gelu_bwd = cpu_gelu_bwd,
    .tanh_fwd = cpu_tanh_fwd,
    .tanh_bwd = cpu_tanh_bwd,
    .dropout_fwd = cpu_dropout_fwd,
    .dropout_bwd = cpu_dropout_bwd,
    .add = cpu_add,
    .scale = cpu_scale,
    .cast = cpu_cast,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .cross_entropy = cpu_cross_entropy,
    .adamw = cpu_adamw,
    .sum_squares = cpu_sum_squares,
    .finite_check = cpu_finite_check,
    .host_memory = cpu_host_memory,
    .native_stream = NULL, /* no native streams: ops run synchronously on the calling thread */
    .device_count = cpu_device_count,
    .cross_entropy_ex = cpu_cross_entropy_ex,
    .adamw_ex = cpu_adamw_ex,
    .dropout_fwd_ex = cpu_dropout_fwd_ex,
    .attention_fwd_ex = cpu_attention_fwd_ex,
    .attention_bwd_ex = cpu_attention_bwd_ex,
    .adafactor = cpu_adafactor,
    .attention_varlen_fwd = cpu_attention_varlen_fwd,
    .attention_varlen_bwd = cpu_attention_varlen_bwd,
    .dropout_varlen_fwd = cpu_dropout_varlen_fwd,
};

/* `tfcore plugins` shows this line; whether this CPU has the bf16 GEMMs is
 * in the device name and in --dry-run's refusal of precision bf16. */
#ifdef TF_HAVE_ONEDNN
#define CPU_DESCRIPTION \
    "fp32 compute on the host: OpenBLAS GEMMs, OpenMP ops; bf16 GEMMs (oneDNN) on CPUs with AVX512_BF16"
#else
#define CPU_DESCRIPTION \
    "fp32 compute on the host: OpenBLAS GEMMs, OpenMP ops; no bf16 GEMMs (built without oneDNN)"
#endif
TF_PLUGIN_DEFINE(TF_KIND_BACKEND, CPU_PLUGIN_NAME, CPU_PLUGIN_VERSION, CPU_DESCRIPTION, cpu_probe,
                 &cpu_vtable)
