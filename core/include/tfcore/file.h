/* tfcore/file.h — writing output files so that a crash never leaves a
 * half-written one: checkpoints, models, results, predictions. */
#ifndef TFCORE_FILE_H
#define TFCORE_FILE_H

#include <stddef.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One piece of a file's content. */
typedef struct tf_file_part {
    const void *data;
    size_t size;
} tf_file_part;

/* Write parts[0..n) one after the other to `path` atomically: into
 * PATH.tmp.<pid> (created with O_EXCL; a stale one of this process is
 * replaced), fsync, rename over PATH, fsync its folder. On failure the
 * temporary file is removed and an existing PATH is left as it was; the
 * message, "cannot write PATH: ...", names the temporary file and, for a
 * failed write, the byte where the part being written starts. */
tf_status tf_file_write_atomic(const char *path, const tf_file_part *parts, size_t n, tf_error *err);

/* The same for one NUL-terminated text. */
tf_status tf_file_write_text_atomic(const char *path, const char *text, tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
