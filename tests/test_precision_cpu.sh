#!/bin/sh
# The precision plugins from the CLI on backend-cpu, which computes in fp32,
# plus bf16 GEMMs where it has them (oneDNN on a CPU with AVX512_BF16):
# `tfcore plugins` lists tf32, fp16 and bf16 (usable: a precision runs
# wherever its backend can), and training in tf32 / fp16 (chosen by
# precision.plugin or by the Trainer flags training.fp16 / tf32) stops
# before any work with exactly one line naming the backend and the
# precision, and creates nothing. bf16 trains where the backend has bf16
# GEMMs, and is refused the same way (the line ending in the reason) where
# it has not, or when oneDNN's ISA is capped below AVX512_BF16
# (ONEDNN_MAX_CPU_ISA). fp32 on the same config still trains.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
[ -x "$tfcore" ] || { echo "SKIP: no $tfcore"; exit 77; }
[ -d "$top_builddir/plugins/backend-cpu/.libs" ] || { echo "SKIP: backend-cpu is not built (no OpenBLAS)"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-prec-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
starts_with() { case $1 in "$2"*) return 0 ;; *) return 1 ;; esac; }

# `--dry-run` refusing an unsupported precision needs the core to open the
# backend at --dry-run time (see plugins/precision-fp16/README.md, "CPU").
# Until it does, a dry run that accepts one is reported, not failed; set
# this to 1 when it does.
dry_run_checks_backend=1

# 1. the plugins are found and usable
"$tfcore" plugins --json >"$tmp/plugins.json" 2>"$tmp/plugins.err" || bad "tfcore plugins --json failed"
python3 - "$tmp/plugins.json" <<'PY' && ok || bad "tfcore plugins --json does not list tf32, fp16, bf16 as usable precisions"
import json, sys
found = {p["name"]: p for p in json.load(open(sys.argv[1]))["plugins"] if p["kind"] == "precision"}
for name in ("fp32", "tf32", "fp16", "bf16"):
    assert name in found and found[name]["usable"], (name, sorted(found))
    assert found[name]["path"].endswith("tfcore-precision-%s.so" % name), found[name]["path"]
PY
"$tfcore" plugins >"$tmp/plugins.txt" 2>&1
for p in tf32 fp16 bf16; do
    grep -q "^precision  *$p  " "$tmp/plugins.txt" && ok || bad "tfcore plugins does not list precision $p"
done

cat >"$tmp/tiny.cfg" <<'CFG'
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 32; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { max_steps = 2; per_device_train_batch_size = 8; save_strategy = "no"; seed = 1; };
CFG

# Run `tfcore ARGS...`; expect exit 4 (plugin cannot run) and one stderr line
# starting with $want (what follows may say more about the GEMM mode),
# nothing on stdout, no output folder.
expect_refusal() {
    label=$1 want=$2 out=$3
    shift 3
    "$tfcore" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    lines=$(wc -l <"$tmp/stderr")
    if [ "$rc" -eq 4 ] && [ "$lines" -eq 1 ] && starts_with "$(cat "$tmp/stderr")" "$want" && [ ! -s "$tmp/stdout" ]; then
        ok
    else
        bad "$label: exit $rc, $lines stderr line(s), expected exit 4 and '$want...'"
        sed 's/^/    /' "$tmp/stderr" "$tmp/stdout"
    fi
    [ ! -e "$out" ] && ok || bad "$label: created $out before stopping"
}

# 2. precision.plugin = tf32 / fp16 on backend cpu (and bf16 where 2b refuses it)
refused="tf32:F32 fp16:F16"
if "$tfcore" train -c "$tmp/tiny.cfg" -o precision.plugin=bf16 --dry-run >/dev/null 2>"$tmp/bf16.err"; then
    have_bf16=1
else
    have_bf16=0
    refused="$refused bf16:BF16"
    grep -q "cannot compute in precision 'bf16' (BF16 activations, bf16 GEMMs) on .*, no bf16 GEMMs: " "$tmp/bf16.err" \
        && ok || { bad "--dry-run, bf16 refused without the reason: $(cat "$tmp/bf16.err")"; }
