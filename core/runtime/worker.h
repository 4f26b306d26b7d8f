/* worker.h — who a worker is in its job and how it reaches the others.
 *
 * One job has world_size workers; rank 0 is the one that logs, evaluates the
 * metrics and writes output_dir. A run without a comm section is a job of one
 * worker with no comm plugin. */
#ifndef TFCORE_WORKER_H
#define TFCORE_WORKER_H

#include <stdbool.h>

#include "comm_recorder.h"
#include "tfcore/comm.h"

typedef struct tf_worker {
    int rank, world;              /* 0 <= rank < world */
    int local_rank, local_world;  /* among the workers on this machine; local_rank picks the device */
    tf_launch_mode mode;          /* how the job's workers were started (0: a single worker) */
    const tf_comm_vtable *cvt;    /* NULL: one worker and no comm plugin */
    void *shared;                 /* passed to the comm plugin's init (see tfcore/comm.h) */
    tf_comm_recorder *recorder;   /* the job's flight recorder, that the launcher watches (NULL:
                                     none; the worker keeps its own) */
} tf_worker;

/* The only worker of a run without a comm section. */
static inline tf_worker tf_worker_single(void)
{
    return (tf_worker){0, 1, 0, 1, (tf_launch_mode)0, NULL, NULL, NULL};
}

#endif
