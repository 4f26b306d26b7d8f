#!/bin/sh
# The transformers reference test on the GPU: tests/ref/model_bert_vs_hf.py
# (random BERT configs and all-MiniLM-L6-v2: logits, loss, every gradient, 10
# AdamW steps, save/reload) with backend-cuda in strict fp32 instead of
# backend-cpu, against transformers on the CPU. Without a usable CUDA backend
# it skips (exit 77) saying why: no CUDA device, or the loader's reason for
# rejecting the plugin; with TFCORE_REQUIRE_GPU=1 that is a failure
# (tests/gpu_backend.sh).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
. "$top_srcdir/tests/gpu_backend.sh"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || gpu_unavailable "no $tfcore"
why=$(gpu_cuda_why "$tfcore") || gpu_unavailable "$why"
TFCORE_REF_BACKEND=cuda exec sh "$top_srcdir/tests/ref/run-python.sh" "$top_srcdir/tests/ref/model_bert_vs_hf.py"
