/* tfcore/config.h — the experiment config: a libconfig file (with @include),
 * `-o section.key=value` overrides, and typed accessors that remember every
 * key that was read.
 *
 * A config is a tree of sections (model, data, backend, comm, precision,
 * training, plugins, and any a plugin asks for). Plugins get a tf_section
 * and read their keys through the tf_cfg_* accessors. Each accessor records
 * the key as "known" to that section, whether or not it was set; after every
 * plugin is created the core calls tf_config_check_unread(), and any key in
 * the file (or -o) that nobody asked for is an error naming file:line and the
 * closest known key:
 *     conf/x.cfg:12: unknown key 'training.learing_rate' (did you mean 'learning_rate'?)
 *
 * Error messages name where a value came from: "FILE:LINE" for a file
 * setting, "-o training.seed=abc" for an override. Dotted keys ("a.b") reach
 * into nested groups of a section.
 */
#ifndef TFCORE_CONFIG_H
#define TFCORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tfcore/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_config tf_config;
typedef struct tf_section tf_section;

/* --- the whole config ---------------------------------------------------- */

/* An empty config (no file): every section empty, every accessor default. */
tf_status tf_config_new(tf_config **out, tf_error *err);
/* Parse FILE (resolving @include relative to FILE's folder; libconfig 1.5
 * has one include folder, so nested includes are relative to it too, and an
 * absolute @include path works only for a FILE in the current folder).
 * Syntax errors:
 * TF_ERR_CONFIG "FILE:LINE: <libconfig's message>". */
tf_status tf_config_load(tf_config **out, const char *path, tf_error *err);
/* Parse a config from a string (used by tests and the fuzzer); `name` stands
 * in for the file name in messages, includes resolve against include_dir
 * (may be NULL). */
tf_status tf_config_load_string(tf_config **out, const char *text, const char *name,
                                const char *include_dir, tf_error *err);
void tf_config_free(tf_config *cfg);

/* Apply one "-o" override, "section.key=value" or "section.group.key=value".
 * The value's type is read from its text as libconfig would (42 int, 4.2 or
 * 1e-5 float, true/false bool, "x" or bare word string, [1,2] / ["a","b"]
 * list). When the key already exists with another numeric type the value is
 * converted where lossless (int -> float); any other type clash is
 * TF_ERR_CONFIG naming the override. Must be called before any accessor. */
tf_status tf_config_override(tf_config *cfg, const char *assignment, tf_error *err);

/* Remove "section.key" (dotted, may reach into groups) if it is set; absent
 * is not an error. Like overrides, only before any accessor ran. Used where
 * one setting replaces another: `tfcore predict --model DIR` sets
 * model.pretrained and drops model.preset. */
tf_status tf_config_unset(tf_config *cfg, const char *dotted, tf_error *err);

/* The section called `name` (created empty if absent). Never NULL on valid cfg. */
tf_section *tf_config_section(tf_config *cfg, const char *name);
/* True when the file or an override set anything in section `name`. */
bool tf_config_has_section(const tf_config *cfg, const char *name);

/* After all readers ran: TF_ERR_CONFIG for the first key (in file order, then
 * overrides) no accessor asked for, or a whole section nobody opened. */
tf_status tf_config_check_unread(const tf_config *cfg, tf_error *err);

/* Write the resolved config (file values, overrides applied, and defaults of
 * every key an accessor read) in libconfig syntax; keys that came from a
 * default are marked with a trailing comment "# default". */
void tf_config_dump(const tf_config *cfg, FILE *out);

/* The path the config was loaded from ("-" or the `name` for strings). */
const char *tf_config_path(const tf_config *cfg);

/* --- a section: typed accessors ------------------------------------------ */

const char *tf_section_name(const tf_section *sec);
/* True when `key` is set in the file or by an override. Records the key as known. */
bool tf_cfg_has(tf_section *sec, const char *key);

/* Each accessor: if the key is absent, *out = def and TF_OK. If present with
 * the wrong type or out of [min, max]: TF_ERR_CONFIG, e.g.
 *   "conf/a.cfg:7: training.num_train_epochs must be a number, got string \"two\""
 *   "-o training.learning_rate=-1: training.learning_rate must be in [0, inf], got -1"
 * Integers are accepted where floats are asked (5 -> 5.0), not the other way. */
tf_status tf_cfg_int(tf_section *sec, const char *key, long long def, long long min,
                     long long max, long long *out, tf_error *err);
tf_status tf_cfg_float(tf_section *sec, const char *key, double def, double min, double max,
                       double *out, tf_error *err);
tf_status tf_cfg_bool(tf_section *sec, const char *key, bool def, bool *out, tf_error *err);
/* The returned string lives as long as cfg. def may be NULL (then *out may be NULL). */
tf_status tf_cfg_string(tf_section *sec, const char *key, const char *def, const char **out,
                        tf_error *err);
/* A string that must be one of `choices` (NULL-terminated). Error lists the
 * choices and suggests the closest: "... must be one of no, steps, epoch; got
 * 'epochs' (did you mean 'epoch'?)". */
tf_status tf_cfg_choice(tf_section *sec, const char *key, const char *def,
                        const char *const *choices, const char **out, tf_error *err);
/* Required variants: absent is TF_ERR_CONFIG "FILE: missing required key 'model.preset'". */
tf_status tf_cfg_require_string(tf_section *sec, const char *key, const char **out,
                                tf_error *err);
tf_status tf_cfg_require_int(tf_section *sec, const char *key, long long min, long long max,
                             long long *out, tf_error *err);

/* Lists: *n elements copied into a fresh array the caller frees with free().
 * Absent key or empty list: *out = NULL, *n = 0. A scalar is accepted as a
 * one-element list. */
tf_status tf_cfg_int_list(tf_section *sec, const char *key, long long **out, size_t *n,
                          tf_error *err);
tf_status tf_cfg_string_list(tf_section *sec, const char *key, const char ***out, size_t *n,
                             tf_error *err);

/* "FILE:LINE" (or "-o KEY=VALUE", or FILE when the key is absent) for messages
 * a plugin writes about a value it read. Valid until cfg is freed. */
const char *tf_cfg_where(tf_section *sec, const char *key);

/* --- helpers also used elsewhere ----------------------------------------- */

/* Levenshtein distance between a and b (byte-wise). */
size_t tf_edit_distance(const char *a, const char *b);
/* The candidate closest to `word` if it is close enough to be a plausible
 * typo (distance <= max(2, strlen(word)/3)), else NULL. */
const char *tf_closest(const char *word, const char *const *candidates, size_t n);

#ifdef __cplusplus
}
#endif
#endif
