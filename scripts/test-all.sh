#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. build in build/ and `make check` (unit tests, shell tests, and the
#      reference tests against torch / transformers / tokenizers);
#   2. every fuzz target for a short run (libFuzzer + ASan + UBSan; libtfcore
#      compiled once, two targets fuzzing at a time, each for the full time),
#      built and run beside step 1 (niced), with step 4's bundle build;
#   3. at the same time: the unit tests of step 1 built with AddressSanitizer
#      + UBSan (build-asan/), and the emulated-GPU suite
#      (scripts/test-emulated-gpu.sh, build-emu*/: every case plain, under
#      ASan + UBSan and under TSan, two at a time);
#   4. the GPU bundle (docs/GPU.md) built, moved and checked, where nvcc is;
#   5. `make distcheck` (the tarball builds out of tree from a read-only
#      source, installs, passes the tests of its own files: DIST_TESTS) and
#      scripts/check-dist.sh (every tracked file is in the tarball).
# Usage: scripts/test-all.sh [--quick]   (--quick: step 1 only)
# Environment: JOBS (default: nproc), FUZZ_SECONDS (default 10), DIST_TESTS
# (the tests distcheck runs; "all": every one).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
cd "$top"
jobs="${JOBS:-$(nproc)}"
quick=0
[ "${1:-}" = "--quick" ] && quick=1

"$top/scripts/install-deps.sh" --slurm # Slurm and munge: tests/test_slurm.sh
export TFCORE_PYTHON="${TFCORE_PYTHON:-$("$top/scripts/setup-python.sh" | tail -n 1)}"
[ -x "$top/configure" ] || "$top/autogen.sh"

# Each step ends with its wall and CPU seconds (the CPU of every process it
# waited for), so a slow CI run says which step grew.
# (`times` runs in this shell, not in a $(...) subshell, which has no children)
times_file="$(mktemp)"
cpu_now() {
    times >"$times_file"
    step_cpu=$(tail -n 1 "$times_file" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%.0f", s }')
}
step_name=""
step_done() {
    [ -n "$step_name" ] || return 0
    cpu_now
    printf '=== %s: %s s, %s s CPU\n' "$step_name" "$(($(date +%s) - step_t0))" "$((step_cpu - step_cpu0))"
    step_name=""
}
step() {
    step_done
    printf '\n=== %s\n' "$*"
    step_name="${*%% (*}" step_t0=$(date +%s)
    cpu_now
    step_cpu0=$step_cpu
}

# Beside step 1, niced: the fuzz targets of step 2, and the GPU bundle's
# build of step 4. make check keeps only about 1.5 of the 2 cores busy (its
# tests wait on timeouts, mpirun and loopback servers: 752 s of CPU in 497 s,
# CI of 2026-12-07), so these fill the rest; each one's output is shown at its
# step. Each runs in its own process group, stopped if this script ends first.
bg_groups=()
trap 'rm -f "$times_file"; for g in ${bg_groups[@]+"${bg_groups[@]}"}; do kill -- "-$g" 2>/dev/null || true; done' EXIT
have_nvcc=0
{ command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } && have_nvcc=1
if [ "$quick" = 0 ]; then
    mkdir -p build-asan build-gpu
    rm -f build-asan/fuzz.rc build-gpu/bundle.rc
    setsid bash -c 'nice -n 10 env FUZZ_OUT="$1/build-asan/fuzz-out" "$1/scripts/fuzz.sh" "$2"; echo $? >"$1/build-asan/fuzz.rc"' \
        sh "$top" "${FUZZ_SECONDS:-10}" >build-asan/fuzz.out 2>&1 </dev/null &
    fuzz_pid=$!
    bg_groups+=("$fuzz_pid")
    if [ "$have_nvcc" = 1 ]; then
        setsid bash -c 'nice -n 10 env JOBS="$2" "$1/scripts/gpu-bundle.sh" "$1/build-gpu/gpu-bundle"; echo $? >"$1/build-gpu/bundle.rc"' \
            sh "$top" "$jobs" >build-gpu/bundle.out 2>&1 </dev/null &
        bundle_pid=$!
        bg_groups+=("$bundle_pid")
    fi
fi
# bg_result NAME PID RCFILE OUTFILE: wait for a job started above, show its
# output; fails when it did
bg_result() {
    wait "$2" 2>/dev/null || true
    cat "$4"
    [ "$(cat "$3" 2>/dev/null)" = 0 ] || { echo "$1: FAILED"; return 1; }
}

step "build and make check (build/), the fuzz targets and the GPU bundle's build beside it"
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -s -j"$jobs" && \
    TFCORE_REQUIRE_REF=1 make -s -j"$jobs" check) \
    || { cat build/test-suite.log 2>/dev/null | tail -80; exit 1; }
