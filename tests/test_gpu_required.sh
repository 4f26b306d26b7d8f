#!/bin/sh
# TFCORE_REQUIRE_GPU=1 turns every GPU test's skip into a failure that says
# why, and the reason tells a rejected plugin from a missing device
# (tests/gpu_backend.sh, tests/gpu_required.h). Run where backend-cuda
# cannot run (CI): each GPU test skips (77) without the variable and fails
# (1) with it, with the same reason. A tfcore that reports backend-cuda as
# rejected by the loader (a missing library) gives "the plugin loader
# rejected backend-cuda: <reason>", never "no CUDA device". Skips on a
# machine where backend-cuda can run (there the GPU tests themselves run).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/gpu_backend.sh"
tfcore="$top_builddir/core/tfcore"
if gpu_cuda_why "$tfcore" >/dev/null; then
    echo "SKIP: backend-cuda can run here: the GPU tests run instead"
    exit 77
fi
tmp=$(mktemp -d /tmp/tfcore-reqgpu-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}

# both CMD...: without the variable exit 77 and "SKIP: <reason>"; with it
# exit 1 and "FAIL: TFCORE_REQUIRE_GPU=1 ..." with the same reason. REASON
# (grep -E) must be in both.
both() {
    reason=$1
    shift
    out=$(env -u TFCORE_REQUIRE_GPU "$@" 2>&1)
    rc=$?
    if [ $rc -eq 77 ] && printf '%s\n' "$out" | grep -Eq "^SKIP: .*$reason"; then ok; else
        bad "$* without TFCORE_REQUIRE_GPU: exit $rc (want 77 and SKIP: ...$reason):"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
    fi
    out=$(TFCORE_REQUIRE_GPU=1 "$@" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -Eq "FAIL: TFCORE_REQUIRE_GPU=1 .*$reason"; then ok; else
        bad "$* with TFCORE_REQUIRE_GPU=1: exit $rc (want 1 and FAIL: ...$reason):"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
    fi
}

# This build: whatever keeps backend-cuda from running here is the reason.
why=$(gpu_cuda_why "$tfcore")
case $why in
"the plugin loader rejected backend-cuda: "* | "backend-cuda cannot run here: no CUDA device: "* | \
    "backend-cuda was not found (searched "*) ok ;;
*) bad "gpu_cuda_why gave an unexpected reason: $why" ;;
esac
echo "here: $why"
fixed=$(printf '%s' "$why" | cut -c1-40 | sed 's/[][\\.*^$()+?{}|]/./g')
both "$fixed" sh "$top_srcdir/tests/test_gpu_ref.sh"
both "$fixed" sh "$top_srcdir/tests/test_gpu_finetune.sh"
if [ -x "$top_builddir/tests/test_backend_cuda" ]; then
    both "no CUDA device \(" "$top_builddir/tests/test_backend_cuda"
    both "no CUDA device \(" "$top_builddir/tests/test_backend_cuda_attention"
    both "no CUDA device \(" sh "$top_srcdir/tests/test_backend_cuda_sanitizer.sh"
fi
# comm-nccl's GPU part (its other checks pass here; without the variable
# make check runs it as it is)
if [ -f "$top_builddir/plugins/comm-nccl/.libs/tfcore-comm-nccl.so" ]; then
    out=$(TFCORE_REQUIRE_GPU=1 sh "$top_srcdir/tests/test_comm_nccl.sh" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "^FAIL: TFCORE_REQUIRE_GPU=1 but a GPU part cannot run: GPU part .*: comm-nccl probe: unusable: no CUDA device: " &&
        printf '%s\n' "$out" | grep -q "^test_comm_nccl: .* 1 failed$"; then ok; else
        bad "test_comm_nccl.sh with TFCORE_REQUIRE_GPU=1: exit $rc (want 1, its GPU part failed):"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
    fi
fi

# A tfcore whose backend-cuda the loader rejected: that reason, not "no
# CUDA device" (a fake build tree whose tfcore prints such a listing).
mkdir -p "$tmp/fake/core"
cat >"$tmp/fake/core/tfcore" <<'FAKE'
#!/bin/sh
cat <<'JSON'
{"searched": ["/b/plugins/backend-cuda/.libs"], "plugins": [],
 "rejected": [{"path": "/b/plugins/backend-cuda/.libs/tfcore-backend-cuda.so",
   "why": "/b/plugins/backend-cuda/.libs/tfcore-backend-cuda.so: cannot load: libcublasLt.so.13: cannot open shared object file: No such file or directory"}]}
JSON
FAKE
chmod +x "$tmp/fake/core/tfcore"
rejected="the plugin loader rejected backend-cuda: .*libcublasLt\.so\.13: cannot open shared object file"
both "$rejected" env top_builddir="$tmp/fake" sh "$top_srcdir/tests/test_gpu_ref.sh"
both "$rejected" env top_builddir="$tmp/fake" sh "$top_srcdir/tests/test_gpu_finetune.sh"
out=$(env top_builddir="$tmp/fake" TFCORE_REQUIRE_GPU=1 sh "$top_srcdir/tests/test_gpu_ref.sh" 2>&1)
if printf '%s\n' "$out" | grep -q "no CUDA device"; then bad "a rejected plugin was reported as no CUDA device: $out"; else ok; fi
# no tfcore at all
both "no $tmp/none/core/tfcore" env top_builddir="$tmp/none" sh "$top_srcdir/tests/test_gpu_ref.sh"

echo "test_gpu_required: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
