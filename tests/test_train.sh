#!/bin/sh
# The trainer end to end on the CPU (bert-tiny, learnable synthetic data):
# outputs (results.json with Trainer's keys, log.jsonl, checkpoints in Hugging
# Face layout, the final model), save_total_limit, resume_from_checkpoint
# continuing EXACTLY (dropout on: same losses as the uninterrupted run), and a
# diverging run stopping with the step number while its last checkpoint stays
# whole.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-train-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 64; eval_examples = 32; learnable = true; };
training = { num_train_epochs = 2.0; per_device_train_batch_size = 8; per_device_eval_batch_size = 16;
             learning_rate = 1e-3; warmup_ratio = 0.1; logging_steps = 1; eval_strategy = "epoch";
             save_strategy = "steps"; save_steps = 8; seed = 3; };
CFG

# 1. an uninterrupted run
if "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/a" >"$tmp/a.out" 2>&1; then ok; else
    bad "uninterrupted run failed"; cat "$tmp/a.out"; fi
for f in results.json log.jsonl config.json model.safetensors checkpoint-8/config.json \
         checkpoint-8/model.safetensors checkpoint-8/optimizer.safetensors checkpoint-8/trainer_state.json \
         checkpoint-16/trainer_state.json; do
    [ -s "$tmp/a/$f" ] && ok || bad "run a has no $f"
done
python3 - "$tmp/a" <<'PY' && ok || bad "results.json / log.jsonl content"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
for k in ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "epoch",
          "eval_loss", "eval_accuracy"):
    assert k in r, k
assert r["epoch"] == 2.0 and r["tfcore"]["global_step"] == 16, r
logs = [json.loads(l) for l in open(d + "/log.jsonl")]
steps = [l["step"] for l in logs if "loss" in l]
assert steps == list(range(1, 17)), steps
assert sum(1 for l in logs if "eval_loss" in l) == 2
PY

# predict with the trained model: id inputs; a text input needs a vocab (bert-tiny has none)
printf '{"input_ids": [101, 1000, 5, 102]}\n\n{"input_ids": [101, 7, 1001, 9, 102], "attention_mask": [1, 1, 1, 1, 1]}\n' >"$tmp/in.jsonl"
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/a" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" >/dev/null 2>&1 \
    && [ "$(grep -c '"label"' "$tmp/out.jsonl")" -eq 2 ] && ok || bad "predict on input_ids"
printf '{"text": "hello"}\n' >"$tmp/text.jsonl"
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/a" --input "$tmp/text.jsonl" --output "$tmp/o2.jsonl" 2>"$tmp/p.err" >/dev/null
rc=$?
[ "$rc" -eq 5 ] && grep -q "text.jsonl:1: a text input needs a vocabulary" "$tmp/p.err" && [ ! -e "$tmp/o2.jsonl" ] && ok \
    || { bad "predict text without vocab: exit $rc"; cat "$tmp/p.err"; }
printf '{"input_ids": [101, 40000, 102]}\n' >"$tmp/bad.jsonl"
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/a" --input "$tmp/bad.jsonl" --output "$tmp/o3.jsonl" 2>"$tmp/p.err" >/dev/null
[ $? -eq 5 ] && grep -q "bad.jsonl:1: input_ids\[1\] = 40000 is outside the vocabulary" "$tmp/p.err" && ok \
    || { bad "predict with an out-of-vocabulary id"; cat "$tmp/p.err"; }
printf '{"input_ids": [101, 5, 102]\n' >"$tmp/broken.jsonl"
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/a" --input "$tmp/broken.jsonl" --output "$tmp/o4.jsonl" 2>"$tmp/p.err" >/dev/null
[ $? -eq 5 ] && grep -q "broken.jsonl:1:[0-9]*: " "$tmp/p.err" && ok || { bad "predict on malformed JSON"; cat "$tmp/p.err"; }

# 2. save_total_limit keeps only the newest checkpoint
"$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/lim" -o training.save_total_limit=1 >/dev/null 2>&1
[ -d "$tmp/lim/checkpoint-16" ] && [ ! -d "$tmp/lim/checkpoint-8" ] && ok || bad "save_total_limit=1 kept $(ls "$tmp/lim")"

# 3. resume from checkpoint-8 into another folder: steps 9..16 must be identical
if "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/b" \
        -o training.resume_from_checkpoint="$tmp/a/checkpoint-8" >"$tmp/b.out" 2>&1; then ok; else
    bad "resumed run failed"; cat "$tmp/b.out"; fi
