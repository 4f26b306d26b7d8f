#!/usr/bin/env bash
# Build every fuzz target (tests/fuzz/fuzz_*.c) with libFuzzer + ASan + UBSan
# and run each for a few seconds on its seed corpus (tests/fuzz/corpus/NAME).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 20 s, all)
# Exits non-zero on the first crash, leak or sanitizer report; the crashing
# input is left in $FUZZ_OUT (default ./fuzz-out).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"; shift || true
out="${FUZZ_OUT:-$PWD/fuzz-out}"
mkdir -p "$out"
CC="${FUZZ_CC:-clang}"
flags=(-g -O1 -std=c17 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$top/core/include" -I"$top/core/sdk" -I"$top/core/runtime" -DTF_PLUGIN_DIR='"/nonexistent"')
deps=$(pkg-config --cflags --libs libconfig jansson libutf8proc)
# libarchive (the archive_extract target unpacks with it) when it is installed
if pkg-config --exists libarchive; then
    deps="$deps $(pkg-config --cflags --libs libarchive)"
    flags+=(-DTF_HAVE_LIBARCHIVE=1)
fi
# the SDK's and the runtime's sources, without the CLI
lib_srcs=("$top"/core/sdk/*.c "$top"/core/runtime/*.c)
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    for f in "$top"/tests/fuzz/fuzz_*.c; do t=$(basename "$f" .c); targets+=("${t#fuzz_}"); done
fi
for t in "${targets[@]}"; do
    src="$top/tests/fuzz/fuzz_$t.c"
    [ -f "$src" ] || { echo "fuzz.sh: no target $src" >&2; exit 2; }
    echo "fuzz.sh: building $t"
    # shellcheck disable=SC2086
    "$CC" "${flags[@]}" "$src" "${lib_srcs[@]}" $deps -fopenmp -lm -ldl -lpthread -o "$out/fuzz_$t"
    corpus="$top/tests/fuzz/corpus/$t"
    work="$out/corpus_$t"; mkdir -p "$work"
    echo "fuzz.sh: running $t for ${secs}s"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$out/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$out/crash_${t}_" -print_final_stats=0 "$work" \
        $( [ -d "$corpus" ] && echo "$corpus" ) 2>"$out/fuzz_$t.log" \
        || { tail -40 "$out/fuzz_$t.log"; echo "fuzz.sh: target $t FAILED (see $out)" >&2; exit 1; }
    grep -E '^(Done|#[0-9]+.*DONE)' "$out/fuzz_$t.log" | tail -1 || true
done
echo "fuzz.sh: ${#targets[@]} target(s) ran ${secs}s each without a finding"
