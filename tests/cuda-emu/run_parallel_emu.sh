#!/bin/sh
# Parallel training on emulated GPUs (the CUDA emulation of tests/cuda-emu),
# end to end through `tfcore train`, as tests/test_parallel.sh does on the
# CPU: bert-tiny, dropout off, global batch 16, 3 optimizer steps.
#  - one worker on backend-cpu vs comm nccl x1, x2 and x4 (processes, emulated
#    backend-cuda and comm-nccl over the NCCL stand-in), dp-master across 2
#    emulated devices (threads) and mpi x2 on device buffers: the same
#    parameters within 1e-5 relative (tests/params_diff);
#  - nccl x3 on 50 rows trains, and its sharded evaluation of 37 rows gives
#    one worker's metrics;
#  - nccl x2 resumed from a checkpoint ends bit-identical to the
#    uninterrupted run;
#  - nccl x2 with gradient_checkpointing (dropout on) ends bit-identical to
#    the run without; optim adafactor resumed ends bit-identical;
#  - a killed nccl rank ends the job within 30 s, naming the rank, with no
#    worker left;
#  - comm-nccl's own driver (plugins/comm-nccl/comm-nccl-driver, the GPU part
#    of tests/test_comm_nccl.sh) on the emulated plugins: world 1, 2 and 4
#    through the launcher, the file bootstrap, and abort.
# Every case prints `PASS: name` or `FAIL: name` (with the tail of its
# output); the script exits 1 when one failed. EMU_RUNS (train_setup.sh's
# `runs`) picks cases by name: nccl1 nccl2 nccl4 dp2 mpi2 nccl3 resume
# gradckpt adafactor kill driver1 driver2 driver4 driver-file abort1 abort2
# (the plugin listing and the CPU worker "base" always run).
#
# TF_TEST_SMALL=2 (the sanitizer builds): the same cases on bert-tiny with a
# 2048-token vocabulary and 16-token sequences (every kernel, collective and
# stream wait of the full size runs; the embedding tables are 15 times
# smaller).
#
# Usage: tests/cuda-emu/run_parallel_emu.sh DIR (or TFCORE_EMU_DIR=DIR), DIR
# being what scripts/build-cuda-emu.sh DIR filled: the emulated plugins, the
# comm-nccl driver, and the normal tree in DIR/build (tfcore, the CPU
# plugins, comm-mpi; tests/params_diff is built there when missing).
set -u
setup_name=run_parallel_emu
. "$(dirname "$0")/train_setup.sh"
drv="$emu/comm-nccl-driver"

# cfg NAME PER_DEVICE BACKEND [COMM_SECTION]: bert-tiny without dropout (as
# tests/test_parallel.sh, on the given backend)
vocab="" seq=32
[ "${TF_TEST_SMALL:-}" = 2 ] && vocab="vocab_size = 2048;" seq=16
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; $vocab
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $seq;
         num_examples = ${EXAMPLES:-96}; eval_examples = ${EVAL_EXAMPLES:-0}; learnable = true; };
backend = { plugin = "$3"; };
training = { output_dir = "$tmp/$1"; max_steps = ${STEPS:-3}; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; per_device_eval_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01; logging_steps = 1;
             eval_strategy = "${EVAL:-no}"; ${EVAL:+eval_steps = 2;} save_strategy = "${SAVE:-no}"; ${SAVE:+save_steps = 2;} seed = 11; };
${4:-}
CFG
}
# equivalent NAME: NAME trained and ends with base's parameters (1e-5 relative)
equivalent() {
    if ! train "$1"; then bad "$1: tfcore train failed" "$tmp/$1.out"; return; fi
    if out=$("$diff_tool" "$tmp/base/model.safetensors" "$tmp/$1/model.safetensors" 1e-5 2>&1); then
        pass "$1: same parameters as one CPU worker after 3 steps ($out)"
    else bad "$1: parameters differ from one CPU worker: $out"; fi
}
nccl() { printf 'comm = { plugin = "nccl"; world_size = %s; bucket_mb = %s; };' "$1" "${2:-0.25}"; }

# the emulated plugins are there and usable, saying so
if "$tfcore" plugins >"$tmp/plugins" 2>&1 &&
    grep -Eq '^ *backend +cuda .*emulated' "$tmp/plugins" && grep -Eq '^ *comm +nccl ' "$tmp/plugins" &&
    ! grep -Eq '^ *comm +nccl .*cannot run here' "$tmp/plugins"; then
    pass "tfcore plugins lists the emulated cuda backend and a usable nccl"
