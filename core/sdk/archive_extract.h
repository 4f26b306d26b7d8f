/* archive_extract.h — unpacking a downloaded dataset archive (tar, tar.gz,
 * zip: whatever libarchive reads) into a fresh folder, refusing anything that
 * could write outside it or fill the disk. Internal to libtfcore
 * (dataset_fetch.c) and the fuzz target. */
#ifndef TFCORE_ARCHIVE_EXTRACT_H
#define TFCORE_ARCHIVE_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfcore/error.h"

typedef struct archive_limits {
    uint64_t max_bytes;   /* total bytes of file contents */
    uint64_t max_entries; /* entries of any kind */
} archive_limits;

/* The limits TFCORE_DATASET_MAX_BYTES / TFCORE_DATASET_MAX_ENTRIES set
 * (defaults 4 GB and 1,000,000: aclImdb is about 0.5 GB in 100,000 files). */
tf_status archive_limits_from_env(archive_limits *lim, tf_error *err);

/* Unpack the file `archive` into the folder `dest`, which must exist and be
 * empty; messages name the archive as `what` (its URL, say).
 * Regular files and folders are written (modes 0644 / 0755, owners and
 * special bits ignored); a symbolic link whose target stays inside dest, and
 * a hard link to a regular file unpacked before it, are kept. Refused, with
 * one TF_ERR_DATA line naming the archive and the entry: an absolute name, a
 * ".." component, a link pointing outside dest, a name that passes through a
 * link, a device, FIFO or socket, an entry given twice, more than
 * lim->max_entries entries or lim->max_bytes bytes, a damaged archive. On an
 * error dest may hold part of the tree: the caller removes it. */
tf_status archive_extract(const char *archive, const char *what, const char *dest,
                          const archive_limits *lim, tf_error *err);

/* The same from memory (the fuzz target). */
tf_status archive_extract_memory(const void *data, size_t size, const char *what, const char *dest,
                                 const archive_limits *lim, tf_error *err);

/* A relative name an archive may use: not empty, not absolute, no ".."
 * component, no control bytes. A leading "./" and repeated or trailing '/'
 * are dropped: the cleaned name goes to out (n bytes). */
bool archive_name_clean(const char *name, char *out, size_t n);

/* Does the link at `name` (clean, relative to the root) with target
 * `target` point inside the root? Checked on the names, as the target is
 * read from the link's folder; archive_extract never writes through a link,
 * so the names are what a reader follows. */
bool archive_link_inside(const char *name, const char *target);

/* True when libtfcore was built with libarchive. */
bool archive_can_extract(void);

#endif
