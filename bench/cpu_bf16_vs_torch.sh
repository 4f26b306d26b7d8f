#!/usr/bin/env bash
# precision bf16 on the CPU: tfcore bf16 vs tfcore fp32 vs PyTorch (fp32, and
# bf16 under torch.autocast("cpu", dtype=torch.bfloat16)), training steps
# (batch 16 x seq 128, forward + backward + AdamW, as bench/cpu_vs_torch.sh)
# and evaluation batches (batch 32 x seq 256, forward + loss + logits to the
# host, as bench/eval_vs_torch.sh), random ids, bert-mini (L4 H256 A4 I1024)
# and MiniLM-L6 (L6 H384 A12 I1536). The eight runs of a model alternate
# within each round, ROUNDS rounds, medians reported.
#   bench/cpu_bf16_vs_torch.sh [ROUNDS] [TRAIN_STEPS] [EVAL_BATCHES]   (default 3 5 4)
# Run from the build tree's top (where core/tfcore is). The peer is the Python
# in $TFCORE_PYTHON (or scripts/setup-python.sh's venv); its torch and
# transformers versions are printed. TFCORE_BENCH_MODELS="bert-mini": only
# the models named. Needs backend-cpu with bf16 GEMMs (oneDNN, AVX512_BF16).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "cpu_bf16_vs_torch.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
rounds="${1:-3}"
tsteps="${2:-5}"
esteps="${3:-4}"
warmup=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

models=("bert-mini 4 256 4 1024" "MiniLM-L6 6 384 12 1536")
if [ -n "${TFCORE_BENCH_MODELS:-}" ]; then
    kept=()
    for m in "${models[@]}"; do case " $TFCORE_BENCH_MODELS " in *" ${m%% *} "*) kept+=("$m") ;; esac; done
    models=("${kept[@]}")
fi
for m in "${models[@]}"; do
    set -- $m
    for shape in "train 16 128" "eval 32 256"; do
        set -- $m
        read -r kind B S <<<"$shape"
        cat >"$tmp/$1.$kind.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          num_hidden_layers = $2; hidden_size = $3; num_attention_heads = $4; intermediate_size = $5; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $S;
         num_examples = 4096; eval_examples = $((B * 4)); learnable = false; };
backend = { plugin = "cpu"; };
training = { per_device_train_batch_size = $B; per_device_eval_batch_size = $B; learning_rate = 5e-5; };
CFG
    done
done
if ! "$tfcore" train -c "$tmp/${models[0]%% *}.train.cfg" -o precision.plugin=bf16 --dry-run >/dev/null 2>"$tmp/why"; then
    echo "cpu_bf16_vs_torch.sh: $(cat "$tmp/why")" >&2
    exit 1
fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

peer=$("$py" "$src/bench/torch_eval_step.py" 1 64 1 64 2 16 1 0 2>/dev/null)
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "tfcore:  $("$tfcore" bench -c "$tmp/${models[0]%% *}.train.cfg" -o precision.plugin=bf16 --steps 1 --warmup 0 2>&1 | sed -n 's/.*\(bf16 GEMMs: .*\)$/\1/p' | head -1)"
echo "peer:    torch $(echo "$peer" | field torch), transformers $(echo "$peer" | field transformers), attention $(echo "$peer" | field attention); bf16 = torch.autocast(\"cpu\", bfloat16)"
echo "shapes:  train batch 16 x seq 128 ($tsteps steps after $warmup warm-up), eval batch 32 x seq 256 ($esteps batches after $warmup), $rounds rounds, medians, samples/s"
echo
printf '| %-9s | %-5s | %-11s | %-11s | %-11s | %-11s | %-10s | %-12s | %-12s |\n' model phase "tfcore fp32" "tfcore bf16" "torch fp32" "torch bf16" "bf16/fp32" "vs torch fp32" "vs torch bf16"
printf '|%s|\n' "-----------|-------|-------------|-------------|-------------|-------------|------------|--------------|--------------"
for m in "${models[@]}"; do
    set -- $m
    name=$1
    for kind in train eval; do for w in t32 t16 p32 p16; do : >"$tmp/$name.$kind.$w"; done; done
    for r in $(seq "$rounds"); do
        for kind in train eval; do
            if [ "$kind" = train ]; then B=16 S=128 n=$tsteps flag= script=torch_train_step.py
            else B=32 S=256 n=$esteps flag=--eval script=torch_eval_step.py; fi
            for p in fp32 bf16; do
                out=$("$tfcore" bench -c "$tmp/$name.$kind.cfg" $flag -o precision.plugin=$p --steps "$n" --warmup "$warmup" --json 2>/dev/null)
                echo "$out" | field samples_per_second >>"$tmp/$name.$kind.t${p//[a-z]/}"
                out=$("$py" "$src/bench/$script" "$2" "$3" "$4" "$5" $B $S "$n" "$warmup" $p 2>/dev/null)
                echo "$out" | field samples_per_second >>"$tmp/$name.$kind.p${p//[a-z]/}"
            done
        done
    done
    for kind in train eval; do
        t32=$(median <"$tmp/$name.$kind.t32"); t16=$(median <"$tmp/$name.$kind.t16")
        p32=$(median <"$tmp/$name.$kind.p32"); p16=$(median <"$tmp/$name.$kind.p16")
        printf '| %-9s | %-5s | %11.2f | %11.2f | %11.2f | %11.2f | %9sx | %11sx | %11sx |\n' "$name" "$kind" \
            "$t32" "$t16" "$p32" "$p16" "$(ratio "$t16" "$t32")" "$(ratio "$t16" "$p32")" "$(ratio "$t16" "$p16")"
    done
done
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
