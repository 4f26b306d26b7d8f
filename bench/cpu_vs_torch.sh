#!/usr/bin/env bash
# tfcore vs PyTorch, full CPU training steps (forward, backward, AdamW, fp32),
# batch 16 x seq 128, random ids, on bert-mini (L4 H256 A4 I1024) and
# MiniLM-L6 (L6 H384 A12 I1536), side by side in one run, ROUNDS times
# alternating, medians reported; plus the OpenBLAS sgemm ceiling.
#   bench/cpu_vs_torch.sh [ROUNDS] [STEPS]      (default 3 rounds of 10 steps)
# Run from the build tree's top (where core/tfcore is). Needs the reference
# Python ($TFCORE_PYTHON or scripts/setup-python.sh's venv).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "cpu_vs_torch.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
rounds="${1:-3}"
steps="${2:-10}"
warmup=2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

models=("bert-mini 4 256 4 1024" "MiniLM-L6 6 384 12 1536")
for m in "${models[@]}"; do
    set -- $m
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          num_hidden_layers = $2; hidden_size = $3; num_attention_heads = $4; intermediate_size = $5; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 128;
         num_examples = 4096; eval_examples = 0; learnable = false; };
backend = { plugin = "cpu"; };
training = { per_device_train_batch_size = 16; learning_rate = 5e-5; };
CFG
done

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

ceiling=$("$build/bench/sgemm_ceiling" 2048 7)
gf_ceiling=$(echo "$ceiling" | sed -n 's/.*: \([0-9.]*\) GFLOP.*/\1/p')
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u +%Y-%m-%d)"
echo "ceiling: $ceiling"
echo
printf '| %-9s | %-14s | %-14s | %-7s | %-13s | %-10s | %-12s | %-12s |\n' model "tfcore samp/s" "torch samp/s" ratio "tfcore GF/s" "% ceiling" "tfcore RSS" "torch RSS"
printf '|%s|\n' "-----------|----------------|----------------|---------|---------------|------------|--------------|-------------"
headline=""
for m in "${models[@]}"; do
    set -- $m
    name=$1
    : >"$tmp/t.$name"; : >"$tmp/p.$name"; : >"$tmp/g.$name"; : >"$tmp/tr.$name"; : >"$tmp/pr.$name"
    for r in $(seq "$rounds"); do
        out=$("$tfcore" bench -c "$tmp/$name.cfg" --steps "$steps" --warmup "$warmup" --json 2>/dev/null)
        echo "$out" | field samples_per_second >>"$tmp/t.$name"
        echo "$out" | field matmul_gflops >>"$tmp/g.$name"
        echo "$out" | field peak_rss_mb >>"$tmp/tr.$name"
        out=$("$py" "$src/bench/torch_train_step.py" "$2" "$3" "$4" "$5" 16 128 "$steps" "$warmup" 2>/dev/null)
        echo "$out" | field samples_per_second >>"$tmp/p.$name"
        echo "$out" | field peak_rss_mb >>"$tmp/pr.$name"
    done
    t=$(median <"$tmp/t.$name"); p=$(median <"$tmp/p.$name"); g=$(median <"$tmp/g.$name")
    tr=$(median <"$tmp/tr.$name"); pr=$(median <"$tmp/pr.$name")
    ratio=$(awk -v a="$t" -v b="$p" 'BEGIN {printf "%.2f", a / b}')
    pct=$(awk -v a="$g" -v b="$gf_ceiling" 'BEGIN {printf "%.0f%%", 100 * a / b}')
    printf '| %-9s | %14.2f | %14.2f | %6sx | %13.1f | %10s | %9.0f MiB | %9.0f MiB |\n' "$name" "$t" "$p" "$ratio" "$g" "$pct" "$tr" "$pr"
    headline="$headline $name ${ratio}x"
done
echo
echo "headline: tfcore / PyTorch training samples/s (median of $rounds rounds x $steps steps):$headline"
