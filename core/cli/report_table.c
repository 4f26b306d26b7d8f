/* report_table.c — `tfcore report`: reading runs' results.json, the numbers
 * the comparison shows, and the table as Markdown or JSON (report_table.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report_table.h"
#include "tfcore/config.h"
#include "tfcore/file_read.h"

const char *const tf_report_phase_name[TF_REPORT_PHASES] = {"data", "forward", "backward", "comm",
                                                            "optimizer", "eval", "save"};

const char *const tf_report_memory_name[TF_REPORT_MEMORY] = {"weights", "gradients", "optimizer_states",
                                                              "activations", "temporaries"};

#define MISSING "\xe2\x80\x94" /* "—", U+2014: a value the run did not record */

/* --- text buffer ------------------------------------------------------------ */

static bool text_reserve(tf_report_text *t, size_t extra)
{
    if (t->failed) return false;
    if (t->len + extra + 1 <= t->cap) return true;
    size_t cap = t->cap ? t->cap : 1024;
    while (cap < t->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            t->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *s = realloc(t->s, cap);
    if (!s) {
        t->failed = true;
        return false;
    }
    t->s = s;
    t->cap = cap;
    return true;
}

void tf_report_printf(tf_report_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = true;
        return;
    }
    if (!text_reserve(t, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

void tf_report_puts(tf_report_text *t, const char *s)
{
    size_t n = strlen(s);
    if (!text_reserve(t, n)) return;
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
}

char *tf_report_text_take(tf_report_text *t)
{
    char *s = t->failed ? NULL : t->s;
    if (!s) {
        free(t->s);
        s = t->failed ? NULL : strdup("");
    }
    memset(t, 0, sizeof *t);
    return s;
}

size_t tf_report_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

/* --- names ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 when the bytes are not one. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0; /* above U+10FFFF */
    return n;
}

/* A copy of the folder name that every output can hold: invalid UTF-8 bytes
 * become U+FFFD, control characters '?'. */
static char *display_copy(const char *s, size_t len)
{
    char *out = malloc(len * 3 + 1); /* each byte becomes at most 3 */
    if (!out) return NULL;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(u + i);
        if (n == 0 || i + n > len) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else if (n == 1 && (u[i] < 0x20 || u[i] == 0x7F)) {
            out[o++] = '?';
            i++;
        } else {
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
    return out;
}

/* --- reading a run ------------------------------------------------------------ */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* A number >= 0 at obj[key], NAN when absent. `where` names the object in messages. */
static tf_status read_seconds(const json_t *obj, const char *where, const char *key, bool required,
                              const char *path, double *out, tf_error *err)
{
    const json_t *v = json_object_get(obj, key);
    *out = NAN;
    if (!v) {
        if (!required) return TF_OK;
        return tf_error_set(err, TF_ERR_DATA, "%s: no %s%s (is this a results.json of tfcore or Trainer?)", path,
                            where, key);
    }
    if (!json_is_number(v))
        return tf_error_set(err, TF_ERR_DATA, "%s: %s%s must be a number >= 0, got %s", path, where, key,
                            json_type_name(v));
    double x = json_number_value(v);
    if (!(x >= 0))
        return tf_error_set(err, TF_ERR_DATA, "%s: %s%s must be a number >= 0, got %g", path, where, key, x);
    *out = x;
    return TF_OK;
}

static tf_status read_string(const json_t *obj, const char *key, const char *path, const char **out,
                             tf_error *err)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return TF_OK;
    if (!json_is_string(v))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.%s must be a string, got %s", path, key,
                            json_type_name(v));
    *out = json_string_value(v);
    return TF_OK;
}

static tf_status read_count(const json_t *obj, const char *where, const char *key, const char *path, long long *out,
                            tf_error *err)
{
    const json_t *v = json_object_get(obj, key);
    *out = -1;
    if (!v) return TF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        if (json_is_integer(v))
            return tf_error_set(err, TF_ERR_DATA, "%s: %s%s must be an integer >= 1, got %lld", path, where, key,
                                (long long)json_integer_value(v));
        return tf_error_set(err, TF_ERR_DATA, "%s: %s%s must be an integer >= 1, got %s", path, where, key,
                            json_type_name(v));
    }
    *out = (long long)json_integer_value(v);
    return TF_OK;
}

