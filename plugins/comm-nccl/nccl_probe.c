/* nccl_probe.c — "can comm-nccl run here": is there a CUDA device?
 *
 * The question is asked in a short-lived child process. cudaGetDeviceCount
 * initializes the CUDA driver, and a process that did cannot use CUDA in the
 * children it forks (without exec): asked in-process, the probe would break
 * any host that scans plugins and then forks its workers. Without a driver
 * the child reports CUDA's error string; it never crashes the caller. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "nccl_internal.h"

typedef struct probe_answer {
    int cuda_error; /* cudaError_t of cudaGetDeviceCount */
    int count;
    char text[200]; /* cudaGetErrorString */
} probe_answer;

#define PROBE_TIMEOUT_MS 60000

static void probe_child(int fd)
{
    probe_answer a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaGetDeviceCount(&a.count);
    a.cuda_error = (int)e;
    snprintf(a.text, sizeof a.text, "%s", cudaGetErrorString(e));
    const char *p = (const char *)&a;
    size_t left = sizeof a;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    _exit(0);
}

int nccl_probe(char *why, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, n, "cannot probe for a CUDA device: pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, n, "cannot probe for a CUDA device: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(fds[1]);
    }
    close(fds[1]);

    probe_answer a;
    memset(&a, 0, sizeof a);
    size_t got = 0;
    bool timed_out = false;
    while (got < sizeof a) {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int pr = poll(&pfd, 1, PROBE_TIMEOUT_MS);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) timed_out = true;
        if (pr <= 0) break;
        ssize_t r = read(fds[0], (char *)&a + got, sizeof a - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }

    if (got < sizeof a) {
        if (timed_out)
            snprintf(why, n, "no CUDA device: cudaGetDeviceCount did not answer in %d s",
                     PROBE_TIMEOUT_MS / 1000);
        else if (WIFSIGNALED(status))
            snprintf(why, n, "no CUDA device: the probe process died of signal %d in "
                             "cudaGetDeviceCount", WTERMSIG(status));
        else
            snprintf(why, n, "no CUDA device: the probe process gave no answer");
        return 0;
    }
    a.text[sizeof a.text - 1] = '\0';
    if (a.cuda_error != (int)cudaSuccess) {
        snprintf(why, n, "no CUDA device: %s", a.text);
        return 0;
    }
    if (a.count <= 0) {
        snprintf(why, n, "no CUDA device: cudaGetDeviceCount found none");
        return 0;
    }
    return 1;
}
