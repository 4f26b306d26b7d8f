/* lr_schedule.h — learning-rate schedules, exactly as transformers'
 * get_scheduler (optimization.py): the multiplier of the base rate for the
 * optimizer step with 0-based index `step`. */
#ifndef TFCORE_LR_SCHEDULE_H
#define TFCORE_LR_SCHEDULE_H

#include <stdint.h>

#include "training_args.h" /* tf_lr_scheduler: linear, constant, constant_with_warmup, cosine */

typedef struct tf_lr_schedule {
    tf_lr_scheduler kind;
    double base_lr;
    int64_t warmup_steps, total_steps;
} tf_lr_schedule;

/* The learning rate used by optimizer step `step` (0-based). After k steps,
 * Trainer logs tf_lr_at(s, k) as "learning_rate". */
double tf_lr_at(const tf_lr_schedule *s, int64_t step);

#endif
