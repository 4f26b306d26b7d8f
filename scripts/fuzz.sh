#!/usr/bin/env bash
# Build every fuzz target (tests/fuzz/fuzz_*.c) with libFuzzer + ASan + UBSan
# and run each for a few seconds on its seed corpus (tests/fuzz/corpus/NAME).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 20 s, all)
# libtfcore's sources are compiled once (instrumented the same way) and linked
# into every target; FUZZ_JOBS targets (default: the number of cores) run at
# once, each on one core for the full SECONDS, so every target gets the
# fuzzing time it had when they ran one after another. Exits non-zero when a
# target found a crash, leak or sanitizer report (after the running ones end);
# the crashing input is left in $FUZZ_OUT (default ./fuzz-out).
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"; shift || true
out="${FUZZ_OUT:-$PWD/fuzz-out}"
mkdir -p "$out"
jobs="${FUZZ_JOBS:-$(nproc)}"
CC="${FUZZ_CC:-clang}"
flags=(-g -O1 -std=c17 -D_GNU_SOURCE -fno-sanitize-recover=undefined
       -I"$top/core/include" -I"$top/core/sdk" -I"$top/core/runtime" -DTF_PLUGIN_DIR='"/nonexistent"')
pkgs="libconfig jansson libutf8proc"
# libarchive (the archive_extract target unpacks with it) when it is installed
if pkg-config --exists libarchive; then
    pkgs="$pkgs libarchive"
    flags+=(-DTF_HAVE_LIBARCHIVE=1)
fi
# shellcheck disable=SC2086
deps=$(pkg-config --cflags --libs $pkgs)
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    for f in "$top"/tests/fuzz/fuzz_*.c; do t=$(basename "$f" .c); targets+=("${t#fuzz_}"); done
fi
for t in "${targets[@]}"; do
    [ -f "$top/tests/fuzz/fuzz_$t.c" ] || { echo "fuzz.sh: no target $top/tests/fuzz/fuzz_$t.c" >&2; exit 2; }
done

# the SDK's and the runtime's sources, without the CLI (core/cli): once, with coverage instrumentation
# (fuzzer-no-link: libFuzzer's main comes with each target)
echo "fuzz.sh: building libtfcore's sources"
lib="$out/lib"
mkdir -p "$lib"
lib_objs=()
pids=()
for f in "$top"/core/sdk/*.c "$top"/core/runtime/*.c; do
    case "$(basename "$f")" in cli_*) continue ;; esac
    o="$lib/$(basename "$f" .c).o"
    lib_objs+=("$o")
    # shellcheck disable=SC2046,SC2086
    "$CC" "${flags[@]}" -fsanitize=fuzzer-no-link,address,undefined $(pkg-config --cflags $pkgs) \
        -c "$f" -o "$o" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done

# build_and_run TARGET: link, then fuzz; the last line of the log says how it went
build_and_run() {
    local t="$1" corpus="$top/tests/fuzz/corpus/$1" work="$out/corpus_$1"
    # shellcheck disable=SC2086
    "$CC" "${flags[@]}" -fsanitize=fuzzer,address,undefined "$top/tests/fuzz/fuzz_$t.c" "${lib_objs[@]}" \
        $deps -fopenmp -lm -ldl -lpthread -o "$out/fuzz_$t" >"$out/fuzz_$t.build.log" 2>&1 ||
        { cat "$out/fuzz_$t.build.log" >&2; echo "fuzz.sh: target $t did not build" >&2; return 1; }
    mkdir -p "$work"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$out/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$out/crash_${t}_" -print_final_stats=0 "$work" \
        $( [ -d "$corpus" ] && echo "$corpus" ) 2>"$out/fuzz_$t.log" \
        || { tail -40 "$out/fuzz_$t.log"; echo "fuzz.sh: target $t FAILED (see $out)" >&2; return 1; }
    echo "fuzz.sh: $t ran ${secs}s: $(grep -E '^(Done|#[0-9]+.*DONE)' "$out/fuzz_$t.log" | tail -1)"
}
failed=0
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    echo "fuzz.sh: building and running $t for ${secs}s"
    build_and_run "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
[ "$failed" = 0 ] || { echo "fuzz.sh: a target failed (see above and $out)" >&2; exit 1; }
echo "fuzz.sh: ${#targets[@]} target(s) ran ${secs}s each without a finding"
