#!/bin/sh
# Each precision converges like fp32 on a GPU: the quickstart fine-tune
# (conf/quickstart.cfg: bert-mini, learnable synthetic data, 2 epochs) on
# backend cuda in fp32, tf32, fp16 and bf16, same seed. Every run must end
# with eval_accuracy within 0.02 of fp32's, eval_loss and train_loss within
# max(0.05, 25%) of fp32's, and fp16 must skip few steps (the loss scaler
# must not collapse). Without a usable CUDA backend it skips (exit 77)
# saying why; with TFCORE_REQUIRE_GPU=1 that is a failure
# (tests/gpu_backend.sh).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/gpu_backend.sh"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || gpu_unavailable "no $tfcore"
why=$(gpu_cuda_why "$tfcore") || gpu_unavailable "$why"
tmp=$(mktemp -d /tmp/tfcore-gpuft-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# quickstart.cfg with its backend section replaced (its `threads` is a cpu key)
python3 - "$top_srcdir/conf/quickstart.cfg" "$tmp/gpu.cfg" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r"backend\s*=\s*\{.*?\};", 'backend = { plugin = "cuda"; };', text, count=1, flags=re.S)
assert n == 1, "conf/quickstart.cfg has no backend section"
open(sys.argv[2], "w").write(text)
PY
[ -s "$tmp/gpu.cfg" ] || { echo "FAIL: could not derive the GPU config from conf/quickstart.cfg"; exit 1; }

for p in fp32 tf32 fp16 bf16; do
    if "$tfcore" train -c "$tmp/gpu.cfg" -o precision.plugin="$p" -o training.output_dir="$tmp/$p" \
            >"$tmp/$p.out" 2>&1 && [ -s "$tmp/$p/results.json" ]; then
        ok
    else
        bad "the $p fine-tune failed"; tail -5 "$tmp/$p.out"
    fi
done
[ "$fail" -eq 0 ] || { echo "gpu_finetune: $pass passed, $fail failed"; exit 1; }

python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
r = {p: json.load(open("%s/%s/results.json" % (d, p))) for p in ("fp32", "tf32", "fp16", "bf16")}
ref = r["fp32"]
fails = 0
def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += not cond
check(ref["eval_accuracy"] >= 0.9, "fp32 learns the task: eval_accuracy %.4f >= 0.9" % ref["eval_accuracy"])
for p in ("tf32", "fp16", "bf16"):
    x = r[p]
    assert x["tfcore"]["precision"] == p and x["tfcore"]["backend"] == "cuda", x["tfcore"]
    check(abs(x["eval_accuracy"] - ref["eval_accuracy"]) <= 0.02,
          "%s eval_accuracy %.4f vs fp32 %.4f (within 0.02)" % (p, x["eval_accuracy"], ref["eval_accuracy"]))
    for k in ("eval_loss", "train_loss"):
        tol = max(0.05, 0.25 * ref[k])
        check(abs(x[k] - ref[k]) <= tol, "%s %s %.4f vs fp32 %.4f (within %.3f)" % (p, k, x[k], ref[k], tol))
    steps, skipped = x["tfcore"]["global_step"], x["tfcore"]["skipped_steps"]
    limit = 0.05 * steps if p == "fp16" else 0
    check(skipped <= limit, "%s skipped %d of %d steps (at most %d)" % (p, skipped, steps, limit))
print("gpu_finetune: %d failed" % fails)
sys.exit(1 if fails else 0)
PY
rc=$?
[ "$rc" -eq 0 ] && ok || bad "a precision did not converge like fp32"
echo "gpu_finetune: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
