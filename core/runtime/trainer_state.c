/* trainer_state.c — a checkpoint's trainer_state.json (trainer_state.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/file_read.h"
#include "trainer_state.h"

/* A checkpoint's state file is a few hundred bytes; this bounds a wrong one. */
#define STATE_MAX_BYTES (1u << 20)

tf_status tf_trainer_state_parse(const char *text, size_t len, const char *path, tf_trainer_state *s,
                                 json_t **root, tf_error *err)
{
    memset(s, 0, sizeof *s);
    if (root) *root = NULL;
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o && je.line > 0)
        return tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    if (!o) return tf_error_set(err, TF_ERR_DATA, "%s: %s", path, je.text);
    json_int_t gs, ms, sk, np, sgood, sskip;
    double loss, scale;
    tf_status st = TF_OK;
    if (json_unpack_ex(o, &je, 0, "{s:I, s:I, s:F, s:I, s:I, s:{s:F, s:I, s:I}}", "global_step", &gs, "micro_step",
                       &ms, "total_loss", &loss, "skipped_steps", &sk, "num_parameters", &np, "scaler", "scale",
                       &scale, "good_steps", &sgood, "skipped_steps", &sskip) != 0)
        st = tf_error_set(err, TF_ERR_DATA, "%s: %s", path, je.text);
    else if (gs < 0 || ms < 0 || sk < 0 || np < 0 || sgood < 0 || sskip < 0)
        st = tf_error_set(err, TF_ERR_DATA, "%s: negative step or parameter counts", path);
    else if (!isfinite(loss))
        st = tf_error_set(err, TF_ERR_DATA, "%s: total_loss is not a finite number", path);
    else if (!isfinite(scale) || scale <= 0)
        st = tf_error_set(err, TF_ERR_DATA, "%s: scaler.scale must be a finite number above 0, got %g", path, scale);
    if (st) {
        json_decref(o);
        return st;
    }
    *s = (tf_trainer_state){gs, ms, sk, np, loss, {scale, sgood, sskip}};
    if (root) *root = o;
    else json_decref(o);
    return TF_OK;
}

tf_status tf_trainer_state_read(const char *path, tf_trainer_state *s, json_t **root, tf_error *err)
{
    memset(s, 0, sizeof *s);
    if (root) *root = NULL;
    FILE *f;
    tf_status st = tf_file_fopen_read(path, "trainer state", TF_ERR_DATA, &f, err);
    if (st) return st;
    char *buf = malloc(STATE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, STATE_MAX_BYTES + 1, f) : 0;
    if (!buf) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", path);
    else if (ferror(f)) st = tf_error_set(err, TF_ERR_DATA, "%s: read error", path);
    else if (n > STATE_MAX_BYTES)
        st = tf_error_set(err, TF_ERR_DATA, "%s: larger than a trainer state can be (%u bytes)", path, STATE_MAX_BYTES);
    fclose(f);
    if (!st) st = tf_trainer_state_parse(buf, n, path, s, root, err);
    free(buf);
    return st;
}
