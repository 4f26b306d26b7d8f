#!/bin/sh
# Crash consistency of checkpoints (docs/ARCHITECTURE.md, "File safety"),
# proven end to end through `tfcore train` on bert-tiny:
#  - kill -9 of the writer at many points of a checkpoint save (every
#    rename, a spread of writes, fsyncs and closes into checkpoint-8.tmp,
#    the rotation's removal of an older checkpoint, the re-save of an
#    existing checkpoint), raised by tests/fault_io.c at the K-th call, and
#    kill -9 from outside at several delays during a run that saves at every
#    step;
#  - a failed write (ENOSPC, EIO) injected into write, fsync and close of
#    each checkpoint file, and a real full disk (a small tmpfs; skipped where
#    it cannot be mounted), during a save and from the first log.jsonl line;
# after each: every checkpoint-N folder left is byte for byte the
# uninterrupted run's (complete, loadable), no checkpoint-N is half-written,
# a failed write is one line naming the file, and resume_from_checkpoint =
# "last" continues to the uninterrupted run's final parameters, bit for bit.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
diff_tool="$top_builddir/tests/params_diff"
tmp=$(mktemp -d /tmp/tfcore-ckfault-XXXXXX)
mnt=""
cleanup() {
    [ -z "$mnt" ] || umount "$mnt" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
unset TF_TEST_IO_PATH TF_TEST_IO_CALL TF_TEST_IO_AT TF_TEST_IO_FAULT

shim="$tmp/fault_io.so"
if ! ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/tests/fault_io.c" -ldl 2>"$tmp/cc.err" ||
    ! LD_PRELOAD="$shim" "$tfcore" --version >/dev/null 2>&1; then
    echo "SKIP: cannot build or preload tests/fault_io.c (e.g. under ASan)"
    cat "$tmp/cc.err"
    exit 77
fi

# 8 steps, a checkpoint every SAVE steps (default 4: checkpoint-4, checkpoint-8)
cat >"$tmp/tiny.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 64; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { max_steps = 8; per_device_train_batch_size = 8; learning_rate = 1e-3; logging_steps = 1;
             eval_strategy = "no"; save_strategy = "steps"; save_steps = 4; seed = 3; };
CFG

# run_rc DIR [tfcore args]: exit status into $rc, stdout and stderr into
# $tmp/logs/ (err_of DIR names the latter: never on a full disk under test)
mkdir "$tmp/logs"
err_of() { echo "$tmp/logs/${1##*/}.err"; }
run_rc() {
    dir=$1
    shift
    timeout 60 "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="\"$dir\"" "$@" >"$tmp/logs/${dir##*/}.out" \
        2>"$(err_of "$dir")"
    rc=$?
}

# the uninterrupted runs: checkpoints at 4 and 8, and at every step
run_rc "$tmp/full"
[ $rc = 0 ] || { bad "the uninterrupted run exited $rc"; tail -n 3 "$(err_of "$tmp/full")"; exit 1; }
run_rc "$tmp/full1" -o training.save_steps=1
[ $rc = 0 ] || { bad "the uninterrupted run saving every step exited $rc"; tail -n 3 "$(err_of "$tmp/full1")"; exit 1; }

# same_checkpoints DIR WHAT: every checkpoint-N folder in DIR is byte for byte
# full1's checkpoint-N, and no other entry is named checkpoint-N
same_checkpoints() {
    good=1
    for ck in "$1"/checkpoint-*; do
        [ -e "$ck" ] || continue
        name=${ck##*/}
        case "$name" in
        checkpoint-*.tmp) continue ;; # a partial save: never resumed from (list_checkpoints)
        esac
        if [ ! -d "$tmp/full1/$name" ]; then
            good=0; bad "$2: unexpected entry $name"; continue
        fi
        for f in "$tmp/full1/$name"/*; do
            cmp -s "$f" "$ck/${f##*/}" || { good=0; bad "$2: $name/${f##*/} is not the uninterrupted run's"; }
        done
        [ "$(ls -A "$ck" | wc -l)" -eq "$(ls -A "$tmp/full1/$name" | wc -l)" ] ||
            { good=0; bad "$2: $name holds $(ls -A "$ck" | tr '\n' ' ')"; }
    done
    [ $good = 0 ] || ok
}

# resumed DIR WHAT: resume "last" to the end: the uninterrupted run's final
# parameters bit for bit, the same checkpoints, nothing partial left behind
resumed() {
    run_rc "$1" -o training.resume_from_checkpoint='"last"'
    if [ $rc != 0 ]; then bad "$2: resuming \"last\" exited $rc"; tail -n 3 "$(err_of "$1")"; return; fi
    grep -q "resumed from $1/checkpoint-[48] at step [48]" "$(err_of "$1")" && ok ||
        { bad "$2: no 'resumed from' line naming a checkpoint"; grep resumed "$(err_of "$1")"; }
    if out=$("$diff_tool" "$tmp/full/model.safetensors" "$1/model.safetensors" 0); then ok; else
        bad "$2: the resumed run's parameters differ from the uninterrupted run's: $out"; fi
    same_checkpoints "$1" "$2 (after resuming)"
    left=$(ls -A "$1" | grep -E '^\.|\.tmp' | tr '\n' ' ')
    [ -z "$left" ] && ok || bad "$2: left after resuming: $left"
}