/* tfcore.pipeline: what the report shows of a pipeline run. */
static tf_status read_pipeline(const json_t *x, const char *path, tf_report_run *run, tf_error *err)
{
    const json_t *p = json_object_get(x, "pipeline");
    if (!p) return TF_OK;
    if (!json_is_object(p))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.pipeline must be an object, got %s", path, json_type_name(p));
    const char *w = "tfcore.pipeline.";
    tf_status st;
    if ((st = read_count(p, w, "stages", path, &run->pipe_stages, err)) ||
        (st = read_count(p, w, "replicas", path, &run->pipe_replicas, err)) ||
        (st = read_count(p, w, "micro_batches", path, &run->pipe_micro, err)) ||
        (st = read_seconds(p, w, "expected_bubble", false, path, &run->pipe_expected_bubble, err)) ||
        (st = read_seconds(p, w, "measured_bubble", false, path, &run->pipe_measured_bubble, err)))
        return st;
    const json_t *sch = json_object_get(p, "schedule");
    if (sch && !json_is_string(sch))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.pipeline.schedule must be a string, got %s", path,
                            json_type_name(sch));
    run->pipe_schedule = sch ? json_string_value(sch) : NULL;
    const json_t *u = json_object_get(p, "utilisation");
    if (u && !json_is_array(u))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.pipeline.utilisation must be an array, got %s", path,
                            json_type_name(u));
    double sum = 0;
    for (size_t i = 0; u && i < json_array_size(u); i++) {
        const json_t *e = json_array_get(u, i);
        if (!json_is_number(e) || !(json_number_value(e) >= 0))
            return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.pipeline.utilisation[%zu] must be a number >= 0", path,
                                i);
        sum += json_number_value(e);
    }
    if (u && json_array_size(u)) run->pipe_utilisation = sum / (double)json_array_size(u);
    return TF_OK;
}

/* tfcore.statistics: the numbers are >= 0, or null where the run had no estimate. */
static tf_status read_statistics(const json_t *x, const char *path, tf_report_run *run, tf_error *err)
{
    const json_t *s = json_object_get(x, "statistics");
    if (!s) return TF_OK;
    if (!json_is_object(s))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.statistics must be an object, got %s", path,
                            json_type_name(s));
    run->have_stats = true;
    static const char *const key[4] = {"batch_size", "noise_scale", "statistical_efficiency", "goodput"};
    double *out[4] = {&run->stat_batch, &run->stat_noise_scale, &run->stat_efficiency, &run->stat_goodput};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(s, key[k]);
        tf_status st = v && json_is_null(v) ? TF_OK : read_seconds(s, "tfcore.statistics.", key[k], false, path,
                                                                   out[k], err);
        if (st) return st;
    }
    const json_t *why = json_object_get(s, "reason");
    if (why && !json_is_string(why))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.statistics.reason must be a string, got %s", path,
                            json_type_name(why));
    run->stat_reason = why ? json_string_value(why) : NULL;
    return TF_OK;
}

