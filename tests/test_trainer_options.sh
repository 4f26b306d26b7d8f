#!/bin/sh
# Trainer keys that change what a run computes, end to end on the CPU
# (bert-tiny, learnable synthetic data): label_smoothing_factor changes the
# classification loss and is refused for question answering; optim "adamw_hf"
# (transformers' AdamW) trains differently from "adamw_torch"; optim
# "adafactor" trains, keeps a factored state far smaller than AdamW's moments,
# and resumes bit-exactly from its checkpoint (refusing AdamW state);
# gradient_checkpointing gives the same model bit for bit; do_train =
# false with do_eval evaluates the loaded model only. The arithmetic itself is
# compared with torch / transformers in tests/ref (backend_cpu_vs_torch.py,
# model_bert_vs_hf.py).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-options-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 32; eval_examples = 16; learnable = true; };
training = { max_steps = 3; per_device_train_batch_size = 8; per_device_eval_batch_size = 16;
             learning_rate = 1e-3; logging_steps = 1; eval_strategy = "no"; save_strategy = "no";
             weight_decay = 0.1; adam_epsilon = 1e-3; seed = 3; };
CFG
run() { # $1 = output folder name, then -o overrides
    out="$tmp/$1"
    shift
    "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$out" "$@" >"$out.log" 2>&1
}
# the step losses of a run's log.jsonl, one per line
losses() { python3 -c 'import json,sys; [print(repr(l["loss"])) for l in map(json.loads, open(sys.argv[1])) if "loss" in l]' "$tmp/$1/log.jsonl"; }

run base && ok || { bad "base run failed"; cat "$tmp/base.log"; }

# 1. label_smoothing_factor: step 1's loss (before any update) is the smoothed one
run smooth -o training.label_smoothing_factor=0.1 && ok || { bad "smoothed run failed"; cat "$tmp/smooth.log"; }
b1=$(losses base | sed -n 1p)
s1=$(losses smooth | sed -n 1p)
[ -n "$b1" ] && [ -n "$s1" ] && [ "$b1" != "$s1" ] && ok || bad "label_smoothing_factor 0.1 left step 1's loss at $b1 ($s1)"
run smooth0 -o training.label_smoothing_factor=0.0 && [ "$(losses base)" = "$(losses smooth0)" ] && ok \
    || bad "label_smoothing_factor 0.0 changed the losses"
# question answering: the Trainer never smooths start/end positions; refused, not ignored
cat >"$tmp/qa.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "question-answering"; max_position_embeddings = 128; };
data = { plugin = "squad"; train_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         validation_file = "$top_srcdir/tests/data/squad/mini-v2.0.json";
         vocab_file = "$top_srcdir/tests/data/data-squad/vocab.txt"; max_seq_length = 64; doc_stride = 16; };
training = { output_dir = "$tmp/qa"; max_steps = 1; save_strategy = "no"; label_smoothing_factor = 0.1; };
CFG
"$tfcore" -c "$tmp/qa.cfg" >/dev/null 2>"$tmp/qa.err"
rc=$?
[ "$rc" -eq 3 ] && tail -n 1 "$tmp/qa.err" | grep -q "label_smoothing_factor = 0.1 does not apply to question answering" \
    && ok || { bad "QA with label smoothing: exit $rc"; cat "$tmp/qa.err"; }

# 2. optim adamw_hf: the same first loss, then another path (eps and weight decay placement)
run hf -o training.optim=\"adamw_hf\" && ok || { bad "adamw_hf run failed"; cat "$tmp/hf.log"; }
[ "$(losses hf | sed -n 1p)" = "$b1" ] && [ "$(losses hf | tail -n 1)" != "$(losses base | tail -n 1)" ] && ok \
    || bad "adamw_hf: losses $(losses hf | tr '\n' ' ') vs adamw_torch $(losses base | tr '\n' ' ')"

# 2b. optim adafactor: same first loss, another path; checkpoints hold its
# factored state (smaller than AdamW's two moments) and resume exactly
run af -o training.optim=\"adafactor\" && ok || { bad "adafactor run failed"; cat "$tmp/af.log"; }
[ "$(losses af | sed -n 1p)" = "$b1" ] && [ "$(losses af | tail -n 1)" != "$(losses base | tail -n 1)" ] && ok \
    || bad "adafactor: losses $(losses af | tr '\n' ' ') vs adamw_torch $(losses base | tr '\n' ' ')"
