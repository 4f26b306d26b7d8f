#!/bin/sh
# The parallel strategies on the CPU, end to end through `tfcore train`:
#  - equivalence: same seed and global batch, 3 optimizer steps:
#    one worker vs dp-master x2 and x4 (threads) vs mpi x2 and x4 (mpirun,
#    re-executed by tfcore) vs the process launcher x2 (test comm plugin shm)
#    end with the same parameters within 1e-5 relative; the same again with
#    gradient accumulation; and again with dropout on (masks by a row's
#    global position);
#  - overlap shown by order: a bucket's all-reduce is issued before backward
#    reaches the first layer (TFCORE_TRACE_COMM events), with and without
#    gradient_checkpointing (which ends with the same parameters);
#  - results.json splits communication into total and exposed;
#  - a world size that does not divide the data trains, and evaluates every
#    eval row exactly once (metrics equal to one worker's);
#  - a run resumed from a checkpoint ends bit-identical to the uninterrupted one;
#    resumed on another world size or strategy (2 -> 1, 2 -> mpi x4,
#    dp-master -> mpi), dropout on, it ends within 1e-5 of it; another global
#    batch is refused;
#  - a killed worker ends the job within 30 s, non-zero, naming the rank and
#    the signal; no worker is left running.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
# Under AddressSanitizer (scripts/test-all.sh's second build) Open MPI's own
# allocations, kept until exit, must not count as leaks of ours: suppress them
# by library (whole stacks, components left loaded), as tests/test_comm_mpi.sh.
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader" # one machine: no network transports probed
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
diff_tool="$top_builddir/tests/params_diff"
tmp=$(mktemp -d /tmp/tfcore-parallel-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

have_plugin() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }
# the test double of the process launcher path lives with the tests
export TFCORE_PLUGIN_PATH="$top_builddir/tests/comm-shm/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
have_mpi=0
have_plugin mpi && have_mpi=1
have_dp=0
have_plugin dp-master && have_dp=1
have_shm=0
have_plugin shm && have_shm=1

# cfg NAME PER_DEVICE ACCUM [COMM_SECTION] [EXTRA]: bert-tiny, without dropout unless
# DROPOUT says (hidden, attention and classifier dropout probability)
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; hidden_dropout_prob = ${DROPOUT:-0.0};
          attention_probs_dropout_prob = ${DROPOUT:-0.0}; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = ${EXAMPLES:-96}; eval_examples = ${EVAL_EXAMPLES:-0}; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = ${STEPS:-3}; per_device_train_batch_size = $2;
             gradient_accumulation_steps = $3; per_device_eval_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; weight_decay = 0.01; logging_steps = 1;
             eval_strategy = "${EVAL:-no}"; save_strategy = "no"; seed = 11; };
${4:-}
CFG
}

# train NAME: run it, keep its output
train() {
    if "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1; then ok; else
        bad "$1: tfcore exited $?"; tail -n 20 "$tmp/$1.out"; return 1; fi
}

same_params() { # A B: the final models agree within 1e-5 relative
    if out=$("$diff_tool" "$tmp/$1/model.safetensors" "$tmp/$2/model.safetensors" 1e-5); then ok; else
        bad "$2 differs from $1: $out"; fi
}

dp() { printf 'comm = { plugin = "dp-master"; world_size = %s; };' "$1"; }
mpi() { printf 'comm = { plugin = "mpi"; world_size = %s; bucket_mb = %s; };' "$1" "${2:-25.0}"; }
shm() { printf 'comm = { plugin = "shm"; world_size = %s; bucket_mb = %s; };' "$1" "${2:-25.0}"; }

# --- 1. equivalence, global batch 16, then 16 x 2 accumulation ----------------
cfg base 16 1 && train base
cfg base_acc 16 2 && train base_acc
if [ $have_dp = 1 ]; then
    cfg dp2 8 1 "$(dp 2)" && train dp2 && same_params base dp2
    cfg dp4 4 1 "$(dp 4)" && train dp4 && same_params base dp4
    cfg dp2_acc 8 2 "$(dp 2)" && train dp2_acc && same_params base_acc dp2_acc
    grep -q "^\[rank 1\] " "$tmp/dp2.out" && ok || bad "dp2: no rank-prefixed lines"
