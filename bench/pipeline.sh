#!/usr/bin/env bash
# Pipeline parallelism against DDP on one machine's CPU (#19): the same
# fine-tune (bert-mini: 4 layers, synthetic data, seq 128, fp32, AdamW) with
# the same global batch of 16 a step on
#   1 worker                                    (the baseline)
#   mpi x2                                      (DDP: 8 rows a worker, all-reduce)
#   pipeline 2 stages x 4 and x 8 micro-batches (layers [2, 2], 1F1B)
#   pipeline 2 stages x 4 micro-batches, GPipe
#   pipeline 4 stages x 8 micro-batches         (one layer a stage, 1F1B)
# each worker one thread, STEPS optimizer steps, ROUNDS rounds alternating;
# medians of train_samples_per_second, the speedup over the baseline, and for
# the pipelines the expected bubble (S-1)/(M+S-1), the measured one and the
# workers' mean utilisation (results.json tfcore.pipeline).
#   bench/pipeline.sh [ROUNDS] [STEPS]        (default 3 rounds of 20 steps)
# Run from the build tree's top (where core/tfcore is); needs comm mpi. On a
# machine with fewer cores than workers (4 stages on 2 cores) the workers
# share cores: the figures then say what oversubscription costs too.
set -euo pipefail
# shellcheck source=bench/train_runs.sh
. "$(dirname "${BASH_SOURCE[0]}")/train_runs.sh"
train_runs_init pipeline.sh
"$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi " || { echo "pipeline.sh: comm mpi is not built" >&2; exit 2; }
rounds="${1:-3}"
steps="${2:-20}"
export OMPI_MCA_btl="self,vader"

runs=("one|16|"
      "ddp2|8|comm = { plugin = \"mpi\"; world_size = 2; };"
      "pipe2x4|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 4; layers = [2, 2]; };"
      "pipe2x8|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 8; layers = [2, 2]; };"
      "pipe2x4g|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 4; schedule = \"gpipe\"; layers = [2, 2]; };"
      "pipe4x8|16|comm = { plugin = \"mpi\"; world_size = 4; }; pipeline = { stages = 4; micro_batches = 8; };")
names=()
for r in "${runs[@]}"; do
    IFS='|' read -r name batch extra <<<"$r"
    train_runs_cfg "$name" "$batch" "$steps" "$extra"
    names+=("$name")
done

collect() { # RUN RESULTS_JSON
    field "$2" "r['train_samples_per_second']" >>"$tmp/$1.sps"
    if [[ $1 == pipe* ]]; then
        field "$2" "r['tfcore']['pipeline']['measured_bubble']" >>"$tmp/$1.bubble"
        field "$2" "sum(r['tfcore']['pipeline']['utilisation']) / len(r['tfcore']['pipeline']['utilisation'])" \
            >>"$tmp/$1.util"
        field "$2" "r['tfcore']['pipeline']['expected_bubble']" >"$tmp/$1.expected"
    fi
}
train_runs_header "bert-mini (L4 H256 A4 I1024), global batch 16 x seq 128, fp32, one thread a worker, $steps steps x $rounds rounds"
train_runs_rounds "$rounds" collect "${names[@]}"
base=$(median <"$tmp/one.sps")
printf '\n| run | samples/s | speedup | expected bubble | measured bubble | mean utilisation |\n'
printf '| --- | --- | --- | --- | --- | --- |\n'
for name in "${names[@]}"; do
    sps=$(median <"$tmp/$name.sps")
    range=$(span "$tmp/$name.sps" '%.1f-%.1f')
    sp=$(awk -v a="$sps" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')
    if [[ $name == pipe* ]]; then
        printf '| %s | %.1f (%s) | %s | %.3f | %.3f | %.3f |\n' "$name" "$sps" "$range" "$sp" \
            "$(cat "$tmp/$name.expected")" "$(median <"$tmp/$name.bubble")" "$(median <"$tmp/$name.util")"
    else
        printf '| %s | %.1f (%s) | %s | - | - | - |\n' "$name" "$sps" "$range" "$sp"
    fi
done
