#!/bin/sh
# comm nccl across two "hosts" on emulated GPUs: the network namespaces of
# tests/netns_hosts.sh stand in for machines, mpirun (started on host 0, its
# remote agent entering host 1's namespace) starts one rank on each, and
# comm-nccl's `bootstrap = "mpi"` hands rank 0's ncclUniqueId to the other
# rank over Open MPI's TCP transport between the two IP stacks, as on a GPU
# cluster. The NCCL stand-in then reduces through POSIX shared memory, which
# both namespaces see (`ip netns exec` shares the filesystem and /dev/shm):
# what crosses the namespaces is the launch and the bootstrap, not the
# all-reduce. bert-tiny, dropout off, global batch 16, 3 steps: the same
# parameters as one CPU worker within 1e-5 relative (tests/params_diff).
# Prints `PASS: name` / `FAIL: name`; a `SKIP:` line (exit 0) where network
# namespaces cannot be made (not root, no iproute2).
#
# TF_TEST_SMALL=2 (the sanitizer builds): bert-tiny with a 2048-token
# vocabulary and 16-token sequences; the sanitizers' options reach both ranks.
#
# Usage: tests/cuda-emu/run_netns_emu.sh DIR (or TFCORE_EMU_DIR=DIR), DIR
# being what scripts/build-cuda-emu.sh DIR filled.
set -u
emu=${1:-${TFCORE_EMU_DIR:-}}
[ -n "$emu" ] && [ -f "$emu/tfcore-comm-nccl.so" ] || {
    echo "usage: run_netns_emu.sh DIR (the folder scripts/build-cuda-emu.sh DIR filled)" >&2
    exit 2
}
emu=$(cd "$emu" && pwd)
top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
build="$emu/build"
tfcore="$build/core/tfcore"
diff_tool="$build/tests/params_diff"
[ -x "$diff_tool" ] || nice make -s -C "$build" tests/params_diff >/dev/null || {
    echo "FAIL: building $diff_tool"
    exit 1
}
export TFCORE_PLUGIN_PATH="$emu${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
export TFCORE_EMU_DEVICES=1 # one GPU per host
export TFCORE_EMU_NCCL_TIMEOUT_S=120
OMPI_MCA_mca_base_component_disable_dlclose=1
export OMPI_MCA_mca_base_component_disable_dlclose
unset OMPI_MCA_btl # the transports are the job's own: tcp,self
. "$top_srcdir/tests/netns_hosts.sh"
if ! netns_hosts_up 2; then # it said why
    echo "SKIP: nccl across network namespaces: they cannot be made here"
    netns_hosts_down
    exit 0
fi
tmp=$NETNS_DIR # removed with the fixture
h0=$NETNS_HOST_IP_0
h1=$NETNS_HOST_IP_1
fail=0
pass() { echo "PASS: $1"; }
bad() { # NAME [FILE]: the case failed; show the end of its output
    echo "FAIL: $1"
    [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 20 "$2" | sed 's/^/    /'
    fail=1
}
# cfg NAME PER_DEVICE BACKEND [COMM_SECTION]: bert-tiny without dropout
vocab="" seq=32
[ "${TF_TEST_SMALL:-}" = 2 ] && vocab="vocab_size = 2048;" seq=16
# the sanitizers' options (their log_path) for the ranks mpirun starts
san_env=""
for v in TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS; do
    eval "[ -n \"\${$v:-}\" ]" && san_env="$san_env -x $v"
done
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; $vocab
          max_position_embeddings = 64; hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $seq;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "$3"; };
training = { output_dir = "$tmp/$1"; max_steps = 3; per_device_train_batch_size = $2;
             gradient_accumulation_steps = 1; learning_rate = 5e-5; warmup_steps = 0;
             weight_decay = 0.01; logging_steps = 1; eval_strategy = "no"; save_strategy = "no"; seed = 11; };
${4:-}
CFG
}

cfg base 16 cpu
if timeout 300 "$tfcore" -c "$tmp/base.cfg" >"$tmp/base.out" 2>&1; then pass "base: one worker on backend-cpu"
else bad "base: one worker on backend-cpu" "$tmp/base.out"; fi

# the ranks are started by mpirun itself (as a batch system would): tfcore
# runs as the rank its environment names and starts no mpirun of its own
cfg nccl2 8 cuda 'comm = { plugin = "nccl"; world_size = 2; bucket_mb = 0.25; bootstrap = "mpi"; };'
# shellcheck disable=SC2086 # NETNS_MPIRUN_ARGS and san_env are lists of words
if timeout 300 ip netns exec "$NETNS_HOST_NS_0" mpirun -np 2 --allow-run-as-root --host "$h0:1,$h1:1" \
    $NETNS_MPIRUN_ARGS --display-map -x TFCORE_PLUGIN_PATH -x TFCORE_EMU_DEVICES -x TFCORE_EMU_NCCL_TIMEOUT_S \
    $san_env "$tfcore" train -c "$tmp/nccl2.cfg" >"$tmp/nccl2.out" 2>&1; then
    if ! grep -q "Data for node: $h1.*Num procs: 1\$" "$tmp/nccl2.out"; then
        bad "nccl2 across hosts: mpirun's map does not show a rank on $h1" "$tmp/nccl2.out"
    elif out=$("$diff_tool" "$tmp/base/model.safetensors" "$tmp/nccl2/model.safetensors" 1e-5 2>&1); then
        pass "nccl2 across 2 network namespaces (mpirun, bootstrap mpi): same parameters as one CPU worker ($out)"
    else bad "nccl2 across hosts: parameters differ from one CPU worker: $out"; fi
else bad "nccl2 across hosts: exit $?" "$tmp/nccl2.out"; fi

[ "$fail" -eq 0 ]
