/* comm_recorder.h — the collectives' flight recorder: for each rank of a job,
 * the last TF_COMM_RECORDER_DEPTH collectives it entered (sequence number,
 * kind, step, micro-batch, bucket i of n, bytes, enter and exit time) and
 * where it is now (step, micro-batch, phase), so that when a collective runs
 * past comm.timeout_s the job ends with one line per rank naming the rank(s)
 * behind, read without the stalled rank's cooperation.
 *
 * The recorder is one block of plain memory, laid out for sharing between
 * processes (no pointers): the launcher creates it before the workers start
 *   threads (dp-master)       calloc'd, every worker thread writes its slot
 *   processes (the launcher)  a memfd mapped MAP_SHARED, inherited by the workers
 *   mpirun started by tfcore  a file in /dev/shm the local ranks map
 * and watches it (tf_comm_recorder_overdue); a rank started by someone else
 * (mpirun, srun) keeps a private one-rank recorder and reports its own line.
 *
 * Each slot has one writer (its rank's training thread). A watcher reads
 * while it writes: counters are atomic, an event is filled before the
 * counter that publishes it, and a line made from a slot being rewritten is
 * at worst one event stale. Always on: an enter or exit is a few stores. */
#ifndef TFCORE_COMM_RECORDER_H
#define TFCORE_COMM_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TF_COMM_RECORDER_DEPTH 64 /* events kept per rank (a power of two) */
#define TF_COMM_RECORDER_MAGIC 0x74666372u /* "tfcr" */

typedef enum tf_comm_kind {
    TF_COMM_ALLREDUCE = 1,
    TF_COMM_REDUCE = 2,
    TF_COMM_BROADCAST = 3,
    TF_COMM_BARRIER = 4,
    TF_COMM_REDUCE_SCATTER = 5, /* ZeRO (trainer_strategy.h) */
    TF_COMM_ALL_GATHER = 6,
    TF_COMM_SEND = 7, /* point-to-point (ABI 1.4): a pipeline stage's activations or gradients */
    TF_COMM_RECV = 8
} tf_comm_kind;

/* Where a rank is between collectives. */
typedef enum tf_comm_where {
    TF_WHERE_SETUP = 0,
    TF_WHERE_DATA = 1,
    TF_WHERE_FORWARD = 2,
    TF_WHERE_BACKWARD = 3,
    TF_WHERE_COMM = 4,
    TF_WHERE_OPTIMIZER = 5,
    TF_WHERE_EVAL = 6,
    TF_WHERE_SAVE = 7,
    TF_WHERE_DONE = 8
} tf_comm_where;

typedef struct tf_comm_event {
    uint64_t seq;           /* 1, 2, ... per rank: the collective's number */
    int32_t kind;           /* tf_comm_kind */
    int32_t bucket, nbuckets; /* gradient bucket i (1-based) of n; 0: not a bucket; n 0: not known yet */
    int32_t micro;          /* micro-batch of the step (1-based), 0 outside one */
    int64_t step;           /* optimizer step being computed (1-based) */
    uint64_t bytes;
    double t_enter, t_exit; /* CLOCK_MONOTONIC seconds; t_exit 0 while open (or failed) */
} tf_comm_event;

typedef struct tf_comm_rank_log {
    int32_t pid;            /* the rank's process (its launcher can stop it) */
    int32_t where;          /* tf_comm_where */
    int64_t step;           /* as in tf_comm_event */
    int32_t micro;
    int32_t remote;         /* 1: a copy of what another host's rank last said over the network
                               (comm_peers.h), its heartbeat when that came; 2: a rank the
                               reader does not hear from (left out of the report) */
    double where_since;     /* when it got there */
    uint64_t entered;       /* seq of the last collective entered (0: none) */
    uint64_t blocked;       /* seq of the collective the rank is inside a blocking call of (0: none) */
    double heartbeat;       /* the process's heartbeat thread's last beat (0: it has none) */
    tf_comm_event ring[TF_COMM_RECORDER_DEPTH]; /* event seq at ring[seq % DEPTH] */
} tf_comm_rank_log;

