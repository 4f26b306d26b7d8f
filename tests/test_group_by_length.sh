#!/bin/sh
# training.group_by_length end to end through `tfcore train`, on synthetic
# rows of lengths uniform in [8, 32] padded to each batch's longest row:
#  - a run trains (finite losses, a final model), and its order is not the
#    plain sampler's (the final parameters differ from a run without it);
#  - the shards: dropout off, the same seed and global batch, 3 steps: one
#    worker (batch 16) vs dp-master x2 (DataParallel) and mpi x2 (DDP), batch
#    8 each, with gradient accumulation too, end with the same parameters
#    within 1e-5 relative;
#  - evaluation in LengthGroupedSampler's order gives every row's logits at its
#    place: eval_accuracy equal and eval_loss within 1e-6 of the evaluation in
#    row order (eval_loss is the mean of the rows' losses either way).
# Order against transformers: tests/ref/length_grouped_vs_transformers.py.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || { echo "SKIP: no $tfcore"; exit 77; }
[ -d "$top_builddir/plugins/backend-cpu/.libs" ] || { echo "SKIP: backend-cpu is not built (no OpenBLAS)"; exit 77; }
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader"
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
diff_tool="$top_builddir/tests/params_diff"
tmp=$(mktemp -d /tmp/tfcore-group-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
have_plugin() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }

# cfg NAME PER_DEVICE ACCUM GROUP [COMM_SECTION] [EXTRA TRAINING KEYS]
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32; min_length = 8;
         padding = "longest"; num_examples = 200; eval_examples = 50; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = 3; per_device_train_batch_size = $2;
             gradient_accumulation_steps = $3; group_by_length = $4; per_device_eval_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; logging_steps = 1; save_strategy = "no"; seed = 11; ${6:-} };
${5:-}
CFG
}
train() {
    if "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1; then ok; else
        bad "$1: tfcore exited $?"; tail -n 20 "$tmp/$1.out"; return 1; fi
}
same_params() {
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5); then ok; else
        bad "$2 differs from $1: $out"; fi
}

# --- 1. it trains, in another order than without -----------------------------
cfg grouped 16 1 true && train grouped
cfg plain 16 1 false && train plain
python3 - "$tmp/grouped/log.jsonl" <<'PY' && ok || bad "grouped: no finite training losses in log.jsonl"
import json, math, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
assert len(losses) == 3 and all(math.isfinite(x) for x in losses), losses
PY
if "$diff_tool" "$tmp/plain/model.safetensors" "$tmp/grouped/model.safetensors" 1e-7 >/dev/null 2>&1; then
    bad "group_by_length changed nothing: the parameters equal the plain sampler's"; else ok; fi

# --- 2. the shards of DataParallel and DDP -------------------------------------
cfg grouped_acc 16 2 true && train grouped_acc
if have_plugin dp-master; then
    cfg dp2 8 1 true 'comm = { plugin = "dp-master"; world_size = 2; };' && train dp2 && same_params grouped dp2
    cfg dp2_acc 8 2 true 'comm = { plugin = "dp-master"; world_size = 2; };' && train dp2_acc \
        && same_params grouped_acc dp2_acc
else echo "SKIP: comm plugin dp-master not built"; fi
if have_plugin mpi; then
    cfg mpi2 8 1 true 'comm = { plugin = "mpi"; world_size = 2; };' && train mpi2 && same_params grouped mpi2
    cfg mpi2_acc 8 2 true 'comm = { plugin = "mpi"; world_size = 2; };' && train mpi2_acc \
        && same_params grouped_acc mpi2_acc
else echo "SKIP: comm plugin mpi not built (no Open MPI)"; fi

# --- 3. evaluation in length-grouped order -----------------------------------
cfg eval_grouped 16 1 true "" 'do_train = false; do_eval = true;' && train eval_grouped
cfg eval_plain 16 1 false "" 'do_train = false; do_eval = true;' && train eval_plain
python3 - "$tmp/eval_plain/results.json" "$tmp/eval_grouped/results.json" <<'PY' && ok || bad "evaluation in grouped order differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["eval_accuracy"] == b["eval_accuracy"], (a, b)
assert abs(a["eval_loss"] - b["eval_loss"]) <= 1e-6, (a["eval_loss"], b["eval_loss"])
PY

echo "test_group_by_length: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