else skip=$((skip + 1)); echo "SKIP: comm plugin dp-master not built"; fi
if [ $have_mpi = 1 ]; then
    cfg mpi2 8 1 "$(mpi 2)" && train mpi2 && same_params base mpi2
    cfg mpi4 4 1 "$(mpi 4)" && train mpi4 && same_params base mpi4
    cfg mpi2_acc 8 2 "$(mpi 2)" && train mpi2_acc && same_params base_acc mpi2_acc
    cfg mpi4_acc 4 2 "$(mpi 4)" && train mpi4_acc && same_params base_acc mpi4_acc
    grep -q "running 2 ranks under mpirun" "$tmp/mpi2.out" && ok || bad "mpi2 did not re-execute under mpirun"
else skip=$((skip + 1)); echo "SKIP: comm plugin mpi not built (no Open MPI)"; fi
if [ $have_shm = 1 ]; then
    cfg shm2 8 1 "$(shm 2)" && train shm2 && same_params base shm2
    cfg shm2_acc 8 2 "$(shm 2)" && train shm2_acc && same_params base_acc shm2_acc
else skip=$((skip + 1)); echo "SKIP: test comm plugin shm not built"; fi

# --- 1b. the same with dropout on (hidden, attention, classifier: 0.1) --------
# Masks follow a row's position in the epoch's global order (model set_rows),
# so one worker with batch 16 and 2 workers with 8, or 2 micro-batches of 8,
# draw the same masks for the same rows.
export DROPOUT=0.1
cfg dbase 16 1 && train dbase
cfg dacc 8 2 && train dacc && same_params dbase dacc
if [ $have_dp = 1 ]; then
    cfg ddp2 8 1 "$(dp 2)" && train ddp2 && same_params dbase ddp2
    cfg ddp2_acc 4 2 "$(dp 2)" && train ddp2_acc && same_params dbase ddp2_acc
fi
if [ $have_mpi = 1 ]; then
    cfg dmpi2 8 1 "$(mpi 2)" && train dmpi2 && same_params dbase dmpi2
    cfg dmpi2_acc 4 2 "$(mpi 2)" && train dmpi2_acc && same_params dbase dmpi2_acc
fi
if [ $have_shm = 1 ]; then
    cfg dshm2 8 1 "$(shm 2)" && train dshm2 && same_params dbase dshm2
fi
# and dropout really is on: the run differs from the one without
if "$diff_tool" "$tmp/base/model.safetensors" "$tmp/dbase/model.safetensors" 1e-5 >/dev/null; then
    bad "dropout 0.1 trained the same parameters as dropout 0"; else ok; fi
unset DROPOUT

# --- 2. overlap by order, and comm time total vs exposed ------------------------
check_overlap() { # NAME: rank 0's trace and results
    python3 - "$tmp/$1.trace.rank0" "$tmp/$1/results.json" <<'PY'
import json, sys
ev = [l.split() for l in open(sys.argv[1])]
names = [e[1] for e in ev]
# the last step: from its backward_begin on
start = len(names) - 1 - names[::-1].index("backward_begin")
step = ev[start:]
kinds = [e[1] for e in step]
first_start = kinds.index("allreduce_start")
last_ready = len(kinds) - 1 - kinds[::-1].index("grads_ready")
assert first_start < last_ready, ("no all-reduce before the last layer's gradients", kinds)
assert kinds.index("backward_end") > first_start, kinds
buckets = kinds.count("allreduce_start")
assert buckets >= 2, kinds
ph = json.load(open(sys.argv[2]))["tfcore"]["phase_seconds"]
assert ph["comm"] > 0 and 0 <= ph["comm_exposed"] <= ph["comm"] + 1e-6, ph
print("overlap: %d buckets, first issued at event %d, last layer ready at event %d; comm %.4fs, exposed %.4fs"
      % (buckets, first_start, last_ready, ph["comm"], ph["comm_exposed"]))
PY
}
for p in mpi shm; do
    eval "have=\$have_$p"
    [ "$have" = 1 ] || continue
    cfg ${p}_trace 8 1 "$($p 2 0.25)"
    if TFCORE_TRACE_COMM="$tmp/${p}_trace.trace" "$tfcore" -c "$tmp/${p}_trace.cfg" >"$tmp/${p}_trace.out" 2>&1 \
        && check_overlap ${p}_trace >"$tmp/${p}_overlap.txt" 2>&1; then ok; else
        bad "$p overlap order"; cat "$tmp/${p}_trace.out" "$tmp/${p}_overlap.txt" | tail -n 15; fi
    # gradient checkpointing: buckets still fire as layers finish their
    # recomputed backward, and the parameters are those without it
    cfg ${p}_ckpt 8 1 "$($p 2 0.25)"
    if TFCORE_TRACE_COMM="$tmp/${p}_ckpt.trace" "$tfcore" -c "$tmp/${p}_ckpt.cfg" \
        -o training.gradient_checkpointing=true >"$tmp/${p}_ckpt.out" 2>&1 \
        && check_overlap ${p}_ckpt >"$tmp/${p}_ckpt_overlap.txt" 2>&1; then ok; else
        bad "$p overlap order with gradient_checkpointing"; cat "$tmp/${p}_ckpt.out" "$tmp/${p}_ckpt_overlap.txt" | tail -n 15; fi
    same_params ${p}_trace ${p}_ckpt