/* The tfcore object: phase times, world size, plugin names, config. */
static tf_status read_tfcore(const json_t *x, const char *path, tf_report_run *run, tf_error *err)
{
    tf_status st;
    if (!json_is_object(x))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore must be an object, got %s", path, json_type_name(x));
    const json_t *ph = json_object_get(x, "phase_seconds");
    if (ph && !json_is_object(ph))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.phase_seconds must be an object, got %s", path,
                            json_type_name(ph));
    if (ph) {
        for (int i = 0; i < TF_REPORT_PHASES; i++)
            if ((st = read_seconds(ph, "tfcore.phase_seconds.", tf_report_phase_name[i], false, path,
                                   &run->phase[i], err)))
                return st;
        if ((st = read_seconds(ph, "tfcore.phase_seconds.", "comm_exposed", false, path, &run->comm_exposed, err)))
            return st;
    }
    const json_t *mem = json_object_get(x, "memory_bytes");
    if (mem && !json_is_object(mem))
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.memory_bytes must be an object, got %s", path,
                            json_type_name(mem));
    for (int i = 0; mem && i < TF_REPORT_MEMORY; i++)
        if ((st = read_seconds(mem, "tfcore.memory_bytes.", tf_report_memory_name[i], false, path, &run->memory[i],
                               err)))
            return st;
    const json_t *ws = json_object_get(x, "world_size");
    if (ws && (!json_is_integer(ws) || json_integer_value(ws) < 1)) {
        if (json_is_integer(ws))
            return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.world_size must be an integer >= 1, got %lld", path,
                                (long long)json_integer_value(ws));
        return tf_error_set(err, TF_ERR_DATA, "%s: tfcore.world_size must be an integer >= 1, got %s", path,
                            json_type_name(ws));
    }
    if (ws) run->world_size = (long long)json_integer_value(ws);
    if ((st = read_pipeline(x, path, run, err))) return st;
    if ((st = read_statistics(x, path, run, err))) return st;
    if ((st = read_string(x, "config", path, &run->config, err))) return st;
    if ((st = read_string(x, "comm", path, &run->comm, err))) return st;
    return read_string(x, "precision", path, &run->precision, err);
}

tf_status tf_report_read_run(const char *dir, tf_report_run *run, tf_error *err)
{
    memset(run, 0, sizeof *run);
    run->train_runtime = run->samples_per_second = run->comm_exposed = NAN;
    for (int i = 0; i < TF_REPORT_PHASES; i++) run->phase[i] = NAN;
    for (int i = 0; i < TF_REPORT_MEMORY; i++) run->memory[i] = NAN;
    run->world_size = -1;
    run->pipe_stages = run->pipe_replicas = run->pipe_micro = -1;
    run->pipe_expected_bubble = run->pipe_measured_bubble = run->pipe_utilisation = NAN;
    run->stat_batch = run->stat_noise_scale = run->stat_efficiency = run->stat_goodput = NAN;

    /* DIR/results.json without doubling a trailing slash */
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
    const char *sep = dlen && dir[dlen - 1] == '/' ? "" : "/";
    size_t plen = dlen + strlen(sep) + sizeof "results.json";
    char *path = malloc(plen);
    if (!path) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    snprintf(path, plen, "%.*s%sresults.json", (int)dlen, dir, sep);

    tf_status st = TF_OK;
    json_error_t je;
    FILE *f;
    if ((st = tf_file_fopen_read(path, NULL, TF_ERR_DATA, &f, err))) goto fail;
    run->results = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!run->results) {
        if (je.line > 0)
            st = tf_error_set(err, TF_ERR_DATA, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        else
            st = tf_error_set(err, TF_ERR_DATA, "%s: %s", path, je.text);
        goto fail;
    }
    if (!json_is_object(run->results)) {
        st = tf_error_set(err, TF_ERR_DATA, "%s: the top level must be an object, got %s", path,
                          json_type_name(run->results));
        goto fail;
    }
    if ((st = read_seconds(run->results, "", "train_runtime", true, path, &run->train_runtime, err))) goto fail;
    if ((st = read_seconds(run->results, "", "train_samples_per_second", false, path, &run->samples_per_second,
                           err)))
        goto fail;
    const json_t *x = json_object_get(run->results, "tfcore");
    if (x && (st = read_tfcore(x, path, run, err))) goto fail;

    /* the run's name: the folder's last component */
    const char *base = dir + dlen;
    while (base > dir && base[-1] != '/') base--;
    size_t blen = (size_t)(dir + dlen - base);
    if (blen == 0) { /* "/" */
        base = dir;
        blen = dlen;
    }
    run->dir = display_copy(dir, strlen(dir));
    run->name = display_copy(base, blen);
    if (!run->dir || !run->name) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
        goto fail;
    }
    free(path);
    return TF_OK;
