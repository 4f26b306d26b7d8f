#!/bin/sh
# Pipeline parallelism end to end (#19), CPU workers under mpirun (comm mpi,
# re-executed by tfcore), bert-tiny cut to 4 encoder layers, dropout off:
#  - equivalence: 2 and 4 stages x 4 and 8 micro-batches, GPipe and 1F1B,
#    end with the parameters of one worker with the same global batch (16)
#    within 1e-5 relative; with dropout on too (masks by a row's global
#    position); a split given by pipeline.layers; gradient accumulation;
#    2 stages x 2 replicas (the per-stage gradient all-reduce), both schedules;
#    over the process launcher's path too (the test comm plugin shm: forked
#    workers, send/recv through shared memory): 2 stages 1F1B, 2 x 2 GPipe;
#  - checkpoints are the whole model in the usual layout (the stages'
#    parameters and AdamW moments gathered): a pipeline's checkpoint-2 (2 and
#    4 stages) equals one worker's; resuming it on the pipeline, on one worker
#    and on DDP ends where one worker's uninterrupted run does; evaluation on
#    a pipeline equals one worker's; a stop signal stops every stage after one
#    step with a checkpoint that resumes;
#  - results.json reports the partition, the expected bubble and each
#    worker's measured utilisation and bubble, and each worker's memory: a
#    stage's AdamW moments are its own parameters' (the stages' add up to one
#    worker's; about 1/S each when the split balances);
#  - --dry-run prints the partition, the expected bubble and what each stage keeps;
#  - a comm plugin built for ABI 1.3 (comm-mpi cut before send/recv, tests/abi13)
#    still loads and trains DDP to one worker's parameters; a model built for
#    ABI 1.4 (model-bert without keep_stage_grads, tests/abi14) trains a
#    pipeline to them, each stage keeping the whole gradient buffer;
#  - a comm plugin without send/recv (ABI 1.3 and earlier) or a world size that
#    is not a multiple of the stage count is refused with one line.
# Skips (77) without the mpi comm plugin (no Open MPI).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
unset TFCORE_TEST_SIGNAL TFCORE_TEST_SIGNAL_AT_STEP TFCORE_TEST_SIGNAL_IN_SAVE
tfcore="$top_builddir/core/tfcore"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader" # one machine: no network transports probed
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
export TFCORE_PLUGIN_PATH="$top_builddir/tests/comm-shm/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
diff_tool="$top_builddir/tests/params_diff"
if ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
    echo "test_pipeline_mpi: SKIP: comm plugin mpi not built (no Open MPI)"
    exit 77
fi
tmp=$(mktemp -d /tmp/tfcore-pipeline-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# cfg NAME PER_DEVICE ACCUM [SECTIONS]: bert-tiny with 4 layers, global batch PER_DEVICE x ACCUM
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          num_hidden_layers = ${LAYERS:-4}; max_position_embeddings = 64; hidden_dropout_prob = ${DROPOUT:-0.0};
          vocab_size = ${VOCAB:-30522};
          attention_probs_dropout_prob = ${DROPOUT:-0.0}; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = ${EVAL_EXAMPLES:-0}; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = ${STEPS:-3}; per_device_train_batch_size = $2;
             gradient_accumulation_steps = $3; per_device_eval_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01; logging_steps = 1;
             eval_strategy = "${EVAL:-no}"; eval_steps = 2; save_strategy = "${SAVE:-no}"; save_steps = 2;
             seed = 11; };
${4:-}
CFG
}
pipe() { # STAGES MICRO SCHEDULE [LAYERS] [REPLICAS]: world_size STAGES x REPLICAS (default 1); COMM (mpi)
    printf 'comm = { plugin = "%s"; world_size = %s; };\npipeline = { stages = %s; micro_batches = %s; schedule = "%s";%s };' \
        "${COMM:-mpi}" "$(($1 * ${5:-1}))" "$1" "$2" "$3" "${4:+ layers = $4;}"
}
train() { # NAME [ARGS]
    n=$1
    shift
    if "$tfcore" -c "$tmp/$n.cfg" "$@" >"$tmp/$n.out" 2>&1; then ok; else
        bad "$n: tfcore exited $?"; tail -n 20 "$tmp/$n.out"; return 1; fi
}
same_params() { # A B [FILE]: the models agree within 1e-5 relative
    if out=$("$diff_tool" "$tmp/$1/${3:-model.safetensors}" "$tmp/$2/${3:-model.safetensors}" 1e-5); then ok; else
        bad "$2 differs from $1: $out"; fi
}

