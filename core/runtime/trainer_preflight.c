/* trainer_preflight.c — the workers' agreement check before the first step
 * (trainer_preflight.h). Each item is a 64-bit FNV-1a digest:
 *   - the resolved config as --dry-run prints it (comments, which carry the
 *     config file's path and whether a value came from -o, left out), spread
 *     over CONFIG_BUCKETS digests by key so a difference names its key;
 *   - the plugins' kinds, names and versions;
 *   - the parameter layout: names, shapes, offsets, decay flags, the
 *     compute dtype;
 *   - the data plan: rows and sequence lengths of both splits, steps per
 *     epoch and in all, the world size, and the tokens and labels of
 *     SAMPLE_ROWS training rows spread over the split, first and last
 *     included (the same file on every host). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "trainer_preflight.h"
#include "tfcore/log.h"

#define CONFIG_BUCKETS 64
#define SAMPLE_ROWS 16 /* training rows whose tokens go into the data plan's digest */
enum { ITEM_PLUGINS = CONFIG_BUCKETS, ITEM_PARAMS, ITEM_DATA, ITEM_COUNT };

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * FNV_PRIME;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "", (s ? strlen(s) : 0) + 1); /* with the NUL: "ab","c" differs from "a","bc" */
}

static uint64_t fnv_i64(uint64_t h, int64_t v)
{
    return fnv(h, &v, sizeof v);
}

/* The config as --dry-run prints it, one digest per key path bucket. Each
 * `name = {` line opens a group; a value line's digest is its path and text
 * up to its `;`. */
typedef struct config_lines {
    char *text;
    size_t len;
} config_lines;

static tf_status config_text(const tf_trainer *t, config_lines *c, tf_error *err)
{
    FILE *f = open_memstream(&c->text, &c->len);
    if (!f) return tf_error_set(err, TF_ERR_RUNTIME, "preflight: out of memory");
    tf_config_dump(t->plan->cfg, f);
    if (fclose(f) != 0) return tf_error_set(err, TF_ERR_RUNTIME, "preflight: out of memory");
    return TF_OK;
}

/* Walk the dump: for each value line, its path ("training.learning_rate")
 * and its text without a trailing comment; fn(path, value, arg). */
static void each_key(char *text, void (*fn)(const char *path, const char *line, void *arg), void *arg)
{
    char stack[8][128];
    int depth = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ') line++;
        if (*line == '#' || !*line) continue;
        char *semi = strrchr(line, ';');
        if (semi) semi[1] = '\0'; /* drop "# default", "# -o" */
        char *eq = strstr(line, " = ");
        char key[128] = "";
        if (eq) snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
        char path[1200] = "";
        for (int i = 0; i < depth && i < 8; i++)
            snprintf(path + strlen(path), sizeof path - strlen(path), "%s.", stack[i]);
        snprintf(path + strlen(path), sizeof path - strlen(path), "%s", key);
        if (eq && !semi && strchr(eq, '{')) { /* a group opens */
            if (depth < 8) snprintf(stack[depth], sizeof stack[depth], "%s", key);
            depth++;
            continue;
        }
        if (strcmp(line, "};") == 0 || strcmp(line, "}") == 0) {
            if (depth > 0) depth--;
            continue;
        }
        fn(path, line, arg);
    }
}

static size_t bucket_of(const char *path)
{
    return (size_t)(fnv_str(FNV_OFFSET, path) % CONFIG_BUCKETS);
}

static void add_key(const char *path, const char *line, void *arg)
{
    uint64_t *d = arg;
    size_t b = bucket_of(path);
    d[b] ^= fnv_str(fnv_str(FNV_OFFSET, path), line); /* order-free within a bucket */
}

typedef struct key_names {
    size_t bucket;
    char names[200];
} key_names;

static void name_key(const char *path, const char *line, void *arg)
{
    (void)line;
    key_names *k = arg;
    if (bucket_of(path) != k->bucket) return;
    size_t len = strlen(k->names);
    if (len + strlen(path) + 3 < sizeof k->names)
        snprintf(k->names + len, sizeof k->names - len, "%s%s?", len ? ", " : "", path);
}

