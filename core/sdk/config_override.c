/* config_override.c — "-o section.key=value" (tf_config_override).
 *
 * The value is read as libconfig reads a value: we let libconfig parse
 * "x = VALUE;" in a scratch config. Two exceptions: a plain decimal integer
 * is read here (libconfig 1.5 wraps one that needs more than 32 bits, we
 * make it a 64-bit int), and text that is not a single libconfig value is
 * taken as a bare string (output_dir=runs/a), unless it starts like a number,
 * a quoted string or a list, where it is an error.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static char *trimmed_copy(const char *s, size_t len)
{
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    return strndup(s, len);
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

/* [-+]?[0-9]+ */
static bool plain_integer(const char *v)
{
    if (*v == '-' || *v == '+') v++;
    if (!*v) return false;
    for (; *v; v++)
        if (!is_digit((unsigned char)*v)) return false;
    return true;
}

static bool starts_like_number(const char *v)
{
    if (*v == '-' || *v == '+') v++;
    return is_digit((unsigned char)v[0]) || (v[0] == '.' && is_digit((unsigned char)v[1]));
}

/* Parse VALUE into a setting "x" at the root of scratch. */
static tf_status parse_value(const char *text, const char *key, const char *value,
                             config_t *scratch, config_setting_t **out, tf_error *err)
{
    config_setting_t *root = config_root_setting(scratch);
    *out = NULL;
    if (plain_integer(value)) {
        errno = 0;
        long long v = strtoll(value, NULL, 10);
        if (errno == ERANGE)
            return tf_error_set(err, TF_ERR_CONFIG, "-o %s: integer %s is out of the 64-bit range",
                                text, value);
        bool small = v >= INT_MIN && v <= INT_MAX;
        config_setting_t *s =
            config_setting_add(root, "x", small ? CONFIG_TYPE_INT : CONFIG_TYPE_INT64);
        if (!s || !(small ? config_setting_set_int(s, (int)v) : config_setting_set_int64(s, v)))
            return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
        *out = s;
        return TF_OK;
    }
    int line;
    char lit[80];
    switch (cfgi_lint(value, true, &line, lit, sizeof lit)) {
    case CFGI_LINT_OK: break;
    case CFGI_LINT_UNTERMINATED_STRING:
        return tf_error_set(err, TF_ERR_CONFIG, "-o %s: a string is not closed (no ending \")",
                            text);
    case CFGI_LINT_UNTERMINATED_COMMENT:
        return tf_error_set(err, TF_ERR_CONFIG, "-o %s: a comment is not closed (no ending */)",
                            text);
    case CFGI_LINT_BAD_INTEGER: {
        size_t n = strlen(lit);
        if (n > 0 && (lit[n - 1] == 'L' || lit[n - 1] == 'l'))
            return tf_error_set(err, TF_ERR_CONFIG, "-o %s: integer %s is out of the 64-bit range",
                                text, lit);
        return tf_error_set(err, TF_ERR_CONFIG,
                            "-o %s: integer %s does not fit in 32 bits; write %sL for a 64-bit "
                            "integer",
                            text, lit, lit);
    }
    }
    size_t len = strlen(value);
    char *src = malloc(len + 8);
    if (!src) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
    snprintf(src, len + 8, "x = %s;", value);
    bool ok = config_read_string(scratch, src);
    free(src);
    root = config_root_setting(scratch);
    if (ok && config_setting_length(root) == 1 &&
        strcmp(config_setting_name(config_setting_get_elem(root, 0)), "x") == 0) {
        config_setting_t *s = config_setting_get_elem(root, 0);
        if (config_setting_is_group(s))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "-o %s: a group cannot be set with -o; set its keys one by one "
                                "(%s.KEY=VALUE)",
                                text, key);
        *out = s;
        return TF_OK;
    }
    char c = value[0];
    if (c == '"' || c == '[' || c == '(' || c == '{') {
        const char *why = ok ? "more than one value" : config_error_text(scratch);
        const char *hint = (c == '[' || c == '(') && !ok
                               ? " (strings inside a list need quotes: [\"a\", \"b\"])"
                               : "";
        return tf_error_set(err, TF_ERR_CONFIG, "-o %s: cannot read the value: %s%s", text,
                            why ? why : "syntax error", hint);
    }
    if (starts_like_number(value))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "-o %s: '%s' is not a number (to set a string, quote it: %s=\"%s\")",
                            text, value, key, value);
    /* a bare word: the text itself is the string */
    config_destroy(scratch);
    config_init(scratch);
    config_setting_t *s = config_setting_add(config_root_setting(scratch), "x", CONFIG_TYPE_STRING);
    if (!s || !config_setting_set_string(s, value))
        return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
    *out = s;
    return TF_OK;
}

