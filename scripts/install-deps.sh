#!/usr/bin/env bash
# Install everything tfcore's build and tests need on Debian 12 (bookworm).
# Idempotent and non-interactive; run as root (or with sudo available).
#
#   scripts/install-deps.sh            # build + test dependencies, and the
#                                      # Python reference environment
#   scripts/install-deps.sh --no-python  # only the C toolchain and libraries
#   scripts/install-deps.sh --slurm      # also Slurm and munge, for
#                                        # tests/test_slurm.sh (a one-node
#                                        # cluster the test starts and stops)
#
# The Python reference environment (torch, transformers, tokenizers, ...)
# lives in a virtualenv at $TFCORE_VENV (default ~/.cache/tfcore/venv),
# made by scripts/setup-python.sh; the reference tests use it.
set -euo pipefail

want_python=1
want_slurm=0
for a in "$@"; do
    case "$a" in
        --no-python) want_python=0 ;;
        --slurm) want_slurm=1 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "install-deps.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
    esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
    build-essential autoconf automake libtool autoconf-archive pkg-config  # the build
    libconfig-dev        # config files
    libjansson-dev       # JSON: results.json, config.json, SQuAD, safetensors headers
    libcurl4-openssl-dev # models by Hugging Face name: downloads (libcurl) and sha256 checks (libcrypto)
    libarchive-dev       # datasets by name: unpacking the fetched aclImdb_v1.tar.gz
    libutf8proc-dev      # Unicode for the tokenizer (NFD, categories, case)
    libopenblas-dev      # backend-cpu GEMMs
    libdnnl-dev          # backend-cpu bf16 GEMMs (oneDNN; optional: --without-onednn)
    libopenmpi-dev openmpi-bin  # comm-mpi and the mpirun launcher
    check libsubunit-dev # unit tests (make check)
    clang                # fuzz targets (libFuzzer) and sanitizer builds
    clang-16 libclang-rt-16-dev  # the emulated-GPU suite's ThreadSanitizer tree (LLVM 16's runtime; scripts/test-emulated-gpu.sh)
    patchelf             # scripts/gpu-bundle.sh: $ORIGIN-relative rpaths in the relocatable bundle
    time                 # /usr/bin/time: scripts/test-emulated-gpu.sh reports each case's CPU seconds
)
if [ "$want_python" = 1 ]; then
    packages+=(python3 python3-venv python3-torch)  # the reference tests' torch (CPU build)
fi

if [ "$want_slurm" = 1 ]; then
    # the daemons are started by the test, not at install (policy-rc.d or no init)
    packages+=(slurmctld slurmd slurm-client munge)
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "install-deps.sh: all Debian packages present"
fi

if [ "$want_python" = 1 ]; then
    "$(dirname "$0")/setup-python.sh"
fi
