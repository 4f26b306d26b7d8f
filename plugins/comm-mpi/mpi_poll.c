/* mpi_poll.c — waiting for MPI requests with a deadline (comm.timeout_s).
 * MPI_Wait in Open MPI spins: a rank whose peer is stopped burns a core for
 * as long as it waits, and never gives up. This waits by testing: back to
 * back for the first POLL_SPIN_S (what MPI_Wait does, so a prompt
 * collective costs no latency), then every poll_ns (the progress thread's
 * interval: Open MPI's non-blocking schedules advance only when tested),
 * and after POLL_SLOW_AFTER_S every POLL_SLOW_NS: a peer that late is not
 * waited for at full speed. */
#include <errno.h>
#include <time.h>

#include "comm_mpi.h"

#define POLL_SPIN_S 0.001
#define POLL_SLOW_AFTER_S 1.0
#define POLL_SLOW_NS 1000000L

double cm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tf_status cm_poll(tf_comm *c, MPI_Request *reqs, int n, double deadline, const char *what, tf_error *err)
{
    double t0 = cm_now();
    for (;;) {
        /* one MPI_Test each (a finished one becomes MPI_REQUEST_NULL): a
         * failed request gives its own error, where MPI_Testall says only
         * MPI_ERR_IN_STATUS */
        int done = 1;
        for (int i = 0; i < n; i++) {
            int flag = 0;
            int rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return cm_mpi_fail(c, err, rc, "%s", what);
            done &= flag != 0;
        }
        if (done) return TF_OK;
        double now = cm_now();
        if (now >= deadline)
            return cm_fail(c, err,
                           "%s did not finish in %g s (comm.timeout_s, and %g s more): a rank is stalled, "
                           "gone, or in another collective",
                           what, c->timeout_s, CM_TIMEOUT_GRACE_S);
        if (now - t0 < POLL_SPIN_S) continue;
        long ns = now - t0 < POLL_SLOW_AFTER_S ? c->poll_ns : POLL_SLOW_NS;
        struct timespec nap = {ns / 1000000000L, ns % 1000000000L};
        pthread_mutex_unlock(&cm_lock);
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {}
        pthread_mutex_lock(&cm_lock);
    }
}
