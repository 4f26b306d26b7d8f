#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. build in build/ and `make check` (unit tests, shell tests, and the
#      reference tests against torch / transformers / tokenizers);
#   2. the same unit tests built with AddressSanitizer + UBSan (build-asan/);
#   3. every fuzz target for a short run (libFuzzer + ASan + UBSan; libtfcore
#      compiled once, two targets fuzzing at a time, each for the full time);
#   4. the emulated-GPU suite (scripts/test-emulated-gpu.sh, build-emu*/):
#      every case plain, under ASan + UBSan and under TSan, two at a time;
#   5. the GPU bundle (docs/GPU.md) built, moved and checked, where nvcc is;
#   6. `make distcheck` (the tarball builds and passes its tests out of tree).
# Usage: scripts/test-all.sh [--quick]   (--quick: step 1 only)
# Environment: JOBS (default: nproc), FUZZ_SECONDS (default 15).
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
trap 'rm -f "$times_file"' EXIT
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

step "build and make check (build/)"
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -s -j"$jobs" && \
    TFCORE_REQUIRE_REF=1 make -s -j"$jobs" check) \
    || { cat build/test-suite.log 2>/dev/null | tail -80; exit 1; }
[ "$quick" = 1 ] && { step_done; exit 0; }

step "unit tests under AddressSanitizer + UBSan (build-asan/)"
mkdir -p build-asan
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
(cd build-asan && { [ -f Makefile ] || ../configure -q --without-cuda CFLAGS="-g -O1 $san" LDFLAGS="$san"; } && \
    make -s -j"$jobs" && \
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    TFCORE_SKIP_REF=1 make -s -j"$jobs" check) \
    || { cat build-asan/test-suite.log 2>/dev/null | tail -80; exit 1; }

step "fuzz targets, ${FUZZ_SECONDS:-15}s each"
FUZZ_OUT="$top/build-asan/fuzz-out" "$top/scripts/fuzz.sh" "${FUZZ_SECONDS:-15}"

step "backend-cuda, comm-nccl and 16-bit on emulated GPUs (build-emu/)"
"$top/scripts/test-emulated-gpu.sh" "$top/build-emu" || exit 1

step "GPU bundle: scripts/gpu-bundle.sh (CUDA_ARCHS=90, --without-mpi --without-curl --without-libarchive --without-onednn) moved and run without a GPU"
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    JOBS="$jobs" "$top/scripts/gpu-bundle.sh" "$top/build-gpu/gpu-bundle" && \
        GPU_BUNDLE="$top/build-gpu/gpu-bundle" top_builddir="$top/build" top_srcdir="$top" \
        sh "$top/tests/test_gpu_bundle.sh" || exit 1
else
    echo "skipped: no nvcc (the bundle needs backend-cuda)"
fi

step "make distcheck"
(cd build && TFCORE_SKIP_REF=1 make -s -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--without-cuda) \
    || exit 1
step_done
echo
echo "test-all.sh: every step passed"
