/* plugin_kind.c — names of plugin kinds (see tfcore/plugin.h). */
#include <string.h>

#include "tfcore/plugin.h"

static const char *const kind_names[] = {NULL, "backend", "model", "dataset", "comm", "precision"};

const char *tf_kind_name(uint32_t kind)
{
    return kind >= TF_KIND_MIN && kind <= TF_KIND_MAX ? kind_names[kind] : NULL;
}

uint32_t tf_kind_from_name(const char *name)
{
    for (uint32_t k = TF_KIND_MIN; name && k <= TF_KIND_MAX; k++)
        if (strcmp(kind_names[k], name) == 0) return k;
    return 0;
}
