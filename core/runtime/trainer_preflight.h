/* trainer_preflight.h — before the first step, the workers of a job check that they
 * run the same thing: the resolved config, the plugins and their versions,
 * the parameter layout and the data plan. A rank started with another -o
 * value, another build or another dataset file stops the job with one line
 * naming the first differing rank and what differs, instead of a hang or a
 * wrong result later. */
#ifndef TFCORE_TRAINER_PREFLIGHT_H
#define TFCORE_TRAINER_PREFLIGHT_H

#include "trainer_internal.h"

/* After setup, comm init and the training plan (t->steps), before any other
 * collective: digests of what every rank must agree on, rank 0's broadcast
 * and compared, and each rank's first difference summed over all ranks.
 * Every rank returns TF_ERR_CONFIG with the same line on a mismatch. */
tf_status tf_preflight_check(tf_trainer *t, size_t train_rows, tf_error *err);

#endif