fail:
    free(path);
    tf_report_run_free(run);
    return st;
}

void tf_report_run_free(tf_report_run *run)
{
    if (!run) return;
    json_decref(run->results);
    free(run->dir);
    free(run->name);
    memset(run, 0, sizeof *run);
}

/* --- the numbers ------------------------------------------------------------ */

double tf_report_value(const tf_report_run *run, const char *key)
{
    const json_t *v = json_object_get(run->results, key);
    return v && json_is_number(v) ? json_number_value(v) : NAN;
}

bool tf_report_has_metric(const tf_report_run *runs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!isnan(tf_report_value(&runs[i], key))) return true;
    return false;
}

const char *tf_report_default_metric(const tf_report_run *runs, size_t n)
{
    static const char *const order[] = {"eval_accuracy", "eval_f1", "eval_loss"};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        if (tf_report_has_metric(runs, n, order[k])) return order[k];
    return "eval_loss";
}

const char *tf_report_closest_metric(const tf_report_run *runs, size_t n, const char *key)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += json_object_size(runs[i].results);
    const char **names = malloc((total ? total : 1) * sizeof *names);
    if (!names) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name;
        json_t *v;
        json_object_foreach(runs[i].results, name, v)
            if (json_is_number(v)) names[k++] = name;
    }
    const char *best = tf_closest(key, names, k);
    free(names);
    return best;
}

double tf_report_speedup(const tf_report *r, size_t i)
{
    double base = r->runs[r->baseline].train_runtime, t = r->runs[i].train_runtime;
    if (i == r->baseline) return base > 0 ? 1.0 : NAN;
    return base > 0 && t > 0 ? base / t : NAN;
}

double tf_report_exposed_percent(const tf_report_run *run)
{
    double t = run->train_runtime;
    return t > 0 && !isnan(run->comm_exposed) ? 100.0 * run->comm_exposed / t : NAN;
}

/* --- Markdown ----------------------------------------------------------------- */

enum { COL_RUN, COL_CONFIG, COL_COMM, COL_WORLD, COL_PRECISION, COL_RUNTIME, COL_SPEEDUP, COL_SAMPLES,
       COL_EXPOSED, COL_METRIC, NCOLS };
static const char *const col_title[NCOLS] = {"run", "config", "comm", "world", "precision", "train_runtime (s)",
                                             "speedup", "samples/s", "exposed comm %", NULL};
static const bool col_right[NCOLS] = {false, false, false, true, false, true, true, true, true, true};

static bool is_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* Text as a Markdown table cell shows it literally: a backslash before
 * every character that would end the cell or start markup (| \ ` * < > & [ ]
 * ~), before '_' at a word boundary (inside a word it cannot start emphasis,
 * and run names are full of them), control characters as spaces. */
static void md_escape(tf_report_text *t, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char two[3] = {'\\', (char)c, '\0'};
        if (c < 0x20 || c == 0x7F) {
            tf_report_puts(t, " ");
        } else if (strchr("|\\`*<>&[]~", c)) {
            tf_report_puts(t, two);
        } else if (c == '_' && !(i > 0 && is_alnum((unsigned char)s[i - 1]) && i + 1 < n &&
                                 is_alnum((unsigned char)s[i + 1]))) {
            tf_report_puts(t, two);
        } else {
            char one[2] = {(char)c, '\0'};
            tf_report_puts(t, one);
        }
    }
}

static char *md_cell_text(const char *s)
{
    tf_report_text t = {0};
    md_escape(&t, s ? s : MISSING);
    return tf_report_text_take(&t);
}

static char *md_cell_number(double x, int decimals)
{
    if (isnan(x)) return strdup(MISSING);
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", decimals, x);
    return strdup(buf);
}