done

# --- 3. a world size that does not divide the data; sharded evaluation ----------
EXAMPLES=50 EVAL_EXAMPLES=37 EVAL=steps STEPS=2 cfg odd1 6 1 "" && \
    sed -i 's/eval_strategy = "steps";/eval_strategy = "steps"; eval_steps = 2;/' "$tmp/odd1.cfg" && train odd1
for run in "dp 3" "mpi 3" "shm 3"; do
    set -- $run
    eval "have=\$have_$1"
    [ "$have" = 1 ] || continue
    EXAMPLES=50 EVAL_EXAMPLES=37 EVAL=steps STEPS=2 cfg odd_$1 2 1 "$($1 3)"
    sed -i 's/eval_strategy = "steps";/eval_strategy = "steps"; eval_steps = 2;/' "$tmp/odd_$1.cfg"
    train odd_$1 || continue
    python3 - "$tmp/odd1/results.json" "$tmp/odd_$1/results.json" <<'PY' && ok || bad "odd_$1: eval over 37 rows"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["tfcore"]["global_step"] == 2 and b["tfcore"]["world_size"] == 3, b
# every eval row once: same accuracy as one worker; the loss to float precision
# (the models differ only by the order of the gradient sums)
assert abs(a["eval_accuracy"] - b["eval_accuracy"]) < 1e-9, (a["eval_accuracy"], b["eval_accuracy"])
assert abs(a["eval_loss"] - b["eval_loss"]) < 1e-4 * abs(a["eval_loss"]), (a["eval_loss"], b["eval_loss"])
PY
done

# --- 4. checkpoints: rank 0 writes them, every rank resumes from one exactly ------
for p in mpi dp; do
    eval "have=\$have_$p"
    [ "$have" = 1 ] || continue
    STEPS=4 cfg ckpt_$p 8 1 "$($p 2)"
    sed -i 's/save_strategy = "no";/save_strategy = "steps"; save_steps = 2;/' "$tmp/ckpt_$p.cfg"
    train ckpt_$p || continue
    if "$tfcore" -c "$tmp/ckpt_$p.cfg" -o training.output_dir="\"$tmp/resumed_$p\"" \
        -o training.resume_from_checkpoint="\"$tmp/ckpt_$p/checkpoint-2\"" >"$tmp/resumed_$p.out" 2>&1 &&
        out=$("$diff_tool" "$tmp/ckpt_$p/model.safetensors" "$tmp/resumed_$p/model.safetensors" 0); then ok; else
        bad "$p: resuming from checkpoint-2 did not end where the uninterrupted run did: ${out:-}"
        tail -n 5 "$tmp/resumed_$p.out"; fi
done

