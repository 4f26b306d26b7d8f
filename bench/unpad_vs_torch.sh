#!/usr/bin/env bash
# Unpadded execution (#16.1): CPU training steps (forward, backward, AdamW,
# fp32, dropout 0.1) on rows of ragged length, seq_len 512 with lengths
# uniform in [MIN_LEN, 512] (data-synthetic's min_length), batch 16, on
# bert-mini (L4 H256 A4 I1024) and MiniLM-L6 (L6 H384 A12 I1536), random init:
#   tfcore padded    every row padded to 512 (data.padding "max_length", model.unpad false)
#   tfcore longest   each batch padded to its longest row (padding "longest", unpad false)
#   tfcore unpadded  padding "longest", model.unpad true (the default): real tokens only
#   torch            PyTorch + transformers, the Trainer's LengthGroupedSampler
#                    (group_by_length) and dynamic padding (bench/torch_varlen_train_step.py)
# interleaved ROUNDS times in one run; samples/s are the mean over STEPS
# timed steps (tfcore bench's samples_per_second_mean: ragged batches make
# the median step a poor mean), and the process CPU seconds per sample over
# the same steps (all threads: on a loaded machine wall time measures the
# share of the cores a run got, CPU time the work it did); medians over the
# rounds reported.
# EVAL=1 times evaluation batches instead (forward, loss, logits to the host;
# `tfcore bench --eval`, torch_varlen_train_step.py --eval) of EVAL_BATCH rows
# (default 32), dropout off, and adds a second peer column, "torch padded":
# every row padded to 512 in the rows' order, what the Trainer evaluates with
# the course's padding = "max_length"; "torch grouped" is then the Trainer's
# evaluation with group_by_length and dynamic padding.
#   bench/unpad_vs_torch.sh [ROUNDS] [STEPS] [MIN_LEN]   (default 3 rounds of 8 steps, 64;
#   WARMUP warm-up steps before each timing, default 2; THREADS: threads of
#   every run, default all cores: THREADS=1 measures the work on a loaded
#   machine, where two threads' CPU time counts the OpenMP spinning while a
#   partner thread is descheduled; TFCORE_BENCH_MODELS="MiniLM-L6": only the
#   models named)
# Run from the build tree's top (where core/tfcore is). The peer's Python is
# $TFCORE_PYTHON (torch and transformers; the Trainer's sampler needs
# transformers >= 4).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "unpad_vs_torch.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
rounds="${1:-3}"
steps="${2:-8}"
minlen="${3:-64}"
warmup="${WARMUP:-2}"
threads="${THREADS:-0}" # 0: backend-cpu's default (every core), torch's os.cpu_count()
export THREADS="$threads"
evaluate="${EVAL:-0}"
B=16
[ "$evaluate" = 1 ] && B="${EVAL_BATCH:-32}"
S=512
# the peer's runs: name and torch_varlen_train_step.py's options
peers=("torch")
peer_args=("")
if [ "$evaluate" = 1 ]; then
    peers=("torch" "torchmax")
    peer_args=("--eval" "--eval --pad-to-max")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

models=("bert-mini 4 256 4 1024" "MiniLM-L6 6 384 12 1536")
if [ -n "${TFCORE_BENCH_MODELS:-}" ]; then # e.g. TFCORE_BENCH_MODELS=MiniLM-L6: only those
    kept=()
    for m in "${models[@]}"; do case " $TFCORE_BENCH_MODELS " in *" ${m%% *} "*) kept+=("$m") ;; esac; done
    models=("${kept[@]}")
fi
variants=("padded max_length false" "longest longest false" "unpadded longest true")
for m in "${models[@]}"; do
    set -- $m
    for v in "${variants[@]}"; do
        read -r vn padding unpad <<<"$v"
        cat >"$tmp/$1.$vn.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          num_hidden_layers = $2; hidden_size = $3; num_attention_heads = $4; intermediate_size = $5;
          unpad = $unpad; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $S;
         min_length = $minlen; padding = "$padding"; num_examples = 4096;
         eval_examples = $([ "$evaluate" = 1 ] && echo 4096 || echo 0); learnable = false; };
backend = { plugin = "cpu"; threads = $threads; };
training = { per_device_train_batch_size = $B; per_device_eval_batch_size = $B; learning_rate = 5e-5; };
CFG
    done
