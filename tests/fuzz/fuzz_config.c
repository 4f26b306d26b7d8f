/* fuzz_config.c — libFuzzer target for the config module.
 *
 * Input: a config text, then (after the first NUL byte) -o assignments, one
 * per line. The target loads the text, applies the overrides, reads keys of
 * every accessor type (and the whole training section), dumps the result,
 * checks that libconfig reads the dump back, and runs the unread-key check.
 * Includes resolve against a folder that does not exist, so no file is read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config.h"
#include "tfcore/log.h"
#include "training_args.h"

#define MAX_INPUT (1 << 16)

/* libconfig 1.5 leaks the buffer of a string token when a parse error
 * happens at that token ("a" where a setting name belongs, or [1, "a"]): the
 * buffer comes from its scanner (strbuf_append, or libconfig_yylex for ""),
 * so only blocks allocated there are suppressed. A config or setting this
 * module failed to free is still reported: those blocks come from elsewhere
 * (config_setting_add, strdup, ...). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:strbuf_append\nleak:libconfig_yylex\n";
}
#define MAX_OVERRIDES 8

static void read_some(tf_config *c)
{
    static const char *const choices[] = {"no", "steps", "epoch", NULL};
    tf_error e;
    tf_section *m = tf_config_section(c, "model");
    const char *s, **sl;
    long long i, *il;
    double d;
    bool b;
    size_t n;
    tf_cfg_string(m, "name", "bert", &s, &e);
    tf_cfg_require_string(m, "preset", &s, &e);
    tf_cfg_int(m, "hidden", 768, 1, 1 << 20, &i, &e);
    tf_cfg_require_int(m, "layers", 1, 100, &i, &e);
    tf_cfg_float(m, "dropout", 0.1, 0, 1, &d, &e);
    tf_cfg_bool(m, "pretrained", true, &b, &e);
    tf_cfg_choice(m, "mode", "no", choices, &s, &e);
    if (tf_cfg_int_list(m, "sizes", &il, &n, &e) == TF_OK) free(il);
    if (tf_cfg_string_list(m, "names", &sl, &n, &e) == TF_OK) free(sl);
    tf_cfg_float(m, "opt.beta1", 0.9, 0, 1, &d, &e);
    tf_cfg_int(m, "opt.inner.k", 3, 0, 10, &i, &e);
    tf_cfg_has(m, "extra");
    tf_cfg_where(m, "name");
    tf_cfg_where(m, "opt.beta1");

    tf_training_args a;
    if (tf_training_args_read(tf_config_section(c, "training"), tf_config_path(c), &a, &e) ==
        TF_OK) {
        tf_training_plan p;
        tf_training_plan_compute(&a, 1000, 2, &p, &e);
        tf_training_args_free(&a);
    }
    tf_config_has_section(c, "data");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT) return 0;
    static int quiet;
    if (!quiet) {
        tf_log_set_level(TF_LOG_QUIET);
        quiet = 1;
    }
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t text_len = strlen(buf);

    tf_error e;
    tf_config *c;
    if (tf_config_load_string(&c, buf, "fuzz.cfg", "/nonexistent-tfcore-fuzz", &e) != TF_OK) {
        if (!e.msg[0]) abort(); /* every failure says why */
        free(buf);
        return 0;
    }
    /* overrides: the lines after the first NUL */
    int applied = 0;
    for (char *p = text_len < size ? buf + text_len + 1 : NULL; p && p < buf + size &&
                                                                applied < MAX_OVERRIDES;) {
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (nl) *nl = '\0';
        if (tf_config_override(c, p, &e) != TF_OK && strncmp(e.msg, "-o", 2) != 0) abort();
        applied++;
        p = nl ? nl + 1 : NULL;
    }
    read_some(c);

    /* the dump must read back */
    char *dump = NULL;
    size_t dump_len = 0;
    FILE *f = open_memstream(&dump, &dump_len);
    if (f) {
        tf_config_dump(c, f);
        fclose(f);
        tf_config *back;
        if (tf_config_load_string(&back, dump, "dump.cfg", "/nonexistent-tfcore-fuzz", &e) !=
            TF_OK) {
            fprintf(stderr, "dump does not read back: %s\n---\n%s---\n", e.msg, dump);
            abort();
        }
        read_some(back);
        tf_config_check_unread(back, &e);
        tf_config_free(back);
        free(dump);
    }
    if (tf_config_check_unread(c, &e) != TF_OK && !e.msg[0]) abort();
    tf_config_free(c);
    free(buf);
    return 0;
}