typedef struct tf_comm_recorder {
    uint32_t magic;         /* TF_COMM_RECORDER_MAGIC once initialized */
    uint32_t slot_bytes;    /* sizeof(tf_comm_rank_log) of the writer that made it */
    int32_t world;
    int32_t pad;
    tf_comm_rank_log rank[]; /* [world] */
} tf_comm_recorder;

/* Bytes of a recorder for world ranks. */
size_t tf_comm_recorder_bytes(int world);
/* Lay out a zero-filled block of tf_comm_recorder_bytes(world). */
void tf_comm_recorder_init(tf_comm_recorder *r, int world);
/* Whether a mapped block of `bytes` is a recorder for world ranks of this build. */
bool tf_comm_recorder_valid(const tf_comm_recorder *r, size_t bytes, int world);

/* --- the rank's side (every function accepts a NULL log) ---------------------- */

void tf_comm_rec_where(tf_comm_rank_log *l, tf_comm_where where, int64_t step, int micro);
/* The same step and micro-batch, another phase. */
void tf_comm_rec_phase(tf_comm_rank_log *l, tf_comm_where where);
/* Enter a collective; returns its seq (0 for a NULL log). */
uint64_t tf_comm_rec_enter(tf_comm_rank_log *l, tf_comm_kind kind, uint64_t bytes, int bucket, int nbuckets);
/* Leave collective seq (it succeeded). A failed one stays open. */
void tf_comm_rec_exit(tf_comm_rank_log *l, uint64_t seq);
/* The rank is inside a call that may wait for collective seq (block), or
 * has returned from it (seq 0). A rank with a collective in flight that is
 * not blocked is computing: when others wait, it is the one behind. */
void tf_comm_rec_block(tf_comm_rank_log *l, uint64_t seq);
/* Reading a log another thread writes (the launcher's watchdog, the heartbeat
 * sender): event seq as it stands (false when its slot holds another one,
 * being rewritten), and the rank's step, micro-batch and since when it is
 * where it is, each field loaded atomically. */
bool tf_comm_rec_event(const tf_comm_rank_log *l, uint64_t seq, tf_comm_event *out);
void tf_comm_rec_position(const tf_comm_rank_log *l, int64_t *step, int32_t *micro, double *where_since);

/* A thread of this process that beats every TF_COMM_HEARTBEAT_S into the
 * slot, so a watcher tells a stopped or dead process (no beats) from one
 * that waits (it beats); NULL when it cannot start. */
#define TF_COMM_HEARTBEAT_S 0.25
#define TF_COMM_HEARTBEAT_STALE_S 2.0
typedef struct tf_comm_heartbeat tf_comm_heartbeat;
tf_comm_heartbeat *tf_comm_heartbeat_start(tf_comm_rank_log *l);
void tf_comm_heartbeat_stop(tf_comm_heartbeat *h);

/* --- the watcher's side ---------------------------------------------------------- */

/* Seconds the oldest open collective of any rank has been open at `now`
 * (0 when none is). */
double tf_comm_recorder_oldest(const tf_comm_recorder *r, double now);
/* When the oldest open collective has run past timeout_s: writes one
 * headline (naming the rank(s) behind) and one line per rank into out[n]
 * (lines end with '\n') and returns true. */
bool tf_comm_recorder_overdue(const tf_comm_recorder *r, double now, double timeout_s, char *out, size_t n);
/* The same, naming each rank's host (hosts[world] of strings, or NULL):
 * "rank 1 (host 10.0.0.2) is behind: ...". */
bool tf_comm_recorder_overdue_on(const tf_comm_recorder *r, const char *const *hosts, double now, double timeout_s,
                                 char *out, size_t n);
/* One line saying where rank `rank` is (its own view), into out[n]. */
void tf_comm_recorder_rank_line(const tf_comm_recorder *r, int rank, double now, char *out, size_t n);

const char *tf_comm_kind_name(int kind);

/* Tests only: with TFCORE_TEST_STALL_RANK = rank and TFCORE_TEST_STALL_AT_STEP
 * = step in the environment, this rank stops here for good (sleeps) — how a
 * test stalls one worker thread of dp-master, which SIGSTOP cannot (it stops
 * the whole process). */
void tf_comm_test_stall(int rank, int64_t step);

#endif
