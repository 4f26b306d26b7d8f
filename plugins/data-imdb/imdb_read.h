/* imdb_read.h — reading IMDB movie reviews (sentiment, 2 classes) from the
 * three layouts people have them in. Every reader returns the same arrays:
 * texts kept byte for byte (UTF-8, "<br /><br />" left in, as Hugging Face's
 * `imdb` does) and labels 0 = negative, 1 = positive, in a fixed order.
 *
 *   folder  aclImdb_v1: DIR/neg/<id>_<rating>.txt and DIR/pos/<id>_<rating>.txt
 *           (DIR = aclImdb/train or aclImdb/test; unsup/ and other files are
 *           ignored). Order: every neg review, then every pos review (the
 *           order of the Hugging Face `imdb` splits: label 0 first), each
 *           class by ascending numeric <id>, then <rating>.
 *   CSV     header `review,sentiment`, sentiment `positive` or `negative`,
 *           RFC 4180: fields in double quotes may hold commas, newlines and
 *           doubled quotes (""); records end with LF, CRLF or CR; a UTF-8 BOM
 *           before the header is skipped; blank lines are skipped. File order.
 *   JSONL   one object per line: {"text": "...", "label": L} with L one of
 *           0, 1, "neg", "pos", "negative", "positive"; other keys ignored;
 *           blank lines skipped. File order.
 *
 * Errors (TF_ERR_DATA) are one line that says where: "FILE:LINE: row N: ..."
 * for CSV (LINE where the record starts, N counting data rows from 1),
 * "FILE:LINE:COLUMN: <jansson message>" for bad JSON, "FILE: ..." for a
 * file of the folder layout. Texts must be valid UTF-8 without NUL bytes.
 * No reviews at all is an error too.
 */
#ifndef TFCORE_IMDB_READ_H
#define TFCORE_IMDB_READ_H

#include <stddef.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_imdb_data {
    size_t n;
    char **texts;    /* [n] NUL-terminated UTF-8, each its own malloc */
    size_t *lengths; /* [n] bytes of each text */
    int *labels;     /* [n] 0 = negative, 1 = positive */
} tf_imdb_data;

tf_status tf_imdb_read_folder(const char *dir, tf_imdb_data *out, tf_error *err);
tf_status tf_imdb_read_csv(const char *path, tf_imdb_data *out, tf_error *err);
tf_status tf_imdb_read_jsonl(const char *path, tf_imdb_data *out, tf_error *err);

/* The CSV and JSONL readers from memory; `name` stands for the file name. */
tf_status tf_imdb_parse_csv(const char *buf, size_t len, const char *name, tf_imdb_data *out,
                            tf_error *err);
tf_status tf_imdb_parse_jsonl(const char *buf, size_t len, const char *name, tf_imdb_data *out,
                              tf_error *err);

/* Frees the arrays and zeroes *d; safe on a zeroed or already freed struct. */
void tf_imdb_data_free(tf_imdb_data *d);

#ifdef __cplusplus
}
#endif
#endif
