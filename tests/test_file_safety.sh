#!/bin/sh
# File safety (docs/ARCHITECTURE.md, "File safety"): deleting never follows a
# link; outputs never replace a device node, FIFO or link; a failed re-save
# or final save never destroys what was there; a rerun over a previous run is
# refused unless overwrite_output_dir; squad-eval never overwrites its input;
# load_best_model_at_end makes the best checkpoint the final model. Faults are
# injected with tests/fault_rename.c (LD_PRELOAD). Device nodes need root (CI
# runs as root); those checks skip with a message otherwise.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-safety-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 32; eval_examples = 16; learnable = true; };
training = { max_steps = 8; per_device_train_batch_size = 8; per_device_eval_batch_size = 16;
             learning_rate = 1e-3; logging_steps = 1; save_strategy = "steps"; save_steps = 4; seed = 3; };
CFG
train() { "$tfcore" -c "$tmp/tiny.cfg" "$@"; }

# the fault-injection shim (skipped where it cannot be preloaded, e.g. under ASan)
shim="$tmp/fault_rename.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/tests/fault_rename.c" -ldl 2>"$tmp/cc.err" &&
    LD_PRELOAD="$shim" "$tfcore" --version >/dev/null 2>&1; then :; else
    echo "SKIP (fault injection): cannot build or preload tests/fault_rename.c"; shim=""; fi

# --- 4. overwrite_output_dir: a rerun over a previous run is one clear line, exit 3
train -o training.output_dir="$tmp/run" >"$tmp/run.out" 2>&1 && ok || { bad "first run failed"; tail -3 "$tmp/run.out"; }
cp "$tmp/run/log.jsonl" "$tmp/run.log.before"
train -o training.output_dir="$tmp/run" >/dev/null 2>"$tmp/again.err"
rc=$?
[ "$rc" -eq 3 ] && [ "$(wc -l <"$tmp/again.err")" -eq 1 ] &&
    grep -q "^tfcore: $tmp/run already holds a previous run (.*); set training.overwrite_output_dir = true" "$tmp/again.err" &&
    cmp -s "$tmp/run/log.jsonl" "$tmp/run.log.before" && ok || { bad "rerun without overwrite_output_dir: exit $rc"; cat "$tmp/again.err"; }
train -o training.output_dir="$tmp/run" -o training.resume_from_checkpoint=last >/dev/null 2>&1 && ok ||
    bad "resume_from_checkpoint into the same output_dir was refused"

# a diverging rerun with overwrite_output_dir leaves the previous run's set whole
for f in results.json model.safetensors config.json log.jsonl; do cp "$tmp/run/$f" "$tmp/prev.$f"; done
train -o training.output_dir="$tmp/run" -o training.overwrite_output_dir=true -o training.learning_rate=1e12 \
    -o training.max_grad_norm=0.0 -o training.save_strategy=no >"$tmp/nan.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && ok || { bad "diverging rerun: exit $rc"; tail -3 "$tmp/nan.out"; }
for f in results.json model.safetensors config.json log.jsonl; do
    cmp -s "$tmp/run/$f" "$tmp/prev.$f" && ok || bad "a failed rerun changed the previous run's $f"
done
[ -s "$tmp/run/log.jsonl.new" ] && ok || bad "the failed rerun's log is not in log.jsonl.new"
# a good rerun with overwrite_output_dir replaces the whole set, its log included
train -o training.output_dir="$tmp/run" -o training.overwrite_output_dir=true -o training.seed=4 >"$tmp/re.out" 2>&1 &&
    ! cmp -s "$tmp/run/model.safetensors" "$tmp/prev.model.safetensors" && [ ! -e "$tmp/run/log.jsonl.new" ] &&
    [ "$(grep -c '"loss"' "$tmp/run/log.jsonl")" -eq 8 ] && [ -z "$(ls -A "$tmp/run" | grep '^\.')" ] && ok ||
    { bad "rerun with overwrite_output_dir"; tail -3 "$tmp/re.out"; ls -A "$tmp/run"; }

# --- 1. deleting never follows a link: checkpoint-0 -> a folder outside output_dir
mkdir -p "$tmp/victim/sub" "$tmp/links"
echo keep >"$tmp/victim/a.txt"
echo keep >"$tmp/victim/sub/b.txt"
ln -s "$tmp/victim" "$tmp/links/checkpoint-0"
train -o training.output_dir="$tmp/links" -o training.overwrite_output_dir=true -o training.save_total_limit=1 \
    >"$tmp/links.out" 2>&1 && ok || { bad "run with a linked checkpoint-0 failed"; tail -3 "$tmp/links.out"; }
