/* probe.c — can CUDA run here: the plugin's probe (asked in a child
 * process, with a time limit), the vtable's device_count, and the CUDA
 * version text of messages. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda.h"

/* "13.0" from 13000 */
void cuda_version_text(char *buf, size_t n, int v)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* 0 when a device is usable, else why in buf (and the status to return). */
tf_status cuda_count_devices(int *count, char *why, size_t n)
{
    *count = 0;
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    (void)cudaGetLastError();
    cudaError_t e = cudaGetDeviceCount(count);
    (void)cudaGetLastError();
    char dv[16], rv[16];
    cuda_version_text(dv, sizeof dv, drv);
    cuda_version_text(rv, sizeof rv, rt);
    /* a driver is there but older than the runtime this plugin was linked with
     * (within one major version, CUDA's minor-version compatibility applies) */
    if (drv > 0 && rt > 0 &&
        (drv / 1000 < rt / 1000 || e == cudaErrorInsufficientDriver)) {
        snprintf(why, n, "CUDA driver supports %s, this build needs %s: update the NVIDIA driver",
                 dv, rv);
        *count = 0;
        return TF_ERR_PLUGIN;
    }
    if (e != cudaSuccess) {
        snprintf(why, n, "no CUDA device: %s", cudaGetErrorString(e));
        *count = 0;
        return TF_ERR_PLUGIN;
    }
    if (*count < 1) {
        snprintf(why, n, "no CUDA device: cudaGetDeviceCount found none");
        return TF_ERR_PLUGIN;
    }
    return TF_OK;
}

/* The probe asks CUDA in a child process. Asking in this process would
 * initialize the CUDA driver here, and the core may fork its worker ranks
 * after scanning the plugins (comm-nccl: one process per GPU): a child forked
 * after the parent initialized CUDA cannot use CUDA at all. The child writes
 * '1' (usable) or '0' and the reason down a pipe. A child that has not
 * answered within the time limit (cuInit can hang on a wedged driver) is
 * killed and the plugin reported unable to run, as comm-nccl's probe does:
 * 60 s, or TFCORE_CUDA_PROBE_TIMEOUT_S (whole seconds, 1 to 3600).
 * If no child can be made, the question is asked here after all. */
#define CUDA_PROBE_TIMEOUT_S 60

static long long probe_timeout_ms(void)
{
    const char *v = getenv("TFCORE_CUDA_PROBE_TIMEOUT_S");
    char *end;
    long s = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || s < 1 || s > 3600) s = CUDA_PROBE_TIMEOUT_S;
    return (long long)s * 1000;
}

static int probe_in_child(char *buf, size_t n)
{
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        char msg[512];
        int count;
        msg[1] = '\0';
        msg[0] = cuda_count_devices(&count, msg + 1, sizeof msg - 1) == TF_OK ? '1' : '0';
        size_t len = strlen(msg), off = 0;
        while (off < len) {
            ssize_t w = write(fd[1], msg + off, len - off);
            if (w <= 0 && errno != EINTR) break;
            if (w > 0) off += (size_t)w;
        }
        _exit(0); /* no atexit handlers, no stdio flush: this is the parent's copy */
    }
    close(fd[1]);
    char msg[512];
    size_t got = 0;
    bool timed_out = false;
    const long long limit_ms = probe_timeout_ms();
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long waited = (long long)(now.tv_sec - t0.tv_sec) * 1000 +
                           (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (waited >= limit_ms) {
            timed_out = true;
            break;
        }
        struct pollfd pfd = {fd[0], POLLIN, 0};
        int pr = poll(&pfd, 1, (int)(limit_ms - waited));
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            timed_out = true;
            break;
        }
        if (pr < 0) break;
        ssize_t r = read(fd[0], msg + got, sizeof msg - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got == sizeof msg - 1) break;
    }
    msg[got] = '\0';
    close(fd[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        snprintf(buf, n, "no CUDA device: the probe process (cudaGetDeviceCount) did not answer "
                         "in %d s and was killed",
                 (int)(limit_ms / 1000));
        return 0;
    }
    if (got == 0 || (msg[0] != '0' && msg[0] != '1')) {
        if (WIFSIGNALED(status))
            snprintf(buf, n, "no CUDA device: the probe process was killed by signal %d",
                     WTERMSIG(status));
        else
            snprintf(buf, n, "no CUDA device: the probe process gave no answer");
        return 0;
    }
    snprintf(buf, n, "%s", msg + 1);
    return msg[0] == '1';
}

int cuda_probe(char *why, size_t n)
{
    char buf[512] = "";
    int ok = probe_in_child(buf, sizeof buf);
    if (ok < 0) {
        int count;
        ok = cuda_count_devices(&count, buf, sizeof buf) == TF_OK;
    }
    if (!ok && why && n) snprintf(why, n, "%s", buf);
    return ok;
}

/* The vtable's device_count: GPUs this process sees (CUDA_VISIBLE_DEVICES
 * applies), 0 with the reason when none. Asked in this process: the core's
 * launcher re-executes its worker processes, so a CUDA context here is never
 * inherited by a fork. */
int cuda_device_count(char *why, size_t n)
{
    int count = 0;
    char buf[512] = "";
    if (cuda_count_devices(&count, buf, sizeof buf) != TF_OK) count = 0;
    if (count == 0 && why && n) snprintf(why, n, "%s", buf);
    return count;
}
