#!/usr/bin/env bash
# tfcore vs PyTorch + transformers, full training steps on one NVIDIA GPU:
# bert-base (L12 H768 A12 I3072, random init), batch 16, seq 128 and 512, in
# fp32 / tf32 / fp16 / bf16, side by side in one run, ROUNDS times
# alternating, medians reported. Same work on both sides: random ids,
# forward, backward, clip to max_grad_norm 1.0, AdamW. tfcore runs
# `tfcore bench --json` on backend cuda; PyTorch runs
# bench/gpu_torch_train_step.py (SDPA attention, fused AdamW, autocast and
# GradScaler as Trainer sets them up).
#
#   bench/gpu_vs_torch.sh [ROUNDS] [STEPS]    (default 3 rounds of 20 steps)
#   SEQS="128" PRECISIONS="bf16 fp32" bench/gpu_vs_torch.sh 1 10
#       fewer configurations (default SEQS="128 512", PRECISIONS="fp32 tf32
#       fp16 bf16"): the default run takes more than 10 minutes, so a short
#       GPU window runs one round of a subset per call (scripts/gpu-run.sh)
#   bench/gpu_vs_torch.sh --dry               no GPU needed: print the configs,
#       check them with `tfcore --dry-run` (backend cpu, precision fp32 stand
#       in for the device), and run the torch side's --dry (model shape, one
#       CPU step of the same loop)
#
# Reports per config: samples/s, MFU = achieved FLOP/s / the GPU's dense
# peak for that precision (FLOPs from SPEC.md: 6*L*(4H^2 + 2HI) + 12*L*S*H
# per token, matmuls only, as `tfcore bench` counts them), peak device
# memory (tfcore: peak_backend_memory_mb; torch: max_memory_allocated), and
# the ratio; the device name from nvidia-smi. The last line is the headline.
# Without a GPU (or without a usable backend cuda) it stops with exit 2 and
# one line saying why (no device, or the plugin loader's reason for rejecting
# backend-cuda; tests/gpu_backend.sh). Run from the build tree's top (where core/tfcore is). Needs the
# reference Python ($TFCORE_PYTHON or scripts/setup-python.sh's venv) with a
# CUDA build of torch for the real run.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
me="gpu_vs_torch.sh"
die() { echo "$me: $*" >&2; exit 2; }

dry=0
if [ "${1:-}" = "--dry" ]; then dry=1; shift; fi
rounds="${1:-3}"
steps="${2:-20}"
warmup=3
case "$rounds$steps" in *[!0-9]*|"") die "ROUNDS and STEPS must be positive integers (usage: $me [--dry] [ROUNDS] [STEPS])" ;; esac
[ "$rounds" -ge 1 ] && [ "$steps" -ge 1 ] || die "ROUNDS and STEPS must be at least 1"
[ -x "$tfcore" ] || die "run from the build tree (no $tfcore)"
[ -x "$py" ] || die "no reference Python at $py (set TFCORE_PYTHON)"

L=12 H=768 A=12 I=3072 B=16
read -r -a seqs <<<"${SEQS:-128 512}"
read -r -a precisions <<<"${PRECISIONS:-fp32 tf32 fp16 bf16}"
[ "${#seqs[@]}" -ge 1 ] && [ "${#precisions[@]}" -ge 1 ] || die "SEQS and PRECISIONS must not be empty"
for s in "${seqs[@]}"; do
    case "$s" in ''|*[!0-9]*) die "SEQS: '$s' is not a sequence length" ;; esac
    [ "$s" -ge 1 ] && [ "$s" -le 512 ] || die "SEQS: $s is outside 1..512 (bert-base's positions)"
done
for p in "${precisions[@]}"; do
    case "$p" in fp32|tf32|fp16|bf16) ;; *) die "PRECISIONS: '$p' is not one of fp32 tf32 fp16 bf16" ;; esac
done

