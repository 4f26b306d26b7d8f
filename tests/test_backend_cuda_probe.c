/* test_backend_cuda_probe.c — backend-cuda's probe when CUDA hangs: the
 * probe asks CUDA in a child process, and a child that does not answer in
 * TFCORE_CUDA_PROBE_TIMEOUT_S is killed and the plugin reported unable to
 * run, instead of blocking `tfcore plugins` (and every launch) for ever.
 *
 * This program defines cudaGetDeviceCount itself, blocking for ever, and
 * exports it (-export-dynamic): the plugin, dlopen()ed here, binds to it
 * before libcudart's. Runs without a GPU. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tfcore/plugin.h"

/* cudaError_t cudaGetDeviceCount(int *): a driver stuck in cuInit */
int cudaGetDeviceCount(int *count);
int cudaGetDeviceCount(int *count)
{
    (void)count;
    for (;;) pause();
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    const char *top = getenv("top_builddir");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/backend-cuda/.libs/tfcore-backend-cuda.so",
             top ? top : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    tf_plugin_entry_fn entry = (tf_plugin_entry_fn)dlsym(h, TF_PLUGIN_ENTRY_SYMBOL);
    const tf_plugin *p = entry ? entry() : NULL;
    if (!p || !p->probe) {
        printf("FAIL: %s has no descriptor with a probe\n", path);
        return 1;
    }
    setenv("TFCORE_CUDA_PROBE_TIMEOUT_S", "2", 1);
    char why[512] = "";
    double t0 = now();
    int ok = p->probe(why, sizeof why);
    double took = now() - t0;
    int fail = 0;
    if (ok) {
        printf("FAIL: the probe says CUDA can run although cudaGetDeviceCount never returns\n");
        fail = 1;
    }
    const char *want = "no CUDA device: the probe process (cudaGetDeviceCount) did not answer in 2 s "
                       "and was killed";
    if (strcmp(why, want) != 0) {
        printf("FAIL: the probe said '%s', want '%s'\n", why, want);
        fail = 1;
    }
    if (took < 1.5 || took > 20) {
        printf("FAIL: the probe returned after %.1f s, want about 2 s\n", took);
        fail = 1;
    }
    /* the child was killed and reaped: no child left */
    if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
        printf("FAIL: the probe left a child process behind\n");
        fail = 1;
    }
    if (!fail) printf("ok: the probe gave up after %.1f s: %s\n", took, why);
    return fail;
}
