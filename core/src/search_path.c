/* search_path.c — the ordered list of plugin folders (see search_path.h). */
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search_path.h"

#ifndef TF_PLUGIN_DIR
#error "TF_PLUGIN_DIR must be defined by the build"
#endif
#ifndef TF_BUILD_ROOT
#error "TF_BUILD_ROOT must be defined by the build"
#endif

const char *tf_installed_plugin_dir(void) { return TF_PLUGIN_DIR; }

bool tf_running_from_build_tree(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    char root[PATH_MAX];
    if (!realpath(TF_BUILD_ROOT, root)) return false;
    size_t rl = strlen(root);
    return strncmp(exe, root, rl) == 0 && exe[rl] == '/';
}

static bool push(tf_search_path *sp, const char *dir, size_t len)
{
    if (len == 0) return true; /* "a::b" — an empty entry means nothing */
    for (size_t i = 0; i < sp->n; i++) /* keep the first occurrence only */
        if (strlen(sp->dirs[i]) == len && strncmp(sp->dirs[i], dir, len) == 0) return true;
    char **d = realloc(sp->dirs, (sp->n + 1) * sizeof *d);
    if (!d) return false;
    sp->dirs = d;
    if (!(d[sp->n] = strndup(dir, len))) return false;
    sp->n++;
    return true;
}

static bool push_colon_list(tf_search_path *sp, const char *list)
{
    while (list && *list) {
        const char *c = strchr(list, ':');
        size_t len = c ? (size_t)(c - list) : strlen(list);
        if (!push(sp, list, len)) return false;
        list = c ? c + 1 : NULL;
    }
    return true;
}

tf_status tf_search_path_build(tf_search_path *sp, const char *config_path, bool from_build_tree,
                               tf_error *err)
{
    sp->dirs = NULL;
    sp->n = 0;
    bool ok = push_colon_list(sp, config_path) && push_colon_list(sp, getenv("TFCORE_PLUGIN_PATH"));
    if (ok && from_build_tree) {
        /* libtool puts each built plugin in plugins/<name>/.libs */
        glob_t g;
        if (glob(TF_BUILD_ROOT "/plugins/*/.libs", GLOB_ONLYDIR, NULL, &g) == 0) {
            for (size_t i = 0; ok && i < g.gl_pathc; i++)
                ok = push(sp, g.gl_pathv[i], strlen(g.gl_pathv[i]));
            globfree(&g);
        }
    }
    if (ok) ok = push(sp, TF_PLUGIN_DIR, strlen(TF_PLUGIN_DIR));
    if (!ok) {
        tf_search_path_free(sp);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory building the plugin search path");
    }
    return TF_OK;
}

void tf_search_path_free(tf_search_path *sp)
{
    for (size_t i = 0; i < sp->n; i++) free(sp->dirs[i]);
    free(sp->dirs);
    sp->dirs = NULL;
    sp->n = 0;
}