/* A deep copy of src added to parent as `name` (NULL inside lists). */
static config_setting_t *copy_setting(config_setting_t *parent, const char *name,
                                      const config_setting_t *src)
{
    int t = config_setting_type(src);
    config_setting_t *d = config_setting_add(parent, name, t);
    if (!d) return NULL;
    bool ok = true;
    switch (t) {
    case CONFIG_TYPE_INT: ok = config_setting_set_int(d, config_setting_get_int(src)); break;
    case CONFIG_TYPE_INT64: ok = config_setting_set_int64(d, config_setting_get_int64(src)); break;
    case CONFIG_TYPE_FLOAT: ok = config_setting_set_float(d, config_setting_get_float(src)); break;
    case CONFIG_TYPE_BOOL: ok = config_setting_set_bool(d, config_setting_get_bool(src)); break;
    case CONFIG_TYPE_STRING:
        ok = config_setting_set_string(d, config_setting_get_string(src));
        break;
    default:
        for (int i = 0; ok && i < config_setting_length(src); i++) {
            const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
            ok = copy_setting(d, t == CONFIG_TYPE_GROUP ? config_setting_name(e) : NULL, e) != NULL;
        }
    }
    return ok ? d : NULL;
}

/* Set an existing scalar (or list) setting to the parsed value. 0: done;
 * 1: a type clash; -1: out of memory. */
static int set_existing(config_setting_t *parent, config_setting_t **sp,
                        const config_setting_t *v)
{
    config_setting_t *s = *sp;
    int et = config_setting_type(s), nt = config_setting_type(v);
    bool e_list = et == CONFIG_TYPE_ARRAY || et == CONFIG_TYPE_LIST;
    bool n_list = nt == CONFIG_TYPE_ARRAY || nt == CONFIG_TYPE_LIST;
    bool e_int = et == CONFIG_TYPE_INT || et == CONFIG_TYPE_INT64;
    bool n_int = nt == CONFIG_TYPE_INT || nt == CONFIG_TYPE_INT64;
    long long iv = nt == CONFIG_TYPE_INT64 ? config_setting_get_int64(v) : config_setting_get_int(v);
    if (e_list) { /* a list takes a list, or a scalar (read as a one-element list) */
        char *name = strdup(config_setting_name(s));
        if (!name) return -1;
        config_setting_remove(parent, name);
        *sp = copy_setting(parent, name, v);
        free(name);
        return *sp ? 0 : -1;
    }
    if (n_list) return 1;
    if (e_int && n_int) {
        if (et == CONFIG_TYPE_INT && nt == CONFIG_TYPE_INT) return config_setting_set_int(s, (int)iv) ? 0 : -1;
        /* widen to 64 bits: libconfig has no call that changes a setting's type */
        s->type = CONFIG_TYPE_INT64;
        s->value.llval = iv;
        return 0;
    }
    if (et == CONFIG_TYPE_FLOAT && n_int) /* int -> float: lossless for config values */
        return config_setting_set_float(s, (double)iv) ? 0 : -1;
    if (e_int && nt == CONFIG_TYPE_FLOAT) {
        /* A float over an int is what a file may say too (logging_steps = 0.5
         * is a ratio); the key's reader decides whether it takes a float, as
         * for a value written in the file. libconfig cannot change a type. */
        s->type = CONFIG_TYPE_FLOAT;
        s->value.fval = config_setting_get_float(v);
        return 0;
    }
    if (et != nt) return 1;
    switch (et) {
    case CONFIG_TYPE_FLOAT: return config_setting_set_float(s, config_setting_get_float(v)) ? 0 : -1;
    case CONFIG_TYPE_BOOL: return config_setting_set_bool(s, config_setting_get_bool(v)) ? 0 : -1;
    case CONFIG_TYPE_STRING:
        return config_setting_set_string(s, config_setting_get_string(v)) ? 0 : -1;
    }
    return 1;
}

