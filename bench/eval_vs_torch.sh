#!/usr/bin/env bash
# tfcore vs PyTorch, evaluation batches on the CPU (forward only, fp32, the
# loss and the logits to the host, as Trainer.evaluate): batch 32 x seq 256,
# random ids, bert-mini (L4 H256 A4 I1024) and MiniLM-L6 (L6 H384 A12 I1536),
# side by side in one run, ROUNDS times alternating, medians reported.
#   bench/eval_vs_torch.sh [ROUNDS] [STEPS]      (default 5 rounds of 6 batches)
# Run from the build tree's top (where core/tfcore is). The peer is the Python
# in $TFCORE_PYTHON (or scripts/setup-python.sh's venv); its torch and
# transformers versions and attention implementation are printed.
# TFCORE_BENCH_BASELINE=DIR: each round also runs tfcore with the plugins in
# DIR found first (another build of backend-cpu / model-bert: before vs after,
# interleaved in the same run); the table gains a "baseline" column.
# TFCORE_BENCH_MODELS="MiniLM-L6": only the models named.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "eval_vs_torch.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
rounds="${1:-5}"
steps="${2:-6}"
warmup=1
B=32
S=256
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

models=("bert-mini 4 256 4 1024" "MiniLM-L6 6 384 12 1536")
if [ -n "${TFCORE_BENCH_MODELS:-}" ]; then # e.g. TFCORE_BENCH_MODELS=MiniLM-L6: only those
    kept=()
    for m in "${models[@]}"; do case " $TFCORE_BENCH_MODELS " in *" ${m%% *} "*) kept+=("$m") ;; esac; done
    models=("${kept[@]}")
fi
for m in "${models[@]}"; do
    set -- $m
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          num_hidden_layers = $2; hidden_size = $3; num_attention_heads = $4; intermediate_size = $5; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $S;
         num_examples = $B; eval_examples = $((B * 4)); learnable = false; };
backend = { plugin = "cpu"; };
training = { per_device_train_batch_size = 8; per_device_eval_batch_size = $B; };
CFG
done

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

peer=$("$py" "$src/bench/torch_eval_step.py" 1 64 1 64 2 16 1 0 2>/dev/null)
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date:    $(date -u +%Y-%m-%d)"
echo "peer:    torch $(echo "$peer" | field torch), transformers $(echo "$peer" | field transformers), attention $(echo "$peer" | field attention)"
echo "shape:   batch $B x seq $S, fp32, $rounds rounds x $steps batches after $warmup warm-up, medians"
echo
printf '| %-9s | %-14s | %-14s | %-7s | %-13s | %-12s | %-12s |' model "tfcore samp/s" "torch samp/s" ratio "tfcore GF/s" "tfcore RSS" "torch RSS"
[ -n "${TFCORE_BENCH_BASELINE:-}" ] && printf ' %-14s | %-7s |' "baseline samp/s" "ratio"
echo
printf '|%s|' "-----------|----------------|----------------|---------|---------------|--------------|--------------"
[ -n "${TFCORE_BENCH_BASELINE:-}" ] && printf '%s|' "----------------|---------"
echo
headline=""
for m in "${models[@]}"; do
    set -- $m
    name=$1
    : >"$tmp/t.$name"; : >"$tmp/p.$name"; : >"$tmp/g.$name"; : >"$tmp/tr.$name"; : >"$tmp/pr.$name"; : >"$tmp/b.$name"
    for r in $(seq "$rounds"); do
        if [ -n "${TFCORE_BENCH_BASELINE:-}" ]; then
            out=$(TFCORE_PLUGIN_PATH="$TFCORE_BENCH_BASELINE${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}" \
                  "$tfcore" bench -c "$tmp/$name.cfg" --eval --steps "$steps" --warmup "$warmup" --json 2>/dev/null)
            echo "$out" | field samples_per_second >>"$tmp/b.$name"
        fi
        out=$("$tfcore" bench -c "$tmp/$name.cfg" --eval --steps "$steps" --warmup "$warmup" --json 2>/dev/null)
        echo "$out" | field samples_per_second >>"$tmp/t.$name"
        echo "$out" | field matmul_gflops >>"$tmp/g.$name"
        echo "$out" | field peak_rss_mb >>"$tmp/tr.$name"
        out=$("$py" "$src/bench/torch_eval_step.py" "$2" "$3" "$4" "$5" $B $S "$steps" "$warmup" 2>/dev/null)
        echo "$out" | field samples_per_second >>"$tmp/p.$name"
        echo "$out" | field peak_rss_mb >>"$tmp/pr.$name"
    done
    t=$(median <"$tmp/t.$name"); p=$(median <"$tmp/p.$name"); g=$(median <"$tmp/g.$name")
    tr=$(median <"$tmp/tr.$name"); pr=$(median <"$tmp/pr.$name")
    ratio=$(awk -v a="$t" -v b="$p" 'BEGIN {printf "%.2f", a / b}')
    printf '| %-9s | %14.2f | %14.2f | %6sx | %13.1f | %9.0f MiB | %9.0f MiB |' "$name" "$t" "$p" "$ratio" "$g" "$tr" "$pr"
    if [ -n "${TFCORE_BENCH_BASELINE:-}" ]; then
        b=$(median <"$tmp/b.$name")
        printf ' %14.2f | %6sx |' "$b" "$(awk -v a="$b" -v p="$p" 'BEGIN {printf "%.2f", a / p}')"
    fi
    echo
    headline="$headline $name ${ratio}x"
done
echo
echo "headline: tfcore / PyTorch evaluation samples/s, batch $B x $S (median of $rounds rounds x $steps batches):$headline"
