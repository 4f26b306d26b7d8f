/* tokenizer_grow.c — the growable arrays of the tokenizer's working memory
 * (tokenizer_internal.h): every tokenizer file grows its buffers here. */
#include <stdint.h>
#include <stdlib.h>

#include "tokenizer_internal.h"

int tok_grow(void **p, size_t *cap, size_t need, size_t elt)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > ((size_t)-1) / 2 / elt) return TF_ERR_RUNTIME;
        n *= 2;
    }
    void *q = realloc(*p, n * elt);
    if (!q) return TF_ERR_RUNTIME;
    *p = q;
    *cap = n;
    return 0;
}

int tok_list_reserve(tok_list *l, int32_t need)
{
    if (need <= l->cap) return 0;
    size_t cap = (size_t)l->cap, c;
    c = cap;
    if (tok_grow((void **)&l->id, &c, (size_t)need, sizeof *l->id)) return TF_ERR_RUNTIME;
    c = cap;
    if (tok_grow((void **)&l->start, &c, (size_t)need, sizeof *l->start)) return TF_ERR_RUNTIME;
    c = cap;
    if (tok_grow((void **)&l->end, &c, (size_t)need, sizeof *l->end)) return TF_ERR_RUNTIME;
    c = cap;
    if (tok_grow((void **)&l->word, &c, (size_t)need, sizeof *l->word)) return TF_ERR_RUNTIME;
    if (c > INT32_MAX) c = INT32_MAX;
    l->cap = (int32_t)c;
    return 0;
}
