#!/bin/sh
# Bad inputs a careless or hostile user gives tfcore (issue 11's probe): each
# is one line naming what and where, the documented exit code, and never a
# hang, a crash or a silent success. Every command runs under `timeout`, so a
# regression to "blocks forever" fails instead of stalling the suite.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-bad-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
T="timeout 20"

# expect CODE PATTERN CMD...: exit CODE, the last stderr line (the error; a
# run logs progress before it) matching PATTERN (grep -E)
expect() {
    code=$1 pattern=$2
    shift 2
    $T "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq "$code" ] && tail -n 1 "$tmp/err" | grep -Eq -- "$pattern"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $* -> exit $rc (want $code), stderr:"
        sed 's/^/    /' "$tmp/err" | head -10
        echo "    (wanted a last line matching /$pattern/)"
    fi
}
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

vocab="$top_srcdir/tests/data/tokenizer/vocab.txt"
mkfifo "$tmp/fifo" "$tmp/fifo.csv"
cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 16; eval_examples = 8; };
training = { output_dir = "$tmp/run"; max_steps = 2; per_device_train_batch_size = 8;
             save_strategy = "steps"; save_steps = 2; logging_steps = 1; };
CFG

# --- 11. a FIFO (or a folder) where a file is read: checked before reading ---
expect 3 "fifo: not a regular file \(fifo\)" "$tfcore" -c "$tmp/fifo" --dry-run
expect 3 "$tmp: not a regular file \(directory\)" "$tfcore" -c "$tmp" --dry-run
data_cfg() { # DATA-SECTION [MODEL-KEYS]
    printf 'model = { plugin = "bert"; preset = "bert-tiny"; %s };\ndata = { %s };\n' "${2:-}" "$1"
    # the tiny run's folder: these runs must stop at their input, not at overwrite_output_dir
    printf 'training = { output_dir = "%s/run"; max_steps = 1; overwrite_output_dir = true; };\n' "$tmp"
}
printf 'review,sentiment\n"good",positive\n' >"$tmp/x.csv"
data_cfg "plugin = \"imdb\"; path = \"$tmp/fifo.csv\"; vocab_file = \"$vocab\";" >"$tmp/d1.cfg"
expect 5 "fifo.csv: not a regular file \(fifo\)" "$tfcore" -c "$tmp/d1.cfg"
data_cfg "plugin = \"imdb\"; path = \"$tmp/x.csv\"; vocab_file = \"$tmp/fifo\";" >"$tmp/d2.cfg"
expect 5 "fifo: not a regular file \(fifo\)" "$tfcore" -c "$tmp/d2.cfg"
data_cfg "plugin = \"squad\"; train_file = \"$tmp/fifo\"; vocab_file = \"$vocab\";" \
    'task = "question-answering";' >"$tmp/d3.cfg"
expect 5 "fifo: not a regular file \(fifo\)" "$tfcore" -c "$tmp/d3.cfg"
mkdir "$tmp/pre"
ln -s ../fifo "$tmp/pre/config.json"
data_cfg 'plugin = "synthetic";' | sed "s|preset = \"bert-tiny\"|pretrained = \"$tmp/pre\"|" >"$tmp/d4.cfg"
expect 5 "config.json: not a regular file \(fifo\)" "$tfcore" -c "$tmp/d4.cfg"
expect 5 "fifo: not a regular file \(fifo\)" "$tfcore" tokenize --vocab "$tmp/fifo"
expect 5 "fifo: not a regular file \(fifo\)" "$tfcore" squad-eval "$tmp/fifo" "$tmp/fifo"
mkdir "$tmp/rep"
ln -s ../fifo "$tmp/rep/results.json"
expect 5 "results.json: not a regular file \(fifo\)" "$tfcore" report "$tmp/rep"

