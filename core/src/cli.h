/* cli.h — the tfcore command's verbs. Each takes argv with argv[0] = the verb
 * and returns the process exit code (TF_EXIT_* = tf_status values). */
#ifndef TFCORE_CLI_H
#define TFCORE_CLI_H

#include "tfcore/error.h"

int tf_cli_train(int argc, char **argv);
int tf_cli_plugins(int argc, char **argv);
int tf_cli_bench(int argc, char **argv);
int tf_cli_predict(int argc, char **argv);
int tf_cli_squad_eval(int argc, char **argv);
int tf_cli_tokenize(int argc, char **argv);
int tf_cli_report(int argc, char **argv);
int tf_cli_download(int argc, char **argv);

/* Print "tfcore: <message>" for err and return its exit code. */
int tf_cli_fail(const tf_error *err);
/* Print "tfcore VERB: <message>" and return TF_ERR_USAGE. */
int tf_cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
