/* comm_mpi_abi14.c — comm-mpi as a comm plugin built for plugin ABI 1.4
 * would present it: the same slots, its vtable ending before the ABI 1.5
 * slot (reduce_start). tests/test_zero.sh loads it as comm "mpi14" to see
 * that ZeRO-2 on a plugin without reduce_start all-reduces each owner's part
 * of a bucket instead, and still ends with DDP's parameters. The real plugin
 * is dlopen'ed by its build path. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "tfcore/comm.h"
#include "tfcore/plugin.h"

static tf_comm_vtable vt;
static tf_plugin desc = {TF_PLUGIN_MAGIC, TF_ABI_MAJOR, 4, (uint32_t)sizeof(tf_plugin),
                         TF_KIND_COMM, "mpi14", "1.4.0",
                         "comm-mpi cut to the ABI 1.4 vtable (tests only)", NULL, &vt};

TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void);
TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void)
{
    void *h = dlopen(COMM_MPI_SO, RTLD_NOW | RTLD_LOCAL);
    const tf_plugin *(*entry)(void) = h ? (const tf_plugin *(*)(void))dlsym(h, "tfcore_plugin_entry") : NULL;
    const tf_plugin *mpi = entry ? entry() : NULL;
    if (!mpi) return NULL;
    const size_t cut = offsetof(tf_comm_vtable, reduce_start); /* the first 1.5 slot */
    memcpy(&vt, mpi->vtable, cut);
    vt.size = (uint32_t)cut;
    desc.probe = mpi->probe;
    return &desc;
}
