#!/usr/bin/env bash
# Build backend-cuda and comm-nccl against the test-only CUDA emulation
# (tests/cuda-emu/README.md) into DIR:
#   DIR/build/                      the normal tree (--without-cuda): libtfcore,
#                                   the tfcore CLI, backend-cpu and the others
#   DIR/libcudaemu.so               the emulation: every tests/cuda-emu/*.c,*.cc
#                                   except test_*; one library, so both plugins
#                                   in a process share one set of devices
#   DIR/tfcore-backend-cuda.so      plugins/backend-cuda/*.c + *.cu (the .cu as
#   DIR/tfcore-comm-nccl.so         host C++), plugins/comm-nccl/*.c
#   DIR/comm-nccl-driver            comm-nccl's test driver
#   DIR/test_*                      tests/cuda-emu/test_*.c,*.cc and the
#                                   backend-cuda op suites
#   DIR/tree/                       a build-tree look-alike for the op suites
#                                   (top_builddir=DIR/tree)
# Then TFCORE_PLUGIN_PATH=DIR TFCORE_EMU_DEVICES=N DIR/build/core/tfcore ...
# runs on N emulated GPUs. Nothing here is installed or shipped.
#
# Usage: scripts/build-cuda-emu.sh [--san=thread|address] DIR
#        (or SAN=thread|address in the environment; address is
#        AddressSanitizer + UndefinedBehaviorSanitizer). A sanitizer build
# instruments everything, the normal tree included (a sanitized plugin needs a
# sanitized process). JOBS (default 2) sets make's parallelism; CC and CXX
# (default gcc and g++) the compilers, for every part (scripts/test-emulated-gpu.sh
# builds its ThreadSanitizer tree with clang-16: LLVM's ThreadSanitizer runtime);
# EMU_TREE an existing normal tree to use as DIR/build (step 1 below).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
san="${SAN:-}"
dir=""
for a in "$@"; do
    case "$a" in
    --san=*) san="${a#--san=}" ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "build-cuda-emu.sh: unknown option $a" >&2; exit 2 ;;
    *) dir="$a" ;;
    esac
done
[ -n "$dir" ] || { echo "usage: scripts/build-cuda-emu.sh [--san=thread|address] DIR" >&2; exit 2; }
case "$san" in
"") sanflags=""; opt="-O2" ;;
thread) sanflags="-fsanitize=thread"; opt="-O1" ;;
# address: AddressSanitizer and UBSan together (UB aborts, as in test-all.sh's
# ASan build)
address) sanflags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"; opt="-O1" ;;
*) echo "build-cuda-emu.sh: SAN must be thread or address, not '$san'" >&2; exit 2 ;;
esac
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
jobs="${JOBS:-2}"
emu="$top/tests/cuda-emu"
cc="${CC:-gcc}" cxx="${CXX:-g++}"

# 1. the normal tree, CUDA off. EMU_TREE=PATH: an existing tree configured
# --without-cuda with the same compilers and flags (scripts/test-all.sh's
# AddressSanitizer tree), linked as DIR/build rather than built again.
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh >/dev/null)
if [ -n "${EMU_TREE:-}" ]; then
    [ -f "$EMU_TREE/Makefile" ] || { echo "build-cuda-emu.sh: EMU_TREE=$EMU_TREE is not a configured tree" >&2; exit 2; }
    grep -q "^CFLAGS = .*${sanflags}" "$EMU_TREE/Makefile" || {
        echo "build-cuda-emu.sh: EMU_TREE=$EMU_TREE was not configured with CFLAGS holding '$sanflags'" >&2
        exit 2
    }
    if [ -e "$dir/build" ] && [ ! -L "$dir/build" ]; then
        echo "build-cuda-emu.sh: $dir/build is a tree of its own; remove it to use EMU_TREE=$EMU_TREE" >&2
        exit 2
    fi
    ln -sfn "$(cd "$EMU_TREE" && pwd)" "$dir/build"
fi
mkdir -p "$dir/build"
(cd "$dir/build" && { [ -f Makefile ] || "$top/configure" -q --without-cuda CC="$cc" CXX="$cxx" \
    CFLAGS="-g $opt $sanflags" LDFLAGS="$sanflags"; } && nice make -s -j"$jobs" >/dev/null)
