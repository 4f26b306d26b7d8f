#!/bin/sh
# Preemption-safe checkpoints (core/runtime/stop_signal.h), end to end through
# `tfcore train` on bert-tiny with dropout on:
#  - a stop signal mid-training (TFCORE_TEST_SIGNAL_AT_STEP: rank 0 raises it
#    itself during a step, so the others learn of it only through the step's
#    all-reduce) for 1 worker, dp-master x2 and mpi x2, SIGTERM, SIGUSR1 and
#    SIGINT: every rank stops after the same step, a checkpoint of that step
#    is written, one line says so, the exit status is 75; resuming with
#    resume_from_checkpoint = "last" ends with the uninterrupted run's
#    parameters, bit for bit;
#  - SIGTERM pinned to each phase of a step (forward, backward, all-reduce,
#    optimizer, evaluation; TFCORE_TEST_SIGNAL_PHASE) for 1 worker, mpi x2
#    and the process launcher x2: the same;
#  - a real `kill -TERM` to the launcher of 1 worker, mpi x2 (the launcher
#    passes it on through mpirun) and the process launcher x2: the same;
#  - Ctrl-C on a terminal (a pty) with the process launcher and mpi x2: one
#    orderly stop, not a second signal's abort;
#  - conf/slurm/train.sbatch (bash -n, shellcheck): SIGUSR1 to the script
#    stops tfcore, the script requeues (a stand-in scontrol), and the requeued
#    run resumes to the uninterrupted run's parameters;
#  - a second signal during that save ends the process at once, and the
#    previous checkpoint is the one "last" resumes from, to the same end.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader"
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
diff_tool="$top_builddir/tests/params_diff"
tmp=$(mktemp -d /tmp/tfcore-preempt-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
export TFCORE_PLUGIN_PATH="$top_builddir/tests/comm-shm/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
have_plugin() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }
unset TFCORE_TEST_SIGNAL TFCORE_TEST_SIGNAL_AT_STEP TFCORE_TEST_SIGNAL_IN_SAVE TFCORE_TEST_SIGNAL_PHASE

# cfg NAME STEPS SAVE_STEPS [COMM_SECTION]: bert-tiny, dropout on (the default 0.1)
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = $2; per_device_train_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01; logging_steps = 1;
             eval_strategy = "no"; save_strategy = "steps"; save_steps = $3; seed = 11; };
${4:-}
CFG
}

# run NAME [tfcore args]: status into $rc, output into NAME.out
run() {
    t0=$(date +%s)
    name=$1
    shift
    timeout 60 "$tfcore" -c "$tmp/$name.cfg" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    [ -z "${TIMING:-}" ] || echo "$name $* : $(($(date +%s) - t0)) s rc $rc"
}

# full NAME: the uninterrupted run (its own output_dir NAME_full)
full() {
    run "$1" -o training.output_dir="\"$tmp/$1_full\""
    [ $rc = 0 ] || { bad "$1: the uninterrupted run exited $rc"; tail -n 5 "$tmp/$1.out"; }
}

# stopped NAME SIGNAME: the run exited 75 after a checkpoint of the step it names
stopped() {
    if [ $rc != 75 ]; then bad "$1: exit status $rc, expected 75"; tail -n 8 "$tmp/$1.out"; return 1; fi
    line=$(grep "stopped by $2 after step" "$tmp/$1.out" | head -n 1)
    step=$(printf '%s\n' "$line" | sed -n 's/.*after step \([0-9]*\);.*/\1/p')
    if [ -z "$step" ] || ! printf '%s\n' "$line" | grep -q "checkpoint saved to $tmp/$1/checkpoint-$step; resume with training.resume_from_checkpoint = \"last\""; then
        bad "$1: no stop line naming $2 and the checkpoint"; tail -n 5 "$tmp/$1.out"; return 1
    fi
    if [ -f "$tmp/$1/checkpoint-$step/trainer_state.json" ]; then ok; else bad "$1: no checkpoint-$step"; return 1; fi
    [ ! -f "$tmp/$1/model.safetensors" ] || bad "$1: a stopped run wrote the final model"
}

# resumed NAME: resume "last" to the end; the parameters equal NAME_full's bit for bit
resumed() {
    run "$1" -o training.resume_from_checkpoint='"last"'
    if [ $rc != 0 ]; then bad "$1: the resumed run exited $rc"; tail -n 5 "$tmp/$1.out"; return 1; fi
    if out=$("$diff_tool" "$tmp/$1_full/model.safetensors" "$tmp/$1/model.safetensors" 0); then ok; else
        bad "$1: resumed run differs from the uninterrupted one: $out"; fi
}

