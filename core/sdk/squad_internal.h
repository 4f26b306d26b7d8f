/* squad_internal.h — pieces shared by the squad_*.c files (not installed). */
#ifndef TFCORE_SQUAD_INTERNAL_H
#define TFCORE_SQUAD_INTERNAL_H

#include <stddef.h>

#include "tfcore/squad.h"

/* ---- storage: an arena for the strings and arrays a loaded object owns --- */

/* Everything a tf_squad_dataset / predictions / na-probs owns lives here and
 * is freed at once. Blocks grow geometrically, so loading is linear. */
struct tf_squad_storage {
    struct squad_block *head; /* newest block first */
    void *examples;           /* realloc'ed arrays owned besides the blocks */
    void *answers;
};

tf_squad_storage *squad_storage_new(void);
void squad_storage_free(tf_squad_storage *st);
/* n bytes aligned for any type; NULL when out of memory */
void *squad_storage_alloc(tf_squad_storage *st, size_t n);
/* a NUL-terminated copy of s[0..len) */
char *squad_storage_strndup(tf_squad_storage *st, const char *s, size_t len);

/* ---- idmap: string -> index, open addressing (keys are borrowed) --------- */

typedef struct squad_idmap {
    size_t cap;        /* slots, a power of two */
    size_t n;          /* keys stored */
    const char **keys; /* [cap], NULL = empty */
    size_t *vals;      /* [cap] */
} squad_idmap;

int squad_idmap_init(squad_idmap *m, size_t expected); /* 0 ok, -1 out of memory */
void squad_idmap_free(squad_idmap *m);
/* The value slot of key, inserting it (value 0, *inserted = 1) when absent;
 * NULL when out of memory. */
size_t *squad_idmap_put(squad_idmap *m, const char *key, int *inserted);
/* The value slot of key, or NULL. */
const size_t *squad_idmap_get(const squad_idmap *m, const char *key);

/* ---- normalized answers -------------------------------------------------- */

/* normalize_answer(s).split(): tokens point into *buf (one malloc), *toks
 * another malloc [*n]. Returns 0, or -1 when out of memory. */
int squad_tokens(const char *s, char **buf, const char ***toks, size_t *n);
/* The multiset overlap sum((Counter(a) & Counter(b)).values()); sorts both
 * token arrays in place. */
size_t squad_common_tokens(const char **a, size_t na, const char **b, size_t nb);
/* The F1 of two token lists, as compute_f1 (v2) or f1_score (v1.1); sorts
 * both in place. */
double squad_f1_tokens(const char **gold, size_t ng, const char **pred, size_t np,
                       tf_squad_version version);

/* ---- JSON files ------------------------------------------------------------ */

/* Read a JSON document from a file or a buffer; errors as "NAME:LINE:COL: msg"
 * or "NAME: cannot open: ...". The caller json_decref()s the result. */
struct json_t;
struct json_t *squad_json_load_file(const char *path, tf_error *err);
struct json_t *squad_json_load_buffer(const char *data, size_t len, const char *name,
                                      tf_error *err);

#define SQUAD_WARN_MAX 20 /* warnings listed one by one before a summary line */

#endif
