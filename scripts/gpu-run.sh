#!/usr/bin/env bash
# The first GPU run in one call, from an unpacked GPU bundle
# (scripts/gpu-bundle.sh; docs/GPU.md):
#
#   bash BUNDLE/scripts/gpu-run.sh [OUT] [--only STEP,...] [--budget SECONDS]
#
# Runs the steps below in this order (most valuable evidence first), each
# under its own timeout and all within the budget (default 540 s, so one
# device command of at most 10 minutes ends with its files written). Each
# step appends one line to OUT/summary.txt as it ends — PASS, FAIL, TIMEOUT
# or "SKIPPED (no time left)" — with its duration and its log's last line;
# the logs (and each fine-tune's results.json / log.jsonl) are repacked into
# OUT/logs.tar.gz after every step, so a killed call still leaves evidence.
# OUT (default $OUT, else ./gpu-run-out) ends up with at most three files:
# summary.txt, logs.tar.gz and bench.md (the benchmark tables).
#
#   preflight        an NVIDIA GPU is visible and backend-cuda loads and is
#                    usable (else: stop at once, saying why)
#   env              GPU, driver, CUDA, torch, transformers; which CUDA and
#                    NCCL libraries backend-cuda and comm-nccl resolve
#   ops-cuda         tests/test_backend_cuda: every op vs backend-cpu
#   ops-fused        tests/test_backend_cuda_attention: attention, layernorm,
#                    cross-entropy vs backend-cpu
#   memcheck-train   compute-sanitizer memcheck on two training steps
#                    (bert-tiny, fp16, seq 32)
#   racecheck-attn   compute-sanitizer racecheck, then synccheck, on the
#                    attention cases of the fused suite (bf16: the MMA kernels)
#   gpu-ref          tests/test_gpu_ref.sh: logits, loss, gradients, AdamW
#                    steps against transformers
#   ft-fp32 ft-tf32 ft-fp16 ft-bf16
#                    the quickstart fine-tune (bert-mini, learnable data, 2
#                    epochs) per precision: the logged loss falls, accuracy
#                    is reached, fp16's loss scaler skips few steps and stays >= 1
#   ft-agree         every precision ends within 0.02 accuracy of fp32
#   comm-nccl        tests/test_comm_nccl.sh (world size 1 through each
#                    bootstrap; more GPUs: world size 2+)
#   bench-s128       bench/gpu_vs_torch.sh, one round, seq 128, 4 precisions
#   bench-s512       the same at seq 512, bf16 and fp16
#   sanitizer-suites tests/test_backend_cuda_sanitizer.sh (both suites,
#                    memcheck + racecheck: slow)
#   cpu-bf16         precision bf16 on this machine's CPU, where it has
#                    AVX512_BF16: tests/ref/model_bert_bf16_vs_autocast.py,
#                    bench/cpu_bf16_vs_torch.sh (one round) and, with perf, a
#                    profile of a bf16 evaluation (else one line: not run)
#
# --only STEP,... runs just those (preflight and env always run): a second
# call takes what the first had no time for. TFCORE_REQUIRE_GPU=1 (a GPU test
# that cannot run fails) and CUDA_MODULE_LOADING=EAGER are set. Exit 0 when
# every step run passed.
set -uo pipefail
me="gpu-run.sh"
bundle="$(cd "$(dirname "$0")/.." && pwd)"
out="" only="" budget="${GPU_RUN_BUDGET:-540}"
while [ $# -gt 0 ]; do
    case "$1" in
        --only) [ $# -ge 2 ] || { echo "$me: --only needs a list" >&2; exit 2; }; only=$2; shift ;;
        --only=*) only=${1#--only=} ;;
        --budget) [ $# -ge 2 ] || { echo "$me: --budget needs seconds" >&2; exit 2; }; budget=$2; shift ;;
        --budget=*) budget=${1#--budget=} ;;
        -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
        -*) echo "$me: unknown option '$1' (try --help)" >&2; exit 2 ;;
        *) [ -z "$out" ] || { echo "$me: one OUT folder only" >&2; exit 2; }; out=$1 ;;
    esac
    shift
