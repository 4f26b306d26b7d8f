/* pipeline_partition.c — the balanced split of a model's layers into
 * pipeline stages (pipeline.h): contiguous, non-empty, the largest stage's
 * parameter count as small as it can be (dynamic programming over the
 * prefix sums; L and S are small). */
#include <stdint.h>
#include <stdlib.h>

#include "pipeline.h"

tf_status tf_pipeline_partition(const size_t *cost, int layers, int stages, int *first, tf_error *err)
{
    if (stages < 1 || layers < stages)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "pipeline.stages = %d: the model has %d encoder layers; every stage needs at least one",
                            stages, layers);
    size_t L = (size_t)layers, S = (size_t)stages;
    size_t *pre = malloc((L + 1) * sizeof *pre);
    /* best[k][l]: the least largest cost of cutting layers [0, l) into k stages; cut[k][l] its last cut */
    size_t *best = malloc((S + 1) * (L + 1) * sizeof *best);
    int *cut = malloc((S + 1) * (L + 1) * sizeof *cut);
    if (!pre || !best || !cut) {
        free(pre);
        free(best);
        free(cut);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory partitioning %d layers", layers);
    }
    pre[0] = 0;
    for (size_t l = 0; l < L; l++) pre[l + 1] = pre[l] + cost[l];
#define BEST(k, l) best[(size_t)(k) * (L + 1) + (size_t)(l)]
#define CUT(k, l) cut[(size_t)(k) * (L + 1) + (size_t)(l)]
    for (size_t l = 0; l <= L; l++) BEST(1, l) = pre[l], CUT(1, l) = 0;
    for (size_t k = 2; k <= S; k++)
        for (size_t l = k; l <= L; l++) {
            BEST(k, l) = SIZE_MAX;
            for (size_t c = k - 1; c < l; c++) { /* the last stage is [c, l) */
                size_t worst = BEST(k - 1, c) > pre[l] - pre[c] ? BEST(k - 1, c) : pre[l] - pre[c];
                if (worst < BEST(k, l)) BEST(k, l) = worst, CUT(k, l) = (int)c;
            }
        }
    first[S] = layers;
    for (size_t k = S; k >= 1; k--) first[k - 1] = k == 1 ? 0 : CUT(k, first[k]);
#undef BEST
#undef CUT
    free(pre);
    free(best);
    free(cut);
    return TF_OK;
}