fi
for p in $refused; do
    name=${p%%:*} dt=${p#*:}
    want="tfcore: the cpu backend cannot compute in precision '$name' ($dt activations"
    expect_refusal "train, precision $name" "$want" "$tmp/out-$name" \
        train -c "$tmp/tiny.cfg" -o precision.plugin="$name" -o training.output_dir="$tmp/out-$name"
    # the Trainer flag picks the same plugin and stops the same way
    expect_refusal "train, training.$name = true" "$want" "$tmp/flag-$name" \
        -c "$tmp/tiny.cfg" -o training."$name"=true -o training.output_dir="$tmp/flag-$name"
    # bench stops the same way before timing anything
    expect_refusal "bench, precision $name" "$want" "$tmp/bench-$name" \
        bench -c "$tmp/tiny.cfg" -o precision.plugin="$name" -o training.output_dir="$tmp/bench-$name"
    # --dry-run
    "$tfcore" train -c "$tmp/tiny.cfg" -o precision.plugin="$name" --dry-run >"$tmp/dry.out" 2>"$tmp/dry.err"
    rc=$?
    if [ "$rc" -eq 4 ] && starts_with "$(cat "$tmp/dry.err")" "$want"; then
        ok
    elif [ "$dry_run_checks_backend" -eq 0 ] && [ "$rc" -eq 0 ]; then
        echo "NOTE: --dry-run accepts precision $name on backend cpu (the core does not open the backend at --dry-run yet)"
    else
        bad "--dry-run, precision $name: exit $rc"; sed 's/^/    /' "$tmp/dry.err"
    fi
done

# 2b. bf16 where the backend has bf16 GEMMs: it trains (precision.plugin and
# the Trainer flag), and a oneDNN capped below AVX512_BF16 is refused with
# the reason, as a CPU without AVX512_BF16 is (no slow emulation)
if [ "$have_bf16" -eq 1 ]; then
    for how in "precision.plugin=bf16" "training.bf16=true"; do
        "$tfcore" train -c "$tmp/tiny.cfg" -o "$how" -o training.output_dir="$tmp/bf16-$how" >"$tmp/bf16.out" 2>&1 \
            && [ -s "$tmp/bf16-$how/results.json" ] && ok || { bad "bf16 ($how) on backend cpu did not train"; cat "$tmp/bf16.out"; }
    done
    want="tfcore: the cpu backend cannot compute in precision 'bf16' (BF16 activations, bf16 GEMMs) on "
    export ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI
    expect_refusal "train, bf16, oneDNN capped" "$want" "$tmp/capped" \
        train -c "$tmp/tiny.cfg" -o precision.plugin=bf16 -o training.output_dir="$tmp/capped"
    grep -q ", no bf16 GEMMs: oneDNN [0-9.]* is limited below AVX512_BF16" "$tmp/stderr" && ok \
        || bad "the capped refusal does not say why: $(cat "$tmp/stderr")"
    "$tfcore" train -c "$tmp/tiny.cfg" -o precision.plugin=bf16 --dry-run >/dev/null 2>"$tmp/dry.err"
    rc=$?
    [ "$rc" -eq 4 ] && [ "$(wc -l <"$tmp/dry.err")" -eq 1 ] && grep -q "no bf16 GEMMs: " "$tmp/dry.err" && ok \
        || { bad "--dry-run, bf16 with oneDNN capped: exit $rc"; cat "$tmp/dry.err"; }
    unset ONEDNN_MAX_CPU_ISA
fi

# 3. an fp16 key error is found before the backend is asked: a config error, file:line
printf 'precision = { plugin = "fp16";\n  backoff_factor = 2.0; };\n' >"$tmp/badkey.cfg"
cat "$tmp/tiny.cfg" >>"$tmp/badkey.cfg"
"$tfcore" train -c "$tmp/badkey.cfg" --dry-run >/dev/null 2>"$tmp/bad.err"
rc=$?
[ "$rc" -eq 3 ] && grep -q "badkey.cfg:2: precision.backoff_factor must be in (0, 1), got 2" "$tmp/bad.err" && ok \
    || { bad "a bad fp16 key: exit $rc"; cat "$tmp/bad.err"; }

# 4. fp32 on the same config trains (the refusals above are about the precision)
"$tfcore" train -c "$tmp/tiny.cfg" -o training.output_dir="$tmp/fp32" >"$tmp/fp32.out" 2>&1 \
    && [ -s "$tmp/fp32/results.json" ] && ok || { bad "fp32 on backend cpu did not train"; cat "$tmp/fp32.out"; }

echo "precision_cpu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
