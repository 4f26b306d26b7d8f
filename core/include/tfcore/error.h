/* tfcore/error.h — how libtfcore and plugins report failure.
 *
 * Library code never exits and never prints an error itself: it returns a
 * tf_status and fills a tf_error with one line saying what went wrong and
 * where (file:line, tensor name, byte offset). The CLI prints that line and
 * turns the status into the process exit code (TF_EXIT_* below).
 */
#ifndef TFCORE_ERROR_H
#define TFCORE_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes; each maps to one documented exit code of the CLI. */
typedef enum tf_status {
    TF_OK = 0,
    TF_ERR_RUNTIME = 1, /* numeric failure, device error, I/O error, out of memory */
    TF_ERR_USAGE = 2,   /* bad command line */
    TF_ERR_CONFIG = 3,  /* config file or -o override is wrong */
    TF_ERR_PLUGIN = 4,  /* a plugin is missing, rejected, or cannot run here */
    TF_ERR_DATA = 5     /* dataset, checkpoint or input file is unreadable or malformed */
} tf_status;

#define TF_ERROR_MSG_MAX 1024

typedef struct tf_error {
    tf_status code;
    char msg[TF_ERROR_MSG_MAX]; /* one line, no trailing newline */
} tf_error;

/* Fill err (if not NULL) and return code. Later calls overwrite earlier ones. */
tf_status tf_error_set(tf_error *err, tf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Put "prefix: " in front of the message already in err (keeps the code). */
void tf_error_prefix(tf_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void tf_error_clear(tf_error *err);

/* "runtime", "usage", "config", "plugin", "data" */
const char *tf_status_name(tf_status code);

#ifdef __cplusplus
}
#endif
#endif
