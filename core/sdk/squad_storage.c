/* squad_storage.c — the arena and the string map the SQuAD code uses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "squad_internal.h"

struct squad_block {
    struct squad_block *next;
    size_t cap;  /* bytes in data */
    size_t used; /* bytes handed out */
    max_align_t data[];
};

#define SQUAD_BLOCK_MIN ((size_t)64 * 1024)

tf_squad_storage *squad_storage_new(void)
{
    return calloc(1, sizeof(tf_squad_storage));
}

void squad_storage_free(tf_squad_storage *st)
{
    if (!st) return;
    struct squad_block *b = st->head;
    while (b) {
        struct squad_block *next = b->next;
        free(b);
        b = next;
    }
    free(st->examples);
    free(st->answers);
    free(st);
}

void *squad_storage_alloc(tf_squad_storage *st, size_t n)
{
    const size_t align = sizeof(max_align_t);
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + align - 1) / align * align;
    struct squad_block *b = st->head;
    if (!b || b->cap - b->used < n) {
        /* each block at least twice the previous: O(log) blocks, linear copying */
        size_t cap = b ? b->cap * 2 : SQUAD_BLOCK_MIN;
        if (cap < n) cap = n;
        struct squad_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->next = b;
        nb->cap = cap;
        nb->used = 0;
        st->head = b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

char *squad_storage_strndup(tf_squad_storage *st, const char *s, size_t len)
{
    if (len == SIZE_MAX) return NULL;
    char *p = squad_storage_alloc(st, len + 1);
    if (!p) return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

/* ---- idmap ---------------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

int squad_idmap_init(squad_idmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 && cap < (SIZE_MAX >> 2))
        cap *= 2;
    m->cap = cap;
    m->n = 0;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        squad_idmap_free(m);
        return -1;
    }
    return 0;
}

void squad_idmap_free(squad_idmap *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

static size_t idmap_slot(const char *const *keys, size_t cap, const char *key)
{
    size_t i = (size_t)hash_str(key) & (cap - 1);
    while (keys[i] && strcmp(keys[i], key) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

static int idmap_grow(squad_idmap *m)
{
    size_t cap = m->cap * 2;
    const char **keys = calloc(cap, sizeof *keys);
    size_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = idmap_slot(keys, cap, m->keys[i]);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

size_t *squad_idmap_put(squad_idmap *m, const char *key, int *inserted)
{
    *inserted = 0;
    if ((m->n + 1) * 2 > m->cap && idmap_grow(m) != 0) return NULL; /* load <= 1/2 */
    size_t i = idmap_slot(m->keys, m->cap, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->vals[i] = 0;
        m->n++;
        *inserted = 1;
    }
    return &m->vals[i];
}

const size_t *squad_idmap_get(const squad_idmap *m, const char *key)
{
    if (!m->keys) return NULL;
    size_t i = idmap_slot(m->keys, m->cap, key);
    return m->keys[i] ? &m->vals[i] : NULL;
}
