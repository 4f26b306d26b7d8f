#!/usr/bin/env python3
"""cpu_ops_torch.py — PyTorch's side of bench/cpu_ops: one training step of
transformers' BertForSequenceClassification (forward, cross-entropy, backward,
AdamW) on the CPU, for bert-mini (L4 H256 A4 I1024) and MiniLM-L6 (L6 H384
A12 I1536), vocab 30522, batch 16 x seq 128, dropout 0.1, fp32.

    ~/.cache/tfcore/venv/bin/python bench/cpu_ops_torch.py [threads] [batch] [seq] [steps]

Prints ms per step and samples/s; compare with the "whole model" lines of
bench/cpu_ops run with the same thread count.
"""
import sys
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    print("torch %s, %d threads, batch %d x seq %d" % (torch.__version__, threads, batch, seq))
    for name, L, H, A, I in (("bert-mini", 4, 256, 4, 1024), ("MiniLM-L6", 6, 384, 12, 1536)):
        cfg = BertConfig(vocab_size=30522, hidden_size=H, num_hidden_layers=L,
                         num_attention_heads=A, intermediate_size=I, num_labels=2)
        cfg._attn_implementation = "eager"
        model = BertForSequenceClassification(cfg).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01)
        ids = torch.randint(1000, 30000, (batch, seq))
        mask = torch.ones(batch, seq, dtype=torch.long)
        for b in range(batch):
            mask[b, seq - 9 * (b % 3):] = 0
        labels = torch.randint(0, 2, (batch,))

        def step():
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()  # warm-up
        times = []
        c0 = time.process_time()
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        cpu = (time.process_time() - c0) / steps
        best = min(times)
        med = sorted(times)[len(times) // 2]
        print("  %-10s whole model step: best %8.1f ms (%6.1f samples/s), median %8.1f ms "
              "(%6.1f samples/s); %.1f CPU-ms per step" % (name, best * 1e3, batch / best,
                                                         med * 1e3, batch / med, cpu * 1e3))


if __name__ == "__main__":
    main()