grep -q "resumed from $tmp/a/checkpoint-8 at step 8" "$tmp/b.out" && ok || bad "no 'resumed from' line"
python3 - "$tmp/a" "$tmp/b" <<'PY' && ok || bad "resumed losses differ from the uninterrupted run"
import json, sys
a = {l["step"]: l for l in map(json.loads, open(sys.argv[1] + "/log.jsonl")) if "loss" in l}
b = {l["step"]: l for l in map(json.loads, open(sys.argv[2] + "/log.jsonl")) if "loss" in l}
assert sorted(b) == list(range(9, 17)), sorted(b)
for s in b:
    for k in ("loss", "grad_norm", "learning_rate"):
        assert a[s][k] == b[s][k], (s, k, a[s][k], b[s][k])
ra, rb = json.load(open(sys.argv[1] + "/results.json")), json.load(open(sys.argv[2] + "/results.json"))
assert ra["train_loss"] == rb["train_loss"] and ra["eval_loss"] == rb["eval_loss"], (ra, rb)
PY
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" && ok || bad "final models differ after resume"

# resume from the latest checkpoint of output_dir ("last")
"$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/a" -o training.resume_from_checkpoint=last \
    -o training.num_train_epochs=3.0 >"$tmp/c.out" 2>&1 && ok || { bad "resume 'last' failed"; cat "$tmp/c.out"; }
grep -q "checkpoint-16 at step 16" "$tmp/c.out" && ok || bad "resume 'last' did not pick checkpoint-16"

# a corrupt checkpoint: one clear line naming the file, exit 5
printf 'garbage' >"$tmp/a/checkpoint-8/optimizer.safetensors"
"$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/d" \
    -o training.resume_from_checkpoint="$tmp/a/checkpoint-8" >/dev/null 2>"$tmp/d.err"
rc=$?
# (info lines may come first; the error is the one line after them, and the last)
[ "$rc" -eq 5 ] && tail -n 1 "$tmp/d.err" | grep -q "^tfcore: .*checkpoint-8/optimizer.safetensors: byte 0: " \
    && [ "$(grep -vc '^tfcore: \(model\|training\): ' "$tmp/d.err")" -eq 1 ] && ok \
    || { bad "corrupt checkpoint: exit $rc"; cat "$tmp/d.err"; }

# 4. divergence: the run stops naming the step; completed checkpoints stay whole
"$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/nan" -o training.learning_rate=1e12 \
    -o training.max_grad_norm=0.0 -o training.save_steps=1 -o training.warmup_ratio=0.0 >"$tmp/nan.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -Eq "tfcore: step [0-9]+: the training loss is (nan|inf); stopping" "$tmp/nan.out" && ok \
    || { bad "divergence: exit $rc"; tail -3 "$tmp/nan.out"; }
for c in "$tmp"/nan/checkpoint-*; do
    [ -d "$c" ] || continue
    case "$c" in *.tmp) bad "left a partial checkpoint $c"; continue ;; esac
    [ -s "$c/trainer_state.json" ] && [ -s "$c/model.safetensors" ] && ok || bad "checkpoint $c is incomplete"
done

# 5. question answering end to end: SQuAD v2 through data-squad, batches padded to
#    their longest row, evaluation writing predictions.json / null_odds.json
cat >"$tmp/qa.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "question-answering"; max_position_embeddings = 128; };
data = { plugin = "squad"; train_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         validation_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         vocab_file = "$top_srcdir/tests/data/data-squad/vocab.txt"; max_seq_length = 64; doc_stride = 16;
         pad_to_max_length = false; };
training = { output_dir = "$tmp/qa"; num_train_epochs = 1.0; per_device_train_batch_size = 4;
             per_device_eval_batch_size = 3; eval_strategy = "epoch"; save_strategy = "no"; logging_steps = 1; };
CFG
if "$tfcore" -c "$tmp/qa.cfg" >"$tmp/qa.out" 2>&1; then ok; else bad "QA run failed"; tail -5 "$tmp/qa.out"; fi
python3 - "$tmp/qa" <<'PY' && ok || bad "QA results"
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
for k in ("eval_exact", "eval_f1", "eval_HasAns_exact", "eval_NoAns_exact", "eval_best_f1"):
    assert k in r, (k, r)
assert "eval_loss" not in r  # as Trainer with run_qa: eval features carry no labels
p = json.load(open(d + "/predictions.json"))
n = json.load(open(d + "/null_odds.json"))
assert len(p) == 12 and set(p) == set(n), (len(p), len(n))  # the 12 questions of the file
PY

# 6. the imdb plugin end to end: the aclImdb folder layout and the CSV, and a
#    bad CSV stopping the run with one line naming file, line and row
vocab="$top_srcdir/tests/data/tokenizer/vocab.txt"
imdb_cfg() { # $1 = data.path
    cat <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; };
data = { plugin = "imdb"; path = "$1"; vocab_file = "$vocab"; max_length = 32; eval_fraction = 0.3; };
training = { output_dir = "$tmp/imdb"; max_steps = 2; per_device_train_batch_size = 2; eval_strategy = "steps";
             eval_steps = 2; save_strategy = "no"; };
