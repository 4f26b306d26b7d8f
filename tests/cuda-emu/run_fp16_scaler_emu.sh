#!/bin/sh
# fp16 loss scaling end to end on emulated GPUs (the CUDA emulation of
# tests/cuda-emu): bert-tiny trained with precision fp16 on the emulated
# backend-cuda, one worker and comm nccl x2, 6 steps with a checkpoint after
# each. The overflows are injected through the scale itself, so which steps
# overflow is known before the run: at 2^100 every non-zero gradient of the
# f16 backward is inf (f16 holds at most 65504), at 2^10 none is.
#   init_scale 2^100, backoff_factor 2^-90, growth_factor 2^90,
#   growth_interval 2: step 1 overflows (scale -> 2^10), steps 2 and 3 are
#   clean (the scale grows back to 2^100 after the second), step 4 overflows,
#   steps 5 and 6 are clean.
# Checked against torch.cuda.amp.GradScaler's update rule and transformers'
# Trainer, both written out in the checker below (float32 scale, growth
# tracker):
#  - after every step, the checkpoint's scaler state (scale, growth tracker,
#    skipped steps) and the trainer's skipped_steps are GradScaler's;
#  - a skipped step leaves the parameters bit-identical, a clean one changes
#    them; only skipped steps log the overflow warning, with the scale before
#    and after; they log no grad_norm;
#  - the learning-rate scheduler steps only after optimizer steps that ran
#    (Trainer: `if optimizer_was_run: lr_scheduler.step()`): the logged
#    learning rates, and the rate AdamW applied on step 2, the first step that
#    ran (AdamW's first update moves each parameter by lr * g/(|g| + eps),
#    so max|delta| = lr: 1e-3, not the 8.3e-4 of a scheduler that counted
#    the skipped step).
# The halving default (backoff 0.5, growth 2 every 2000 steps) is the same
# code with other factors: tests/test_precision.c checks it step by step.
# Every case prints `PASS: name` or `FAIL: name`; exits 1 when one failed.
#
# TF_TEST_SMALL=2 (the sanitizer builds): bert-tiny with a 2048-token
# vocabulary.
#
# Usage: tests/cuda-emu/run_fp16_scaler_emu.sh DIR (what
# scripts/build-cuda-emu.sh DIR filled).
set -u
emu=${1:-${TFCORE_EMU_DIR:-}}
[ -n "$emu" ] && [ -f "$emu/tfcore-backend-cuda.so" ] || {
    echo "usage: run_fp16_scaler_emu.sh DIR (the folder scripts/build-cuda-emu.sh DIR filled)" >&2
    exit 2
}
emu=$(cd "$emu" && pwd)
tfcore="$emu/build/core/tfcore"
case ":${TFCORE_PLUGIN_PATH:-}:" in
*":$emu:"*) ;;
*) export TFCORE_PLUGIN_PATH="$emu${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}" ;;
esac
export TFCORE_EMU_DEVICES=2 TFCORE_EMU_NCCL_TIMEOUT_S=120
tmp=$(mktemp -d /tmp/tfcore-emu-fp16-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail=0

# cfg NAME PER_DEVICE [COMM_SECTION]: global batch 8, 6 steps, a checkpoint each
vocab=""
[ "${TF_TEST_SMALL:-}" = 2 ] && vocab="vocab_size = 2048;"
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; $vocab
          max_position_embeddings = 32; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 64; eval_examples = 0; learnable = true; };
backend = { plugin = "cuda"; };
precision = { plugin = "fp16"; init_scale = 1.2676506002282294e30; growth_factor = 1.2379400392853803e27;
              backoff_factor = 8.077935669463161e-28; growth_interval = 2; };
training = { output_dir = "$tmp/$1"; max_steps = 6; per_device_train_batch_size = $2;
             learning_rate = 1e-3; warmup_steps = 0; logging_steps = 1; eval_strategy = "no";
             save_strategy = "steps"; save_steps = 1; seed = 11; };
${3:-}
CFG
}

