#!/usr/bin/env bash
# Data-parallel scaling on one machine's CPU: the same fine-tune (bert-mini,
# batch 16 per worker x seq 128, synthetic data, fp32, AdamW) on
#   1 worker  x 1 thread                       (the baseline)
#   2 workers x 1 thread, comm mpi             (DDP-style bucketed all-reduce)
#   2 workers x 1 thread, comm dp-master       (DataParallel: reduce to rank 0)
# each for STEPS optimizer steps, ROUNDS times alternating; medians of
# Trainer's train_samples_per_second (global samples / train_runtime), the
# speedup over the baseline, and communication seconds in flight vs exposed
# (results.json phase_seconds.comm / comm_exposed).
#   bench/scaling.sh [ROUNDS] [STEPS]        (default 3 rounds of 20 steps)
# Run from the build tree's top (where core/tfcore is). Skips a strategy whose
# plugin is not built. Issue goal: mpi 2 x 1 >= 1.8x one worker.
set -euo pipefail
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "scaling.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
rounds="${1:-3}"
steps="${2:-20}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }
runs=("one|")
have mpi && runs+=("mpi2|comm = { plugin = \"mpi\"; world_size = 2; };")
have dp-master && runs+=("dp2|comm = { plugin = \"dp-master\"; world_size = 2; };")

for r in "${runs[@]}"; do
    name=${r%%|*}
    comm=${r#*|}
    cat >"$tmp/$name.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 128;
         num_examples = 65536; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/out-$name"; overwrite_output_dir = true; max_steps = $steps; per_device_train_batch_size = 16;
             learning_rate = 5e-5; logging_steps = 1000000; eval_strategy = "no"; save_strategy = "no"; };
$comm
CFG
done

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u +%Y-%m-%d)"
echo "model:   bert-mini (L4 H256 A4 I1024), batch 16 per worker x seq 128, fp32, $steps steps x $rounds rounds"
for ((k = 1; k <= rounds; k++)); do
    for r in "${runs[@]}"; do
        name=${r%%|*}
        TFCORE_LOG=warn "$tfcore" -c "$tmp/$name.cfg" >"$tmp/$name.$k.log" 2>&1 ||
            { echo "scaling.sh: $name failed:" >&2; tail -n 20 "$tmp/$name.$k.log" >&2; exit 1; }
        res="$tmp/out-$name/results.json"
        field "$res" "r['train_samples_per_second']" >>"$tmp/$name.sps"
        field "$res" "r['tfcore']['phase_seconds']['comm']" >>"$tmp/$name.comm"
        field "$res" "r['tfcore']['phase_seconds']['comm_exposed']" >>"$tmp/$name.exposed"
        field "$res" "r['train_runtime']" >>"$tmp/$name.runtime"
    done
done
base=$(median <"$tmp/one.sps")
printf '\n| run | workers x threads | samples/s | (min-max) | speedup | train_runtime s | comm s (in flight) | comm exposed s |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for r in "${runs[@]}"; do
    name=${r%%|*}
    sps=$(median <"$tmp/$name.sps")
    w=$([ "$name" = one ] && echo 1 || echo 2)
    range=$(sort -g "$tmp/$name.sps" | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.1f-%.1f", lo, hi}')
    printf '| %s | %s x 1 | %.1f | %s | %.2fx | %.2f | %.2f | %.2f |\n' "$name" "$w" "$sps" "$range" \
        "$(python3 -c "print($sps / $base)")" "$(median <"$tmp/$name.runtime")" \
        "$(median <"$tmp/$name.comm")" "$(median <"$tmp/$name.exposed")"
done
