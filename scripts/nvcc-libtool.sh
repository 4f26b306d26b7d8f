#!/bin/sh
# nvcc-libtool.sh — lets libtool's compile mode drive nvcc.
#
#   libtool --tag=CC --mode=compile sh nvcc-libtool.sh [--cuda-archs=LIST] NVCC ARGS...
#
# libtool speaks gcc: for the shared-library object it appends -fPIC -DPIC.
# nvcc passes -D on but wants host-compiler-only flags behind -Xcompiler, so
# those are translated here; everything else goes to nvcc unchanged.
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

exec "$nvcc" "$@"