# Dense (no sparsity) peak TFLOP/s per precision, from NVIDIA's datasheets:
#   H100 SXM5 ("NVIDIA H100 Tensor Core GPU" datasheet): BF16/FP16 1979 and
#     TF32 989 TFLOPS are quoted with 2:4 sparsity, so 989 and 494.5 dense;
#     FP32 (no tensor cores) 66.9.
#   H100 PCIe (same datasheet): BF16/FP16 1513, TF32 756 with sparsity ->
#     756 and 378 dense; FP32 51.2.
#   H200 SXM ("NVIDIA H200 Tensor Core GPU" datasheet): the H100 SXM's
#     compute (1979 / 989 with sparsity, FP32 67), more and faster memory.
#   A100 SXM/PCIe ("NVIDIA A100 Tensor Core GPU" datasheet): BF16/FP16 312,
#     TF32 156 dense, FP32 19.5.
# Another GPU: set GPU_PEAK_TFLOPS="fp32=..,tf32=..,fp16=..,bf16=.." (dense).
peak_tflops() { # DEVICE_NAME PRECISION -> TFLOP/s, or empty when unknown
    local name=$1 prec=$2 table=""
    case "$name" in
        *H100*PCIe*) table="fp32=51.2,tf32=378,fp16=756,bf16=756" ;;
        *H100*|*H200*) table="fp32=66.9,tf32=494.5,fp16=989,bf16=989" ;;
        *A100*) table="fp32=19.5,tf32=156,fp16=312,bf16=312" ;;
    esac
    [ -n "${GPU_PEAK_TFLOPS:-}" ] && table="$GPU_PEAK_TFLOPS"
    echo "$table" | tr ',' '\n' | sed -n "s/^$prec=//p"
}

