#!/bin/sh
# Pipeline parallelism (#19) on emulated GPUs (tests/cuda-emu) over comm nccl:
# the stages' activations and gradients travel by ncclSend / ncclRecv of the
# NCCL stand-in, issued in groups (plugins/comm-nccl/nccl_p2p.c). bert-tiny,
# dropout off, global batch 8, 3 optimizer steps, ends with the parameters
# of one emulated GPU (no comm) within 1e-5 relative (tests/params_diff):
#  - 2 stages x 4 micro-batches, GPipe and 1F1B (world 2);
#  - 2 stages x 2 replicas (world 4, TFCORE_EMU_DEVICES=4), both schedules.
# Every case prints `PASS: name` or `FAIL: name`; exits 1 when one failed.
# EMU_RUNS (train_setup.sh's `runs`) picks cases by name: one p2_gpipe
# p2x2_gpipe p2_1f1b p2x2_1f1b (the pipelines compare with "one").
#
# Usage: tests/cuda-emu/run_pipeline_emu.sh DIR (or TFCORE_EMU_DIR=DIR), DIR
# being what scripts/build-cuda-emu.sh DIR filled.
set -u
setup_name=run_pipeline_emu
. "$(dirname "$0")/train_setup.sh"

# cfg NAME PER_DEVICE [SECTIONS]: bert-tiny (2 layers), global batch PER_DEVICE x replicas
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 32; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 48; eval_examples = 0; learnable = true; };
backend = { plugin = "cuda"; };
training = { output_dir = "$tmp/$1"; max_steps = 3; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01;
             logging_steps = 1; eval_strategy = "no"; save_strategy = "no"; seed = 11; };
${3:-}
CFG
}
pipe() { # SCHEDULE REPLICAS: 2 stages x 4 micro-batches over nccl
    printf 'comm = { plugin = "nccl"; world_size = %s; };\npipeline = { stages = 2; micro_batches = 4; schedule = "%s"; };' \
        "$((2 * $2))" "$1"
}
# equivalent NAME: NAME trains and ends with one GPU's parameters (1e-5 relative)
equivalent() {
    if ! train "$1"; then bad "$1: tfcore train failed" "$tmp/$1.out"; return; fi
    if out=$("$diff_tool" "$tmp/one/model.safetensors" "$tmp/$1/model.safetensors" 1e-5 2>&1); then
        pass "$1: the parameters of one GPU after 3 steps ($out)"
    else bad "$1: parameters differ from one GPU's: $out"; fi
}

cfg one 8
if ! runs one; then :
elif train one; then pass "one: one emulated GPU, global batch 8"; else bad "one: one emulated GPU" "$tmp/one.out"; fi
for k in gpipe 1f1b; do
    runs "p2_$k" && cfg "p2_$k" 8 "$(pipe $k 1)" && equivalent "p2_$k"
    runs "p2x2_$k" && cfg "p2x2_$k" 4 "$(pipe $k 2)" && equivalent "p2x2_$k"
done

[ "$fail" -eq 0 ]