ckpt="-o training.max_steps=6 -o training.save_strategy=\"steps\" -o training.save_steps=3"
# shellcheck disable=SC2086
run afa -o training.optim=\"adafactor\" $ckpt && ok || { bad "adafactor checkpointed run failed"; cat "$tmp/afa.log"; }
# shellcheck disable=SC2086
run afb -o training.optim=\"adafactor\" $ckpt -o training.resume_from_checkpoint=\"$tmp/afa/checkpoint-3\" && ok \
    || { bad "adafactor resume failed"; cat "$tmp/afb.log"; }
cmp -s "$tmp/afa/model.safetensors" "$tmp/afb/model.safetensors" && ok || bad "adafactor: resumed model differs"
cmp -s "$tmp/afa/checkpoint-6/optimizer.safetensors" "$tmp/afb/checkpoint-6/optimizer.safetensors" && ok \
    || bad "adafactor: resumed optimizer state differs"
# shellcheck disable=SC2086
run ada $ckpt && ok || { bad "adamw checkpointed run failed"; cat "$tmp/ada.log"; }
af_bytes=$(wc -c <"$tmp/afa/checkpoint-3/optimizer.safetensors")
ad_bytes=$(wc -c <"$tmp/ada/checkpoint-3/optimizer.safetensors")
[ "$af_bytes" -lt $((ad_bytes / 4)) ] && ok || bad "adafactor state $af_bytes bytes, AdamW's $ad_bytes"
# shellcheck disable=SC2086
run afc -o training.optim=\"adafactor\" $ckpt -o training.resume_from_checkpoint=\"$tmp/ada/checkpoint-3\"
rc=$?
[ "$rc" -ne 0 ] && grep -q 'optimizer.safetensors holds AdamW state, but training.optim is "adafactor"' "$tmp/afc.log" \
    && ok || { bad "adafactor resuming AdamW state: exit $rc"; cat "$tmp/afc.log"; }

# 2c. gradient_checkpointing (dropout on, bert-tiny's 0.1): the same losses
# and the same final parameters, bit for bit, as the run without it
run ckpt -o training.gradient_checkpointing=true && ok || { bad "gradient_checkpointing run failed"; cat "$tmp/ckpt.log"; }
[ "$(losses ckpt)" = "$(losses base)" ] && ok || bad "gradient_checkpointing: losses $(losses ckpt | tr '\n' ' ') vs $(losses base | tr '\n' ' ')"
cmp -s "$tmp/base/model.safetensors" "$tmp/ckpt/model.safetensors" && ok || bad "gradient_checkpointing changed the model"
"$tfcore" -c "$tmp/tiny.cfg" --dry-run -o training.gradient_checkpointing=\"yes\" >/dev/null 2>"$tmp/gc.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "training.gradient_checkpointing" "$tmp/gc.err" && ok \
    || { bad "gradient_checkpointing = \"yes\": exit $rc"; cat "$tmp/gc.err"; }

# 2d. results.json's memory by category shows each technique's saving:
# checkpointing less activation memory, Adafactor a far smaller optimizer state
python3 - "$tmp/base" "$tmp/ckpt" "$tmp/af" <<'PY' && ok || bad "memory_bytes do not show the savings"
import json, sys
b, c, a = (json.load(open(d + "/results.json"))["tfcore"]["memory_bytes"] for d in sys.argv[1:4])
keys = {"weights", "gradients", "optimizer_states", "activations", "temporaries"}
assert set(b) == keys and set(c) == keys and set(a) == keys, (b, c, a)
assert b["weights"] > 0 and b["gradients"] == b["weights"] and b["optimizer_states"] == 2 * b["gradients"], b
assert c["activations"] < b["activations"] and c["optimizer_states"] == b["optimizer_states"], (b, c)
assert a["optimizer_states"] * 50 < b["optimizer_states"] and a["activations"] == b["activations"], (b, a)
PY

