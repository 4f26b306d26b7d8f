/* search_path.h — where tfcore looks for plugins, first match wins:
 *   1. plugins.path from the config or -o plugins.path=... (colon-separated)
 *   2. $TFCORE_PLUGIN_PATH (colon-separated)
 *   3. the build tree's plugin folders, when tfcore runs from its build tree
 *   4. $(libdir)/tfcore/plugins
 */
#ifndef TFCORE_SEARCH_PATH_H
#define TFCORE_SEARCH_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "tfcore/error.h"

typedef struct tf_search_path {
    char **dirs;
    size_t n;
} tf_search_path;

/* Build the path. config_path: plugins.path or NULL. from_build_tree: add
 * the build tree's plugin folders (see tf_running_from_build_tree). */
tf_status tf_search_path_build(tf_search_path *sp, const char *config_path, bool from_build_tree,
                               tf_error *err);
void tf_search_path_free(tf_search_path *sp);

/* True when the running executable lives under the build tree libtfcore was
 * built in (so `./core/tfcore` finds the plugins it was built with). */
bool tf_running_from_build_tree(void);

/* The installed plugin folder, $(libdir)/tfcore/plugins. */
const char *tf_installed_plugin_dir(void);

#endif
