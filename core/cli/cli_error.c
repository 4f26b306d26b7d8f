/* cli_error.c — how every verb reports a failure: one line on stderr and
 * the exit status (cli.h). */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

int tf_cli_fail(const tf_error *err)
{
    fprintf(stderr, "tfcore: %s\n", err->msg[0] ? err->msg : tf_status_name(err->code));
    return err->code ? (int)err->code : 1;
}

int tf_cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tfcore %s: ", verb);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see tfcore %s --help)\n", verb);
    va_end(ap);
    return TF_ERR_USAGE;
}
