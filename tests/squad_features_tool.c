/* squad_features_tool.c — drives the "squad" dataset plugin (compiled in, not
 * dlopen'ed) for tests/ref/squad_features_vs_hf.py:
 *
 *   squad_features_tool features CONFIG train|eval
 *       open the dataset from CONFIG's "data" section and print every feature
 *       of the split as one JSON line, as a one-row batch fills it:
 *       {"example": E, "input_ids": [...], "token_type_ids": [...],
 *        "attention_mask": [...], "start_positions": S, "end_positions": E,
 *        "offset_mapping": [[a, b] or null, ...]}   (offset_mapping: eval only)
 *   squad_features_tool predict CONFIG LOGITS COLS OUTDIR
 *       evaluate the eval split on LOGITS (raw float32 [rows, COLS]), writing
 *       OUTDIR/predictions.json (and null_odds.json); print the metrics as JSON.
 *
 * Exit status: 0 ok, 1 usage or I/O, else the tf_status of the failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "squad_features.h"
#include "squad_plugin.h"
#include "tfcore/config.h"
#include "tfcore/dataset.h"

static int fail(tf_status st, const tf_error *err)
{
    fprintf(stderr, "squad_features_tool: %s\n", err->msg);
    return (int)st;
}

static tf_status open_dataset(const char *cfg_path, const char *output_dir, tf_config **cfg, tf_dataset **ds,
                              tf_error *err)
{
    tf_status st = tf_config_load(cfg, cfg_path, err);
    if (st) return st;
    tf_section *sec = tf_config_section(*cfg, "data");
    if ((st = squad_dataset_vtable.check_config(sec, err))) return st;
    tf_dataset_open_args a = {sizeof a, sec, TF_TASK_QUESTION_ANSWERING, 2, NULL, -1, 512, 0, 42, output_dir, 0};
    return squad_dataset_vtable.open(&a, ds, err);
}

static void print_ints(const char *key, const int32_t *v, int n)
{
    printf("\"%s\": [", key);
    for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", v[i]);
    printf("]");
}

static int dump_features(tf_dataset *ds, tf_split split)
{
    const tf_dataset_vtable *vt = &squad_dataset_vtable;
    const squad_features *f = squad_dataset_features(ds, split);
    int S = vt->seq_len(ds, split);
    int32_t *buf = malloc(3 * (size_t)S * sizeof *buf); /* ids, types, mask: [1, S] each */
    int32_t sp, ep;
    int64_t fi;
    if (!buf) return 1;
    tf_batch b = {0, 0, 1, S, buf, buf + S, buf + 2 * S, NULL, &sp, &ep, &fi};
    size_t n = vt->num_rows(ds, split);
    for (size_t i = 0; i < n; i++) {
        tf_error err = {0};
        tf_status st = vt->fill_batch(ds, split, &i, 1, &b, &err);
        if (st) {
            free(buf);
            return fail(st, &err);
        }
        printf("{\"example\": %d, ", f->example[i]);
        print_ints("input_ids", b.input_ids, b.seq);
        printf(", ");
        print_ints("token_type_ids", b.token_type_ids, b.seq);
        printf(", ");
        print_ints("attention_mask", b.attention_mask, b.seq);
        printf(", \"start_positions\": %d, \"end_positions\": %d", sp, ep);
        if (f->offsets) {
            printf(", \"offset_mapping\": [");
            for (int p = 0; p < b.seq; p++) {
                int k = p - f->ctx_first[i];
                if (p) printf(", ");
                if (k >= 0 && k < f->ctx_count[i])
                    printf("[%d, %d]", f->offsets[2 * (f->off_start[i] + k)], f->offsets[2 * (f->off_start[i] + k) + 1]);
                else
                    printf("null");
            }
            printf("]");
        }
        printf("}\n");
    }
    free(buf);
    return 0;
}

static int predict(tf_dataset *ds, const char *logits_path, int cols)
{
    size_t rows = squad_dataset_vtable.num_rows(ds, TF_SPLIT_EVAL);
    size_t n = rows * (size_t)cols;
    float *logits = malloc((n ? n : 1) * sizeof *logits); /* [rows, cols] */
    FILE *fp = fopen(logits_path, "rb");
    if (!logits || !fp || fread(logits, sizeof *logits, n, fp) != n || fgetc(fp) != EOF) {
        fprintf(stderr, "squad_features_tool: %s must hold %zu x %d float32\n", logits_path, rows, cols);
        if (fp) fclose(fp);
        free(logits);
        return 1;
    }
    fclose(fp);
    tf_metrics m = {0};
    tf_error err = {0};
    tf_status st = squad_dataset_vtable.evaluate(ds, TF_SPLIT_EVAL, logits, rows, cols, &m, &err);
    free(logits);
    if (st) return fail(st, &err);
    printf("{");
    for (int i = 0; i < m.n; i++) printf("%s\"%s\": %.17g", i ? ", " : "", m.name[i], m.value[i]);
    printf("}\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "features") == 0 && argc != 4) ||
        (strcmp(argv[1], "predict") == 0 && argc != 6) ||
        (strcmp(argv[1], "features") != 0 && strcmp(argv[1], "predict") != 0)) {
        fprintf(stderr, "usage: squad_features_tool features CONFIG train|eval\n"
                        "       squad_features_tool predict CONFIG LOGITS COLS OUTDIR\n");
        return 1;
    }
    int is_predict = strcmp(argv[1], "predict") == 0;
    tf_config *cfg = NULL;
    tf_dataset *ds = NULL;
    tf_error err = {0};
    tf_status st = open_dataset(argv[2], is_predict ? argv[5] : NULL, &cfg, &ds, &err);
    int rc;
    if (st) rc = fail(st, &err);
    else if (is_predict) rc = predict(ds, argv[3], atoi(argv[4]));
    else rc = dump_features(ds, strcmp(argv[3], "train") == 0 ? TF_SPLIT_TRAIN : TF_SPLIT_EVAL);
    squad_dataset_vtable.close(ds);
    tf_config_free(cfg);
    return rc;
}
