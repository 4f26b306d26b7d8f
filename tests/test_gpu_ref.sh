#!/bin/sh
# The transformers reference test on the GPU: tests/ref/model_bert_vs_hf.py
# (random BERT configs and all-MiniLM-L6-v2: logits, loss, every gradient, 10
# AdamW steps, save/reload) with backend-cuda in strict fp32 instead of
# backend-cpu, against transformers on the CPU. Without a usable CUDA backend:
# "SKIP: no CUDA device", exit 77.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || { echo "SKIP: no $tfcore"; exit 77; }
json=$("$tfcore" plugins --json 2>/dev/null)
if ! printf '%s' "$json" | python3 -c '
import json, sys
plugins = json.load(sys.stdin)["plugins"]
sys.exit(0 if any(p["kind"] == "backend" and p["name"] == "cuda" and p["usable"] for p in plugins) else 1)
' 2>/dev/null; then
    echo "SKIP: no CUDA device"
    exit 77
fi
TFCORE_REF_BACKEND=cuda exec sh "$top_srcdir/tests/ref/run-python.sh" "$top_srcdir/tests/ref/model_bert_vs_hf.py"
