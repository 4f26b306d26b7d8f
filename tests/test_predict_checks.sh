#!/bin/sh
# predict never prints a non-answer: non-finite weights are refused at load
# with the tensor's name (each dtype model-bert reads: F32, F16, BF16, F64),
# an attention_mask value other than 0/1 is refused with its input line, and
# a non-finite output is an error naming the input line (never
# {"logits":[],"label":0} with exit 0), with no output file left behind; a
# precision the backend cannot compute in is refused as training refuses it;
# a config without a data section is enough (the inputs are self-contained).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
tmp=$(mktemp -d /tmp/tfcore-predict-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cat >"$tmp/tiny.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 16; eval_examples = 8; };
training = { output_dir = "$tmp/m"; max_steps = 1; per_device_train_batch_size = 8; save_strategy = "no"; };
CFG
"$tfcore" -c "$tmp/tiny.cfg" >"$tmp/train.log" 2>&1 && ok || { bad "training the model failed"; cat "$tmp/train.log"; }
printf '{"input_ids": [101, 7, 8, 102]}\n{"input_ids": [101, 7, 8, 102], "attention_mask": [1, 7, 1, 1]}\n' >"$tmp/in.jsonl"
printf '{"input_ids": [101, 7, 8, 102], "attention_mask": [1, 1, 1, 0]}\n' >"$tmp/good.jsonl"

"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/m" --input "$tmp/good.jsonl" --output "$tmp/good.out" 2>"$tmp/p.err" \
    && grep -q '"logits": *\[[^]]' "$tmp/good.out" && ok || { bad "predict on a good model"; cat "$tmp/p.err"; }

# 1. attention_mask values other than 0 and 1: the input line, exit 5, no output
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/m" --input "$tmp/in.jsonl" --output "$tmp/o1" 2>"$tmp/p.err" >/dev/null
rc=$?
[ "$rc" -eq 5 ] && grep -q "in.jsonl:2: attention_mask\[1\] = 7; a mask holds only 0 and 1" "$tmp/p.err" && [ ! -e "$tmp/o1" ] \
    && ok || { bad "mask value 7: exit $rc"; cat "$tmp/p.err"; }

# a copy of the model with one tensor rewritten: NAME DTYPE INDEX VALUE (every element VALUE when INDEX is "all")
patch_model() {
    rm -rf "$tmp/p" && cp -r "$tmp/m" "$tmp/p" && python3 - "$tmp/p/model.safetensors" "$@" <<'PY'
import json, math, struct, sys
path, name, dtype, index, value = sys.argv[1:6]
raw = open(path, "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + hlen])
data = raw[8 + hlen:]
meta = head.pop("__metadata__", None)
tensors = {}
for k, t in head.items():
    a, b = t["data_offsets"]
    assert t["dtype"] == "F32"
    tensors[k] = (t["shape"], list(struct.unpack("<%df" % ((b - a) // 4), data[a:b])))
shape, vals = tensors[name]
v = float(value)
vals = [v] * len(vals) if index == "all" else vals[:int(index)] + [v] + vals[int(index) + 1:]
def enc(dt, xs):
    if dt == "F32": return struct.pack("<%df" % len(xs), *xs)
    if dt == "F64": return struct.pack("<%dd" % len(xs), *xs)
    if dt == "F16": return struct.pack("<%de" % len(xs), *xs)
    # BF16: the top half of the f32 (NaN and inf survive truncation)
    return b"".join(struct.pack("<f", x)[2:] for x in xs)
out_head, blobs, off = {}, [], 0
for k, (shp, xs) in tensors.items():
    dt = dtype if k == name else "F32"
    blob = enc(dt, vals if k == name else xs)
    out_head[k] = {"dtype": dt, "shape": shp, "data_offsets": [off, off + len(blob)]}
    blobs.append(blob)
    off += len(blob)
if meta is not None: out_head["__metadata__"] = meta
h = json.dumps(out_head).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
}

# 2. non-finite weights, each dtype: refused at load naming the tensor and element, exit 5
for case in "F32 3 nan NaN" "F16 5 inf infinite" "BF16 0 -inf infinite" "F64 2 1e300 infinite (as f32)"; do
    set -- $case
    dt=$1 idx=$2 val=$3
    shift 3
    what="$*"
    patch_model classifier.weight "$dt" "$idx" "$val" || { bad "patching the model ($case)"; continue; }
    "$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/p" --input "$tmp/good.jsonl" --output "$tmp/o2" 2>"$tmp/p.err" >/dev/null
    rc=$?
    [ "$rc" -eq 5 ] && grep -q "model.safetensors: tensor 'classifier.weight' element $idx is $what; the weights must be finite" "$tmp/p.err" \
        && [ ! -e "$tmp/o2" ] && ok || { bad "$dt weight $val: exit $rc"; cat "$tmp/p.err"; }
done

# 3. finite weights whose output overflows: an error naming the input line, no output file
patch_model classifier.weight F32 all 3e38 || bad "patching the model (huge)"
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/p" --input "$tmp/good.jsonl" --output "$tmp/o3" 2>"$tmp/p.err" >/dev/null
rc=$?
[ "$rc" -eq 1 ] && grep -q "good.jsonl:1: the model's output is not finite (logit 0 is" "$tmp/p.err" && [ ! -e "$tmp/o3" ] \
    && ok || { bad "overflowing output: exit $rc"; cat "$tmp/p.err"; cat "$tmp/o3" 2>/dev/null; }

# 4. a precision the backend cannot compute in: the same line as training and --dry-run
#    (the stack's supports check), exit 4, no output file
"$tfcore" predict -c "$tmp/tiny.cfg" --model "$tmp/m" -o precision.plugin=\"fp16\" --input "$tmp/good.jsonl" \
    --output "$tmp/o4" 2>"$tmp/p.err" >/dev/null
rc=$?
[ "$rc" -eq 4 ] && [ "$(wc -l <"$tmp/p.err")" -eq 1 ] \
    && grep -q "^tfcore: the cpu backend cannot compute in precision 'fp16' (F16 activations, f16 GEMMs) on .*bf16 GEMMs: " "$tmp/p.err" \
    && [ ! -e "$tmp/o4" ] && ok || { bad "predict in fp16 on the cpu backend: exit $rc"; cat "$tmp/p.err"; }

# 5. the inputs are self-contained: a config with only a model section predicts as the
#    training config does (ids), and text goes through the model folder's tokenizer
printf 'model = { plugin = "bert"; task = "classification"; };\n' >"$tmp/model-only.cfg"
"$tfcore" predict -c "$tmp/model-only.cfg" --model "$tmp/m" --input "$tmp/good.jsonl" --output "$tmp/o5" 2>"$tmp/p.err" \
    && cmp -s "$tmp/good.out" "$tmp/o5" && ok || { bad "predict with a config without a data section"; cat "$tmp/p.err"; }
rm -rf "$tmp/v" && cp -r "$tmp/m" "$tmp/v" && cp "$top_srcdir/tests/data/tokenizer/vocab.txt" "$tmp/v/" \
    && printf '{"text": "hello world", "text_pair": "the cafe"}\n' >"$tmp/text.jsonl" \
    && "$tfcore" predict -c "$tmp/model-only.cfg" --model "$tmp/v" --input "$tmp/text.jsonl" --output "$tmp/o6" 2>"$tmp/p.err" \
    && grep -q '"logits": *\[[^]]' "$tmp/o6" && ok || { bad "text predict with a config without a data section"; cat "$tmp/p.err"; }

echo "test_predict_checks: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