# 3. do_train = false, do_eval = true: the loaded model evaluated, nothing trained or saved
run trained -o training.eval_strategy=\"steps\" -o training.eval_steps=3 && ok || { bad "trained run failed"; cat "$tmp/trained.log"; }
cat >"$tmp/eval.cfg" <<CFG
model = { plugin = "bert"; pretrained = "$tmp/trained"; task = "classification"; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 32; eval_examples = 16; learnable = true; };
training = { output_dir = "$tmp/eval"; do_train = false; do_eval = true; per_device_eval_batch_size = 16; seed = 3; };
CFG
"$tfcore" -c "$tmp/eval.cfg" >"$tmp/eval.log" 2>&1 && ok || { bad "do_train=false run failed"; cat "$tmp/eval.log"; }
python3 - "$tmp/trained" "$tmp/eval" <<'PY' && ok || bad "do_train=false results"
import json, os, sys
t, e = (json.load(open(d + "/results.json")) for d in sys.argv[1:3])
assert "eval_loss" in e and "eval_accuracy" in e, e
assert not any(k.startswith("train_") for k in e) and "epoch" not in e, e
assert e["tfcore"]["global_step"] == 0, e
# the same model on the same eval split as the trained run's last evaluation
assert abs(e["eval_loss"] - t["eval_loss"]) <= 1e-6 * abs(t["eval_loss"]), (e["eval_loss"], t["eval_loss"])
assert e["eval_accuracy"] == t["eval_accuracy"], (e, t)
assert not os.path.exists(sys.argv[2] + "/model.safetensors")
PY
# nothing to run, or a resume without training: one config line, exit 3
"$tfcore" -c "$tmp/eval.cfg" -o training.do_eval=false >/dev/null 2>"$tmp/e2.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "do_train = false and do_eval = false leave nothing to run" "$tmp/e2.err" && ok \
    || { bad "do_train=false do_eval=false: exit $rc"; cat "$tmp/e2.err"; }
"$tfcore" -c "$tmp/eval.cfg" --dry-run -o training.resume_from_checkpoint=last >/dev/null 2>"$tmp/e3.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "resume_from_checkpoint continues training, but do_train = false" "$tmp/e3.err" && ok \
    || { bad "do_train=false with resume: exit $rc"; cat "$tmp/e3.err"; }

# 4. a backend built for ABI 1.1 (no cross_entropy_ex / adamw_ex): --dry-run refuses
#    the keys that need them, naming the key and the backend
abi11="$top_builddir/tests/abi11/.libs"
"$tfcore" -c "$tmp/tiny.cfg" --dry-run -o plugins.path=\"$abi11\" -o backend.plugin=\"cpu11\" >/dev/null 2>"$tmp/a11.err" \
    && ok || { bad "the ABI 1.1 backend does not load"; cat "$tmp/a11.err"; }
"$tfcore" -c "$tmp/tiny.cfg" --dry-run -o plugins.path=\"$abi11\" -o backend.plugin=\"cpu11\" \
    -o training.label_smoothing_factor=0.1 >/dev/null 2>"$tmp/a11.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "training.label_smoothing_factor = 0.1 needs a backend with cross_entropy_ex (plugin ABI 1.2); backend 'cpu11' (ABI 1.1)" "$tmp/a11.err" \
    && ok || { bad "label smoothing on an ABI 1.1 backend: exit $rc"; cat "$tmp/a11.err"; }
"$tfcore" -c "$tmp/tiny.cfg" --dry-run -o plugins.path=\"$abi11\" -o backend.plugin=\"cpu11\" \
    -o training.optim=\"adamw_hf\" >/dev/null 2>"$tmp/a11.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q 'training.optim = "adamw_hf" needs a backend with adamw_ex' "$tmp/a11.err" \
    && ok || { bad "adamw_hf on an ABI 1.1 backend: exit $rc"; cat "$tmp/a11.err"; }
"$tfcore" -c "$tmp/tiny.cfg" --dry-run -o plugins.path=\"$abi11\" -o backend.plugin=\"cpu11\" \
    -o training.optim=\"adafactor\" >/dev/null 2>"$tmp/a11.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q 'training.optim = "adafactor" needs a backend with adafactor (plugin ABI 1.3)' "$tmp/a11.err" \
    && ok || { bad "adafactor on an ABI 1.1 backend: exit $rc"; cat "$tmp/a11.err"; }

echo "test_trainer_options: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
