/* trainer_run_log_resume.c — log.jsonl of a resumed run. The run that wrote the
 * checkpoint may have gone on past it (it was killed later, or is rerun from
 * an older checkpoint) and logged those steps; the resumed run logs them
 * again. So the lines whose "step" is past the checkpoint's are dropped when
 * the run resumes (the file is rewritten atomically), and the log holds each
 * step once. Lines without a step are kept. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/file.h"
#include "tfcore/file_read.h"
#include "tfcore/log.h"
#include "trainer_internal.h"

/* The lines of text[0..len) with step <= last, into *kept (malloc'ed,
 * NUL-terminated, every line ending in '\n'); *dropped counts the others. */
static tf_status keep_until(const char *text, size_t len, int64_t last, char **kept, size_t *dropped, tf_error *err)
{
    *kept = malloc(len + 2);
    if (!*kept) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory reading log.jsonl");
    size_t out = 0;
    *dropped = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        json_t *o = json_loadb(p, (size_t)(e - p), 0, NULL);
        json_t *s = json_is_object(o) ? json_object_get(o, "step") : NULL;
        bool past = json_is_integer(s) && json_integer_value(s) > last;
        json_decref(o);
        if (past) {
            (*dropped)++;
        } else {
            memcpy(*kept + out, p, (size_t)(e - p));
            out += (size_t)(e - p);
            (*kept)[out++] = '\n';
        }
        p = nl ? nl + 1 : end;
    }
    (*kept)[out] = '\0';
    return TF_OK;
}

tf_status tf_log_resume_trim(tf_trainer *t, tf_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/log.jsonl", t->output_dir);
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size == 0) return TF_OK; /* nothing logged yet */
    if (t->log) fclose(t->log);
    t->log = NULL;
    FILE *f;
    tf_status st = tf_file_fopen_read(path, NULL, TF_ERR_RUNTIME, &f, err);
    char *text = NULL, *kept = NULL;
    size_t len = 0, dropped = 0;
    if (!st) {
        text = malloc((size_t)sb.st_size + 1);
        if (!text) st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory reading %s", path);
        else len = fread(text, 1, (size_t)sb.st_size, f);
        if (!st && ferror(f)) st = tf_error_set(err, TF_ERR_RUNTIME, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
    }
    if (!st) st = keep_until(text, len, t->global_step, &kept, &dropped, err);
    if (!st && dropped) {
        st = tf_file_write_text_atomic(path, kept, err);
        if (!st)
            tf_info("%s: dropped %zu lines past step %lld, where this run resumes", path, dropped,
                    (long long)t->global_step);
    }
    free(text);
    free(kept);
    if (!st && !(t->log = fopen(path, "a")))
        st = tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", path, strerror(errno));
    return st;
}
