/* tfcore/plugin.h — the plugin descriptor: the part of the ABI every plugin
 * compiles against. Read docs/PLUGINS.md for the rules of change.
 *
 * A plugin is a shared object named tfcore-<kind>-<name>.so that exports
 * exactly one symbol, tfcore_plugin_entry, returning a tf_plugin. Write it
 * with TF_PLUGIN_DEFINE; never fill magic, versions or sizes by hand.
 */
#ifndef TFCORE_PLUGIN_H
#define TFCORE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TF_PLUGIN_MAGIC 0x31504654u /* "TFP1" read as a little-endian uint32 */
#define TF_ABI_MAJOR 1
#define TF_ABI_MINOR 5

/* The kinds of plugin. Values are part of the ABI. */
typedef enum tf_plugin_kind {
    TF_KIND_BACKEND = 1,
    TF_KIND_MODEL = 2,
    TF_KIND_DATASET = 3,
    TF_KIND_COMM = 4,
    TF_KIND_PRECISION = 5
} tf_plugin_kind;

#define TF_KIND_MIN 1
#define TF_KIND_MAX 5
#define TF_PLUGIN_NAME_MAX 31 /* [a-z0-9-]{1,31} */

typedef struct tf_plugin {   /* field order is frozen for ABI major 1 */
    uint32_t magic;          /* TF_PLUGIN_MAGIC */
    uint16_t abi_major;      /* TF_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor;      /* TF_ABI_MINOR the plugin was built with */
    uint32_t struct_size;    /* sizeof(tf_plugin) as the plugin saw it */
    uint32_t kind;           /* tf_plugin_kind */
    const char *name;        /* [a-z0-9-]{1,31}; must match the file name */
    const char *version;     /* the plugin's own version */
    const char *description; /* one line, shown by `tfcore plugins` */
    int (*probe)(char *why, size_t n); /* optional; returns 0 = can't run here and
                                          writes the reason into why[n] */
    const void *vtable;      /* tf_<kind>_vtable, whose first field is uint32_t size */
} tf_plugin;

/* The one symbol a plugin exports. */
typedef const tf_plugin *(*tf_plugin_entry_fn)(void);
#define TF_PLUGIN_ENTRY_SYMBOL "tfcore_plugin_entry"

#if defined(__GNUC__)
#define TF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TF_PLUGIN_EXPORT
#endif

/* Define the plugin's descriptor and its entry point.
 *   static const tf_model_vtable my_vt = { TF_VTABLE_SIZE(tf_model_vtable), ... };
 *   TF_PLUGIN_DEFINE(TF_KIND_MODEL, "bert", "1.0.0", "BERT encoder", NULL, &my_vt)
 */
/* A build may append to every description (the CUDA emulation's builds say
 * "(emulated, tests only)"): -DTF_PLUGIN_DESC_SUFFIX='" ..."'. */
#ifndef TF_PLUGIN_DESC_SUFFIX
#define TF_PLUGIN_DESC_SUFFIX ""
#endif
#define TF_PLUGIN_DEFINE(kind_, name_, version_, description_, probe_, vtable_)          \
    static const tf_plugin tf_plugin_descriptor_ = {                                    \
        TF_PLUGIN_MAGIC, TF_ABI_MAJOR, TF_ABI_MINOR, (uint32_t)sizeof(tf_plugin),         \
        (uint32_t)(kind_), (name_), (version_), description_ TF_PLUGIN_DESC_SUFFIX,     \
        (probe_), (vtable_)};                                                           \
    TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void);                          \
    TF_PLUGIN_EXPORT const tf_plugin *tfcore_plugin_entry(void) { return &tf_plugin_descriptor_; }

/* The first field of every vtable: its size as the plugin was compiled. */
#define TF_VTABLE_SIZE(type) ((uint32_t)sizeof(type))

/* True when a vtable (pointer to a struct whose first field is uint32_t size)
 * is large enough to hold `slot` and the slot is set. Use it for every slot
 * added after a kind's 1.0 layout: an older plugin's vtable simply ends
 * before it. */
#define TF_HAS(vt, slot)                                                                  \
    ((vt) != NULL && (size_t)(vt)->size >= offsetof(__typeof__(*(vt)), slot) + sizeof((vt)->slot) && \
     (vt)->slot != NULL)

/* "backend", "model", "dataset", "comm", "precision"; NULL for an unknown kind. */
const char *tf_kind_name(uint32_t kind);
/* Inverse of tf_kind_name; 0 when unknown. */
uint32_t tf_kind_from_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