check() { # NAME: train it and check it against the reference
    if ! "$tfcore" train -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1; then
        echo "FAIL: fp16 $1: tfcore train failed"
        tail -n 15 "$tmp/$1.out" | sed 's/^/    /'
        fail=1
        return
    fi
    if python3 - "$tmp/$1" "$tmp/$1.out" >"$tmp/$1.check" 2>&1 <<'PY'; then
import json, math, os, struct, sys

out, log = sys.argv[1], sys.argv[2]
STEPS, LR = 6, 1e-3
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
init, growth, backoff, interval = f32(2.0**100), 2.0**90, 2.0**-90, 2

def gradscaler():
    """torch.cuda.amp.GradScaler.update (float32 scale, int tracker), with
    the inf flag known in advance: an f16 backward at 2^100 overflows."""
    scale, tracker, skipped, runs = init, 0, 0, 0
    for step in range(1, STEPS + 1):
        found_inf = scale >= 2.0**64
        before = scale
        if found_inf:
            scale, tracker, skipped = f32(scale * backoff), 0, skipped + 1
        else:
            tracker += 1
            if tracker == interval:
                grown = f32(scale * growth)
                if math.isfinite(grown):
                    scale = grown
                tracker = 0
            runs += 1
        # Trainer's linear schedule, stepped after optimizer steps that ran
        yield step, found_inf, before, scale, tracker, skipped, LR * max(0.0, (STEPS - runs) / STEPS)

def params(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    res = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        res[k] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return res

logs = [json.loads(l) for l in open(os.path.join(out, "log.jsonl")) if '"step"' in l]
logs = {e["step"]: e for e in logs if "loss" in e}
warned = [l for l in open(log) if "gradients overflowed" in l]
prev, errors, skips = None, [], []
for step, inf, before, scale, tracker, skipped, lr in gradscaler():
    ck = os.path.join(out, "checkpoint-%d" % step)
    st = json.load(open(os.path.join(ck, "trainer_state.json")))
    sc = st["scaler"]
    got = (sc["scale"], sc["good_steps"], sc["skipped_steps"], st["skipped_steps"])
    if got != (scale, tracker, skipped, skipped):
        errors.append("step %d: scaler {scale %r, tracker %d, skipped %d}, trainer skipped %d; GradScaler: "
                      "{%r, %d, %d}" % ((step,) + got + (scale, tracker, skipped)))
    e = logs.get(step)
    if e is None:
        errors.append("step %d: not logged" % step)
    else:
        if ("grad_norm" in e) == inf:
            errors.append("step %d: grad_norm %s logged on a %s step" % (step, "is" if inf else "is not",
                                                                         "skipped" if inf else "clean"))
        if not math.isclose(e["learning_rate"], lr, rel_tol=1e-9, abs_tol=1e-15):
            errors.append("step %d: learning_rate %r, Trainer's %r" % (step, e["learning_rate"], lr))
        if not math.isfinite(e["loss"]):
            errors.append("step %d: loss %r" % (step, e["loss"]))
    want = "step %d: gradients overflowed at loss scale %g; step skipped, scale now %g" % (step, before, scale)
    if inf:
        skips.append(step)
        if not any(want in l for l in warned):
            errors.append("step %d: no warning '%s'" % (step, want))
    p = params(os.path.join(ck, "model.safetensors"))
    if prev is not None:
        delta = max(max(abs(x - y) for x, y in zip(p[k], prev[k])) for k in p)
        if inf and delta != 0:
            errors.append("step %d was skipped but moved the parameters by %g" % (step, delta))
        if not inf and delta == 0:
            errors.append("step %d is clean but left the parameters as they were" % step)
        if step == 2:  # AdamW's first update: max|delta| = the rate applied
            applied = LR * (STEPS - 0) / STEPS
            if abs(delta - applied) > 1e-3 * applied:
                errors.append("step 2 (AdamW's first step) moved parameters by at most %.6g; the learning rate "
                              "Trainer applies is %.6g (the scheduler has not stepped for the skipped step 1)"
                              % (delta, applied))
    prev = p
if len(warned) != len(skips):
    errors.append("%d overflow warnings for %d skipped steps" % (len(warned), len(skips)))
for e in errors:
    print(e)
print("skipped steps %s, final scale %g" % (skips, scale))
sys.exit(1 if errors else 0)
PY
        echo "PASS: fp16 $1: overflows at steps 1 and 4 skipped (parameters unchanged), scale backed off and grown, learning rates as GradScaler + Trainer give"
    else
        echo "FAIL: fp16 $1: loss scaling differs from GradScaler + Trainer"
        sed 's/^/    /' "$tmp/$1.check"
        fail=1
    fi
}

cfg one 8
check one
cfg nccl2 4 'comm = { plugin = "nccl"; world_size = 2; bucket_mb = 0.25; };'
check nccl2
exit $fail
