/* tfcore/config_keys.h — a plugin's config keys as one table: the reader
 * (check_config and open read every key through it, with the table's
 * default and bounds) and the documentation (`tfcore plugins --keys NAME`
 * prints it as the Markdown table each plugin README holds; the test
 * tests/test_plugin_keys.sh fails when a README's differs) come from the same
 * entries, so they cannot drift.
 *
 * A plugin exports its table under the name TF_PLUGIN_KEYS_SYMBOL:
 *     TF_PLUGIN_KEYS(my_keys);
 * Keys it checks across each other (squad's doc_stride < max_seq_length - 3)
 * stay in its check_config, after the table's reads. */
#ifndef TFCORE_CONFIG_KEYS_H
#define TFCORE_CONFIG_KEYS_H

#include <stdbool.h>

#include "tfcore/config.h"
#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_cfg_key_type {
    TF_CFG_KEY_INT,    /* int_def in [int_min, int_max] */
    TF_CFG_KEY_FLOAT,  /* float_def in [float_min, float_max] (±INFINITY: unbounded) */
    TF_CFG_KEY_BOOL,   /* bool_def */
    TF_CFG_KEY_STRING, /* string_def (NULL: unset) */
    TF_CFG_KEY_CHOICE  /* string_def, one of choices (NULL-terminated) */
} tf_cfg_key_type;

/* One key; a table ends with an entry whose name is NULL. */
typedef struct tf_cfg_key {
    const char *name;
    tf_cfg_key_type type;
    bool required; /* absent is an error (INT, STRING); no default then */
    long long int_def, int_min, int_max;
    double float_def, float_min, float_max;
    bool bool_def;
    const char *string_def;
    const char *const *choices;
    const char *doc; /* one line for the README: what the key does */
    /* shown as the default instead of the value above, where the plugin
     * gives an absent key a meaning of its own (tf_cfg_has): "the model's" */
    const char *default_text;
    /* FLOAT: exclude float_min / float_max themselves ("(0, 1)"); why: the
     * reason for the bounds, said when a value is outside them */
    bool min_open, max_open;
    const char *why;
} tf_cfg_key;

#define TF_PLUGIN_KEYS_SYMBOL "tf_plugin_config_keys"
#define TF_PLUGIN_KEYS(table) \
    __attribute__((visibility("default"))) const tf_cfg_key *const tf_plugin_config_keys = (table)

/* Read `key` of sec as table's entry for it says (tf_cfg_int / _float /
 * _bool / _string / _choice, or the require_ variant, with its default and
 * bounds). A key missing from the table or of another type is a plugin bug:
 * TF_ERR_PLUGIN naming the section and key. */
tf_status tf_cfg_key_int(tf_section *sec, const tf_cfg_key *table, const char *key, long long *out, tf_error *err);
tf_status tf_cfg_key_float(tf_section *sec, const tf_cfg_key *table, const char *key, double *out, tf_error *err);
tf_status tf_cfg_key_bool(tf_section *sec, const tf_cfg_key *table, const char *key, bool *out, tf_error *err);
/* STRING or CHOICE */
tf_status tf_cfg_key_string(tf_section *sec, const tf_cfg_key *table, const char *key, const char **out,
                            tf_error *err);

/* The table as Markdown, one row per key: | key | type | default | bounds | what |.
 * Returns a malloc'd string (NULL when out of memory). */
char *tf_cfg_keys_markdown(const tf_cfg_key *table);

#ifdef __cplusplus
}
#endif
#endif
