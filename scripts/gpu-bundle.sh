#!/usr/bin/env bash
# Build a self-contained, relocatable GPU bundle: everything scripts/gpu-run.sh
# needs on a GPU machine that has the NVIDIA driver, the CUDA 13 toolkit,
# python3 with torch + transformers and pip's NCCL, but no tfcore, no Debian
# libraries and no package registry (docs/GPU.md).
#
#   scripts/gpu-bundle.sh OUT_DIR [--build-dir DIR] [--no-build] [--no-archive]
#
# 1. Configures (once) and builds out of tree in DIR (default OUT_DIR.build):
#    `configure --with-cuda --without-mpi CUDA_ARCHS=90` (Hopper only: half
#    the size and build time of "80;90"), then `make` and the test programs.
#    --no-build packages DIR as it is (any configuration; see "left out").
# 2. Lays OUT_DIR out like a build tree (top_builddir = top_srcdir = OUT_DIR,
#    so the GPU tests run unchanged): core/tfcore, core/.libs/libtfcore.so.0,
#    plugins/<name>/.libs/tfcore-*.so, the test and driver programs, the GPU
#    test scripts, tests/ref/, tests/data/, conf/, bench/gpu_vs_torch.sh,
#    bench/cpu_bf16_vs_torch.sh (with its torch peers) and scripts/gpu-run.sh. Every program is the real ELF (never a libtool
#    wrapper), stripped of debug info, with a RUNPATH relative to $ORIGIN
#    (plus the CUDA toolkit's lib64 where it was linked against it): nothing
#    points into the build tree. Plugins that link Open MPI (comm-mpi, and
#    comm-nccl when built with MPI) are left out, said so: the bundle does
#    not carry Open MPI.
# 3. Carries every shared library the programs need that a GPU machine may
#    lack (libconfig, jansson, utf8proc, OpenBLAS + gfortran + quadmath,
#    gomp, subunit), unpacked from the Debian packages of the versions
#    installed here (`apt-get download` + `dpkg -x`, cached in
#    $TFCORE_DEB_CACHE, default ~/.cache/tfcore/debs; no root install), into
#    lib/ with their copyright files in lib/licenses/. Not carried, expected
#    on the GPU machine: glibc, libstdc++/libgcc_s, the CUDA driver
#    (libcuda.so.1), the CUDA runtime and cuBLAS(Lt) (toolkit), and libnccl
#    (pip's nvidia-nccl; the toolkit's 218 MB libnccl cannot travel).
# 4. Writes env.sh (source it from bash: LD_LIBRARY_PATH, TFCORE_PYTHON,
#    TFCORE_PLUGIN_PATH, top_builddir/top_srcdir) and MANIFEST.txt, checks
#    with ldd that every program resolves within the bundle apart from the
#    libraries above, prints the size, and (unless --no-archive) packs
#    OUT_DIR.tar.xz, the file to carry when the folder is too big.
# Needs: patchelf, apt-get (a reachable Debian mirror unless the .debs are
# cached), nvcc for the build. Environment: JOBS (default 2).
set -euo pipefail
me="gpu-bundle.sh"
top="$(cd "$(dirname "$0")/.." && pwd)"
die() { echo "$me: $*" >&2; exit 1; }
usage() { echo "usage: $me OUT_DIR [--build-dir DIR] [--no-build] [--no-archive]   (--help: what it does)" >&2; exit 2; }

out="" build="" do_build=1 archive=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) [ $# -ge 2 ] || usage; build=$2; shift ;;
        --build-dir=*) build=${1#--build-dir=} ;;
        --no-build) do_build=0 ;;
        --no-archive) archive=0 ;;
        -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
        -*) echo "$me: unknown option '$1'" >&2; usage ;;
        *) [ -z "$out" ] || usage; out=$1 ;;
    esac
    shift