/* The dotted name of parts[0..n). */
static void join_parts(char **parts, size_t n, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? "." : "", parts[i]);
}

/* Put the parsed value v at parts[0..n) in cfg's tree, marking what it made
 * with rec. *touched: the tree was changed (so rec must stay alive). */
static tf_status apply(tf_config *cfg, cfg_override *rec, char **parts, size_t n,
                       const config_setting_t *v, bool quoted, bool *touched, tf_error *err)
{
    *touched = false;
    char loc[CFGI_LOC_MAX], full[CFGI_LOC_MAX], got[CFGI_SHOW_MAX * 4 + 32];
    config_setting_t *g = config_root_setting(&cfg->lc);
    size_t i = 0;
    for (; i + 1 < n; i++) {
        config_setting_t *m = config_setting_get_member(g, parts[i]);
        if (!m) break;
        if (!config_setting_is_group(m)) {
            cfgi_where(cfg, m, loc, sizeof loc);
            join_parts(parts, i + 1, full, sizeof full);
            return tf_error_set(err, TF_ERR_CONFIG, "-o %s: %s is %s (%s), not a group", rec->text,
                                full, cfgi_type_name(config_setting_type(m)), loc);
        }
        g = m;
    }
    if (i + 1 == n) {
        config_setting_t *s = config_setting_get_member(g, parts[i]);
        if (s) {
            join_parts(parts, n, full, sizeof full);
            cfgi_where(cfg, s, loc, sizeof loc);
            if (config_setting_is_group(s))
                return tf_error_set(err, TF_ERR_CONFIG,
                                    "-o %s: %s is a group (%s); set its keys one by one "
                                    "(%s.KEY=VALUE)",
                                    rec->text, full, loc, full);
            int et = config_setting_type(s);
            int r = set_existing(g, &s, v);
            if (r > 0) {
                cfgi_describe(v, got, sizeof got);
                if (et == CONFIG_TYPE_STRING && !quoted)
                    return tf_error_set(err, TF_ERR_CONFIG,
                                        "-o %s: %s is a string (%s), got %s; quote it to set a "
                                        "string: %s=\"...\"",
                                        rec->text, full, loc, got, full);
                return tf_error_set(err, TF_ERR_CONFIG, "-o %s: %s is %s (%s), got %s", rec->text,
                                    full, cfgi_type_name(et), loc, got);
            }
            *touched = true;
            if (r < 0) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", rec->text);
            config_setting_set_hook(s, rec);
            return TF_OK;
        }
    }
    /* create the missing groups, then the value */
    *touched = true;
    for (; i + 1 < n; i++) {
        config_setting_t *m = config_setting_add(g, parts[i], CONFIG_TYPE_GROUP);
        if (!m) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", rec->text);
        config_setting_set_hook(m, rec);
        g = m;
    }
    config_setting_t *s = copy_setting(g, parts[n - 1], v);
    if (!s) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", rec->text);
    config_setting_set_hook(s, rec);
    return TF_OK;
}

/* Split KEY at dots into parts (pointers into key, which is modified). */
static tf_status split_key(const char *text, char *key, char ***parts, size_t *n, tf_error *err)
{
    size_t count = 1;
    for (const char *p = key; *p; p++) count += *p == '.';
    *parts = malloc(count * sizeof **parts); /* [count] */
    if (!*parts) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
    *n = 0;
    for (char *p = key;;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        if (!cfgi_valid_name(p, strlen(p))) {
            tf_status st = tf_error_set(
                err, TF_ERR_CONFIG,
                "-o %s: '%s' is not a valid key name (a letter or '*', then letters, digits, "
                "'_', '-' or '*')",
                text, p);
            free(*parts);
            *parts = NULL;
            return st;
        }
        (*parts)[(*n)++] = p;
        if (!dot) break;
        p = dot + 1;
    }
    if (*n < 2) {
        tf_status st = tf_error_set(err, TF_ERR_CONFIG,
                                    "-o %s: expected SECTION.KEY=VALUE; '%s' names no section "
                                    "(e.g. training.%s)",
                                    text, (*parts)[0], (*parts)[0]);
        free(*parts);
        *parts = NULL;
        return st;
    }
    return TF_OK;
}

