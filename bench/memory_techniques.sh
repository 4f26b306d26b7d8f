#!/usr/bin/env bash
# The memory techniques of Hugging Face's "Efficient Training on a Single GPU"
# guide, side by side on the CPU: full training steps (forward, backward,
# optimizer, fp32, random ids) of one model at one batch x seq under
#   baseline      AdamW (optim = "adamw_torch", the default)
#   checkpointing training.gradient_checkpointing = true, AdamW
#   adafactor     optim = "adafactor" (transformers' Adafactor as the Trainer makes it)
#   both          gradient checkpointing + Adafactor
# with `tfcore bench --json`: samples/s, peak RSS, peak backend memory and the
# memory by category (weights, gradients, optimizer states, activations,
# temporaries); and, with comm-mpi built, the same global batch on 2 ranks
# (mpirun, batch/2 each) through `tfcore train` (rank 0's results.json:
# train_samples_per_second over the warm-up and timed steps together, rank
# 0's peak RSS and memory by category):
#   ddp-x2        plain DDP (comm mpi, zero_stage = 0), the reference of the two below
#   zero1-x2      comm.zero_stage = 1 (AdamW moments sharded)
#   zero2-x2      comm.zero_stage = 2 (and gradients reduced to their owners bucket by bucket
#                 during backward, the rest of the buffer given back: gradients / 2 + buckets)
# (the x2 runs with comm.bucket_mb = BUCKET_MB, default 4), ROUNDS rounds, each running the four once (the order rotated
# every round), medians; min-max of samples/s in brackets. Step time vs the
# baseline is the median over rounds of the ratio within a round, which a
# machine whose load changes between rounds skews less than a ratio of medians.
#   bench/memory_techniques.sh [ROUNDS] [STEPS] [MODEL] [BATCH] [SEQ]
#   (default 3 rounds of 3 timed steps after 1 warm-up, MiniLM-L6, 16 x 256)
# MODEL: MiniLM-L6 (L6 H384 A12 I1536) or bert-mini (L4 H256 A4 I1024), random
# weights, vocab 30522. Run from the build tree's top (where core/tfcore is).
# MPI=0 leaves the x2 runs out.
set -euo pipefail
build="${BUILD:-$PWD}"
tfcore="$build/core/tfcore"
[ -x "$tfcore" ] || { echo "memory_techniques.sh: run from the build tree (no $tfcore)" >&2; exit 2; }
rounds="${1:-3}"
steps="${2:-3}"
model="${3:-MiniLM-L6}"
batch="${4:-16}"
seq="${5:-256}"
warmup=1
# the x2 runs' comm.bucket_mb: ZeRO-2 keeps its shard and the buckets in flight resident,
# so a bucket well below the model's size shows the division (DDP and ZeRO-1 use the same)
bucket_mb="${BUCKET_MB:-4}"
case "$model" in
    MiniLM-L6) shape="num_hidden_layers = 6; hidden_size = 384; num_attention_heads = 12; intermediate_size = 1536;"
               desc="MiniLM-L6 (L6 H384 A12 I1536)" ;;
    bert-mini) shape="num_hidden_layers = 4; hidden_size = 256; num_attention_heads = 4; intermediate_size = 1024;"
               desc="bert-mini (L4 H256 A4 I1024)" ;;
    *) echo "memory_techniques.sh: MODEL is MiniLM-L6 or bert-mini, not '$model'" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

runs=(baseline checkpointing adafactor both)
if [ "${MPI:-1}" != 0 ] && "$tfcore" plugins 2>/dev/null | grep -Eq '^ *comm +mpi '; then
    [ $((batch % 2)) -eq 0 ] || { echo "memory_techniques.sh: the x2 runs need an even BATCH" >&2; exit 2; }
    runs+=(ddp-x2 zero1-x2 zero2-x2)
    : "${OMPI_MCA_btl:=self,vader}" # one machine: no network transports probed
    export OMPI_MCA_btl
fi
for name in "${runs[@]}"; do
    extra="" comm="" per_device=$batch
    case "$name" in
        checkpointing) extra='gradient_checkpointing = true;' ;;
        adafactor) extra='optim = "adafactor";' ;;
        both) extra='gradient_checkpointing = true; optim = "adafactor";' ;;
        *-x2) per_device=$((batch / 2))
              stage=0; case "$name" in zero1*) stage=1 ;; zero2*) stage=2 ;; esac
              comm="comm = { plugin = \"mpi\"; world_size = 2; zero_stage = $stage; bucket_mb = $bucket_mb; };"
              extra="output_dir = \"$tmp/$name.run\"; overwrite_output_dir = true; max_steps = $((steps + warmup));
                     save_strategy = \"no\"; logging_steps = 1000;" ;;
    esac
    cat >"$tmp/$name.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          vocab_size = 30522; max_position_embeddings = 512; $shape };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = $seq;
         num_examples = $((batch * (steps + warmup) * 2)); eval_examples = 0; learnable = false; };
backend = { plugin = "cpu"; };
training = { per_device_train_batch_size = $per_device; learning_rate = 5e-5; $extra };
$comm
CFG
done

