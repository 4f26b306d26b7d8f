/* log.c — the shared logger (see tfcore/log.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tfcore/log.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1; /* -1: not yet read from $TFCORE_LOG */
/* Per thread: the launcher names each worker thread (comm-dp-master's
 * replicas) with its own prefix; a forked worker inherits the forking
 * thread's. */
static _Thread_local char log_prefix[64];

/* The level $TFCORE_LOG names; *unknown when it names none (then info). */
static tf_log_level level_from_env(bool *unknown)
{
    const char *v = getenv("TFCORE_LOG");
    if (!v) return TF_LOG_INFO;
    static const char *names[] = {"debug", "info", "warn", "error", "quiet"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(v, names[i]) == 0) return (tf_log_level)i;
    *unknown = true;
    return TF_LOG_INFO;
}

tf_log_level tf_log_get_level(void)
{
    bool unknown = false;
    pthread_mutex_lock(&log_lock);
    if (log_level < 0) log_level = level_from_env(&unknown);
    tf_log_level l = (tf_log_level)log_level;
    pthread_mutex_unlock(&log_lock);
    if (unknown) /* once: the level is set now */
        tf_warn("TFCORE_LOG='%.40s' is not a log level (debug, info, warn, error, quiet); logging at info",
                getenv("TFCORE_LOG"));
    return l;
}

void tf_log_set_level(tf_log_level level)
{
    pthread_mutex_lock(&log_lock);
    log_level = level;
    pthread_mutex_unlock(&log_lock);
}

void tf_log_set_prefix(const char *prefix)
{
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix ? prefix : "");
}


void tf_log(tf_log_level level, const char *fmt, ...)
{
    if (level < tf_log_get_level()) return;
    static const char *tags[] = {"debug: ", "", "warning: ", "error: "};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%stfcore: %s%s\n", log_prefix, tags[level <= TF_LOG_ERROR ? level : 3], line);
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
}
