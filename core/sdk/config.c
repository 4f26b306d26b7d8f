/* config.c — loading a config, sections, the typed accessors that remember
 * what was read, and the check for settings nobody read (tfcore/config.h).
 *
 * Elsewhere: -o overrides in config_override.c, tf_config_dump in
 * config_dump.c, libconfig text helpers in config_syntax.c, name suggestions
 * in config_suggest.c.
 *
 * @include: libconfig 1.5 resolves every @include (nested ones too) against
 * one include folder, which we set to the folder of the top-level file. So
 * all includes of conf/x.cfg are relative to conf/, and an absolute @include
 * path only works for a file loaded from the current folder (libconfig joins
 * the folder and the path).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "config_internal.h"

/* --- lifecycle ------------------------------------------------------------ */

static tf_status oom(tf_error *err) { return tf_error_set(err, TF_ERR_RUNTIME, "out of memory"); }

static tf_config *cfg_alloc(const char *path, const char *include_dir, bool from_source)
{
    tf_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return NULL;
    config_init(&cfg->lc);
    cfg->from_source = from_source;
    cfg->path = strdup(path);
    if (include_dir && *include_dir) {
        cfg->include_dir = strdup(include_dir);
        if (cfg->include_dir) {
            /* "conf/" -> "conf": we join names with '/' ourselves for messages */
            size_t n = strlen(cfg->include_dir);
            while (n > 1 && cfg->include_dir[n - 1] == '/') cfg->include_dir[--n] = '\0';
        }
    }
    if (!cfg->path || (include_dir && *include_dir && !cfg->include_dir)) {
        tf_config_free(cfg);
        return NULL;
    }
    if (cfg->include_dir) config_set_include_dir(&cfg->lc, cfg->include_dir);
    return cfg;
}

void tf_config_free(tf_config *cfg)
{
    if (!cfg) return;
    config_destroy(&cfg->lc);
    for (size_t i = 0; i < cfg->n_sections; i++) {
        tf_section *sec = cfg->sections[i];
        for (size_t k = 0; k < sec->n_known; k++) {
            free(sec->known[k].key);
            free(sec->known[k].def_string);
        }
        free(sec->known);
        free(sec->name);
        free(sec);
    }
    free(cfg->sections);
    for (size_t i = 0; i < cfg->n_overrides; i++) {
        free(cfg->overrides[i]->text);
        free(cfg->overrides[i]->path);
        free(cfg->overrides[i]);
    }
    free(cfg->overrides);
    for (size_t i = 0; i < cfg->n_strings; i++) free(cfg->strings[i]);
    free(cfg->strings);
    free(cfg->path);
    free(cfg->include_dir);
    free(cfg);
}

tf_status tf_config_new(tf_config **out, tf_error *err)
{
    if (!out) return tf_error_set(err, TF_ERR_USAGE, "tf_config_new: no output pointer");
    *out = cfg_alloc("-", NULL, false);
    return *out ? TF_OK : oom(err);
}

void cfgi_file_display(const tf_config *cfg, const char *file, char *buf, size_t n)
{
    if (!file)
        cfgi_format(buf, n, "%s", cfg->path);
    else if (cfg->include_dir && file[0] != '/')
        cfgi_format(buf, n, "%s/%s", cfg->include_dir, file);
    else
        cfgi_format(buf, n, "%s", file);
}

/* libconfig's parse error as "FILE:LINE: message"; a missing @include also
 * names the file it looked for. */
static tf_status parse_error(const tf_config *cfg, const char *text, tf_error *err)
{
    const char *efile = config_error_file(&cfg->lc);
    const char *msg = config_error_text(&cfg->lc) ? config_error_text(&cfg->lc) : "syntax error";
    int line = config_error_line(&cfg->lc);
    char where[CFGI_LOC_MAX];
    cfgi_file_display(cfg, efile, where, sizeof where);
    if (strcmp(msg, "cannot open include file") == 0) {
        char *src = NULL, inc[CFGI_LOC_MAX], shown[CFGI_LOC_MAX];
        if (efile) cfgi_read_text_file(where, &src, NULL);
        bool named = cfgi_include_name_at(efile ? (src ? src : "") : text, line, inc, sizeof inc);
        free(src);
        if (named && inc[0] == '/' && cfg->include_dir)
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s:%d: cannot open include file '%s': libconfig 1.5 reads every "
                                "@include relative to the folder of the top config file (%s), "
                                "so write the path relative to it",
                                where, line, inc, cfg->include_dir);
        if (named) {
            cfgi_file_display(cfg, inc, shown, sizeof shown);
            int fd = open(shown, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
            const char *why = fd >= 0 ? "" : strerror(errno);
            if (fd >= 0) close(fd);
            return tf_error_set(err, TF_ERR_CONFIG, "%s:%d: cannot open include file '%s'%s%s",
                                where, line, shown, *why ? ": " : "", why);
        }
    }
    if (line > 0) return tf_error_set(err, TF_ERR_CONFIG, "%s:%d: %s", where, line, msg);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s", where, msg);
}