[ -f "$tmp/victim/a.txt" ] && [ -f "$tmp/victim/sub/b.txt" ] && ok || bad "rotation deleted inside the link's target"
[ ! -e "$tmp/links/checkpoint-0" ] && [ ! -L "$tmp/links/checkpoint-0" ] && [ -d "$tmp/links/checkpoint-8" ] &&
    [ ! -e "$tmp/links/checkpoint-4" ] && ok || bad "rotation kept $(ls "$tmp/links")"
grep -q "checkpoint-0 is a symbolic link: removing the link only, never what it points to" "$tmp/links.out" && ok ||
    bad "no line saying the link was removed, not followed"
# a rerun re-saving a checkpoint that is a link: the link goes, its target stays
ln -s "$tmp/victim" "$tmp/links/checkpoint-4"
train -o training.output_dir="$tmp/links" -o training.overwrite_output_dir=true >/dev/null 2>&1 &&
    [ -f "$tmp/victim/a.txt" ] && [ -f "$tmp/victim/sub/b.txt" ] && [ ! -L "$tmp/links/checkpoint-4" ] &&
    [ -s "$tmp/links/checkpoint-4/trainer_state.json" ] && ok || bad "re-saving over a linked checkpoint-4 followed the link"
# a link inside a checkpoint that a rerun replaces
ln -s "$tmp/victim" "$tmp/links/checkpoint-8/inside"
train -o training.output_dir="$tmp/links" -o training.overwrite_output_dir=true >/dev/null 2>&1 &&
    [ -f "$tmp/victim/a.txt" ] && [ ! -e "$tmp/links/checkpoint-8/inside" ] && ok ||
    bad "re-saving checkpoint-8 followed a link inside it"

# --- 3. a failed re-save keeps the intact checkpoint
if [ -n "$shim" ]; then
    cp "$tmp/run/checkpoint-8/model.safetensors" "$tmp/ck8.before"
    LD_PRELOAD="$shim" TF_TEST_FAIL_RENAME=/checkpoint-8 train -o training.output_dir="$tmp/run" \
        -o training.overwrite_output_dir=true -o training.seed=9 >"$tmp/resave.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "cannot rename .*checkpoint-8.tmp to .*checkpoint-8: " "$tmp/resave.out" && ok ||
        { bad "failed re-save: exit $rc"; tail -3 "$tmp/resave.out"; }
    cmp -s "$tmp/run/checkpoint-8/model.safetensors" "$tmp/ck8.before" && [ -s "$tmp/run/checkpoint-8/trainer_state.json" ] &&
        ok || bad "a failed re-save destroyed the intact checkpoint-8"
fi
# an interrupted re-save / rotation: the old checkpoint comes back, "last" never picks an aside folder
rm -rf "$tmp/run/checkpoint-8.tmp"
mv "$tmp/run/checkpoint-8" "$tmp/run/.checkpoint-8.replaced-99999"
cp -r "$tmp/run/checkpoint-4" "$tmp/run/checkpoint-8.tmp"
cp -r "$tmp/run/checkpoint-4" "$tmp/run/.checkpoint-4.deleting-99999"
train -o training.output_dir="$tmp/run" -o training.resume_from_checkpoint=last >"$tmp/tidy.out" 2>&1 &&
    grep -q "resumed from $tmp/run/checkpoint-8 at step 8" "$tmp/tidy.out" &&
    [ -z "$(ls -A "$tmp/run" | grep -e '^\.' -e '\.tmp$')" ] && ok ||
    { bad "leftovers of an interrupted save were not tidied"; tail -3 "$tmp/tidy.out"; ls -A "$tmp/run"; }

# --- 4. the final set goes in as one unit: a failure moving it in changes nothing
if [ -n "$shim" ]; then
    for f in results.json model.safetensors config.json log.jsonl; do cp "$tmp/run/$f" "$tmp/prev.$f"; done
    # model.safetensors: 1st renameat moves the old one aside, the 2nd (failing) moves the new one in
    LD_PRELOAD="$shim" TF_TEST_FAIL_RENAMEAT=model.safetensors TF_TEST_FAIL_SKIP=1 train -o training.output_dir="$tmp/run" \
        -o training.overwrite_output_dir=true -o training.seed=11 -o training.save_strategy=no >"$tmp/final.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "the final model stays in $tmp/run/.final-set.ready-" "$tmp/final.out" && ok ||
        { bad "failed final save: exit $rc"; tail -3 "$tmp/final.out"; }
    for f in results.json model.safetensors config.json log.jsonl; do
        cmp -s "$tmp/run/$f" "$tmp/prev.$f" && ok || bad "a failed final save changed the previous $f"
    done
    # the next run finds the complete set and finishes putting it in
    ready=$(ls -d "$tmp"/run/.final-set.ready-* 2>/dev/null | head -n 1)
    if [ -n "$ready" ]; then
        cp "$ready/model.safetensors" "$tmp/ready.model"
        train -o training.output_dir="$tmp/run" -o training.resume_from_checkpoint=last >"$tmp/fwd.out" 2>&1 &&
            grep -q "finished putting in the final model" "$tmp/fwd.out" && ok || bad "the ready set was not moved in"
    else bad "no .final-set.ready-* folder after the failed final save"; fi