# killed DIR WHAT: the run was killed by the shim (status 137, its line)
killed() {
    if [ $rc != 137 ] || ! grep -q "^fault_io: SIGKILL at" "$(err_of "$1")"; then
        bad "$2: expected a SIGKILL from the shim, exit status $rc"; tail -n 3 "$(err_of "$1")"; return 1
    fi
    ok
}

# kill_at CALL TEXT K [tfcore args]: SIGKILL at the K-th CALL on a path holding TEXT;
# status 2 when the run has fewer such calls (it finished)
kill_at() {
    call=$1 text=$2 k=$3
    shift 3
    what="SIGKILL at $call #$k on *$text*${1:+ ($*)}"
    d="$tmp/kill-$call-$k-$(printf '%s' "$text" | tr -c 'a-z0-9' _)"
    rm -rf "$d"
    [ -z "${SEED_DIR:-}" ] || cp -a "$SEED_DIR" "$d"
    TF_TEST_IO_PATH=$text TF_TEST_IO_CALL=$call TF_TEST_IO_AT=$k TF_TEST_IO_FAULT=KILL LD_PRELOAD="$shim" \
        run_rc "$d" "$@"
    if [ $rc = 0 ] && ! grep -q "^fault_io:" "$(err_of "$d")"; then return 2; fi
    killed "$d" "$what" || return 1
    # nothing under a checkpoint's own name is partial, and "last" is whole
    same_checkpoints "$d" "$what"
    [ -d "$d/checkpoint-4" ] || [ -d "$d/checkpoint-8" ] && ok || bad "$what: no complete checkpoint left"
    resumed "$d" "$what"
}

# --- 1. kill -9 inside the save of checkpoint-8 (checkpoint-4 is the previous one)
for call in rename write fsync close; do
    case $call in
    rename) ks="1 2 3 4 5 6 7 8" ;;
    write) ks="1 2 3 5 8 13 21 34 55 89" ;;
    *) ks="1 2 3 5 7 9 11 13 15" ;;
    esac
    for k in $ks; do
        kill_at "$call" checkpoint-8 "$k"
        [ $? != 2 ] || break
    done
    [ "$k" -gt 3 ] && ok || bad "kill points: only $((k - 1)) ${call} calls in the save of checkpoint-8"
done

# --- 2. kill -9 in the rotation (save_total_limit = 1): before checkpoint-4
# is moved aside, while its files are removed, before its folder goes
kill_at rename .checkpoint-4.deleting 1 -o training.save_total_limit=1
kill_at unlink optimizer.safetensors 1 -o training.save_total_limit=1
kill_at unlink .checkpoint-4.deleting 1 -o training.save_total_limit=1

# --- 3. kill -9 re-saving an existing checkpoint-8 (a rerun from checkpoint-4
# into the previous run's folder): at every rename, the old one moved aside included
SEED_DIR="$tmp/full"
for k in 1 2 3 4 5 6 7 8; do
    kill_at rename checkpoint-8 "$k" -o training.resume_from_checkpoint="\"$tmp/kill-rename-$k-checkpoint_8/checkpoint-4\""
    [ $? != 2 ] || break
done
[ "$k" -gt 5 ] && ok || bad "re-save kill points: only $((k - 1)) renames"
unset SEED_DIR

# --- 4. kill -9 from outside, saving at every step (save_total_limit = 2):
# once step N is logged (its save follows), after a few delays
n_out=0
for at in 2:0 3:0.05 5:0.1 6:0.02 7:0.2; do
    step=${at%%:*} delay=${at#*:}
    d="$tmp/outside-$step"
    "$tfcore" -c "$tmp/tiny.cfg" -o training.output_dir="\"$d\"" -o training.save_steps=1 \
        -o training.save_total_limit=2 >/dev/null 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ] && kill -0 $pid 2>/dev/null &&
        ! { [ -f "$d/log.jsonl" ] && [ "$(wc -l <"$d/log.jsonl")" -ge "$step" ]; }; do
        sleep 0.05
        i=$((i + 1))
    done
    sleep "$delay"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    rc=$?
    [ $rc = 137 ] || continue # it finished first: nothing to prove here
    n_out=$((n_out + 1))
    what="kill -9 after step $step is logged, +$delay s"
    same_checkpoints "$d" "$what"
    if ls "$d" | grep -qx 'checkpoint-[0-9]*'; then ok; else bad "$what: no complete checkpoint left"; continue; fi
    run_rc "$d" -o training.resume_from_checkpoint='"last"' -o training.save_steps=1 -o training.save_total_limit=2
    if [ $rc = 0 ] && out=$("$diff_tool" "$tmp/full/model.safetensors" "$d/model.safetensors" 0); then ok; else
        bad "$what: resuming \"last\" exited $rc ${out:-}"; tail -n 3 "$(err_of "$d")"; fi
