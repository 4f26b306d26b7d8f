/* clock.h — monotonic time for the runtime's timings and timeouts. */
#ifndef TFCORE_CLOCK_H
#define TFCORE_CLOCK_H

/* Monotonic seconds. */
double tf_now(void);

#endif
