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
 * failed write, the byte where the part being written starts.
 *
 * An existing PATH that is not a regular file is never replaced:
 *  - a character device or FIFO (/dev/null, a named pipe) is written
 *    through: opened and written, no temporary file, no rename;
 *  - a symbolic link to a regular file: the file it resolves to is replaced
 *    atomically (temporary file beside it), the link stays;
 *  - a link to a device or FIFO is written through; anything else (a
 *    folder, a block device, a socket, a dangling link) is refused with
 *    "cannot write PATH: it is ...; not replacing it". */
tf_status tf_file_write_atomic(const char *path, const tf_file_part *parts, size_t n, tf_error *err);

/* The same for one NUL-terminated text. */
tf_status tf_file_write_text_atomic(const char *path, const char *text, tf_error *err);

/* rm -r that never follows a symbolic link: PATH itself, when it is a link
 * or any other non-folder, is unlinked (a link's target is untouched); a
 * folder is first renamed to .NAME.deleting-<pid> in its parent (so an
 * interrupted removal never leaves a half-emptied folder under its own
 * name), then emptied through directory descriptors (openat with
 * O_NOFOLLOW, unlinkat) and removed. Nothing outside PATH's tree is
 * touched: links inside it are removed as links, and a name that turns into
 * a link between the listing and the removal is unlinked, not entered. A
 * missing PATH is TF_OK. On failure: "cannot remove PATH: ..." with the
 * entry that failed. */
tf_status tf_file_remove_tree(const char *path, tf_error *err);

/* Put the complete folder NEW (a sibling of DIR, e.g. DIR.tmp) in DIR's
 * place without ever removing DIR before NEW is there: an existing DIR is
 * renamed to .NAME.replaced-<pid> in its parent, NEW is renamed to DIR (if
 * that fails the old DIR is renamed back and NEW stays), the parent is
 * fsynced, then the old folder is removed as tf_file_remove_tree does. */
tf_status tf_file_replace_dir(const char *new_dir, const char *dir, tf_error *err);

/* Tidy what an interrupted tf_file_remove_tree / tf_file_replace_dir left
 * in folder DIR (never following links): .NAME.deleting-<pid> folders are
 * removed; .NAME.replaced-<pid> is removed when NAME exists, else renamed
 * back to NAME (the replacement never got in, so the old folder is restored).
 * *n_tidied (may be NULL) counts what was tidied. */
tf_status tf_file_tidy_dir(const char *dir, int *n_tidied, tf_error *err);

#ifdef __cplusplus
}
#endif
#endif
