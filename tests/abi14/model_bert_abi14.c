/* model_bert_abi14.c — model-bert as a model plugin built for plugin ABI 1.4
 * would present it: the same slots, its vtable ending before the ABI 1.5
 * slot keep_stage_grads. tests/test_pipeline_mpi.sh loads it as model
 * "bert14" to see that a pipeline still trains with it, each stage then
 * keeping the whole gradient buffer (and its own moments only). The real
 * plugin is dlopen'ed by its build path. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "tfcore/model.h"
#include "tfcore/plugin.h"

static tf_model_vtable vt;
static tf_plugin desc = {TF_PLUGIN_MAGIC, TF_ABI_MAJOR, 4, (uint32_t)sizeof(tf_plugin),
                         TF_KIND_MODEL, "bert14", "1.4.0",
                         "model-bert cut to the ABI 1.4 vtable (tests only)", NULL, &vt};

TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void);
TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void)
{
    void *h = dlopen(MODEL_BERT_SO, RTLD_NOW | RTLD_LOCAL);
    const tf_plugin *(*entry)(void) = h ? (const tf_plugin *(*)(void))dlsym(h, "tfcore_plugin_entry") : NULL;
    const tf_plugin *bert = entry ? entry() : NULL;
    if (!bert) return NULL;
    const size_t cut = offsetof(tf_model_vtable, keep_stage_grads); /* the first 1.5 slot */
    memcpy(&vt, bert->vtable, cut);
    vt.size = (uint32_t)cut;
    desc.probe = bert->probe;
    return &desc;
}
