/* cli_plugins.c — `tfcore plugins`: every plugin found (kind, name, version,
 * ABI, path, description), every one that cannot run here, and every file
 * rejected, with why. --json for scripts; --keys NAME prints a plugin's config
 * keys (tfcore/config_keys.h) as the Markdown table of its README. */
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "registry.h"
#include "tfcore/config_keys.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tfcore plugins [--json] [--path DIR[:DIR...]] [--keys [KIND/]NAME]\n"
                 "  Lists the plugins on the search path: $TFCORE_PLUGIN_PATH, the build tree's\n"
                 "  plugin folders (when run from the build tree), then the installed folder.\n"
                 "  --path   search these folders first (as plugins.path in a config)\n"
                 "  --json   one JSON object: {\"searched\": [...], \"plugins\": [...], \"rejected\": [...]}\n"
                 "  --keys   the config keys of plugin NAME (e.g. imdb, dataset/imdb): key, type,\n"
                 "           default, bounds, what; the table its README holds\n");
}

/* --keys [KIND/]NAME: the plugin's key table as Markdown on stdout. */
static int print_keys(const tf_registry *reg, const char *want)
{
    const char *slash = strchr(want, '/');
    const tf_loaded_plugin *hit = NULL;
    int n = 0;
    for (size_t i = 0; i < reg->nfound; i++) {
        const tf_loaded_plugin *p = &reg->found[i];
        const char *kind = tf_kind_name(p->desc->kind);
        bool match = slash ? (strlen(kind) == (size_t)(slash - want) && !strncmp(kind, want, (size_t)(slash - want)) &&
                              !strcmp(p->desc->name, slash + 1))
                           : !strcmp(p->desc->name, want);
        if (!match) continue;
        if (hit && hit->desc->kind == p->desc->kind) continue; /* a later folder's copy: the first one wins */
        hit = hit ? hit : p;
        n++;
    }
    tf_error err = {0};
    if (!hit) {
        tf_error_set(&err, TF_ERR_USAGE, "plugins --keys: no plugin named '%s' on the search path", want);
        return tf_cli_fail(&err);
    }
    if (n > 1) {
        tf_error_set(&err, TF_ERR_USAGE, "plugins --keys: more than one kind has a plugin named '%s'; say KIND/%s",
                     want, want);
        return tf_cli_fail(&err);
    }
    const tf_cfg_key *const *keys = dlsym(hit->handle, TF_PLUGIN_KEYS_SYMBOL);
    if (!keys || !*keys) {
        tf_error_set(&err, TF_ERR_PLUGIN, "%s: %s %s has no config key table (%s)", hit->path,
                     tf_kind_name(hit->desc->kind), hit->desc->name, TF_PLUGIN_KEYS_SYMBOL);
        return tf_cli_fail(&err);
    }
    char *md = tf_cfg_keys_markdown(*keys);
    if (!md) {
        tf_error_set(&err, TF_ERR_RUNTIME, "out of memory");
        return tf_cli_fail(&err);
    }
    fputs(md, stdout);
    free(md);
    return 0;
}

static int print_json(const tf_registry *reg)
{
    json_t *root = json_object(), *searched = json_array(), *found = json_array(),
           *rejected = json_array();
    for (size_t i = 0; i < reg->nsearched; i++) json_array_append_new(searched, json_string(reg->searched[i]));
    for (size_t i = 0; i < reg->nfound; i++) {
        const tf_loaded_plugin *p = &reg->found[i];
        char abi[32];
        snprintf(abi, sizeof abi, "%u.%u", p->desc->abi_major, p->desc->abi_minor);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b}", "kind", tf_kind_name(p->desc->kind),
                              "name", p->desc->name, "version", p->desc->version ? p->desc->version : "",
                              "abi", abi, "path", p->path, "description",
                              p->desc->description ? p->desc->description : "", "usable", p->usable);
        if (!p->usable) json_object_set_new(o, "why", json_string(p->why));
        json_array_append_new(found, o);
    }
    for (size_t i = 0; i < reg->nrejected; i++)
        json_array_append_new(rejected, json_pack("{s:s, s:s}", "path", reg->rejected[i].path, "why",
                                                  reg->rejected[i].why));
    json_object_set_new(root, "searched", searched);
    json_object_set_new(root, "plugins", found);
    json_object_set_new(root, "rejected", rejected);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) return 1;
    puts(s);
    free(s);
    return 0;
}

static void print_text(const tf_registry *reg)
{
    printf("%-10s %-12s %-9s %-4s %s\n", "KIND", "NAME", "VERSION", "ABI", "DESCRIPTION");
    for (uint32_t k = TF_KIND_MIN; k <= TF_KIND_MAX; k++)
        for (size_t i = 0; i < reg->nfound; i++) {
            const tf_loaded_plugin *p = &reg->found[i];
            if (p->desc->kind != k) continue;
            printf("%-10s %-12s %-9s %u.%-2u %s\n", tf_kind_name(k), p->desc->name,
                   p->desc->version ? p->desc->version : "?", p->desc->abi_major, p->desc->abi_minor,
                   p->desc->description ? p->desc->description : "");
            printf("%-10s %-12s %s\n", "", "", p->path);
            if (!p->usable) printf("%-10s %-12s cannot run here: %s\n", "", "", p->why);
        }
    if (reg->nfound == 0) printf("(no plugins found)\n");
    if (reg->nrejected) {
        printf("\nrejected:\n");
        for (size_t i = 0; i < reg->nrejected; i++) printf("  %s\n", reg->rejected[i].why);
    }
    printf("\nsearched:");
    for (size_t i = 0; i < reg->nsearched; i++) printf(" %s", reg->searched[i]);
    printf("\n");
}

int tf_cli_plugins(int argc, char **argv)
{
    int json = 0;
    const char *path = NULL, *keys = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
            keys = argv[++i];
        } else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            return tf_cli_usage_error("plugins", "unknown argument '%s'", argv[i]);
        }
    }
    tf_error err = {0};
    tf_registry *reg;
    if (tf_registry_index_default(&reg, path, &err)) return tf_cli_fail(&err);
    if (tf_registry_load_all(reg, true, &err)) {
        tf_registry_free(reg);
        return tf_cli_fail(&err);
    }
    int rc = keys ? print_keys(reg, keys) : json ? print_json(reg) : (print_text(reg), 0);
    tf_registry_free(reg);
    return rc;
}