static tf_status lint_error(const char *where, cfgi_lint_result r, int line, const char *lit,
                            tf_error *err)
{
    size_t n = strlen(lit);
    switch (r) {
    case CFGI_LINT_UNTERMINATED_STRING:
        return tf_error_set(err, TF_ERR_CONFIG, "%s:%d: string is not closed (no ending \")",
                            where, line);
    case CFGI_LINT_UNTERMINATED_COMMENT:
        return tf_error_set(err, TF_ERR_CONFIG, "%s:%d: comment is not closed (no ending */)",
                            where, line);
    case CFGI_LINT_BAD_INTEGER:
        if (n > 0 && (lit[n - 1] == 'L' || lit[n - 1] == 'l'))
            return tf_error_set(err, TF_ERR_CONFIG, "%s:%d: integer %s is out of the 64-bit range",
                                where, line, lit);
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s:%d: integer %s does not fit in 32 bits and libconfig would read "
                            "it wrong; write %sL for a 64-bit integer",
                            where, line, lit, lit);
    case CFGI_LINT_OK: break;
    }
    return TF_OK;
}

/* libconfig 1.5 opens @include files with fopen and reads them in its flex
 * scanner, which exits the process on a directory ("input in flex scanner
 * failed") and blocks forever on a FIFO; it has no include hook
 * (config_set_include_func is 1.7). So every @include that exists is checked
 * to be a regular file first, nested ones too, down to libconfig's nesting
 * limit; a missing one is left to libconfig, whose error parse_error words. */
#define CFG_INCLUDE_DEPTH_MAX 10
static tf_status check_includes(const tf_config *cfg, const char *text, const char *where,
                                int depth, tf_error *err)
{
    const char *pos = text;
    int line = 1;
    char name[CFGI_LOC_MAX];
    while (depth < CFG_INCLUDE_DEPTH_MAX && cfgi_next_include(&pos, &line, name, sizeof name)) {
        char opened[2 * CFGI_LOC_MAX]; /* the path libconfig opens */
        if (cfg->include_dir)
            cfgi_format(opened, sizeof opened, "%s/%s", cfg->include_dir, name);
        else
            cfgi_format(opened, sizeof opened, "%s", name);
        struct stat sb;
        if (stat(opened, &sb) != 0) continue;
        char *src;
        tf_status st = cfgi_read_text_file(opened, &src, err);
        if (st != TF_OK) {
            tf_error_prefix(err, "%s:%d: @include \"%s\"", where, line, name);
            return st;
        }
        st = check_includes(cfg, src, opened, depth + 1, err);
        free(src);
        if (st != TF_OK) return st;
    }
    return TF_OK;
}

/* Parse text into cfg->lc, with the checks libconfig 1.5 lacks (cfgi_lint)
 * on the text and on every file it included. */
static tf_status cfg_parse(tf_config *cfg, const char *text, tf_error *err)
{
    int line;
    char lit[80] = "";
    cfgi_lint_result r = cfgi_lint(text, false, &line, lit, sizeof lit);
    if (r != CFGI_LINT_OK) return lint_error(cfg->path, r, line, lit, err);
    tf_status ist = check_includes(cfg, text, cfg->path, 0, err);
    if (ist != TF_OK) return ist;
    if (!config_read_string(&cfg->lc, text)) return parse_error(cfg, text, err);
    r = cfgi_lint(text, true, &line, lit, sizeof lit);
    if (r != CFGI_LINT_OK) return lint_error(cfg->path, r, line, lit, err);
    for (unsigned i = 0; i < cfg->lc.num_filenames; i++) {
        char shown[CFGI_LOC_MAX], *src;
        cfgi_file_display(cfg, cfg->lc.filenames[i], shown, sizeof shown);
        tf_status st = cfgi_read_text_file(shown, &src, err);
        if (st != TF_OK) return st;
        r = cfgi_lint(src, true, &line, lit, sizeof lit);
        free(src);
        if (r != CFGI_LINT_OK) return lint_error(shown, r, line, lit, err);
    }
    return TF_OK;
}