# --- 1. equivalence with one worker, global batch 16 --------------------------
cfg base 16 1 && train base
for s in 2 4; do
    for m in 4 8; do
        for k in gpipe 1f1b; do
            cfg "p${s}_${m}_$k" 16 1 "$(pipe $s $m $k)" && train "p${s}_${m}_$k" && same_params base "p${s}_${m}_$k"
        done
    done
done
grep -q "pipeline: 4 stages x 8 micro-batches of up to 2 rows, gpipe schedule; expected bubble 0.273" \
    "$tmp/p4_8_gpipe.out" && ok || bad "p4_8_gpipe: no line with the partition's bubble"
# results.json: the partition, the expected bubble, each worker's utilisation and bubble
flat=$(tr -d ' \n' <"$tmp/p4_8_gpipe/results.json")
u='0\.[0-9e-]*'
case "$flat" in
*'"pipeline":{"stages":4,"replicas":1,"micro_batches":8,"schedule":"gpipe","stage_layers":[[0,1],[1,2],[2,3],[3,4]],"expected_bubble":0.272727'*'"utilisation":['*) ok ;;
*) bad "p4_8_gpipe: results.json has no pipeline section as expected" ;;
esac
echo "$flat" | grep -q "\"utilisation\":\[$u,$u,$u,$u\],\"bubble\":\[$u,$u,$u,$u\],\"measured_bubble\":$u" && ok ||
    bad "p4_8_gpipe: results.json lacks 4 workers' utilisation and bubble in [0, 1)"
# memory per worker (tfcore.pipeline.memory_bytes): a stage's AdamW moments
# and gradients cover its own parameters only (2 x 4 and 4 bytes each, the
# count its log line gives), the stages' add up to one worker's, and each
# replica of a stage holds the same; the parameters stay whole (one worker's)
mem_check() { # NAME BASE STAGES REPLICAS [MAX_SHARE [GRADS]]: MAX_SHARE bounds the largest stage's share
    # of the moments; GRADS "whole": the model keeps every gradient (no keep_stage_grads)
    python3 - "$tmp/$1" "$tmp/$2" "$3" "$4" "${5:-1}" "${6:-own}" <<'PY' && ok || bad "$1: tfcore.pipeline.memory_bytes wrong (above)"
import json, re, sys
run, base, S, D, share = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
own_grads = sys.argv[6] == "own"
whole = json.load(open(base + "/results.json"))["tfcore"]["memory_bytes"]
r = json.load(open(run + "/results.json"))["tfcore"]
mem = r["pipeline"]["memory_bytes"]
n = [int(x) for x in re.findall(r"pipeline: stage \d+: .*?, (\d+) parameters; AdamW moments for them only",
                                 open(run + ".out").read())]
assert len(mem) == S * D and len(n) == S, (len(mem), n)
assert mem[0] == {k: r["memory_bytes"][k] for k in mem[0]}, (mem[0], r["memory_bytes"])
opt = [m["optimizer_states"] for m in mem]
for rank, m in enumerate(mem):
    assert m["optimizer_states"] == 8 * n[rank % S], (rank, m, n)
    assert m["optimizer_states"] == mem[rank % S]["optimizer_states"]
    assert m["gradients"] == (4 * n[rank % S] if own_grads else whole["gradients"]), (rank, m, n)
    assert m["weights"] == whole["weights"], (rank, m, whole)
assert sum(opt[:S]) == whole["optimizer_states"], (opt, whole)
assert not own_grads or sum(m["gradients"] for m in mem[:S]) == whole["gradients"], (mem, whole)
assert max(opt) <= share * whole["optimizer_states"], (opt, whole, share)
print("%s: optimizer_states per rank %s of %d whole; gradients %s of %d" %
      (run, opt, whole["optimizer_states"], [m["gradients"] for m in mem], whole["gradients"]))
PY
}
mem_check p4_8_gpipe base 4 1
mem_check p2_4_1f1b base 2 1
# with a smaller vocabulary and 8 layers the balanced split by parameter
# count gives each stage about 1/S of the moments (bert-tiny's 30522-word
# embeddings put most of them on stage 0 above)
export VOCAB=2048 LAYERS=8
cfg vbase 16 1 && train vbase
cfg vp2 16 1 "$(pipe 2 4 1f1b)" && train vp2 && same_params vbase vp2 && mem_check vp2 vbase 2 1 0.55
cfg vp4 16 1 "$(pipe 4 4 gpipe)" && train vp4 && same_params vbase vp4 && mem_check vp4 vbase 4 1 0.33
unset VOCAB LAYERS

