#!/bin/sh
# Collective timeouts (comm.timeout_s) and the flight recorder
# (core/runtime/comm_recorder.h), end to end through `tfcore train` on bert-tiny
# with comm.timeout_s = 5: one rank of a 2-worker job stalls mid-training
#  - mpi x2 (tfcore re-executes itself under mpirun): SIGSTOP of rank 1,
#  - the process launcher x2 (tests/comm-shm): SIGSTOP of rank 1,
#  - dp-master x2 (threads: SIGSTOP would stop the whole process, so rank 1
#    stops itself for good at step 3 through TFCORE_TEST_STALL_RANK/_AT_STEP),
# and the job must end within timeout + 30 s, non-zero, with the line that
# names rank 1 as behind and the others waiting in a numbered collective,
# leaving no process of the job running; mpi's waiting rank 0 uses less than
# half a core while it waits (it used to spin at 100%). Each case is bounded
# by `timeout`; leftovers are continued and killed on exit.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
LSAN_OPTIONS="suppressions=$top_srcdir/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
OMPI_MCA_mca_base_component_disable_dlclose=1
OMPI_MCA_btl="self,vader"
export LSAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose OMPI_MCA_btl
export TFCORE_PLUGIN_PATH="$top_builddir/tests/comm-shm/.libs${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}"
unset TFCORE_TEST_STALL_RANK TFCORE_TEST_STALL_AT_STEP TFCORE_TEST_SIGNAL_AT_STEP
tmp=$(mktemp -d /tmp/tfcore-stall-XXXXXX)
# anything of ours still there: continue it (a stopped process ignores SIGTERM) and kill it
cleanup() {
    for p in $(pgrep -f "$tmp/" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
have_plugin() { "$tfcore" plugins 2>/dev/null | grep -Eq "^ *comm +$1 "; }
TIMEOUT=5

# cfg NAME PLUGIN: a run far longer than the test, 2 workers, comm.timeout_s = 5
cfg() {
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 32;
         num_examples = 96; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/$1"; max_steps = 100000; per_device_train_batch_size = 8;
             learning_rate = 5e-5; warmup_steps = 0; logging_steps = 1;
             eval_strategy = "no"; save_strategy = "no"; seed = 11; };
comm = { plugin = "$2"; world_size = 2; timeout_s = $TIMEOUT; bucket_mb = 1.0; };
CFG
}

# The rank-1 worker process of job NAME (not the launcher JOB), or nothing.
rank1() {
    for p in $(pgrep -f "$tmp/$1.cfg"); do
        [ "$p" = "$2" ] && continue
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -Eq '^(OMPI_COMM_WORLD_RANK|TFCORE_WORKER_RANK)=1$'; then echo "$p"; fi
    done
}

# check NAME RC SECONDS: how the stalled job ended
check() {
    name=$1
    rc=$2
    took=$3
    sleep 0.5
    left=$(pgrep -f "$tmp/$name.cfg" | tr '\n' ' ')
    out="$tmp/$name.out"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le $((TIMEOUT + 30)) ] && [ -z "$left" ] &&
        grep -Eq "collective timeout \(comm.timeout_s = $TIMEOUT\): rank 1 is behind: last seen at step [0-9]+ " "$out" &&
        grep -Eq "rank 0 waiting [0-9]+ s in [a-z-]+ #[0-9]+" "$out" &&
        grep -Eq "rank 0: waiting [0-9]+ s in [a-z-]+ #[0-9]+ \(step [0-9]+" "$out" &&
        grep -Eq "rank 1 is behind: last seen at step [0-9]+ [a-z]+" "$out"; then ok; else
        bad "$name: rc $rc after $took s, left running: '$left'"; tail -n 12 "$out"; fi
}

# sigstop_test NAME PLUGIN: SIGSTOP rank 1 once training is under way
sigstop_test() {
    name=$1
    cfg "$name" "$2"
    timeout -k 5 120 "$tfcore" -c "$tmp/$name.cfg" >"$tmp/$name.out" 2>&1 &
    job=$!
    victim=""
    i=0
    while [ $i -lt 600 ] && [ -z "$victim" ]; do
        grep -q "'step': 3" "$tmp/$name.out" 2>/dev/null && victim=$(rank1 "$name" "$job")
        [ -z "$victim" ] && sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$victim" ]; then
        bad "$name: found no rank-1 worker to stop"; tail -n 5 "$tmp/$name.out"; kill $job; wait $job; return; fi
    rank0=$(for p in $(pgrep -f "$tmp/$name.cfg"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -Eq '^(OMPI_COMM_WORLD_RANK|TFCORE_WORKER_RANK)=0$' && echo "$p"; done)
    t0=$(date +%s)
    kill -STOP "$victim"
    # the waiting rank does not spin a core: CPU ticks from 1 to 4 s into the stall
    sleep 1
    a=$(awk '{print $14 + $15}' "/proc/$rank0/stat" 2>/dev/null)
    sleep 3
    b=$(awk '{print $14 + $15}' "/proc/$rank0/stat" 2>/dev/null)
    wait $job
    rc=$?
    check "$name" $rc $(($(date +%s) - t0))
    if [ "$2" = mpi ]; then
        hz=$(getconf CLK_TCK)
        if [ -n "$a" ] && [ -n "$b" ] && [ $((b - a)) -lt $((3 * hz / 2)) ]; then ok; else
            bad "$name: the waiting rank 0 used ${a:+$((b - a))} of $((3 * hz)) CPU ticks in 3 s (it spins)"; fi
    fi
}

if have_plugin mpi; then sigstop_test stall_mpi mpi; else skip=$((skip + 1)); echo "SKIP: no comm-mpi"; fi
if have_plugin shm; then sigstop_test stall_shm shm; else skip=$((skip + 1)); echo "SKIP: no tests/comm-shm"; fi

# dp-master: rank 1's thread stops for good before step 3's backward
if have_plugin dp-master; then
    cfg stall_dp dp-master
    t0=$(date +%s)
    TFCORE_TEST_STALL_RANK=1 TFCORE_TEST_STALL_AT_STEP=3 \
        timeout -k 5 120 "$tfcore" -c "$tmp/stall_dp.cfg" >"$tmp/stall_dp.out" 2>&1
    rc=$?
    check stall_dp $rc $(($(date +%s) - t0))
    grep -q "rank 1 is behind: last seen at step 3 backward" "$tmp/stall_dp.out" && ok ||
        bad "stall_dp: rank 1 not seen at step 3 backward"
else
    skip=$((skip + 1))
    echo "SKIP: no comm-dp-master"
fi

# the key is checked before anything starts
cfg badkey dp-master
sed -i 's/timeout_s = 5;/timeout_s = 0;/' "$tmp/badkey.cfg"
"$tfcore" -c "$tmp/badkey.cfg" --dry-run >"$tmp/badkey.out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "timeout_s" "$tmp/badkey.out" && ok || { bad "timeout_s = 0: exit $rc"; cat "$tmp/badkey.out"; }

echo "test_comm_timeout: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
