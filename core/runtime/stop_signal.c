/* stop_signal.c — the stop request a signal makes (stop_signal.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stop_signal.h"

static volatile sig_atomic_t requested; /* the first signal's number */
static volatile sig_atomic_t stopped;
static struct timespec first_at;       /* when it came */

/* Signals within this many seconds of the first are the same request fanned
 * out (scancel and Slurm's --signal reach every process of a job, and a
 * launcher passes the signal on too); a later one is a second request. */
#define SAME_REQUEST_SECONDS 1

static void on_signal(int sig)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal safe */
    if (!requested) {
        first_at = now;
        requested = sig;
        return;
    }
    double since = (double)(now.tv_sec - first_at.tv_sec) + 1e-9 * (double)(now.tv_nsec - first_at.tv_nsec);
    if (since < SAME_REQUEST_SECONDS) return;
    /* the second signal: stop now, as the default action would */
    static const char msg[] = "tfcore: a second stop signal: ending now without finishing the checkpoint\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

void tf_stop_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int tf_stop_requested(void)
{
    return requested;
}

const char *tf_stop_signal_name(int sig)
{
    static char other[32];
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: snprintf(other, sizeof other, "signal %d", sig); return other;
    }
}

void tf_stop_mark_stopped(void)
{
    stopped = 1;
}

bool tf_stop_was_stopped(void)
{
    return stopped != 0;
}

static int test_signal(void)
{
    const char *s = getenv("TFCORE_TEST_SIGNAL");
    if (s && strcmp(s, "INT") == 0) return SIGINT;
    if (s && strcmp(s, "USR1") == 0) return SIGUSR1;
    return SIGTERM;
}

static bool test_at(int rank, int64_t step)
{
    const char *at = getenv("TFCORE_TEST_SIGNAL_AT_STEP");
    return rank == 0 && at && *at && strtoll(at, NULL, 10) == step;
}

void tf_stop_test_step(int rank, int64_t step)
{
    const char *phase = getenv("TFCORE_TEST_SIGNAL_PHASE");
    if (test_at(rank, step) && (!phase || !*phase)) raise(test_signal());
}

void tf_stop_test_phase(int rank, int64_t step, const char *phase)
{
    static int64_t raised_at = -1; /* once a step: the first micro-batch's phase */
    const char *want = getenv("TFCORE_TEST_SIGNAL_PHASE");
    if (!want || strcmp(want, phase) != 0 || !test_at(rank, step) || raised_at == step) return;
    raised_at = step;
    raise(test_signal());
}

void tf_stop_test_in_save(void)
{
    const char *s = getenv("TFCORE_TEST_SIGNAL_IN_SAVE");
    if (!requested || !s || strcmp(s, "1") != 0) return;
    struct timespec pause = {SAME_REQUEST_SECONDS, 200 * 1000 * 1000}; /* past the first one's fan-out */
    nanosleep(&pause, NULL);
    raise(requested);
}