# at_step NAME SIGNAL STEP: rank 0 raises SIGNAL during STEP
at_step() {
    full "$1"
    TFCORE_TEST_SIGNAL=$2 TFCORE_TEST_SIGNAL_AT_STEP=$3 run "$1"
    stopped "$1" "SIG$2" && resumed "$1"
}

# killed NAME SIGNAME: kill -TERM to the launcher once log.jsonl has 2 lines
killed() {
    full "$1"
    timeout 60 "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 300 ] && ! { [ -f "$tmp/$1/log.jsonl" ] && [ "$(wc -l <"$tmp/$1/log.jsonl")" -ge 2 ]; }; do
        sleep 0.1
        i=$((i + 1))
    done
    kill -TERM $pid
    wait $pid
    rc=$?
    stopped "$1" "$2" && resumed "$1"
}

# --- 1. a signal at a given step: every launch mode, every signal ------------
cfg one 8 3 && at_step one TERM 5
cfg one_int 8 3 && at_step one_int INT 4
if have_plugin dp-master; then
    cfg dp 8 3 'comm = { plugin = "dp-master"; world_size = 2; };' && at_step dp USR1 5
else skip=$((skip + 1)); fi
if have_plugin mpi; then
    cfg mpi 8 3 'comm = { plugin = "mpi"; world_size = 2; };' && at_step mpi TERM 4
else skip=$((skip + 1)); fi

# --- 1b. SIGTERM pinned to each phase of step 4 (TFCORE_TEST_SIGNAL_PHASE) -------
# forward and backward of the micro-batch, the all-reduce (gradient buckets in
# flight), the optimizer, the evaluation after the step: the signal raised
# on rank 0 there is agreed on at that step's or the next step's loss
# all-reduce, the checkpoint of that step is written, exit 75, and the run
# resumed from "last" ends bit for bit as the uninterrupted one. The step the
# run stopped after tells the phase was the one asked for.
# pcfg NAME [COMM_SECTION]: 8 steps, checkpoints every 3, evaluation every 2
pcfg() {
    cfg "$1" 8 3 "${2:-}"
    sed -i 's/eval_examples = 0;/eval_examples = 16;/; s/eval_strategy = "no";/eval_strategy = "steps"; eval_steps = 2;/' \
        "$tmp/$1.cfg"
}
# phases NAME [COMM_SECTION]: one uninterrupted run, then SIGTERM in each phase
phases() {
    pbase=$1
    pcfg "$pbase" "${2:-}"
    full "$pbase"
    for ph in forward backward allreduce optimizer eval; do
        pn="${pbase}_$ph"
        pcfg "$pn" "${2:-}"
        mkdir -p "$tmp/${pn}_full"
        cp "$tmp/${pbase}_full/model.safetensors" "$tmp/${pn}_full/"
        TFCORE_TEST_SIGNAL_PHASE=$ph TFCORE_TEST_SIGNAL_AT_STEP=4 run "$pn"
        stopped "$pn" SIGTERM || continue
        # a signal before step 4's loss all-reduce stops after step 4; one in
        # its optimizer or the evaluation after it, after step 5
        case $ph in optimizer | eval) want=5 ;; *) want=4 ;; esac
        if [ "$step" = "$want" ]; then ok; else bad "$pn: stopped after step $step, expected $want"; fi
        resumed "$pn"
    done
}
phases ph_one
if have_plugin mpi; then phases ph_mpi 'comm = { plugin = "mpi"; world_size = 2; };'; else skip=$((skip + 1)); fi
if have_plugin shm; then phases ph_shm 'comm = { plugin = "shm"; world_size = 2; };'; else skip=$((skip + 1)); fi

# --- 2. kill -TERM from outside, mid-run ----------------------------------------
cfg kill_one 60 50 && killed kill_one SIGTERM
if have_plugin mpi; then # the launcher passes it to mpirun as SIGUSR1, which mpirun passes on
    cfg kill_mpi 60 50 'comm = { plugin = "mpi"; world_size = 2; };' && killed kill_mpi SIGUSR1
else skip=$((skip + 1)); fi
if have_plugin shm; then
    cfg kill_shm 60 50 'comm = { plugin = "shm"; world_size = 2; };' && killed kill_shm SIGTERM
else skip=$((skip + 1)); fi

