/* registry.h — plugin discovery and checking (internal to libtfcore and the CLI).
 *
 * tf_registry_scan walks the search path in order, considers every file named
 * tfcore-<kind>-<name>.so, and puts each one either in `found` (it passed every
 * check docs/PLUGINS.md lists, in its order) or in `rejected` with a one-line
 * reason naming the file and both sides' values. A plugin whose probe says it
 * cannot run here is found but marked unusable, with the probe's reason.
 *
 * Loading runs a plugin's code (its constructors, its entry, its probe), so a
 * broken plugin can end the process. A command loads only what it uses:
 * tf_registry_index lists the candidate files without loading any, and
 * tf_registry_require loads the files named for the kind and name asked for
 * (tfcore-<kind>-<name>.so), first match on the search path wins. Only
 * `tfcore plugins` loads every candidate (tf_registry_load_all), each one
 * tried first in a child process so a plugin that crashes or exits while
 * loading is reported as rejected instead of ending the listing.
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
    tf_loaded_plugin *found;  /* room for every candidate from the start: loading more
                                 never moves the ones already found */
    size_t nfound;
    tf_rejected_plugin *rejected;
    size_t nrejected;
    char **searched;          /* the directories, in search order */
    size_t nsearched;
    char **pending;           /* candidate files not loaded yet, in search order */
    size_t npending;
} tf_registry;

/* Scan `dirs` (in order; missing directories are remembered as searched and
 * skipped). Only allocation failure is an error. */
tf_status tf_registry_scan(tf_registry **out, const char *const *dirs, size_t ndirs,
                           tf_error *err);
void tf_registry_free(tf_registry *reg);

/* List the candidate files of `dirs` (as tf_registry_scan) without loading
 * any: they stay pending until tf_registry_require asks for one. */
tf_status tf_registry_index(tf_registry **out, const char *const *dirs, size_t ndirs,
                            tf_error *err);
/* tf_registry_index over the standard search path (search_path.h), with
 * config_path = plugins.path from the config (or NULL). */
tf_status tf_registry_index_default(tf_registry **out, const char *config_path, tf_error *err);

/* Load every pending candidate. With `isolate`, each is first loaded and
 * checked in a forked child; one whose child dies (a signal, or exit() from
 * its constructor or entry) is rejected with how it died and never loaded
 * here. Only allocation failure is an error. */
tf_status tf_registry_load_all(tf_registry *reg, bool isolate, tf_error *err);

/* The found plugin of this kind and name, or NULL. */
const tf_loaded_plugin *tf_registry_find(const tf_registry *reg, uint32_t kind, const char *name);

/* Like tf_registry_find, but a miss is TF_ERR_PLUGIN with one line saying
 * what was asked (and by what: `asked_by`, e.g. "conf/a.cfg:3"), why it is
 * unusable / rejected if it was seen, or what exists of that kind and where
 * was searched. Loads the pending candidates of that kind and name. */
tf_status tf_registry_require(tf_registry *reg, uint32_t kind, const char *name,
                              const char *asked_by, const tf_loaded_plugin **out, tf_error *err);

/* The size of each kind's vtable at ABI 1.0 and whether its required slots
 * are set; fills why[n] and returns false when not. Exposed for tests. */
bool tf_vtable_check(uint32_t kind, const void *vtable, char *why, size_t n);
size_t tf_vtable_min_size(uint32_t kind);

/* True if `name` is a valid plugin name: [a-z0-9-]{1,31}. */
bool tf_plugin_name_valid(const char *name);

#endif
