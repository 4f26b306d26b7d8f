/* plan.h — from a config file and -o overrides to the set of plugins a run
 * uses, each checked against its config section, plus the training
 * arguments. `tfcore train --dry-run` stops after this; a real run goes on
 * from here. */
#ifndef TFCORE_PLAN_H
#define TFCORE_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "pipeline.h"
#include "registry.h"
#include "tfcore/config.h"
#include "training_args.h"

/* The config section each kind reads, by kind number. */
extern const char *const tf_kind_section[TF_KIND_MAX + 1];

/* The core's keys of the comm section (the plugin reads the rest). */
typedef struct tf_comm_settings {
    int world_size;          /* comm.world_size: workers in the job (1 without a comm section) */
    double bucket_mb;        /* comm.bucket_mb: gradient bucket size for overlapped all-reduce */
    int zero_stage;          /* comm.zero_stage: 0 (DDP), 1 (optimizer state sharded), 2 (and
                                gradients reduce-scattered); trainer_strategy.h */
    const char *mpirun_args; /* comm.mpirun_args: extra arguments when tfcore re-executes
                                itself under mpirun ("" for none) */
    double mpirun_start_timeout; /* comm.mpirun_start_timeout: seconds mpirun gets to start
                                    every rank on this machine before it is stopped */
    double timeout_s;        /* comm.timeout_s: seconds a rank may wait in one collective
                                before the job is stopped (comm_recorder.h) */
} tf_comm_settings;

/* Read the core's keys of the comm section cs (NULL: none, the defaults of a
 * single-worker run) into out, with their defaults and bounds. The comm
 * plugins never read them; drivers that stand in for the core call this. */
tf_status tf_comm_settings_read(tf_section *cs, tf_comm_settings *out, tf_error *err);

/* The statistics section (docs/PARALLEL.md, "Statistical efficiency and goodput"). */
typedef struct tf_statistics_settings {
    long long reference_batch_size; /* statistics.reference_batch_size: Pollux's M0, the batch the
                                       statistical efficiency is relative to (default
                                       training.per_device_train_batch_size: one worker's batch) */
    double smoothing;               /* statistics.smoothing: the noise scale estimates' moving
                                       average per step (default 0.9) */
} tf_statistics_settings;

typedef struct tf_plan {
    tf_config *cfg;
    tf_registry *reg;
    /* The plugin of each kind, by kind number; comm is NULL for a
     * single-worker run (no comm section), dataset NULL only when resolved
     * with data_optional and no data section. */
    const tf_loaded_plugin *plugin[TF_KIND_MAX + 1];
    tf_training_args training;
    tf_comm_settings comm;
    tf_pipeline_settings pipeline; /* the pipeline section (stages 1 without one) */
    tf_statistics_settings statistics;
    const char *config_file; /* as given on the command line (lives as long as the caller's argv) */
} tf_plan;

/* Load `config_file`, remove the dotted keys in `unsets` (may be NULL),
 * apply `overrides` ("section.key=value"), find and check every plugin, read
 * every key (each plugin's check_config and the training arguments), and
 * fail on any key nobody read. */
tf_status tf_plan_resolve(tf_plan *plan, const char *config_file, char *const *overrides,
                          size_t noverrides, const char *const *unsets, size_t nunsets, tf_error *err);
/* The same for a verb whose input does not come from a dataset plugin
 * (predict): with data_optional, a config without a data section resolves
 * with plugin[TF_KIND_DATASET] NULL; a data section that is there is still
 * checked, so a training config works as it is. */
tf_status tf_plan_resolve_for(tf_plan *plan, const char *config_file, char *const *overrides, size_t noverrides,
                              const char *const *unsets, size_t nunsets, bool data_optional, tf_error *err);
void tf_plan_free(tf_plan *plan);

/* Human-readable summary of the plugins chosen, as libconfig comments. */
void tf_plan_print_plugins(const tf_plan *plan, FILE *out);

#endif
