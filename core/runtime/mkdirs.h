/* mkdirs.h — creating a folder and its parents for the runtime's outputs. */
#ifndef TFCORE_MKDIRS_H
#define TFCORE_MKDIRS_H

#include "tfcore/error.h"

/* mkdir -p: path and every missing parent (0777 less the umask). */
tf_status tf_mkdirs(const char *path, tf_error *err);

#endif