/* The config file's name without its folder (the JSON keeps the whole path). */
static const char *file_name(const char *path)
{
    if (!path) return NULL;
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* Backend memory by category in MiB, one row per run, when any run has it
 * (results.json tfcore.memory_bytes). */
static void memory_table(tf_report_text *t, const tf_report *r)
{
    bool any = false;
    for (size_t i = 0; i < r->n; i++)
        for (int k = 0; k < TF_REPORT_MEMORY; k++) any = any || !isnan(r->runs[i].memory[k]);
    if (!any) return;
    size_t w = 3;
    for (size_t i = 0; i < r->n; i++) {
        size_t x = tf_report_width(r->runs[i].name);
        if (x > w) w = x;
    }
    static const char *const title[TF_REPORT_MEMORY] = {"weights MiB", "gradients MiB", "optimizer states MiB",
                                                         "activations MiB", "temporaries MiB"};
    tf_report_printf(t, "\n| %-*s |", (int)w, "run");
    for (int k = 0; k < TF_REPORT_MEMORY; k++) tf_report_printf(t, " %s |", title[k]);
    tf_report_puts(t, "\n|");
    for (size_t k = 0; k < w + 2; k++) tf_report_puts(t, "-");
    for (int k = 0; k < TF_REPORT_MEMORY; k++) {
        tf_report_puts(t, "|");
        for (size_t j = 0; j < strlen(title[k]) + 1; j++) tf_report_puts(t, "-");
        tf_report_puts(t, ":");
    }
    tf_report_puts(t, "|\n");
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        char *name = md_cell_text(run->name);
        if (!name) {
            t->failed = true;
            return;
        }
        tf_report_printf(t, "| %s%*s |", name, (int)(w - tf_report_width(name)), "");
        free(name);
        for (int k = 0; k < TF_REPORT_MEMORY; k++) {
            double v = run->memory[k];
            char cellv[64];
            if (isnan(v)) snprintf(cellv, sizeof cellv, "%s", MISSING);
            else snprintf(cellv, sizeof cellv, "%.1f", v / 1048576.0);
            tf_report_printf(t, " %*s%s |", (int)(strlen(title[k]) - tf_report_width(cellv)), "", cellv);
        }
        tf_report_puts(t, "\n");
    }
}

/* Pipeline runs (results.json tfcore.pipeline), one row each, when any run
 * is one: its shape, the bubble expected and measured, the workers' mean
 * utilisation (docs/PARALLEL.md "Pipeline parallelism"). */
