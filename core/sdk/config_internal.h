/* config_internal.h — what the config*.c files share about tf_config (see
 * tfcore/config.h for the API). Not installed.
 *
 * The values live in one libconfig tree (config_t). File settings carry their
 * own file:line; settings an -o override created or replaced carry, in their
 * libconfig hook, a pointer to the cfg_override that made them, which is how
 * messages name "-o KEY=VALUE". Read tracking lives in tf_section: the keys an
 * accessor asked for, with the default it offered (for tf_config_dump).
 */
#ifndef TFCORE_CONFIG_INTERNAL_H
#define TFCORE_CONFIG_INTERNAL_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>

#include "tfcore/config.h"

/* Size limits on untrusted text. */
#define CFGI_MAX_FILE_BYTES (64u << 20) /* a config file or an @include'd one */
#define CFGI_LOC_MAX 512                /* "FILE:LINE" / "-o KEY=VALUE" in messages */
#define CFGI_SHOW_MAX 80                /* a string value quoted in a message */

/* The kind of accessor that asked for a key, and so the type of its default. */
typedef enum cfg_known_kind {
    CFG_KNOWN_PLAIN = 0, /* tf_cfg_has, required and list accessors: no default */
    CFG_KNOWN_INT,
    CFG_KNOWN_FLOAT,
    CFG_KNOWN_BOOL,
    CFG_KNOWN_STRING
} cfg_known_kind;

typedef struct cfg_known {
    char *key; /* dotted, relative to the section: "optimizer.beta1" */
    cfg_known_kind kind;
    long long def_int;
    double def_float;
    bool def_bool;
    char *def_string; /* owned copy; NULL: no default to write */
} cfg_known;

struct tf_section {
    tf_config *cfg;
    char *name;
    cfg_known *known; /* [n_known] in the order first asked for */
    size_t n_known, cap_known;
};

/* One -o assignment that was applied. */
typedef struct cfg_override {
    char *text; /* the assignment as given, trimmed: "training.seed=7" */
    char *path; /* the dotted key it set: "training.seed" */
} cfg_override;

struct tf_config {
    config_t lc;
    char *path;          /* file path, the name of a string config, or "-" */
    char *include_dir;   /* folder @include resolves against; NULL: as written */
    bool from_source;    /* false for tf_config_new (no file, no string) */
    bool reading;        /* an accessor ran: no more overrides */
    tf_section **sections; /* [n_sections] in the order first opened */
    size_t n_sections, cap_sections;
    cfg_override **overrides; /* [n_overrides] in the order applied */
    size_t n_overrides, cap_overrides;
    char **strings; /* [n_strings] interned strings handed out by tf_cfg_where */
    size_t n_strings, cap_strings;
};

/* Grow *(T **)arrp to hold `need` elements of `size` bytes; false if out of memory. */
bool cfgi_reserve(void *arrp, size_t *cap, size_t need, size_t size);

/* snprintf into a message buffer; text that does not fit is cut (messages
 * are bounded on purpose). */
void cfgi_format(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The override that set s or one of its enclosing groups, or NULL for file values. */
const cfg_override *cfgi_origin(const config_setting_t *s);

/* "FILE:LINE" or "-o KEY=VALUE" for a setting. */
void cfgi_where(const tf_config *cfg, const config_setting_t *s, char *buf, size_t n);

/* The name to show for a file libconfig recorded (an @include'd one is
 * recorded as written; we show it joined to the include folder). */
void cfgi_file_display(const tf_config *cfg, const char *file, char *buf, size_t n);

/* "int 5", "float 1.5", "bool true", "string \"two\"", "a list", "a group". */
void cfgi_describe(const config_setting_t *s, char *buf, size_t n);
/* "an int", "a float", "a bool", "a string", "a list", "a group". */
const char *cfgi_type_name(int libconfig_type);

/* The shortest decimal text that reads back as exactly v ("5e-05", "0.1",
 * "-1"); "inf", "-inf", "nan" for those. */
void cfgi_format_double(double v, char *buf, size_t n);

/* s as a libconfig string literal body: \" \\ \n \t escaped, other control
 * bytes as \xHH; cut at max_chars of input with "..." when max_chars > 0. */
void cfgi_escape(const char *s, size_t max_chars, char *buf, size_t n);

/* A valid libconfig setting name: [A-Za-z*][-A-Za-z0-9_*]*, len bytes of s. */
bool cfgi_valid_name(const char *s, size_t len);

/* What libconfig 1.5 gets wrong silently: it reads a plain integer literal
 * with atoi (5000000000 becomes 705032704), and it accepts a file that ends
 * inside a string or a comment (x = "a" "b  reads as "a"). cfgi_lint scans
 * libconfig text, skipping strings and comments, for the first such problem:
 * its 1-based line (where the string or comment started) and, for an
 * integer, its text. integers=false checks only for unterminated text (safe
 * on text with syntax errors). */
typedef enum cfgi_lint_result {
    CFGI_LINT_OK = 0,
    CFGI_LINT_BAD_INTEGER,
    CFGI_LINT_UNTERMINATED_STRING,
    CFGI_LINT_UNTERMINATED_COMMENT
} cfgi_lint_result;
cfgi_lint_result cfgi_lint(const char *text, bool integers, int *line, char *literal, size_t n);

/* The file named by the `@include "..."` on 1-based `line` of text. */
bool cfgi_include_name_at(const char *text, int line, char *name, size_t n);

/* The next `@include "NAME"` directive (at the start of a line, outside
 * block comments, as libconfig's scanner sees it) at or after *pos in text:
 * its name and 1-based line; *pos and *line advance past it. False at the
 * end of the text. *line starts at 1. */
bool cfgi_next_include(const char **pos, int *line, char *name, size_t n);

/* Read a whole text file (at most CFGI_MAX_FILE_BYTES) into *out,
 * NUL-terminated, caller frees. Errors say "PATH: why" (TF_ERR_CONFIG). */
tf_status cfgi_read_text_file(const char *path, char **out, tf_error *err);

/* The opened section called name, or NULL. */
tf_section *cfgi_find_section(const tf_config *cfg, const char *name);
/* The known-key record of sec for key, or NULL. */
const cfg_known *cfgi_find_known(const tf_section *sec, const char *key);

#endif
