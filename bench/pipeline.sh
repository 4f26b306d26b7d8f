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
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "pipeline.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
"$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi " || { echo "pipeline.sh: comm mpi is not built" >&2; exit 2; }
rounds="${1:-3}"
steps="${2:-20}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_MCA_btl="self,vader"

runs=("one|16|"
      "ddp2|8|comm = { plugin = \"mpi\"; world_size = 2; };"
      "pipe2x4|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 4; layers = [2, 2]; };"
      "pipe2x8|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 8; layers = [2, 2]; };"
      "pipe2x4g|16|comm = { plugin = \"mpi\"; world_size = 2; }; pipeline = { stages = 2; micro_batches = 4; schedule = \"gpipe\"; layers = [2, 2]; };"
      "pipe4x8|16|comm = { plugin = \"mpi\"; world_size = 4; }; pipeline = { stages = 4; micro_batches = 8; };")
for r in "${runs[@]}"; do
    IFS='|' read -r name batch extra <<<"$r"
    cat >"$tmp/$name.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 128;
         num_examples = 65536; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/out-$name"; overwrite_output_dir = true; max_steps = $steps;
             per_device_train_batch_size = $batch; learning_rate = 5e-5; logging_steps = 1000000;
             eval_strategy = "no"; save_strategy = "no"; };
$extra
CFG
done

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u +%Y-%m-%d)"
echo "model:   bert-mini (L4 H256 A4 I1024), global batch 16 x seq 128, fp32, one thread a worker, $steps steps x $rounds rounds"
for ((k = 1; k <= rounds; k++)); do
    for r in "${runs[@]}"; do
        name=${r%%|*}
        TFCORE_LOG=warn "$tfcore" -c "$tmp/$name.cfg" >"$tmp/$name.$k.log" 2>&1 ||
            { echo "pipeline.sh: $name failed:" >&2; tail -n 20 "$tmp/$name.$k.log" >&2; exit 1; }
        res="$tmp/out-$name/results.json"
        field "$res" "r['train_samples_per_second']" >>"$tmp/$name.sps"
        if [[ $name == pipe* ]]; then
            field "$res" "r['tfcore']['pipeline']['measured_bubble']" >>"$tmp/$name.bubble"
            field "$res" "sum(r['tfcore']['pipeline']['utilisation']) / len(r['tfcore']['pipeline']['utilisation'])" \
                >>"$tmp/$name.util"
            field "$res" "r['tfcore']['pipeline']['expected_bubble']" >"$tmp/$name.expected"
        fi
    done
done
base=$(median <"$tmp/one.sps")
printf '\n| run | samples/s | speedup | expected bubble | measured bubble | mean utilisation |\n'
printf '| --- | --- | --- | --- | --- | --- |\n'
for r in "${runs[@]}"; do
    name=${r%%|*}
    sps=$(median <"$tmp/$name.sps")
    lo=$(sort -g "$tmp/$name.sps" | head -1)
    hi=$(sort -g "$tmp/$name.sps" | tail -1)
    sp=$(awk -v a="$sps" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')
    if [[ $name == pipe* ]]; then
        printf '| %s | %.1f (%.1f-%.1f) | %s | %.3f | %.3f | %.3f |\n' "$name" "$sps" "$lo" "$hi" "$sp" \
            "$(cat "$tmp/$name.expected")" "$(median <"$tmp/$name.bubble")" "$(median <"$tmp/$name.util")"
    else
        printf '| %s | %.1f (%.1f-%.1f) | %s | - | - | - |\n' "$name" "$sps" "$lo" "$hi" "$sp"
    fi
done