static void pipeline_table(tf_report_text *t, const tf_report *r)
{
    bool any = false;
    for (size_t i = 0; i < r->n; i++) any = any || r->runs[i].pipe_stages > 0;
    if (!any) return;
    size_t w = 3;
    for (size_t i = 0; i < r->n; i++) {
        size_t x = tf_report_width(r->runs[i].name);
        if (r->runs[i].pipe_stages > 0 && x > w) w = x;
    }
    enum { NP = 6 };
    static const char *const title[NP] = {"stages x replicas", "micro-batches", "schedule", "expected bubble",
                                          "measured bubble", "mean utilisation"};
    tf_report_printf(t, "\n| %-*s |", (int)w, "run");
    for (int k = 0; k < NP; k++) tf_report_printf(t, " %s |", title[k]);
    tf_report_puts(t, "\n|");
    for (size_t k = 0; k < w + 2; k++) tf_report_puts(t, "-");
    for (int k = 0; k < NP; k++) {
        tf_report_puts(t, "|");
        for (size_t j = 0; j < strlen(title[k]) + 1; j++) tf_report_puts(t, "-");
        tf_report_puts(t, k == 2 ? "-" : ":");
    }
    tf_report_puts(t, "|\n");
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        if (run->pipe_stages <= 0) continue;
        char *name = md_cell_text(run->name), *sched = md_cell_text(run->pipe_schedule);
        if (!name || !sched) {
            free(name);
            free(sched);
            t->failed = true;
            return;
        }
        char cellv[NP][64];
        snprintf(cellv[0], sizeof cellv[0], "%lld x %lld", run->pipe_stages, run->pipe_replicas > 0 ? run->pipe_replicas : 1);
        if (run->pipe_micro > 0) snprintf(cellv[1], sizeof cellv[1], "%lld", run->pipe_micro);
        else snprintf(cellv[1], sizeof cellv[1], "%s", MISSING);
        snprintf(cellv[2], sizeof cellv[2], "%s", sched);
        double v[3] = {run->pipe_expected_bubble, run->pipe_measured_bubble, run->pipe_utilisation};
        for (int k = 0; k < 3; k++) {
            if (isnan(v[k])) snprintf(cellv[3 + k], sizeof cellv[3 + k], "%s", MISSING);
            else snprintf(cellv[3 + k], sizeof cellv[3 + k], "%.3f", v[k]);
        }
        tf_report_printf(t, "| %s%*s |", name, (int)(w - tf_report_width(name)), "");
        for (int k = 0; k < NP; k++) {
            int pad = (int)(strlen(title[k]) - tf_report_width(cellv[k]));
            if (k == 2) tf_report_printf(t, " %s%*s |", cellv[k], pad, "");
            else tf_report_printf(t, " %*s%s |", pad, "", cellv[k]);
        }
        tf_report_puts(t, "\n");
        free(name);
        free(sched);
    }
}

/* Statistical efficiency and goodput (results.json tfcore.statistics), one
 * row per run that has them, beside samples/s and the compared metric
 * (docs/PARALLEL.md "Statistical efficiency and goodput"); a run without an
 * estimate shows dashes and its reason under the table. */
static void statistics_table(tf_report_text *t, const tf_report *r)
{
    bool any = false;
    for (size_t i = 0; i < r->n; i++) any = any || r->runs[i].have_stats;
    if (!any) return;
    size_t w = 3;
    for (size_t i = 0; i < r->n; i++) {
        size_t x = tf_report_width(r->runs[i].name);
        if (r->runs[i].have_stats && x > w) w = x;
    }
    enum { NS = 6 };
    char *metric = md_cell_text(r->metric);
    if (!metric) {
        t->failed = true;
        return;
    }
    const char *title[NS] = {"global batch", "noise scale", "statistical efficiency", "samples/s", "goodput", metric};
    static const int digits[NS] = {0, 1, 3, 3, 3, 4};
    size_t cw[NS];
    for (int k = 0; k < NS; k++) cw[k] = tf_report_width(title[k]);
    /* the cells first: a column is as wide as its widest */
    char(*cellv)[NS][64] = calloc(r->n ? r->n : 1, sizeof *cellv);
    if (!cellv) {
        free(metric);
        t->failed = true;
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        double v[NS] = {run->stat_batch,         run->stat_noise_scale, run->stat_efficiency,
                        run->samples_per_second, run->stat_goodput,     tf_report_value(run, r->metric)};
        for (int k = 0; k < NS; k++) {
            if (isnan(v[k])) snprintf(cellv[i][k], sizeof cellv[i][k], "%s", MISSING);
            else snprintf(cellv[i][k], sizeof cellv[i][k], "%.*f", digits[k], v[k]);
            if (run->have_stats && tf_report_width(cellv[i][k]) > cw[k]) cw[k] = tf_report_width(cellv[i][k]);
        }
    }
    tf_report_printf(t, "\n| %-*s |", (int)w, "run");
    for (int k = 0; k < NS; k++) tf_report_printf(t, " %*s%s |", (int)(cw[k] - tf_report_width(title[k])), "", title[k]);
    tf_report_puts(t, "\n|");
    for (size_t k = 0; k < w + 2; k++) tf_report_puts(t, "-");
    for (int k = 0; k < NS; k++) {
        tf_report_puts(t, "|");
        for (size_t j = 0; j < cw[k] + 1; j++) tf_report_puts(t, "-");
        tf_report_puts(t, ":");
    }
    tf_report_puts(t, "|\n");
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        if (!run->have_stats) continue;
        char *name = md_cell_text(run->name);
        if (!name) {
            t->failed = true;
            break;
        }
        tf_report_printf(t, "| %s%*s |", name, (int)(w - tf_report_width(name)), "");
        free(name);
        for (int k = 0; k < NS; k++)
            tf_report_printf(t, " %*s%s |", (int)(cw[k] - tf_report_width(cellv[i][k])), "", cellv[i][k]);
        tf_report_puts(t, "\n");
    }
    free(cellv);
    for (size_t i = 0; i < r->n && !t->failed; i++) {
        const tf_report_run *run = &r->runs[i];
        if (!run->have_stats || !isnan(run->stat_efficiency) || !run->stat_reason) continue;
        char *name = md_cell_text(run->name), *why = md_cell_text(run->stat_reason);
        if (name && why) tf_report_printf(t, "\n%s: no statistical efficiency: %s\n", name, why);
        else t->failed = true;
        free(name);
        free(why);
    }
    free(metric);
}

