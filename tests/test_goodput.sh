#!/bin/sh
# Statistical efficiency and goodput end to end (#19, docs/PARALLEL.md
# "Statistical efficiency and goodput"): CPU workers, data-synthetic, a small
# BERT held fixed (learning_rate 0, so every step samples the same gradient
# distribution and the true noise scale is one number):
#  - one worker without accumulation has no estimate: null with its reason;
#  - the same rows give the same estimate whichever way the small gradients
#    are taken: DDP's buckets (per-rank norms as each bucket's all-reduce
#    starts), ZeRO-2 (the whole buffer before the reduce-scatter) and a
#    pipeline of 2 stages x 2 replicas (each stage's range before the
#    per-stage all-reduce, summed over the stages); one worker's first
#    micro-batch of an accumulation and a pipeline's first backward;
#  - the known direction: at a global batch below the noise scale the
#    efficiency is near 1, at one far past it low, the two runs' tr(Sigma)
#    agree, and goodput = samples/s x efficiency;
#  - `tfcore report` shows the numbers beside samples/s, and the reason;
#  - the statistics section's keys are checked like any other.
# Skips (77) without the mpi comm plugin (no Open MPI).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader" # one machine: no network transports probed
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
if ! "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +mpi "; then
    echo "test_goodput: SKIP: comm plugin mpi not built (no Open MPI)"
    exit 77
fi
command -v python3 >/dev/null 2>&1 || { echo "test_goodput: SKIP: no python3"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-goodput-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# cfg NAME PER_DEVICE ACCUM STEPS [SECTIONS]: a 2-layer BERT of width 32 whose
# init (initializer_range 0.14) gives a noise scale of some tens of samples;
# $STATS: more keys of the statistics section
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          num_hidden_layers = 2; hidden_size = 32; num_attention_heads = 2; intermediate_size = 64;
          initializer_range = 0.14; max_position_embeddings = 64;
          hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 4096; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = $4; per_device_train_batch_size = $2;
             gradient_accumulation_steps = $3; learning_rate = 0.0; warmup_steps = 0;
             logging_steps = 1000; save_strategy = "no"; seed = 11; };
statistics = { smoothing = 0.999;${STATS:-} };
${5:-}
CFG
}
mpi() { printf 'comm = { plugin = "mpi"; world_size = %s;%s };' "$1" "${2:-}"; }
train() { # NAME
    if "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1; then ok; else
        bad "$1: tfcore exited $?"; tail -n 20 "$tmp/$1.out"; return 1; fi
}
# stat NAME KEY: tfcore.statistics.KEY of the run ("null" when null)
stat() {
    python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["tfcore"]["statistics"].get(sys.argv[2]); print("null" if v is None else v)' \
        "$tmp/$1/results.json" "$2"
}
# check DESCRIPTION PYTHON-EXPRESSION (over a = stat of run A's ..., see below)
check() {
    if python3 -c "import sys; sys.exit(0 if ($2) else 1)"; then ok; else bad "$1 ($2)"; fi
}
same() { # A B KEY: the runs' estimates agree within 1e-5 relative
    x=$(stat "$1" "$3") y=$(stat "$2" "$3")
    if [ "$x" != null ] && [ "$y" != null ]; then
        check "$2's $3 equals $1's" "abs($x - $y) <= 1e-5 * abs($x)"
    else bad "$3: $1 has $x, $2 has $y"; fi
}

# --- 1. one worker without accumulation: no estimate, and why ----------------
cfg one 16 1 3 && train one
for k in noise_scale statistical_efficiency goodput; do
    [ "$(stat one $k)" = null ] && ok || bad "one worker, no accumulation: $k is $(stat one $k), not null"
done
stat one reason | grep -q "single batch size" && ok || bad "one worker: no reason given ($(stat one reason))"
[ "$(stat one estimated_from)" = none ] && ok || bad "one worker: estimated_from $(stat one estimated_from)"

