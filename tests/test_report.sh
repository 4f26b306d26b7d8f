#!/bin/sh
# `tfcore report`: the comparison table of hand-written runs (a 1-worker
# baseline, DataParallel and DDP on 2 workers, a run from before
# comm_exposed/config were recorded, SQuAD runs, runs with memory_bytes)
# against expected files;
# baseline and metric choice; --json and -o; the SVG chart (well-formed, one
# bar per run, names escaped); and for every malformed input one line, exit 5
# and no output file written.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
data="$top_srcdir/tests/data/report"
tmp=$(mktemp -d /tmp/tfcore-report-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}

# report ARGS...: run `tfcore report` in the fixtures' folder (relative run names)
report() { (cd "$data" && "$tfcore" report "$@"); }

# same_as EXPECTED ARGS...: stdout must equal the file byte for byte, exit 0
same_as() {
    want=$1
    shift
    report "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 0 ] && cmp -s "$tmp/out" "$data/$want" && [ ! -s "$tmp/err" ]; then ok; else
        bad "report $* -> exit $rc, differs from $want:"
        diff "$data/$want" "$tmp/out" | head -20
        head -5 "$tmp/err"
    fi
}

# fails CODE MESSAGE ARGS...: exit CODE, stderr exactly the one line MESSAGE,
# nothing on stdout, and neither output file ($tmp/t.md, $tmp/c.svg) written
fails() {
    code=$1 msg=$2
    shift 2
    rm -f "$tmp/t.md" "$tmp/c.svg"
    report "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq "$code" ] && [ "$(cat "$tmp/err")" = "$msg" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
        [ ! -s "$tmp/out" ] && [ ! -e "$tmp/t.md" ] && [ ! -e "$tmp/c.svg" ]; then ok; else
        bad "report $* -> exit $rc (want $code), stderr:"
        sed 's/^/    /' "$tmp/err" | head -5
        echo "    (wanted: $msg)"
        [ -e "$tmp/t.md" ] || [ -e "$tmp/c.svg" ] && echo "    and an output file was written"
    fi
}

imdb="1gpu dp2 ddp2 old-format"

# 1. the tables
# shellcheck disable=SC2086
{
    same_as expected-imdb.md $imdb
    same_as expected-imdb-baseline3.md $imdb --baseline 3
    same_as expected-imdb-baseline3.md $imdb --baseline ddp2
    same_as expected-imdb-baseline3.md $imdb --baseline=./ddp2/
    same_as expected-imdb-train_loss.md $imdb --metric train_loss
    same_as expected-squad.md squad-1gpu squad-ddp4 # no eval_accuracy: eval_f1
    same_as expected-imdb.md 1gpu/ dp2// ./ddp2 old-format
    same_as expected-imdb.json $imdb --json
    # runs that recorded tfcore.memory_bytes: a second table, MiB per category
    same_as expected-memory.md mem-base mem-ckpt mem-adafactor
    # pipeline runs (tfcore.pipeline): a third table, their shape, bubble and utilisation
    same_as expected-pipeline.md pipe-one pipe-2x8 pipe-2x2
    # tfcore.statistics: a last table, noise scale, efficiency and goodput
    # beside samples/s; a run without an estimate gives its reason
    same_as expected-statistics.md stats-one stats-small stats-big
}

# the old-format run: no config, no comm_exposed -> "—"; a baseline of 1.00
grep -q '^| old-format | — .* |              — |' "$data/expected-imdb.md" && ok || bad "old-format row lacks its —"
grep -q '^| 1gpu .*|    1\.00 |' "$data/expected-imdb.md" && ok || bad "the baseline's speedup is not 1.00"

# a metric that only some runs have: "—" for the others
report 1gpu squad-1gpu --metric eval_exact_match >"$tmp/out" 2>&1
grep -q '^| 1gpu .* |                — |$' "$tmp/out" && grep -q '^| squad-1gpu .* |          80\.9461 |$' "$tmp/out" &&
    ok || { bad "--metric eval_exact_match:"; cat "$tmp/out"; }

