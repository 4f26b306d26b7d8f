#!/usr/bin/env python3
"""sharded_safetensors_vs_hf: a model transformers saves in shards
(save_pretrained(max_shard_size=...): model-0000K-of-0000N.safetensors and
model.safetensors.index.json) loads in tfcore exactly as the same model saved
in one file: `tfcore predict` gives the same logits, bit for bit, and both
match transformers' own within 1e-5. Index files transformers would never
write are refused with one line and exit 5: a missing shard, a tensor in two
shards, a shard path leading out of the folder.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForSequenceClassification

import tally
from tally import check

top_builddir = os.environ["top_builddir"]
tfcore = os.path.join(top_builddir, "core", "tfcore")
tmp = tempfile.mkdtemp(prefix="tfcore-sharded-")
try:
    torch.manual_seed(7)
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, num_labels=3)
    model = BertForSequenceClassification(config).eval()
    single, sharded = os.path.join(tmp, "single"), os.path.join(tmp, "sharded")
    model.save_pretrained(single, safe_serialization=True)
    model.save_pretrained(sharded, safe_serialization=True, max_shard_size="40KB")
    index_path = os.path.join(sharded, "model.safetensors.index.json")
    index = json.load(open(index_path))
    shards = sorted(set(index["weight_map"].values()))
    check(not os.path.exists(os.path.join(sharded, "model.safetensors")) and len(shards) >= 3,
          "transformers wrote %d shards" % len(shards))

    rows = [[2, 17, 33, 95, 3], [2, 8, 3, 44, 51, 60, 119, 3]]
    inp = os.path.join(tmp, "in.jsonl")
    with open(inp, "w") as f:
        for r in rows:
            f.write(json.dumps({"input_ids": r, "token_type_ids": [0] * len(r)}) + "\n")
    cfg = os.path.join(tmp, "m.cfg")
    with open(cfg, "w") as f:
        f.write('model = { plugin = "bert"; task = "classification"; };\n')

    def predict(folder):
        out = os.path.join(tmp, os.path.basename(folder) + ".out")
        r = subprocess.run([tfcore, "predict", "-c", cfg, "--model", folder, "--input", inp, "--output", out],
                           capture_output=True, text=True)
        return r, (open(out).read() if r.returncode == 0 else None)

    r1, out1 = predict(single)
    r2, out2 = predict(sharded)
    check(r1.returncode == 0 and r2.returncode == 0, "predict: %s %s" % (r1.stderr.strip(), r2.stderr.strip()))
    check(out1 is not None and out1 == out2, "sharded and single-file logits differ")
    if out2:
        with torch.no_grad():
            for line, r in zip(out2.splitlines(), rows):
                want = model(torch.tensor([r])).logits[0].tolist()
                got = json.loads(line)["logits"]
                check(all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(got, want)),
                      "logits %s vs transformers %s" % (got, want))

    def refused(folder, *frags):
        r, _ = predict(folder)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 5 and len(lines) == 1 and all(f in lines[0] for f in frags)
        check(ok, "%s: exit %d, %r" % (os.path.basename(folder), r.returncode, r.stderr))

    def variant(name, edit):
        d = os.path.join(tmp, name)
        shutil.copytree(sharded, d)
        edit(d)
        return d

    # a missing shard
    refused(variant("missing", lambda d: os.remove(os.path.join(d, shards[-1]))),
            "model.safetensors.index.json: shard '%s'" % shards[-1], "No such file or directory")

    # a tensor in two shards: the last shard also gets a tensor the index puts in the first
    def two_shards(d):
        first = load_file(os.path.join(d, shards[0]))
        name = sorted(first)[0]
        last = load_file(os.path.join(d, shards[-1]))
        last[name] = first[name]
        save_file(last, os.path.join(d, shards[-1]), metadata={"format": "pt"})
        two_shards.name = name
    d = variant("twice", two_shards)
    refused(d, "tensor '%s' is in shard '%s', but the weight_map puts it in '%s'" % (two_shards.name, shards[-1],
                                                                                   shards[0]))

    # a shard path leading out of the folder (the file it names exists there)
    def escape(d):
        idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
        name = sorted(idx["weight_map"])[0]
        shutil.copy(os.path.join(d, idx["weight_map"][name]), os.path.join(tmp, "outside.safetensors"))
        idx["weight_map"][name] = "../outside.safetensors"
        json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    refused(variant("escape", escape), "= '../outside.safetensors': a shard must be a file name in the model's folder")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("sharded_safetensors_vs_hf: %d passed, %d failed" % (tally.passed, tally.failed))
sys.exit(1 if tally.failed else 0)