# Training FLOPs of one sample of length S (SPEC.md's formula, per token x S).
flops_per_sample() {
    awk -v L=$L -v H=$H -v I=$I -v S="$1" 'BEGIN {printf "%.6e", S * (6*L*(4*H*H + 2*H*I) + 12*L*S*H)}'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

write_cfg() { # SEQ PRECISION -> path
    local f="$tmp/bert-base-s$1-$2.cfg"
    cat >"$f" <<CFG
model = { plugin = "bert"; preset = "bert-base"; task = "classification"; num_labels = 2; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $1;
         num_examples = $((B * (steps + warmup))); eval_examples = 0; learnable = false; };
backend = { plugin = "cuda"; };
precision = { plugin = "$2"; };
training = { per_device_train_batch_size = $B; learning_rate = 5e-5; max_grad_norm = 1.0; };
CFG
    echo "$f"
}

if [ "$dry" -eq 1 ]; then
    echo "# $me --dry: what a GPU run would do (nothing is timed)"
    for s in "${seqs[@]}"; do
        for p in "${precisions[@]}"; do
            cfg=$(write_cfg "$s" "$p")
            echo "## bert-base batch $B seq $s $p: $(flops_per_sample "$s") training FLOPs per sample"
            sed 's/^/#   /' "$cfg"
            "$tfcore" train -c "$cfg" -o backend.plugin=cpu -o precision.plugin=fp32 --dry-run >"$tmp/dry.out" 2>&1 \
                || { cat "$tmp/dry.out" >&2; die "tfcore rejects the $s/$p config"; }
            "$py" "$src/bench/gpu_torch_train_step.py" --dry $L $H $A $I $B "$s" "$p" 2>"$tmp/py.err" \
                || { cat "$tmp/py.err" >&2; die "the torch side failed its --dry run ($s/$p)"; }
        done
    done
    for d in "NVIDIA H100 80GB HBM3" "NVIDIA H100 PCIe" "NVIDIA H200" "NVIDIA A100-SXM4-80GB"; do
        echo "# dense peak TFLOP/s on $d: fp32 $(peak_tflops "$d" fp32), tf32 $(peak_tflops "$d" tf32), fp16 $(peak_tflops "$d" fp16), bf16 $(peak_tflops "$d" bf16)"
    done
    echo "dry: ${#seqs[@]} lengths x ${#precisions[@]} precisions checked; no GPU figure measured"
    exit 0
fi

# --- a real run: a GPU, backend cuda usable, torch with CUDA ------------------
command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA GPU here (nvidia-smi not found); nothing measured"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$device" ] || die "no NVIDIA GPU here (nvidia-smi lists none); nothing measured"
# shellcheck source=tests/gpu_backend.sh
. "$src/tests/gpu_backend.sh"
why=$(gpu_cuda_why "$tfcore") || die "tfcore cannot run on the GPU: $why"
"$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
    || die "$py has no CUDA-enabled torch; nothing measured"

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
field() { "$py" -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

echo "device:  $device (driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1))"
echo "torch:   $("$py" -c 'import torch, transformers; print(torch.__version__, "CUDA", torch.version.cuda, "/ transformers", transformers.__version__)')"
echo "date:    $(date -u +%Y-%m-%d)"
echo "work:    bert-base L$L H$H A$A I$I, batch $B, AdamW, clip 1.0; median of $rounds rounds x $steps steps after $warmup warm-up"
echo
printf '| %-4s | %-4s | %-13s | %-12s | %-6s | %-10s | %-9s | %-14s | %-13s |\n' seq prec "tfcore samp/s" "torch samp/s" ratio "tfcore MFU" "torch MFU" "tfcore peak" "torch peak"
printf '|%s|\n' "------|------|---------------|--------------|--------|------------|-----------|----------------|--------------"
headline=""
failed=0
for s in "${seqs[@]}"; do
    for p in "${precisions[@]}"; do
        cfg=$(write_cfg "$s" "$p")
        k="s$s-$p"
        : >"$tmp/t.$k"; : >"$tmp/p.$k"; : >"$tmp/tm.$k"; : >"$tmp/pm.$k"
        err=""
        for r in $(seq "$rounds"); do
            if out=$("$tfcore" bench -c "$cfg" --steps "$steps" --warmup "$warmup" --json 2>"$tmp/err"); then
                echo "$out" | field samples_per_second >>"$tmp/t.$k"
                echo "$out" | field peak_backend_memory_mb >>"$tmp/tm.$k"
            else
                err="tfcore: $(tail -1 "$tmp/err")"
            fi
            if out=$("$py" "$src/bench/gpu_torch_train_step.py" $L $H $A $I $B "$s" "$steps" "$warmup" "$p" 2>"$tmp/err"); then
                echo "$out" | field samples_per_second >>"$tmp/p.$k"
                echo "$out" | field peak_memory_mb >>"$tmp/pm.$k"
            else
                err="torch: $(tail -1 "$tmp/err")"
            fi
        done
        if [ -n "$err" ] || [ ! -s "$tmp/t.$k" ] || [ ! -s "$tmp/p.$k" ]; then
            printf '| %4s | %-4s | failed: %s\n' "$s" "$p" "${err:-no result}"
            failed=1
            continue
        fi
        t=$(median <"$tmp/t.$k"); q=$(median <"$tmp/p.$k"); tm=$(median <"$tmp/tm.$k"); pm=$(median <"$tmp/pm.$k")
        fps=$(flops_per_sample "$s")
        peak=$(peak_tflops "$device" "$p")
        ratio=$(awk -v a="$t" -v b="$q" 'BEGIN {printf "%.2f", a / b}')
        mfu() { if [ -n "$peak" ]; then awk -v x="$1" -v f="$fps" -v pk="$peak" 'BEGIN {printf "%.1f%%", 100 * x * f / (pk * 1e12)}'; else echo "n/a"; fi; }
        tmfu=$(mfu "$t"); pmfu=$(mfu "$q")
        printf '| %4s | %-4s | %13.2f | %12.2f | %5sx | %10s | %9s | %10.0f MiB | %9.0f MiB |\n' "$s" "$p" "$t" "$q" "$ratio" "$tmfu" "$pmfu" "$tm" "$pm"
        headline="$headline s$s/$p ${ratio}x"
        [ "$s" = 512 ] && [ "$p" = bf16 ] && bf16_mfu="$tmfu"
    done
done
echo
[ -n "$(peak_tflops "$device" fp32)" ] || echo "note: no peak table entry for '$device' (set GPU_PEAK_TFLOPS): MFU not computed"
echo "headline: tfcore / PyTorch training samples/s on $device:$headline; tfcore bf16 seq 512 MFU ${bf16_mfu:-n/a}"
exit "$failed"
