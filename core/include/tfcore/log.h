/* tfcore/log.h — one logger for the core and every plugin.
 *
 * Lines go to stderr as "tfcore: <level>: <message>" (the level is left out
 * for info). In multi-worker runs the launcher sets a rank prefix so each line
 * reads "[rank 2] tfcore: ...". Thread-safe: one line is written whole.
 */
#ifndef TFCORE_LOG_H
#define TFCORE_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_log_level {
    TF_LOG_DEBUG = 0,
    TF_LOG_INFO = 1,
    TF_LOG_WARN = 2,
    TF_LOG_ERROR = 3,
    TF_LOG_QUIET = 4 /* as a threshold: print nothing */
} tf_log_level;

void tf_log(tf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define tf_debug(...) tf_log(TF_LOG_DEBUG, __VA_ARGS__)
#define tf_info(...) tf_log(TF_LOG_INFO, __VA_ARGS__)
#define tf_warn(...) tf_log(TF_LOG_WARN, __VA_ARGS__)

/* Messages below `level` are dropped. Default TF_LOG_INFO, or the value of
 * $TFCORE_LOG (debug, info, warn, error, quiet) read at first use. */
void tf_log_set_level(tf_log_level level);
tf_log_level tf_log_get_level(void);
/* A prefix put before every line the CALLING THREAD logs, e.g. "[rank 2] ";
 * NULL for none. Copied. (Per thread, so worker threads of one process each
 * carry their rank; a forked process keeps its forking thread's prefix.) */
void tf_log_set_prefix(const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
