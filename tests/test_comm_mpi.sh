#!/bin/sh
# comm-mpi under mpirun: tests/test_comm_mpi_driver (which loads the plugin
# and backend-cpu through tfcore's loader) with 2 and 4 ranks on this machine:
# every collective with exact values on the host, device-style and staged
# paths; init errors; an MPI error turned into one line; abort ending the job.
# Skips (77) without mpirun or backend-cpu. No time is asserted: `timeout`
# only keeps a hung job from hanging `make check`.
set -u
: "${top_builddir:?}"
driver="$top_builddir/tests/test_comm_mpi_driver"
cpu="$top_builddir/plugins/backend-cpu/.libs/tfcore-backend-cpu.so"

mpirun=$(sed -n 's/^#define TF_MPIRUN "\(.*\)"$/\1/p' "$top_builddir/config.h" 2>/dev/null)
[ -x "${mpirun:-}" ] || mpirun=$(command -v mpirun 2>/dev/null)
if [ -z "${mpirun:-}" ] || [ ! -x "$mpirun" ]; then
    echo "test_comm_mpi: SKIP: mpirun not found (configure's TF_MPIRUN, then PATH)"
    exit 77
fi
if [ ! -f "$cpu" ]; then
    echo "test_comm_mpi: SKIP: backend-cpu was not built ($cpu)"
    exit 77
fi

tmp=$(mktemp -d /tmp/tfcore-comm-mpi-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# 4 ranks on a 2-core CI machine need --oversubscribe; root needs the allow
# flag; no binding (oversubscribed ranks must share cores). Open MPI's
# shared-memory single-copy (CMA) needs ptrace rights that containers often
# lack, and it is not what is tested here: plain copies.
launch="$mpirun --oversubscribe --bind-to none"
[ "$(id -u)" -eq 0 ] && launch="$launch --allow-run-as-root"
OMPI_MCA_btl_vader_single_copy_mechanism=none
OMPI_MCA_btl="self,vader" # no network transports probed: one machine
export OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_btl top_builddir
# AddressSanitizer builds: Open MPI keeps allocations until exit, which must
# not count as our leaks. The suppressions match them by library name, which
# needs whole stacks (the slow unwinder) and the components left loaded.
LSAN_OPTIONS="suppressions=${top_srcdir:-.}/tests/data/comm-mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS ASAN_OPTIONS OMPI_MCA_mca_base_component_disable_dlclose

report_fail() {
    fail=$((fail + 1))
    echo "FAIL: $1 (exit $2), output:"
    sed 's/^/    /' "$3" | head -40
}

# run NP TIMEOUT MODE ARGS...: the driver under mpirun; every rank must pass.
run() {
    np=$1 limit=$2 mode=$3
    shift 3
    log="$tmp/$mode-$np.log"
    timeout "$limit" $launch -np "$np" "$driver" "$mode" "$@" >"$log" 2>&1
    rc=$?
    # the driver's own counts, summed over ranks
    p=$(sed -n 's/^test_comm_mpi_driver: rank [0-9]* .*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log" |
        awk '{s += $1} END {print s + 0}')
    f=$(sed -n 's/^test_comm_mpi_driver: rank [0-9]* .*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log" |
        awk '{s += $1} END {print s + 0}')
    ranks=$(grep -c '^test_comm_mpi_driver: rank [0-9]* .*: [0-9]* passed' "$log")
    pass=$((pass + p))
    fail=$((fail + f))
    if [ "$rc" -ne 0 ] || [ "$ranks" -ne "$np" ]; then
        report_fail "$mode with $np ranks: $ranks of $np ranks reported" "$rc" "$log"
    elif [ "$f" -ne 0 ]; then
        echo "FAIL: $mode with $np ranks:"
        grep 'FAIL' "$log" | head -20 | sed 's/^/    /'
    else
        echo "ok: $mode with $np ranks ($p checks)"
    fi
}

# The tfcore command lists the plugin as usable (its probe, through the loader).
"$top_builddir/core/tfcore" plugins --json >"$tmp/plugins.json" 2>&1
if tr -d ' \n' <"$tmp/plugins.json" | grep -q '"kind":"comm","name":"mpi",[^}]*"usable":true'; then
    pass=$((pass + 1))
    echo "ok: tfcore plugins lists comm mpi as usable"
else
    report_fail "tfcore plugins does not list comm mpi as usable" 0 "$tmp/plugins.json"
fi

mkdir "$tmp/b2" "$tmp/b4"
run 2 300 collectives "$tmp/b2"
run 4 300 collectives "$tmp/b4"
run 2 120 errors
run 3 120 errors
run 2 120 mpi-error
run 2 120 preinit
if grep -q 'no progress thread; reductions advance only inside comm calls' "$tmp/preinit-2.log"; then
    pass=$((pass + 1))
else
    report_fail "preinit: no warning that the progress thread is off" 0 "$tmp/preinit-2.log"
fi

# abort: the last rank aborts while the others wait in a broadcast from it;
# mpirun must end the whole job with a non-zero status (124 = it hung).
log="$tmp/abort.log"
timeout 60 $launch -np 4 "$driver" abort >"$log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
    grep -q 'comm-mpi: rank 3 of 4: aborting the job: rank 3 failed on purpose (test)' "$log" &&
    ! grep -q '^test_comm_mpi_driver: rank [0-9]*: \(abort\|broadcast\) returned' "$log"; then
    pass=$((pass + 1))
    echo "ok: abort from rank 3 of 4 ended the job (exit $rc)"
else
    report_fail "abort from rank 3 of 4 did not end the job as expected" "$rc" "$log"
fi

# bounded: reduce, broadcast and barrier give up after comm.timeout_s (+ 2 s)
# while the last rank never joins; rank 0 then aborts the job.
log="$tmp/bounded.log"
timeout 90 $launch -np 2 "$driver" bounded >"$log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q '^test_comm_mpi_driver: rank 0 bounded: 3 passed, 0 failed$' "$log"; then
    pass=$((pass + 3))
    echo "ok: reduce, broadcast and barrier bounded by comm.timeout_s ($(grep -c 'gave up after' "$log") gave up)"
else
    report_fail "reduce, broadcast or barrier not bounded by comm.timeout_s" "$rc" "$log"
fi

echo "test_comm_mpi: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
