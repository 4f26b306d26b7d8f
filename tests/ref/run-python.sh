#!/bin/sh
# Run one reference test (tests/ref/*.py) with the Python that has torch,
# transformers and tokenizers: $TFCORE_PYTHON, else the venv that
# scripts/setup-python.sh makes. Exit 77 (skipped) with a message when that
# Python is missing -- unless TFCORE_REQUIRE_REF=1 (CI), where it fails.
script="$1"
if [ "${TFCORE_SKIP_REF:-0}" = 1 ]; then
    echo "SKIP: reference tests switched off (TFCORE_SKIP_REF=1): $(basename "$script")"
    exit 77
fi
py="${TFCORE_PYTHON:-}"
[ -n "$py" ] || py="${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import torch, transformers, tokenizers, safetensors" 2>/dev/null; then
    if [ "${TFCORE_REQUIRE_REF:-0}" = 1 ]; then
        echo "FAIL: reference Python '$py' missing or lacks torch/transformers/tokenizers/safetensors (run scripts/setup-python.sh)"
        exit 1
    fi
    echo "SKIP: reference Python '$py' missing or incomplete; run scripts/setup-python.sh to enable $(basename "$script")"
    exit 77
fi
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$py" "$script"