done

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "peer:    $("$py" -c 'import torch, transformers; print("torch", torch.__version__, "+ transformers", transformers.__version__)')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-minute load averages at the start)"
echo "what:    $([ "$evaluate" = 1 ] && echo "evaluation batches (forward, loss, logits to the host)" || echo "training steps (forward, backward, AdamW)")"
echo "rows:    batch $B, seq_len $S, lengths uniform in [$minlen, $S]; $rounds rounds x $steps steps after $warmup warm-up"
echo "threads: $([ "$threads" = 0 ] && echo "every core" || echo "$threads")"
echo
row() { # NAME METRIC(sps|cpu) FORMAT: one table row from the rounds' medians
    local name=$1 k=$2 v x u cells="" ratios="" head=""
    u=$(median <"$tmp/unpadded.$k.$name")
    for v in padded longest unpadded "${peers[@]}"; do
        x=$(median <"$tmp/$v.$k.$name")
        cells+=$(printf " $3 |" "$x")
        [ "$v" = unpadded ] && continue
        if [ "$k" = sps ]; then x=$(awk -v a="$u" -v b="$x" 'BEGIN {printf "%.2f", a / b}') # unpadded's samples/s over the other's
        else x=$(awk -v a="$u" -v b="$x" 'BEGIN {printf "%.2f", b / a}'); fi               # the other's CPU s/sample over unpadded's
        ratios+=$(printf " %16sx |" "$x")
        head+=", unpadded/$(title "$v") ${x}x"
    done
    printf "| %-9s |%s%s\n" "$name" "$cells" "$ratios"
    echo "$name $k${head#,}" >>"$tmp/headline"
}
columns() { # the table's header: METRIC(sps|cpu)
    local v t line="| model     |" sep="|-----------|"
    for v in padded longest unpadded "${peers[@]}"; do
        line+=$(printf " %-13s |" "$(title "$v")")
        sep+="---------------|"
    done
    for v in padded longest "${peers[@]}"; do
        t=$(title "$v")
        [ "$v" = padded ] && t=padded
        if [ "$1" = sps ]; then line+=$(printf " %-17s |" "unpadded/$t"); else line+=$(printf " %-17s |" "$t/unpadded"); fi
        sep+="-------------------|"
    done
    echo "$line"
    echo "$sep"
}
title() { # a run's column title
    case "$1" in padded) echo "padded 512" ;; torch) echo "torch grouped" ;; torchmax) echo "torch padded" ;; *) echo "$1" ;; esac
}
for m in "${models[@]}"; do
    set -- $m
    name=$1
    for k in padded longest unpadded "${peers[@]}"; do : >"$tmp/$k.sps.$name"; : >"$tmp/$k.cpu.$name"; done
    for r in $(seq "$rounds"); do
        for v in padded longest unpadded; do
            out=$("$tfcore" bench -c "$tmp/$name.$v.cfg" --steps "$steps" --warmup "$warmup" --json \
                $([ "$evaluate" = 1 ] && echo --eval) 2>/dev/null)
            echo "$out" | field samples_per_second_mean >>"$tmp/$v.sps.$name"
            echo "$out" | field cpu_seconds_per_sample >>"$tmp/$v.cpu.$name"
        done
        for i in "${!peers[@]}"; do
            # shellcheck disable=SC2086
            out=$("$py" "$src/bench/torch_varlen_train_step.py" "$2" "$3" "$4" "$5" $B $S "$minlen" "$steps" "$warmup" \
                ${peer_args[$i]} 2>/dev/null)
            echo "$out" | field samples_per_second >>"$tmp/${peers[$i]}.sps.$name"
            echo "$out" | field cpu_seconds_per_sample >>"$tmp/${peers[$i]}.cpu.$name"
        done
    done
    for k in padded longest unpadded "${peers[@]}"; do
        echo "  $name $k samples/s: $(tr '\n' ' ' <"$tmp/$k.sps.$name")cpu s/sample: $(tr '\n' ' ' <"$tmp/$k.cpu.$name")"
    done >&2
done
echo "samples/s (wall, mean over the steps; medians of $rounds rounds) and speedup of unpadded:"
columns sps
for m in "${models[@]}"; do set -- $m; row "$1" sps "%13.2f"; done
echo
echo "CPU seconds per sample (process CPU time, all threads; medians of $rounds rounds) and the other's over unpadded's:"
columns cpu
for m in "${models[@]}"; do set -- $m; row "$1" cpu "%13.4f"; done
echo
sed 's/^/headline: /' "$tmp/headline"
