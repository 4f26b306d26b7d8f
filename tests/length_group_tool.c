/* length_group_tool.c — the sampler's length-grouped order for
 * tests/ref/length_grouped_vs_transformers.py. Reads from stdin
 *   n batch seed epoch world
 *   length_0 ... length_(n-1)
 * and prints three lines: the epoch's permutation before grouping (what the
 * reference feeds transformers in place of torch.randperm), the grouped
 * global order (tf_sampler, one worker), and the rows each rank of `world`
 * takes in order, concatenated rank by rank (tf_sampler_rows). */
#include <stdio.h>
#include <stdlib.h>

#include "sampler.h"

static void print_list(const size_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) printf(i ? " %zu" : "%zu", v[i]);
    printf("\n");
}

int main(void)
{
    size_t n, batch;
    unsigned long long seed;
    long long epoch;
    int world;
    if (scanf("%zu %zu %llu %lld %d", &n, &batch, &seed, &epoch, &world) != 5 || n == 0 || world < 1) {
        fprintf(stderr, "length_group_tool: expected 'n batch seed epoch world' then n lengths\n");
        return 2;
    }
    int32_t *len = malloc(n * sizeof *len);
    if (!len) return 1;
    for (size_t i = 0; i < n; i++)
        if (scanf("%d", &len[i]) != 1) {
            fprintf(stderr, "length_group_tool: expected %zu lengths\n", n);
            return 2;
        }
    tf_error err = {0};
    tf_sampler plain, grouped;
    if (tf_sampler_init(&plain, n, 0, 1, seed, 1, &err) || tf_sampler_init(&grouped, n, 0, 1, seed, 1, &err) ||
        tf_sampler_group_by_length(&grouped, len, batch, &err)) {
        fprintf(stderr, "length_group_tool: %s\n", err.msg);
        return 1;
    }
    tf_sampler_set_epoch(&plain, epoch);
    tf_sampler_set_epoch(&grouped, epoch);
    print_list(plain.perm, n);
    print_list(grouped.perm, n);
    /* the shards of a world of `world` workers, each with batch / world rows a step */
    for (int r = 0; r < world; r++) {
        tf_sampler s;
        if (tf_sampler_init(&s, n, r, world, seed, 1, &err) || tf_sampler_group_by_length(&s, len, batch, &err)) {
            fprintf(stderr, "length_group_tool: %s\n", err.msg);
            return 1;
        }
        tf_sampler_set_epoch(&s, epoch);
        size_t k = tf_sampler_rank_rows(&s);
        size_t *rows = malloc(k * sizeof *rows);
        if (!rows) return 1;
        tf_sampler_rows(&s, 0, k, rows);
        for (size_t i = 0; i < k; i++) printf(r == 0 && i == 0 ? "%zu" : " %zu", rows[i]);
        free(rows);
        tf_sampler_free(&s);
    }
    printf("\n");
    tf_sampler_free(&plain);
    tf_sampler_free(&grouped);
    free(len);
    return 0;
}