# the split by hand, and a step's rows as 8 x 2 accumulation (micro-batches of 4)
cfg p2_layers 16 1 "$(pipe 2 4 1f1b '[3, 1]')" && train p2_layers && same_params base p2_layers
grep -q "stage 0: layers 0..2 + embeddings" "$tmp/p2_layers.out" && ok || bad "p2_layers: pipeline.layers not applied"
cfg p2_acc 8 2 "$(pipe 2 4 1f1b)" && train p2_acc && same_params base p2_acc

# 2 stages x 2 replicas (4 ranks), 8 rows a replica: the per-stage all-reduce
cfg p2x2_1f1b 8 1 "$(pipe 2 4 1f1b '' 2)" && train p2x2_1f1b && same_params base p2x2_1f1b
cfg p2x2_gpipe 4 2 "$(pipe 2 2 gpipe '' 2)" && train p2x2_gpipe && same_params base p2x2_gpipe
# the replicas' all-reduce is not the schedule's waiting: every bubble in [0, 1)
tr -d ' \n' <"$tmp/p2x2_gpipe/results.json" | grep -q "\"bubble\":\[$u,$u,$u,$u\],\"measured_bubble\":$u" && ok ||
    bad "p2x2_gpipe: results.json's bubbles are not 4 values in [0, 1)"
mem_check p2x2_gpipe base 2 2

# the same over the process launcher (tfcore forks the workers; comm shm)
if "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +shm "; then
    COMM=shm cfg shm_p2_1f1b 16 1 "$(COMM=shm pipe 2 4 1f1b)" && train shm_p2_1f1b && same_params base shm_p2_1f1b
    COMM=shm cfg shm_p2x2_gpipe 8 1 "$(COMM=shm pipe 2 4 gpipe '' 2)" && train shm_p2x2_gpipe &&
        same_params base shm_p2x2_gpipe
else bad "the test comm plugin shm was not built (tests/comm-shm)"; fi

# dropout on: the masks are those of the single worker (by a row's global position)
DROPOUT=0.1 cfg dbase 16 1 && train dbase
DROPOUT=0.1 cfg dp4 16 1 "$(pipe 4 4 1f1b)" && train dp4 && same_params dbase dp4
DROPOUT=0.1 cfg dp2x2 8 1 "$(pipe 2 4 gpipe '' 2)" && train dp2x2 && same_params dbase dp2x2

