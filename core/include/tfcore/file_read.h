/* tfcore/file_read.h — opening an input file (config, data, checkpoint,
 * vocabulary, plugin) so that a FIFO, a directory or a device given by
 * mistake is one clear error instead of a read that blocks forever or
 * fails deep inside a parser. Every reader of a named file goes through
 * here; "-" (stdin) is the caller's business where it is documented. */
#ifndef TFCORE_FILE_READ_H
#define TFCORE_FILE_READ_H

#include <stdio.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open `path` read-only (O_CLOEXEC) as a regular file: the open itself is
 * non-blocking (a FIFO with no writer would otherwise block in open or in the
 * first read), the type is checked with fstat before anything is read, and
 * O_NONBLOCK is cleared again. Symbolic links are followed (the Hugging Face
 * cache's model folders are links to blobs); the file they name must be
 * regular. On failure *fd is -1 and err says
 * "PATH: cannot open WHAT: <reason>" ("PATH: cannot open: <reason>" when
 * what is NULL) or "PATH: not a regular file (fifo)"
 * (directory, fifo, socket, character device, block device), with `code`. */
tf_status tf_file_open_read(const char *path, const char *what, tf_status code, int *fd,
                            tf_error *err);

/* The same as a stdio stream ("rb"). */
tf_status tf_file_fopen_read(const char *path, const char *what, tf_status code, FILE **f,
                             tf_error *err);

/* Check only (for readers that take a path, such as dlopen or libconfig):
 * open, check and close. */
tf_status tf_file_check_regular(const char *path, const char *what, tf_status code,
                                tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