# --- 2. the same rows, the same estimate ------------------------------------
STEPS=20
cfg ddp 32 1 $STEPS "$(mpi 2)" && train ddp
cfg zero2 32 1 $STEPS "$(mpi 2 ' zero_stage = 2;')" && train zero2
cfg pipe22 32 1 $STEPS "$(mpi 4) pipeline = { stages = 2; micro_batches = 2; };" && train pipe22
[ "$(stat ddp estimated_from)" = "ranks before the reduction" ] && ok || bad "ddp: estimated_from $(stat ddp estimated_from)"
for k in noise_scale grad_sq trace_sigma; do same ddp zero2 $k; same ddp pipe22 $k; done
# ZeRO-2 with accumulation reduces each micro-batch as backward makes it: no
# rank holds its step's gradient whole, so no estimate, and the reason says so
cfg zero2acc 16 2 3 "$(mpi 2 ' zero_stage = 2;')" && train zero2acc
[ "$(stat zero2acc noise_scale)" = null ] && ok || bad "zero2 with accumulation: noise_scale $(stat zero2acc noise_scale)"
stat zero2acc reason | grep -q "ZeRO-2 with gradient accumulation" && ok || bad "zero2acc: reason $(stat zero2acc reason)"
cfg accum 16 2 $STEPS && train accum
cfg pipe2 32 1 $STEPS "$(mpi 2) pipeline = { stages = 2; micro_batches = 2; };" && train pipe2
[ "$(stat accum estimated_from)" = "first micro-batch" ] && ok || bad "accum: estimated_from $(stat accum estimated_from)"
check "accum: small batch 16 of 32" "$(stat accum small_batch) == 16 and $(stat accum big_batch) == 32"
for k in noise_scale grad_sq trace_sigma; do same accum pipe2 $k; done
cfg dp 16 1 $STEPS "comm = { plugin = \"dp-master\"; world_size = 2; };" && train dp
check "dp-master: an estimate" "'$(stat dp noise_scale)' != 'null' and $(stat dp steps_estimated) == $STEPS"

# --- 3. the known direction --------------------------------------------------
# global batch 16 (2 x 8) against the default reference (8, one worker's
# batch), then 512 (2 x 256), far past the noise scale
cfg small 8 1 400 "$(mpi 2)" && train small
STATS=" reference_batch_size = 8;" cfg big 256 1 40 "$(mpi 2)" && train big
e_small=$(stat small statistical_efficiency) e_big=$(stat big statistical_efficiency)
check "small batch: efficiency near 1 (got $e_small)" "'$e_small' != 'null' and 0.7 <= $e_small <= 1"
check "big batch: efficiency low (got $e_big)" "'$e_big' != 'null' and $e_big <= 0.3"
check "reference batch 8" "$(stat small reference_batch_size) == 8 and $(stat big reference_batch_size) == 8"
check "global batches 16 and 512" "$(stat small batch_size) == 16 and $(stat big batch_size) == 512"
check "tr(Sigma) agrees across the batch sizes ($(stat small trace_sigma), $(stat big trace_sigma))" \
    "1 / 1.5 <= $(stat small trace_sigma) / $(stat big trace_sigma) <= 1.5"
for r in small big; do
    sps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_samples_per_second"])' "$tmp/$r/results.json")
    check "$r: goodput = samples/s x efficiency" "abs($(stat $r goodput) - $sps * $(stat $r statistical_efficiency)) <= 1e-6 * $sps"
done
# E(M) = (phi + M0) / (phi + M) from the run's own phi
check "big: E from phi" "abs($e_big - ($(stat big noise_scale) + 8) / ($(stat big noise_scale) + 512)) <= 1e-9"

# --- 4. tfcore report --------------------------------------------------------
if "$tfcore" report "$tmp/one" "$tmp/small" "$tmp/big" >"$tmp/report.md" 2>&1; then ok; else bad "report exited $?"; fi
grep -q "| run   | global batch | noise scale | statistical efficiency | samples/s | *goodput |" "$tmp/report.md" && ok ||
    { bad "report: no statistics table"; cat "$tmp/report.md"; }
grep -Eq "^\| big +\| +512 \|" "$tmp/report.md" && ok || bad "report: no row for big"
grep -q "^one: no statistical efficiency: one worker without gradient accumulation" "$tmp/report.md" && ok ||
    bad "report: one's reason missing"

# --- 5. the statistics section's keys -----------------------------------------
for kv in "reference_batch_size = 0" "reference_batch_size = \"big\"" "smoothing = 1.0" "smothing = 0.5"; do
    STATS=" $kv;" cfg keys 8 1 1
    sed -i "s/smoothing = 0.999; smoothing/smoothing/" "$tmp/keys.cfg"
    "$tfcore" -c "$tmp/keys.cfg" --dry-run >"$tmp/keys.out" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && [ "$(wc -l <"$tmp/keys.out")" -eq 1 ] && grep -q "statistics" "$tmp/keys.out"; then ok; else
        bad "statistics { $kv }: exit $rc, $(cat "$tmp/keys.out")"; fi
done
STATS=" reference_batch_size = 32;" cfg keys 8 1 1
"$tfcore" -c "$tmp/keys.cfg" --dry-run >"$tmp/keys.out" 2>&1 && ok || bad "reference_batch_size = 32 refused: $(cat "$tmp/keys.out")"

echo "test_goodput: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