else bad "tfcore plugins with TFCORE_PLUGIN_PATH=$emu" "$tmp/plugins"; fi

cfg base 16 cpu
if train base; then pass "base: one worker on backend-cpu"; else bad "base: one worker on backend-cpu" "$tmp/base.out"; fi

# small buckets: several all-reduces per step overlap the backward
runs nccl1 && cfg nccl1 16 cuda "$(nccl 1)" && equivalent nccl1
runs nccl2 && cfg nccl2 8 cuda "$(nccl 2)" && equivalent nccl2
runs nccl4 && cfg nccl4 4 cuda "$(nccl 4)" && equivalent nccl4
runs dp2 && cfg dp2 8 cuda 'comm = { plugin = "dp-master"; world_size = 2; };' && equivalent dp2
if ! runs mpi2; then :
elif "$tfcore" plugins 2>/dev/null | grep -Eq '^ *comm +mpi ' && command -v mpirun >/dev/null 2>&1; then
    cfg mpi2 8 cuda 'comm = { plugin = "mpi"; world_size = 2; bucket_mb = 0.25; };' && equivalent mpi2
    if grep -q "buffers: device memory" "$tmp/mpi2.out"; then pass "mpi2: comm-mpi reduced device buffers"
    else bad "mpi2: comm-mpi did not say it reduces device buffers" "$tmp/mpi2.out"; fi
else bad "mpi2: comm plugin mpi or mpirun missing" "$tmp/plugins"; fi

# a world size that does not divide the data: trains, and evaluates every
# eval row once (the metrics of one worker), as tests/test_parallel.sh
EXAMPLES=50 EVAL_EXAMPLES=37 EVAL=steps STEPS=2 cfg odd1 6 cpu
EXAMPLES=50 EVAL_EXAMPLES=37 EVAL=steps STEPS=2 cfg odd3 2 cuda "$(nccl 3)"
if ! runs nccl3; then :
elif train odd1 && train odd3 && python3 - "$tmp/odd1/results.json" "$tmp/odd3/results.json" <<'PY' >"$tmp/odd.txt" 2>&1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["tfcore"]["global_step"] == 2 and b["tfcore"]["world_size"] == 3, b
assert abs(a["eval_accuracy"] - b["eval_accuracy"]) < 1e-9, (a["eval_accuracy"], b["eval_accuracy"])
assert abs(a["eval_loss"] - b["eval_loss"]) < 1e-4 * abs(a["eval_loss"]), (a["eval_loss"], b["eval_loss"])
PY
then pass "nccl3: 50 rows over 3 ranks train; sharded evaluation of 37 rows equals one worker's"
else bad "nccl3: odd world size, sharded evaluation" "$tmp/odd1.out" "$tmp/odd3.out" "$tmp/odd.txt"; fi

# resume: 4 steps with checkpoints every 2, then again from checkpoint-2
STEPS=4 SAVE=steps cfg ckpt 8 cuda "$(nccl 2)"
if ! runs resume; then :
elif train ckpt && "$tfcore" -c "$tmp/ckpt.cfg" -o training.output_dir="\"$tmp/resumed\"" \
    -o training.resume_from_checkpoint="\"$tmp/ckpt/checkpoint-2\"" >"$tmp/resumed.out" 2>&1 &&
    out=$("$diff_tool" "$tmp/ckpt/model.safetensors" "$tmp/resumed/model.safetensors" 0 2>&1); then
    pass "nccl2: resumed from checkpoint-2, bit-identical to the uninterrupted run"
else bad "nccl2: resume from checkpoint-2: ${out:-}" "$tmp/ckpt.out" "$tmp/resumed.out"; fi

# gradient checkpointing on emulated GPUs, dropout on: the layers recomputed
# in backward (buckets firing as each finishes) give the same bits
drop='-o model.hidden_dropout_prob=0.1 -o model.attention_probs_dropout_prob=0.1'
cfg gc0 8 cuda "$(nccl 2)" && cfg gc1 8 cuda "$(nccl 2)"
# shellcheck disable=SC2086
if ! runs gradckpt; then :
elif "$tfcore" -c "$tmp/gc0.cfg" $drop >"$tmp/gc0.out" 2>&1 &&
    "$tfcore" -c "$tmp/gc1.cfg" $drop -o training.gradient_checkpointing=true >"$tmp/gc1.out" 2>&1 &&
    out=$("$diff_tool" "$tmp/gc0/model.safetensors" "$tmp/gc1/model.safetensors" 0 2>&1); then
    pass "nccl2: gradient_checkpointing with dropout, bit-identical to the run without"
