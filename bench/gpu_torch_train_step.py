"""gpu_torch_train_step — PyTorch's side of bench/gpu_vs_torch.sh: full training
steps of transformers' BertForSequenceClassification on one CUDA device, as a
Hugging Face Trainer run would do them (forward, backward, gradient clipping
to max_grad_norm 1.0, AdamW), random ids in [100, 30000) as in Hugging Face's
efficiency guide, after warm-up, each step timed between two
torch.cuda.synchronize() calls.

Precision, as Trainer sets it up:
  fp32  torch.backends.cuda.matmul.allow_tf32 = False (strict fp32 GEMMs)
  tf32  allow_tf32 = True (Trainer's tf32=True), fp32 everything else
  fp16  torch.autocast("cuda", torch.float16) + GradScaler (fp32 master weights)
  bf16  torch.autocast("cuda", torch.bfloat16), no scaler
Attention is SDPA (attn_implementation="sdpa"); AdamW is fused when this
torch has it (fused=True), else foreach.

Prints one JSON line: samples_per_second (median step), median_step_seconds,
peak_memory_mb (torch.cuda.max_memory_allocated over the whole run, as tfcore's
peak_backend_memory_mb), skipped_steps (fp16), and
what was actually used (attention, fused AdamW, device, versions).

  gpu_torch_train_step.py LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ STEPS WARMUP PRECISION
  gpu_torch_train_step.py --dry LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ PRECISION

--dry needs no GPU: it builds the model on the CPU, prints its shape and
parameter count and the set-up the real run would use, and runs one step of
the same loop on a 2-layer, seq-16 copy on the CPU (fp32; bf16 under CPU
autocast), so CI can check this script without a device.
"""
import inspect
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def make_config(L, H, A, I, attn):
    return BertConfig(hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=I,
                      vocab_size=30522, max_position_embeddings=512, attn_implementation=attn)


def make_model(cfg_args, device):
    """The model with SDPA attention; falls back to eager only where this
    torch has no SDPA (torch < 2.1.1), and says so."""
    try:
        model = BertForSequenceClassification(make_config(*cfg_args, "sdpa"))
    except (ValueError, ImportError) as e:
        if device == "cuda":
            raise
        model = BertForSequenceClassification(make_config(*cfg_args, "eager"))
        model._bench_note = "sdpa unavailable here (%s): eager attention" % str(e).splitlines()[0][:80]
    return model.to(device)


def make_optimizer(model, device):
    params = inspect.signature(torch.optim.AdamW).parameters
    kw = {}
    if device == "cuda" and "fused" in params:
        kw["fused"] = True
    elif "foreach" in params:
        kw["foreach"] = True
    return torch.optim.AdamW(model.parameters(), lr=5e-5, **kw), kw


def make_scaler(precision, device):
    if precision != "fp16":
        return None
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, enabled=device == "cuda")
    return torch.cuda.amp.GradScaler(enabled=device == "cuda")


def set_matmul_precision(precision, device):
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"


def autocast_dtype(precision):
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)


def train_step(model, opt, scaler, batch, precision, device):
    """One optimizer step; returns whether the scaler skipped it."""
    scaling = scaler is not None and scaler.is_enabled()
    before = scaler.get_scale() if scaling else None  # read while the device is idle
    dt = autocast_dtype(precision)
    if dt is not None:
        with torch.autocast(device_type=device, dtype=dt):
            loss = model(**batch).loss
    else:
        loss = model(**batch).loss
    if scaling:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        skipped = scaler.get_scale() < before  # GradScaler backs off exactly when it skipped
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        skipped = False
    opt.zero_grad(set_to_none=True)
    return skipped


def random_batch(B, S, device):
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(100, 30000, (B, S), generator=g).to(device),
            "attention_mask": torch.ones(B, S, dtype=torch.long, device=device),
            "labels": torch.randint(0, 2, (B,), generator=g).to(device)}


def dry(argv):
    L, H, A, I, B, S = map(int, argv[:6])
    precision = argv[6]
    if precision not in PRECISIONS:
        sys.exit("gpu_torch_train_step.py: precision must be one of %s, got %r" % (", ".join(PRECISIONS), precision))
    torch.manual_seed(0)
    model = make_model((L, H, A, I), "cpu")
    n = sum(p.numel() for p in model.parameters())
    _, opt_kw = make_optimizer(model, "cuda")
    print(json.dumps({"dry": True, "precision": precision, "layers": L, "hidden": H, "heads": A,
                      "intermediate": I, "batch": B, "seq": S, "parameters": n,
                      "attention": model.config._attn_implementation,
                      "note": getattr(model, "_bench_note", ""),
                      "adamw_on_cuda": opt_kw or {"fused": False, "foreach": False},
                      "autocast": str(autocast_dtype(precision)), "grad_scaler": precision == "fp16",
                      "allow_tf32": precision == "tf32",
                      "torch": torch.__version__, "transformers": transformers.__version__}))
    # the same loop, one step, on a small copy on the CPU
    small = make_model((2, H, A, I), "cpu")
    opt, _ = make_optimizer(small, "cpu")
    cpu_precision = "bf16" if precision == "bf16" else "fp32"
    before = [p.detach().clone() for p in small.parameters()]
    skipped = train_step(small, opt, make_scaler(precision, "cpu"), random_batch(2, 16, "cpu"), cpu_precision, "cpu")
    moved = sum(int(not torch.equal(a, p.detach())) for a, p in zip(before, small.parameters()))
    if skipped or moved == 0:
        sys.exit("gpu_torch_train_step.py --dry: the CPU step did not update the model")
    print(json.dumps({"dry_step": "ok", "cpu_precision": cpu_precision, "tensors_updated": moved,
                      "tensors": len(before)}))


def main(argv):
    if argv and argv[0] == "--dry":
        return dry(argv[1:])
    if len(argv) != 9 or argv[8] not in PRECISIONS:
        sys.exit("usage: gpu_torch_train_step.py LAYERS HIDDEN HEADS INTERMEDIATE BATCH SEQ STEPS WARMUP "
                 "fp32|tf32|fp16|bf16  (or --dry ...)")
    L, H, A, I, B, S, steps, warmup = map(int, argv[:8])
    precision = argv[8]
    if not torch.cuda.is_available():
        sys.exit("gpu_torch_train_step.py: no CUDA device")
    device = "cuda"
    torch.manual_seed(0)
    set_matmul_precision(precision, device)
    model = make_model((L, H, A, I), device)
    model.train()
    opt, opt_kw = make_optimizer(model, device)
    scaler = make_scaler(precision, device)
    batch = random_batch(B, S, device)
    times, skipped = [], 0
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s = train_step(model, opt, scaler, batch, precision, device)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            skipped += int(s)
    med = statistics.median(times)
    print(json.dumps({"samples_per_second": B / med, "median_step_seconds": med,
                      "peak_memory_mb": torch.cuda.max_memory_allocated() / 1048576.0,
                      "skipped_steps": skipped, "precision": precision,
                      "attention": model.config._attn_implementation, "adamw": opt_kw,
                      "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main(sys.argv[1:])
