/* cli_eval.c — `tfcore eval -c FILE [--model DIR_OR_NAME] [-o k=v]... [--dry-run]`:
 * evaluate a saved model (a folder: output_dir, a checkpoint-N) or a model
 * by hub name on the config's eval split, as run_glue / run_qa do with
 * --do_eval and no --do_train.
 *
 * It is the trainer's evaluation, not a second one: the config is resolved
 * with training.do_train = false and do_eval = true (training's
 * resume_from_checkpoint dropped; --model sets model.pretrained and drops
 * model.preset, as predict does) and run through the same launcher, so the
 * metrics are trainer_eval.c's eval_* (squad: the same exact / f1
 * postprocessing), printed as the trainer prints an evaluation and written
 * to output_dir/results.json atomically, with the batch size
 * per_device_eval_batch_size and the config's workers (comm.world_size:
 * the eval split is sharded and gathered as during training). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_launch.h"
#include "launch.h"
#include "plan.h"
#include "stack.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore eval -c FILE [--model DIR_OR_NAME] [-o section.key=value]... [--dry-run]\n"
            "  Evaluates a model on the config's eval split with the Trainer's eval_* metrics\n"
            "  (eval_loss, the dataset's metrics, eval_runtime, ...), prints them and writes\n"
            "  them to training.output_dir/results.json. Nothing is trained or saved.\n"
            "  --model DIR_OR_NAME  the model to evaluate: a saved folder (output_dir,\n"
            "                       output_dir/checkpoint-N) or a hub name; sets model.pretrained\n"
            "                       and drops model.preset (default: the config's model)\n"
            "  -o KEY=VALUE         override one setting (repeatable), e.g.\n"
            "                       -o training.output_dir=runs/eval -o training.per_device_eval_batch_size=64\n"
            "  --dry-run            check every plugin and key, print the resolved config, exit\n");
}

int tf_cli_eval(int argc, char **argv)
{
    const char *config = NULL, *model = NULL;
    int dry_run = 0;
    /* the user's -o, then --model's and the two that make it an evaluation */
    char **ov = calloc((size_t)argc + 3, sizeof *ov);
    size_t nov = 0;
    if (!ov) return TF_ERR_RUNTIME;
    char *model_override = NULL;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && has) config = argv[++i];
        else if (!strcmp(a, "--model") && has) model = argv[++i];
        else if (!strcmp(a, "-o") && has) ov[nov++] = argv[++i];
        else if (!strncmp(a, "-o", 2) && a[2]) ov[nov++] = argv[i] + 2;
        else if (!strcmp(a, "--dry-run")) dry_run = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            goto out;
        } else {
            rc = tf_cli_usage_error("eval", "unknown or incomplete argument '%s'", a);
            goto out;
        }
    }
    if (!config) {
        rc = tf_cli_usage_error("eval", "no config file given (-c FILE)");
        goto out;
    }
    if (model) {
        if (!*model || strchr(model, '"') || strchr(model, '\\')) {
            rc = tf_cli_usage_error("eval", "--model needs a folder or a hub name without quotes or backslashes, got '%s'",
                                    model);
            goto out;
        }
        size_t n = strlen(model) + 32;
        if (!(model_override = malloc(n))) {
            rc = TF_ERR_RUNTIME;
            goto out;
        }
        snprintf(model_override, n, "model.pretrained=\"%s\"", model);
        ov[nov++] = model_override;
    }
    ov[nov++] = "training.do_train=false";
    ov[nov++] = "training.do_eval=true";
    /* evaluation continues nothing; --model replaces the config's model */
    const char *unset[2] = {"training.resume_from_checkpoint", "model.preset"};
    tf_error err = {0};
    tf_plan plan;
    tf_launch_cmd cmd = tf_cli_launch_cmd(argc, argv);
    if (tf_plan_resolve(&plan, config, ov, nov, unset, model ? 2 : 1, &err)) {
        if (err.code == TF_ERR_PLUGIN && strstr(err.msg, "cannot run here")) tf_cli_hint_cpu_config(config, &err);
        rc = tf_cli_fail(&err);
        goto out;
    }
    if (dry_run) {
        if (tf_launch_check_devices(&plan, &cmd, &err) || tf_stack_check_precision(&plan, &err)) {
            rc = tf_cli_fail(&err);
        } else {
            printf("# tfcore eval --dry-run: %s resolved; every plugin and key checked\n", config);
            tf_plan_print_plugins(&plan, stdout);
            tf_config_dump(plan.cfg, stdout);
        }
    } else if (tf_launch_train(&plan, &cmd, &err)) {
        /* an empty message: the failing worker printed its error itself */
        rc = err.msg[0] ? tf_cli_fail(&err) : (int)err.code;
    }
    tf_plan_free(&plan);
out:
    free(model_override);
    free(ov);
    return rc;
}
