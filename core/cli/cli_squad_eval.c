/* cli_squad_eval.c — `tfcore squad-eval`: the official SQuAD evaluation.
 *
 *   tfcore squad-eval DATA.json PREDICTIONS.json [--na-prob NA.json]
 *                     [--na-prob-thresh T] [--out FILE]
 *
 * Prints what evaluate-v2.0.py (or evaluate-v1.1.py, for a v1.1 file)
 * prints for the same files, byte for byte: v2 as json.dumps(d, indent=2),
 * v1.1 as json.dumps(d), each with a newline. --out FILE writes json.dump(d, f)
 * instead (no indent, no newline), as the v2 script's --out-file does.
 * Warnings (missing predictions, misaligned answers) go to stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tfcore/log.h"
#include "tfcore/squad.h"

static const char *const usage_text =
    "usage: tfcore squad-eval DATA.json PREDICTIONS.json [--na-prob NA.json]\n"
    "                         [--na-prob-thresh T] [--out FILE]\n"
    "\n"
    "Score SQuAD predictions exactly as the official evaluate-v2.0.py does (or\n"
    "evaluate-v1.1.py, for a v1.1 data file) and print its JSON.\n"
    "\n"
    "  DATA.json            the SQuAD file (dev-v2.0.json, dev-v1.1.json, ...)\n"
    "  PREDICTIONS.json     {\"question id\": \"predicted answer\", ...}\n"
    "  --na-prob NA.json    {\"question id\": no-answer probability, ...} (v2): adds\n"
    "                       best_exact, best_exact_thresh, best_f1, best_f1_thresh\n"
    "  --na-prob-thresh T   a question whose no-answer probability is > T counts as\n"
    "                       answered \"\" (default 1.0)\n"
    "  --out FILE           write the JSON to FILE (one line, no newline) instead of\n"
    "                       printing it (\"-\": stdout); never one of the inputs\n"
    "\n"
    "exit codes: 0 ok, 1 I/O error, 2 usage error, 5 bad input file\n";

/* float(T) as Python reads it, minus the rare forms (underscores) */
static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s) return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end != '\0' || (errno == ERANGE && isinf(v))) return -1;
    *out = v;
    return 0;
}

/* "--name VALUE" or "--name=VALUE": the value, or NULL when this is not
 * that option; *missing = 1 when it is but has no value. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int write_result(const tf_squad_result *r, const char *out_path)
{
    char text[TF_SQUAD_JSON_MAX];
    if (!out_path) {
        tf_squad_json_style style =
            r->version == TF_SQUAD_V2 ? TF_SQUAD_JSON_INDENT2 : TF_SQUAD_JSON_COMPACT;
        tf_squad_result_format(r, style, text, sizeof text);
        printf("%s\n", text);
        if (fflush(stdout) != 0) {
            tf_error err;
            tf_error_set(&err, TF_ERR_RUNTIME, "squad-eval: writing the result: %s",
                         strerror(errno));
            return tf_cli_fail(&err);
        }
        return 0;
    }
    size_t len = tf_squad_result_format(r, TF_SQUAD_JSON_COMPACT, text, sizeof text);
    tf_error err;
    if (tf_cli_write_output(out_path, text, len, &err) != TF_OK) return tf_cli_fail(&err);
    return 0;
}

int tf_cli_squad_eval(int argc, char **argv)
{
    const char *verb = "squad-eval";
    const char *pos[2] = {NULL, NULL};
    const char *na_path = NULL, *out_path = NULL, *thresh_text = NULL;
    int npos = 0, only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (!only_positional && a[0] == '-' && a[1] != '\0') {
            if (strcmp(a, "--") == 0) {
                only_positional = 1;
            } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                fputs(usage_text, stdout);
                return 0;
            } else if ((v = option_value(argc, argv, &i, "--na-prob-thresh", &missing))) {
                thresh_text = v;
            } else if (!missing && (v = option_value(argc, argv, &i, "--na-prob", &missing))) {
                na_path = v;
            } else if (!missing && (v = option_value(argc, argv, &i, "--out", &missing))) {
                out_path = v;
            } else if (missing) {
                return tf_cli_usage_error(verb, "%s needs a value", a);
            } else {
                return tf_cli_usage_error(verb, "unknown option '%s'", a);
            }
            continue;
        }
        if (npos == 2) return tf_cli_usage_error(verb, "unexpected argument '%s'", a);
        pos[npos++] = a;
    }
    if (npos < 2)
        return tf_cli_usage_error(verb, "needs DATA.json and PREDICTIONS.json (%d given)", npos);
    tf_squad_eval_options opt = TF_SQUAD_EVAL_OPTIONS_DEFAULT;
    if (thresh_text && parse_double(thresh_text, &opt.na_prob_thresh) != 0)
        return tf_cli_usage_error(verb, "--na-prob-thresh: '%s' is not a number", thresh_text);

    tf_error err = {0};
    const char *inputs[3] = {pos[0], pos[1], na_path};
    if (out_path && tf_cli_check_not_input("--out", out_path, inputs, 3, &err) != TF_OK)
        return tf_cli_fail(&err);
    tf_squad_dataset *ds = NULL;
    tf_squad_predictions preds = {0};
    tf_squad_na_probs na = {0};
    tf_squad_result res;
    int rc;
    if (tf_squad_load(pos[0], &ds, &err) != TF_OK ||
        tf_squad_load_predictions(pos[1], &preds, &err) != TF_OK ||
        (na_path && tf_squad_load_na_probs(na_path, &na, &err) != TF_OK)) {
        rc = tf_cli_fail(&err);
        goto out;
    }
    if (ds->version == TF_SQUAD_V1 && (na_path || thresh_text))
        tf_warn("%s is SQuAD v1.1: --na-prob and --na-prob-thresh apply to v2.0 only and are "
                "ignored",
                pos[0]);
    if (tf_squad_evaluate(ds, preds.items, preds.n, na_path ? na.items : NULL, na.n, &opt, &res,
                          &err) != TF_OK) {
        rc = tf_cli_fail(&err);
        goto out;
    }
    rc = write_result(&res, out_path);
out:
    tf_squad_free(ds);
    tf_squad_predictions_free(&preds);
    tf_squad_na_probs_free(&na);
    return rc;
}