done
[ $n_out -ge 3 ] && ok || bad "kill -9 from outside: only $n_out of 5 runs were still running"

# --- 5. failed writes: one line naming the file, checkpoint-4 untouched, no
# checkpoint-8 nor checkpoint-8.tmp left; "last" resumes from checkpoint-4
# fault CALL FILE K ERRNO MESSAGE
fault() {
    call=$1 file=$2 k=$3 errno=$4 msg=$5
    what="$errno at $call #$k on $file"
    d="$tmp/fault-$call-$errno-$file"
    TF_TEST_IO_PATH="checkpoint-8.tmp/$file" TF_TEST_IO_CALL=$call TF_TEST_IO_AT=$k TF_TEST_IO_FAULT=$errno \
        LD_PRELOAD="$shim" run_rc "$d"
    line=$(grep -v '^fault_io:' "$(err_of "$d")" | tail -n 1)
    if [ $rc = 1 ] && grep -q "^fault_io: failing $call" "$(err_of "$d")" &&
        printf '%s\n' "$line" | grep -q "^tfcore: saving $d/checkpoint-8: .*$d/checkpoint-8.tmp/$file.*: $msg\$"; then
        ok
    else
        bad "$what: exit $rc, last line: $line"
    fi
    [ ! -e "$d/checkpoint-8" ] && [ ! -e "$d/checkpoint-8.tmp" ] && [ ! -e "$d/model.safetensors" ] && ok ||
        bad "$what: left $(ls -A "$d" | tr '\n' ' ')"
    same_checkpoints "$d" "$what"
    resumed "$d" "$what"
}
fault write model.safetensors 3 ENOSPC "No space left on device"
fault write optimizer.safetensors 2 EIO "Input/output error"
fault write trainer_state.json 1 ENOSPC "No space left on device"
fault fsync optimizer.safetensors 1 EIO "Input/output error"
fault fsync config.json 1 ENOSPC "No space left on device"
fault close model.safetensors 1 EIO "Input/output error"
fault close trainer_state.json 1 ENOSPC "No space left on device"

# a failed re-save keeps the existing checkpoint-8 as it was
d="$tmp/fault-resave"
cp -a "$tmp/full" "$d"
TF_TEST_IO_PATH="checkpoint-8.tmp/optimizer.safetensors" TF_TEST_IO_CALL=write TF_TEST_IO_AT=2 TF_TEST_IO_FAULT=ENOSPC \
    LD_PRELOAD="$shim" run_rc "$d" -o training.resume_from_checkpoint="\"$d/checkpoint-4\""
[ $rc = 1 ] && grep -q "^tfcore: saving $d/checkpoint-8: cannot write $d/checkpoint-8.tmp/optimizer.safetensors: .*No space left on device\$" "$(err_of "$d")" &&
    ok || { bad "failed re-save: exit $rc"; tail -n 2 "$(err_of "$d")"; }
same_checkpoints "$d" "failed re-save"
[ -d "$d/checkpoint-8" ] && [ ! -e "$d/checkpoint-8.tmp" ] && ok || bad "failed re-save: left $(ls -A "$d" | tr '\n' ' ')"
resumed "$d" "failed re-save"

# --- 6. a real full disk: a tmpfs with room for checkpoint-4 but not checkpoint-8
# (needs root and mount; skipped otherwise), then room again and resume
mkdir -p "$tmp/mnt"
if mount -t tmpfs -o size=64m tmpfs "$tmp/mnt" 2>/dev/null; then
    mnt="$tmp/mnt"
    d="$mnt/run"
    run_rc "$d"
    line=$(tail -n 1 "$(err_of "$d")")
    [ $rc = 1 ] && printf '%s\n' "$line" |
        grep -q "^tfcore: saving $d/checkpoint-8: cannot write $d/checkpoint-8.tmp/[a-z.]*safetensors: writing .* failed at byte [0-9]*: No space left on device\$" &&
        ok || bad "full disk: exit $rc, last line: $line"
    [ -d "$d/checkpoint-4" ] && [ ! -e "$d/checkpoint-8" ] && [ ! -e "$d/checkpoint-8.tmp" ] && ok ||
        bad "full disk: left $(ls -A "$d" | tr '\n' ' ')"
    same_checkpoints "$d" "full disk"
    if mount -o remount,size=256m "$mnt"; then resumed "$d" "full disk, then room"; else bad "cannot grow the tmpfs"; fi
    # a disk full from the start: the first log.jsonl line fails, and says so
    # (it used to be lost silently, the run going on without its log)
    d="$mnt/full-from-start"
    dd if=/dev/zero of="$mnt/filler" bs=1M count=300 2>/dev/null
    run_rc "$d"
    line=$(tail -n 1 "$(err_of "$d")")
    [ $rc = 1 ] && [ "$line" = "tfcore: cannot write $d/log.jsonl: No space left on device" ] && ok ||
        bad "disk full from the start: exit $rc, last line: $line"
else
    echo "SKIP (full disk): cannot mount a tmpfs here"
fi

echo "checkpoint faults: $pass passed, $fail failed"
[ $fail = 0 ]
