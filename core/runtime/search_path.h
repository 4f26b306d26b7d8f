/* search_path.h — where tfcore looks for plugins, first match wins:
 *   1. plugins.path from the config or -o plugins.path=... (colon-separated)
 *   2. $TFCORE_PLUGIN_PATH (colon-separated)
 *   3. next to the libtfcore.so actually loaded (found with dladdr, so a
 *      moved or copied tree finds its own plugins; no build path is compiled in):
 *      a. LIBDIR/../../plugins/x/.libs when LIBDIR is <build>/core/.libs
 *         (libtool's build tree, or a bundle laid out like one);
 *      b. LIBDIR/tfcore/plugins (an installed tree, wherever it was moved);
 *   4. $(libdir)/tfcore/plugins as configured (the install location)
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

/* Build the path. config_path: plugins.path or NULL. lib_dir: the folder
 * libtfcore.so was loaded from (tf_libtfcore_dir), or NULL to leave out
 * step 3. */
tf_status tf_search_path_build(tf_search_path *sp, const char *config_path, const char *lib_dir,
                               tf_error *err);
void tf_search_path_free(tf_search_path *sp);

/* The real (symlink-free) folder of the libtfcore.so this process loaded,
 * into buf; false (buf "") when the loader cannot say. */
bool tf_libtfcore_dir(char *buf, size_t n);

/* The installed plugin folder, $(libdir)/tfcore/plugins. */
const char *tf_installed_plugin_dir(void);

#endif
