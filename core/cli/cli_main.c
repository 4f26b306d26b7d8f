/* cli_main.c — `tfcore`: the verb dispatcher, --help and --version. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>

#include "cli.h"
#include "tfcore/config.h"
#include "tfcore/log.h"
#include "tfcore/plugin.h"

#ifndef PACKAGE_VERSION
#include "config.h"
#endif


typedef struct cli_verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_verb;

static const cli_verb verbs[] = {
    {"train", tf_cli_train, "fine-tune as the config says (the default verb)"},
    {"plugins", tf_cli_plugins, "list the plugins found, rejected, or unable to run here"},
    {"eval", tf_cli_eval, "evaluate a saved or named model on a config's eval split (results.json)"},
    {"predict", tf_cli_predict, "run a model on JSONL inputs and write logits/labels"},
    {"bench", tf_cli_bench, "time full training steps (samples/s, GFLOP/s, peak memory)"},
    {"tokenize", tf_cli_tokenize, "tokenize stdin lines with a WordPiece vocab, one JSON array per line"},
    {"squad-eval", tf_cli_squad_eval, "score SQuAD predictions exactly as the official script"},
    {"download", tf_cli_download, "fetch models by Hugging Face name, and datasets (imdb, squad), into the caches"},
    {"report", tf_cli_report, "compare runs' results.json as a Markdown table / SVG chart"},
};
#define NVERBS (sizeof verbs / sizeof verbs[0])

static void print_help(FILE *out)
{
    fprintf(out,
            "usage: tfcore [train] -c FILE [-o section.key=value]... [--dry-run]\n"
            "       tfcore VERB [options]      (tfcore VERB --help for each)\n"
            "       tfcore --version | --help\n"
            "\n"
            "Fine-tune transformer encoders; the config file picks the model, data, backend,\n"
            "communication strategy and precision plugins.\n"
            "\nverbs:\n");
    for (size_t i = 0; i < NVERBS; i++)
        fprintf(out, "  %-11s %s%s\n", verbs[i].name, verbs[i].summary,
                verbs[i].run ? "" : " (not in this version yet)");
    fprintf(out,
            "\nexit codes:\n"
            "  0  success\n"
            "  1  runtime error (numeric failure, device, out of memory, I/O)\n"
            "  2  usage error (command line)\n"
            "  3  config error (file or -o override)\n"
            "  4  plugin error (missing, rejected, or cannot run here)\n"
            "  5  data error (dataset, checkpoint or input file)\n"
            "\nenvironment:\n"
            "  TFCORE_PLUGIN_PATH  colon-separated plugin folders searched before the built-in ones\n"
            "  TFCORE_LOG          debug | info | warn | error | quiet\n"
            "  HF_HUB_CACHE, HF_HOME, HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE\n"
            "                      models by name, as huggingface_hub reads them (tfcore download --help)\n"
            "  TFCORE_CACHE, TFCORE_OFFLINE\n"
            "                      datasets by name (data.path = \"imdb\"): $TFCORE_CACHE/datasets,\n"
            "                      default ~/.cache/tfcore/datasets\n");
}

/* Every verb's output goes to stdout through stdio, so a failed write (a
 * full disk, /dev/full) shows only when the buffer is flushed: check it once
 * here, on the way out. Closing an already closed stdout with nothing to
 * write (`tfcore --dry-run >&-`) is not an error, as in GNU's close_stdout.
 * A verb that failed already said why (some check their own writes). */
static int finish_stdout(int rc)
{
    bool pending = __fpending(stdout) != 0;
    bool failed_before = ferror(stdout) != 0;
    errno = 0;
    bool close_failed = fclose(stdout) != 0;
    int e = errno;
    if (rc == 0 && (failed_before || (close_failed && (pending || e != EBADF)))) {
        if (e)
            fprintf(stderr, "tfcore: cannot write the output to standard output: %s\n", strerror(e));
        else
            fprintf(stderr, "tfcore: cannot write the output to standard output: write error\n");
        return TF_ERR_RUNTIME;
    }
    return rc;
}

static int run(int argc, char **argv);

int main(int argc, char **argv) { return finish_stdout(run(argc, argv)); }

static int run(int argc, char **argv)
{
    tf_log_get_level(); /* reads $TFCORE_LOG now: a bad value is warned about whatever the verb logs */
    if (argc < 2) {
        print_help(stderr);
        return TF_ERR_USAGE;
    }
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
        print_help(stdout);
        return 0;
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
        printf("tfcore %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, TF_ABI_MAJOR, TF_ABI_MINOR);
        return 0;
    }
    /* `tfcore -c FILE ...` is `tfcore train -c FILE ...` */
    if (a[0] == '-') {
        argv[0] = "train";
        return tf_cli_train(argc, argv);
    }
    const char *names[NVERBS];
    for (size_t i = 0; i < NVERBS; i++) {
        names[i] = verbs[i].name;
        if (strcmp(a, verbs[i].name) != 0) continue;
        if (!verbs[i].run) {
            fprintf(stderr, "tfcore %s: not available in tfcore %s yet\n", a, PACKAGE_VERSION);
            return TF_ERR_USAGE;
        }
        return verbs[i].run(argc - 1, argv + 1);
    }
    const char *close = tf_closest(a, names, NVERBS);
    fprintf(stderr, "tfcore: unknown verb '%s'%s%s%s (see tfcore --help)\n", a,
            close ? " (did you mean '" : "", close ? close : "", close ? "'?)" : "");
    return TF_ERR_USAGE;
}