# --- 2. checkpoints, resume, evaluation ---------------------------------------
STEPS=4 SAVE=steps EVAL=steps EVAL_EXAMPLES=40 cfg cbase 16 1 && train cbase
STEPS=4 SAVE=steps EVAL=steps EVAL_EXAMPLES=40 cfg cp2 16 1 "$(pipe 2 4 1f1b)" && train cp2
same_params cbase cp2
same_params cbase cp2 checkpoint-2/model.safetensors
same_params cbase cp2 checkpoint-2/optimizer.safetensors
# evaluation on every rank of the pipeline: the same metrics as one worker
e1=$(grep -o "'eval_loss': [0-9.e-]*" "$tmp/cbase.out" | head -1)
e2=$(grep -o "'eval_loss': [0-9.e-]*" "$tmp/cp2.out" | head -1)
[ -n "$e1" ] && [ "$e1" = "$e2" ] && ok || bad "pipeline eval_loss '$e2' is not one worker's '$e1'"
# resume the pipeline's checkpoint on the pipeline, and on one worker
STEPS=4 cfg rp2 16 1 "$(pipe 2 4 gpipe)" &&
    train rp2 -o training.resume_from_checkpoint="\"$tmp/cp2/checkpoint-2\"" && same_params cbase rp2
STEPS=4 cfg r1 16 1 && train r1 -o training.resume_from_checkpoint="\"$tmp/cp2/checkpoint-2\"" && same_params cbase r1
# and on DDP (2 workers x 8 rows)
STEPS=4 cfg rddp 8 1 'comm = { plugin = "mpi"; world_size = 2; };' &&
    train rddp -o training.resume_from_checkpoint="\"$tmp/cp2/checkpoint-2\"" && same_params cbase rddp
# a checkpoint of 4 stages (each its own moments) gathers to one worker's
STEPS=4 SAVE=steps cfg cp4 16 1 "$(pipe 4 8 gpipe)" && train cp4 && same_params cbase cp4 checkpoint-2/optimizer.safetensors
# and one worker's checkpoint on a pipeline of 4
STEPS=4 cfg rp4 16 1 "$(pipe 4 4 1f1b)" &&
    train rp4 -o training.resume_from_checkpoint="\"$tmp/cbase/checkpoint-2\"" && same_params cbase rp4

# a stop signal after step 1 (rank 0 raises SIGTERM): every stage stops after
# the same step, the gathered checkpoint is saved, exit 75; "last" resumes it
# to the uninterrupted run's parameters
STEPS=4 cfg stop 16 1 "$(pipe 2 4 1f1b)"
TFCORE_TEST_SIGNAL_AT_STEP=1 "$tfcore" -c "$tmp/stop.cfg" >"$tmp/stop.out" 2>&1
rc=$?
if [ $rc -eq 75 ] && grep -q "stopped by SIGTERM after step 1; checkpoint saved to $tmp/stop/checkpoint-1" "$tmp/stop.out" &&
    [ -f "$tmp/stop/checkpoint-1/model.safetensors" ]; then ok; else
    bad "stop: exit $rc, wanted 75 and checkpoint-1"; tail -n 8 "$tmp/stop.out"; fi
train stop -o training.resume_from_checkpoint='"last"' && same_params cbase stop

# --- 3. --dry-run: the partition and the expected bubble ----------------------
cfg dry 16 1 "$(pipe 4 8 1f1b)"
if "$tfcore" -c "$tmp/dry.cfg" --dry-run >"$tmp/dry.out" 2>&1 &&
    grep -q "^# pipeline: 4 stages x 8 micro-batches, 1f1b schedule, expected bubble 0.273" "$tmp/dry.out" &&
    grep -q "^#   stage 0: layers 0..0 + embeddings" "$tmp/dry.out" &&
    grep -q "^#   stage 3: layers 3..3 + head" "$tmp/dry.out"; then ok; else
    bad "--dry-run does not print the partition and bubble"; cat "$tmp/dry.out" | tail -n 12; fi
# and what each stage keeps: its own parameters' moments and gradients, the
# parameters whole (bert-tiny with 4 layers: 36.05 MiB of moments)
grep -q "^# each stage keeps the AdamW moments and the gradients of its own parameters only" "$tmp/dry.out" &&
    grep -Eq "^#   stage 1: layers 1..1, [0-9]+ parameters; keeps AdamW moments 1\.[0-9]+ MiB and gradients 0\.[0-9]+ MiB \(whole model: 36\.05 and 18\.03 MiB\), parameters 18\.03 MiB whole" "$tmp/dry.out" &&
    ok || { bad "--dry-run does not say what each stage keeps"; grep "^#" "$tmp/dry.out"; }