tf_status tf_config_load_string(tf_config **out, const char *text, const char *name,
                                const char *include_dir, tf_error *err)
{
    if (!out) return tf_error_set(err, TF_ERR_USAGE, "tf_config_load_string: no output pointer");
    *out = NULL;
    if (!text) return tf_error_set(err, TF_ERR_USAGE, "tf_config_load_string: no text");
    tf_config *cfg = cfg_alloc(name && *name ? name : "-", include_dir, true);
    if (!cfg) return oom(err);
    tf_status st = cfg_parse(cfg, text, err);
    if (st != TF_OK) {
        tf_config_free(cfg);
        return st;
    }
    *out = cfg;
    return TF_OK;
}

tf_status tf_config_load(tf_config **out, const char *path, tf_error *err)
{
    if (!out) return tf_error_set(err, TF_ERR_USAGE, "tf_config_load: no output pointer");
    *out = NULL;
    if (!path || !*path) return tf_error_set(err, TF_ERR_CONFIG, "no config file given");
    char *text;
    tf_status st = cfgi_read_text_file(path, &text, err);
    if (st != TF_OK) return st;
    /* @include resolves against the file's folder; a bare name is in "." */
    char *dir = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) {
        dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir) {
            free(text);
            return oom(err);
        }
    }
    st = tf_config_load_string(out, text, path, dir, err);
    free(dir);
    free(text);
    return st;
}

const char *tf_config_path(const tf_config *cfg) { return cfg ? cfg->path : "-"; }

/* --- where a value came from ---------------------------------------------- */

const cfg_override *cfgi_origin(const config_setting_t *s)
{
    for (; s; s = config_setting_parent(s))
        if (config_setting_get_hook(s)) return config_setting_get_hook(s);
    return NULL;
}

void cfgi_where(const tf_config *cfg, const config_setting_t *s, char *buf, size_t n)
{
    const cfg_override *o = cfgi_origin(s);
    if (o) {
        snprintf(buf, n, "-o %s", o->text);
        return;
    }
    char file[CFGI_LOC_MAX];
    cfgi_file_display(cfg, config_setting_source_file(s), file, sizeof file);
    cfgi_format(buf, n, "%s:%u", file, config_setting_source_line(s));
}

/* --- sections --------------------------------------------------------------- */

tf_section *cfgi_find_section(const tf_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_sections; i++)
        if (strcmp(cfg->sections[i]->name, name) == 0) return cfg->sections[i];
    return NULL;
}

const cfg_known *cfgi_find_known(const tf_section *sec, const char *key)
{
    for (size_t i = 0; i < sec->n_known; i++)
        if (strcmp(sec->known[i].key, key) == 0) return &sec->known[i];
    return NULL;
}

tf_section *tf_config_section(tf_config *cfg, const char *name)
{
    if (!cfg || !name) return NULL;
    tf_section *sec = cfgi_find_section(cfg, name);
    if (sec) return sec;
    if (!cfgi_reserve(&cfg->sections, &cfg->cap_sections, cfg->n_sections + 1,
                      sizeof *cfg->sections))
        return NULL;
    sec = calloc(1, sizeof *sec);
    if (!sec) return NULL;
    sec->name = strdup(name);
    if (!sec->name) {
        free(sec);
        return NULL;
    }
    sec->cfg = cfg;
    cfg->sections[cfg->n_sections++] = sec;
    return sec;
}

bool tf_config_has_section(const tf_config *cfg, const char *name)
{
    if (!cfg || !name) return false;
    const config_setting_t *s = config_setting_get_member(config_root_setting(&cfg->lc), name);
    if (!s) return false;
    return !config_setting_is_group(s) || config_setting_length(s) > 0;
}

const char *tf_section_name(const tf_section *sec) { return sec ? sec->name : ""; }