keys=(samples_per_second peak_rss_mb peak_backend_memory_mb weights gradients optimizer_states activations temporaries)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# the last line of `tfcore bench --json` -> one file per key (MiB for the categories)
record() {
    python3 - "$1" "$2" "${keys[@]}" <<'PY'
import json, sys
out, prefix, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
if out.endswith(".json"):  # a training run's results.json (rank 0)
    j = json.load(open(out))
    r = dict(j["tfcore"], samples_per_second=j["train_samples_per_second"])
else:  # the last line of `tfcore bench --json`
    r = json.loads(open(out).read().strip().splitlines()[-1])
mem = r.get("memory_bytes")
if mem is None:
    sys.exit("memory_techniques.sh: tfcore bench reported no memory_bytes")
for k in keys:
    v = r[k] if k in r else (mem[k] / 1048576.0 if k in mem else float("nan"))
    with open(f"{prefix}.{k}", "a") as f:
        f.write(f"{v}\n")
PY
}

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "date:    $(date -u +%Y-%m-%d)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-min load average at the start)"
echo "model:   $desc, random weights, vocab 30522, batch $batch x seq $seq, fp32, $warmup warm-up + $steps timed steps x $rounds rounds"
n=${#runs[@]}
for ((k = 0; k < rounds; k++)); do
    for ((j = 0; j < n; j++)); do
        name=${runs[$(((j + k) % n))]}
        case "$name" in
        *-x2)
            "$tfcore" -c "$tmp/$name.cfg" >"$tmp/out" 2>"$tmp/err" ||
                { echo "memory_techniques.sh: $name failed:" >&2; tail -n 20 "$tmp/err" "$tmp/out" >&2; exit 1; }
            record "$tmp/$name.run/results.json" "$tmp/$name" ;;
        *)
            "$tfcore" bench -c "$tmp/$name.cfg" --steps "$steps" --warmup "$warmup" --json >"$tmp/out" 2>"$tmp/err" ||
                { echo "memory_techniques.sh: $name failed:" >&2; tail -n 20 "$tmp/err" "$tmp/out" >&2; exit 1; }
            record "$tmp/out" "$tmp/$name" ;;
        esac
    done
done
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (at the end)"

printf '\n| run | samples/s | (min-max) | step time vs baseline | peak RSS MiB | peak backend MiB | weights MiB | gradients MiB | optimizer states MiB | activations MiB | temporaries MiB |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
for name in "${runs[@]}"; do
    for key in "${keys[@]}"; do eval "m_$key=\$(median <\"$tmp/$name.$key\")"; done
    [ "$name" = baseline ] && { b_opt=$m_optimizer_states; b_act=$m_activations; }
    ratio=$(paste "$tmp/baseline.samples_per_second" "$tmp/$name.samples_per_second" | awk '{print $1 / $2}' | median)
    range=$(sort -g "$tmp/$name.samples_per_second" | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
    printf '| %s | %.2f | %s | %.2fx | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f |\n' "$name" \
        "$m_samples_per_second" "$range" "$ratio" \
        "$m_peak_rss_mb" "$m_peak_backend_memory_mb" "$m_weights" "$m_gradients" "$m_optimizer_states" \
        "$m_activations" "$m_temporaries"
    eval "r_${name//-/_}=$ratio; o_${name//-/_}=$m_optimizer_states; a_${name//-/_}=$m_activations"
    eval "g_${name//-/_}=$m_gradients; p_${name//-/_}=$m_peak_rss_mb"
done
echo
awk -v t="$r_checkpointing" -v ba="$b_act" -v ca="$a_checkpointing" -v bo="$b_opt" -v ao="$o_adafactor" \
    'BEGIN {printf "headline: checkpointing %.2fx step time, activations /%.1f; adafactor optimizer states /%.0f (medians of '"$rounds"' rounds)\n", t, ba / ca, bo / ao}'
if [ -n "${o_zero1_x2:-}" ]; then
    awk -v d="$o_ddp_x2" -v z1="$o_zero1_x2" -v z2="$o_zero2_x2" \
        'BEGIN {printf "headline: rank 0 optimizer states: DDP x2 %.1f MiB, ZeRO-1 x2 %.1f MiB (/%.2f), ZeRO-2 x2 %.1f MiB (/%.2f)\n", d, z1, d / z1, z2, d / z2}'
    awk -v d="$g_ddp_x2" -v z1="$g_zero1_x2" -v z2="$g_zero2_x2" -v pd="$p_ddp_x2" -v p1="$p_zero1_x2" -v p2="$p_zero2_x2" \
        -v b="$bucket_mb" 'BEGIN {printf "headline: rank 0 gradients resident: DDP x2 %.1f MiB, ZeRO-1 x2 %.1f MiB, ZeRO-2 x2 %.1f MiB (/%.2f; bucket_mb %s); peak RSS DDP %.0f, ZeRO-1 %.0f, ZeRO-2 %.0f MiB (ZeRO-2 - ZeRO-1: %.0f MiB)\n", d, z1, z2, d / z2, b, pd, p1, p2, p2 - p1}'
fi