[ "$quick" = 1 ] && { step_done; exit 0; }

step "fuzz targets, ${FUZZ_SECONDS:-10}s each (built and run beside step 1)"
bg_result "fuzz.sh" "$fuzz_pid" build-asan/fuzz.rc build-asan/fuzz.out || exit 1

# The unit tests under ASan run beside the emulated-GPU suite: that suite
# keeps the 2 cores about 1.5 to 1.8 busy (its multi-rank cases wait on each
# other, its stalled-rank case on a timeout), so the ASan build and tests fill
# the rest. Their output goes to build-asan/check.out, shown when they end.
step "unit tests under ASan + UBSan beside backend-cuda, comm-nccl and 16-bit on emulated GPUs (build-asan/, build-emu/)"
mkdir -p build-asan
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# build-asan/ is also the emulated suite's AddressSanitizer tree (ASAN_TREE:
# the same configuration build-cuda-emu.sh would make), so it is built first,
# with the two test programs that suite's scripts use; the unit tests' own
# programs are built by their make check
(cd build-asan && { [ -f Makefile ] || ../configure -q --without-cuda CFLAGS="-g -O1 $san" LDFLAGS="$san"; } && \
    make -s -j"$jobs" && make -s -j"$jobs" tests/model_bert_driver tests/params_diff) || exit 1
asan_unit_tests() {
    local t0=$(date +%s)
    if (cd build-asan && \
        ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        TFCORE_SKIP_REF=1 make -s -j"$jobs" check); then
        echo "unit tests under ASan + UBSan: passed ($(($(date +%s) - t0)) s)"
    else
        tail -n 80 build-asan/test-suite.log 2>/dev/null
        echo "unit tests under ASan + UBSan: FAILED ($(($(date +%s) - t0)) s)"
        return 1
    fi
}
asan_unit_tests >build-asan/check.out 2>&1 </dev/null &
asan_pid=$!
# The emulated cases run one more at a time than there are cores: several wait
# more than they compute (a stalled rank's timeout, the reference's Python,
# the NCCL stand-in's rendezvous), and after the ASan unit tests end two
# cases alone left the cores a tenth idle (2185 s of CPU in 1218 s, CI of
# 2026-11-25).
emu_rc=0
JOBS=$((jobs + 1)) ASAN_TREE="$top/build-asan" "$top/scripts/test-emulated-gpu.sh" "$top/build-emu" || emu_rc=1
asan_rc=0
wait "$asan_pid" || asan_rc=1
echo "--- build-asan/check.out"
cat build-asan/check.out
[ "$emu_rc" = 0 ] && [ "$asan_rc" = 0 ] || exit 1

step "GPU bundle: scripts/gpu-bundle.sh (CUDA_ARCHS=90, --without-mpi --without-curl --without-libarchive --without-onednn) moved and run without a GPU"
if [ "$have_nvcc" = 1 ]; then
    bg_result "gpu-bundle.sh (built beside step 1)" "$bundle_pid" build-gpu/bundle.rc build-gpu/bundle.out && \
        GPU_BUNDLE="$top/build-gpu/gpu-bundle" top_builddir="$top/build" top_srcdir="$top" \
        sh "$top/tests/test_gpu_bundle.sh" || exit 1
else
    echo "skipped: no nvcc (the bundle needs backend-cuda)"
fi

# make distcheck: the tarball configures and builds out of tree from a
# read-only source, installs and uninstalls, and cleans up; its tests are
# DIST_TESTS, the ones that check the tarball's own files (the source layout,
# the exported symbols, the plugin template built from examples/, every
# plugin README against its keys, the shipped configs, the ABI offsets, the
# config parser); every other test ran in step 1 on this checkout, whose
# tracked files scripts/check-dist.sh finds in the tarball (DIST_TESTS=all:
# every test, as automake's distcheck does by default).
step "make distcheck (DIST_TESTS), and the tarball against git ls-files"
dist_tests="${DIST_TESTS:-tests/test_layout.sh tests/test_exports.sh tests/test_plugin_template.sh tests/test_plugin_keys.sh tests/test_conf.sh tests/test_abi tests/test_config}"
dist_args=()
[ "$dist_tests" = all ] || dist_args=("TESTS=$dist_tests") # passed on to distcheck's make check
rm -f build/tfcore-*.tar.gz
(cd build && TFCORE_SKIP_REF=1 make -s -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--without-cuda \
    ${dist_args[@]+"${dist_args[@]}"}) || exit 1
"$top/scripts/check-dist.sh" build/tfcore-*.tar.gz || exit 1
step_done
echo
echo "test-all.sh: every step passed"
