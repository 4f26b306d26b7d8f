/* test_plugin.c — one source, built many times with a different -D each, into
 * the plugins tests/test_registry.c feeds to the loader: one valid plugin and
 * one for every rejection path of docs/PLUGINS.md. The model vtable's slots do
 * nothing useful; only the loader looks at them. */
#include <stddef.h>
#include <stdint.h>

#include "tfcore/model.h"
#include "tfcore/plugin.h"

static tf_status check_config(tf_section *s, tf_error *e) { return TF_OK; }
static tf_status create(const tf_model_create_args *a, tf_model **o, tf_error *e)
{
    return tf_error_set(e, TF_ERR_RUNTIME, "test plugin: create is not for use");
}
static void destroy(tf_model *m) {}
static const tf_model_info *info(tf_model *m) { return NULL; }
static void params(tf_model *m, const tf_param_info **l, size_t *n) { *n = 0; }
static void buffers(tf_model *m, tf_model_buffers *b) {}
static tf_status zero_grad(tf_model *m, tf_error *e) { return TF_OK; }
static tf_status forward(tf_model *m, const tf_batch *b, bool t, tf_model_output *o, tf_error *e)
{
    return TF_OK;
}
static tf_status backward(tf_model *m, float s, tf_grads_ready_fn f, void *u, tf_error *e)
{
    return TF_OK;
}
static tf_status save(tf_model *m, const char *d, tf_error *e) { return TF_OK; }
static tf_status reserve(tf_model *m, int r, int s, tf_error *e) { return TF_OK; }
static void set_step(tf_model *m, uint64_t s) {}

static const tf_model_vtable vt = {
    TF_VTABLE_SIZE(tf_model_vtable), check_config, create, destroy, info, params, buffers,
    zero_grad,
#ifdef NULL_SLOT
    NULL,
#else
    forward,
#endif
    backward, save, reserve, set_step};

#ifdef SHORT_VTABLE
static const struct { uint32_t size; void *pad; } short_vt = {8, NULL};
#define VTABLE (&short_vt)
#else
#define VTABLE (&vt)
#endif

#ifdef PROBE_NO
#include <stdio.h>
static int probe(char *why, size_t n)
{
    snprintf(why, n, "test plugin: no such device here");
    return 0;
}
#define PROBE probe
#else
#define PROBE NULL
#endif

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "good"
#endif

#ifdef UNRESOLVED
/* Defined nowhere: dlopen(RTLD_NOW) must fail naming it. */
extern int tf_test_symbol_that_does_not_exist(void);
int tf_test_use_missing(void);
int tf_test_use_missing(void) { return tf_test_symbol_that_does_not_exist(); }
#endif

#ifdef EXIT_IN_CONSTRUCTOR
/* Ends the process as soon as it is loaded (a library that calls exit()). */
#include <stdlib.h>
__attribute__((constructor)) static void end_the_process(void) { exit(0); }
#endif

#if defined(CRASH_IN_ENTRY)
/* The entry follows a bad pointer: SIGSEGV inside tfcore_plugin_entry. */
__attribute__((visibility("default"))) const tf_plugin *tfcore_plugin_entry(void);
const tf_plugin *tfcore_plugin_entry(void)
{
    volatile uintptr_t bad = 8; /* volatile: the compiler cannot see the address */
    return vt.size ? *(const tf_plugin *const *)bad : NULL;
}
#elif defined(NO_ENTRY)
/* Exports something, but not tfcore_plugin_entry. */
__attribute__((visibility("default"))) int tf_test_not_an_entry(void);
int tf_test_not_an_entry(void) { return (int)vt.size; }
#elif defined(RAW_DESCRIPTOR)
/* Hand-made descriptors with one field wrong, as a broken or foreign build would have. */
static const tf_plugin desc = {
#ifdef BAD_MAGIC
    0xdeadbeefu,
#else
    TF_PLUGIN_MAGIC,
#endif
#ifdef OTHER_MAJOR
    2,
#else
    TF_ABI_MAJOR,
#endif
#ifdef NEWER_MINOR
    TF_ABI_MINOR + 7,
#else
    TF_ABI_MINOR,
#endif
#ifdef SHORT_STRUCT
    16,
#else
    (uint32_t)sizeof(tf_plugin),
#endif
#ifdef UNKNOWN_KIND
    9,
#else
    TF_KIND_MODEL,
#endif
    PLUGIN_NAME, "0.0.1", "a tfcore test plugin", PROBE, VTABLE};
__attribute__((visibility("default"))) const tf_plugin *tfcore_plugin_entry(void);
const tf_plugin *tfcore_plugin_entry(void) { return &desc; }
#else
TF_PLUGIN_DEFINE(TF_KIND_MODEL, PLUGIN_NAME, "0.0.1", "a tfcore test plugin", PROBE, VTABLE)
#endif
