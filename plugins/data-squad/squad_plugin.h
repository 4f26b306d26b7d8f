/* squad_plugin.h — what the "squad" dataset plugin shows its tests (the
 * plugin's .so exports only tfcore_plugin_entry; tests compile its sources). */
#ifndef TF_SQUAD_PLUGIN_H
#define TF_SQUAD_PLUGIN_H

#include "squad_features.h"
#include "tfcore/dataset.h"

extern const tf_dataset_vtable squad_dataset_vtable;

/* The features of a split. */
const squad_features *squad_dataset_features(const tf_dataset *ds, tf_split split);
/* Whether evaluation follows SQuAD v2.0 (version_2_with_negative). */
int squad_dataset_version_2(const tf_dataset *ds);

#endif
