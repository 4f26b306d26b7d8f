#!/bin/sh
# test_backend_cuda_sanitizer.sh — the backend-cuda op suites under NVIDIA's
# compute-sanitizer: memcheck (out-of-bounds and misaligned accesses, leaks
# of device memory, API errors) on both suites, and racecheck (shared-memory
# hazards) on the attention/layernorm/cross-entropy suite, whose kernels share
# tiles between threads.
#
# Skips (exit 77) when there is no usable GPU (asked of the op suite itself:
# TF_CUDA_TEST_PROBE=1) or no compute-sanitizer (on PATH, in $CUDA_HOME/bin
# or /usr/local/cuda/bin); with TFCORE_REQUIRE_GPU=1 either is a failure
# that says why (tests/gpu_backend.sh). The suites run in one process each
# (they do not fork), under libtool --mode=execute so the sanitizer sees the
# real binary (run directly where there is no libtool: the GPU bundle's
# suites are the real binaries). Set TF_SANITIZER_FAST=1 to run only
# memcheck on the first suite.
set -u

b=${top_builddir:-.}
. "${top_srcdir:-.}/tests/gpu_backend.sh"
suite_a=$b/tests/test_backend_cuda
suite_b=$b/tests/test_backend_cuda_attention
run=
if test -f "$b/libtool"; then run="$b/libtool --mode=execute"; fi

for t in "$suite_a" "$suite_b"; do
    if ! test -x "$t"; then
        echo "FAIL: $t is not built"
        exit 1
    fi
done

out=$(TF_CUDA_TEST_PROBE=1 "$suite_a" 2>&1)
rc=$?
if test $rc -eq 77; then
    echo "$out"
    exit 77
elif test $rc -ne 0; then
    echo "FAIL: $suite_a could not probe for a GPU (exit $rc):"
    echo "$out"
    exit 1
fi

san=
for cand in "$(command -v compute-sanitizer 2>/dev/null)" \
    "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer; do
    if test -n "$cand" && test -x "$cand"; then
        san=$cand
        break
    fi
done
if test -z "$san"; then
    gpu_unavailable "compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
fi

failed=0
# one sanitizer run: TOOL SUITE; a suite that skips (77) counts as passed here
check() {
    tool=$1
    suite=$2
    echo "== compute-sanitizer --tool $tool $(basename "$suite")"
    extra=
    if test "$tool" = memcheck; then extra="--leak-check full"; fi
    # shellcheck disable=SC2086 # $run and $extra are word lists
    CK_FORK=no $run "$san" --tool "$tool" $extra --error-exitcode 99 --print-limit 50 "$suite"
    r=$?
    case $r in
    0 | 77) echo "== $tool $(basename "$suite"): clean" ;;
    99)
        echo "== $tool $(basename "$suite"): sanitizer errors (above)"
        failed=1
        ;;
    *)
        echo "== $tool $(basename "$suite"): the suite failed (exit $r)"
        failed=1
        ;;
    esac
}

check memcheck "$suite_a"
if test -z "${TF_SANITIZER_FAST:-}"; then
    check memcheck "$suite_b"
    check racecheck "$suite_b"
fi
if test $failed -ne 0; then
    echo "FAIL: compute-sanitizer found problems"
    exit 1
fi
echo "compute-sanitizer: both op suites clean"
exit 0