CFG
}
for path in "$top_srcdir/tests/data/imdb/aclImdb" "$top_srcdir/tests/data/imdb/reviews.csv"; do
    rm -rf "$tmp/imdb"
    imdb_cfg "$path" >"$tmp/imdb.cfg"
    "$tfcore" -c "$tmp/imdb.cfg" >"$tmp/imdb.out" 2>&1 && grep -q '"eval_accuracy"' "$tmp/imdb/results.json" && ok \
        || { bad "imdb run on $path"; tail -3 "$tmp/imdb.out"; }
done
printf 'review,sentiment\n"fine film",positive\n"meh",neutral\n' >"$tmp/bad.csv"
rm -rf "$tmp/imdb"
imdb_cfg "$tmp/bad.csv" >"$tmp/imdb.cfg"
"$tfcore" -c "$tmp/imdb.cfg" >/dev/null 2>"$tmp/imdb.err"
rc=$?
[ "$rc" -eq 5 ] && tail -n 1 "$tmp/imdb.err" | grep -q "bad.csv:3: row 2: " && ok || { bad "bad CSV: exit $rc"; cat "$tmp/imdb.err"; }

# 7. load_best_model_at_end: the best checkpoint (here the one with the HIGHEST
#    eval loss, so it is not the last) becomes the final model, bit for bit;
#    trainer_state.json tracks it as Trainer does; rotation never deletes it
best_run() { # $1 = output folder, then -o overrides
    out=$1
    shift
    "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$out" -o training.max_steps=8 -o training.eval_strategy=steps \
        -o training.eval_steps=2 -o training.save_steps=2 -o training.load_best_model_at_end=true \
        -o training.greater_is_better=true "$@"
}
best_check() { # $1 = output folder: prints checkpoint-K of the best
    python3 - "$1" <<'PY'
import json, os, sys
d = sys.argv[1]
logs = [json.loads(l) for l in open(d + "/log.jsonl")]
evals = [l for l in logs if "eval_loss" in l]
best = max(evals[:4], key=lambda l: l["eval_loss"])  # the 4 evaluations taken during training
k = best["step"]
assert k != 8, "the best checkpoint is the last one; the test proves nothing"
last = max(int(n.split("-")[1]) for n in os.listdir(d) if n.startswith("checkpoint-"))
st = json.load(open("%s/checkpoint-%d/trainer_state.json" % (d, last)))
assert st["best_model_checkpoint"] == "%s/checkpoint-%d" % (d, k), (st["best_model_checkpoint"], k)
assert abs(st["best_metric"] - best["eval_loss"]) < 1e-8, (st["best_metric"], best["eval_loss"])  # log.jsonl: 10 digits
r = json.load(open(d + "/results.json"))  # re-evaluated: the final (best) model's numbers
assert abs(r["eval_loss"] - best["eval_loss"]) < 1e-6, (r["eval_loss"], best["eval_loss"])
print("checkpoint-%d" % k)
PY
}
if best_run "$tmp/best" -o training.metric_for_best_model=loss >"$tmp/best.out" 2>&1 && k=$(best_check "$tmp/best"); then
    cmp -s "$tmp/best/model.safetensors" "$tmp/best/$k/model.safetensors" && ok || bad "the final model is not $k's"
    grep -q "loaded the best model from $tmp/best/$k" "$tmp/best.out" && ok || bad "no 'loaded the best model' line"
else bad "load_best_model_at_end run"; tail -5 "$tmp/best.out"; fi
# save_total_limit = 1: the best and the newest during the run, the best alone at the end
if best_run "$tmp/best1" -o training.metric_for_best_model=eval_loss -o training.save_total_limit=1 >"$tmp/best1.out" 2>&1 &&
    k=$(best_check "$tmp/best1"); then
    [ "$(ls -d "$tmp"/best1/checkpoint-*)" = "$tmp/best1/$k" ] && cmp -s "$tmp/best1/model.safetensors" "$tmp/best1/$k/model.safetensors" \
        && ok || bad "save_total_limit=1 with a best checkpoint kept: $(ls "$tmp/best1")"
else bad "load_best_model_at_end with save_total_limit=1"; tail -5 "$tmp/best1.out"; fi
best_run "$tmp/best2" -o training.metric_for_best_model=accuracyy >/dev/null 2>"$tmp/best2.err"
rc=$?
[ "$rc" -eq 3 ] && tail -n 1 "$tmp/best2.err" | grep -q "training.metric_for_best_model 'accuracyy': the evaluation has no 'eval_accuracyy' (it has eval_loss, eval_accuracy" \
    && ok || { bad "unknown metric_for_best_model: exit $rc"; cat "$tmp/best2.err"; }

echo "test_train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