# --- 12. @include of a folder (libconfig's scanner would exit the process), a
#     FIFO (it would block), nested; a missing one keeps libconfig's message ---
mkdir -p "$tmp/inc/sub"
printf '@include "/etc"\n' >"$tmp/inc0.cfg" # absolute: libconfig 1.5 opens it only from the config's folder
expect 3 "^tfcore: inc0.cfg:1: @include \"/etc\": /etc: not a regular file \(directory\)" env -C "$tmp" "$tfcore" -c inc0.cfg --dry-run
printf 'model = { plugin = "bert"; };\n@include "../fifo"\n' >"$tmp/inc/a.cfg"
expect 3 "inc/a.cfg:2: @include \"../fifo\": .*fifo: not a regular file \(fifo\)" "$tfcore" -c "$tmp/inc/a.cfg" --dry-run
printf '/* @include "sub" */\n@include "b.cfg"\n' >"$tmp/inc/top.cfg"
printf '\n@include "sub"\n' >"$tmp/inc/b.cfg"
expect 3 "inc/b.cfg:2: @include \"sub\": .*inc/sub: not a regular file \(directory\)" "$tfcore" -c "$tmp/inc/top.cfg" --dry-run
printf '@include "nothere.cfg"\n' >"$tmp/inc/c.cfg"
expect 3 "c.cfg:1: cannot open include file '.*nothere.cfg': No such file" "$tfcore" -c "$tmp/inc/c.cfg" --dry-run

# --- 15. a UTF-8 byte order mark at the start of a config is accepted ---
printf '\357\273\277' >"$tmp/bom.cfg"
cat "$tmp/tiny.cfg" >>"$tmp/bom.cfg"
$T "$tfcore" -c "$tmp/bom.cfg" --dry-run >"$tmp/out" 2>&1 && ok || { bad "config with a BOM"; tail -2 "$tmp/out"; }

# --- 13. stdout that cannot be written: exit 1 and one line, never exit 0 ---
full() { # CMD...: output to /dev/full; one error line (besides warnings)
    $T "$@" >/dev/full 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && [ "$(grep -cv "warning:\|^tfcore: model: " "$tmp/err")" -eq 1 ] \
        && grep -Eq "^tfcore.*(standard output|stdout|writing the result)" "$tmp/err"; then ok; else
        bad "$* >/dev/full -> exit $rc (want 1), stderr:"; sed 's/^/    /' "$tmp/err" | head -5
    fi
}
if [ -w /dev/full ]; then
    full "$tfcore" --help
    full "$tfcore" --version
    full "$tfcore" plugins
    full "$tfcore" plugins --json
    full "$tfcore" -c "$tmp/tiny.cfg" --dry-run
    full "$tfcore" bench -c "$tmp/tiny.cfg" --steps 1 --warmup 0 --json
    echo hello | full "$tfcore" tokenize --vocab "$vocab"
    full "$tfcore" squad-eval "$top_srcdir/tests/data/squad/mini-v1.1.json" "$top_srcdir/tests/data/squad/mini-v1.1.pred.json"
    full "$tfcore" report "$top_srcdir/tests/data/report/1gpu" "$top_srcdir/tests/data/report/ddp2"
fi
# a closed stdout with nothing to write is not an error (GNU close_stdout's rule)
$T "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o training.seed=x >&- 2>/dev/null
[ $? -eq 3 ] && ok || bad "closed stdout changed a config error's exit code"

# a short run gives a checkpoint and a model folder to break
if $T "$tfcore" -c "$tmp/tiny.cfg" >"$tmp/run.out" 2>&1 && [ -s "$tmp/run/checkpoint-2/trainer_state.json" ]; then ok; else
    bad "the tiny run"; tail -3 "$tmp/run.out"; fi
mkdir "$tmp/model"
cp "$tmp/run/config.json" "$tmp/run/model.safetensors" "$tmp/model/"
ln -s ../fifo "$tmp/model/vocab.txt"
data_cfg "plugin = \"imdb\"; path = \"$tmp/x.csv\";" | sed "s|preset = \"bert-tiny\"|pretrained = \"$tmp/model\"|" >"$tmp/d5.cfg"
expect 5 "vocab.txt: not a regular file \(fifo\)" "$tfcore" -c "$tmp/d5.cfg"
cp -r "$tmp/run/checkpoint-2" "$tmp/ck"
rm "$tmp/ck/trainer_state.json"
expect 5 "ck/trainer_state.json: cannot open trainer state: No such file" "$tfcore" -c "$tmp/tiny.cfg" \
    -o training.output_dir="$tmp/r2" -o training.resume_from_checkpoint="$tmp/ck" -o training.max_steps=3
