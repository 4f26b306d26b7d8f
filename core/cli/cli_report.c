/* cli_report.c — `tfcore report`: compare runs as the hands-on's table.
 *
 *   tfcore report RUN_DIR... [--baseline N|RUN_DIR] [--metric NAME]
 *                 [--json] [-o FILE] [--svg FILE]
 *
 * Reads RUN_DIR/results.json of every run first; any missing or malformed
 * one is one line "tfcore report: RUN_DIR/results.json: ..." and exit 5, and
 * nothing is written. Then prints the table (Markdown, or JSON with --json)
 * to stdout or -o FILE, and draws the chart into --svg FILE; files are
 * written atomically (tfcore/file.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report_table.h"
#include "tfcore/file.h"

static const char *const usage_text =
    "usage: tfcore report RUN_DIR... [--baseline N|RUN_DIR] [--metric NAME]\n"
    "                     [--json] [-o FILE] [--svg FILE]\n"
    "\n"
    "Compare training runs: read each RUN_DIR/results.json (the output_dir of a\n"
    "tfcore run) and print a Markdown table, one row per run: run, config, comm,\n"
    "world, precision, train_runtime (s), speedup, samples/s, exposed comm %\n"
    "(the share of train_runtime spent waiting for gradient communication) and\n"
    "an evaluation metric. A value a run did not record shows as \xe2\x80\x94.\n"
    "Tables of memory by category, pipelines, and statistical efficiency and\n"
    "goodput (the gradient noise scale) follow for the runs that recorded them.\n"
    "\n"
    "  --baseline N|RUN_DIR  the run speedups are relative to: its position (1 =\n"
    "                        the first RUN_DIR, the default) or its folder\n"
    "  --metric NAME         the last column: any number in results.json\n"
    "                        (default: eval_accuracy, else eval_f1, else eval_loss)\n"
    "  --json                the table as JSON instead of Markdown\n"
    "  -o, --out FILE        write the table to FILE instead of stdout (\"-\": stdout)\n"
    "  --svg FILE            also draw the comparison as an SVG chart: train_runtime\n"
    "                        and speedup per run, and each run's time per phase\n"
    "                        (\"-\": stdout)\n"
    "\n"
    "exit codes: 0 ok, 1 cannot write an output, 2 usage error,\n"
    "            5 a results.json is missing or malformed\n";

/* "--name VALUE" or "--name=VALUE" (also "-o VALUE" for short names): the
 * value, or NULL when argv[*i] is not that option; *missing = 1 when it is
 * but has no value. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=' && name[1] == '-') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

/* The run --baseline names: a 1-based position or one of the folders
 * (compared after resolving both, so "runs/a/" and "./runs/a" match). */
static int find_baseline(const char *want, char **dirs, size_t n, size_t *out)
{
    if (want[0] && strspn(want, "0123456789") == strlen(want)) {
        char *end;
        unsigned long long k = strtoull(want, &end, 10);
        if (k < 1 || k > n) return tf_cli_usage_error("report", "--baseline %s: there %s %zu run%s", want,
                                                      n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
        *out = (size_t)(k - 1);
        return 0;
    }
    char *w = realpath(want, NULL);
    for (size_t i = 0; i < n; i++) {
        char *d = w ? realpath(dirs[i], NULL) : NULL;
        bool same = (w && d && strcmp(w, d) == 0) || strcmp(want, dirs[i]) == 0;
        free(d);
        if (same) {
            free(w);
            *out = i;
            return 0;
        }
    }
    free(w);
    return tf_cli_usage_error("report", "--baseline %s is not one of the runs given", want);
}

static int write_output(const char *path, const char *text)
{
    if (!path || strcmp(path, "-") == 0) {
        fputs(text, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "tfcore report: cannot write the table to stdout\n");
            return TF_ERR_RUNTIME;
        }
        return 0;
    }
    tf_error err = {0};
    if (tf_file_write_text_atomic(path, text, &err)) {
        fprintf(stderr, "tfcore report: %s\n", err.msg);
        return TF_ERR_RUNTIME;
    }
    return 0;
}

int tf_cli_report(int argc, char **argv)
{
    const char *baseline = NULL, *metric = NULL, *svg_path = NULL, *out_path = NULL;
    int json = 0, rc = 0;
    char **dirs = calloc((size_t)argc, sizeof *dirs);
    tf_report_run *runs = calloc((size_t)argc, sizeof *runs);
    size_t n = 0, nread = 0;
    char *table = NULL, *svg = NULL;
    if (!dirs || !runs) {
        fprintf(stderr, "tfcore report: out of memory\n");
        rc = TF_ERR_RUNTIME;
        goto out;
    }
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (options_done || a[0] != '-' || strcmp(a, "-") == 0) {
            dirs[n++] = argv[i];
        } else if (strcmp(a, "--") == 0) {
            options_done = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            goto out;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if ((v = option_value(argc, argv, &i, "--baseline", &missing)) || missing) {
            baseline = v;
        } else if ((v = option_value(argc, argv, &i, "--metric", &missing)) || missing) {
            metric = v;
        } else if ((v = option_value(argc, argv, &i, "--svg", &missing)) || missing) {
            svg_path = v;
        } else if ((v = option_value(argc, argv, &i, "--out", &missing)) || missing ||
                   (v = option_value(argc, argv, &i, "-o", &missing)) || missing) {
            out_path = v;
        } else {
            rc = tf_cli_usage_error("report", "unknown option '%s'", a);
            goto out;
        }
        if (missing) {
            rc = tf_cli_usage_error("report", "%s needs a value", a);
            goto out;
        }
    }
    if (n == 0) {
        rc = tf_cli_usage_error("report", "no run folders given (RUN_DIR...)");
        goto out;
    }
    size_t base = 0;
    if (baseline && (rc = find_baseline(baseline, dirs, n, &base))) goto out;

    /* every run first: a bad one stops everything before any output */
    for (; nread < n; nread++) {
        tf_error err = {0};
        if (tf_report_read_run(dirs[nread], &runs[nread], &err)) {
            fprintf(stderr, "tfcore report: %s\n", err.msg);
            rc = err.code;
            goto out;
        }
    }
    if (metric && !tf_report_has_metric(runs, n, metric)) {
        const char *near = tf_report_closest_metric(runs, n, metric);
        rc = tf_cli_usage_error("report", "--metric %s: no run has that number in its results.json%s%s%s", metric,
                                near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        goto out;
    }
    tf_report r = {runs, n, base, metric ? metric : tf_report_default_metric(runs, n)};
    table = json ? tf_report_json(&r) : tf_report_markdown(&r);
    svg = svg_path ? tf_report_svg(&r) : NULL;
    if (!table || (svg_path && !svg)) {
        fprintf(stderr, "tfcore report: out of memory\n");
        rc = TF_ERR_RUNTIME;
        goto out;
    }
    if (svg_path && (rc = write_output(svg_path, svg))) goto out;
    rc = write_output(out_path, table);
out:
    for (size_t i = 0; i < nread; i++) tf_report_run_free(&runs[i]);
    free(runs);
    free(dirs);
    free(table);
    free(svg);
    return rc;
}