/* --- read tracking and lookup ---------------------------------------------- */

static bool valid_key(const char *key)
{
    if (!*key) return false;
    for (const char *p = key;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!cfgi_valid_name(p, len)) return false;
        if (!dot) return true;
        p = dot + 1;
    }
}

/* Record sec.key as known, with the default the accessor offered (def points
 * to a long long, double, bool or const char * by kind). */
static tf_status remember(tf_section *sec, const char *key, cfg_known_kind kind, const void *def,
                          tf_error *err)
{
    cfg_known *k = (cfg_known *)cfgi_find_known(sec, key);
    if (k && k->kind != CFG_KNOWN_PLAIN) return TF_OK; /* the first default stays */
    if (!k) {
        if (!cfgi_reserve(&sec->known, &sec->cap_known, sec->n_known + 1, sizeof *sec->known))
            return oom(err);
        k = &sec->known[sec->n_known];
        memset(k, 0, sizeof *k);
        k->key = strdup(key);
        if (!k->key) return oom(err);
        sec->n_known++;
    }
    k->kind = kind;
    switch (kind) {
    case CFG_KNOWN_INT: k->def_int = *(const long long *)def; break;
    case CFG_KNOWN_FLOAT: k->def_float = *(const double *)def; break;
    case CFG_KNOWN_BOOL: k->def_bool = *(const bool *)def; break;
    case CFG_KNOWN_STRING: {
        const char *s = *(const char *const *)def;
        if (s && !(k->def_string = strdup(s))) return oom(err);
        break;
    }
    case CFG_KNOWN_PLAIN: break;
    }
    return TF_OK;
}

/* "LOC: training must be a group of settings (training = { ... };), got int 5" */
static tf_status not_a_group(const tf_config *cfg, const config_setting_t *s, const char *full,
                             tf_error *err)
{
    char loc[CFGI_LOC_MAX], got[CFGI_SHOW_MAX * 4 + 32];
    cfgi_where(cfg, s, loc, sizeof loc);
    cfgi_describe(s, got, sizeof got);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s must be a group of settings ({ ... }), got %s",
                        loc, full, got);
}

/* Find sec.key in the tree (*found = NULL when absent). */
static tf_status lookup(tf_section *sec, const char *key, config_setting_t **found, tf_error *err)
{
    *found = NULL;
    tf_config *cfg = sec->cfg;
    config_setting_t *g = config_setting_get_member(config_root_setting(&cfg->lc), sec->name);
    if (!g) return TF_OK;
    if (!config_setting_is_group(g)) return not_a_group(cfg, g, sec->name, err);
    char *path = strdup(key);
    if (!path) return oom(err);
    tf_status st = TF_OK;
    for (char *p = path;;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        config_setting_t *m = config_setting_get_member(g, p);
        if (!m || !dot) {
            *found = m;
            break;
        }
        if (!config_setting_is_group(m)) {
            /* the group's dotted name: the section, then key up to here */
            char full[CFGI_LOC_MAX];
            snprintf(full, sizeof full, "%s.%.*s", sec->name, (int)(dot - path), key);
            st = not_a_group(cfg, m, full, err);
            break;
        }
        g = m;
        p = dot + 1;
    }
    free(path);
    return st;
}

/* The start of every accessor: validate, remember, look up. */
static tf_status begin(tf_section *sec, const char *key, cfg_known_kind kind, const void *def,
                       config_setting_t **s, tf_error *err)
{
    *s = NULL;
    if (!sec || !key)
        return tf_error_set(err, TF_ERR_CONFIG, "config read without a section or a key");
    if (!valid_key(key))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "invalid key name '%s' read from section '%s' (names are "
                            "[A-Za-z*][-A-Za-z0-9_*]*, dots separate groups)",
                            key, sec->name);
    sec->cfg->reading = true;
    tf_status st = remember(sec, key, kind, def, err);
    if (st != TF_OK) return st;
    return lookup(sec, key, s, err);
}

/* "LOC: sec.key must be WHAT, got DESCRIPTION" */
static tf_status bad_type(const tf_section *sec, const char *key, const config_setting_t *s,
                          const char *what, tf_error *err)
{
    char loc[CFGI_LOC_MAX], got[CFGI_SHOW_MAX * 4 + 32];
    cfgi_where(sec->cfg, s, loc, sizeof loc);
    cfgi_describe(s, got, sizeof got);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be %s, got %s", loc, sec->name, key,
                        what, got);
}