# -o FILE: the same table, nothing on stdout
# shellcheck disable=SC2086
report $imdb -o "$tmp/t.md" >"$tmp/out" 2>&1 && cmp -s "$tmp/t.md" "$data/expected-imdb.md" && [ ! -s "$tmp/out" ] &&
    ok || bad "-o FILE"
# shellcheck disable=SC2086
report $imdb --json --out="$tmp/t.json" >/dev/null 2>&1 && cmp -s "$tmp/t.json" "$data/expected-imdb.json" &&
    ok || bad "--json --out=FILE"

# 2. the chart
rm -f "$tmp/c.svg"
# shellcheck disable=SC2086
report $imdb --svg "$tmp/c.svg" >"$tmp/out" 2>&1 && cmp -s "$tmp/out" "$data/expected-imdb.md" && [ -s "$tmp/c.svg" ] &&
    ok || bad "--svg did not write the chart and the table"

# check_svg FILE RUNS NAME: well-formed XML (python3's parser, or xmllint),
# an <svg> root, one train_runtime bar per run, NAME in a tooltip, nothing
# that reaches outside the file
check_svg() {
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$@" <<'PY'
import sys, xml.etree.ElementTree as ET
path, runs, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
root = ET.parse(path).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
titles = [t.text or "" for t in root.iter(ns + "title")]
bars = [t for t in titles if t.startswith("train_runtime (speedup")]
assert len(bars) == runs, (len(bars), runs)
assert any(t.endswith(name) for t in titles), (name, titles[:5])
assert not list(root.iter(ns + "script")) and not list(root.iter(ns + "image")) and not list(root.iter(ns + "style"))
text = open(path, encoding="utf-8").read()
assert "href" not in text and "url(" not in text and "@import" not in text
PY
    elif command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$1" && [ "$(grep -c '<title>train_runtime (speedup' "$1")" -eq "$2" ] &&
            ! grep -q '<script\|href' "$1"
    else
        echo "check_svg: neither python3 nor xmllint; checking the outline only"
        head -2 "$1" | grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' && tail -1 "$1" | grep -q '^</svg>$' &&
            [ "$(grep -c '<title>train_runtime (speedup' "$1")" -eq "$2" ] && ! grep -q '<script\|href' "$1"
    fi
}
check_svg "$tmp/c.svg" 4 old-format && ok || bad "the SVG is not what it should be"
grep -q '>1\.87×</text>' "$tmp/c.svg" && ok || bad "ddp2's speedup is not written on its bar"
grep -q '<title>comm (exposed): 262\.74 s</title>' "$tmp/c.svg" && ok || bad "dp2's exposed comm segment"
grep -q '<title>comm in all (21\.80 s exposed, the rest overlapped): 205\.44 s</title>' "$tmp/c.svg" && ok ||
    bad "ddp2's total comm marker"
# exposed comm segments: dp2's and ddp2's only (1gpu's is 0 s, old-format did not record it)
[ "$(grep -c 'comm (exposed):' "$tmp/c.svg")" -eq 2 ] && ok || bad "comm segments of runs without exposed comm"

# names that need escaping: & < > | " and a byte that is not UTF-8
mkdir -p "$tmp/runs/a&b <c>|\"d\"" "$(printf '%s/runs/bad\377name' "$tmp")"
cp "$data/1gpu/results.json" "$tmp/runs/a&b <c>|\"d\"/"
cp "$data/ddp2/results.json" "$(printf '%s/runs/bad\377name' "$tmp")/"
(cd "$tmp/runs" && "$tfcore" report "a&b <c>|\"d\"" "$(printf 'bad\377name')" --svg "$tmp/e.svg") >"$tmp/out" 2>&1
grep -q '^| a\\&b \\<c\\>\\|"d" | imdb_1gpu\.cfg ' "$tmp/out" && ok || { bad "Markdown escaping:"; cat "$tmp/out"; }
grep -q '^| bad�name ' "$tmp/out" && ok || bad "a name that is not UTF-8 is not shown with U+FFFD"
check_svg "$tmp/e.svg" 2 'a&b <c>|"d"' && grep -q 'a&amp;b &lt;c&gt;|&quot;d&quot;' "$tmp/e.svg" && ok ||
    bad "SVG escaping"
