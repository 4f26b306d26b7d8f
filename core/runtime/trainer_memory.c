/* trainer_memory.c — the run's backend memory by category, as the
 * Hugging Face guide's "anatomy of memory" splits it: weights, gradients,
 * optimizer states, activations, temporaries (results.json
 * tfcore.memory_bytes, tfcore bench). */
#include "trainer_strategy.h"
#include "trainer_internal.h"

bool tf_trainer_memory(tf_trainer *t, tf_memory_breakdown *out)
{
    *out = (tf_memory_breakdown){0};
    if (!TF_HAS(t->mvt, memory)) return false;
    tf_model_memory mm = {.size = sizeof mm};
    t->mvt->memory(t->model, &mm);
    out->weights = mm.weights;
    out->gradients = mm.gradients;
    size_t resident;
    if (tf_zero2_gradient_bytes(t, &resident) && resident < out->gradients)
        out->gradients = resident; /* ZeRO-2 returns the parts other ranks own to the system */
    out->activations = mm.activations;
    /* the moments cover this rank's shard under ZeRO (trainer_strategy.h), else every parameter */
    size_t moments = t->strategy && t->strategy->sharded ? t->opt_n : t->buf.n;
    if (t->exp_avg) out->optimizer_states += moments * sizeof(float);
    if (t->exp_avg_sq) out->optimizer_states += moments * sizeof(float);
    if (t->af_state) out->optimizer_states += t->af_state_n * sizeof(float) + t->af_workspace_bytes;
    /* the backend's peak counts the gradient buffer as allocated, whole */
    size_t sum = out->weights + mm.gradients + out->optimizer_states + out->activations;
    out->have_temporaries = false;
    if (t->bvt->mem_info) {
        tf_backend_mem_info mi = {0};
        t->bvt->mem_info(t->be, &mi);
        /* every category above is held from setup to the end, so the peak
         * holds them all at once; the rest is batches, workspaces, buffers */
        if (mi.peak >= sum) {
            out->temporaries = mi.peak - sum;
            out->have_temporaries = true;
        }
    }
    return true;
}

json_t *tf_trainer_memory_json(tf_trainer *t)
{
    tf_memory_breakdown b;
    if (!tf_trainer_memory(t, &b)) return NULL;
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "weights", json_integer((json_int_t)b.weights));
    json_object_set_new(o, "gradients", json_integer((json_int_t)b.gradients));
    json_object_set_new(o, "optimizer_states", json_integer((json_int_t)b.optimizer_states));
    json_object_set_new(o, "activations", json_integer((json_int_t)b.activations));
    if (b.have_temporaries) json_object_set_new(o, "temporaries", json_integer((json_int_t)b.temporaries));
    return o;
}