core_lib="$dir/build/core/.libs"

# 2. compile flags. The stand-in headers come before anything CUDA; the real
# toolkit is never on the path.
cppflags=(-D_GNU_SOURCE -DTFC_EMULATED "-DTF_PLUGIN_DESC_SUFFIX=\" (emulated, tests only)\""
    -I"$emu/include" -I"$emu" -I"$top/core/include" -I"$dir/build")
common=(-g "$opt" -fPIC -pthread $sanflags)
# AddressSanitizer (GCC): TLS descriptors for the kernels' __shared__
# variables (static thread_local in a dlopen()ed plugin), whose fast path
# reads the thread's DTV, where the default dialect calls __tls_get_addr on
# each kernel thread, which AddressSanitizer intercepts: more than half of an
# op-suite case's time (attention_head_dims 65 -> 31 s of CPU). The plain
# build gains nothing from it.
[ "$san" = address ] && case "$cc" in *clang*) ;; *) common+=(-mtls-dialect=gnu2) ;; esac
cflags=(-std=c17 "${common[@]}" -Wall -Wno-unused-parameter -Werror=implicit-function-declaration)
# -fno-strict-aliasing: kernels type-pun through pointers (a __half2 read as
# uint32_t, uint4 tiles read as T), which CUDA's compiler allows and g++'s
# aliasing rules would let it drop. -ffp-contract=off: no fused multiply-adds
# the source did not write, as the kernels' own rule.
cxxflags=(-std=c++17 "${common[@]}" -Wall -Wno-unused-parameter -ffp-contract=off -fno-strict-aliasing)
# -z defs: every symbol resolved at link time, except under clang's sanitizers,
# whose runtime is linked into the executables only (a plugin takes it from
# the process)
ldflags=(-shared -pthread $sanflags -Wl,-z,defs)
case "$cc" in *clang*) [ -n "$san" ] && ldflags=(-shared -pthread $sanflags) ;; esac
obj="$dir/obj"
mkdir -p "$obj/emu" "$obj/backend-cuda" "$obj/comm-nccl" "$obj/tests"

# compile SRC OBJ [extra flags...]: by the source's suffix; only when stale
compile() {
    local src="$1" out="$2"
    shift 2
    if [ -f "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$0" ] &&
        [ -z "$(find "$emu" "$top/core/include" "$(dirname "$src")" -name '*.h' -newer "$out" -o \
            -name '*.cuh' -newer "$out" | head -n 1)" ]; then
        return 0
    fi
    case "$src" in
    *.c) nice "$cc" "${cflags[@]}" "${cppflags[@]}" "$@" -c "$src" -o "$out" ;;
    *.cc) nice "$cxx" "${cxxflags[@]}" "${cppflags[@]}" "$@" -c "$src" -o "$out" ;;
    *.cu) nice "$cxx" -x c++ "${cxxflags[@]}" -Wno-unknown-pragmas "${cppflags[@]}" -D__CUDACC__ -include emu_simt.h \
        "$@" -c "$src" -o "$out" ;;
    esac
}
# build_all OUTDIR EXTRA_FLAGS... -- SOURCES...: compile in parallel (JOBS),
# fail if any fails; prints the objects.
objs=()
build_all() {
    local out="$1"
    shift
    local extra=()
    while [ "$1" != "--" ]; do extra+=("$1"); shift; done
    shift
    objs=()
    local pids=() s o
    for s in "$@"; do
        o="$out/$(basename "$s").o"
        objs+=("$o")
        compile "$s" "$o" "${extra[@]}" &
        pids+=($!)
        if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}" || return 1; pids=("${pids[@]:1}"); fi
    done
    for p in "${pids[@]}"; do wait "$p" || return 1; done
}

