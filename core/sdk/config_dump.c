/* config_dump.c — tf_config_dump: the resolved config in libconfig syntax
 * (file values with overrides applied, then the defaults of keys that were
 * read but not set, marked "# default"), so a run can be repeated from it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static void indent(FILE *out, int depth)
{
    for (int i = 0; i < depth; i++) fputs("  ", out);
}

static void write_double(FILE *out, double v)
{
    if (isinf(v)) { /* libconfig reads an overflowing literal as inf */
        fputs(v < 0 ? "-1e999" : "1e999", out);
        return;
    }
    char buf[56];
    cfgi_format_double(v, buf, sizeof buf);
    if (!strpbrk(buf, ".e")) strcat(buf, ".0"); /* "5" would read back as an int */
    fputs(buf, out);
}

static void write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02X", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* Does known key k have a default the dump can show? */
static bool has_default(const cfg_known *k)
{
    return k->kind != CFG_KNOWN_PLAIN && (k->kind != CFG_KNOWN_STRING || k->def_string);
}

/* If k lies under prefix ("" for the section itself), the rest of its name. */
static const char *under(const cfg_known *k, const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 0) return k->key;
    if (strncmp(k->key, prefix, n) == 0 && k->key[n] == '.') return k->key + n + 1;
    return NULL;
}

static char *child_path(const char *prefix, const char *name)
{
    size_t a = strlen(prefix), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    if (a)
        snprintf(p, a + b + 2, "%s.%s", prefix, name);
    else
        memcpy(p, name, b + 1);
    return p;
}

/* The defaults of keys under prefix that group g (NULL: absent) lacks. */
static void write_defaults(FILE *out, const tf_section *sec, const config_setting_t *g,
                           const char *prefix, int depth)
{
    for (size_t i = 0; i < sec->n_known; i++) {
        const cfg_known *k = &sec->known[i];
        const char *rest = has_default(k) ? under(k, prefix) : NULL;
        if (!rest) continue;
        const char *dot = strchr(rest, '.');
        size_t clen = dot ? (size_t)(dot - rest) : strlen(rest);
        char *first = strndup(rest, clen);
        if (!first) return;
        if (g && config_setting_get_member(g, first)) { /* set: written with the group */
            free(first);
            continue;
        }
        if (!dot) {
            indent(out, depth);
            if (k->kind == CFG_KNOWN_FLOAT && isnan(k->def_float)) {
                fprintf(out, "# %s: the default is nan, which libconfig cannot write\n", first);
                free(first);
                continue;
            }
            fprintf(out, "%s = ", first);
            switch (k->kind) {
            case CFG_KNOWN_INT:
                fprintf(out, "%lld%s", k->def_int,
                        k->def_int < -2147483647LL - 1 || k->def_int > 2147483647LL ? "L" : "");
                break;
            case CFG_KNOWN_FLOAT: write_double(out, k->def_float); break;
            case CFG_KNOWN_BOOL: fputs(k->def_bool ? "true" : "false", out); break;
            case CFG_KNOWN_STRING: write_string(out, k->def_string); break;
            case CFG_KNOWN_PLAIN: break;
            }
            fputs("; # default\n", out);
            free(first);
            continue;
        }
        /* an absent group: write it once, at the first key under it */
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const char *r = has_default(&sec->known[j]) ? under(&sec->known[j], prefix) : NULL;
            seen = r && strncmp(r, first, clen) == 0 && r[clen] == '.';
        }
        char *sub = seen ? NULL : child_path(prefix, first);
        if (sub) {
            indent(out, depth);
            fprintf(out, "%s = {\n", first);
            write_defaults(out, sec, NULL, sub, depth + 1);
            indent(out, depth);
            fputs("};\n", out);
            free(sub);
        }
        free(first);
    }
}

static void write_setting(FILE *out, const tf_section *sec, const config_setting_t *s,
                          const char *rel, int depth);

/* s's value; rel is its path in section sec (NULL: no defaults below it). */
static void write_value(FILE *out, const tf_section *sec, const config_setting_t *s,
                        const char *rel, int depth)
{
    int n = config_setting_length(s);
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT: fprintf(out, "%d", config_setting_get_int(s)); break;
    case CONFIG_TYPE_INT64: fprintf(out, "%lldL", config_setting_get_int64(s)); break;
    case CONFIG_TYPE_FLOAT: write_double(out, config_setting_get_float(s)); break;
    case CONFIG_TYPE_BOOL: fputs(config_setting_get_bool(s) ? "true" : "false", out); break;
    case CONFIG_TYPE_STRING: write_string(out, config_setting_get_string(s)); break;
    case CONFIG_TYPE_ARRAY:
        fputc('[', out);
        for (int i = 0; i < n; i++) {
            if (i) fputs(", ", out);
            write_value(out, NULL, config_setting_get_elem(s, (unsigned)i), NULL, depth);
        }
        fputc(']', out);
        break;
    case CONFIG_TYPE_LIST:
        if (n == 0) {
            fputs("()", out);
            break;
        }
        fputs("(\n", out);
        for (int i = 0; i < n; i++) {
            indent(out, depth + 1);
            write_value(out, NULL, config_setting_get_elem(s, (unsigned)i), NULL, depth + 1);
            fputs(i + 1 < n ? ",\n" : "\n", out);
        }
        indent(out, depth);
        fputc(')', out);
        break;
    case CONFIG_TYPE_GROUP:
        fputs("{\n", out);
        for (int i = 0; i < n; i++) {
            const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
            char *sub = rel ? child_path(rel, config_setting_name(m)) : NULL;
            write_setting(out, sub ? sec : NULL, m, sub, depth + 1);
            free(sub);
        }
        if (sec && rel) write_defaults(out, sec, s, rel, depth + 1);
        indent(out, depth);
        fputc('}', out);
        break;
    }
}

static void write_setting(FILE *out, const tf_section *sec, const config_setting_t *s,
                          const char *rel, int depth)
{
    indent(out, depth);
    fprintf(out, "%s = ", config_setting_name(s));
    write_value(out, sec, s, rel, depth);
    fputs(config_setting_get_hook(s) ? "; # -o\n" : ";\n", out);
}

void tf_config_dump(const tf_config *cfg, FILE *out)
{
    if (!cfg || !out) return;
    fputs("# tfcore config: ", out);
    for (const char *p = cfg->path; *p; p++) fputc((unsigned char)*p < 0x20 ? '?' : *p, out);
    fputs("\n# with -o overrides (# -o) and the defaults of keys that were read (# default)\n",
          out);
    const config_setting_t *root = config_root_setting(&cfg->lc);
    int n = config_setting_length(root);
    for (int i = 0; i < n; i++) {
        const config_setting_t *m = config_setting_get_elem(root, (unsigned)i);
        const tf_section *sec = config_setting_is_group(m)
                                    ? cfgi_find_section(cfg, config_setting_name(m))
                                    : NULL;
        write_setting(out, sec, m, sec ? "" : NULL, 0);
    }
    /* sections that were read but not set: only their defaults */
    for (size_t i = 0; i < cfg->n_sections; i++) {
        const tf_section *sec = cfg->sections[i];
        if (config_setting_get_member(root, sec->name)) continue;
        bool any = false;
        for (size_t k = 0; k < sec->n_known && !any; k++) any = has_default(&sec->known[k]);
        if (!any) continue;
        fprintf(out, "%s = {\n", sec->name);
        write_defaults(out, sec, NULL, "", 1);
        fputs("};\n", out);
    }
}
