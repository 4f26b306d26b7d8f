/* comm_mpi_abi13.c — comm-mpi as a comm plugin built for plugin ABI 1.3
 * would present it: the same slots, its vtable ending before the ABI 1.4
 * slots (send, recv). tests/test_pipeline_mpi.sh loads it as comm "mpi13"
 * to see that it still loads and trains (DDP), and that a pipeline refuses
 * it with one line. The real plugin is dlopen'ed by its build path. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "tfcore/comm.h"
#include "tfcore/plugin.h"

static tf_comm_vtable vt;
static tf_plugin desc = {TF_PLUGIN_MAGIC, TF_ABI_MAJOR, 3, (uint32_t)sizeof(tf_plugin),
                         TF_KIND_COMM, "mpi13", "1.3.0",
                         "comm-mpi cut to the ABI 1.3 vtable (tests only)", NULL, &vt};

TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void);
TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void)
{
    void *h = dlopen(COMM_MPI_SO, RTLD_NOW | RTLD_LOCAL);
    const tf_plugin *(*entry)(void) = h ? (const tf_plugin *(*)(void))dlsym(h, "tfcore_plugin_entry") : NULL;
    const tf_plugin *mpi = entry ? entry() : NULL;
    if (!mpi) return NULL;
    const size_t cut = offsetof(tf_comm_vtable, reduce_scatter); /* the first 1.4 slot */
    memcpy(&vt, mpi->vtable, cut);
    vt.size = (uint32_t)cut;
    desc.probe = mpi->probe;
    return &desc;
}
