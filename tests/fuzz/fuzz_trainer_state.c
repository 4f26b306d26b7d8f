/* fuzz_trainer_state.c — libFuzzer target for the resume reader
 * (core/runtime/trainer_state.c): any bytes as a checkpoint's trainer_state.json.
 * What it accepts must be counters a run can continue from; what it refuses
 * must be one TF_ERR_DATA line naming the file.
 * Run: scripts/fuzz.sh 60 trainer_state */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "trainer_state.h"

/* a broken invariant is a crash the fuzzer reports */
static void must(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char name[] = "fuzz/trainer_state.json";
    tf_trainer_state s;
    tf_error err = {0};
    json_t *root = NULL;
    tf_status st = tf_trainer_state_parse((const char *)data, size, name, &s, &root, &err);
    if (st == TF_OK) {
        must(s.global_step >= 0 && s.micro_step >= 0 && s.skipped_steps >= 0 && s.num_parameters >= 0);
        must(isfinite(s.total_loss) && isfinite(s.scaler.scale) && s.scaler.scale > 0);
        must(s.scaler.good_steps >= 0 && s.scaler.skipped_steps >= 0);
        must(json_is_object(root));
        json_decref(root);
    } else {
        must(st == TF_ERR_DATA && root == NULL);
        must(strncmp(err.msg, name, sizeof name - 1) == 0 && !strchr(err.msg, '\n'));
    }
    return 0;
}