static tf_status missing(const tf_section *sec, const char *key, tf_error *err)
{
    if (!sec->cfg->from_source)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "missing required key '%s.%s' (no config file was given; set it "
                            "with -o %s.%s=VALUE)",
                            sec->name, key, sec->name, key);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: missing required key '%s.%s'", sec->cfg->path,
                        sec->name, key);
}

static void format_ll_bound(long long v, char *buf, size_t n)
{
    if (v == LLONG_MAX)
        snprintf(buf, n, "inf");
    else if (v == LLONG_MIN)
        snprintf(buf, n, "-inf");
    else
        snprintf(buf, n, "%lld", v);
}

/* An integer setting's value, or false if s is not an integer. */
static bool setting_ll(const config_setting_t *s, long long *v)
{
    if (config_setting_type(s) == CONFIG_TYPE_INT)
        *v = config_setting_get_int(s);
    else if (config_setting_type(s) == CONFIG_TYPE_INT64)
        *v = config_setting_get_int64(s);
    else
        return false;
    return true;
}

static tf_status int_value(const tf_section *sec, const char *key, const config_setting_t *s,
                           long long min, long long max, long long *out, tf_error *err)
{
    long long v;
    if (!setting_ll(s, &v)) return bad_type(sec, key, s, "an integer", err);
    if (v < min || v > max) {
        char loc[CFGI_LOC_MAX], lo[32], hi[32];
        cfgi_where(sec->cfg, s, loc, sizeof loc);
        format_ll_bound(min, lo, sizeof lo);
        format_ll_bound(max, hi, sizeof hi);
        return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be in [%s, %s], got %lld", loc,
                            sec->name, key, lo, hi, v);
    }
    *out = v;
    return TF_OK;
}

/* --- accessors ---------------------------------------------------------------- */

bool tf_cfg_has(tf_section *sec, const char *key)
{
    config_setting_t *s;
    return begin(sec, key, CFG_KNOWN_PLAIN, NULL, &s, NULL) == TF_OK && s;
}

tf_status tf_cfg_int(tf_section *sec, const char *key, long long def, long long min,
                     long long max, long long *out, tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_INT, &def, &s, err);
    if (st != TF_OK) return st;
    if (!s) {
        *out = def;
        return TF_OK;
    }
    return int_value(sec, key, s, min, max, out, err);
}

tf_status tf_cfg_require_int(tf_section *sec, const char *key, long long min, long long max,
                             long long *out, tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_PLAIN, NULL, &s, err);
    if (st != TF_OK) return st;
    if (!s) return missing(sec, key, err);
    return int_value(sec, key, s, min, max, out, err);
}

tf_status tf_cfg_float(tf_section *sec, const char *key, double def, double min, double max,
                       double *out, tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_FLOAT, &def, &s, err);
    if (st != TF_OK) return st;
    if (!s) {
        *out = def;
        return TF_OK;
    }
    double v;
    long long iv;
    if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
        v = config_setting_get_float(s);
    else if (setting_ll(s, &iv))
        v = (double)iv; /* 5 -> 5.0 */
    else
        return bad_type(sec, key, s, "a number", err);
    if (!(v >= min && v <= max)) {
        char loc[CFGI_LOC_MAX], lo[48], hi[48], got[48];
        cfgi_where(sec->cfg, s, loc, sizeof loc);
        cfgi_format_double(min, lo, sizeof lo);
        cfgi_format_double(max, hi, sizeof hi);
        cfgi_format_double(v, got, sizeof got);
        return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be in [%s, %s], got %s", loc,
                            sec->name, key, lo, hi, got);
    }
    *out = v;
    return TF_OK;
}

tf_status tf_cfg_bool(tf_section *sec, const char *key, bool def, bool *out, tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_BOOL, &def, &s, err);
    if (st != TF_OK) return st;
    if (!s) {
        *out = def;
        return TF_OK;
    }
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return bad_type(sec, key, s, "true or false", err);
    *out = config_setting_get_bool(s) != 0;
    return TF_OK;
}

