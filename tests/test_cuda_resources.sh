#!/bin/sh
# The CI gate on backend-cuda's compiled kernels, read from ptxas's report of
# the objects this build made (scripts/nvcc-libtool.sh keeps it beside each
# as OBJECT.ptxas, for every architecture of CUDA_ARCHS): no kernel over 48
# KB of static shared memory, none whose registers x launch size (the table
# in tests/data/cuda-resources/launch-threads.txt) exceeds the SM's 65536
# registers, and no more spills than the recorded baseline
# (tests/data/cuda-resources/spill-baseline.txt). First the checker itself
# must catch each of those on a made-up report. Skips where backend-cuda is
# not built (no CUDA toolkit).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
d="$top_srcdir/tests/data/cuda-resources"
check="$top_srcdir/tests/cuda_resources_check.py"
objs="$top_builddir/plugins/backend-cuda/.libs"
[ -f "$objs/tfcore-backend-cuda.so" ] || { echo "SKIP: backend-cuda is not built (no CUDA toolkit)"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-cudares-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0

# --- the checker fails on each limit (a made-up report) ----------------------------------------
cat >"$tmp/made-up.ptxas" <<'PTX'
ptxas info    : Compiling entry function '_Z10ln_fwd_vecIfLi4EEvv' for 'sm_90'
ptxas info    : Function properties for _Z10ln_fwd_vecIfLi4EEvv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 80 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compiling entry function '_Z8ce_countv' for 'sm_90'
ptxas info    : Function properties for _Z8ce_countv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 1 barriers, 50000 bytes smem
ptxas info    : Compiling entry function '_Z12att_fwd_simtIfLi32EEvv' for 'sm_90'
ptxas info    : Function properties for _Z12att_fwd_simtIfLi32EEvv
    24 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 48 registers, used 1 barriers, 24 bytes cumulative stack size, 12672 bytes smem
ptxas info    : Compiling entry function '_Z13new_kernel_xyv' for 'sm_80'
ptxas info    : Function properties for _Z13new_kernel_xyv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
PTX
printf 'sm_90 _Z12att_fwd_simtIfLi32EEvv 20 20\n' >"$tmp/baseline.txt"
python3 "$check" "$d/launch-threads.txt" "$tmp/baseline.txt" "$tmp/made-up.ptxas" >"$tmp/made-up.out" 2>&1
rc=$?
for want in "ln_fwd_vec.*80 registers x 1024 threads = 81920, more than the 65536-register file" \
    "ce_count.*50000 bytes of static shared memory, more than 49152" \
    "att_fwd_simt<float, 32>.*spills 24 bytes stored / 20 loaded, the baseline is 20 / 20" \
    "no launch size for 'new_kernel_xy'" "cuda_resources: 4 problem"; do
    grep -q -- "$want" "$tmp/made-up.out" || { echo "FAIL: the checker did not say: $want"; fail=1; }
done
[ $rc -eq 1 ] || { echo "FAIL: the checker exited $rc on a bad report"; fail=1; }
[ $fail -eq 0 ] || sed 's/^/    /' "$tmp/made-up.out"

# --- this build's kernels -----------------------------------------------------------------------
reports=
missing=
for cu in "$top_srcdir"/plugins/backend-cuda/*.cu; do
    r="$objs/$(basename "$cu" .cu).o.ptxas"
    if [ -f "$r" ]; then reports="$reports $r"; else missing="$missing $(basename "$r")"; fi
done
if [ -n "$missing" ]; then
    echo "FAIL: no ptxas report for:$missing (objects built before scripts/nvcc-libtool.sh kept them: rebuild backend-cuda)"
    exit 1
fi
archs=$(sed -n 's/^CUDA_ARCHS = //p' "$top_builddir/Makefile")
echo "CUDA_ARCHS: $archs"
# shellcheck disable=SC2086 # the report list
python3 "$check" "$d/launch-threads.txt" "$d/spill-baseline.txt" $reports || fail=1
for a in $(printf '%s\n' "$archs" | tr ';,' '  '); do
    # shellcheck disable=SC2086
    grep -q "for 'sm_$a'" $reports || { echo "FAIL: no kernel compiled for sm_$a in the reports"; fail=1; }
done
[ $fail -eq 0 ]