char *tf_report_markdown(const tf_report *r)
{
    size_t rows = r->n + 1;
    char **cell = calloc(rows * NCOLS, sizeof *cell); /* [rows, NCOLS], row 0 the header */
    if (!cell) return NULL;
    bool oom = false;
    for (int c = 0; c < NCOLS; c++) cell[c] = md_cell_text(c == COL_METRIC ? r->metric : col_title[c]);
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        char **row = cell + (i + 1) * NCOLS;
        char world[32];
        snprintf(world, sizeof world, "%lld", run->world_size);
        row[COL_RUN] = md_cell_text(run->name);
        row[COL_CONFIG] = md_cell_text(file_name(run->config));
        row[COL_COMM] = md_cell_text(run->comm);
        row[COL_WORLD] = md_cell_text(run->world_size > 0 ? world : NULL);
        row[COL_PRECISION] = md_cell_text(run->precision);
        row[COL_RUNTIME] = md_cell_number(run->train_runtime, 2);
        row[COL_SPEEDUP] = md_cell_number(tf_report_speedup(r, i), 2);
        row[COL_SAMPLES] = md_cell_number(run->samples_per_second, 3);
        row[COL_EXPOSED] = md_cell_number(tf_report_exposed_percent(run), 1);
        row[COL_METRIC] = md_cell_number(tf_report_value(run, r->metric), 4);
    }
    size_t width[NCOLS];
    for (int c = 0; c < NCOLS; c++) width[c] = 3; /* the alignment row's "---" */
    for (size_t k = 0; k < rows * NCOLS; k++) {
        if (!cell[k]) {
            oom = true;
            continue;
        }
        size_t w = tf_report_width(cell[k]);
        if (w > width[k % NCOLS]) width[k % NCOLS] = w;
    }
    tf_report_text t = {0};
    for (size_t i = 0; !oom && i < rows; i++) {
        for (int c = 0; c < NCOLS; c++) {
            const char *s = cell[i * NCOLS + (size_t)c];
            size_t pad = width[c] - tf_report_width(s);
            tf_report_printf(&t, "| %*s%s%*s ", col_right[c] ? (int)pad : 0, "", s, col_right[c] ? 0 : (int)pad, "");
        }
        tf_report_puts(&t, "|\n");
        if (i == 0) { /* the alignment row: "---:" right-aligns numbers */
            for (int c = 0; c < NCOLS; c++) {
                tf_report_puts(&t, "|");
                for (size_t k = 0; k < width[c] + 2 - col_right[c]; k++) tf_report_puts(&t, "-");
                if (col_right[c]) tf_report_puts(&t, ":");
            }
            tf_report_puts(&t, "|\n");
        }
    }
    for (size_t k = 0; k < rows * NCOLS; k++) free(cell[k]);
    free(cell);
    if (oom) t.failed = true;
    if (!oom) memory_table(&t, r);
    if (!oom) pipeline_table(&t, r);
    if (!oom) statistics_table(&t, r);
    return tf_report_text_take(&t);
}