static tf_status digests(tf_trainer *t, size_t train_rows, uint64_t d[ITEM_COUNT], tf_error *err)
{
    memset(d, 0, ITEM_COUNT * sizeof *d);
    config_lines c = {0};
    tf_status st = config_text(t, &c, err);
    if (st) return st;
    each_key(c.text, add_key, d);
    free(c.text);

    uint64_t h = FNV_OFFSET;
    for (int k = TF_KIND_MIN; k <= TF_KIND_MAX; k++) {
        const tf_loaded_plugin *p = t->plan->plugin[k];
        h = fnv_i64(h, k);
        if (p) h = fnv_str(fnv_str(h, p->desc->name), p->desc->version);
    }
    d[ITEM_PLUGINS] = h;

    const tf_param_info *p;
    size_t np;
    t->mvt->params(t->model, &p, &np);
    h = fnv_i64(fnv_i64(FNV_OFFSET, (int64_t)np), (int64_t)t->buf.n);
    h = fnv_i64(h, (int64_t)t->pvt->compute_dtype(t->prec));
    for (size_t i = 0; i < np; i++) {
        h = fnv_i64(fnv_i64(fnv_str(h, p[i].name), p[i].ndim), (int64_t)p[i].offset);
        for (int k = 0; k < p[i].ndim && k < 4; k++) h = fnv_i64(h, p[i].shape[k]);
        h = fnv_i64(h, p[i].no_decay);
    }
    d[ITEM_PARAMS] = h;

    h = FNV_OFFSET;
    int64_t plan_values[] = {(int64_t)train_rows, (int64_t)t->dvt->num_rows(t->ds, TF_SPLIT_EVAL),
                             t->dvt->seq_len(t->ds, TF_SPLIT_TRAIN), t->dvt->seq_len(t->ds, TF_SPLIT_EVAL),
                             t->steps.steps_per_epoch, t->steps.max_steps, t->world};
    for (size_t i = 0; i < sizeof plan_values / sizeof plan_values[0]; i++) h = fnv_i64(h, plan_values[i]);
    /* SAMPLE_ROWS training rows spread evenly, first and last included (all of a small set) */
    size_t samples = train_rows < SAMPLE_ROWS ? train_rows : SAMPLE_ROWS;
    for (size_t i = 0; i < samples; i++) {
        size_t row = samples > 1 ? i * (train_rows - 1) / (samples - 1) : 0;
        if ((st = tf_trainer_host_batch_free(t, err))) return st;
        if ((st = t->dvt->fill_batch(t->ds, TF_SPLIT_TRAIN, &row, 1, &t->host, err))) return st;
        const tf_batch *b = &t->host;
        h = fnv(h, b->input_ids, (size_t)b->seq * sizeof(int32_t));
        h = fnv(h, b->attention_mask, (size_t)b->seq * sizeof(int32_t));
        if (b->labels) h = fnv(h, b->labels, sizeof(int32_t));
        if (b->start_positions) h = fnv(h, b->start_positions, sizeof(int32_t));
        if (b->end_positions) h = fnv(h, b->end_positions, sizeof(int32_t));
    }
    d[ITEM_DATA] = h;
    return TF_OK;
}

static void describe(tf_trainer *t, int item, char *out, size_t n)
{
    if (item == ITEM_PLUGINS) {
        snprintf(out, n, "plugins or their versions");
    } else if (item == ITEM_PARAMS) {
        snprintf(out, n, "parameter layout (names, shapes, dtypes)");
    } else if (item == ITEM_DATA) {
        snprintf(out, n, "data plan (rows, sequence length, steps, sampled training rows)");
    } else {
        key_names k = {(size_t)item, ""};
        config_lines c = {0};
        tf_error ignore;
        if (config_text(t, &c, &ignore) == TF_OK) each_key(c.text, name_key, &k);
        free(c.text);
        snprintf(out, n, "resolved config%s%s%s", k.names[0] ? " (" : "", k.names, k.names[0] ? ")" : "");
    }
}

tf_status tf_preflight_check(tf_trainer *t, size_t train_rows, tf_error *err)
{
    if (!t->comm || t->world <= 1) return TF_OK;
    uint64_t mine[ITEM_COUNT], root[ITEM_COUNT];
    tf_status st = digests(t, train_rows, mine, err);
    if (st) return st;
    /* rank 0's digests to every rank, bit for bit (as i32 pairs) */
    memcpy(root, mine, sizeof root);
    if ((st = tf_trainer_broadcast_host(t, root, 2 * ITEM_COUNT, TF_DTYPE_I32, 0, err))) return st;
    /* per rank, 1 + its first item that differs from rank 0's (0: none),
     * summed: each rank fills only its own slot */
    double *first = calloc((size_t)t->world, sizeof *first);
    if (!first) return tf_error_set(err, TF_ERR_RUNTIME, "preflight: out of memory");
    for (int i = 0; i < ITEM_COUNT; i++)
        if (mine[i] != root[i]) {
            /* a config difference counts before the rest: a config is most of the cause */
            first[t->rank] = i + 1;
            break;
        }
    st = tf_trainer_allreduce_host(t, first, (size_t)t->world, TF_DTYPE_F64, TF_REDUCE_SUM, err);
    int bad_rank = -1, item = -1;
    for (int r = 0; !st && r < t->world && bad_rank < 0; r++)
        if (first[r] > 0) {
            bad_rank = r;
            item = (int)first[r] - 1;
        }
    free(first);
    if (st) return st;
    if (bad_rank < 0) {
        tf_debug("preflight: all %d ranks agree on config, plugins, parameters and data", t->world);
        return TF_OK;
    }
    char what[400];
    describe(t, item, what, sizeof what);
    return tf_error_set(err, TF_ERR_CONFIG, "preflight: rank %d's %s differs from rank 0's", bad_rank, what);
}
