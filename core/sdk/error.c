/* error.c — filling tf_error (see tfcore/error.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tfcore/error.h"

tf_status tf_error_set(tf_error *err, tf_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
        /* one line: a newline inside a message would break "one clear line" */
        for (char *p = err->msg; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return code;
}

void tf_error_prefix(tf_error *err, const char *fmt, ...)
{
    if (!err) return;
    char prefix[TF_ERROR_MSG_MAX], old[TF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* truncation is fine: the message stays one bounded line */
    size_t pl = strlen(prefix);
    if (pl > sizeof err->msg - 3) pl = sizeof err->msg - 3;
    memcpy(err->msg, prefix, pl);
    memcpy(err->msg + pl, ": ", 2);
    size_t room = sizeof err->msg - pl - 3, ol = strlen(old);
    if (ol > room) ol = room;
    memcpy(err->msg + pl + 2, old, ol);
    err->msg[pl + 2 + ol] = '\0';
}

void tf_error_clear(tf_error *err)
{
    if (err) {
        err->code = TF_OK;
        err->msg[0] = '\0';
    }
}

const char *tf_status_name(tf_status code)
{
    switch (code) {
    case TF_OK: return "ok";
    case TF_ERR_RUNTIME: return "runtime";
    case TF_ERR_USAGE: return "usage";
    case TF_ERR_CONFIG: return "config";
    case TF_ERR_PLUGIN: return "plugin";
    case TF_ERR_DATA: return "data";
    }
    return "unknown";
}
