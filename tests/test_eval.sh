#!/bin/sh
# tfcore eval: a saved model (the final one, a checkpoint, or by hub name
# from the cache) evaluated on the config's eval split gives exactly the
# eval_* numbers the training run reported at its end (classification on synthetic and imdb data, question
# answering on SQuAD v2), printed as the trainer prints an evaluation and
# written to output_dir/results.json; with several workers (threads, and
# processes re-executing `tfcore eval`) the same metrics; a missing model, a
# config without an eval split, or an output_dir holding the trained run are
# one line and a non-zero exit, with nothing written.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-eval-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# same_eval TRAINED_RESULTS EVAL_RESULTS [loss tolerance]: every eval_* metric
# but the timings equal (the loss within a relative tolerance when given),
# and the eval run's results.json holds no train_* key
same_eval() {
    python3 - "$@" <<'PY'
import json, sys
t, e = (json.load(open(p)) for p in sys.argv[1:3])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
timing = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")
want = {k: v for k, v in t.items() if k.startswith("eval_") and k not in timing}
got = {k: v for k, v in e.items() if k.startswith("eval_") and k not in timing}
assert want and set(want) == set(got), (want, got)
for k in want:
    if k == "eval_loss" and tol:
        assert abs(got[k] - want[k]) <= tol * abs(want[k]), (k, got[k], want[k])
    else:
        assert got[k] == want[k], (k, got[k], want[k])
assert all(k in e for k in timing), e
assert not any(k.startswith("train_") for k in e) and "epoch" not in e, e
assert e["tfcore"]["global_step"] == 0, e
PY
}

cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 32; eval_examples = 20; learnable = true; };
training = { output_dir = "$tmp/trained"; max_steps = 4; per_device_train_batch_size = 8;
             per_device_eval_batch_size = 6; learning_rate = 1e-3; logging_steps = 2; eval_strategy = "steps";
             eval_steps = 4; save_strategy = "steps"; save_steps = 4; seed = 5; };
CFG
"$tfcore" -c "$tmp/tiny.cfg" >"$tmp/train.log" 2>&1 && ok || { bad "training the tiny model failed"; cat "$tmp/train.log"; }

# 1. the final model and its checkpoint: the training run's last evaluation, number for number
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" -o training.output_dir="$tmp/ev" >"$tmp/ev.out" 2>"$tmp/ev.err" \
    && ok || { bad "eval of the final model failed"; cat "$tmp/ev.err"; }
same_eval "$tmp/trained/results.json" "$tmp/ev/results.json" && ok || bad "eval of the final model: other numbers"
grep -q "^{'eval_loss': [0-9.e-]*, 'eval_accuracy': " "$tmp/ev.err" && ok || { bad "eval printed no metrics line"; cat "$tmp/ev.err"; }
[ ! -e "$tmp/ev/model.safetensors" ] && [ ! -d "$tmp/ev/checkpoint-4" ] && ok || bad "eval saved a model"
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained/checkpoint-4" -o training.output_dir="$tmp/evck" \
    >/dev/null 2>"$tmp/evck.err" && same_eval "$tmp/trained/results.json" "$tmp/evck/results.json" && ok \
    || { bad "eval of checkpoint-4"; cat "$tmp/evck.err"; }

# 2. several workers: threads (dp-master) and processes re-executing `tfcore eval` (test plugin shm);
#    the shards' losses are summed in another order, so the loss within 1e-6
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" -o training.output_dir="$tmp/evdp" \
    -o comm.plugin=\"dp-master\" -o comm.world_size=2 >/dev/null 2>"$tmp/evdp.err" \
    && same_eval "$tmp/trained/results.json" "$tmp/evdp/results.json" 1e-6 && ok \
    || { bad "eval with dp-master x2"; cat "$tmp/evdp.err"; }
if [ -e "$top_builddir/tests/comm-shm/.libs/tfcore-comm-shm.so" ]; then
    TFCORE_PLUGIN_PATH="$top_builddir/tests/comm-shm/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}" \
        "$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" -o training.output_dir="$tmp/evshm" \
        -o comm.plugin=\"shm\" -o comm.world_size=2 >/dev/null 2>"$tmp/evshm.err" \
        && same_eval "$tmp/trained/results.json" "$tmp/evshm/results.json" 1e-6 && ok \
        || { bad "eval with shm x2 (worker processes)"; cat "$tmp/evshm.err"; }
else
    echo "SKIP: the test comm plugin shm is not built (worker processes)"
fi

# 3. --dry-run: checked and printed, nothing written
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" -o training.output_dir="$tmp/evdry" --dry-run \
    >"$tmp/dry.out" 2>"$tmp/dry.err" && grep -q "^# tfcore eval --dry-run: " "$tmp/dry.out" \
    && grep -q "do_train = false" "$tmp/dry.out" && [ ! -e "$tmp/evdry" ] && ok \
    || { bad "eval --dry-run"; cat "$tmp/dry.err"; }