# --- 4b. resume on another world size or strategy, dropout on -------------------
# A checkpoint of 2 workers (global batch 16) resumes on 1 worker with 16, on
# mpi x4 with 4, and a dp-master one on mpi x2: the sample order continues in
# global terms and the masks follow the samples, so every resumed run ends
# where the uninterrupted 2-worker run did (within 1e-5). Another global
# batch is refused in one line.
resume_on() { # WRITER NAME PER_DEVICE [COMM]: resume WRITER's checkpoint-2 as NAME
    STEPS=4 DROPOUT=0.1 cfg "$2" "$3" 1 "${4:-}"
    if "$tfcore" -c "$tmp/$2.cfg" -o training.resume_from_checkpoint="\"$tmp/$1/checkpoint-2\"" \
        >"$tmp/$2.out" 2>&1; then ok; else bad "$2: tfcore exited $?"; tail -n 5 "$tmp/$2.out"; return 1; fi
    same_params "$1" "$2"
}
shape_writer() { # NAME COMM_SECTION: 4 steps, a checkpoint every 2, dropout on
    STEPS=4 DROPOUT=0.1 cfg "$1" 8 1 "$2"
    sed -i 's/save_strategy = "no";/save_strategy = "steps"; save_steps = 2;/' "$tmp/$1.cfg"
    train "$1"
}
if [ $have_mpi = 1 ] && shape_writer shape_mpi2 "$(mpi 2)"; then
    resume_on shape_mpi2 shape_on1 16
    grep -q "resuming a checkpoint of 2 workers x 8 rows x 1 accumulation on 1 x 16 x 1" "$tmp/shape_on1.out" &&
        ok || bad "shape_on1: no line saying the checkpoint's shape and this run's"
    resume_on shape_mpi2 shape_on_mpi4 4 "$(mpi 4)"
    # another global batch cannot continue the order: refused, exit 3, one line
    STEPS=4 DROPOUT=0.1 cfg shape_bad 8 1
    "$tfcore" -c "$tmp/shape_bad.cfg" -o training.resume_from_checkpoint="\"$tmp/shape_mpi2/checkpoint-2\"" \
        >"$tmp/shape_bad.out" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && grep -q "global batch is 16 (world size 2 x per_device_train_batch_size 8 x gradient_accumulation_steps 1), this run's is 8 (1 x 8 x 1): resuming exactly needs the same global batch" "$tmp/shape_bad.out"; then
        ok; else bad "a different global batch: exit $rc"; tail -n 3 "$tmp/shape_bad.out"; fi
    # 95 rows pad to 96 an epoch on 2 workers, to 95 on one: refused too
    if EXAMPLES=95 shape_writer shape_pad "$(mpi 2)"; then
        EXAMPLES=95 STEPS=4 DROPOUT=0.1 cfg shape_pad_on1 16 1
        "$tfcore" -c "$tmp/shape_pad_on1.cfg" -o training.resume_from_checkpoint="\"$tmp/shape_pad/checkpoint-2\"" \
            >"$tmp/shape_pad_on1.out" 2>&1
        rc=$?
        if [ $rc -eq 3 ] && grep -q "95 training rows pad to 96 samples an epoch on the checkpoint's 2 workers and to 95 on this run's sampler" "$tmp/shape_pad_on1.out"; then
            ok; else bad "an epoch padded differently: exit $rc"; tail -n 3 "$tmp/shape_pad_on1.out"; fi
    fi
fi
if [ $have_mpi = 1 ] && [ $have_dp = 1 ] && shape_writer shape_dp2 "$(dp 2)"; then
    resume_on shape_dp2 shape_dp_on_mpi2 8 "$(mpi 2)"
fi

