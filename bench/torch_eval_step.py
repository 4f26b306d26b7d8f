"""torch_eval_step — PyTorch's side of bench/eval_vs_torch.sh: evaluation
batches of BertForSequenceClassification as Trainer.evaluate runs them
(model.eval(), torch.no_grad(), forward with labels for the loss), random ids
in [100, 30000), after warm-up, timed one by one. Prints one JSON line:
samples_per_second (median batch), peak_rss_mb, torch and transformers
versions, the attention implementation.

  torch_eval_step.py LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ STEPS WARMUP [PRECISION]

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
import transformers
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
    model.eval()
    ids = torch.randint(100, 30000, (B, S))
    labels = torch.randint(0, 2, (B,))
    mask = torch.ones(B, S, dtype=torch.long)
    times = []
    with torch.no_grad():
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            with autocast:
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.logits.float().numpy()  # to the host, as the Trainer gathers them
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(json.dumps({"samples_per_second": B / med, "median_step_seconds": med,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "attention": getattr(model.config, "_attn_implementation", "eager"),
                      "threads": torch.get_num_threads(), "precision": precision}))


if __name__ == "__main__":
    main()