# 4. a missing model folder: one line naming it, non-zero, nothing written
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/nothere" -o training.output_dir="$tmp/ev4" >/dev/null 2>"$tmp/e4.err"
rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$tmp/e4.err")" -eq 1 ] && grep -q "^tfcore: .*model.pretrained '$tmp/nothere': No such file or directory$" "$tmp/e4.err" \
    && [ ! -e "$tmp/ev4" ] && ok || { bad "eval of a missing model: exit $rc"; cat "$tmp/e4.err"; }

# 5. a config without an eval split: one line naming the data section, exit 3, nothing written
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" -o data.eval_examples=0 -o training.output_dir="$tmp/ev5" \
    >/dev/null 2>"$tmp/e5.err"
rc=$?
[ "$rc" -eq 3 ] && [ "$(grep -c '' "$tmp/e5.err")" -eq 2 ] \
    && grep -q "^tfcore: $tmp/tiny.cfg:3: data 'synthetic' has no eval split (0 eval rows), so there is nothing to evaluate" "$tmp/e5.err" \
    && [ ! -e "$tmp/ev5" ] && ok || { bad "eval without an eval split: exit $rc"; cat "$tmp/e5.err"; }

# 6. output_dir is the trained run's own folder: refused, its results.json untouched
cp "$tmp/trained/results.json" "$tmp/before.json"
"$tfcore" eval -c "$tmp/tiny.cfg" --model "$tmp/trained" >/dev/null 2>"$tmp/e6.err"
rc=$?
[ "$rc" -eq 3 ] && [ "$(wc -l <"$tmp/e6.err")" -eq 1 ] && grep -q "results.json an evaluation would replace" "$tmp/e6.err" \
    && cmp -s "$tmp/before.json" "$tmp/trained/results.json" && ok || { bad "eval over the trained run: exit $rc"; cat "$tmp/e6.err"; }

# 7. a model by hub name, from the Hugging Face cache offline (a snapshot of the trained folder)
commit=0123456789abcdef0123456789abcdef01234567
snap="$tmp/hub/models--acme--tiny-bert/snapshots/$commit"
mkdir -p "$snap" "$tmp/hub/models--acme--tiny-bert/refs" && printf '%s' "$commit" >"$tmp/hub/models--acme--tiny-bert/refs/main" \
    && cp "$tmp/trained/config.json" "$tmp/trained/model.safetensors" "$snap/" \
    && HF_HUB_OFFLINE=1 HF_HUB_CACHE="$tmp/hub" "$tfcore" eval -c "$tmp/tiny.cfg" --model acme/tiny-bert \
        -o training.output_dir="$tmp/evhub" >/dev/null 2>"$tmp/evhub.err" \
    && same_eval "$tmp/trained/results.json" "$tmp/evhub/results.json" && ok \
    || { bad "eval of a model by hub name"; cat "$tmp/evhub.err"; }

# 8. imdb (CSV, held-out share) through data-imdb
cat >"$tmp/imdb.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2; };
data = { plugin = "imdb"; path = "$top_srcdir/tests/data/imdb/reviews.csv";
         vocab_file = "$top_srcdir/tests/data/tokenizer/vocab.txt"; max_length = 32; eval_fraction = 0.3; };
training = { output_dir = "$tmp/imdb"; max_steps = 2; per_device_train_batch_size = 2; per_device_eval_batch_size = 3;
             eval_strategy = "steps"; eval_steps = 2; save_strategy = "no"; };
CFG
"$tfcore" -c "$tmp/imdb.cfg" >"$tmp/imdb.log" 2>&1 \
    && "$tfcore" eval -c "$tmp/imdb.cfg" --model "$tmp/imdb" -o training.output_dir="$tmp/imdb-ev" >/dev/null 2>"$tmp/imdb-ev.err" \
    && same_eval "$tmp/imdb/results.json" "$tmp/imdb-ev/results.json" && ok \
    || { bad "imdb eval"; tail -3 "$tmp/imdb.log"; cat "$tmp/imdb-ev.err" 2>/dev/null; }

# 9. question answering (SQuAD v2): the trainer's exact / f1 path, predictions.json written as in training
cat >"$tmp/qa.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "question-answering"; max_position_embeddings = 128; };
data = { plugin = "squad"; train_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         validation_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         vocab_file = "$top_srcdir/tests/data/data-squad/vocab.txt"; max_seq_length = 64; doc_stride = 16;
         pad_to_max_length = false; };
training = { output_dir = "$tmp/qa"; num_train_epochs = 1.0; per_device_train_batch_size = 4;
             per_device_eval_batch_size = 3; eval_strategy = "epoch"; save_strategy = "no"; logging_steps = 1; };
CFG
"$tfcore" -c "$tmp/qa.cfg" >"$tmp/qa.log" 2>&1 \
    && "$tfcore" eval -c "$tmp/qa.cfg" --model "$tmp/qa" -o training.output_dir="$tmp/qa-ev" >/dev/null 2>"$tmp/qa-ev.err" \
    && same_eval "$tmp/qa/results.json" "$tmp/qa-ev/results.json" && grep -q '"eval_f1"' "$tmp/qa-ev/results.json" \
    && cmp -s "$tmp/qa/predictions.json" "$tmp/qa-ev/predictions.json" && ok \
    || { bad "squad eval"; tail -3 "$tmp/qa.log"; cat "$tmp/qa-ev.err" 2>/dev/null; }

echo "test_eval: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