# --- 5. a killed worker ends the job ---------------------------------------------
# kill_test NAME PATTERN: start a long run, SIGKILL the rank-1 worker once
# training is under way, expect the job to end non-zero within 30 s, naming the
# rank and the signal, with no worker left behind.
kill_test() {
    name=$1
    want=$2
    "$tfcore" -c "$tmp/$name.cfg" >"$tmp/$name.out" 2>&1 &
    job=$!
    victim=""
    i=0
    while [ $i -lt 300 ] && [ -z "$victim" ]; do
        if grep -q "'loss'" "$tmp/$name.out" 2>/dev/null; then
            for p in $(pgrep -f "$tmp/$name.cfg"); do
                [ "$p" = "$job" ] && continue
                if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
                    grep -Eq '^(OMPI_COMM_WORLD_RANK|TFCORE_WORKER_RANK)=1$'; then victim=$p; fi
            done
        fi
        [ -z "$victim" ] && sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$victim" ]; then
        bad "$name: found no rank-1 worker to kill"; kill -9 $job 2>/dev/null; wait $job 2>/dev/null; return; fi
    t0=$(date +%s)
    kill -9 "$victim"
    wait $job
    rc=$?
    t1=$(date +%s)
    sleep 0.5
    left=$(pgrep -f "$tmp/$name.cfg" | tr '\n' ' ')
    if [ "$rc" -ne 0 ] && [ $((t1 - t0)) -le 30 ] && [ -z "$left" ] && grep -Eq "$want" "$tmp/$name.out"; then ok; else
        bad "$name: rc $rc after $((t1 - t0)) s, left running: '$left'"; tail -n 12 "$tmp/$name.out"; fi
}
if [ $have_mpi = 1 ]; then
    STEPS=100000 cfg kill_mpi 8 1 "$(mpi 2)"
    kill_test kill_mpi "rank 1 .*(signal 9|Killed)"
fi
if [ $have_shm = 1 ]; then
    STEPS=100000 cfg kill_shm 8 1 "$(shm 2)"
    kill_test kill_shm "worker rank 1 was killed by signal 9 \(Killed\); the other worker was stopped"
fi

# --- 6. what mpirun can start, and no rank without its launcher -------------------
if [ $have_mpi = 1 ]; then
    # more ranks than this machine can run: one config line before anything starts
    cfg big 8 1 "$(mpi 1000)"
    "$tfcore" -c "$tmp/big.cfg" --dry-run >"$tmp/big.out" 2>&1
    rc=$?
    [ $rc -eq 3 ] && grep -q "comm.world_size 1000: mpirun would start every rank on this machine" "$tmp/big.out" \
        && ok || { bad "world_size 1000: exit $rc"; tail -n 2 "$tmp/big.out"; }
    # ranks that never report their start (their reports go nowhere here): mpirun
    # is stopped after comm.mpirun_start_timeout, with its ranks
    STEPS=100000 cfg nostart 8 1 'comm = { plugin = "mpi"; world_size = 2; mpirun_start_timeout = 2.0;
        mpirun_args = "-x TFCORE_MPI_READY_FILE=/dev/null"; };'
    t0=$(date +%s)
    timeout 60 "$tfcore" -c "$tmp/nostart.cfg" >"$tmp/nostart.out" 2>&1
    rc=$?
    t1=$(date +%s)
    sleep 0.5
    left=$(pgrep -f "$tmp/nostart.cfg" | tr '\n' ' ')
    [ $rc -eq 1 ] && [ $((t1 - t0)) -le 20 ] && [ -z "$left" ] \
        && grep -q "mpirun started 0 of 2 ranks in 2 s (comm.mpirun_start_timeout); it was stopped" "$tmp/nostart.out" \
        && ok || { bad "start timeout: rc $rc after $((t1 - t0)) s, left '$left'"; tail -n 3 "$tmp/nostart.out"; }
    # a wedged mpirun (stopped) cannot stop its ranks when the launcher is
    # SIGKILLed: the ranks watch the launcher and end themselves
    STEPS=100000 cfg orphan 8 1 "$(mpi 2)"
    "$tfcore" -c "$tmp/orphan.cfg" >"$tmp/orphan.out" 2>&1 &
    job=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q "'loss'" "$tmp/orphan.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    mpirun_pid=$(pgrep -P $job)
    kill -STOP $mpirun_pid
    kill -9 $job
    wait $job 2>/dev/null
    ranks() { pgrep -f "$tmp/orphan.cfg" | grep -vx "$mpirun_pid" | tr '\n' ' '; }
    i=0
    while [ $i -lt 100 ] && [ -n "$(ranks)" ]; do sleep 0.1; i=$((i + 1)); done
    left=$(ranks)
    kill -9 $mpirun_pid 2>/dev/null # (the stopped mpirun cannot forward the ranks' last words)
    [ -n "$mpirun_pid" ] && [ -z "$left" ] \
        && ok || { bad "ranks left 10 s after their launcher was killed (mpirun $mpirun_pid stopped): '$left'"; }
fi

echo "test_parallel: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