done
[ -n "$out" ] || usage
command -v patchelf >/dev/null || die "patchelf not found (scripts/install-deps.sh installs it)"
out=$(realpath -m "$out")
build=$(realpath -m "${build:-$out.build}")
case "$build/" in "$out"/*) die "the build folder $build must not be inside $out" ;; esac
# OUT_DIR is replaced at the end: refuse anything but an earlier bundle
if [ -e "$out" ] && ! { [ -f "$out/MANIFEST.txt" ] && [ -f "$out/env.sh" ]; }; then
    die "$out exists and is not a GPU bundle: give a new folder"
fi
jobs="${JOBS:-2}"

# --- 1. the build ---------------------------------------------------------------
if [ "$do_build" = 1 ]; then
    if [ ! -f "$build/Makefile" ]; then
        nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
        [ -x "$nvcc" ] || die "no nvcc (PATH, /usr/local/cuda/bin): the bundle needs backend-cuda"
        [ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
        mkdir -p "$build"
        echo "$me: configuring $build (CUDA_ARCHS=90, --without-mpi, --without-curl, --without-libarchive, --without-onednn)"
        (cd "$build" && "$top/configure" -q --with-cuda --without-mpi --without-curl --without-libarchive --without-onednn CUDA_ARCHS=90) \
            || die "configure failed (see $build/config.log)"
    fi
    echo "$me: building in $build"
    nice make -C "$build" -s -j"$jobs" >/dev/null || die "make failed in $build"
    nice make -C "$build" -s -j"$jobs" check TESTS= >/dev/null || die "building the test programs failed in $build"
fi
[ -f "$build/Makefile" ] || die "$build is not a configured build folder"
src=$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile")
[ -d "$src/core" ] || die "cannot tell the source folder of $build"
[ -f "$build/plugins/backend-cuda/.libs/tfcore-backend-cuda.so" ] \
    || die "$build has no backend-cuda: configure it with the CUDA toolkit"
archs=$(sed -n 's/^CUDA_ARCHS = //p' "$build/Makefile")

stage="$out.tmp"
rm -rf "$stage"
mkdir -p "$stage/lib/licenses"
trap 'rm -rf "$stage"' EXIT
notes=()

# --- 2. programs, plugins, scripts ---------------------------------------------------
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
# real_elf PATH: the program itself, not libtool's wrapper script
real_elf() {
    local p=$1 d b
    d=$(dirname "$p") b=$(basename "$p")
    if is_elf "$p"; then echo "$p"
    elif is_elf "$d/.libs/$b"; then echo "$d/.libs/$b"
    elif is_elf "$d/.libs/lt-$b"; then echo "$d/.libs/lt-$b"
    else return 1; fi
}
elves=()
put_elf() { # FROM TO(relative to the bundle)
    mkdir -p "$stage/$(dirname "$2")"
    cp "$1" "$stage/$2"
    chmod u+w "$stage/$2"
    strip --strip-debug "$stage/$2"
    elves+=("$2")
}
needs_mpi() { readelf -d "$1" 2>/dev/null | grep -q 'NEEDED.*\[libmpi\.so'; }

lib=$(realpath "$build/core/.libs/libtfcore.so.0") || die "no libtfcore in $build/core/.libs"
put_elf "$lib" core/.libs/libtfcore.so.0

nplugins=0
for so in "$build"/plugins/*/.libs/tfcore-*.so; do
    rel=${so#"$build/"}
    if needs_mpi "$so"; then
        notes+=("left out $rel: it links Open MPI, which the bundle does not carry")
        continue
    fi
    put_elf "$so" "$rel"
    nplugins=$((nplugins + 1))
done

# the programs: tfcore, the GPU suites and drivers, and CPU tests that
# prove the bundle works where it lands
programs=(core/tfcore tests/test_backend_cuda tests/test_backend_cuda_attention
          tests/model_bert_driver tests/params_diff
          tests/test_model_bert tests/test_precision)
# backend-cpu's op families (plugins/backend-cpu/local.mk), one program each
for f in runtime gemm elementwise dropout layernorm attention embedding cross_entropy optimizer threads; do
    programs+=("tests/backend-cpu/test_$f")
done
[ -e "$stage/plugins/comm-nccl/.libs/tfcore-comm-nccl.so" ] && programs+=(plugins/comm-nccl/comm-nccl-driver)
for p in "${programs[@]}"; do
    f=$(real_elf "$build/$p") || die "$build/$p is not built (the test programs come from 'make check TESTS=')"
    put_elf "$f" "$p"
done

copy_src() { # files or folders, relative to the source folder
    for f in "$@"; do
        [ -e "$src/$f" ] || die "$src/$f is missing"
        mkdir -p "$stage/$(dirname "$f")"
        cp -R "$src/$f" "$stage/$f"
    done
}
copy_src scripts/gpu-steps.sh tests/gpu_backend.sh tests/test_gpu_ref.sh tests/test_gpu_finetune.sh \
    tests/test_backend_cuda_sanitizer.sh tests/test_comm_nccl.sh tests/test_train.sh \
    tests/test_precision_cpu.sh tests/ref tests/data conf \
    bench/gpu_vs_torch.sh bench/gpu_torch_train_step.py scripts/gpu-run.sh docs/GPU.md \
    bench/cpu_bf16_vs_torch.sh bench/torch_train_step.py bench/torch_eval_step.py
find "$stage" -name __pycache__ -prune -exec rm -rf {} +

# --- 3. the Debian libraries -------------------------------------------------------------
# what the GPU machine has: glibc, the GCC runtime, CUDA (driver, runtime,
# cuBLAS) and pip's NCCL
base_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
gpu_re='^(libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libnccl\.so\.2)$'
bundle_path="$stage/core/.libs:$stage/lib"
# ldd_pairs FILE: "soname path" per dependency ("soname not-found" when
# unresolved); the path may hold spaces (read it with `read -r so path`)
ldd_pairs() {
    LD_LIBRARY_PATH="$bundle_path" ldd "$1" 2>/dev/null | awk '
        $2 != "=>" { next }
        { p = $0; sub(/^[^=]*=> /, "", p); sub(/ \(0x[0-9a-f]+\)$/, "", p) }
        p == "not found" { print $1, "not-found"; next }
        { print $1, p }'
}
declare -A want=()
for e in "${elves[@]}"; do
    while read -r so path; do
        [[ $so =~ $base_re || $so =~ $gpu_re || $so == libtfcore.so.0 ]] && continue
        [ "$path" != not-found ] || die "$e needs $so, which is not installed here"
        want[$so]=$path
    done < <(ldd_pairs "$stage/$e")
done
cache="${TFCORE_DEB_CACHE:-$HOME/.cache/tfcore/debs}"
mkdir -p "$cache" "$stage.x"
trap 'rm -rf "$stage" "$stage.x"' EXIT
declare -A pkg_of=() file_of=()
for so in "${!want[@]}"; do
    real=$(realpath "${want[$so]}")
    pkg="" owned=""
    # dpkg may know the file under /usr (merged /usr) or without it
    for cand in "$real" "/usr$real" "${real#/usr}"; do
        line=$(dpkg -S "$cand" 2>/dev/null | head -n 1) || continue
        pkg=${line%%: *} owned=$cand
        break
    done
    [ -n "$pkg" ] || die "$so ($real) belongs to no Debian package"
    pkg_of[$so]=$pkg file_of[$so]=$owned
done
declare -A debs=()
for so in "${!pkg_of[@]}"; do
    pkg=${pkg_of[$so]}
    [ -n "${debs[$pkg]:-}" ] && continue
    name=${pkg%%:*}
    ver=$(dpkg-query -W -f '${Version}' "$pkg")
    arch=$(dpkg-query -W -f '${Architecture}' "$pkg")
    deb=$(ls "$cache/${name}_${ver//:/%3a}_${arch}.deb" 2>/dev/null || true)
    if [ -z "$deb" ] &&
        (cd "$cache" && apt-get download -q "$name:$arch=$ver" >/dev/null 2>"$cache/download.err"); then
        deb=$(ls "$cache/${name}_${ver//:/%3a}_${arch}.deb" 2>/dev/null || true)
        [ -n "$deb" ] || die "apt-get download $name=$ver left no .deb in $cache"
    fi
    if [ -n "$deb" ]; then
        dpkg -x "$deb" "$stage.x/$name"
        debs[$pkg]=$deb
    else
        # the mirror no longer serves the installed version (a security
        # update replaced it there): carry the installed files themselves
        notes+=("$name $ver: not downloadable ($(tail -n 1 "$cache/download.err")); the installed files were copied")
        debs[$pkg]="$name $ver (installed)"
        for so2 in "${!pkg_of[@]}"; do
            [ "${pkg_of[$so2]}" = "$pkg" ] || continue
            mkdir -p "$stage.x/$name$(dirname "${file_of[$so2]}")"
            cp -L "${file_of[$so2]}" "$stage.x/$name${file_of[$so2]}"
        done
    fi
    # the GCC runtime packages' doc folder is a link to gcc-NN-base's: take
    # the installed one then (same source package and version)
    cp "$stage.x/$name/usr/share/doc/$name/copyright" "$stage/lib/licenses/$name.copyright" 2>/dev/null \
        || cp -L "/usr/share/doc/$name/copyright" "$stage/lib/licenses/$name.copyright" 2>/dev/null \
        || notes+=("no copyright file for $name")
done
carried=()
for so in "${!pkg_of[@]}"; do
    name=${pkg_of[$so]%%:*}
    f="$stage.x/$name${file_of[$so]}"
    [ -f "$f" ] || die "$(basename "${debs[${pkg_of[$so]}]}") has no ${file_of[$so]}"
    cp -L "$f" "$stage/lib/$so"
    chmod u+w "$stage/lib/$so"
    # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
    patchelf --set-rpath '$ORIGIN' "$stage/lib/$so"
    carried+=("$so ($(basename "${debs[${pkg_of[$so]}]}"))")
done

# --- RUNPATHs: relative to $ORIGIN, plus the CUDA toolkit where it was used ---------------
for e in "${elves[@]}"; do
    up=$(realpath -m --relative-to="$(dirname "$stage/$e")" "$stage")
    rp="\$ORIGIN/$up/core/.libs:\$ORIGIN/$up/lib"
    old=$(patchelf --print-rpath "$stage/$e")
    IFS=: read -r -a olds <<<"$old"
    for d in "${olds[@]}"; do
        case "$d" in
            ""|"$build"|"$build"/*|"$src"|"$src"/*|\$ORIGIN*) ;;
            *) rp="$rp:$d" ;; # the CUDA toolkit's lib64, as configure linked it
        esac
    done
    patchelf --set-rpath "$rp" "$stage/$e"
done

# --- 4. env.sh, MANIFEST.txt, checks ------------------------------------------------------
cat >"$stage/env.sh" <<'ENV'
# env.sh — source from bash (`. BUNDLE/env.sh`) before running anything in
# this bundle (scripts/gpu-run.sh does). Sets LD_LIBRARY_PATH (the bundle's
# libtfcore and Debian libraries, pip's NCCL, and pip's CUDA libraries only
# when the toolkit's /usr/local/cuda/lib64 lacks them), TFCORE_PYTHON,
# TFCORE_PLUGIN_PATH, and top_builddir = top_srcdir = the bundle (the test
# scripts read them).
TFCORE_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export TFCORE_BUNDLE
# a path: the reference tests' runner checks it with -x
export TFCORE_PYTHON="${TFCORE_PYTHON:-$(command -v python3 || echo python3)}"
export top_builddir="$TFCORE_BUNDLE" top_srcdir="$TFCORE_BUNDLE"
TFCORE_PLUGIN_PATH=$(printf '%s:' "$TFCORE_BUNDLE"/plugins/*/.libs)
export TFCORE_PLUGIN_PATH="${TFCORE_PLUGIN_PATH%:}"
_tfb_libs="$TFCORE_BUNDLE/core/.libs:$TFCORE_BUNDLE/lib"
# pip's nvidia-* packages: the folder holding NAME, for each NAME given
_tfb_pip_dirs() {
    "$TFCORE_PYTHON" - "$@" 2>/dev/null <<'PY'
import os, sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
seen = []
for root in list(nvidia.__path__):
    for d, _, files in os.walk(root):
        if any(n in files for n in sys.argv[1:]) and d not in seen:
            seen.append(d)
print(":".join(seen))
PY
}
_tfb_nccl=$(_tfb_pip_dirs libnccl.so.2)
[ -n "$_tfb_nccl" ] && _tfb_libs="$_tfb_libs:$_tfb_nccl"
if [ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ] || [ ! -e /usr/local/cuda/lib64/libcudart.so.13 ]; then
    _tfb_cuda=$(_tfb_pip_dirs libcublasLt.so.13 libcudart.so.13 libcublas.so.13)
    [ -n "$_tfb_cuda" ] && _tfb_libs="$_tfb_libs:$_tfb_cuda"
