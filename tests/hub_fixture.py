#!/usr/bin/env python3
"""Write the tiny BERT repos tests/test_hub.sh serves from tests/hub_server.py:
ROOT/org/tiny-bert (config.json, model.safetensors, vocab.txt and the
tokenizer files, as save_pretrained writes them; a vocabulary large enough
for the synthetic dataset), ROOT/org/sharded (the same model saved in
shards: model.safetensors.index.json and model-0000N-of-0000M.safetensors),
ROOT/org/bin-only (config.json and a pytorch_model.bin, no safetensors), and
two repos whose index names a shard outside the snapshot (ROOT/org/bad-index-dots:
'../evil.safetensors'; ROOT/org/bad-index-slash: 'sub/evil.safetensors', which
the server does hold)."""
import json
import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

root = sys.argv[1]
out = os.path.join(root, "org", "tiny-bert")
os.makedirs(out, exist_ok=True)
words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
words += "the a movie was good bad great awful film i it and not very".split()
words += ["##s", "##ed", "##ing"] + ["w%d" % i for i in range(2100)]
with open(os.path.join(out, "vocab.txt"), "w") as f:
    f.write("\n".join(words) + "\n")
BertTokenizerFast(vocab_file=os.path.join(out, "vocab.txt"), do_lower_case=True).save_pretrained(out)
torch.manual_seed(0)
cfg = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=37, max_position_embeddings=64, num_labels=2)
model = BertForSequenceClassification(cfg)
model.save_pretrained(out, safe_serialization=True)

sharded = os.path.join(root, "org", "sharded")
os.makedirs(sharded, exist_ok=True)
model.save_pretrained(sharded, safe_serialization=True, max_shard_size="150KB")
BertTokenizerFast(vocab_file=os.path.join(out, "vocab.txt"), do_lower_case=True).save_pretrained(sharded)
assert not os.path.exists(os.path.join(sharded, "model.safetensors"))
assert len([n for n in os.listdir(sharded) if n.startswith("model-000")]) >= 2

for name, shard in (("bad-index-dots", "../evil.safetensors"), ("bad-index-slash", "sub/evil.safetensors")):
    bad = os.path.join(root, "org", name)
    os.makedirs(os.path.join(bad, "sub"), exist_ok=True)
    cfg.save_pretrained(bad)
    with open(os.path.join(bad, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 8}, "weight_map": {"bert.pooler.dense.bias": shard}}, f)
    with open(os.path.join(bad, "sub", "evil.safetensors"), "wb") as f:
        f.write(b"\0" * 8)

bin_only = os.path.join(root, "org", "bin-only")
os.makedirs(bin_only, exist_ok=True)
cfg.save_pretrained(bin_only)
with open(os.path.join(bin_only, "pytorch_model.bin"), "wb") as f:
    f.write(b"not really a pickle, only its name matters here")
