#!/bin/sh
# A stalled rank on emulated GPUs (the CUDA emulation of tests/cuda-emu): comm
# nccl x2 through tfcore's process launcher, comm.timeout_s = 60, SIGSTOP of
# rank 1 once training is under way. (60, not 5 as on the CPU: the host's
# wait for the step's loss all-reduce includes the emulated device's backward
# queued before it, seconds a step on the emulation.) The job must end within timeout + 120 s,
# non-zero, with the flight recorder's line naming rank 1 as behind (as
# tests/test_comm_timeout.sh checks for mpi, the process launcher and
# dp-master on the CPU), and leave no worker running.
# Prints `PASS: name` or `FAIL: name`; exits 1 when it failed.
#
# TF_TEST_SMALL=2 (the sanitizer builds): bert-tiny with a 2048-token
# vocabulary and 16-token sequences. TFCORE_EMU_STALL_TIMEOUT_S sets
# comm.timeout_s (default 60; the suite gives ThreadSanitizer 150, where a
# step's queued backward takes tens of seconds).
#
# Usage: tests/cuda-emu/run_stall_emu.sh DIR (or TFCORE_EMU_DIR=DIR), DIR
# being what scripts/build-cuda-emu.sh DIR filled.
set -u
emu=${1:-${TFCORE_EMU_DIR:-}}
[ -n "$emu" ] && [ -f "$emu/tfcore-comm-nccl.so" ] || {
    echo "usage: run_stall_emu.sh DIR (the folder scripts/build-cuda-emu.sh DIR filled)" >&2
    exit 2
}
emu=$(cd "$emu" && pwd)
tfcore="$emu/build/core/tfcore"
case ":${TFCORE_PLUGIN_PATH:-}:" in
*":$emu:"*) ;;
*) export TFCORE_PLUGIN_PATH="$emu${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}" ;;
esac
export TFCORE_EMU_DEVICES=2
tmp=$(mktemp -d /tmp/tfcore-emu-stall-XXXXXX)
cleanup() {
    for p in $(pgrep -f "$tmp/" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
TIMEOUT=${TFCORE_EMU_STALL_TIMEOUT_S:-60}
# the NCCL stand-in's own no-progress error comes far later than comm.timeout_s
export TFCORE_EMU_NCCL_TIMEOUT_S=$((TIMEOUT + 60))
vocab="" seq=32
[ "${TF_TEST_SMALL:-}" = 2 ] && vocab="vocab_size = 2048;" seq=16
cat >"$tmp/stall.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; $vocab
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $seq;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cuda"; };
training = { output_dir = "$tmp/stall"; max_steps = 100000; per_device_train_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; logging_steps = 1;
             eval_strategy = "no"; save_strategy = "no"; seed = 11; };
comm = { plugin = "nccl"; world_size = 2; timeout_s = $TIMEOUT; };
CFG
t_start=$(date +%s)
timeout -k 5 $((TIMEOUT + 240)) "$tfcore" -c "$tmp/stall.cfg" >"$tmp/stall.out" 2>&1 &
job=$!
victim=""
i=0
while [ $i -lt 1800 ] && [ -z "$victim" ]; do
    if grep -q "'step': 2" "$tmp/stall.out" 2>/dev/null; then
        for p in $(pgrep -f "$tmp/stall.cfg"); do
            [ "$p" = "$job" ] && continue
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q '^TFCORE_WORKER_RANK=1$' && victim=$p
        done
    fi
    [ -z "$victim" ] && sleep 0.1
    i=$((i + 1))
done
name="nccl2 stalled rank (comm.timeout_s = $TIMEOUT)"
if [ -z "$victim" ]; then
    echo "FAIL: $name: found no rank-1 worker to stop [$(($(date +%s) - t_start)) s]"
    tail -n 15 "$tmp/stall.out" | sed 's/^/    /'
    kill $job 2>/dev/null
    wait $job 2>/dev/null
    exit 1
fi
t0=$(date +%s)
kill -STOP "$victim"
wait $job
rc=$?
took=$(($(date +%s) - t0))
sleep 0.5
left=$(pgrep -f "$tmp/stall.cfg" | tr '\n' ' ')
# The bound catches a job that does not end (the `timeout` above kills it at
# TIMEOUT + 240 s, exit 124); which timer ended it is the "collective timeout
# (comm.timeout_s = ...)" line's to say (the NCCL stand-in's own error would
# come 60 s later than comm.timeout_s, both counted from rank 0's wait). After
# the stop rank 0 first finishes the device work queued before its collective:
# seconds on the plain build, 35 s under ThreadSanitizer in a busy CI run
# (2026-11-25; 10 s by hand), so the bound leaves 120 s for that.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le $((TIMEOUT + 120)) ] && [ -z "$left" ] &&
    grep -Eq "collective timeout \(comm.timeout_s = $TIMEOUT\): rank 1 is behind: last seen at step [0-9]+ " "$tmp/stall.out" &&
    grep -Eq "rank 0: waiting [0-9]+ s in [a-z-]+ #[0-9]+" "$tmp/stall.out"; then
    echo "PASS: $name ends the job in $took s, naming rank 1 [$(($(date +%s) - t_start)) s]"
else
    echo "FAIL: $name: rc $rc after $took s, left running: '$left' [$(($(date +%s) - t_start)) s]"
    tail -n 15 "$tmp/stall.out" | sed 's/^/    /'
    exit 1
fi
