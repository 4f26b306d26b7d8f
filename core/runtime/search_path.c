/* search_path.c — the ordered list of plugin folders (see search_path.h). */
#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_path.h"
#include "tfcore/error.h"

#ifndef TF_PLUGIN_DIR
#error "TF_PLUGIN_DIR must be defined by the build"
#endif

const char *tf_installed_plugin_dir(void) { return TF_PLUGIN_DIR; }

bool tf_libtfcore_dir(char *buf, size_t n)
{
    /* dladdr on a function of libtfcore.so names the file the loader mapped
     * it from: the build tree's core/.libs, an installed $libdir, or a copy
     * of either moved anywhere. This file is in the runtime, linked into the
     * program, so the anchor is one of the SDK's exported functions. */
    Dl_info info;
    char real[PATH_MAX];
    if (n) buf[0] = '\0';
    if (!dladdr((void *)&tf_status_name, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
        return false;
    char *slash = strrchr(real, '/');
    if (!slash) return false;
    *slash = '\0';
    if (strlen(real) + 1 > n) return false;
    memcpy(buf, real, strlen(real) + 1);
    return true;
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

/* The plugin folders that belong with the libtfcore in lib_dir. */
static bool push_beside_library(tf_search_path *sp, const char *lib_dir)
{
    static const char build_tail[] = "/core/.libs";
    size_t len = strlen(lib_dir), tl = sizeof build_tail - 1;
    char pattern[PATH_MAX + 32];
    if (len > tl && strcmp(lib_dir + len - tl, build_tail) == 0) {
        /* libtool's build tree: each built plugin sits in plugins/<name>/.libs */
        snprintf(pattern, sizeof pattern, "%.*s/plugins/*/.libs", (int)(len - tl), lib_dir);
        glob_t g;
        int r = glob(pattern, GLOB_ONLYDIR, NULL, &g);
        bool ok = true;
        if (r == 0)
            for (size_t i = 0; ok && i < g.gl_pathc; i++) ok = push(sp, g.gl_pathv[i], strlen(g.gl_pathv[i]));
        if (r == 0 || r == GLOB_NOMATCH) globfree(&g);
        if (!ok || r == GLOB_NOSPACE) return false;
    }
    int w = snprintf(pattern, sizeof pattern, "%s/tfcore/plugins", lib_dir);
    return w < 0 || (size_t)w >= sizeof pattern || push(sp, pattern, (size_t)w);
}

tf_status tf_search_path_build(tf_search_path *sp, const char *config_path, const char *lib_dir,
                               tf_error *err)
{
    sp->dirs = NULL;
    sp->n = 0;
    bool ok = push_colon_list(sp, config_path) && push_colon_list(sp, getenv("TFCORE_PLUGIN_PATH"));
    if (ok && lib_dir && *lib_dir) ok = push_beside_library(sp, lib_dir);
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