fi
export LD_LIBRARY_PATH="$_tfb_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d /usr/local/cuda/bin ] && case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) PATH="$PATH:/usr/local/cuda/bin" ;; esac
export PATH
unset _tfb_libs _tfb_nccl _tfb_cuda
unset -f _tfb_pip_dirs
ENV

# every program resolves within the bundle, apart from what the GPU machine has
carried_files=()
for so in "${!pkg_of[@]}"; do carried_files+=("lib/$so"); done
unresolved=()
for e in "${elves[@]}" "${carried_files[@]}"; do
    [ -f "$stage/$e" ] || continue
    while read -r so path; do
        if [ "$path" = not-found ]; then
            [[ $so =~ $gpu_re ]] || unresolved+=("$e: $so")
        elif [[ ! $so =~ $base_re && ! $so =~ $gpu_re ]]; then
            case "$path" in "$stage"/*) ;; *) unresolved+=("$e: $so from $path, outside the bundle") ;; esac
        fi
    done < <(ldd_pairs "$stage/$e")
    case "$(patchelf --print-rpath "$stage/$e")" in
        *"$build"*|*"$src"*) unresolved+=("$e: its RUNPATH points into the build or source tree") ;;
    esac
done
[ "${#unresolved[@]}" -eq 0 ] || die "not self-contained: $(printf '%s; ' "${unresolved[@]}")"
glibc=$(for e in "${elves[@]}" "${carried_files[@]}"; do objdump -T "$stage/$e"; done 2>/dev/null \
    | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)

{
    echo "tfcore GPU bundle (docs/GPU.md): source $(git -C "$src" describe --always --dirty 2>/dev/null || echo "not a git checkout"), built $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "CUDA_ARCHS: $archs"
    echo "needs on the GPU machine: x86-64 Linux with glibc >= ${glibc#GLIBC_}, libstdc++, the NVIDIA driver (libcuda.so.1), the CUDA 13 runtime and cuBLAS/cuBLASLt (/usr/local/cuda/lib64 or pip), libnccl.so.2 (pip nvidia-nccl), python3 with torch and transformers (reference tests, benchmark)"
    echo "plugins: $nplugins"
    for n in "${notes[@]}"; do echo "note: $n"; done
    echo "carried libraries (lib/, from Debian packages):"
    printf '  %s\n' "${carried[@]}" | sort
    echo "files:"
    (cd "$stage" && find . -type f ! -name MANIFEST.txt -printf '  %p %s\n' | sort)
} >"$stage/MANIFEST.txt"

rm -rf "$out" "$stage.x"
mv "$stage" "$out"
trap - EXIT
bytes=$(du -sb "$out" | cut -f1)
for n in "${notes[@]}"; do echo "$me: note: $n"; done
echo "$me: $out: $nplugins plugins, ${#carried[@]} Debian libraries, $(find "$out" -type f | wc -l) files, $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB (needs glibc >= ${glibc#GLIBC_})"
if [ "$archive" = 1 ]; then
    tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -6 -T"$jobs" >"$out.tar.xz.tmp"
    mv "$out.tar.xz.tmp" "$out.tar.xz"
    echo "$me: $out.tar.xz: $(awk -v b="$(stat -c %s "$out.tar.xz")" 'BEGIN {printf "%.1f", b / 1048576}') MiB"
fi
