#!/bin/sh
# scripts/gpu-run.sh without a GPU: its step runner (scripts/gpu-steps.sh)
# writes one PASS / FAIL / TIMEOUT / SKIPPED line per step with the log's
# last line, kills a step at its timeout (children included) and cuts
# timeouts to the budget, honours --only, and repacks the logs after each
# step; and gpu-run.sh itself, run where there is no GPU, stops at once with
# exit 1 and a summary that says why. (On a GPU machine it is run as
# docs/GPU.md says, from the bundle.)
set -u
: "${top_srcdir:?}"
tmp=$(mktemp -d /tmp/tfcore-gpurun-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}
# has PATTERN FILE: a line of FILE matches (grep -E)
has() { if grep -Eq -- "$1" "$2"; then ok; else bad "no line matching '$1' in $2:"; sed 's/^/    /' "$2"; fi; }

# --- the step runner, with toy steps ----------------------------------------------------------
cat >"$tmp/steps.bash" <<'STEPS'
. "$top_srcdir/scripts/gpu-steps.sh"
out=$tmp_out work=$tmp_work logs=$tmp_work/gpu-run-logs summary=$tmp_out/summary.txt
budget=$1 only=$2 nstep=0 failed=0
deadline=$(($(date +%s) + budget))
mkdir -p "$logs" "$out"
: >"$summary"
say "header"
talk() { echo "first line"; echo "the last line of $1"; }
export -f talk
step good 20 talk good
step bad 20 sh -c 'echo "it broke"; exit 3'
# a step whose child outlives it unless the whole group is killed
step slow "${3:-2}" sh -c 'echo started; (sleep 30; echo "child survived" >"$0") & sleep 30' "$tmp_work/child"
step filtered 20 talk filtered
step late 20 talk late
say "failed=$failed nstep=$nstep"
STEPS
export top_srcdir tmp_out="$tmp/out" tmp_work="$tmp/work"
start=$(date +%s)
bash "$tmp/steps.bash" 40 "" >/dev/null 2>&1
s="$tmp/out/summary.txt"
has '^PASS +good +[0-9]+s  the last line of good$' "$s"
has '^FAIL +bad +[0-9]+s  exit 3: it broke$' "$s"
has '^TIMEOUT +slow +[0-9]+s  killed after 2s; last line: started$' "$s"
has '^PASS +filtered ' "$s"
has '^failed=2 nstep=5$' "$s"
[ $(($(date +%s) - start)) -lt 25 ] && ok || bad "the slow step was not cut at its timeout"
sleep 1
[ ! -e "$tmp/work/child" ] && ok || bad "a timed-out step's child process survived it"
tar -tzf "$tmp/out/logs.tar.gz" >"$tmp/tar.list" 2>&1 && ok || bad "no logs.tar.gz"
has '^gpu-run-logs/03-slow\.log$' "$tmp/tar.list"
has '^gpu-run-logs/05-late\.log$' "$tmp/tar.list"

# the budget: a 6 s step leaves less than 10 s of 12: the next ones are skipped
rm -rf "$tmp/out" "$tmp/work"
bash "$tmp/steps.bash" 12 "" 6 >/dev/null 2>&1
has '^TIMEOUT +slow ' "$s"
has '^SKIPPED +(filtered|late) +- +no time left in the 12s budget \(run it with --only (filtered|late) in another call\)$' "$s"

# --only: the others are left out (not counted)
rm -rf "$tmp/out" "$tmp/work"
bash "$tmp/steps.bash" 60 "bad,late" >/dev/null 2>&1
has '^FAIL +bad ' "$s"
has '^PASS +late ' "$s"
has '^failed=1 nstep=2$' "$s"
if grep -Eq '^[A-Z]+ +(good|slow|filtered) ' "$s"; then bad "--only ran a step it does not name"; cat "$s"; else ok; fi

# --- gpu-run.sh on a machine without a GPU: stop at once, saying why --------------------------
mkdir -p "$tmp/b/scripts" "$tmp/b/tests" "$tmp/b/core" "$tmp/bin"
cp "$top_srcdir/scripts/gpu-run.sh" "$top_srcdir/scripts/gpu-steps.sh" "$tmp/b/scripts/"
cp "$top_srcdir/tests/gpu_backend.sh" "$tmp/b/tests/"
echo 'export TFCORE_PYTHON=python3' >"$tmp/b/env.sh"
# where nvidia-smi is not on PATH
start=$(date +%s)
PATH=/usr/bin:/bin bash "$tmp/b/scripts/gpu-run.sh" "$tmp/run1" >"$tmp/run1.out" 2>&1
rc=$?
[ $rc -eq 1 ] && ok || bad "gpu-run.sh without a GPU: exit $rc, want 1"
[ $(($(date +%s) - start)) -lt 30 ] && ok || bad "gpu-run.sh without a GPU took more than 30 s"
has '^FAIL +preflight +[0-9]+s  exit 1: no NVIDIA GPU here: nvidia-smi not found$' "$tmp/run1/summary.txt"
has '^stopped: there is no usable GPU here' "$tmp/run1/summary.txt"
[ -s "$tmp/run1/logs.tar.gz" ] && ok || bad "no logs.tar.gz after a failed preflight"
# nvidia-smi lists a GPU, but backend-cuda cannot run: the loader's or probe's reason
printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n' >"$tmp/bin/nvidia-smi"
printf '#!/bin/sh\necho "{\\"searched\\": [], \\"plugins\\": [], \\"rejected\\": [{\\"path\\": \\"/x/tfcore-backend-cuda.so\\", \\"why\\": \\"/x/tfcore-backend-cuda.so: cannot load: libcublasLt.so.13: cannot open shared object file\\"}]}"\n' >"$tmp/b/core/tfcore"
chmod +x "$tmp/bin/nvidia-smi" "$tmp/b/core/tfcore"
PATH="$tmp/bin:/usr/bin:/bin" bash "$tmp/b/scripts/gpu-run.sh" "$tmp/run2" >"$tmp/run2.out" 2>&1
rc=$?
[ $rc -eq 1 ] && ok || bad "gpu-run.sh with an unloadable backend-cuda: exit $rc, want 1"
has '^FAIL +preflight +[0-9]+s  exit 1: the plugin loader rejected backend-cuda: .*libcublasLt\.so\.13: cannot open shared object file$' "$tmp/run2/summary.txt"
# usage errors
bash "$tmp/b/scripts/gpu-run.sh" --budget x >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "--budget x was accepted"
rm "$tmp/b/env.sh"
out=$(bash "$tmp/b/scripts/gpu-run.sh" "$tmp/run3" 2>&1)
[ $? -eq 2 ] && printf '%s\n' "$out" | grep -q "is not a GPU bundle (no env.sh" && ok || bad "outside a bundle: $out"

echo "test_gpu_run: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
