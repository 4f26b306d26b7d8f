/* config_keys.c — reading a section through a plugin's key table, and the
 * table as Markdown (tfcore/config_keys.h). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config_keys.h"

static const char *const type_names[] = {"int", "float", "bool", "string", "choice"};

static tf_status find(tf_section *sec, const tf_cfg_key *table, const char *key, tf_cfg_key_type t1,
                      tf_cfg_key_type t2, const tf_cfg_key **out, tf_error *err)
{
    for (const tf_cfg_key *k = table; k && k->name; k++)
        if (strcmp(k->name, key) == 0) {
            if (k->type != t1 && k->type != t2) break;
            *out = k;
            return TF_OK;
        }
    return tf_error_set(err, TF_ERR_PLUGIN, "the key table of section '%s' has no %s key '%s'",
                        tf_section_name(sec), type_names[t1], key);
}

tf_status tf_cfg_key_int(tf_section *sec, const tf_cfg_key *table, const char *key, long long *out, tf_error *err)
{
    const tf_cfg_key *k;
    tf_status st = find(sec, table, key, TF_CFG_KEY_INT, TF_CFG_KEY_INT, &k, err);
    if (st) return st;
    return k->required ? tf_cfg_require_int(sec, key, k->int_min, k->int_max, out, err)
                       : tf_cfg_int(sec, key, k->int_def, k->int_min, k->int_max, out, err);
}

tf_status tf_cfg_key_float(tf_section *sec, const tf_cfg_key *table, const char *key, double *out, tf_error *err)
{
    const tf_cfg_key *k;
    tf_status st = find(sec, table, key, TF_CFG_KEY_FLOAT, TF_CFG_KEY_FLOAT, &k, err);
    if (st) return st;
    if (!k->min_open && !k->max_open && !k->why)
        return tf_cfg_float(sec, key, k->float_def, k->float_min, k->float_max, out, err);
    /* the accessor checks the type (and refuses NaN); the interval, with its
     * open ends and its reason, is checked here */
    if ((st = tf_cfg_float(sec, key, k->float_def, -INFINITY, INFINITY, out, err))) return st;
    double v = *out, lo = k->float_min, hi = k->float_max;
    if ((k->min_open ? v > lo : v >= lo) && (k->max_open ? v < hi : v <= hi)) return TF_OK;
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be in %c%g, %g%c, got %g%s%s%s", tf_cfg_where(sec, key),
                        tf_section_name(sec), key, k->min_open ? '(' : '[', lo, hi, k->max_open ? ')' : ']', v,
                        k->why ? " (" : "", k->why ? k->why : "", k->why ? ")" : "");
}

tf_status tf_cfg_key_bool(tf_section *sec, const tf_cfg_key *table, const char *key, bool *out, tf_error *err)
{
    const tf_cfg_key *k;
    tf_status st = find(sec, table, key, TF_CFG_KEY_BOOL, TF_CFG_KEY_BOOL, &k, err);
    return st ? st : tf_cfg_bool(sec, key, k->bool_def, out, err);
}

tf_status tf_cfg_key_string(tf_section *sec, const tf_cfg_key *table, const char *key, const char **out,
                            tf_error *err)
{
    const tf_cfg_key *k;
    tf_status st = find(sec, table, key, TF_CFG_KEY_STRING, TF_CFG_KEY_CHOICE, &k, err);
    if (st) return st;
    if (k->type == TF_CFG_KEY_CHOICE) return tf_cfg_choice(sec, key, k->string_def, k->choices, out, err);
    return k->required ? tf_cfg_require_string(sec, key, out, err) : tf_cfg_string(sec, key, k->string_def, out, err);
}

/* --- Markdown ------------------------------------------------------------------ */

typedef struct text {
    char *s;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)n;
        char *g = realloc(t->s, cap);
        if (!g) {
            t->oom = true;
            return;
        }
        t->s = g;
        t->cap = cap;
    }
}

static void put_int(text *t, long long v)
{
    if (v == INT64_MAX) put(t, "inf");
    else put(t, "%lld", v);
}

/* the shortest text that reads back as v; whole numbers as such (10, not 1e+01) */
static void put_float(text *t, double v)
{
    if (isinf(v)) {
        put(t, "%sinf", v < 0 ? "-" : "");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        put(t, "%.0f", v);
        return;
    }
    char b[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (strtod(b, NULL) == v) break;
    }
    put(t, "%s", b);
}

char *tf_cfg_keys_markdown(const tf_cfg_key *table)
{
    text t = {0};
    put(&t, "| key | type | default | bounds | what |\n| --- | --- | --- | --- | --- |\n");
    for (const tf_cfg_key *k = table; k && k->name; k++) {
        put(&t, "| `%s` | %s | ", k->name, type_names[k->type]);
        if (k->required) put(&t, "required");
        else if (k->default_text) put(&t, "%s", k->default_text);
        else switch (k->type) {
            case TF_CFG_KEY_INT: put_int(&t, k->int_def); break;
            case TF_CFG_KEY_FLOAT: put_float(&t, k->float_def); break;
            case TF_CFG_KEY_BOOL: put(&t, "%s", k->bool_def ? "true" : "false"); break;
            default:
                if (k->string_def) put(&t, "\"%s\"", k->string_def);
                else put(&t, "unset");
                break;
            }
        put(&t, " | ");
        if (k->type == TF_CFG_KEY_INT) {
            put(&t, "[");
            put_int(&t, k->int_min);
            put(&t, ", ");
            put_int(&t, k->int_max);
            put(&t, "]");
        } else if (k->type == TF_CFG_KEY_FLOAT) {
            put(&t, "%c", k->min_open ? '(' : '[');
            put_float(&t, k->float_min);
            put(&t, ", ");
            put_float(&t, k->float_max);
            put(&t, "%c", k->max_open ? ')' : ']');
        } else if (k->type == TF_CFG_KEY_CHOICE) {
            for (size_t i = 0; k->choices && k->choices[i]; i++) put(&t, "%s`%s`", i ? ", " : "", k->choices[i]);
        }
        put(&t, " | %s", k->doc ? k->doc : "");
        if (k->why) put(&t, " (bounds: %s)", k->why);
        put(&t, " |\n");
    }
    if (t.oom) {
        free(t.s);
        return NULL;
    }
    return t.s;
}