/* --- JSON ----------------------------------------------------------------------- */

static json_t *number_or_null(double x) { return isnan(x) ? json_null() : json_real(x); }
static json_t *string_or_null(const char *s) { return s ? json_string(s) : json_null(); }

char *tf_report_json(const tf_report *r)
{
    json_t *o = json_object(), *runs = json_array();
    if (!o || !runs) {
        json_decref(o);
        json_decref(runs);
        return NULL;
    }
    json_object_set_new(o, "baseline", json_string(r->runs[r->baseline].name));
    json_object_set_new(o, "metric", json_string(r->metric));
    json_object_set_new(o, "runs", runs);
    for (size_t i = 0; i < r->n; i++) {
        const tf_report_run *run = &r->runs[i];
        json_t *x = json_object();
        if (!x) break;
        json_object_set_new(x, "run", json_string(run->name));
        json_object_set_new(x, "dir", json_string(run->dir));
        json_object_set_new(x, "config", string_or_null(run->config));
        json_object_set_new(x, "comm", string_or_null(run->comm));
        json_object_set_new(x, "world_size", run->world_size > 0 ? json_integer(run->world_size) : json_null());
        json_object_set_new(x, "precision", string_or_null(run->precision));
        json_object_set_new(x, "train_runtime", number_or_null(run->train_runtime));
        json_object_set_new(x, "speedup", number_or_null(tf_report_speedup(r, i)));
        json_object_set_new(x, "train_samples_per_second", number_or_null(run->samples_per_second));
        json_object_set_new(x, "exposed_comm_percent", number_or_null(tf_report_exposed_percent(run)));
        json_object_set_new(x, r->metric, number_or_null(tf_report_value(run, r->metric)));
        bool have_mem = false; /* tfcore.memory_bytes, when the run recorded it */
        for (int k = 0; k < TF_REPORT_MEMORY; k++) have_mem = have_mem || !isnan(run->memory[k]);
        json_t *mem = have_mem ? json_object() : NULL;
        for (int k = 0; mem && k < TF_REPORT_MEMORY; k++)
            json_object_set_new(mem, tf_report_memory_name[k], number_or_null(run->memory[k]));
        if (mem) json_object_set_new(x, "memory_bytes", mem);
        if (run->pipe_stages > 0) /* the pipeline table's row */
            json_object_set_new(
                x, "pipeline",
                json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "stages", (json_int_t)run->pipe_stages, "replicas",
                          run->pipe_replicas > 0 ? json_integer(run->pipe_replicas) : json_null(), "micro_batches",
                          run->pipe_micro > 0 ? json_integer(run->pipe_micro) : json_null(), "schedule",
                          string_or_null(run->pipe_schedule), "expected_bubble",
                          number_or_null(run->pipe_expected_bubble), "measured_bubble",
                          number_or_null(run->pipe_measured_bubble), "mean_utilisation",
                          number_or_null(run->pipe_utilisation)));
        if (run->have_stats) /* the statistics table's row */
            json_object_set_new(x, "statistics",
                                json_pack("{s:o, s:o, s:o, s:o, s:o}", "batch_size", number_or_null(run->stat_batch),
                                          "noise_scale", number_or_null(run->stat_noise_scale),
                                          "statistical_efficiency", number_or_null(run->stat_efficiency),
                                          "goodput", number_or_null(run->stat_goodput), "reason",
                                          string_or_null(run->stat_reason)));
        json_array_append_new(runs, x);
    }
    char *text = NULL;
    if (json_array_size(runs) == r->n)
        text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!text) return NULL;
    tf_report_text t = {0};
    tf_report_puts(&t, text);
    tf_report_puts(&t, "\n");
    free(text);
    return tf_report_text_take(&t);
}