# Ctrl-C on a terminal: the whole foreground process group gets SIGINT once;
# the workers (own process group) get it once, from the launcher
cat >"$tmp/ctrl_c.py" <<'PY'
import os, pty, select, sys, time
tfcore, cfg, log = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execv(tfcore, [tfcore, "-c", cfg])
out, sent, t0 = b"", False, time.time()
while time.time() - t0 < 60:
    if not sent and os.path.exists(log) and sum(1 for _ in open(log)) >= 2:
        os.write(fd, b"\x03")  # the terminal's interrupt character
        sent = True
    if select.select([fd], [], [], 0.1)[0]:
        try:
            d = os.read(fd, 65536)
        except OSError:
            break
        if not d:
            break
        out += d
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(st))
PY
ctrl_c() { # NAME SIGNAME: Ctrl-C once mid-run stops it (as SIGNAME), exit 75
    python3 "$tmp/ctrl_c.py" "$tfcore" "$tmp/$1.cfg" "$tmp/$1/log.jsonl" >"$tmp/$1.out" 2>&1
    rc=$?
    stopped "$1" "$2"
}
if command -v python3 >/dev/null 2>&1; then
    if have_plugin shm; then
        cfg ctrl_c_shm 60 50 'comm = { plugin = "shm"; world_size = 2; };' && ctrl_c ctrl_c_shm SIGINT
    fi
    if have_plugin mpi; then # passed to mpirun as SIGUSR1
        cfg ctrl_c_mpi 60 50 'comm = { plugin = "mpi"; world_size = 2; };' && ctrl_c ctrl_c_mpi SIGUSR1
    fi
else skip=$((skip + 1)); fi

# --- 3. conf/slurm/train.sbatch: Slurm's B:USR1 to the script, requeue, resume --
sbatch="$top_srcdir/conf/slurm/train.sbatch"
if bash -n "$sbatch"; then ok; else bad "train.sbatch: bash -n failed"; fi
if command -v shellcheck >/dev/null 2>&1; then
    if shellcheck "$sbatch"; then ok; else bad "train.sbatch: shellcheck"; fi
fi
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\necho "$*" >>"%s/scontrol.log"\n' "$tmp" >"$tmp/fakebin/scontrol"
chmod +x "$tmp/fakebin/scontrol"
cfg slurm 60 50
full slurm
CONFIG="$tmp/slurm.cfg" TFCORE="$tfcore" SLURM_JOB_ID=4242 PATH="$tmp/fakebin:$PATH" \
    timeout 60 bash "$sbatch" >"$tmp/slurm.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 300 ] && ! { [ -f "$tmp/slurm/log.jsonl" ] && [ "$(wc -l <"$tmp/slurm/log.jsonl")" -ge 2 ]; }; do
    sleep 0.1
    i=$((i + 1))
done
kill -USR1 "$(pgrep -P $pid)" # the script's shell, under timeout (what Slurm's B: signals)
wait $pid
rc=$?
if [ $rc = 0 ] && grep -q "stopped by SIGUSR1 after step" "$tmp/slurm.out" &&
    [ "$(cat "$tmp/scontrol.log" 2>/dev/null)" = "requeue 4242" ]; then ok; else
    bad "train.sbatch: status $rc, no stop or no requeue"; tail -n 5 "$tmp/slurm.out"; fi
CONFIG="$tmp/slurm.cfg" TFCORE="$tfcore" SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1 PATH="$tmp/fakebin:$PATH" \
    timeout 60 bash "$sbatch" >"$tmp/slurm.out" 2>&1
rc=$?
if [ $rc = 0 ] && out=$("$diff_tool" "$tmp/slurm_full/model.safetensors" "$tmp/slurm/model.safetensors" 0); then ok; else
    bad "train.sbatch: the requeued run (status $rc) did not end as the uninterrupted one: ${out:-}"; tail -n 5 "$tmp/slurm.out"; fi

# --- 4. a second signal during the stop's save ---------------------------------
cfg second 8 3
full second
TFCORE_TEST_SIGNAL_AT_STEP=5 TFCORE_TEST_SIGNAL_IN_SAVE=1 run second
if [ $rc = 75 ] || [ $rc = 0 ]; then bad "second: exit status $rc after a second signal"; else ok; fi
grep -q "a second stop signal: ending now" "$tmp/second.out" || bad "second: no line about the second signal"
if [ -d "$tmp/second/checkpoint-5" ]; then bad "second: checkpoint-5 is in place though its save was cut"; fi
[ -f "$tmp/second/checkpoint-3/trainer_state.json" ] || bad "second: checkpoint-3 is gone"
resumed second
grep -q "resumed from $tmp/second/checkpoint-3 at step 3" "$tmp/second.out" || bad "second: did not resume from checkpoint-3"

echo "preempt: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