tf_status tf_config_override(tf_config *cfg, const char *assignment, tf_error *err)
{
    if (!cfg) return tf_error_set(err, TF_ERR_USAGE, "tf_config_override: no config");
    if (!assignment) return tf_error_set(err, TF_ERR_CONFIG, "-o: no assignment given");
    char *text = trimmed_copy(assignment, strlen(assignment));
    if (!text) return tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", assignment);
    tf_status st = TF_OK;
    char *key = NULL, *value = NULL, **parts = NULL;
    size_t nparts = 0;
    cfg_override *rec = NULL;
    config_t scratch;
    config_init(&scratch);

    for (const char *p = text; *p; p++)
        if (iscntrl((unsigned char)*p)) {
            char shown[TF_ERROR_MSG_MAX / 2];
            cfgi_escape(text, 200, shown, sizeof shown);
            st = tf_error_set(err, TF_ERR_CONFIG,
                              "-o %s: the assignment contains a control character (\\x%02X)",
                              shown, (unsigned char)*p);
            goto done;
        }
    if (cfg->reading) {
        st = tf_error_set(err, TF_ERR_CONFIG,
                          "-o %s: overrides must be applied before the config is read", text);
        goto done;
    }
    const char *eq = strchr(text, '=');
    if (!eq) {
        st = tf_error_set(err, TF_ERR_CONFIG, "-o %s: expected SECTION.KEY=VALUE (no '=')", text);
        goto done;
    }
    key = trimmed_copy(text, (size_t)(eq - text));
    value = trimmed_copy(eq + 1, strlen(eq + 1));
    if (!key || !value) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
        goto done;
    }
    if (!*key) {
        st = tf_error_set(err, TF_ERR_CONFIG, "-o %s: expected SECTION.KEY=VALUE (no key before '=')",
                          text);
        goto done;
    }
    if (!*value) {
        st = tf_error_set(err, TF_ERR_CONFIG,
                          "-o %s: no value after '=' (write %s=\"\" for an empty string)", text, key);
        goto done;
    }
    char *path = strdup(key);
    if (!path) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
        goto done;
    }
    st = split_key(text, key, &parts, &nparts, err);
    if (st != TF_OK) {
        free(path);
        goto done;
    }
    config_setting_t *v;
    st = parse_value(text, path, value, &scratch, &v, err);
    if (st != TF_OK) {
        free(path);
        goto done;
    }
    if (!cfgi_reserve(&cfg->overrides, &cfg->cap_overrides, cfg->n_overrides + 1,
                      sizeof *cfg->overrides) ||
        !(rec = calloc(1, sizeof *rec))) {
        free(path);
        st = tf_error_set(err, TF_ERR_RUNTIME, "-o %s: out of memory", text);
        goto done;
    }
    rec->text = text;
    rec->path = path;
    text = NULL; /* owned by rec now */
    bool touched;
    st = apply(cfg, rec, parts, nparts, v, value[0] == '"', &touched, err);
    if (touched) {
        cfg->overrides[cfg->n_overrides++] = rec; /* settings point at it */
    } else {
        free(rec->text);
        free(rec->path);
        free(rec);
    }
done:
    config_destroy(&scratch);
    free(parts);
    free(key);
    free(value);
    free(text);
    return st;
}

tf_status tf_config_unset(tf_config *cfg, const char *dotted, tf_error *err)
{
    if (cfg->reading)
        return tf_error_set(err, TF_ERR_RUNTIME, "config: cannot unset '%s' after settings were read", dotted);
    config_setting_t *s = config_lookup(&cfg->lc, dotted);
    if (!s) return TF_OK;
    config_setting_t *parent = config_setting_parent(s);
    const char *name = config_setting_name(s);
    if (!parent || !name || config_setting_remove(parent, name) != CONFIG_TRUE)
        return tf_error_set(err, TF_ERR_RUNTIME, "config: cannot remove '%s'", dotted);
    return TF_OK;
}
