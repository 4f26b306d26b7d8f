/* cli.h — the tfcore command's verbs. Each takes argv with argv[0] = the verb
 * and returns the process exit code (TF_EXIT_* = tf_status values). */
#ifndef TFCORE_CLI_H
#define TFCORE_CLI_H

#include "tfcore/error.h"

int tf_cli_train(int argc, char **argv);
int tf_cli_plugins(int argc, char **argv);
int tf_cli_bench(int argc, char **argv);
int tf_cli_eval(int argc, char **argv);
int tf_cli_predict(int argc, char **argv);
int tf_cli_squad_eval(int argc, char **argv);
int tf_cli_tokenize(int argc, char **argv);
int tf_cli_report(int argc, char **argv);
int tf_cli_download(int argc, char **argv);

/* Print "tfcore: <message>" for err and return its exit code. */
int tf_cli_fail(const tf_error *err);
/* Print "tfcore VERB: <message>" and return TF_ERR_USAGE. */
int tf_cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write text[len] to a verb's output path: "-" is stdout, anything else goes
 * through tf_file_write_atomic (devices and FIFOs written through, links and
 * other non-regular files never replaced). */
tf_status tf_cli_write_output(const char *path, const char *text, size_t len, tf_error *err);
/* TF_ERR_USAGE, "WHAT OUTPUT is the input X itself; ...", when output is the
 * same file (st_dev and st_ino, so links and other names count) as one of
 * inputs[0..n) (NULL entries skipped). */
tf_status tf_cli_check_not_input(const char *what, const char *output, const char *const *inputs, size_t n,
                                 tf_error *err);

#endif
