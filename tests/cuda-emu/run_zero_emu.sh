#!/bin/sh
# ZeRO stage 1 and 2 (comm.zero_stage) on emulated GPUs (tests/cuda-emu),
# end to end through `tfcore train`, as tests/test_zero.sh does on the CPU:
# bert-tiny, dropout off, global batch 16, 3 optimizer steps.
#  - comm nccl x2 and x4 (stage 2: ncclReduce of each bucket to its owners,
#    ncclAllGather, of the NCCL stand-in), stage 1 and 2, nccl x2 stage 2 with
#    2 micro-batches a step, and comm mpi x2 stage 2 on device buffers
#    (staged through pinned host memory): the parameters of plain nccl DDP
#    within 1e-5 relative (tests/params_diff);
#  - nccl x2 stage 2 saves checkpoint-2 and resumes from it at world 4 stage 1,
#    ending within 1e-5 of the uninterrupted run.
# Every case prints `PASS: name` or `FAIL: name`; exits 1 when one failed.
# EMU_RUNS (train_setup.sh's `runs`) picks cases by name: ddp2 ddp4 z1n2
# z2n2 z2n2acc z1n4 z2n4 z2m2 resume (a ZeRO case needs its DDP run: ddp2 for
# the world-2 ones, ddp4 for the world-4 ones).
#
# Usage: tests/cuda-emu/run_zero_emu.sh DIR (or TFCORE_EMU_DIR=DIR), DIR
# being what scripts/build-cuda-emu.sh DIR filled.
set -u
setup_name=run_zero_emu
. "$(dirname "$0")/train_setup.sh"

# cfg NAME PER_DEVICE COMM_SECTION [TRAINING_KEYS]. TF_TEST_SMALL=2 (the
# sanitizer trees): a 2048-token vocabulary and 16-token sequences, as
# run_parallel_emu.sh
vocab="" seq=32
[ "${TF_TEST_SMALL:-}" = 2 ] && vocab="vocab_size = 2048;" seq=16
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; $vocab
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $seq;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cuda"; };
training = { output_dir = "$tmp/$1"; max_steps = ${STEPS:-3}; per_device_train_batch_size = $2;
             gradient_accumulation_steps = ${ACC:-1}; learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01;
             logging_steps = 1; eval_strategy = "no"; save_strategy = "${SAVE:-no}"; seed = 11; ${4:-} };
$3
CFG
}
# equivalent REF NAME: NAME trains and ends with REF's parameters (1e-5 relative)
equivalent() {
    if ! train "$2"; then bad "$2: tfcore train failed" "$tmp/$2.out"; return; fi
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5 2>&1); then
        pass "$2: the parameters of $1 after 3 steps ($out)"
    else bad "$2: parameters differ from $1: $out"; fi
}
nccl() { printf 'comm = { plugin = "nccl"; world_size = %s; bucket_mb = 0.25; %s };' "$1" "${2:-}"; }

cfg ddp2 8 "$(nccl 2)"
if ! runs ddp2; then :
elif train ddp2; then pass "ddp2: nccl x2 DDP"; else bad "ddp2: nccl x2 DDP" "$tmp/ddp2.out"; fi
cfg ddp4 4 "$(nccl 4)"
if ! runs ddp4; then :
elif train ddp4; then pass "ddp4: nccl x4 DDP"; else bad "ddp4: nccl x4 DDP" "$tmp/ddp4.out"; fi
runs z1n2 && cfg z1n2 8 "$(nccl 2 'zero_stage = 1;')" && equivalent ddp2 z1n2
if runs z2n2; then
    export TFCORE_TRACE_COMM="$tmp/z2n2.trace"
    cfg z2n2 8 "$(nccl 2 'zero_stage = 2;')" && equivalent ddp2 z2n2
    unset TFCORE_TRACE_COMM
    # stage 2 reduces each bucket to its owners with ncclReduce during backward, every micro-batch
    if grep -q ' reduce_start ' "$tmp/z2n2.trace.rank1" 2>/dev/null; then pass "z2n2: buckets reduced to their owners (ncclReduce)"
    else bad "z2n2: no reduce_start in rank 1's comm trace"; fi
fi
runs z2n2acc && ACC=2 cfg z2n2acc 4 "$(nccl 2 'zero_stage = 2;')" && equivalent ddp2 z2n2acc
runs z1n4 && cfg z1n4 4 "$(nccl 4 'zero_stage = 1;')" && equivalent ddp4 z1n4
runs z2n4 && cfg z2n4 4 "$(nccl 4 'zero_stage = 2;')" && equivalent ddp4 z2n4
if ! runs z2m2; then :
elif "$tfcore" plugins 2>/dev/null | grep -Eq '^ *comm +mpi ' && command -v mpirun >/dev/null 2>&1; then
    cfg z2m2 8 'comm = { plugin = "mpi"; world_size = 2; zero_stage = 2; };' && equivalent ddp2 z2m2
else bad "z2m2: comm plugin mpi or mpirun missing"; fi

# a ZeRO-2 checkpoint resumed on another world size and stage
STEPS=4 SAVE=steps cfg ck 8 "$(nccl 2 'zero_stage = 2;')" 'save_steps = 2;'
STEPS=4 cfg rk 4 "$(nccl 4 'zero_stage = 1;')" "resume_from_checkpoint = \"$tmp/ck/checkpoint-2\";"
if ! runs resume; then :
elif train ck && train rk &&
    out=$("$diff_tool" "$tmp/ck/model.safetensors" "$tmp/rk/model.safetensors" 1e-5 2>&1); then
    pass "rk: nccl x2 ZeRO-2 checkpoint-2 resumed on nccl x4 ZeRO-1, within 1e-5 of the uninterrupted run ($out)"
else bad "rk: ZeRO resume across world sizes: ${out:-}" "$tmp/ck.out" "$tmp/rk.out"; fi

[ "$fail" -eq 0 ]