ln -s ../fifo "$tmp/ck/trainer_state.json"
expect 5 "ck/trainer_state.json: not a regular file \(fifo\)" "$tfcore" -c "$tmp/tiny.cfg" \
    -o training.output_dir="$tmp/r2" -o training.resume_from_checkpoint="$tmp/ck" -o training.max_steps=3
rm "$tmp/ck/trainer_state.json"
# the checkpoint's data_order (resume on another world size): malformed, or other training data
python3 - "$tmp/run/checkpoint-2/trainer_state.json" "$tmp/ck/trainer_state.json" '"x"' <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["data_order"]["train_rows"] = json.loads(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PY
expect 5 "ck/trainer_state.json: data_order must hold the integers train_rows, .*\(Expected integer, got string\)" "$tfcore" -c "$tmp/tiny.cfg" \
    -o training.output_dir="$tmp/r2" -o training.resume_from_checkpoint="$tmp/ck" -o training.max_steps=3
python3 - "$tmp/run/checkpoint-2/trainer_state.json" "$tmp/ck/trainer_state.json" 12345 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["data_order"]["train_rows"] = json.loads(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))
PY
expect 5 "ck/trainer_state.json: the checkpoint was trained on 12345 training rows, this run has [0-9]+: it can only resume on the same training data" \
    "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/r2" -o training.resume_from_checkpoint="$tmp/ck" \
    -o training.max_steps=3
cp "$tmp/run/checkpoint-2/trainer_state.json" "$tmp/ck/"
rm "$tmp/ck/model.safetensors"
ln -s ../fifo "$tmp/ck/model.safetensors"
expect 5 "ck/model.safetensors: not a regular file \(fifo\)" "$tfcore" -c "$tmp/tiny.cfg" \
    -o training.output_dir="$tmp/r2" -o training.resume_from_checkpoint="$tmp/ck" -o training.max_steps=3
expect 5 "fifo: not a regular file \(fifo\)" "$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/run" \
    --input "$tmp/fifo" --output "$tmp/p.jsonl"
# 15: "last" ignores a checkpoint-N whose N overflows (no run reaches it)
cp -r "$tmp/run" "$tmp/r5"
mkdir "$tmp/r5/checkpoint-99999999999999999999"
$T "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/r5" -o training.resume_from_checkpoint=last \
    -o training.max_steps=2 >"$tmp/out" 2>&1 && grep -q "resumed from .*r5/checkpoint-2 at step 2" "$tmp/out" \
    && ok || { bad "resume from last beside checkpoint-99999999999999999999"; tail -2 "$tmp/out"; }
# 15: a resumed run drops the log lines past its checkpoint: each step once
$T "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/r6" -o training.max_steps=4 >"$tmp/out" 2>&1 \
    && $T "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/r6" -o training.max_steps=4 \
        -o training.resume_from_checkpoint="$tmp/r6/checkpoint-2" >"$tmp/out" 2>&1 \
    && python3 - "$tmp/r6/log.jsonl" <<'PY' && ok || { bad "log.jsonl after a resume"; tail -3 "$tmp/out"; cat "$tmp/r6/log.jsonl"; }
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if "loss" in json.loads(l)]
assert steps == [1, 2, 3, 4], steps
PY
# 15: an error inside the model (a token type outside its table) names the input line
printf '{"input_ids": [101, 5, 102]}\n{"input_ids": [101, 5, 102], "token_type_ids": [0, 7, 0]}\n' >"$tmp/tt.jsonl"
expect 5 "tt.jsonl:2: .*id 7 .*outside \[0, 2\)" "$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/run" \
    --input "$tmp/tt.jsonl" --output "$tmp/p.jsonl"

mkdir "$tmp/plug"
mkfifo "$tmp/plug/tfcore-model-pipe.so"
expect 4 "tfcore-model-pipe.so: not a regular file \(fifo\)" "$tfcore" -c "$tmp/tiny.cfg" --dry-run \
    -o plugins.path="$tmp/plug" -o model.plugin=pipe
$T "$tfcore" plugins --path "$tmp/plug" >"$tmp/out" 2>&1 && grep -q "tfcore-model-pipe.so: not a regular file (fifo)" "$tmp/out" \
    && ok || bad "plugins with a FIFO candidate"

