#!/bin/sh
# The tfcore command as a user meets it: --help/--version, verbs, the dry run
# of the quickstart config, and one clear line + the documented exit code for
# each kind of mistake.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# expect CODE PATTERN CMD...: run CMD, require exit CODE and PATTERN (grep -E) in its output
expect() {
    code=$1 pattern=$2
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -eq "$code" ] && printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $* -> exit $rc (want $code), output:"
        printf '%s\n' "$out" | sed 's/^/    /' | head -20
        echo "    (wanted /$pattern/)"
    fi
}

# errors must be ONE line on stderr
one_line() {
    code=$1
    shift
    "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    n=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$code" ] && [ "$n" -eq 1 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: $* -> exit $rc (want $code), $n stderr lines (want 1):"
        sed 's/^/    /' "$tmp/err" | head -10
    fi
}

expect 0 "^usage: tfcore" "$tfcore" --help
expect 0 "^tfcore [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.[0-9]+\)" "$tfcore" --version
expect 0 "exit codes:" "$tfcore" --help
expect 2 "unknown verb 'trian' \(did you mean 'train'\?\)" "$tfcore" trian
expect 2 "^usage: tfcore" "$tfcore"
expect 2 "tfcore train: no config file given" "$tfcore" train
expect 2 "tfcore train: unknown argument '--fast'" "$tfcore" train -c x.cfg --fast
expect 2 "tfcore train: -c needs a value" "$tfcore" train -c
expect 2 "tfcore eval: no config file given" "$tfcore" eval
expect 2 "tfcore eval: unknown or incomplete argument .--model." "$tfcore" eval -c x.cfg --model
expect 0 "^KIND +NAME" "$tfcore" plugins
expect 0 '"plugins": \[' "$tfcore" plugins --json
expect 0 "precision +fp32" "$tfcore" plugins

# the quickstart dry run resolves every plugin and prints the resolved config
expect 0 "plugins resolved" "$tfcore" train -c "$top_srcdir/conf/quickstart.cfg" --dry-run
expect 0 "learning_rate" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run
expect 0 "learning_rate = 3e-05|learning_rate = 3\.0*e-05" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o training.learning_rate=3e-5

# config mistakes: exit 3, one line, file:line
cat >"$tmp/typo.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; };
data = { plugin = "synthetic"; };
training = {
  learing_rate = 1e-4;
};
CFG
expect 3 "typo.cfg:4: unknown key 'training.learing_rate' \(did you mean 'learning_rate'\?\)" "$tfcore" -c "$tmp/typo.cfg" --dry-run
one_line 3 "$tfcore" -c "$tmp/typo.cfg" --dry-run

printf 'model = { plugin = "bert" \ndata = ;\n' >"$tmp/syntax.cfg"
expect 3 "syntax.cfg:[0-9]+: " "$tfcore" -c "$tmp/syntax.cfg" --dry-run
one_line 3 "$tfcore" -c "$tmp/syntax.cfg" --dry-run

expect 3 "nonexistent.cfg" "$tfcore" -c "$tmp/nonexistent.cfg" --dry-run
one_line 3 "$tfcore" -c "$tmp/nonexistent.cfg" --dry-run

expect 3 "^tfcore: -o training.seed=abc" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o training.seed=abc
expect 3 "-o" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o novalue

# plugin mistakes: exit 4, one line naming what exists and where it looked
expect 4 "no backend plugin named 'cpuu' \(did you mean 'cpu'\?\)" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o backend.plugin=cpuu
one_line 4 "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o backend.plugin=cpuu
expect 4 "searched " "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o model.plugin=gpt

# a precision flag that contradicts the precision section
expect 3 "training.fp16 = true asks for 'fp16'" "$tfcore" -c "$top_srcdir/conf/quickstart.cfg" --dry-run -o training.fp16=true

echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