done
case "$budget" in ''|*[!0-9]*) echo "$me: --budget must be whole seconds" >&2; exit 2 ;; esac
[ -f "$bundle/env.sh" ] || { echo "$me: $bundle is not a GPU bundle (no env.sh; scripts/gpu-bundle.sh makes one)" >&2; exit 2; }
out="${out:-${OUT:-$PWD/gpu-run-out}}"
mkdir -p "$out" || { echo "$me: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)

# shellcheck source=/dev/null
. "$bundle/env.sh"
export TFCORE_REQUIRE_GPU=1 TFCORE_REQUIRE_REF=1 CUDA_MODULE_LOADING=EAGER TF_TEST_SEED="${TF_TEST_SEED:-20260101}"
tfcore="$bundle/core/tfcore"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfcore-gpu-run-XXXXXX")
logs="$work/gpu-run-logs"
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT
start_all=$(date +%s)
deadline=$((start_all + budget))
summary="$out/summary.txt"
: >"$summary"
rm -f "$out/logs.tar.gz" "$out/bench.md"
nstep=0 failed=0

# shellcheck source=scripts/gpu-steps.sh
. "$bundle/scripts/gpu-steps.sh"

# --- preflight: stop at once, clearly, when there is no usable GPU ---------------------------
preflight() {
    command -v nvidia-smi >/dev/null 2>&1 || { echo "no NVIDIA GPU here: nvidia-smi not found"; return 1; }
    local gpus
    gpus=$(nvidia-smi -L 2>&1) || { echo "no NVIDIA GPU here: nvidia-smi -L failed: $(echo "$gpus" | tail -n 1)"; return 1; }
    echo "$gpus"
    printf '%s\n' "$gpus" | grep -q '^GPU ' || { echo "no NVIDIA GPU here: nvidia-smi lists none"; return 1; }
    local why
    why=$(gpu_cuda_why "$tfcore") || { echo "$why"; return 1; }
    "$tfcore" plugins
    echo "backend-cuda is usable"
}
# shellcheck source=/dev/null
. "$bundle/tests/gpu_backend.sh"
export bundle tfcore work logs
export -f preflight gpu_cuda_why gpu_required
say "tfcore gpu-run.sh: bundle $bundle, $(head -n 1 "$bundle/MANIFEST.txt" 2>/dev/null | sed 's/^tfcore GPU bundle ([^)]*): //'), budget ${budget}s, started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if ! step preflight 60 preflight; then
    say "stopped: there is no usable GPU here (see the preflight line); nothing else can run"
    exit 1
fi

# --- env ------------------------------------------------------------------------------------
env_line() {
    local smi cuda py
    smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
    cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
    py=$("$TFCORE_PYTHON" -c 'import sys, torch, transformers; print("python %s, torch %s (CUDA %s, available %s), transformers %s" % (sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), transformers.__version__))' 2>&1 | tail -n 1)
    echo "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)"
    echo "compute-sanitizer: $(command -v compute-sanitizer || echo none)"
    for so in plugins/backend-cuda/.libs/tfcore-backend-cuda.so plugins/comm-nccl/.libs/tfcore-comm-nccl.so; do
        [ -f "$bundle/$so" ] && echo "$(basename "$so"): $(ldd "$bundle/$so" | awk '/cudart|cublas|nccl|libcuda/ {printf "%s=%s ", $1, $3}')"
    done
    echo "GPU: $smi; driver CUDA $cuda; $py"
}
export -f env_line
step env 60 env_line

# --- the op suites against backend-cpu --------------------------------------------------------
step ops-cuda 120 "$bundle/tests/test_backend_cuda"
step ops-fused 120 "$bundle/tests/test_backend_cuda_attention"

# --- compute-sanitizer -----------------------------------------------------------------------
tiny_cfg="$work/tiny.cfg"
cat >"$tiny_cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 32; eval_examples = 16; learnable = true; };
backend = { plugin = "cuda"; };
precision = { plugin = "fp16"; };
training = { max_steps = 2; per_device_train_batch_size = 8; per_device_eval_batch_size = 8;
             learning_rate = 1e-3; logging_steps = 1; eval_strategy = "steps"; eval_steps = 2;
             save_strategy = "no"; seed = 5; };
CFG
sanitize() { # TOOL CMD...: compute-sanitizer, exit 99 on any report
    local tool=$1
    shift
    command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"; return 1; }
    local extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 50 "$@"
    local rc=$?
    [ $rc -eq 0 ] && echo "compute-sanitizer $tool: clean"
    return $rc
}
export tiny_cfg
export -f sanitize
step memcheck-train 150 sanitize memcheck "$tfcore" train -c "$tiny_cfg" -o "training.output_dir=$work/memcheck-run"
sanitize_attention() { # TOOL: the bf16 attention case (the MMA kernels) of the fused suite
    export CK_FORK=no CK_RUN_CASE=attention_bf16
    sanitize "$1" "$bundle/tests/test_backend_cuda_attention"
}
export -f sanitize_attention
step racecheck-attn 120 sanitize_attention racecheck
step synccheck-attn 90 sanitize_attention synccheck

# --- the transformers reference on the GPU ------------------------------------------------------
step gpu-ref 180 sh "$bundle/tests/test_gpu_ref.sh"

# --- a fine-tune per precision ----------------------------------------------------------------
ft_cfg="$work/ft.cfg"
"$TFCORE_PYTHON" - "$bundle/conf/quickstart.cfg" "$ft_cfg" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r"backend\s*=\s*\{.*?\};", 'backend = { plugin = "cuda"; };', text, count=1, flags=re.S)
assert n == 1, "conf/quickstart.cfg has no backend section"
open(sys.argv[2], "w").write(text)
PY
ft_dir="$logs/finetune"
mkdir -p "$ft_dir"
# finetune P: train, keep results.json and log.jsonl, check the run
finetune() {
    local p=$1
    local d="$work/ft-$p"
    "$tfcore" train -c "$ft_cfg" -o precision.plugin="$p" -o "training.output_dir=$d" 2>&1 | tee "$d.out"
    local rc=${PIPESTATUS[0]}
    mkdir -p "$ft_dir/$p"
    cp "$d/results.json" "$d/log.jsonl" "$ft_dir/$p/" 2>/dev/null
    [ "$rc" -eq 0 ] || { echo "tfcore train ($p) failed with exit $rc"; return 1; }
    "$TFCORE_PYTHON" - "$p" "$d" "$d.out" <<'PY'
import json, re, sys
p, d, out = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(open(d + "/results.json"))
losses = [x["loss"] for x in map(json.loads, open(d + "/log.jsonl")) if "loss" in x]
bad = []
if len(losses) < 4:
    bad.append("only %d logged losses" % len(losses))
else:
    k = max(1, len(losses) // 4)
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    if not last < 0.7 * first:
        bad.append("the loss did not fall: first quarter %.4f, last quarter %.4f" % (first, last))
if r["tfcore"]["backend"] != "cuda" or r["tfcore"]["precision"] != p:
    bad.append("ran on %s/%s" % (r["tfcore"]["backend"], r["tfcore"]["precision"]))
acc = r.get("eval_accuracy", float("nan"))
if not acc >= 0.9:
    bad.append("eval_accuracy %.4f < 0.9" % acc)
steps, skipped = r["tfcore"]["global_step"], r["tfcore"]["skipped_steps"]
scales = [float(m) for m in re.findall(r"scale now ([0-9.eE+-]+)", open(out).read())]
if p == "fp16":
    if skipped > 0.05 * steps:
        bad.append("fp16 skipped %d of %d steps (the loss scaler collapsed?)" % (skipped, steps))
    if scales and min(scales) < 1:
        bad.append("fp16 loss scale fell to %g" % min(scales))
elif skipped:
    bad.append("%s skipped %d steps" % (p, skipped))
for b in bad:
    print("FAIL: " + b)
print("%s %s: loss %.4f -> %.4f over %d logs, eval_accuracy %.4f, eval_loss %.4f, skipped %d/%d%s, %.1f samples/s, peak %.0f MiB"
      % ("FAIL" if bad else "ok", p, losses[0] if losses else float("nan"), losses[-1] if losses else float("nan"),
         len(losses), acc, r.get("eval_loss", float("nan")), skipped, steps,
         (", scale min %g" % min(scales)) if scales else "", r.get("train_samples_per_second", 0),
         r["tfcore"].get("peak_backend_memory_mb", float("nan"))))
sys.exit(1 if bad else 0)
PY
}
export ft_cfg ft_dir
export -f finetune
for p in fp32 tf32 fp16 bf16; do step "ft-$p" 90 finetune "$p"; done
ft_agree() {
    "$TFCORE_PYTHON" - "$work" <<'PY'
import json, os, sys
d = sys.argv[1]
r = {}
for p in ("fp32", "tf32", "fp16", "bf16"):
    f = "%s/ft-%s/results.json" % (d, p)
    if os.path.exists(f):
        r[p] = json.load(open(f))
if "fp32" not in r:
    print("FAIL: no fp32 run to compare with")
    sys.exit(1)
fails = 0
for p in sorted(set(r) - {"fp32"}):
    a, b = r[p]["eval_accuracy"], r["fp32"]["eval_accuracy"]
    ok = abs(a - b) <= 0.02
    fails += not ok
    print("%s %s eval_accuracy %.4f vs fp32 %.4f (within 0.02)" % ("ok  " if ok else "FAIL", p, a, b))
missing = {"tf32", "fp16", "bf16"} - set(r)
print("ft-agree: %d of %d precisions agree with fp32%s" % (len(r) - 1 - fails, len(r) - 1,
      ("; no run for " + ", ".join(sorted(missing))) if missing else ""))
sys.exit(1 if fails or missing else 0)
PY
}
export -f ft_agree
step ft-agree 30 ft_agree

# --- NCCL -------------------------------------------------------------------------------------
if [ -f "$bundle/plugins/comm-nccl/.libs/tfcore-comm-nccl.so" ]; then
    step comm-nccl 120 env NCCL_DEBUG=INFO sh "$bundle/tests/test_comm_nccl.sh"
else
    wanted comm-nccl && say "$(printf '%-8s %-16s %5s  %s' FAIL comm-nccl - "comm-nccl is not in this bundle (MANIFEST.txt says why)")" && failed=$((failed + 1))
fi

# --- against PyTorch + transformers (SDPA) on the same GPU ------------------------------------
bench() { # SEQS PRECISIONS: one round of 10 steps
    (cd "$bundle" && SEQS=$1 PRECISIONS=$2 BUILD="$bundle" bash "$bundle/bench/gpu_vs_torch.sh" 1 10)
    local rc=$?
    return $rc
}
export -f bench
step bench-s128 200 bench 128 "fp32 tf32 fp16 bf16"
step bench-s512 150 bench 512 "bf16 fp16"
for f in "$logs"/*-bench-*.log; do
    [ -f "$f" ] && { echo "## $(basename "$f" .log)"; cat "$f"; echo; } >>"$out/bench.md"
done

step sanitizer-suites 240 sh "$bundle/tests/test_backend_cuda_sanitizer.sh"

# --- precision bf16 on this machine's CPU (backend-cpu + oneDNN) -------------------------------
# The project's CPU machines have had no AVX512_BF16 since 2026-11-25, so the
# GPU machine's host is where backend-cpu's bf16 GEMMs can be checked against
# torch.autocast and timed and profiled (BENCHMARKS.md, "bf16 on the CPU").
cpu_bf16_cfg="$work/cpu-bf16.cfg"
cat >"$cpu_bf16_cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2;
          num_hidden_layers = 6; hidden_size = 384; num_attention_heads = 12; intermediate_size = 1536; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 256;
         num_examples = 256; eval_examples = 160; learnable = false; };
backend = { plugin = "cpu"; };
precision = { plugin = "bf16"; };
training = { per_device_train_batch_size = 32; per_device_eval_batch_size = 32; };
CFG
cpu_bf16() {
    local cpu
    cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)
    if ! grep -qw avx512_bf16 /proc/cpuinfo; then
        echo "not run: this machine's CPU ($cpu, $(nproc) cores) has no AVX512_BF16"
        return 0
    fi
    echo "== $cpu, $(nproc) cores: tests/ref/model_bert_bf16_vs_autocast.py"
    "$TFCORE_PYTHON" "$bundle/tests/ref/model_bert_bf16_vs_autocast.py" || return 1
    echo "== bench/cpu_bf16_vs_torch.sh 1 3 2"
    (cd "$bundle" && BUILD="$bundle" bash "$bundle/bench/cpu_bf16_vs_torch.sh" 1 3 2) || return 1
    if command -v perf >/dev/null 2>&1; then
        echo "== perf record of tfcore bench --eval, MiniLM-L6 bf16, 32 x 256"
        if perf record -o "$work/cpu-bf16.perf" -- "$tfcore" bench -c "$cpu_bf16_cfg" --eval --steps 4 --warmup 1; then
            perf report -i "$work/cpu-bf16.perf" --no-children --sort dso,sym --stdio 2>/dev/null | grep '%' | head -n 40
        else
            echo "perf record failed (perf_event_paranoid?): no profile"
        fi
    else
        echo "no perf here: no profile"
    fi
    echo "cpu-bf16: bf16 on the CPU checked against autocast and timed"
}
export cpu_bf16_cfg
export -f cpu_bf16
step cpu-bf16 150 cpu_bf16
for f in "$logs"/*-cpu-bf16.log; do
    [ -f "$f" ] && grep -q '^| ' "$f" && { echo "## $(basename "$f" .log)"; cat "$f"; echo; } >>"$out/bench.md"
done

pack
say "gpu-run.sh: $nstep steps, $failed not passed, $(($(date +%s) - start_all))s; logs in $out/logs.tar.gz"
[ "$failed" -eq 0 ]
