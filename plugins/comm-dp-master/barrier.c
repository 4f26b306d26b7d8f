/* barrier.c — an abortable barrier for the replica threads (mutex + condition
 * variable + generation counter + abort flag). pthread_barrier_t has no way to
 * release its waiters early, and a failed replica must not leave the others
 * blocked forever. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dp_master.h"

int dp_barrier_init(dp_barrier *b, int parties)
{
    memset(b, 0, sizeof *b);
    if (parties < 1) return EINVAL;
    int rc = pthread_mutex_init(&b->mu, NULL);
    if (rc) return rc;
    rc = pthread_cond_init(&b->cv, NULL);
    if (rc) {
        pthread_mutex_destroy(&b->mu);
        return rc;
    }
    b->parties = parties;
    b->abort_rank = -1;
    return 0;
}

void dp_barrier_destroy(dp_barrier *b)
{
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

bool dp_barrier_wait(dp_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    if (b->aborted) {
        pthread_mutex_unlock(&b->mu);
        return false;
    }
    unsigned long gen = b->generation;
    if (++b->waiting == b->parties) {
        b->waiting = 0;
        b->generation++;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return true;
    }
    while (gen == b->generation && !b->aborted) pthread_cond_wait(&b->cv, &b->mu);
    /* all arrived before the abort: this barrier completed */
    bool passed = gen != b->generation;
    pthread_mutex_unlock(&b->mu);
    return passed;
}

void dp_barrier_abort(dp_barrier *b, int rank, const char *why)
{
    pthread_mutex_lock(&b->mu);
    if (!b->aborted) {
        b->aborted = true;
        b->abort_rank = rank;
        snprintf(b->why, sizeof b->why, "%s", why && *why ? why : "(no reason given)");
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

bool dp_barrier_aborted(dp_barrier *b, int *rank, char *why, size_t n)
{
    pthread_mutex_lock(&b->mu);
    bool aborted = b->aborted;
    if (aborted) {
        if (rank) *rank = b->abort_rank;
        if (why && n) snprintf(why, n, "%s", b->why);
    }
    pthread_mutex_unlock(&b->mu);
    return aborted;
}