fi

# --- 2. outputs never replace a device node, FIFO or link; "-" is stdout
printf '{"input_ids": [101, 1000, 5, 102]}\n' >"$tmp/in.jsonl"
predict() { "$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/run" --input "$tmp/in.jsonl" --output "$@"; }
echo old >"$tmp/real.jsonl"
ln -s "$tmp/real.jsonl" "$tmp/link.jsonl"
predict "$tmp/link.jsonl" >/dev/null 2>&1 && [ -L "$tmp/link.jsonl" ] && grep -q '"label"' "$tmp/real.jsonl" && ok ||
    bad "predict --output LINK replaced the link instead of its target"
[ "$(predict - 2>/dev/null | grep -c '"label"')" -eq 1 ] && ok || bad "predict --output - did not print to stdout"
mkdir "$tmp/adir"
predict "$tmp/adir" >/dev/null 2>"$tmp/dir.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "cannot write $tmp/adir: it is a folder; not replacing it" "$tmp/dir.err" && ok ||
    { bad "predict --output FOLDER: exit $rc"; cat "$tmp/dir.err"; }
mkfifo "$tmp/fifo"
timeout 20 cat "$tmp/fifo" >"$tmp/fifo.out" & # a FIFO replaced by a file would leave it waiting
reader=$!
predict "$tmp/fifo" >/dev/null 2>&1 && wait "$reader" && [ -p "$tmp/fifo" ] && grep -q '"label"' "$tmp/fifo.out" && ok ||
    bad "predict --output FIFO did not write through it"
if [ "$(id -u)" -eq 0 ]; then
    mknod "$tmp/null" c 1 3
    predict "$tmp/null" >/dev/null 2>&1 && [ -c "$tmp/null" ] && ok || bad "predict --output DEVICE replaced the node"
    "$tfcore" report "$tmp/run" --svg "$tmp/null" >/dev/null 2>&1 && [ -c "$tmp/null" ] && ok ||
        bad "report --svg DEVICE replaced the node"
    ln -s "$tmp/null" "$tmp/null-link"
    "$tfcore" report "$tmp/run" -o "$tmp/null-link" 2>/dev/null && [ -c "$tmp/null" ] && [ -L "$tmp/null-link" ] && ok ||
        bad "report -o LINK-TO-DEVICE replaced the link or the node"
else
    echo "SKIP (device nodes): mknod needs root"
fi
[ "$("$tfcore" report "$tmp/run" --svg - 2>/dev/null | grep -c '<svg')" -ge 1 ] && ok || bad "report --svg - did not print"

# --- 5. squad-eval never overwrites an input (same file under any name)
sq="$top_srcdir/tests/data/squad"
cp "$sq/mini-v2.0.json" "$tmp/data.json"
cp "$sq/mini-v2.0.pred.json" "$tmp/pred.json"
ln -s "$tmp/data.json" "$tmp/data-link.json"
for out in "$tmp/data.json" "$tmp/data-link.json" "$tmp/pred.json"; do
    "$tfcore" squad-eval "$tmp/data.json" "$tmp/pred.json" --out "$out" >/dev/null 2>"$tmp/sq.err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/sq.err")" -eq 1 ] && grep -q "refusing to overwrite an input" "$tmp/sq.err" &&
        cmp -s "$tmp/data.json" "$sq/mini-v2.0.json" && cmp -s "$tmp/pred.json" "$sq/mini-v2.0.pred.json" && ok ||
        { bad "squad-eval --out $out: exit $rc"; cat "$tmp/sq.err"; }
done
"$tfcore" squad-eval "$tmp/data.json" "$tmp/pred.json" --na-prob "$sq/mini-v2.0.na.json" --out "$tmp/scores.json" 2>/dev/null &&
    cmp -s "$tmp/scores.json" "$sq/mini-v2.0.expected-out.json" && ok || bad "squad-eval --out FILE"
"$tfcore" squad-eval "$tmp/data.json" "$tmp/pred.json" --na-prob "$sq/mini-v2.0.na.json" --out - 2>/dev/null | cmp -s - "$sq/mini-v2.0.expected-out.json" &&
    ok || bad "squad-eval --out -"
cp "$tmp/in.jsonl" "$tmp/in.before"
predict "$tmp/in.jsonl" >/dev/null 2>"$tmp/p.err"
[ $? -eq 2 ] && cmp -s "$tmp/in.jsonl" "$tmp/in.before" && ok || { bad "predict --output INPUT"; cat "$tmp/p.err"; }

echo "test_file_safety: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