shopt -s nullglob
# 3. the emulation library
lib_src=()
for s in "$emu"/*.c "$emu"/*.cc; do
    case "$(basename "$s")" in test_*) ;; *) lib_src+=("$s") ;; esac
done
build_all "$obj/emu" -- "${lib_src[@]}"
nice "$cxx" "${ldflags[@]}" -Wl,-soname,libcudaemu.so -o "$dir/libcudaemu.so" "${objs[@]}" -ldl -lrt
emu_link=(-L"$dir" -lcudaemu -L"$core_lib" -ltfcore -Wl,-rpath,'$ORIGIN' -Wl,-rpath,"$core_lib")

# 4. backend-cuda
build_all "$obj/backend-cuda" -I"$top/plugins/backend-cuda" "-DTFC_CUDA_ARCHS=\"emulated\"" -- \
    "$top"/plugins/backend-cuda/*.c "$top"/plugins/backend-cuda/*.cu
nice "$cxx" "${ldflags[@]}" -o "$dir/tfcore-backend-cuda.so" "${objs[@]}" "${emu_link[@]}" -lm

# 5. comm-nccl, with bootstrap "mpi" where Open MPI is installed (its header
# only, libmpi dlopen()ed, as plugins/comm-nccl/local.mk); its driver is a
# test program
nccl_src=()
for s in "$top"/plugins/comm-nccl/*.c; do
    [ "$(basename "$s")" = comm_nccl_driver.c ] || nccl_src+=("$s")
done
nccl_mpi=()
# shellcheck disable=SC2207 # mpicc's flags are words
command -v mpicc >/dev/null 2>&1 && nccl_mpi=(-DTF_NCCL_WITH_MPI $(mpicc --showme:compile))
build_all "$obj/comm-nccl" -I"$top/plugins/comm-nccl" "${nccl_mpi[@]}" -- "${nccl_src[@]}"
nice "$cxx" "${ldflags[@]}" -o "$dir/tfcore-comm-nccl.so" "${objs[@]}" "${emu_link[@]}" -lm -ldl

# 6. test programs: the emulation's own, comm-nccl's driver, the op suites
test_cpp=(-I"$top/core/sdk" -I"$top/core/runtime" -I"$top/core/cli" $(pkg-config --cflags check jansson libconfig 2>/dev/null))
# the tests link the private runtime (registry, plan, ...: core/local.mk's
# TFCORE_RUNTIME_LIBS) before the public library, as make check does
# (OpenMP as the normal tree's configure found it: clang-16 has none without libomp)
openmp="$(sed -n 's/^OPENMP_CFLAGS = //p' "$dir/build/Makefile")"
test_libs=("$core_lib/libtfcore-runtime.a" -L"$core_lib" -ltfcore -Wl,-rpath,"$core_lib" $openmp -ldl $(pkg-config --libs check jansson libconfig 2>/dev/null) -lm -pthread $sanflags)
for s in "$emu"/test_*.c "$emu"/test_*.cc; do
    b="$(basename "${s%.*}")"
    compile "$s" "$obj/tests/$b.o" "${test_cpp[@]}"
    nice "$cxx" -pthread $sanflags -o "$dir/$b" "$obj/tests/$b.o" -L"$dir" -lcudaemu -Wl,-rpath,"$dir" \
        "${test_libs[@]}"
done
for s in "$top/plugins/comm-nccl/comm_nccl_driver.c" "$top/tests/test_backend_cuda.c" \
    "$top/tests/test_backend_cuda_attention.c"; do
    b="$(basename "${s%.c}")"
    [ "$b" = comm_nccl_driver ] && b=comm-nccl-driver
    compile "$s" "$obj/tests/$b.o" "${test_cpp[@]}"
    nice "$cc" -o "$dir/$b" "$obj/tests/$b.o" "${test_libs[@]}" -ldl
done

# 7. the op suites and tests/ref look for programs and plugins in
# $top_builddir (tests/, core/, plugins/NAME/.libs): the normal tree's, with
# backend-cuda and comm-nccl the emulated ones
mkdir -p "$dir/tree/plugins/backend-cuda" "$dir/tree/plugins/comm-nccl"
ln -sfn "$dir" "$dir/tree/plugins/backend-cuda/.libs"
ln -sfn "$dir" "$dir/tree/plugins/comm-nccl/.libs"
for p in "$dir"/build/plugins/*/; do
    p="$(basename "$p")"
    case "$p" in backend-cuda | comm-nccl) ;; *) ln -sfn "$dir/build/plugins/$p" "$dir/tree/plugins/$p" ;; esac
done
ln -sfn "$dir/build/core" "$dir/tree/core"
ln -sfn "$dir/build/tests" "$dir/tree/tests"
echo "build-cuda-emu.sh: emulated plugins in $dir${san:+ (sanitizer: $san)}"