(cd "$tmp/runs" && "$tfcore" report "a&b <c>|\"d\"" "$(printf 'bad\377name')" --json) >"$tmp/out.json" 2>&1
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["run"] for x in r["runs"]] == ["a&b <c>|\"d\"", "bad\ufffdname"], r' "$tmp/out.json" && ok || bad "--json with odd names"
fi

# 3. malformed and missing runs: one line, exit 5, no output
for args in "--svg $tmp/c.svg" "-o $tmp/t.md" "--svg $tmp/c.svg --out $tmp/t.md"; do
    # shellcheck disable=SC2086
    fails 5 "tfcore report: malformed/results.json:4:30: string or '}' expected near ','" 1gpu malformed $args
done
fails 5 "tfcore report: nope/results.json: cannot open: No such file or directory" 1gpu nope --svg "$tmp/c.svg"

# bad FILE-CONTENT MESSAGE-AFTER-PATH: a run whose results.json holds CONTENT
n=0
bad_run() {
    n=$((n + 1))
    mkdir -p "$tmp/bad$n"
    printf '%s' "$1" >"$tmp/bad$n/results.json"
    fails 5 "tfcore report: $tmp/bad$n/results.json$2" 1gpu "$tmp/bad$n" --svg "$tmp/c.svg" -o "$tmp/t.md"
}
bad_run '' ":1:0: '[' or '{' expected near end of file"
bad_run '[1, 2]' ": the top level must be an object, got an array"
bad_run '{"train_runtime": 1, "train_runtime": 2}' ":1:36: duplicate object key near '\"train_runtime\"'"
bad_run '{"epoch": 2.0}' ": no train_runtime (is this a results.json of tfcore or Trainer?)"
bad_run '{"train_runtime": "812"}' ": train_runtime must be a number >= 0, got a string"
bad_run '{"train_runtime": -1.5}' ": train_runtime must be a number >= 0, got -1.5"
bad_run '{"train_runtime": 9, "train_samples_per_second": null}' \
    ": train_samples_per_second must be a number >= 0, got null"
bad_run '{"train_runtime": 9, "tfcore": []}' ": tfcore must be an object, got an array"
bad_run '{"train_runtime": 9, "tfcore": {"phase_seconds": 3}}' \
    ": tfcore.phase_seconds must be an object, got an integer"
bad_run '{"train_runtime": 9, "tfcore": {"phase_seconds": {"comm": -0.5}}}' \
    ": tfcore.phase_seconds.comm must be a number >= 0, got -0.5"
bad_run '{"train_runtime": 9, "tfcore": {"phase_seconds": {"comm_exposed": true}}}' \
    ": tfcore.phase_seconds.comm_exposed must be a number >= 0, got true"
bad_run '{"train_runtime": 9, "tfcore": {"world_size": 0}}' ": tfcore.world_size must be an integer >= 1, got 0"
bad_run '{"train_runtime": 9, "tfcore": {"memory_bytes": 5}}' ": tfcore.memory_bytes must be an object, got an integer"
bad_run '{"train_runtime": 9, "tfcore": {"memory_bytes": {"activations": "4 MB"}}}' \
    ": tfcore.memory_bytes.activations must be a number >= 0, got a string"
bad_run '{"train_runtime": 9, "tfcore": {"world_size": 2.0}}' \
    ": tfcore.world_size must be an integer >= 1, got a number"
bad_run '{"train_runtime": 9, "tfcore": {"pipeline": [2]}}' ": tfcore.pipeline must be an object, got an array"
bad_run '{"train_runtime": 9, "tfcore": {"pipeline": {"stages": 0}}}' \
    ": tfcore.pipeline.stages must be an integer >= 1, got 0"
bad_run '{"train_runtime": 9, "tfcore": {"pipeline": {"stages": 2, "measured_bubble": "0.2"}}}' \
    ": tfcore.pipeline.measured_bubble must be a number >= 0, got a string"