tf_status tf_cfg_string(tf_section *sec, const char *key, const char *def, const char **out,
                        tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_STRING, &def, &s, err);
    if (st != TF_OK) return st;
    if (!s) {
        *out = def;
        return TF_OK;
    }
    if (config_setting_type(s) != CONFIG_TYPE_STRING) return bad_type(sec, key, s, "a string", err);
    *out = config_setting_get_string(s);
    return TF_OK;
}

tf_status tf_cfg_require_string(tf_section *sec, const char *key, const char **out,
                                tf_error *err)
{
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_PLAIN, NULL, &s, err);
    if (st != TF_OK) return st;
    if (!s) return missing(sec, key, err);
    if (config_setting_type(s) != CONFIG_TYPE_STRING) return bad_type(sec, key, s, "a string", err);
    *out = config_setting_get_string(s);
    return TF_OK;
}

tf_status tf_cfg_choice(tf_section *sec, const char *key, const char *def,
                        const char *const *choices, const char **out, tf_error *err)
{
    const char *v = NULL;
    tf_status st = tf_cfg_string(sec, key, def, &v, err);
    if (st != TF_OK) {
        /* not a string: say what it should have been */
        config_setting_t *s;
        if (lookup(sec, key, &s, NULL) != TF_OK || !s) return st;
        char list[TF_ERROR_MSG_MAX / 2] = "", loc[CFGI_LOC_MAX], got[CFGI_SHOW_MAX * 4 + 32];
        for (size_t i = 0; choices && choices[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     choices[i]);
        cfgi_where(sec->cfg, s, loc, sizeof loc);
        cfgi_describe(s, got, sizeof got);
        return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be one of %s; got %s", loc,
                            sec->name, key, list, got);
    }
    config_setting_t *s;
    if (lookup(sec, key, &s, err) != TF_OK || !s) { /* absent: the default */
        *out = v;
        return TF_OK;
    }
    size_t n = 0;
    for (; choices && choices[n]; n++)
        if (strcmp(choices[n], v) == 0) {
            *out = choices[n];
            return TF_OK;
        }
    char loc[CFGI_LOC_MAX], list[TF_ERROR_MSG_MAX / 2] = "", shown[CFGI_SHOW_MAX * 4 + 8];
    cfgi_where(sec->cfg, s, loc, sizeof loc);
    for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 choices[i]);
    cfgi_escape(v, CFGI_SHOW_MAX, shown, sizeof shown);
    const char *near = tf_closest(v, choices, n);
    if (near)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.%s must be one of %s; got '%s' (did you mean '%s'?)", loc,
                            sec->name, key, list, shown, near);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s must be one of %s; got '%s'", loc,
                        sec->name, key, list, shown);
}

/* The elements of a list-valued setting: s itself when it is a scalar. */
static unsigned list_len(const config_setting_t *s)
{
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) return (unsigned)config_setting_length(s);
    return 1;
}
static const config_setting_t *list_elem(const config_setting_t *s, unsigned i)
{
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) return config_setting_get_elem(s, i);
    return s;
}

/* "LOC: sec.key[i] must be WHAT, got DESCRIPTION" */
static tf_status bad_elem(const tf_section *sec, const char *key, const config_setting_t *e,
                          unsigned i, const char *what, tf_error *err)
{
    char loc[CFGI_LOC_MAX], got[CFGI_SHOW_MAX * 4 + 32];
    cfgi_where(sec->cfg, e, loc, sizeof loc);
    cfgi_describe(e, got, sizeof got);
    return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.%s[%u] must be %s, got %s", loc, sec->name,
                        key, i, what, got);
}

tf_status tf_cfg_int_list(tf_section *sec, const char *key, long long **out, size_t *n,
                          tf_error *err)
{
    *out = NULL;
    *n = 0;
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_PLAIN, NULL, &s, err);
    if (st != TF_OK || !s) return st;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST && t != CONFIG_TYPE_INT &&
        t != CONFIG_TYPE_INT64)
        return bad_type(sec, key, s, "an integer or a list of integers", err);
    unsigned len = list_len(s);
    if (len == 0) return TF_OK;
    long long *v = malloc(len * sizeof *v); /* [len] */
    if (!v) return oom(err);
    for (unsigned i = 0; i < len; i++) {
        const config_setting_t *e = list_elem(s, i);
        if (!setting_ll(e, &v[i])) {
            free(v);
            return bad_elem(sec, key, e, i, "an integer", err);
        }
    }
    *out = v;
    *n = len;
    return TF_OK;
}