else bad "nccl2: gradient_checkpointing: ${out:-}" "$tmp/gc0.out" "$tmp/gc1.out"; fi

# optim adafactor on emulated GPUs: trains, and resumes bit-exactly
STEPS=3 SAVE=steps cfg af 8 cuda "$(nccl 2)"
if ! runs adafactor; then :
elif "$tfcore" -c "$tmp/af.cfg" -o training.optim='"adafactor"' >"$tmp/af.out" 2>&1 &&
    "$tfcore" -c "$tmp/af.cfg" -o training.optim='"adafactor"' -o training.output_dir="\"$tmp/af_resumed\"" \
        -o training.resume_from_checkpoint="\"$tmp/af/checkpoint-2\"" >"$tmp/af_resumed.out" 2>&1 &&
    out=$("$diff_tool" "$tmp/af/model.safetensors" "$tmp/af_resumed/model.safetensors" 0 2>&1); then
    pass "nccl2: optim adafactor resumed from checkpoint-2, bit-identical to the uninterrupted run"
else bad "nccl2: optim adafactor resume: ${out:-}" "$tmp/af.out" "$tmp/af_resumed.out"; fi

# a killed rank: SIGKILL rank 1 once training is under way
kill_case() {
    STEPS=100000 cfg kill 8 cuda "$(nccl 2)"
    "$tfcore" -c "$tmp/kill.cfg" >"$tmp/kill.out" 2>&1 &
    job=$!
    victim=""
    i=0
    while [ $i -lt 600 ] && [ -z "$victim" ]; do
        if grep -q "'loss'" "$tmp/kill.out" 2>/dev/null; then
            for p in $(pgrep -f "$tmp/kill.cfg"); do
                [ "$p" = "$job" ] && continue
                tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^TFCORE_WORKER_RANK=1$' && victim=$p
            done
        fi
        [ -z "$victim" ] && sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$victim" ]; then
        kill -9 $job 2>/dev/null
        wait $job 2>/dev/null
        bad "nccl2 killed rank: found no rank-1 worker to kill" "$tmp/kill.out"
    else
        t0=$(date +%s)
        kill -9 "$victim"
        wait $job
        rc=$?
        t1=$(date +%s)
        sleep 0.5
        left=$(pgrep -f "$tmp/kill.cfg" | tr '\n' ' ')
        if [ "$rc" -ne 0 ] && [ $((t1 - t0)) -le 30 ] && [ -z "$left" ] &&
            grep -Eq "worker rank 1 was killed by signal 9" "$tmp/kill.out"; then
            pass "nccl2: a killed rank ends the job in $((t1 - t0)) s, naming it"
        else bad "nccl2 killed rank: rc $rc after $((t1 - t0)) s, left running: '$left'" "$tmp/kill.out"; fi
    fi
}
runs kill && kill_case

# comm-nccl's driver: collectives checked against known values, abort
so="$emu/tfcore-comm-nccl.so"
cuda_so="$emu/tfcore-backend-cuda.so"
ops_ok="ok: 3 steps x 3 AVG buckets, f64 sum, 5 broadcasts, reduce, 3 barriers"
# drive CASE NAME PATTERN ARGS...: the driver's output matches PATTERN, exit 0
drive() {
    runs "$1" || return 0
    name=$2 want=$3
    shift 3
    if "$drv" run "$so" --backend "$cuda_so" "$@" >"$tmp/drive.out" 2>&1 && grep -Eq -- "$want" "$tmp/drive.out"; then
        pass "comm-nccl-driver: $name"
    else bad "comm-nccl-driver: $name" "$tmp/drive.out"; fi
}
drive driver1 "world 1, collectives" "rank 0: $ops_ok" --world 1 --ops
drive driver2 "world 2, collectives" "rank 1: $ops_ok" --world 2 --ops
drive driver4 "world 4, collectives" "rank 3: $ops_ok" --world 4 --ops
drive driver-file "world 2, file bootstrap" "rank 1: $ops_ok" --world 2 --launch fork-noshared --ops \
    -o comm.bootstrap=file -o "comm.bootstrap_file=$tmp/boot" -o "comm.bootstrap_token=emu-$$"
drive abort1 "world 1, abort" "rank 0: ok: barrier after the abort: .*the communicator was aborted: driver injected failure" \
    --world 1 --abort-rank 0
drive abort2 "world 2, abort by rank 1" "rank 0: ok: barrier after the abort: .*rank 1 failed: driver injected failure" \
    --world 2 --abort-rank 1

[ "$fail" -eq 0 ]