# --- 4. refused with one line ---------------------------------------------------
refused() { # NAME WANT: exit 3 with the line WANT
    "$tfcore" -c "$tmp/$1.cfg" --dry-run >"$tmp/$1.out" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && grep -q "$2" "$tmp/$1.out" && [ "$(grep -c '^tfcore: ' "$tmp/$1.out")" -eq 1 ]; then ok; else
        bad "$1: exit $rc, wanted 3 and '$2'"; cat "$tmp/$1.out"; fi
}
if "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +dp-master "; then
    cfg nop2p 16 1 'comm = { plugin = "dp-master"; world_size = 2; };
pipeline = { stages = 2; };'
    refused nop2p "a pipeline needs a comm plugin with point-to-point send and recv (plugin ABI 1.4); comm 'dp-master'"
fi
# a comm plugin built for ABI 1.3 (comm-mpi cut before send/recv) still loads
# and trains DDP; a pipeline refuses it
if [ -f "$top_builddir/tests/abi13/.libs/tfcore-comm-mpi13.so" ]; then
    export TFCORE_PLUGIN_PATH="$top_builddir/tests/abi13/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
    cfg ddp13 8 1 'comm = { plugin = "mpi13"; world_size = 2; };' && train ddp13 && same_params base ddp13
    cfg pipe13 16 1 'comm = { plugin = "mpi13"; world_size = 2; };
pipeline = { stages = 2; };'
    refused pipe13 "a pipeline needs a comm plugin with point-to-point send and recv (plugin ABI 1.4); comm 'mpi13' (ABI 1.3) has none"
else
    bad "tests/abi13/tfcore-comm-mpi13.so was not built"
fi
# a model built for ABI 1.4 (model-bert cut before keep_stage_grads,
# tests/abi14): each stage keeps the whole gradient buffer, its own moments,
# and trains to one worker's parameters
if [ -f "$top_builddir/tests/abi14/.libs/tfcore-model-bert14.so" ]; then
    export TFCORE_PLUGIN_PATH="$top_builddir/tests/abi14/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
    cfg p2_bert14 16 1 "$(pipe 2 4 1f1b)" && train p2_bert14 -o model.plugin='"bert14"' &&
        same_params base p2_bert14 && mem_check p2_bert14 base 2 1 1 whole
    "$tfcore" -c "$tmp/p2_bert14.cfg" -o model.plugin='"bert14"' --dry-run >"$tmp/p2_bert14_dry.out" 2>&1 &&
        grep -q "^# each stage keeps the AdamW moments of its own parameters only; the model's parameter and gradient buffers stay whole" "$tmp/p2_bert14_dry.out" &&
        ok || { bad "bert14: --dry-run does not say the gradients stay whole"; grep "^#" "$tmp/p2_bert14_dry.out"; }
else
    bad "tests/abi14/tfcore-model-bert14.so was not built"
fi
cfg badworld 16 1 'comm = { plugin = "mpi"; world_size = 3; };
pipeline = { stages = 2; };'
refused badworld "pipeline.stages = 2 needs a comm section whose world_size is a multiple of 2"
cfg toomany 16 1 "$(pipe 2 4 1f1b)"
refused_run() { # NAME WANT [ARGS]: a run that fails with the line WANT
    n=$1 want=$2
    shift 2
    if "$tfcore" -c "$tmp/$n.cfg" "$@" >"$tmp/$n.out" 2>&1; then bad "$n ran"; else
        grep -q "$want" "$tmp/$n.out" && ok || { bad "$n: no line '$want'"; tail -n 5 "$tmp/$n.out"; }
    fi
}
refused_run toomany "pipeline.stages = 2 but the model has 1 encoder layers" -o model.num_hidden_layers=1
refused_run toomany "pipeline.layers adds up to 3 encoder layers; the model has 4" -o 'pipeline.layers=[2, 1]'

echo "test_pipeline_mpi: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
