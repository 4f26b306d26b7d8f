#!/usr/bin/env python3
"""Write the tiny BERT repos tests/test_hub.sh serves from tests/hub_server.py:
ROOT/org/tiny-bert (config.json, model.safetensors, vocab.txt and the
tokenizer files, as save_pretrained writes them; a vocabulary large enough
for the synthetic dataset) and ROOT/org/bin-only (config.json and a
pytorch_model.bin, no safetensors)."""
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
BertForSequenceClassification(cfg).save_pretrained(out, safe_serialization=True)

bin_only = os.path.join(root, "org", "bin-only")
os.makedirs(bin_only, exist_ok=True)
cfg.save_pretrained(bin_only)
with open(os.path.join(bin_only, "pytorch_model.bin"), "wb") as f:
    f.write(b"not really a pickle, only its name matters here")
