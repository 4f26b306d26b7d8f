#!/bin/sh
# `tfcore bench --eval`: times evaluation batches (forward only) of
# per_device_eval_batch_size rows of the eval split. On a split that is one
# batch, the batch's loss must be the eval_loss that `tfcore` reports for the
# same model (a preset initialised from the seed), so the bench does the work
# evaluation does; a dataset without eval rows is a config error (exit 3).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || { echo "SKIP: no $tfcore"; exit 77; }
[ -d "$top_builddir/plugins/backend-cpu/.libs" ] || { echo "SKIP: backend-cpu is not built (no OpenBLAS)"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-bench-eval-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 16; eval_examples = 8; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/run"; do_train = false; do_eval = true; per_device_train_batch_size = 4;
             per_device_eval_batch_size = 8; };
CFG

"$tfcore" bench -c "$tmp/tiny.cfg" --eval --steps 3 --warmup 1 --json >"$tmp/bench.out" 2>"$tmp/bench.err" \
    || { bad "bench --eval failed"; cat "$tmp/bench.err"; }
grep -q "^batch        8 x 32, evaluation (forward only)" "$tmp/bench.out" && ok \
    || { bad "bench --eval does not say it times 8 x 32 evaluation batches"; cat "$tmp/bench.out"; }
"$tfcore" -c "$tmp/tiny.cfg" >"$tmp/eval.out" 2>&1 || { bad "the evaluation run failed"; tail -3 "$tmp/eval.out"; }
python3 - "$tmp/bench.out" "$tmp/run/results.json" <<'PY' && ok || bad "bench --eval's loss or counts differ from the evaluation's"
import json, sys
b = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
r = json.load(open(sys.argv[2]))
assert b["batch"] == 8 and b["seq"] == 32 and b["steps"] == 3, b
assert b["samples_per_second"] > 0, b
ev = r["eval_loss"]
assert abs(b["last_loss"] - ev) <= 1e-5 * max(1.0, abs(ev)), (b["last_loss"], ev)
PY

"$tfcore" bench -c "$tmp/tiny.cfg" -o data.eval_examples=0 --eval --steps 1 >"$tmp/none.out" 2>&1
rc=$?
[ "$rc" -eq 3 ] && grep -q "bench --eval: the dataset has no eval rows" "$tmp/none.out" && ok \
    || { bad "bench --eval without eval rows: exit $rc (want 3)"; cat "$tmp/none.out"; }

echo "test_bench_eval: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
