"""torch_varlen_train_step — PyTorch's side of bench/unpad_vs_torch.sh: training
steps (forward, backward, AdamW, fp32), or with --eval evaluation batches, of
BertForSequenceClassification on rows
of ragged length, the best a Trainer user can do about padding: the Trainer's
own LengthGroupedSampler (group_by_length = True) and dynamic padding (each
batch padded to its longest row, as DataCollatorWithPadding does), with the
attention mask. Rows: random ids in [100, 30000), lengths uniform in
[MIN_LEN, SEQ] (data-synthetic's min_length). The sampler orders 4096 rows
(its megabatches of 50 batches sorted by length, as in a Trainer epoch of that
size); WARMUP steps on other rows, then STEPS batches drawn at random from that
epoch's batches, timed end to end, so their mean is the epoch's. Prints one
JSON line: samples_per_second (the timed samples / their seconds),
cpu_seconds_per_sample (process CPU time, all threads), peak_rss_mb, versions.

--eval: batches as Trainer.evaluate runs them (model.eval(), torch.no_grad(),
the loss from the labels, the logits to the host), in the order of the
Trainer's evaluation sampler with group_by_length (LengthGroupedSampler over
the eval rows, transformers 5) and dynamically padded; --eval --pad-to-max
pads every row to SEQ instead and keeps the rows in order (padding =
"max_length", the course's tokenizer setting, with no length grouping).

  torch_varlen_train_step.py LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ MIN_LEN STEPS WARMUP [--eval [--pad-to-max]]
"""
import json
import os
import resource
import sys
import time

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification
from transformers.trainer_pt_utils import LengthGroupedSampler


def padded(rows, pad=0, width=None):
    """Dynamic padding: [B, longest] ids and mask (or [B, width])."""
    width = width or max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask


def main():
    L, H, A, I, B, S, lo, steps, warmup = map(int, sys.argv[1:10])
    evaluate = "--eval" in sys.argv[10:]
    to_max = "--pad-to-max" in sys.argv[10:]
    # THREADS (bench/unpad_vs_torch.sh): the same thread count as tfcore's run
    torch.set_num_threads(int(os.environ.get("THREADS") or 0) or os.cpu_count())
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=I,
                     vocab_size=30522, max_position_embeddings=512)
    model = BertForSequenceClassification(cfg)
    model.train(not evaluate)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    g = torch.Generator().manual_seed(1)

    def rows(n):
        lens = torch.randint(lo, S + 1, (n,), generator=g).tolist()
        return [torch.randint(100, 30000, (k,), generator=g) for k in lens]

    def step(batch, labels):
        ids, mask = padded(batch, width=S if to_max else None)
        if evaluate:
            with torch.no_grad():
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
                out.loss.item(), out.logits.cpu().numpy()
            return
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step(rows(B), torch.randint(0, 2, (B,), generator=g))
    n = 4096 // B * B
    data = rows(n)
    labels = torch.randint(0, 2, (n,), generator=g)
    if evaluate and to_max:
        order = list(range(n))
    else:
        order = list(LengthGroupedSampler(B, lengths=[len(r) for r in data], generator=g))
    picks = torch.randperm(n // B, generator=g)[:steps].tolist()
    t0, c0 = time.perf_counter(), time.process_time()
    for s in picks:
        idx = order[s * B:(s + 1) * B]
        step([data[i] for i in idx], labels[idx])
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"samples_per_second": B * steps / secs, "timed_seconds": secs,
                      "cpu_seconds_per_sample": cpu / (B * steps),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
