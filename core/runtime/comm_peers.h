/* comm_peers.h — the ranks' heartbeat across machines: where each rank of a
 * job is (step, phase, micro-batch, the collective it is in), told to the
 * other ranks over UDP a few times a second, so that a rank whose collective
 * runs past comm.timeout_s can name the rank behind even when it runs on
 * another machine, is stopped, or its machine is cut off — without that
 * rank's cooperation (it simply stops being heard).
 *
 * Used where no launcher on this machine reads every rank's flight recorder
 * (comm_recorder.h): ranks of an mpirun across machines, or of srun. Off the
 * compute path: one thread per process reads the rank's recorder slot, sends
 * one datagram of about 100 bytes to each peer every TF_COMM_PEERS_BEAT_S and
 * takes in what the peers send. A rank beats to every other rank of a job of
 * up to TF_COMM_PEERS_FANOUT + 1 ranks; in a larger job to rank 0 and the next
 * TF_COMM_PEERS_FANOUT ranks after it (so rank 0, which reports the job, hears
 * from everyone). Datagrams carry a job token and are dropped when they are
 * not this job's.
 *
 * The address a rank is reached at: the IPv4 address of the interface Open
 * MPI's TCP transport is told to use (OMPI_MCA_btl_tcp_if_include, else
 * OMPI_MCA_oob_tcp_if_include: an interface name or a subnet such as
 * 10.1.0.0/16), else the machine's first interface that is up and not
 * loopback, else 127.0.0.1. The addresses are exchanged once, at start, by
 * one all-reduce (each rank fills its own entries). */
#ifndef TFCORE_COMM_PEERS_H
#define TFCORE_COMM_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm_recorder.h"
#include "tfcore/error.h"

#define TF_COMM_PEERS_BEAT_S 0.25
#define TF_COMM_PEERS_FANOUT 64
/* Doubles per rank in the address exchange: IPv4 address, UDP port, job token half. */
#define TF_COMM_PEERS_SLOT 3

typedef struct tf_comm_peers tf_comm_peers;

/* Open this rank's UDP socket (nothing is sent yet). */
tf_status tf_comm_peers_open(int rank, int world, tf_comm_peers **out, tf_error *err);
/* This rank's entries of the exchange: a zeroed exchange[world *
 * TF_COMM_PEERS_SLOT] of doubles gets them at [rank * TF_COMM_PEERS_SLOT];
 * the all-reduce (sum) of every rank's array is what tf_comm_peers_start takes. */
void tf_comm_peers_fill(const tf_comm_peers *p, double *exchange);
/* Start beating `own` (this rank's recorder slot) to the peers and listening.
 * A rank whose entries are zero (it could not open its socket) is not
 * beaten to, and is "never heard from". */
tf_status tf_comm_peers_start(tf_comm_peers *p, const double *exchange, const tf_comm_rank_log *own, tf_error *err);
/* Stop the thread and close the socket (NULL is fine). */
void tf_comm_peers_close(tf_comm_peers *p);

/* When this rank's own collective has run past timeout_s: the report of
 * tf_comm_recorder_overdue_on, built from this rank's own slot and what each
 * peer said last (a peer never heard from is "no heartbeat"), each rank
 * named with its host's address; false when not overdue. */
bool tf_comm_peers_overdue(tf_comm_peers *p, double now, double timeout_s, char *out, size_t n);

/* The address a peer is known at ("10.0.0.2"), for messages. */
const char *tf_comm_peers_host(const tf_comm_peers *p, int rank);

#endif