tf_status tf_cfg_string_list(tf_section *sec, const char *key, const char ***out, size_t *n,
                             tf_error *err)
{
    *out = NULL;
    *n = 0;
    config_setting_t *s;
    tf_status st = begin(sec, key, CFG_KNOWN_PLAIN, NULL, &s, err);
    if (st != TF_OK || !s) return st;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST && t != CONFIG_TYPE_STRING)
        return bad_type(sec, key, s, "a string or a list of strings", err);
    unsigned len = list_len(s);
    if (len == 0) return TF_OK;
    const char **v = malloc(len * sizeof *v); /* [len], strings owned by cfg */
    if (!v) return oom(err);
    for (unsigned i = 0; i < len; i++) {
        const config_setting_t *e = list_elem(s, i);
        if (config_setting_type(e) != CONFIG_TYPE_STRING) {
            free(v);
            return bad_elem(sec, key, e, i, "a string", err);
        }
        v[i] = config_setting_get_string(e);
    }
    *out = v;
    *n = len;
    return TF_OK;
}

/* A copy of s that lives as long as cfg (one copy per distinct string). */
static const char *intern(tf_config *cfg, const char *s)
{
    for (size_t i = 0; i < cfg->n_strings; i++)
        if (strcmp(cfg->strings[i], s) == 0) return cfg->strings[i];
    if (!cfgi_reserve(&cfg->strings, &cfg->cap_strings, cfg->n_strings + 1, sizeof *cfg->strings))
        return NULL;
    char *c = strdup(s);
    if (!c) return NULL;
    cfg->strings[cfg->n_strings++] = c;
    return c;
}

const char *tf_cfg_where(tf_section *sec, const char *key)
{
    if (!sec) return "-";
    config_setting_t *s = NULL;
    if (key && valid_key(key) && lookup(sec, key, &s, NULL) == TF_OK && s) {
        char loc[CFGI_LOC_MAX];
        cfgi_where(sec->cfg, s, loc, sizeof loc);
        const char *w = intern(sec->cfg, loc);
        if (w) return w;
    }
    return sec->cfg->path;
}

/* --- settings nobody read -------------------------------------------------------- */

/* A growable dotted path: "optimizer.beta1". */
typedef struct path_buf {
    char *p;
    size_t len, cap;
} path_buf;

static bool path_push(path_buf *b, const char *name, size_t *saved)
{
    *saved = b->len;
    size_t add = strlen(name) + (b->len ? 1 : 0);
    if (!cfgi_reserve(&b->p, &b->cap, b->len + add + 1, 1)) return false;
    if (b->len) b->p[b->len++] = '.';
    memcpy(b->p + b->len, name, strlen(name) + 1);
    b->len += strlen(name);
    return true;
}

static tf_status unknown_section(const tf_config *cfg, const char *loc, const char *name,
                                 tf_error *err)
{
    const char **names = malloc((cfg->n_sections + 1) * sizeof *names); /* [n_sections] */
    if (!names) return oom(err);
    char list[TF_ERROR_MSG_MAX / 2] = "";
    for (size_t i = 0; i < cfg->n_sections; i++) {
        names[i] = cfg->sections[i]->name;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 names[i]);
    }
    const char *near = tf_closest(name, names, cfg->n_sections);
    tf_status st;
    if (near)
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: unknown section '%s' (did you mean '%s'?)", loc,
                          name, near);
    else if (cfg->n_sections)
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: unknown section '%s' (sections read: %s)", loc,
                          name, list);
    else
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: unknown section '%s'", loc, name);
    free(names);
    return st;
}

static tf_status unknown_key(const tf_section *sec, const char *loc, const char *key,
                             tf_error *err)
{
    const char **keys = malloc((sec->n_known + 1) * sizeof *keys); /* [n_known] */
    if (!keys) return oom(err);
    for (size_t i = 0; i < sec->n_known; i++) keys[i] = sec->known[i].key;
    const char *near = tf_closest(key, keys, sec->n_known);
    tf_status st;
    if (near)
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: unknown key '%s.%s' (did you mean '%s'?)", loc,
                          sec->name, key, near);
    else
        st = tf_error_set(err, TF_ERR_CONFIG, "%s: unknown key '%s.%s'", loc, sec->name, key);
    free(keys);
    return st;
}