bad_run '{"train_runtime": 9, "tfcore": {"pipeline": {"stages": 2, "schedule": 1}}}' \
    ": tfcore.pipeline.schedule must be a string, got an integer"
bad_run '{"train_runtime": 9, "tfcore": {"pipeline": {"stages": 2, "utilisation": [0.5, null]}}}' \
    ": tfcore.pipeline.utilisation[1] must be a number >= 0"
bad_run '{"train_runtime": 9, "tfcore": {"statistics": [1]}}' ": tfcore.statistics must be an object, got an array"
bad_run '{"train_runtime": 9, "tfcore": {"statistics": {"goodput": -2}}}' \
    ": tfcore.statistics.goodput must be a number >= 0, got -2"
bad_run '{"train_runtime": 9, "tfcore": {"statistics": {"noise_scale": null, "reason": 3}}}' \
    ": tfcore.statistics.reason must be a string, got an integer"
bad_run '{"train_runtime": 9, "tfcore": {"config": 7}}' ": tfcore.config must be a string, got an integer"
bad_run '{"train_runtime": 9, "tfcore": {"comm": false}}' ": tfcore.comm must be a string, got false"
bad_run '{"train_runtime": 9, "tfcore": {"precision": {}}}' ": tfcore.precision must be a string, got an object"
mkdir -p "$tmp/dir/results.json"
fails 5 "tfcore report: $tmp/dir/results.json: not a regular file (directory)" "$tmp/dir" --svg "$tmp/c.svg"

# a minimal run (train_runtime only) is fine: everything else "—"
mkdir -p "$tmp/min"
printf '{"train_runtime": 10}' >"$tmp/min/results.json"
report 1gpu "$tmp/min" >"$tmp/out" 2>&1 &&
    grep -q '^| min  | —             | —    |     — | —         |             10\.00 |  250\.74 |         — |              — |             — |$' "$tmp/out" &&
    ok || { bad "a run with train_runtime only:"; cat "$tmp/out"; }

# 4. usage errors (exit 2) and unwritable outputs (exit 1)
fails 2 "tfcore report: no run folders given (RUN_DIR...) (see tfcore report --help)"
fails 2 "tfcore report: unknown option '--fast' (see tfcore report --help)" 1gpu --fast
fails 2 "tfcore report: --baseline 5: there are 2 runs (see tfcore report --help)" 1gpu dp2 --baseline 5
fails 2 "tfcore report: --baseline 0: there is 1 run (see tfcore report --help)" 1gpu --baseline 0
fails 2 "tfcore report: --baseline ddp2 is not one of the runs given (see tfcore report --help)" 1gpu dp2 --baseline ddp2
fails 2 "tfcore report: --svg needs a value (see tfcore report --help)" 1gpu --svg
fails 2 "tfcore report: --metric eval_acuracy: no run has that number in its results.json (did you mean 'eval_accuracy'?) (see tfcore report --help)" 1gpu --metric eval_acuracy --svg "$tmp/c.svg"
fails 2 "tfcore report: --metric tfcore: no run has that number in its results.json (see tfcore report --help)" 1gpu --metric tfcore
report 1gpu --svg "$tmp/none/c.svg" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tfcore report: cannot write $tmp/none/c.svg" "$tmp/err" &&
    [ ! -s "$tmp/out" ] && ok || { bad "unwritable --svg -> exit $rc"; cat "$tmp/err"; }
report 1gpu -o "$tmp/none/t.md" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^tfcore report: cannot write $tmp/none/t.md" "$tmp/err" &&
    ok || { bad "unwritable -o -> exit $rc"; cat "$tmp/err"; }
"$tfcore" report --help | grep -q '^usage: tfcore report RUN_DIR' && ok || bad "report --help"
"$tfcore" --help | grep -q '^  report  .*compare runs' && ! "$tfcore" --help | grep -q 'report.*not in this version' &&
    ok || bad "report is not listed as available in tfcore --help"

echo "test_report: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
