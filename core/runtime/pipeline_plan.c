/* pipeline_plan.c — which layers each stage runs (pipeline.layers, or the
 * balanced split by parameter count) and what --dry-run prints of it: the
 * partition, each stage's parameters and what it keeps of the model's
 * state, the expected bubble (S-1)/(M+S-1) and the activations a stage
 * holds at most under the schedule. */
#include <stdlib.h>

#include "pipeline.h"
#include "plan.h"
#include "stack.h"
#include "tfcore/model.h"

tf_status tf_pipeline_split(const tf_pipeline_settings *set, tf_section *ps, const tf_model_vtable *mvt, tf_model *m,
                            int *first, tf_error *err)
{
    int L = mvt->info(m)->num_layers;
    if (L < set->stages)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: pipeline.stages = %d but the model has %d encoder layers; "
                            "every stage needs at least one",
                            tf_cfg_where(ps, "stages"), set->stages, L);
    if (set->layers[0]) {
        int sum = 0;
        for (int k = 0; k < set->stages; k++) first[k] = sum, sum += set->layers[k];
        first[set->stages] = sum;
        if (sum != L)
            return tf_error_set(err, TF_ERR_CONFIG,
                                "%s: pipeline.layers adds up to %d encoder layers; the model has %d",
                                tf_cfg_where(ps, "layers"), sum, L);
        return TF_OK;
    }
    size_t *cost = malloc((size_t)L * sizeof *cost);
    if (!cost) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    for (int l = 0; l < L; l++) {
        size_t off;
        mvt->stage_params(m, l, l + 1, &off, &cost[l]);
    }
    tf_status st = tf_pipeline_partition(cost, L, set->stages, first, err);
    free(cost);
    return st;
}

/* The split is pipeline.layers when given (no model needed: a dry run of a
 * pretrained model reads no weights); else the model is created (random
 * init or its weights) to count its layers' parameters. */
tf_status tf_pipeline_print_plan(const tf_plan *plan, FILE *out, tf_error *err)
{
    const tf_pipeline_settings *set = &plan->pipeline;
    if (set->stages <= 1) return TF_OK;
    tf_stack s = {0};
    bool by_hand = set->layers[0] != 0;
    tf_status st = TF_OK;
    int first[TF_PIPELINE_MAX_STAGES + 1];
    if (by_hand) {
        first[0] = 0;
        for (int k = 0; k < set->stages; k++) first[k + 1] = first[k] + set->layers[k];
    } else {
        tf_stack_options o = {.device = 0, .threads = 1, .with_model = true};
        st = tf_stack_open(&s, plan, &o, err);
        if (!st)
            st = tf_pipeline_split(set, tf_config_section(plan->cfg, "pipeline"), s.model.vt, s.model.h, first, err);
    }
    tf_pipeline_sim sim;
    if (!st) st = tf_pipeline_simulate(set->schedule, set->stages, set->micro_batches, 1.0, 2.0, &sim, err);
    if (!st) {
        fprintf(out, "# pipeline: %d stages x %d micro-batches, %s schedule, expected bubble %.3f "
                     "((S-1)/(M+S-1)); a stage holds at most %d micro-batches' boundary activations\n",
                set->stages, set->micro_batches, tf_pipeline_schedule_name(set->schedule),
                tf_pipeline_bubble(set->stages, set->micro_batches), sim.peak_in_flight);
        /* the model's own gradients (keep_stage_grads, ABI 1.5): known from its vtable alone */
        const tf_model_vtable *mvt = plan->plugin[TF_KIND_MODEL]->desc->vtable;
        bool own_grads = TF_HAS(mvt, keep_stage_grads);
        if (own_grads)
            fprintf(out, "# each stage keeps the AdamW moments and the gradients of its own parameters only; the "
                         "model's parameter buffer stays whole on every stage (evaluation runs the whole model)\n");
        else
            fprintf(out, "# each stage keeps the AdamW moments of its own parameters only; the model's parameter and "
                         "gradient buffers stay whole on every stage (evaluation runs the whole model; the model "
                         "has no keep_stage_grads, ABI 1.5)\n");
        tf_model_buffers b = {0};
        if (!by_hand) s.model.vt->buffers(s.model.h, &b);
        double mib = 4.0 / 1048576.0;
        for (int k = 0; k < set->stages; k++) {
            size_t off, n = 0;
            if (!by_hand) s.model.vt->stage_params(s.model.h, first[k], first[k + 1], &off, &n);
            fprintf(out, "#   stage %d: layers %d..%d%s%s", k, first[k], first[k + 1] - 1,
                    k == 0 ? " + embeddings" : "", k == set->stages - 1 ? " + head" : "");
            if (by_hand)
                fprintf(out, " (pipeline.layers; checked against the model when the stages start)\n");
            else
                fprintf(out, ", %zu parameters; keeps AdamW moments %.2f MiB and gradients %.2f MiB (whole model: "
                             "%.2f and %.2f MiB), parameters %.2f MiB whole\n",
                        n, 2.0 * (double)n * mib, (double)(own_grads ? n : b.n) * mib, 2.0 * (double)b.n * mib,
                        (double)b.n * mib, (double)b.n * mib);
        }
    }
    tf_stack_close(&s);
    return st;
}