/* Was the (leaf or empty group) setting at dotted path asked for? An empty
 * group also counts as read when a key below it was asked for. */
static bool path_known(const tf_section *sec, const char *path, bool empty_group)
{
    if (cfgi_find_known(sec, path)) return true;
    if (!empty_group) return false;
    size_t n = strlen(path);
    for (size_t i = 0; i < sec->n_known; i++)
        if (strncmp(sec->known[i].key, path, n) == 0 && sec->known[i].key[n] == '.') return true;
    return false;
}

/* Every file setting under group g (path b) of section sec, in file order. */
static tf_status check_group(const tf_config *cfg, const tf_section *sec,
                             const config_setting_t *g, path_buf *b, tf_error *err)
{
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
        if (config_setting_get_hook(m)) continue; /* from -o: checked after the file */
        size_t saved;
        if (!path_push(b, config_setting_name(m), &saved)) return oom(err);
        tf_status st = TF_OK;
        bool group = config_setting_is_group(m);
        if (group && config_setting_length(m) > 0) {
            st = check_group(cfg, sec, m, b, err);
        } else if (!path_known(sec, b->p, group)) {
            char loc[CFGI_LOC_MAX];
            cfgi_where(cfg, m, loc, sizeof loc);
            st = unknown_key(sec, loc, b->p, err);
        }
        b->len = saved;
        b->p[saved] = '\0';
        if (st != TF_OK) return st;
    }
    return TF_OK;
}

/* The setting at a dotted path from the root, or NULL. */
static config_setting_t *find_path(const tf_config *cfg, const char *path)
{
    char *copy = strdup(path);
    if (!copy) return NULL;
    config_setting_t *s = config_root_setting(&cfg->lc);
    for (char *p = copy; s;) {
        char *dot = strchr(p, '.');
        if (dot) *dot = '\0';
        s = config_setting_is_group(s) ? config_setting_get_member(s, p) : NULL;
        if (!dot) break;
        p = dot + 1;
    }
    free(copy);
    return s;
}

tf_status tf_config_check_unread(const tf_config *cfg, tf_error *err)
{
    if (!cfg) return tf_error_set(err, TF_ERR_USAGE, "tf_config_check_unread: no config");
    const config_setting_t *root = config_root_setting(&cfg->lc);
    path_buf b = {0};
    tf_status st = TF_OK;
    /* the file's settings, in file order */
    int n = config_setting_length(root);
    for (int i = 0; i < n && st == TF_OK; i++) {
        const config_setting_t *m = config_setting_get_elem(root, (unsigned)i);
        if (config_setting_get_hook(m)) continue;
        const tf_section *sec = cfgi_find_section(cfg, config_setting_name(m));
        char loc[CFGI_LOC_MAX];
        cfgi_where(cfg, m, loc, sizeof loc);
        if (!sec)
            st = unknown_section(cfg, loc, config_setting_name(m), err);
        else if (!config_setting_is_group(m))
            st = not_a_group(cfg, m, sec->name, err);
        else {
            b.len = 0;
            if (b.p) b.p[0] = '\0';
            st = check_group(cfg, sec, m, &b, err);
        }
    }
    free(b.p);
    /* then the settings -o made, in the order given */
    for (size_t i = 0; i < cfg->n_overrides && st == TF_OK; i++) {
        const cfg_override *o = cfg->overrides[i];
        const config_setting_t *s = find_path(cfg, o->path);
        if (!s || config_setting_get_hook(s) != o) continue; /* replaced by a later -o */
        const char *dot = strchr(o->path, '.');
        char secname[CFGI_LOC_MAX], loc[CFGI_LOC_MAX];
        snprintf(secname, sizeof secname, "%.*s", (int)(dot - o->path), o->path);
        snprintf(loc, sizeof loc, "-o %s", o->text);
        const tf_section *sec = cfgi_find_section(cfg, secname);
        if (!sec)
            st = unknown_section(cfg, loc, secname, err);
        else if (!path_known(sec, dot + 1, false))
            st = unknown_key(sec, loc, dot + 1, err);
    }
    if (st == TF_OK) tf_error_clear(err);
    return st;
}
