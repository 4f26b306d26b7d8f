/* config_suggest.c — "did you mean ...?": edit distance and the closest name
 * (tfcore/config.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/config.h"

/* Longest word tf_closest compares: a suggestion for a longer name is not a
 * typo fix, and the distance is quadratic in the length. */
#define CLOSEST_MAX_LEN 256

size_t tf_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n == 0) return m;
    if (m == 0) return n;
    if (m + 1 > SIZE_MAX / (2 * sizeof(size_t))) return SIZE_MAX;
    size_t *row = malloc(2 * (m + 1) * sizeof *row); /* two rows of [m + 1] */
    if (!row) return SIZE_MAX;
    size_t *prev = row, *cur = row + m + 1;
    for (size_t j = 0; j <= m; j++) prev[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t best = sub < del ? sub : del;
            cur[j] = best < ins ? best : ins;
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[m];
    free(row);
    return d;
}

const char *tf_closest(const char *word, const char *const *candidates, size_t n)
{
    if (!word || !candidates) return NULL;
    size_t wlen = strlen(word);
    if (wlen > CLOSEST_MAX_LEN) return NULL;
    size_t limit = wlen / 3 > 2 ? wlen / 3 : 2;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *c = candidates[i];
        if (!c) continue;
        size_t clen = strlen(c);
        if (clen > CLOSEST_MAX_LEN) continue;
        /* the distance is at least the difference in length */
        if ((clen > wlen ? clen - wlen : wlen - clen) > limit) continue;
        size_t d = tf_edit_distance(word, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best_d <= limit ? best : NULL;
}
