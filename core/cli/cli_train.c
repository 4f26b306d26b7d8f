/* cli_train.c — `tfcore [train] -c FILE [-o k=v]... [--dry-run]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_launch.h"
#include "stop_signal.h"
#include "launch.h"
#include "plan.h"
#include "stack.h"
#include "trainer_strategy.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore [train] -c FILE [-o section.key=value]... [--dry-run]\n"
            "  -c, --config FILE  the experiment (libconfig; @include allowed)\n"
            "  -o KEY=VALUE       override one setting, e.g. -o training.learning_rate=3e-5\n"
            "                     (repeatable; applied before anything is checked)\n"
            "  --dry-run          find and check every plugin and key, print the resolved\n"
            "                     config, and exit without training\n");
}

int tf_cli_train(int argc, char **argv)
{
    const char *config = NULL;
    int dry_run = 0;
    char **overrides = calloc((size_t)argc, sizeof *overrides);
    size_t nover = 0;
    if (!overrides) return TF_ERR_RUNTIME;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(a, "-o") == 0 && i + 1 < argc) {
            overrides[nover++] = argv[++i];
        } else if (strncmp(a, "-o", 2) == 0 && a[2]) {
            overrides[nover++] = argv[i] + 2;
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            goto out;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--config") == 0) {
            rc = tf_cli_usage_error("train", "%s needs a value", a);
            goto out;
        } else {
            rc = tf_cli_usage_error("train", "unknown argument '%s'", a);
            goto out;
        }
    }
    if (!config) {
        rc = tf_cli_usage_error("train", "no config file given (-c FILE)");
        goto out;
    }
    tf_error err = {0};
    tf_plan plan;
    tf_launch_cmd cmd = tf_cli_launch_cmd(argc, argv);
    if (tf_plan_resolve(&plan, config, overrides, nover, NULL, 0, &err)) {
        /* a GPU config on a machine without one: say which config runs here */
        if (err.code == TF_ERR_PLUGIN && strstr(err.msg, "cannot run here")) tf_cli_hint_cpu_config(config, &err);
        rc = tf_cli_fail(&err);
        goto out;
    }
    if (dry_run) {
        if (tf_launch_check_devices(&plan, &cmd, &err) || tf_stack_check_precision(&plan, &err)) {
            rc = tf_cli_fail(&err);
            tf_plan_free(&plan);
            goto out;
        }
        printf("# tfcore --dry-run: %s resolved; every plugin and key checked\n", config);
        tf_plan_print_plugins(&plan, stdout);
        if (tf_pipeline_print_plan(&plan, stdout, &err) || tf_zero_print_shards(&plan, stdout, &err)) {
            rc = tf_cli_fail(&err);
            tf_plan_free(&plan);
            goto out;
        }
        tf_config_dump(plan.cfg, stdout);
    } else if (tf_launch_train(&plan, &cmd, &err)) {
        /* an empty message: the failing worker printed its error itself */
        rc = err.msg[0] ? tf_cli_fail(&err) : (int)err.code;
    } else if (tf_stop_was_stopped()) {
        rc = TF_EXIT_STOPPED; /* a signal stopped it after a checkpoint: requeue */
    }
    tf_plan_free(&plan);
out:
    free(overrides);
    return rc;
}
