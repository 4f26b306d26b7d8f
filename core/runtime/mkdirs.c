/* mkdirs.c — mkdir -p (mkdirs.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mkdirs.h"

tf_status tf_mkdirs(const char *path, tf_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return tf_error_set(err, TF_ERR_RUNTIME, "path too long: %s", path);
    for (char *p = tmp + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot create folder %s: %s", tmp, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return TF_OK;
}
