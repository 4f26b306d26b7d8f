#!/bin/sh
# nvcc-libtool.sh — lets libtool's compile mode drive nvcc.
#
#   libtool --tag=CC --mode=compile sh nvcc-libtool.sh [--cuda-archs=LIST] NVCC ARGS...
#
# libtool speaks gcc: for the shared-library object it appends -fPIC -DPIC.
# nvcc passes -D on but wants host-compiler-only flags behind -Xcompiler, so
# those are translated here; everything else goes to nvcc unchanged.
#
# The kernels' resource report goes to OUT.ptxas (see the end).
#
# --cuda-archs=LIST (configure's CUDA_ARCHS, e.g. "80;90", separated by ';',
# ',' or spaces) becomes one -gencode per architecture with machine code
# (sm_XX), plus PTX of the highest one (compute_XX) so that newer GPUs can
# JIT-compile the kernels.
set -e

archs=
case ${1-} in
--cuda-archs=*)
    archs=${1#--cuda-archs=}
    shift
    ;;
esac
if test $# -lt 1; then
    echo "usage: $0 [--cuda-archs=LIST] NVCC ARGS..." >&2
    exit 2
fi
nvcc=$1
shift

# Rebuild "$@" with the translations (each original argument is shifted off
# as the loop reaches it and the translated form appended).
for arg
do
    shift
    case $arg in
    -fPIC | -fpic | -fPIE | -fpie | -pthread | -fno-common | -fvisibility=* | \
    -Wall | -Wextra | -Wshadow | -Wformat=*)
        set -- "$@" -Xcompiler "$arg"
        ;;
    *)
        set -- "$@" "$arg"
        ;;
    esac
done

if test -n "$archs"; then
    highest=
    highest_num=-1
    for a in $(printf '%s\n' "$archs" | tr ';,' '  '); do
        case $a in
        '' ) continue ;;
        *[!0-9a-z]*)
            echo "$0: bad CUDA architecture '$a' in '$archs' (want e.g. 80;90)" >&2
            exit 2
            ;;
        esac
        set -- "$@" -gencode "arch=compute_$a,code=sm_$a"
        num=$(printf '%s\n' "$a" | sed 's/[^0-9].*//')
        if test -n "$num" && test "$num" -gt "$highest_num"; then
            highest_num=$num
            highest=$a
        fi
    done
    if test -n "$highest"; then
        set -- "$@" -gencode "arch=compute_$highest,code=compute_$highest"
    fi
fi

# ptxas's resource report (registers, static shared memory, stack and spills
# of every kernel, per architecture) is kept beside the object as OUT.ptxas
# for tests/test_cuda_resources.sh; the build output shows the rest of what
# nvcc says.
out=
prev=
for arg
do
    case $prev in -o) out=$arg ;; esac
    prev=$arg
done
if test -z "$out"; then
    exec "$nvcc" "$@"
fi
said="$out.nvcc-said"
if "$nvcc" -Xptxas -v "$@" 2>"$said"; then rc=0; else rc=$?; fi
ptxas_line='^ptxas info\|^    [0-9][0-9]* bytes stack frame'
grep -v "$ptxas_line" "$said" >&2 || true
if test $rc -eq 0; then
    grep "$ptxas_line" "$said" >"$out.ptxas.tmp" || true
    mv "$out.ptxas.tmp" "$out.ptxas"
fi
rm -f "$said"
exit $rc
