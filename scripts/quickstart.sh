#!/usr/bin/env bash
# The README's main job: fine-tune on the CPU in a few minutes, no dataset
# download. With the real pretrained all-MiniLM-L6-v2 checkpoint when it can
# be fetched (scripts/fetch-minilm.sh), else bert-mini from scratch; it says
# which. Run from the build tree's top (after ./configure && make). It trains
# over the previous quickstart run (training.overwrite_output_dir = true), so
# it can be run again and again.
#   scripts/quickstart.sh [-o section.key=value]...
set -uo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
tfcore="${TFCORE:-$PWD/core/tfcore}"
[ -x "$tfcore" ] || tfcore="$top/core/tfcore"
[ -x "$tfcore" ] || { echo "quickstart.sh: build tfcore first (./configure && make)" >&2; exit 2; }
if dir=$("$top/scripts/fetch-minilm.sh" | tail -n 1) && [ -n "$dir" ]; then
    echo "quickstart.sh: fine-tuning the pretrained all-MiniLM-L6-v2 ($dir) on learnable synthetic data"
    exec "$tfcore" train -c "$top/conf/quickstart-minilm.cfg" -o model.pretrained="$dir" \
        -o training.overwrite_output_dir=true "$@"
fi
echo "quickstart.sh: the MiniLM checkpoint could not be fetched; fine-tuning bert-mini from scratch instead"
exec "$tfcore" train -c "$top/conf/quickstart.cfg" -o training.overwrite_output_dir=true "$@"