# --- 15. small ones ---
long=0.$(printf '1%.0s' $(seq 120))
$T "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o training.learning_rate="$long" >"$tmp/out" 2>&1 \
    && grep -q "learning_rate = 0.111111" "$tmp/out" && ok || { bad "a 120-digit float in -o"; tail -1 "$tmp/out"; }
$T "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o training.logging_steps=0.5 >"$tmp/out" 2>&1 \
    && grep -q "logging_steps = 0.5" "$tmp/out" && ok || { bad "-o logging_steps=0.5 over an int"; tail -1 "$tmp/out"; }
expect 3 "training.seed must be an integer, got float 0.5" "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o training.seed=0.5
expect 3 "training.learning_rate must be in \[0, 3.40282.*e\+38\], got 1e\+308" "$tfcore" -c "$tmp/tiny.cfg" \
    --dry-run -o training.learning_rate=1e308
expect 2 "tfcore bench: --steps needs an integer in \[1, 1000000\], got '99999999999999999999'" \
    "$tfcore" bench -c "$tmp/tiny.cfg" --steps 99999999999999999999
expect 3 "model.hidden_size=65536: this model has [0-9.]*e\+12 parameters .*more than this machine's memory" \
    "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o model.hidden_size=65536 -o model.num_hidden_layers=256 \
    -o model.num_attention_heads=1 -o model.intermediate_size=4096
mkdir -p "$tmp/pre2/config.json"
sed "s|$tmp/pre\"|$tmp/pre2\"|" "$tmp/d4.cfg" >"$tmp/d6.cfg"
expect 5 "pre2/config.json: not a regular file \(directory\)" "$tfcore" -c "$tmp/d6.cfg" --dry-run
TFCORE_LOG=garbage $T "$tfcore" --version >/dev/null 2>"$tmp/err"
grep -q "^tfcore: warning: TFCORE_LOG='garbage' is not a log level (debug, info, warn, error, quiet)" "$tmp/err" \
    && ok || { bad "TFCORE_LOG=garbage"; cat "$tmp/err"; }

# --- 16. plugins that end the process while loading (a constructor calling
#     exit(0), an entry following a bad pointer) on the plugin path: a command
#     loads only the plugins it names, so they cannot touch it; `tfcore
#     plugins` loads each one in a child first and lists them as rejected ---
broken="$top_builddir/tests/plugins/broken/.libs"
TFCORE_PLUGIN_PATH=$broken $T "$tfcore" -c "$tmp/tiny.cfg" --dry-run >"$tmp/out" 2>&1 \
    && grep -q "plugins resolved" "$tmp/out" && ok || { bad "dry run beside broken plugins"; tail -3 "$tmp/out"; }
TFCORE_PLUGIN_PATH=$broken $T "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/r3" >"$tmp/out" 2>&1 \
    && [ -s "$tmp/r3/results.json" ] && ok || { bad "run beside broken plugins"; tail -3 "$tmp/out"; }
TFCORE_PLUGIN_PATH=$broken $T "$tfcore" plugins >"$tmp/out" 2>&1 \
    && grep -q "tfcore-model-exitctor.so: ended the process while loading (exit status 0" "$tmp/out" \
    && grep -q "tfcore-model-crashentry.so: crashed while loading (signal 11" "$tmp/out" \
    && grep -q "^model  *bert" "$tmp/out" && ok || { bad "plugins beside broken plugins"; cat "$tmp/out"; }
TFCORE_PLUGIN_PATH=$broken $T "$tfcore" plugins --json >"$tmp/out" 2>&1 && python3 - "$tmp/out" <<'PY' && ok || bad "plugins --json beside broken plugins"
import json, sys
d = json.load(open(sys.argv[1]))
why = {r["path"].rsplit("/", 1)[1]: r["why"] for r in d["rejected"]}
assert "crashed while loading" in why["tfcore-model-crashentry.so"], why
assert "ended the process while loading" in why["tfcore-model-exitctor.so"], why
assert any(p["name"] == "bert" for p in d["plugins"])
PY
# a misspelt name is suggested from the file names, without loading the others
expect 4 "no model plugin named 'bertt' \(did you mean 'bert'\?\); model plugins found: .*exitctor" \
    env TFCORE_PLUGIN_PATH="$broken" "$tfcore" -c "$tmp/tiny.cfg" --dry-run -o model.plugin=bertt

echo "test_bad_input: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
