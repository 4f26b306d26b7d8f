"""torch_train_step — PyTorch's side of bench/cpu_vs_torch: full training steps
(forward, backward, AdamW) of BertForSequenceClassification, random ids in
[100, 30000) as in Hugging Face's efficiency guide, after warm-up, timed one by
one. Prints one JSON line: samples_per_second (median step), peak_rss_mb.

  torch_train_step.py LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ STEPS WARMUP [PRECISION]

PRECISION: fp32 (default), or bf16: the forward (and loss) under
torch.autocast("cpu", dtype=torch.bfloat16), as the Trainer's bf16=True runs it.
"""
import json
import os
import resource
import statistics
import sys
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    L, H, A, I, B, S, steps, warmup = map(int, sys.argv[1:9])
    precision = sys.argv[9] if len(sys.argv) > 9 else "fp32"
    if precision not in ("fp32", "bf16"):
        sys.exit("PRECISION must be fp32 or bf16, got %r" % precision)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=I,
                     vocab_size=30522, max_position_embeddings=512)
    model = BertForSequenceClassification(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    ids = torch.randint(100, 30000, (B, S))
    labels = torch.randint(0, 2, (B,))
    mask = torch.ones(B, S, dtype=torch.long)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        with autocast:
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"samples_per_second": B / med, "median_step_seconds": med,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "torch": torch.__version__, "threads": torch.get_num_threads(), "precision": precision}))


if __name__ == "__main__":
    main()
