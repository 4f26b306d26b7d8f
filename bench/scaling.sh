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
# shellcheck source=bench/train_runs.sh
. "$(dirname "${BASH_SOURCE[0]}")/train_runs.sh"
train_runs_init scaling.sh
rounds="${1:-3}"
steps="${2:-20}"

have() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }
names=(one)
train_runs_cfg one 16 "$steps" ""
if have mpi; then
    names+=(mpi2)
    train_runs_cfg mpi2 16 "$steps" 'comm = { plugin = "mpi"; world_size = 2; };'
fi
if have dp-master; then
    names+=(dp2)
    train_runs_cfg dp2 16 "$steps" 'comm = { plugin = "dp-master"; world_size = 2; };'
fi

collect() { # RUN RESULTS_JSON
    field "$2" "r['train_samples_per_second']" >>"$tmp/$1.sps"
    field "$2" "r['tfcore']['phase_seconds']['comm']" >>"$tmp/$1.comm"
    field "$2" "r['tfcore']['phase_seconds']['comm_exposed']" >>"$tmp/$1.exposed"
    field "$2" "r['train_runtime']" >>"$tmp/$1.runtime"
}
train_runs_header "bert-mini (L4 H256 A4 I1024), batch 16 per worker x seq 128, fp32, $steps steps x $rounds rounds"
train_runs_rounds "$rounds" collect "${names[@]}"
base=$(median <"$tmp/one.sps")
printf '\n| run | workers x threads | samples/s | (min-max) | speedup | train_runtime s | comm s (in flight) | comm exposed s |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for name in "${names[@]}"; do
    sps=$(median <"$tmp/$name.sps")
    w=$([ "$name" = one ] && echo 1 || echo 2)
    range=$(span "$tmp/$name.sps" '%.1f-%.1f')
    printf '| %s | %s x 1 | %.1f | %s | %.2fx | %.2f | %.2f | %.2f |\n' "$name" "$w" "$sps" "$range" \
        "$(python3 -c "print($sps / $base)")" "$(median <"$tmp/$name.runtime")" \
        "$(median <"$tmp/$name.comm")" "$(median <"$tmp/$name.exposed")"
done
