/* backend_cpu_abi11.c — backend-cpu as a backend built for plugin ABI 1.1
 * would present it: the same slots, its vtable ending before the ABI 1.2
 * slots (cross_entropy_ex, adamw_ex). tests/test_trainer_options.sh loads it
 * as backend "cpu11" to see that keys needing those slots are refused by
 * --dry-run, not ignored. The real plugin is dlopen'ed by its build path. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "tfcore/backend.h"
#include "tfcore/plugin.h"

static tf_backend_vtable vt;
static tf_plugin desc = {TF_PLUGIN_MAGIC, TF_ABI_MAJOR, 1, (uint32_t)sizeof(tf_plugin),
                         TF_KIND_BACKEND, "cpu11", "1.1.0",
                         "backend-cpu cut to the ABI 1.1 vtable (tests only)", NULL, &vt};

TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void);
TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void)
{
    void *h = dlopen(BACKEND_CPU_SO, RTLD_NOW | RTLD_LOCAL);
    const tf_plugin *(*entry)(void) = h ? (const tf_plugin *(*)(void))dlsym(h, "tfcore_plugin_entry") : NULL;
    const tf_plugin *cpu = entry ? entry() : NULL;
    if (!cpu) return NULL;
    const size_t cut = offsetof(tf_backend_vtable, cross_entropy_ex);
    memcpy(&vt, cpu->vtable, cut);
    vt.size = (uint32_t)cut;
    desc.probe = cpu->probe;
    return &desc;
}
