/* registry.h — plugin discovery and checking (internal to libtfcore and the CLI).
 *
 * tf_registry_scan walks the search path in order, considers every file named
 * tfcore-<kind>-<name>.so, and puts each one either in `found` (it passed every
 * check of DESIGN.md, in DESIGN.md's order) or in `rejected` with a one-line
 * reason naming the file and both sides' values. A plugin whose probe says it
 * cannot run here is found but marked unusable, with the probe's reason.
 */
#ifndef TFCORE_REGISTRY_H
#define TFCORE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "tfcore/error.h"
#include "tfcore/plugin.h"

typedef struct tf_loaded_plugin {
    char *path;               /* the .so it came from */
    void *handle;             /* dlopen handle, closed by tf_registry_free */
    const tf_plugin *desc;    /* the plugin's descriptor */
    bool usable;              /* probe said it can run here (or has no probe) */
    char why[512];            /* the probe's reason when !usable */
} tf_loaded_plugin;

typedef struct tf_rejected_plugin {
    char *path;
    char *why;                /* one line: "<path>: <what is wrong>" */
} tf_rejected_plugin;

typedef struct tf_registry {
    tf_loaded_plugin *found;
    size_t nfound;
    tf_rejected_plugin *rejected;
    size_t nrejected;
    char **searched;          /* the directories, in search order */
    size_t nsearched;
} tf_registry;

/* Scan `dirs` (in order; missing directories are remembered as searched and
 * skipped). Only allocation failure is an error. */
tf_status tf_registry_scan(tf_registry **out, const char *const *dirs, size_t ndirs,
                           tf_error *err);
void tf_registry_free(tf_registry *reg);

/* tf_registry_scan over the standard search path (search_path.h), with
 * config_path = plugins.path from the config (or NULL). */
tf_status tf_registry_scan_default(tf_registry **out, const char *config_path, tf_error *err);

/* The found plugin of this kind and name, or NULL. */
const tf_loaded_plugin *tf_registry_find(const tf_registry *reg, uint32_t kind, const char *name);

/* Like tf_registry_find, but a miss is TF_ERR_PLUGIN with one line saying
 * what was asked (and by what: `asked_by`, e.g. "conf/a.cfg:3"), why it is
 * unusable / rejected if it was seen, or what exists of that kind and where
 * was searched. */
tf_status tf_registry_require(const tf_registry *reg, uint32_t kind, const char *name,
                              const char *asked_by, const tf_loaded_plugin **out, tf_error *err);

/* The size of each kind's vtable at ABI 1.0 and whether its required slots
 * are set; fills why[n] and returns false when not. Exposed for tests. */
bool tf_vtable_check(uint32_t kind, const void *vtable, char *why, size_t n);
size_t tf_vtable_min_size(uint32_t kind);

/* True if `name` is a valid plugin name: [a-z0-9-]{1,31}. */
bool tf_plugin_name_valid(const char *name);

#endif
